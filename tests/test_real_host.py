"""Real components on this machine: Debian's NVIDIA 535 user space with no kernel module, the CUDA
13.0 toolkit in /usr/local/cuda-13.0, a real torch 2.13.0 CPU wheel and a real nvidia-cudnn-cu12 wheel.

.ci/run installs the Debian packages; the Python environment is built once under .cache/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LIBCUDA = Path("/usr/lib/x86_64-linux-gnu/libcuda.so.1")

real_driver = pytest.mark.skipif(not LIBCUDA.exists(),
                                 reason="Debian's libcuda1 is not installed (.ci/run installs it)")


def gpu_doctor(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the installed console script, as a user would."""
    exe = Path(sys.executable).with_name("gpu-doctor")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout,
                          env=env or dict(os.environ), check=False)


@pytest.fixture(scope="session")
def live_report() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "CUDA_HOME")}
    result = gpu_doctor("check", "--json", env=env)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


@real_driver
@pytest.mark.real_driver
def test_real_535_userspace_is_read_from_the_library(live_report: dict) -> None:
    driver = live_report["facts"]["driver"]
    assert driver["userspace"] == "535.309.01"
    assert live_report["facts"]["sources"]["driver.userspace"].endswith("libcuda.so.1")


@real_driver
@pytest.mark.real_driver
def test_real_libcuda_answers_driver_api_12_2_and_no_device(live_report: dict) -> None:
    driver = live_report["facts"]["driver"]
    assert driver["cuda_driver_api"] == "12.2"
    assert driver["cuda_init_error"].startswith("CUDA_ERROR_NO_DEVICE (100)")
    assert driver["nvml_error"] == "Driver Not Loaded"


@real_driver
@pytest.mark.real_driver
def test_real_nvml_driver_not_loaded_is_the_same_answer_without_pynvml() -> None:
    """NVML's "Driver Not Loaded" is read straight from the library, before pynvml (most of the child's work) is
    imported, and reads exactly as pynvml words it; pynvml's own answer on this machine is the same."""
    from doctor.probes.base import child_script

    probe = child_script("native_child.py") + (
        "\nimport json\nout = {}\nprobe_nvml(out)\nprint(json.dumps([out, 'pynvml' in sys.modules]))\n"
        "import pynvml\ntry:\n    pynvml.nvmlInit()\n"
        "except pynvml.NVMLError as exc:\n    print(json.dumps(str(exc)))\n")
    result = subprocess.run([sys.executable, "-c", probe.replace('if __name__ == "__main__":', "if False:")],
                            capture_output=True, text=True, timeout=60, check=True)
    fast, by_pynvml = result.stdout.splitlines()[-2:]
    assert json.loads(fast) == [{"nvml_error": "Driver Not Loaded"}, False]
    assert json.loads(by_pynvml) == "Driver Not Loaded"


@real_driver
@pytest.mark.real_driver
def test_real_host_without_module_records_nvidia_smi_once(live_report: dict) -> None:
    """No kernel module: nvidia-smi now starts beside NVML instead of after it; its failure is recorded once, as
    before, with what it printed."""
    smi = [e for e in live_report["facts"]["errors"] if e["probe"] == "nvidia-smi"]
    assert len(smi) == 1 and "exit 9" in smi[0]["reason"]


@real_driver
@pytest.mark.real_driver
def test_real_host_without_module_fails_driver_not_loaded(live_report: dict) -> None:
    mine = [f for f in live_report["findings"] if f["code"] == "driver.not_loaded"]
    assert [f["severity"] for f in mine] == ["fail"]
    assert "535.309.01" in mine[0]["title"]
    assert live_report["status"] == "fail"


@real_driver
@pytest.mark.real_driver
def test_real_host_check_exits_1_and_prints_the_cause() -> None:
    result = gpu_doctor("check")
    assert result.returncode == 1
    assert "✗ NVIDIA driver 535.309.01 is installed but its kernel module is not loaded" in result.stdout
    assert "NOT READY" in result.stdout.splitlines()[-1]


@pytest.mark.skipif(not Path("/usr/local/cuda-13.0/bin/nvcc").exists(), reason="no CUDA 13.0 toolkit on this machine")
def test_real_cuda_13_toolkit_is_found_with_its_version(live_report: dict) -> None:
    toolkits = {t["root"]: t for t in live_report["facts"]["toolkits"]}
    assert toolkits["/usr/local/cuda-13.0"]["version"] == "13.0"
    assert toolkits["/usr/local/cuda-13.0"]["nvcc_version"] == "13.0.88"


