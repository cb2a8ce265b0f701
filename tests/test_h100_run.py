"""The first real GPU: what `scripts/gpu-validate` recorded on a lent NVIDIA H100 80GB HBM3 (driver 580.159.04,
CUDA 13.0, Ubuntu 24.04, a CUDA torch 2.11.0+cu130), 2026-11-27 — tests/data/gpu-validate/h100-580-2026-11-27/.

tests/test_gpu_validate.py judges every recorded run generically (the parsers agree with each other, the replay
gives the verdicts the live run printed). Here the same outputs are held to their values: what nvidia-smi, the
kernel module and the topology say about this machine, the whole-machine verdict its snapshot replays to (ready,
and the findings that matter, each once), and each active test's judged result as the live run printed it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA

from doctor.cli import main
from doctor.parsers import (
    parse_cuda_driver_version_from_smi_text,
    parse_nvidia_smi_text,
    parse_nvidia_smi_topo,
    parse_nvidia_smi_xml,
    parse_proc_driver_version,
)

RUN = DATA / "gpu-validate" / "h100-580-2026-11-27"
H100 = "NVIDIA H100 80GB HBM3"


def out(step: str, name: str = "stdout") -> str:
    return (RUN / step / name).read_text()


def replay(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().out


def report_of(capsys: pytest.CaptureFixture[str], snapshot: Path) -> tuple[int, dict[str, Any]]:
    code, text = replay(capsys, "check", "--facts", str(snapshot), "--json")
    return code, json.loads(text)


def titles(report: dict[str, Any], code: str) -> list[tuple[str, str]]:
    return [(f["severity"], f["title"]) for f in report["findings"] if f["code"] == code]


# --- the parsers, on the real outputs (copied by kind into tests/data/nvidia-smi-*/ and proc-driver-version/) ---


@pytest.mark.parametrize("path", [RUN / "05-nvidia-smi-q-x" / "stdout",
                                  DATA / "nvidia-smi-xml" / "h100-80gb-hbm3-580.159.04.xml"])
def test_nvidia_smi_xml_of_the_h100(path: Path) -> None:
    smi = parse_nvidia_smi_xml(path.read_text())
    assert (smi["driver_version"], smi["cuda_version"]) == ("580.159.04", "13.0")
    (gpu,) = smi["gpus"]
    assert gpu["index"] == 0 and gpu["name"] == H100 and gpu["source"] == "nvidia-smi"
    assert gpu["uuid"] == "GPU-146b9b8e-9637-a79f-0b49-cd5fd8fda278"
    assert (gpu["pci_bus_id"], gpu["pci_device_id"]) == ("00000000:00:06.0", "233010DE")
    assert (gpu["memory_total_mib"], gpu["memory_used_mib"]) == (81559, 0)
    assert (gpu["pcie_gen_current"], gpu["pcie_gen_max"], gpu["pcie_width_current"], gpu["pcie_width_max"]) == \
        (5, 5, 16, 16)
    assert gpu["ecc_uncorrected"] == 0 and gpu["remapped_rows_pending"] is False  # Hopper remaps rows
    assert gpu["persistence_mode"] is True and gpu["mig_mode"] is False
    assert (gpu["temperature_c"], gpu["power_draw_w"], gpu["utilization_pct"]) == (39, 74.37, 0)
    # An idle GPU's clocks are lowered ("clocks_event_reason_gpu_idle: Active"): that is not throttling.
    assert gpu["throttle_reasons"] == []
    assert gpu["processes"] == [] and gpu["mig_devices"] == []


def test_nvidia_smi_text_of_the_h100() -> None:
    text = (DATA / "nvidia-smi-text" / "h100-80gb-hbm3-580.159.04-cuda-13.0.txt").read_text()
    assert text == out("06-nvidia-smi")
    assert parse_cuda_driver_version_from_smi_text(text) == {"driver_version": "580.159.04", "cuda_version": "13.0"}
    smi = parse_nvidia_smi_text(text)
    assert (smi["smi_version"], smi["no_devices"], smi["processes"], smi["mig_devices"]) == \
        ("580.159.04", False, [], [])
    (gpu,) = smi["gpus"]
    assert (gpu["index"], gpu["name"], gpu["name_truncated"], gpu["pci_bus_id"]) == \
        (0, H100, False, "00000000:00:06.0")
    # The table hides the driver's reservation (NVML said 480 MiB used at the same time): 0 of 81559 MiB.
    assert (gpu["memory_used_mib"], gpu["memory_total_mib"]) == (0, 81559)
    assert (gpu["power_draw_w"], gpu["power_limit_w"], gpu["temperature_c"]) == (72.0, 700.0, 39)
    assert gpu["persistence_mode"] is True and gpu["mig_mode"] is False


def test_proc_driver_version_of_the_open_module() -> None:
    text = (DATA / "proc-driver-version" / "open-580.159.04-ubuntu2404-h100.txt").read_text()
    assert text == out("07-proc-driver-version")
    assert text.startswith("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04")
    assert parse_proc_driver_version(text) == {"version": "580.159.04", "flavor": "open", "gcc": "15.3.0"}


def test_topo_of_one_gpu_with_its_header_underlined_by_escapes() -> None:
    text = (DATA / "nvidia-smi-topo" / "h100-x1-580.159.04-ansi-underlined-header.txt").read_text()
    assert text == out("08-nvidia-smi-topo")
    assert text.splitlines()[0].startswith("\t\x1b[4mGPU0\t") and text.splitlines()[0].endswith("\x1b[0m")
    assert parse_nvidia_smi_topo(text) == {"columns": ["GPU0"], "links": {"GPU0": {"GPU0": "X"}},
                                           "cpu_affinity": {"GPU0": "0-15"}, "numa_affinity": {"GPU0": "0"}}


# --- the whole machine, replayed from its snapshot ------------------------------------------------------------


@pytest.fixture(scope="module")
def machine() -> tuple[int, dict[str, Any], str]:
    """`check --facts` of the snapshot taken on the H100: (exit code, the JSON report, the -v text)."""
    import contextlib
    import io

    snapshot = str(RUN / "04-snapshot" / "stdout")
    as_json, as_text = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(as_json):
        code = main(["check", "--facts", snapshot, "--json"])
    with contextlib.redirect_stdout(as_text):
        main(["check", "--facts", snapshot, "-v"])
    return code, json.loads(as_json.getvalue()), as_text.getvalue()


def test_the_h100_machine_is_ready(machine: tuple[int, dict[str, Any], str]) -> None:
    code, report, _text = machine
    assert (code, report["status"]) == (0, "ok")
    assert [f for f in report["findings"] if f["severity"] in ("warn", "fail")] == []
    assert titles(report, "driver.missing") == [("ok", "NVIDIA driver 580.159.04 is installed")]
    assert titles(report, "driver.not_loaded") == [("ok", "NVIDIA kernel module 580.159.04 is loaded")]
    assert titles(report, "driver.too_old_for_gpu") == [("ok", f"Driver 580.159.04 is new enough for {H100} (Hopper)")]
    assert titles(report, "driver.too_old_for_cuda_runtime") == [
        ("ok", "CUDA toolkit 13.0 at /usr/local/cuda-13.0 runs on driver 580.159.04 (native)")]
    assert titles(report, "driver.branch_eol") == [
        ("ok", "Driver branch R580 (Long Term Support Branch) is supported until June 2028")]
    assert titles(report, "gpu.memory_in_use") == [("ok", f"GPU 0 ({H100}): 81079 of 81559 MiB free")]
    assert titles(report, "gpu.pcie_degraded") == [("ok", f"GPU 0 ({H100}): PCIe x16, gen 5 (max 5)")]
    assert titles(report, "gpu.hardware_fault") == [
        ("ok", f"GPU 0 ({H100}): no uncorrectable ECC errors or pending retirements")]
    assert titles(report, "toolkit.gpu_arch_unsupported") == [("ok", f"CUDA 13.0 compiles for {H100} (sm_90)")]
    assert titles(report, "cudnn.version_mismatch") == [
        ("ok", "torch 2.11.0 (cuDNN ≥ 9.19.0.56) gets cuDNN 9.19.0.56")]
    assert titles(report, "framework.arch_unsupported") == [("ok", f"torch 2.11.0 has kernels for {H100} (sm_90)")]
    assert ("ok", "torch 2.11.0 runs on driver 580.159.04 (native)") in \
        titles(report, "framework.cuda_newer_than_driver")


def test_one_cudnn_found_in_five_places_is_one_verdict_naming_them_all(
        machine: tuple[int, dict[str, Any], str]) -> None:
    """Ubuntu's cuDNN 9.14.0 (libcudnn9-dev) answers from two headers, a library under /lib and /usr/lib (one
    directory on a merged /usr) and cudnnGetVersion: one supported-CUDA verdict, with the five places as evidence."""
    _code, report, text = machine
    (f,) = [f for f in report["findings"] if f["code"] == "cudnn.cuda_mismatch"]
    assert (f["severity"], f["title"]) == ("ok", "cuDNN 9.14.0 supports CUDA 13.0")
    places = [e["value"] for e in f["evidence"] if e["fact"] == "cudnn"]
    assert places == ["9.14.0 (/usr/include/x86_64-linux-gnu/cudnn_version.h)",
                      "9.14.0 (/usr/include/x86_64-linux-gnu/cudnn_version_v9.h)",
                      "9.14.0 (/lib/x86_64-linux-gnu/libcudnn.so.9.14.0)",
                      "9.14.0 (/usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0)",
                      "9.14.0 (/lib/x86_64-linux-gnu/libcudnn.so.9 (cudnnGetVersion))"]
    assert text.count("cuDNN 9.14.0 supports CUDA 13.0") == 1
    (found,) = titles(report, "cudnn.missing")
    assert found == ("ok", "cuDNN found: 9.14.0 (header: /usr/include/x86_64-linux-gnu/cudnn_version.h and 4 more), "
                           "9.19.0.56 (pip: /opt/torch/.venv/bin/python3 [nvidia-cudnn-cu13])")


def test_no_verdict_is_said_twice(machine: tuple[int, dict[str, Any], str]) -> None:
    _code, report, _text = machine
    said = [(f["code"], f["title"]) for f in report["findings"]]
    assert sorted(said) == sorted(set(said))


def test_a_successful_cuinit_is_not_shown_as_unknown(machine: tuple[int, dict[str, Any], str]) -> None:
    _code, _report, text = machine
    assert "driver.cuda_init_error = none (cuInit returned CUDA_SUCCESS)  [libcuda:cuInit]" in text
    assert "driver.cuda_init_error = unknown" not in text


# --- check --deep with the CUDA torch, jax and cupy of /opt/torch/.venv ----------------------------------------


def test_deep_cupy_runtime_is_a_cuda_version_not_an_integer(capsys: pytest.CaptureFixture[str]) -> None:
    """CuPy's runtimeGetVersion() answered 13020 (1000 * 13 + 10 * 2): CUDA 13.2, shown and judged as such."""
    report = RUN / "16-check-deep-json" / "stdout"
    raw = json.loads(report.read_text())
    (cupy,) = [p for e in raw["facts"]["python_envs"] for p in e["packages"] if p["name"] == "cupy-cuda13x"]
    assert cupy["deep"]["cuda"] == "13020"  # as the released code recorded it
    _code, text = replay(capsys, "check", "--facts", str(report), "-v")
    assert "13020" not in text
    assert ("    cupy-cuda13x 14.2.0: CUDA 13\n"
            "      --deep: is_available yes, 1 device(s), arch list unknown, CUDA 13.2\n") in text
    assert "--deep: is_available yes, 1 device(s), arch list sm_75, sm_80, sm_86, sm_90, sm_100, sm_120, CUDA 13.0, " \
           "cuDNN 9.19.0\n" in text
    code, judged = report_of(capsys, report)
    assert (code, judged["status"]) == (0, "ok")
    # torch answers cudnn.version() 91900: three parts, compared and shown at that precision (not "≥ 9.19.0.56
    # gets 9.19.0", which reads as a contradiction); the evidence keeps the whole pin
    assert titles(judged, "cudnn.version_mismatch") == [("ok", "torch 2.11.0 (cuDNN ≥ 9.19.0) gets cuDNN 9.19.0")]
    # The wheel's name says CUDA 13; the runtime itself says 13.2, which driver 580 runs by minor-version
    # compatibility (13.2 GA asks for 595.45.04).
    assert ("ok", "cupy-cuda13x 14.2.0 runs on driver 580.159.04 (minor-version)") in \
        titles(judged, "framework.cuda_newer_than_driver")
    assert titles(judged, "framework.cuda_unavailable") == [("ok", "jaxlib 0.11.2 sees the GPU (1 device(s))"),
                                                           ("ok", "torch 2.11.0 sees the GPU (1 device(s))")]


