"""The native probe with GPUs present: the real pynvml and ctypes code against fake driver libraries.

tests/fakes/fake_nvml.c and fake_cuda.c are compiled into ``libnvidia-ml.so.1`` and ``libcuda.so.1``
in a temporary directory; with ``LD_LIBRARY_PATH`` pointing there, the dynamic loader picks them
over Debian's real (GPU-less) 535 libraries. Everything else is real: the ``gpu-doctor`` console
script, its child process, pynvml's ctypes signatures and struct layouts. Each fake answers what
its ``FAKE_*`` environment variables say (documented at the top of each C file).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FAKES = Path(__file__).parent / "fakes"
GPU_DOCTOR = Path(sys.executable).with_name("gpu-doctor")

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
H100_UUID = "GPU-6f3b2a1c-0d4e-4f5a-8b9c-1a2b3c4d5e6f"
A100_UUID = "GPU-9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"


@pytest.fixture(scope="session")
def fake_libs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two fake driver libraries, compiled once per session."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (cc) on PATH to build the fake libnvidia-ml.so.1 and libcuda.so.1")
    out = tmp_path_factory.mktemp("fake-driver")
    for source, lib in (("fake_nvml.c", "libnvidia-ml.so.1"), ("fake_cuda.c", "libcuda.so.1")):
        built = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out / lib), str(FAKES / source)],
                               capture_output=True, text=True, check=False)
        assert built.returncode == 0, f"{source} does not compile:\n{built.stderr}"
    return out


@pytest.fixture(scope="session")
def trainer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen]:
    """A live process whose name (/proc/PID/comm) is "train_llm": the one the fake GPU says holds memory."""
    link = tmp_path_factory.mktemp("bin") / "train_llm"
    link.symlink_to(shutil.which("sleep") or "/bin/sleep")  # comm is the name exec'd, not the target's
    proc = subprocess.Popen([str(link), "600"])
    yield proc
    proc.kill()
    proc.wait()


def gpu_doctor(libs: Path, args: list[str], knobs: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the installed console script with the fake libraries first on the loader's path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_")}
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(libs), os.environ.get("LD_LIBRARY_PATH")]))
    env.update(knobs)
    result = subprocess.run([str(GPU_DOCTOR), *args], capture_output=True, text=True, env=env, timeout=timeout,
                            check=False)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def snapshot(libs: Path, knobs: dict[str, str]) -> dict[str, Any]:
    result = gpu_doctor(libs, ["snapshot"], knobs)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def check(libs: Path, knobs: dict[str, str], *args: str) -> dict[str, Any]:
    result = gpu_doctor(libs, ["check", "--json", *args], knobs)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def findings(report: dict[str, Any], code: str) -> list[tuple[str, str]]:
    return [(f["severity"], f["title"]) for f in report["findings"] if f["code"] == code]


def two_gpus(trainer_pid: int) -> dict[str, str]:
    """An H100 whose memory a training job holds, and an A100 on a degraded, hot, faulty link."""
    return {
        "FAKE_NVML_DRIVER": "550.54.15",
        "FAKE_CUDA_VERSION": "12040",
        "FAKE_CUDA_DEVICES": "9.0|8.0",
        "FAKE_NVML_GPUS": f"{H100}|{A100}",
        "FAKE_NVML_GPU0_UUID": H100_UUID,
        "FAKE_NVML_GPU0_BUS": "0x18",
        "FAKE_NVML_GPU0_PCI_DEVICE_ID": "0x233010DE",
        "FAKE_NVML_GPU0_CC": "9.0",
        "FAKE_NVML_GPU0_MEM_TOTAL_MIB": "81559",
        "FAKE_NVML_GPU0_MEM_USED_MIB": "73728",
        "FAKE_NVML_GPU0_PROCS": f"{trainer_pid}:73216",
        "FAKE_NVML_GPU1_UUID": A100_UUID,
        "FAKE_NVML_GPU1_BUS": "0x3B",
        "FAKE_NVML_GPU1_PCI_DEVICE_ID": "0x20B210DE",
        "FAKE_NVML_GPU1_CC": "8.0",
        "FAKE_NVML_GPU1_MEM_TOTAL_MIB": "81920",
        "FAKE_NVML_GPU1_MEM_USED_MIB": "1024",
        "FAKE_NVML_GPU1_PERSISTENCE": "0",
        "FAKE_NVML_GPU1_ECC": "2",
        "FAKE_NVML_GPU1_REMAP_PENDING": "1",
        "FAKE_NVML_GPU1_TEMP": "91",
        "FAKE_NVML_GPU1_UTIL": "97",
        "FAKE_NVML_GPU1_POWER_MW": "412000",
        "FAKE_NVML_GPU1_PCIE_GEN": "4",
        "FAKE_NVML_GPU1_PCIE_GEN_MAX": "4",
        "FAKE_NVML_GPU1_PCIE_WIDTH": "8",
        "FAKE_NVML_GPU1_PCIE_WIDTH_MAX": "16",
        "FAKE_NVML_GPU1_THROTTLE": "0x44",  # sw power cap | hw thermal slowdown
    }


@pytest.fixture(scope="session")
def two_gpu_facts(fake_libs: Path, trainer: subprocess.Popen) -> dict[str, Any]:
    return snapshot(fake_libs, two_gpus(trainer.pid))


@pytest.fixture(scope="session")
def two_gpu_report(fake_libs: Path, trainer: subprocess.Popen) -> dict[str, Any]:
    return check(fake_libs, two_gpus(trainer.pid))


# --- facts: what NVML and libcuda said -------------------------------------------------------


def test_userspace_driver_version_comes_from_nvml(two_gpu_facts: dict[str, Any]) -> None:
    assert two_gpu_facts["driver"]["userspace"] == "550.54.15"
    assert two_gpu_facts["sources"]["driver.userspace"] == "nvml:nvmlSystemGetDriverVersion"
    assert two_gpu_facts["driver"]["nvml_error"] is None


def test_cuda_driver_api_12_4_comes_from_libcuda_and_cuinit_succeeds(two_gpu_facts: dict[str, Any]) -> None:
    assert two_gpu_facts["driver"]["cuda_driver_api"] == "12.4"
    assert two_gpu_facts["sources"]["driver.cuda_driver_api"] == "libcuda:cuDriverGetVersion"
    assert two_gpu_facts["driver"]["cuda_init_error"] is None


def test_both_gpus_are_read_from_nvml_as_configured(two_gpu_facts: dict[str, Any], trainer: subprocess.Popen) -> None:
    assert two_gpu_facts["sources"]["gpus"] == "nvml"
    assert two_gpu_facts["gpus"] == [
        {
            "index": 0, "name": H100, "uuid": H100_UUID, "pci_bus_id": "00000000:18:00.0",
            "pci_device_id": "0x233010DE", "compute_capability": "9.0", "memory_total_mib": 81559,
            "memory_used_mib": 73728, "mig_mode": False, "persistence_mode": True, "ecc_uncorrected": 0,
            "retired_pages_pending": None, "remapped_rows_pending": False, "temperature_c": 34,
            "power_draw_w": 71.5, "utilization_pct": 0, "pcie_gen_current": 5, "pcie_gen_max": 5,
            "pcie_width_current": 16,
            "pcie_width_max": 16, "throttle_reasons": [],
            "processes": [{"pid": trainer.pid, "name": "train_llm", "used_mib": 73216}],
            "mig_devices": [], "source": "nvml",
        },
        {
            "index": 1, "name": A100, "uuid": A100_UUID, "pci_bus_id": "00000000:3B:00.0",
            "pci_device_id": "0x20B210DE", "compute_capability": "8.0", "memory_total_mib": 81920,
            "memory_used_mib": 1024, "mig_mode": False, "persistence_mode": False, "ecc_uncorrected": 2,
            "retired_pages_pending": None, "remapped_rows_pending": True, "temperature_c": 91,
            "power_draw_w": 412.0, "utilization_pct": 97, "pcie_gen_current": 4, "pcie_gen_max": 4,
            "pcie_width_current": 8,
            "pcie_width_max": 16, "throttle_reasons": ["sw_power_cap", "hw_thermal_slowdown"],
            "processes": [], "mig_devices": [], "source": "nvml",
        },
    ]


def test_function_the_library_lacks_is_unknown_not_false(two_gpu_facts: dict[str, Any]) -> None:
    # fake_nvml.c has no nvmlDeviceGetRetiredPagesPendingStatus: pynvml raises FunctionNotFound.
    assert [g["retired_pages_pending"] for g in two_gpu_facts["gpus"]] == [None, None]
    assert [g["remapped_rows_pending"] for g in two_gpu_facts["gpus"]] == [False, True]


def test_unsupported_queries_and_unaccounted_memory_are_unknown(fake_libs: Path, trainer: subprocess.Popen) -> None:
    facts = snapshot(fake_libs, {
        "FAKE_NVML_GPUS": "NVIDIA GeForce RTX 4090",
        "FAKE_NVML_GPU0_ECC": "err:3",  # NVML_ERROR_NOT_SUPPORTED: GeForce cards have no ECC
        "FAKE_NVML_GPU0_REMAP_PENDING": "err:3",
        "FAKE_NVML_GPU0_PROCS": f"{trainer.pid}:?",  # NVML_VALUE_NOT_AVAILABLE
        "FAKE_CUDA_DEVICES": "8.9",
    })
    (gpu,) = facts["gpus"]
    assert gpu["name"] == "NVIDIA GeForce RTX 4090"
    assert (gpu["ecc_uncorrected"], gpu["remapped_rows_pending"]) == (None, None)
    assert gpu["processes"] == [{"pid": trainer.pid, "name": "train_llm", "used_mib": None}]


def test_mig_instances_are_listed_with_their_memory(fake_libs: Path) -> None:
    facts = snapshot(fake_libs, {
        "FAKE_NVML_GPUS": A100,
        "FAKE_NVML_GPU0_MIG": "3g.40gb:40192|2g.20gb:19968",
        "FAKE_CUDA_DEVICES": "8.0",
    })
    (gpu,) = facts["gpus"]
    assert gpu["mig_mode"] is True
    assert [(m["index"], m["name"], m["memory_total_mib"]) for m in gpu["mig_devices"]] == [
        (0, f"{A100} MIG 3g.40gb", 40192),
        (1, f"{A100} MIG 2g.20gb", 19968),
    ]
    assert all(m["uuid"].startswith("MIG-") for m in gpu["mig_devices"])


# --- findings: what the user is told ----------------------------------------------------------


def test_gpu_at_x8_of_x16_warns_pcie_degraded(two_gpu_report: dict[str, Any]) -> None:
    assert findings(two_gpu_report, "gpu.pcie_degraded") == [
        ("ok", f"GPU 0 ({H100}): PCIe x16, gen 5 (max 5)"),
        ("warn", f"GPU 1 ({A100}): PCIe link runs at x8 of x16"),
    ]


def test_memory_held_by_a_named_process_warns_naming_it(two_gpu_report: dict[str, Any]) -> None:
    pid = two_gpu_report["facts"]["gpus"][0]["processes"][0]["pid"]
    assert findings(two_gpu_report, "gpu.memory_in_use") == [
        ("warn", f"GPU 0 ({H100}): 73728 of 81559 MiB (90%) already in use by train_llm (pid {pid}, 73216 MiB)"),
        ("ok", f"GPU 1 ({A100}): 80896 of 81920 MiB free"),
    ]


def test_uncorrectable_ecc_and_pending_remap_fail_hardware_fault(two_gpu_report: dict[str, Any]) -> None:
    assert findings(two_gpu_report, "gpu.hardware_fault") == [
        ("ok", f"GPU 0 ({H100}): no uncorrectable ECC errors or pending retirements"),
        ("fail", f"GPU 1 ({A100}): 2 uncorrectable ECC error(s), a remapped memory row waiting for a GPU reset"),
    ]


def test_hw_thermal_slowdown_warns_throttling(two_gpu_report: dict[str, Any]) -> None:
    assert findings(two_gpu_report, "gpu.throttling") == [
        ("ok", f"GPU 0 ({H100}): not throttled"),
        ("warn", f"GPU 1 ({A100}) is throttled: hardware thermal slowdown (the GPU is too hot)"),
    ]


def test_nvml_version_mismatch_fails_module_userspace_mismatch(fake_libs: Path) -> None:
    report = check(fake_libs, {"FAKE_NVML_INIT_ERROR": "18", "FAKE_CUDA_INIT": "803"})
    assert "mismatch" in report["facts"]["driver"]["nvml_error"].lower()
    assert [sev for sev, _title in findings(report, "driver.module_userspace_mismatch")] == ["fail"]
    assert report["status"] == "fail"


def test_cuinit_803_names_system_driver_mismatch(fake_libs: Path) -> None:
    facts = snapshot(fake_libs, {"FAKE_NVML_GPUS": H100, "FAKE_CUDA_DEVICES": "9.0", "FAKE_CUDA_INIT": "803"})
    assert facts["driver"]["cuda_init_error"] == (
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803): system has unsupported display driver / cuda driver combination")
    assert facts["sources"]["driver.cuda_init_error"] == "libcuda:cuInit"
    assert facts["driver"]["cuda_driver_api"] == "12.4"


@pytest.mark.slow  # a few seconds each: with the slow tests (CI runs both) to keep the fast set in budget
def test_nvml_hang_is_cut_off_by_the_timeout(fake_libs: Path) -> None:
    start = time.monotonic()
    result = gpu_doctor(fake_libs, ["check", "--json", "--timeout", "1"], {"FAKE_NVML_HANG": "1"}, timeout=60)
    elapsed = time.monotonic() - start
    assert result.returncode in (0, 1), result.stderr
    assert elapsed < 50, f"a hung nvmlInit held the check for {elapsed:.1f}s"  # it hangs forever otherwise
    errors = json.loads(result.stdout)["facts"]["errors"]
    assert any(e["probe"] == "native" and "timed out after 1s" in e["reason"] for e in errors), errors


# --- bugs: correct behaviour, not yet what doctor/ does --------------------------------------


def test_one_lost_gpu_does_not_hide_the_others(fake_libs: Path) -> None:
    facts = snapshot(fake_libs, {"FAKE_NVML_GPUS": f"{H100}|{H100}", "FAKE_NVML_GPU1_HANDLE": "err:15",
                                 "FAKE_CUDA_DEVICES": "9.0"})
    assert facts["sources"].get("gpus") == "nvml"
    assert [(g["index"], g["name"]) for g in facts["gpus"]][:1] == [(0, H100)]
    assert "GPU is lost" in json.dumps(facts["errors"]) + str(facts["driver"]["nvml_error"])


@pytest.mark.slow  # a few seconds each: with the slow tests (CI runs both) to keep the fast set in budget
def test_hung_cuinit_keeps_what_nvml_said(fake_libs: Path) -> None:
    result = gpu_doctor(fake_libs, ["snapshot", "--timeout", "2"],
                        {"FAKE_NVML_GPUS": H100, "FAKE_CUDA_DEVICES": "9.0", "FAKE_CUDA_HANG": "1"}, timeout=60)
    facts = json.loads(result.stdout)
    assert [g["name"] for g in facts["gpus"]] == [H100]
    assert facts["driver"]["userspace"] == "550.54.15"
    assert any("timed out" in e["reason"] for e in facts["errors"])


def _nvidia_module_listed() -> bool:
    try:
        return any(line.split(" ", 1)[0] == "nvidia" for line in Path("/proc/modules").read_text().splitlines())
    except OSError:
        return False


@pytest.mark.skipif(_nvidia_module_listed(), reason="needs a host whose /proc/modules lists no nvidia module")
def test_working_nvml_and_cuinit_mean_the_driver_is_loaded(two_gpu_report: dict[str, Any]) -> None:
    (result,) = [c for c in two_gpu_report["checks"] if c["id"] == "driver.not_loaded"]
    assert result["status"] == "ok", result
