"""The active tests against real components on this machine: Debian's libcuda1 535 with no GPU, and the
real CPU-only torch 2.13.0 wheel (tests/test_real_host.py builds the venv once under .cache/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_real_host import LIBCUDA

GPU_DOCTOR = Path(sys.executable).with_name("gpu-doctor")

real_driver = pytest.mark.skipif(not LIBCUDA.exists(),
                                 reason="Debian's libcuda1 is not installed (.ci/run installs it)")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_") and k != "LD_LIBRARY_PATH"}
    result = subprocess.run([str(GPU_DOCTOR), *args], capture_output=True, text=True, env=env, timeout=300,
                            check=False)
    assert "Traceback" not in result.stderr, result.stderr
    return result


@real_driver
@pytest.mark.real_driver
@pytest.mark.parametrize("command", ["smoke", "oom"])
def test_real_535_without_a_gpu_reports_no_device_and_exits_1(command: str) -> None:
    text = run(command, "-q")
    assert text.returncode == 1
    assert ("  ✗ cuInit failed with CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"
            in text.stdout.splitlines())
    doc = json.loads(run(command, "--json", "-q").stdout)
    assert [(f["code"], f["severity"]) for f in doc["findings"]] == [("gpu.no_cuda_device", "fail")]
    assert doc["active"]["results"]["global"]["cuda_driver_version"] == 12020  # libcuda 535 = CUDA 12.2
    assert doc["facts"]["driver"]["userspace"] == "535.309.01"


@pytest.mark.slow
def test_cpu_only_torch_fails_framework_smoke_as_cpu_only_build(torch_venv: Path) -> None:
    result = run("smoke", "--framework", "torch", "--python", str(torch_venv), "--json", "-q")
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    (f,) = doc["findings"]
    assert (f["code"], f["severity"]) == ("framework.cpu_only_build", "fail")
    assert f["title"].startswith("torch 2.13.0+cpu in ") and f["title"].endswith(
        ": AssertionError: Torch not compiled with CUDA enabled")
    assert f["evidence"][0] == {"fact": "framework.error",
                                "value": "AssertionError: Torch not compiled with CUDA enabled",
                                "source": "torch: a tensor on cuda:0"}
    (run_,) = doc["active"]["results"]["frameworks"]
    assert (run_["version"], run_["cuda"], run_["is_available"]) == ("2.13.0+cpu", None, False)


@pytest.mark.slow
def test_frameworks_that_are_not_installed_are_left_out_of_all(torch_venv: Path) -> None:
    result = run("smoke", "--framework", "all", "--python", str(torch_venv), "--json", "-q")
    doc = json.loads(result.stdout)
    assert [r["framework"] for r in doc["active"]["results"]["frameworks"]] == ["torch"]
    named = run("smoke", "--framework", "jax", "--python", str(torch_venv), "-q")
    assert named.returncode == 0 and "! jax is not installed in " in named.stdout