# --- the active tests, replayed from the snapshots they wrote --------------------------------------------------

ACTIVE = {
    "09-smoke": [
        ("gpu.smoke", "ok", f"GPU 0 ({H100}): context, PTX JIT, copies and a kernel work: 1,048,576 of 1,048,576 "
                            "elements exact"),
        ("gpu.underperforming", "ok", f"GPU 0 ({H100}): host→device copy 54.9 GB/s, 87% of the PCIe gen 5 x16 link "
                                      "(63.0 GB/s)"),
        ("gpu.underperforming", "ok", f"GPU 0 ({H100}): device→host copy 55.1 GB/s, 87% of the PCIe gen 5 x16 link "
                                      "(63.0 GB/s)"),
        ("gpu.underperforming", "ok", f"GPU 0 ({H100}): device memory bandwidth (copy kernel) 2,590 GB/s, 77% of "
                                      "NVIDIA's published peak (3,350 GB/s)"),
        ("gpu.underperforming", "ok", f"GPU 0 ({H100}): FP32 throughput (FMA kernel) 61.1 TFLOP/s, 91% of NVIDIA's "
                                      "published peak (67.0 TFLOP/s)"),
    ],
    "10-oom": [
        ("oom.capacity", "ok", f"GPU 0 ({H100}): 80,550 MiB allocatable in total, largest single block 80,550 MiB; "
                               "NVML reported 81,076 MiB free of 81,559 MiB"),
        ("oom.recovery", "ok", f"GPU 0 ({H100}): after running out of memory the context still works: a new "
                               "allocation and a kernel (65,536 elements exact)"),
        ("oom.released", "ok", f"GPU 0 ({H100}): every byte was released (80,552 MiB free again)"),
    ],
    "11-oom-held": [
        ("oom.refused", "warn", f"GPU 0 ({H100}): the OOM probe did not run: python3 (pid 700, 1,542 MiB) uses "
                                "this GPU"),  # the live run printed "use(s)"
    ],
    "12-oom-held-force": [
        ("oom.capacity", "ok", f"GPU 0 ({H100}): 79,002 MiB allocatable in total, largest single block 79,002 MiB; "
                               "NVML reported 79,528 MiB free of 81,559 MiB"),
        ("oom.recovery", "ok", f"GPU 0 ({H100}): after running out of memory the context still works: a new "
                               "allocation and a kernel (65,536 elements exact)"),
        ("oom.released", "ok", f"GPU 0 ({H100}): every byte was released (79,005 MiB free again)"),
    ],
    "17-smoke-torch": [
        ("framework.gpu_smoke", "ok", "torch 2.11.0+cu130 in /opt/torch/.venv/bin/python3: the GPU matrix product "
                                      "matches the CPU"),
        ("framework.gpu_smoke", "ok", "torch 2.11.0+cu130 in /opt/torch/.venv/bin/python3: the GPU cuDNN convolution "
                                      "matches the CPU"),
        ("gpu.underperforming", "ok", f"torch 2.11.0+cu130 in /opt/torch/.venv/bin/python3, {H100}: bf16 matrix "
                                      "product (tensor cores) 839 TFLOP/s, 85% of the tensor-core peak (990 TFLOP/s)"),
        ("gpu.underperforming", "ok", f"torch 2.11.0+cu130 in /opt/torch/.venv/bin/python3, {H100}: fp16 matrix "
                                      "product (tensor cores) 806 TFLOP/s, 81% of the tensor-core peak (990 TFLOP/s)"),
    ],
    "18-oom-torch": [
        ("oom.allocator", "info", "torch 2.11.0+cu130 in /opt/torch/.venv/bin/python3: allocator defaults "
                                  "(PYTORCH_CUDA_ALLOC_CONF not set), backend native"),
        ("oom.torch", "ok", "torch 2.11.0+cu130 in /opt/torch/.venv/bin/python3: torch.cuda.OutOfMemoryError raised "
                            "cleanly with 78.56 GiB allocated of 78.57 GiB free / 79.18 GiB"),
        ("oom.released", "ok", "torch 2.11.0+cu130 in /opt/torch/.venv/bin/python3: empty_cache() gave every byte "
                               "back (reserved 78.56 GiB after del → 0; free 78.57 GiB)"),
        ("oom.recovery", "ok", "torch 2.11.0+cu130 in /opt/torch/.venv/bin/python3: the GPU computes correctly after "
                               "the OOM"),
    ],
    "19-batch-probe": [
        ("oom.batch_size", "ok", "torch 2.11.0+cu130 in /opt/torch/.venv/bin/python3: the largest batch that fits is "
                                 "309, 18 tries (forward + backward)"),
    ],
}
STATUS = {"09-smoke": "ok", "10-oom": "ok", "11-oom-held": "warn", "12-oom-held-force": "ok",
          "17-smoke-torch": "ok", "18-oom-torch": "ok", "19-batch-probe": "ok"}


