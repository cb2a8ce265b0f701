"""Tier 2: the active-test checks on hand-built facts (facts ``active``), no GPU and no child process."""

from __future__ import annotations

from typing import Any

import pytest
from factories import H100, make_facts

from doctor.checks import by_id
from doctor.model.facts_active import (
    ActiveEnd,
    ActiveFacts,
    ActiveGpu,
    AllReduce,
    AllReduceSize,
    BatchTrial,
    DcgmDiag,
    DcgmMessage,
    DcgmTest,
    DriverTest,
    FrameworkError,
    FrameworkRun,
    FrameworkTest,
    GpuBurn,
    MultiGpu,
    NcclPlace,
    NcclRow,
    NcclTests,
    NvLink,
    NvmlReading,
    PcieLink,
    PeerCopy,
    TorchRun,
    Verified,
)
from doctor.model.findings import Finding
from doctor.pipeline import diagnose

A100 = "NVIDIA A100-SXM4-40GB"  # compat/gpus.toml: 1,555 GB/s, 19.5 FP32 TFLOP/s
EXITED = ActiveEnd(event="exit", returncode=0)


def run(check_id: str, **active: Any) -> tuple[str, list[Finding]]:
    chk = by_id(check_id)
    assert chk is not None
    report = diagnose(make_facts(active=ActiveFacts(**active)), checks=[chk])
    return report.checks[0].status, report.findings


def driver_test(mode: str, *gpus: ActiveGpu, **kw: Any) -> DriverTest:
    return DriverTest(mode=mode, gpus=list(gpus), done=True, end=EXITED, device_count=len(gpus), **kw)


def gpu(**kw: Any) -> ActiveGpu:
    return ActiveGpu(0, name=A100, **{"nvml_before": NvmlReading(name=A100), **kw})


def titles(found: list[Finding], severity: str | None = None) -> list[str]:
    return [f.title for f in found if severity is None or f.severity == severity]


# docs/checks.md's example of each active-test check (scripts/gen_checks_doc.py): what `smoke` / `oom` and the
# tools they hand over to recorded (facts `active`), one thing wrong in each.
GIB = 1 << 30
_EXITED = ActiveEnd(event="exit", returncode=0)


def _active(**kw: Any) -> Any:
    return make_facts(active=ActiveFacts(**kw))


def _driver_test(mode: str, *gpus: ActiveGpu, multi: MultiGpu | None = None) -> DriverTest:
    return DriverTest(mode=mode, device_count=len(gpus), gpus=list(gpus), multi_gpu=multi, done=True, end=_EXITED,
                      cuda_driver_version=12040)


_NVLINK = {"0": [NvLink(0, True, 4, "00000000:2A:00.0"), NvLink(1, False, 4, "00000000:2A:00.0")],
           "1": [NvLink(0, True, 4, "00000000:18:00.0"), NvLink(1, False, 4, "00000000:18:00.0")]}
DOC_EXAMPLES: dict[str, tuple[str, Any]] = {
    "active.smoke": ("an A100 whose copy kernel reaches 700 GB/s", _active(smoke=_driver_test("smoke", ActiveGpu(
        0, name=A100, nvml_before=NvmlReading(name=A100), context_created=True, saxpy=Verified(1 << 20, 0),
        device_gbs=700.0)))),
    "active.oom": ("half of an A10's memory used by another container NVML cannot see", _active(oom=_driver_test(
        "oom", ActiveGpu(0, name="NVIDIA A10", refused=True, refused_reason="memory_in_use", nvml_before=NvmlReading(
            name="NVIDIA A10", memory_total=24 * GIB, memory_used=12 * GIB, processes=None))))),
    "active.multi_gpu": ("two H100s with one of their NVLink links down", _active(smoke=_driver_test(
        "smoke", ActiveGpu(0, name=H100.name), ActiveGpu(1, name=H100.name), multi=MultiGpu(
            gpus=[0, 1], bus_ids={"0": "00000000:18:00.0", "1": "00000000:2A:00.0"}, topology={"0-1": 40},
            nvlinks=_NVLINK, can_access_peer={"0>1": True, "1>0": True})))),
    "active.frameworks": ("a CPU-only torch build", _active(frameworks=FrameworkTest(
        pythons=["/venv/bin/python"], requested=["torch"], runs=[FrameworkRun(
            "torch", "/venv/bin/python", installed=True, version="2.13.0+cpu", ok=False, end=_EXITED,
            error=FrameworkError("AssertionError", "AssertionError: Torch not compiled with CUDA enabled",
                                 "a tensor on cuda:0"))]))),
    "active.torch": ("a model whose batch of 1 does not fit", _active(torch=[TorchRun(
        "batch", "/venv/bin/python", installed=True, version="2.5.1+cu124", gpu_name="NVIDIA A10", ok=True,
        largest_batch=0, cap=4096, end=_EXITED, trials=[BatchTrial(1, False, 23 * GIB, 23 * GIB)])])),
    "active.gpu_burn": ("gpu-burn marks GPU 1 FAULTY and exits 0", _active(gpu_burn=GpuBurn(
        command=["gpu_burn", "60"], seconds=60, returncode=0, tested=2, verdicts={"0": "OK", "1": "FAULTY"},
        last_errors=[0, 4096], temps=[71, 74], aborted=False))),
    "active.dcgm": ("DCGM's memory test fails on GPU 1", _active(dcgm=DcgmDiag(
        level=1, returncode=226, version="3.3.5", table=True, tests=[DcgmTest(
            "Hardware", "GPU Memory", "Fail", "GPU1", [DcgmMessage(
                "Error", "GPU 1: Memory test failed: 12 miscompares. Drain the GPU and reset it.")])]))),
    "active.nccl_tests": ("an all-reduce that returns wrong sums", _active(nccl_tests=NcclTests(
        argv=["all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-g", "8"], returncode=0, old_format=False,
        rows=[NcclRow(1 << 30, 1 << 28, "float", "sum", -1, NcclPlace(9000.0, 119.3, 208.8, 3),
                      NcclPlace(8990.0, 119.4, 209.0, 0))], out_of_bounds=0, avg_busbw=150.2))),
}


