"""The smoke test end to end against fake driver libraries: the real child process, ctypes signatures and
error paths, with libcuda.so.1 and libnvidia-ml.so.1 compiled from tests/fakes/*.c and found first through
LD_LIBRARY_PATH. The fakes answer what their FAKE_* knobs say (documented at the top of each C file), so
every assertion compares the probe's answer with a configured truth.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from doctor.active import gpu_child
from doctor.active.events import Log, Outcome, Progress, last_outcome
from doctor.active.gpu import Options, smoke_events
from doctor.pipeline import judged

FAKES = Path(__file__).parent / "fakes"
GPU_DOCTOR = Path(sys.executable).with_name("gpu-doctor")
A100 = "NVIDIA A100-SXM4-40GB"  # compat/gpus.toml has its peaks: 1555 GB/s, 19.5 FP32 TFLOP/s
MIB = 1 << 20


def build_fakes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (cc) on PATH to build the fake libcuda.so.1 and libnvidia-ml.so.1")
    out = tmp_path_factory.mktemp("fake-driver-active")
    for source, lib in (("fake_nvml.c", "libnvidia-ml.so.1"), ("fake_cuda.c", "libcuda.so.1")):
        built = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(out / lib),
                                str(FAKES / source)], capture_output=True, text=True, check=False)
        assert built.returncode == 0, f"{source} does not compile:\n{built.stderr}"
    return out


@pytest.fixture(scope="session")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fakes(tmp_path_factory)


def env_for(libs: Path, **knobs: Any) -> dict[str, str]:
    """Our environment with the fakes first, no stray FAKE_* knob, and a small fast A100 by default."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_")}
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(libs), os.environ.get("LD_LIBRARY_PATH")]))
    env.update({"FAKE_CUDA_DEVICES": "8.0", "FAKE_CUDA_NAMES": A100, "FAKE_NVML_GPUS": A100,
                "FAKE_CUDA_MEM_MIB": "40960", "FAKE_NVML_GPU0_MEM_TOTAL_MIB": "40960", "FAKE_CUDA_SM_COUNT": "4",
                "FAKE_CUDA_PCIE_GBS": "50"})  # fake_nvml.c's default link: gen 5 x16 (63 GB/s)
    env.update({k: str(v) for k, v in knobs.items()})
    return env


def smoke(libs: Path, timeout: float = 20, gpus: Any = "all", **knobs: Any) -> Outcome:
    return last_outcome(judged(smoke_events(Options(gpus=gpus, timeout=timeout, size_mib=4, fma_ms=50,
                                             env=env_for(libs, **knobs)))))


def codes(outcome: Outcome, code: str) -> list[tuple[str, str]]:
    return [(f.severity, f.title) for f in outcome.findings if f.code == code]


def gpu0(outcome: Outcome) -> dict[str, Any]:
    return outcome.results["gpus"][0]


# --- a healthy GPU -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def healthy(fake_driver: Path) -> Outcome:
    return smoke(fake_driver, FAKE_CUDA_PCIE_GBS=25, FAKE_CUDA_MEM_BW_GBS=1400, FAKE_CUDA_FP32_TFLOPS=18.5,
                 FAKE_NVML_GPU0_PCIE_GEN=4, FAKE_NVML_GPU0_PCIE_GEN_MAX=4)


def test_healthy_gpu_passes_with_every_element_verified(healthy: Outcome) -> None:
    assert healthy.status == "ok", [f.title for f in healthy.findings if f.severity != "ok"]
    g = gpu0(healthy)
    assert g["saxpy"] == {"elements": 1 << 20, "wrong": 0}
    assert g["fma"] == {"elements": 4 * 8 * 256, "wrong": 0}  # 4 SMs x (2048 / 256) blocks x 256 threads
    assert g["roundtrip_intact"] is True and g["device_copy_intact"] is True
    assert codes(healthy, "gpu.smoke") == [
        ("ok", f"GPU 0 ({A100}): context, PTX JIT, copies and a kernel work: 1,048,576 of 1,048,576 elements exact")]