# --- a real Python environment ---------------------------------------------------------------


@pytest.mark.slow
def test_cpu_torch_in_a_venv_is_reported_as_cpu_only(torch_venv: Path) -> None:
    result = gpu_doctor("check", "--json", "--python", str(torch_venv / "bin" / "python"))
    report = json.loads(result.stdout)
    (env,) = report["facts"]["python_envs"]
    torch = next(p for p in env["packages"] if p["name"] == "torch")
    assert torch["version"] == "2.13.0+cpu"
    assert torch["cpu_only"] is True and torch["cuda"] is None
    cpu = [f for f in report["findings"] if f["code"] == "framework.cpu_only_build"]
    assert cpu and "torch 2.13.0+cpu" in cpu[0]["title"] and "CPU-only build" in cpu[0]["title"]


@pytest.mark.slow
def test_pip_cudnn_wheel_is_found_with_its_exact_version(torch_venv: Path) -> None:
    result = gpu_doctor("check", "--json", "--python", str(torch_venv))
    report = json.loads(result.stdout)
    pip = [c for c in report["facts"]["cudnn"] if c["source"] == "pip"]
    assert [c["version"] for c in pip] == ["9.28.0.42"]


@pytest.mark.slow
def test_virtual_env_is_the_default_target(torch_venv: Path) -> None:
    env = {**os.environ, "VIRTUAL_ENV": str(torch_venv)}
    report = json.loads(gpu_doctor("check", "--json", env=env).stdout)
    (pyenv,) = report["facts"]["python_envs"]
    assert pyenv["origin"] == "VIRTUAL_ENV" and pyenv["executable"].startswith(str(torch_venv))


@pytest.mark.slow
def test_deep_imports_torch_and_records_what_it_says(torch_venv: Path) -> None:
    result = gpu_doctor("snapshot", "--deep", "--python", str(torch_venv / "bin" / "python"))
    facts = json.loads(result.stdout)
    torch = next(p for p in facts["python_envs"][0]["packages"] if p["name"] == "torch")
    assert torch["deep"]["is_available"] is False
    assert torch["deep"]["device_count"] == 0
    assert torch["deep"]["cuda"] is None


def test_check_does_not_import_frameworks_textual_or_requests() -> None:
    code = (
        "import sys, io, contextlib\n"
        "from doctor.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['check', '--json'])\n"
        "bad = [m for m in ('textual', 'requests', 'torch', 'tensorflow', 'jax', 'rich') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == ""


def test_check_imports_none_of_the_start_up_costs_it_does_without() -> None:
    """`check` on this machine leaves out what it was measured to pay for nothing (issue 23, benchmarks/peers.py):
    concurrent.futures (logging, queue), importlib.resources (zipfile, tempfile), hashlib (OpenSSL), platform,
    shutil (zlib, bz2, lzma, through argparse's formatter), the active-test runners and the TUI."""
    code = (
        "import sys, io, contextlib\n"
        "from doctor.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['check', '--json'])\n"
        "heavy = ('concurrent.futures', 'importlib.resources', 'zipfile', 'tempfile', 'hashlib', '_hashlib',\n"
        "         'platform', 'shutil', 'lzma', 'bz2', 'doctor.active.runner', 'doctor.tui', 'pynvml')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                            env=env)
    assert result.stdout.strip() == ""


def test_check_imports_nothing_of_its_own_after_the_probes_answer() -> None:
    """What `check` needs to diagnose, plan and render is imported by pipeline.warm_up while the probes' children
    run: a module first imported after them would add its import time to every `check` again."""
    modules = "print(sorted(m for m in sys.modules if m.startswith('doctor')))\n"
    check = ("import sys, io, contextlib\nfrom doctor.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n    main(['check'])\n" + modules)
    # the probes collect() imports itself once the NVML child has started, before any child answers
    probes = "doctor.probes, doctor.probes.cuda, doctor.probes.driver, doctor.probes.hostinfo, doctor.probes.pyenvs"
    warm = (f"import sys\nimport doctor.cli, doctor.commands.check, {probes}\nfrom doctor import pipeline\n"
            "pipeline.warm_up()\n" + modules)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    seen = [set(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                                          check=True, env=env).stdout.replace("'", '"'))) for code in (check, warm)]
    assert seen[0] - seen[1] == set()