def test_active_checks_are_not_applicable_without_recorded_tests() -> None:
    report = diagnose(make_facts())
    assert {c.id: c.status for c in report.checks if c.id.startswith("active.")} == dict.fromkeys(
        ("active.smoke", "active.oom", "active.multi_gpu", "active.frameworks", "active.torch", "active.gpu_burn",
         "active.dcgm", "active.nccl_tests"), "not_applicable")


def test_smoke_judges_memory_bandwidth_and_fp32_against_the_matrix_peaks() -> None:
    status, found = run("active.smoke", smoke=driver_test("smoke", gpu(device_gbs=700.0, fp32_tflops=18.5,
                                                                saxpy=Verified(1 << 20, 0))))
    assert status == "warn"
    assert titles(found, "warn") == [f"GPU 0 ({A100}): device memory bandwidth (copy kernel) 700 GB/s: only 45% of "
                                     "NVIDIA's published peak (1,555 GB/s)"]
    assert f"GPU 0 ({A100}): FP32 throughput (FMA kernel) 18.5 TFLOP/s, 95% of NVIDIA's published peak " \
           "(19.5 TFLOP/s)" in titles(found, "ok")
    assert {f.check for f in found} == {"active.smoke"}


def test_smoke_fails_on_a_wrong_element_and_new_uncorrectable_ecc_errors() -> None:
    g = gpu(saxpy=Verified(1 << 20, 1), nvml_before=NvmlReading(name=A100, ecc_uncorrected=0),
            nvml_after=NvmlReading(name=A100, ecc_uncorrected=2))
    status, found = run("active.smoke", smoke=driver_test("smoke", g))
    assert status == "fail"
    assert {f.code for f in found if f.severity == "fail"} == {"gpu.wrong_results", "gpu.hardware_fault"}


def test_smoke_hang_names_the_step_and_the_gpu() -> None:
    t = DriverTest(mode="smoke", gpus=[gpu()], last_step="FP32 throughput (FMA kernel)", last_step_gpu=0,
                   end=ActiveEnd(event="hang", silent_for=30.0, reaped=True))
    _status, found = run("active.smoke", smoke=t)
    assert titles(found, "fail") == [f"GPU 0 ({A100}) hung: 'FP32 throughput (FMA kernel)' did not finish within "
                                     "30 s; the doctor stopped the test"]


def test_oom_refusal_says_why_for_unknown_memory_use() -> None:
    g = ActiveGpu(0, name="NVIDIA A10", refused=True, refused_reason="memory_unknown")
    _status, found = run("active.oom", oom=driver_test("oom", g, nvml_error="Driver Not Loaded"))
    assert titles(found) == ["GPU 0 (NVIDIA A10): the OOM probe did not run: whether another program uses this GPU "
                             "is unknown (Driver Not Loaded)"]