def test_measured_rates_are_the_configured_ones(healthy: Outcome) -> None:
    g = gpu0(healthy)
    assert g["h2d_gbs"] == pytest.approx(25, rel=1e-4)
    assert g["d2h_gbs"] == pytest.approx(25, rel=1e-4)
    assert g["device_gbs"] == pytest.approx(1400, rel=1e-4)
    assert g["fp32_tflops"] == pytest.approx(18.5, rel=1e-4)
    assert g["copy_bytes"] == 4 * MIB


def test_rates_are_compared_with_the_spec_and_the_pcie_link(healthy: Outcome) -> None:
    assert codes(healthy, "gpu.underperforming") == [
        ("ok", f"GPU 0 ({A100}): host→device copy 25.0 GB/s, 79% of the PCIe gen 4 x16 link (31.5 GB/s)"),
        ("ok", f"GPU 0 ({A100}): device→host copy 25.0 GB/s, 79% of the PCIe gen 4 x16 link (31.5 GB/s)"),
        ("ok", f"GPU 0 ({A100}): device memory bandwidth (copy kernel) 1,400 GB/s, 90% of NVIDIA's published "
               "peak (1,555 GB/s)"),
        ("ok", f"GPU 0 ({A100}): FP32 throughput (FMA kernel) 18.5 TFLOP/s, 95% of NVIDIA's published peak "
               "(19.5 TFLOP/s)"),
    ]


def test_progress_comes_as_events_ending_in_one_outcome(fake_driver: Path) -> None:
    events = list(judged(smoke_events(Options(size_mib=4, fma_ms=50, env=env_for(fake_driver)))))
    assert isinstance(events[-1], Outcome)
    assert not any(isinstance(e, Outcome) for e in events[:-1])
    fractions = [e.fraction for e in events if isinstance(e, Progress) and e.fraction is not None]
    assert fractions == sorted(fractions)
    assert fractions[0] >= 0 and fractions[-1] < 1
    # one share per step: the last step ("releasing …") starts at 7/8, not at 78 % as when 9 steps were counted
    n = gpu_child.STEPS["smoke"][1]
    assert sorted(set(fractions)) == [round(k / n, 4) for k in range(n)]
    steps = [e.step for e in events if isinstance(e, Progress)]
    assert "JIT-compiling the PTX kernels (cuModuleLoadDataEx)" in steps
    assert any(isinstance(e, Log) and "FP32" in e.line for e in events)


def test_unknown_gpu_shows_measurements_without_a_ratio(fake_driver: Path) -> None:
    out = smoke(fake_driver, FAKE_NVML_GPUS="NVIDIA Imaginary 9000", FAKE_CUDA_NAMES="NVIDIA Imaginary 9000")
    perf = codes(out, "gpu.underperforming")
    assert [sev for sev, _ in perf] == ["ok", "ok", "info", "info"]  # PCIe from NVML; no memory/FP32 peaks known
    assert perf[2][1] == "GPU 0 (NVIDIA Imaginary 9000): device memory bandwidth (copy kernel) 1,500 GB/s"


# --- slow, throttled, faulty ---------------------------------------------------------------------


def test_x8_link_slow_memory_and_thermal_slowdown_warn_with_causes(fake_driver: Path) -> None:
    out = smoke(fake_driver, FAKE_CUDA_PCIE_GBS=6, FAKE_CUDA_MEM_BW_GBS=700,
                FAKE_NVML_GPU0_PCIE_GEN=4, FAKE_NVML_GPU0_PCIE_GEN_MAX=4, FAKE_NVML_GPU0_PCIE_WIDTH=8,
                FAKE_CUDA_LAUNCH_SETENV="FAKE_NVML_GPU0_THROTTLE=0x40")  # hw thermal slowdown once kernels run
    warns = {f.title: f.detail for f in out.findings if f.code == "gpu.underperforming" and f.severity == "warn"}
    assert list(warns) == [
        f"GPU 0 ({A100}): host→device copy 6.0 GB/s: only 38% of the PCIe gen 4 x8 link (15.8 GB/s)",
        f"GPU 0 ({A100}): device→host copy 6.0 GB/s: only 38% of the PCIe gen 4 x8 link (15.8 GB/s)",
        f"GPU 0 ({A100}): device memory bandwidth (copy kernel) 700 GB/s: only 45% of NVIDIA's published peak "
        "(1,555 GB/s)",
    ]
    first, *_, memory = warns.values()
    assert "the PCIe link trained at x8 of x16 (slot, riser or seating)" in first
    assert "hardware thermal slowdown (the GPU is too hot)" in memory
    assert codes(out, "gpu.throttling") == [
        ("warn", f"GPU 0 ({A100}) slowed down during the test: hardware thermal slowdown (the GPU is too hot)")]