@pytest.mark.parametrize("step", sorted(ACTIVE))
def test_each_active_result_replays_to_what_the_live_run_printed(step: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    live = json.loads(out(step))
    expected = ACTIVE[step]
    assert [(f["code"], f["severity"]) for f in live["findings"]] == [(c, s) for c, s, _t in expected]
    assert [f["title"] for f in live["findings"]] == [t.replace("uses this GPU", "use(s) this GPU")
                                                      for _c, _s, t in expected]
    assert live["status"] == STATUS[step]
    _code, report = report_of(capsys, RUN / step / "snapshot.json")
    assert [(f["code"], f["severity"], f["title"]) for f in report["findings"] if f["area"] == "Active tests"] == \
        expected
    # The machine under the active test is the same ready machine: nothing else warns or fails.
    others = [f for f in report["findings"] if f["area"] != "Active tests" and f["severity"] in ("warn", "fail")]
    assert others == []


def test_the_oom_probe_recorded_the_h100_as_the_driver_api_saw_it(capsys: pytest.CaptureFixture[str]) -> None:
    _code, report = report_of(capsys, RUN / "10-oom" / "snapshot.json")
    oom = report["facts"]["active"]["oom"]
    assert (oom["driver_version"], oom["cuda_driver_version"], oom["device_count"]) == ("580.159.04", 13000, 1)
    (gpu,) = oom["gpus"]
    assert (gpu["name"], gpu["compute_capability"], gpu["sm_count"]) == (H100, "9.0", 132)
    assert gpu["total_memory"] == 85017493504  # cuDeviceTotalMem: 81,079.5 MiB, below NVML's 81,559 MiB
    (capacity,) = [f for f in report["findings"] if f["code"] == "oom.capacity"]
    # 81,076 MiB free before the test, 80,550 allocatable: the test's own context took 524 MiB of it.
    assert "this test's own CUDA context takes 524 MiB" in capacity["detail"]


def test_the_batch_probe_table_shows_every_try(capsys: pytest.CaptureFixture[str]) -> None:
    _code, report = report_of(capsys, RUN / "19-batch-probe" / "snapshot.json")
    (f,) = [f for f in report["findings"] if f["code"] == "oom.batch_size"]
    rows = [line.split() for line in f["detail"].splitlines()]
    assert [(int(r[1].rstrip(":")), r[2]) for r in rows] == [
        (1, "fits"), (2, "fits"), (4, "fits"), (8, "fits"), (16, "fits"), (32, "fits"), (64, "fits"), (128, "fits"),
        (256, "fits"), (512, "OOM"), (384, "OOM"), (320, "OOM"), (288, "fits"), (304, "fits"), (312, "OOM"),
        (308, "fits"), (310, "OOM"), (309, "fits")]


def test_nvml_and_nvidia_smi_give_the_h100_the_same_gpu_facts() -> None:
    """Where NVML is missing the probe reads nvidia-smi -q -x instead: the same GPU must come out the same. The
    H100's device id was 0x233010DE from NVML and 233010DE from nvidia-smi; one representation now."""
    from doctor.model.facts import load_facts
    from doctor.probes.driver import _gpu

    (nvml,) = load_facts(out("04-snapshot")).gpus
    (smi,) = [_gpu(g) for g in parse_nvidia_smi_xml(out("05-nvidia-smi-q-x"))["gpus"]]
    assert nvml.pci_device_id == smi.pci_device_id == "0x233010DE"
    same = ("name", "uuid", "pci_bus_id", "memory_total_mib", "mig_mode", "persistence_mode", "ecc_uncorrected",
            "remapped_rows_pending", "pcie_gen_current", "pcie_gen_max", "pcie_width_current", "pcie_width_max",
            "throttle_reasons", "processes", "mig_devices")
    assert {k: getattr(smi, k) for k in same} == {k: getattr(nvml, k) for k in same}