def test_multi_gpu_slow_peer_copy_warns_against_the_pcie_link() -> None:
    link = PcieLink(4, 16, 4, 16)
    mg = MultiGpu(gpus=[0, 1], topology={"0-1": 10}, pcie={"0": link, "1": link},
                  can_access_peer={"0>1": True, "1>0": True},
                  copies={"0>1": PeerCopy(1 << 28, 50.0, 5.0, True), "1>0": PeerCopy(1 << 28, 12.0, 22.0, True)})
    status, found = run("active.multi_gpu", smoke=driver_test("smoke", gpu(), ActiveGpu(1), multi_gpu=mg))
    assert status == "warn"
    assert titles(found, "warn") == ["GPU 0 → GPU 1: peer copy 5.0 GB/s: only 16% of the PCIe gen 4 x16 link "
                                     "(31.5 GB/s)"]


def test_frameworks_without_any_installed_warn() -> None:
    status, found = run("active.frameworks", frameworks=FrameworkTest(pythons=["/venv/bin/python"],
                                                                       requested=["torch", "jax"]))
    assert (status, titles(found)) == ("warn", ["No framework (torch, tensorflow, jax, cupy) is installed in "
                                                "/venv/bin/python"])


def test_torch_nccl_hang_is_a_failure() -> None:
    run_ = TorchRun("allreduce", "/venv/bin/python", last_step="all_reduce 256 MiB",
                    end=ActiveEnd(event="hang", silent_for=120.0, reaped=True))
    _status, found = run("active.torch", torch=[run_])
    assert [(f.code, f.severity) for f in found] == [("framework.hang", "fail")]


def test_gpu_burn_exit_0_with_a_faulty_gpu_fails() -> None:
    status, found = run("active.gpu_burn", gpu_burn=GpuBurn(seconds=60, returncode=0, tested=2,
                                                            verdicts={"0": "OK", "1": "FAULTY"}))
    assert status == "fail"
    assert titles(found) == ["GPU 1: gpu-burn found wrong results (FAULTY) under load although it exited 0"]


def test_gpu_burn_not_installed_is_information() -> None:
    status, found = run("active.gpu_burn", gpu_burn=GpuBurn(skipped="is not installed"))
    assert (status, titles(found)) == ("info", ["gpu-burn is not installed: the stress test was skipped"])


def test_dcgm_without_a_table_keeps_its_output_as_evidence() -> None:
    _status, found = run("active.dcgm", dcgm=DcgmDiag(level=1, returncode=1, output="Error: unable to connect"))
    (f,) = found
    assert f.code == "gpu.dcgm_failed"
    assert {e.fact: e.value for e in f.evidence}["dcgmi.output"] == "Error: unable to connect"


def test_nccl_tests_bus_bandwidth_is_judged_against_the_smoke_tests_links() -> None:
    link = PcieLink(4, 16, 4, 16)
    mg = MultiGpu(gpus=[0, 1], topology={"0-1": 10}, pcie={"0": link, "1": link})
    row = NcclRow(1 << 30, 1 << 28, "float", "sum", -1, NcclPlace(1e5, 5.0, 5.0, 0), NcclPlace(1e5, 5.0, 5.0, 0))
    status, found = run("active.nccl_tests", smoke=driver_test("smoke", gpu(), ActiveGpu(1), multi_gpu=mg),
                        nccl_tests=NcclTests(rows=[row], out_of_bounds=0, old_format=False, returncode=0))
    assert status == "warn"
    assert [f.code for f in found] == ["multigpu.nccl_bandwidth"]


def test_an_incomplete_recorded_test_is_skipped_not_crashed() -> None:
    from doctor.checks.active import CHECKS
    from doctor.model.facts_active import DcgmMessage, DcgmTest, NcclTests, PeerCopy

    partial = ActiveFacts(
        smoke=DriverTest(mode="smoke", gpus=[ActiveGpu(0, saxpy=Verified(), h2d_gbs=5.0)],
                         multi_gpu=MultiGpu(gpus=[0, 1], copies={"x": PeerCopy(gbs=3.0)})),
        oom=DriverTest(mode="oom", gpus=[ActiveGpu(0, largest_block=5, total_allocatable=10, recovery=Verified())]),
        dcgm=DcgmDiag(tests=[DcgmTest(messages=[DcgmMessage()])]), nccl_tests=NcclTests(rows=[NcclRow()]))
    report = diagnose(make_facts(active=partial), checks=list(CHECKS))
    statuses = {c.id: c.status for c in report.checks}
    assert "crashed" not in statuses.values()
    assert statuses["active.smoke"] == "skipped"
    assert next(c.reason for c in report.checks if c.id == "active.smoke").startswith("the recorded test is incomplete")


# --- the judges read the typed facts as the runners record them ------------------------------------------