def test_power_cap_under_load_is_information_only(fake_driver: Path) -> None:
    out = smoke(fake_driver, FAKE_CUDA_LAUNCH_SETENV="FAKE_NVML_GPU0_THROTTLE=0x4")
    assert codes(out, "gpu.throttling") == [("info", f"GPU 0 ({A100}) reached a limit under load: sw power cap")]


def test_launch_failure_is_named_by_the_driver(fake_driver: Path) -> None:
    out = smoke(fake_driver, FAKE_CUDA_SYNC_ERROR=719)
    (f,) = [f for f in out.findings if f.code == "gpu.kernel_failed"]
    assert f.severity == "fail"
    assert f.title == (f"GPU 0 ({A100}): cuCtxSynchronize failed with CUDA_ERROR_LAUNCH_FAILED (719): "
                       "unspecified launch failure")
    assert "It happened while saxpy kernel: copy in, launch, copy back, compare every element." in f.detail
    assert out.status == "fail"
    assert out.results["end"] == {**out.results["end"], "event": "exit", "returncode": 0}


def test_launch_refused_at_launch_time(fake_driver: Path) -> None:
    out = smoke(fake_driver, FAKE_CUDA_LAUNCH_ERROR=701, FAKE_CUDA_FAULT_KERNEL="fma_loop")
    assert [t for _, t in codes(out, "gpu.kernel_failed")] == [
        f"GPU 0 ({A100}): cuLaunchKernel failed with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (701): too many resources "
        "requested for launch"]
    assert gpu0(out)["saxpy"]["wrong"] == 0  # what ran before the failure is kept


def test_invalid_ptx_carries_the_jit_log(fake_driver: Path) -> None:
    out = smoke(fake_driver, FAKE_CUDA_JIT_ERROR=218)
    (f,) = [f for f in out.findings if f.code == "gpu.ptx_jit_failed"]
    assert f.title == f"GPU 0 ({A100}): cuModuleLoadDataEx failed with CUDA_ERROR_INVALID_PTX (218): a PTX JIT " \
                      "compilation failed"
    log = {e.fact: e.value for e in f.evidence}["cuda.jit_log"]
    assert log.startswith("ptxas application ptx input, line 9; fatal")


def test_ptx_newer_than_the_driver_jit_is_unsupported_ptx_version(fake_driver: Path) -> None:
    out = smoke(fake_driver, FAKE_CUDA_PTX_ISA="4.3")  # the kernels are ISA 5.0
    (f,) = [f for f in out.findings if "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in f.title]
    assert f.code == "driver.too_old_for_cuda_runtime"
    assert "Unsupported .version 5.0; current version is '4.3'" in {e.fact: e.value for e in f.evidence}["cuda.jit_log"]


def test_uncorrectable_ecc_error_fails_twice_from_cuda_and_nvml(fake_driver: Path) -> None:
    out = smoke(fake_driver, FAKE_CUDA_SYNC_ERROR=214, FAKE_CUDA_FAULT_KERNEL="fma_loop")
    assert codes(out, "gpu.hardware_fault") == [
        # the error is sticky: the first call after the failed kernel returns it
        ("fail", f"GPU 0 ({A100}): cuEventRecord failed with CUDA_ERROR_ECC_UNCORRECTABLE (214): "
                 "uncorrectable ECC error encountered"),
        ("fail", f"GPU 0 ({A100}): 1 new uncorrectable ECC error(s) during the test (volatile count 0 → 1)"),
    ]
    assert gpu0(out)["cleanup_problems"][0] == "cuMemFree_v2: CUDA_ERROR_ECC_UNCORRECTABLE"  # the context is lost


def test_silent_corruption_fails_wrong_results(fake_driver: Path) -> None:
    out = smoke(fake_driver, FAKE_CUDA_WRONG=5, FAKE_CUDA_FAULT_KERNEL="saxpy")
    assert codes(out, "gpu.wrong_results") == [
        ("fail", f"GPU 0 ({A100}): the saxpy kernel returned 1 wrong element(s) of 1,048,576 (element 5: 51 instead "
                 "of 50)")]


def test_a_copy_kernel_that_corrupts_one_element_fails(fake_driver: Path) -> None:
    # the copy's output is compared byte for byte with what was copied in (memcmp, no 256 MiB copies of it)
    out = smoke(fake_driver, FAKE_CUDA_WRONG=3, FAKE_CUDA_FAULT_KERNEL="copy_v4")
    assert gpu0(out)["device_copy_intact"] is False and gpu0(out)["roundtrip_intact"] is True
    assert codes(out, "gpu.wrong_results") == [
        ("fail", f"GPU 0 ({A100}): the copy kernel's output differs from its input")]


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_same_bytes_finds_one_changed_byte_anywhere_with_or_without_memcmp(
        where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    size = 3 * gpu_child.COMPARE_CHUNK + 5  # not a whole number of chunks
    a, b = ctypes.create_string_buffer(size), ctypes.create_string_buffer(size)
    ctypes.memset(a, 7, size)
    ctypes.memset(b, 7, size)
    pa, pb = ctypes.addressof(a), ctypes.addressof(b)
    assert gpu_child.same_bytes(pa, pb, size)
    b[{"first": 0, "middle": size // 2, "last": size - 1}[where]] = b"\x08"
    assert not gpu_child.same_bytes(pa, pb, size)
    monkeypatch.setattr(gpu_child, "_memcmp", lambda: None)  # a libc without memcmp: chunk by chunk
    assert not gpu_child.same_bytes(pa, pb, size)
    assert gpu_child.same_bytes(pa, pa, size)


@pytest.mark.parametrize(("init", "code", "name"), [
    (100, "gpu.no_cuda_device", "CUDA_ERROR_NO_DEVICE"),
    (803, "driver.module_userspace_mismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
    (804, "driver.forward_compat_unsupported", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"),
    (802, "driver.fabric_manager_not_running", "CUDA_ERROR_SYSTEM_NOT_READY"),
])
def test_cuinit_errors_map_to_their_findings(fake_driver: Path, init: int, code: str, name: str) -> None:
    out = smoke(fake_driver, FAKE_CUDA_INIT=init)
    (f,) = out.findings
    assert (f.code, f.severity) == (code, "fail")
    assert f.title.startswith(f"cuInit failed with {name} ({init}): ")


# --- the watchdog --------------------------------------------------------------------------------


@pytest.mark.parametrize(("where", "kernel", "step"), [
    # each hang waits out the watchdog (~4.5 s): with the slow tests (CI runs both); the fast set keeps the hung
    # cuInit below, which goes through the same watchdog
    pytest.param("sync", "saxpy", "saxpy kernel: copy in, launch, copy back, compare every element",
                 marks=pytest.mark.slow),
    pytest.param("launch", "fma_loop", "FP32 throughput (FMA kernel)", marks=pytest.mark.slow),
])
def test_hang_is_gpu_hang_after_the_timeout(fake_driver: Path, where: str, kernel: str, step: str) -> None:
    start = time.monotonic()
    # 4 s: the host side of the saxpy step (1M elements compared in Python) must not pass for a hang on a
    # loaded 2-core machine
    out = smoke(fake_driver, timeout=4, FAKE_CUDA_HANG=where, FAKE_CUDA_FAULT_KERNEL=kernel)
    assert time.monotonic() - start < 60  # the fake never returns: only the watchdog ends it
    assert codes(out, "gpu.hang") == [
        ("fail", f"GPU 0 ({A100}) hung: '{step}' did not finish within 4 s; the doctor stopped the test")]
    assert out.results["end"]["event"] == "hang" and out.results["end"]["reaped"] is True


def test_hung_cuinit_is_a_hang_too(fake_driver: Path) -> None:
    out = smoke(fake_driver, timeout=1.5, FAKE_CUDA_HANG=1)
    assert [(f.code, f.title) for f in out.findings] == [
        ("gpu.hang", "The GPU test hung: 'loading libcuda.so.1 and calling cuInit' did not finish within 1.5 s; the "
                     "doctor stopped the test")]


# --- several GPUs, selection ---------------------------------------------------------------------


def test_all_gpus_are_tested_in_order_and_a_missing_one_is_named(fake_driver: Path) -> None:
    both = smoke(fake_driver, FAKE_CUDA_DEVICES="8.0|9.0", FAKE_NVML_GPUS=f"{A100}|NVIDIA H100 80GB HBM3",
                 FAKE_CUDA_NAMES=f"{A100}|NVIDIA H100 80GB HBM3")
    assert [t for _, t in codes(both, "gpu.smoke")] == [
        f"GPU {i} ({name}): context, PTX JIT, copies and a kernel work: 1,048,576 of 1,048,576 elements exact"
        for i, name in enumerate([A100, "NVIDIA H100 80GB HBM3"])]
    missing = smoke(fake_driver, gpus=[3])
    assert [t for _, t in codes(missing, "gpu.cuda_error")] == [
        "GPU 3: cuDeviceGet failed with CUDA_ERROR_INVALID_DEVICE (101): no CUDA device 3: 1 visible (numbered from 0)"]


def test_the_parent_process_never_loads_libcuda(healthy: Outcome) -> None:
    maps = Path("/proc/self/maps").read_text()
    assert "libcuda" not in maps and "libnvidia-ml" not in maps


# --- the command line, text and JSON -------------------------------------------------------------


def gpu_doctor(libs: Path, *args: str, **knobs: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(GPU_DOCTOR), *args], capture_output=True, text=True, env=env_for(libs, **knobs),
                            timeout=120, check=False)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_cli_smoke_json_is_a_report_with_the_measurements(fake_driver: Path) -> None:
    result = gpu_doctor(fake_driver, "smoke", "--json", "--size-mib", "4")
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "gpu-doctor.report/v1" and doc["status"] == "ok"
    assert {f["code"] for f in doc["findings"]} == {"gpu.smoke", "gpu.underperforming"}
    assert [(c["id"], c["area"], c["status"]) for c in doc["checks"]] == [("active.smoke", "Active tests", "ok")]
    assert doc["active"]["summary"] == "smoke test: passed"
    assert doc["active"]["results"]["gpus"][0]["saxpy"]["elements"] == 1 << 20
    assert "[ 75%] GPU 0: FP32 throughput (FMA kernel)" in result.stderr  # progress, one line per step off a tty


def test_cli_smoke_text_fails_with_exit_1_on_a_kernel_failure(fake_driver: Path) -> None:
    result = gpu_doctor(fake_driver, "smoke", "--gpu", "0", "-q", "--size-mib", "4", FAKE_CUDA_SYNC_ERROR=700)
    assert result.returncode == 1
    assert (f"  ✗ GPU 0 ({A100}): cuCtxSynchronize failed with CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory "
            "access was encountered") in result.stdout
    assert result.stdout.splitlines()[-1].startswith("NOT READY: 1 failure(s)")
    assert result.stderr == ""


@pytest.mark.parametrize("args", [["smoke", "--gpu", "x"], ["oom", "--gpu", "-1"], ["smoke", "--size-mib", "0"],
                                  ["oom", "--timeout", "0"], ["smoke", "--python", "/nonexistent"]])
def test_cli_usage_errors_exit_2(fake_driver: Path, args: list[str]) -> None:
    result = gpu_doctor(fake_driver, *args)
    assert result.returncode == 2, result.stderr