def test_nccl_tests_wrong_elements_fail_as_recorded() -> None:
    """The runner records #wrong through the facts' types (a float column: old builds print an error there); a
    count above zero in today's table is wrong sums, whatever type it was stored as."""
    from doctor.model.facts_active import coerce

    place = {"time_us": 1e5, "algbw": 5.0, "busbw": 5.0, "wrong": 0}
    reported = {"rows": [{"size": 1 << 30, "count": 1 << 28, "type": "float", "redop": "sum", "root": -1,
                          "out_of_place": place, "in_place": {**place, "wrong": 3}}],
                "out_of_bounds": 0, "old_format": False, "returncode": 0}
    status, found = run("active.nccl_tests", nccl_tests=coerce(NcclTests, reported))
    assert status == "fail"
    assert [(f.code, f.title) for f in found] == [
        ("multigpu.nccl_wrong_results", "all_reduce_perf: 3 wrong element(s) at 1,073,741,824 B (in-place, float sum)")]


def test_a_framework_child_that_died_before_reporting_is_a_crash_not_a_missing_framework() -> None:
    from doctor.model.facts_active import FrameworkRun

    died = ActiveEnd(event="exit", returncode=-11, stderr="Segmentation fault")
    status, found = run("active.frameworks", frameworks=FrameworkTest(
        pythons=["/p"], requested=["torch"], runs=[FrameworkRun("torch", "/p", last_step="import torch", end=died)]))
    assert status == "fail"
    assert [(f.code, f.title) for f in found] == [
        ("framework.gpu_smoke_failed", "torch in /p: the test process died (exit -11) at: import torch")]
    status, found = run("active.torch", torch=[TorchRun(mode="oom", python="/p", last_step="import torch", end=died)])
    assert status == "fail" and [f.code for f in found] == ["framework.gpu_smoke_failed"]


def test_a_hang_before_any_gpu_resets_gpu_0() -> None:
    hung = DriverTest(mode="smoke", last_step="cuInit", end=ActiveEnd(event="hang", silent_for=30.0, reaped=True))
    status, found = run("active.smoke", smoke=hung)
    (f,) = found
    assert (status, f.code) == ("fail", "gpu.hang")
    assert "could not be killed" not in f.detail
    assert f.fix is not None and f.fix.steps[-1].command == ["nvidia-smi", "--gpu-reset", "-i", "0"]


def _imported_by_check(tmp_path: Any, **active: Any) -> list[str]:
    """The doctor.active* and doctor.checks.active.* modules `gpu-doctor check --facts` imports for a snapshot."""
    import subprocess
    import sys

    snap = tmp_path / "facts.json"
    snap.write_text(make_facts(active=ActiveFacts(**active) if active else None).to_json())
    code = ("import sys, io, contextlib\nfrom doctor.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    try:\n        main(['check', '--facts', {str(snap)!r}])\n    except SystemExit:\n        pass\n"
            "seen = [m for m in sys.modules if m.startswith(('doctor.active', 'doctor.checks.active.'))]\n"
            "print(','.join(sorted(seen)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return [m for m in result.stdout.strip().split(",") if m]


def test_check_imports_no_runner_and_only_the_judges_of_recorded_tests(tmp_path: Any) -> None:
    assert _imported_by_check(tmp_path) == []
    smoke = driver_test("smoke", gpu(saxpy=Verified(elements=4, wrong=0)))
    assert _imported_by_check(tmp_path, smoke=smoke) == ["doctor.checks.active.cuerrors", "doctor.checks.active.gpu"]


@pytest.mark.parametrize(("check_id", "active", "missing"), [
    ("active.dcgm", {"dcgm": DcgmDiag(level=1, tests=[DcgmTest(name="memory", status=None)])}, "DCGM test status"),
    ("active.nccl_tests", {"nccl_tests": NcclTests(rows=[NcclRow(size=1 << 30, in_place=NcclPlace())])},
     "out_of_place result"),
    ("active.torch", {"torch": [TorchRun("allreduce", "/p", installed=True, ok=True, end=EXITED, allreduce=AllReduce(
        world=2, sizes=[AllReduceSize(us=30.0, algbw=35.0, busbw=61.2, correct=True)]))]}, "size"),
    ("active.smoke", {"smoke": driver_test("smoke", gpu(h2d_gbs=20.0))}, "copy size"),
])
def test_a_record_without_a_value_its_test_always_reports_is_skipped_and_names_it(
        check_id: str, active: dict[str, Any], missing: str) -> None:
    chk = by_id(check_id)
    assert chk is not None
    report = diagnose(make_facts(active=ActiveFacts(**active)), checks=[chk])
    (result,) = report.checks
    assert (result.status, result.reason) == ("skipped", f"the recorded test is incomplete (Incomplete: the record "
                                                         f"has no {missing})")
    assert report.findings == []
