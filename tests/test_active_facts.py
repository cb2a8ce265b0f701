"""Active tests as facts: what `smoke` / `oom` measured is recorded in the snapshot (facts ``active``) and judged
by registered checks, so a snapshot replays to the same findings anywhere. Driven by the C fakes of libcuda and
NVML (see test_smoke_fake.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hostile import popen_signalled
from test_smoke_fake import A100, GPU_DOCTOR, MIB, build_fakes, env_for

from doctor.active.events import Outcome, last_outcome
from doctor.active.gpu import Options, oom_events, smoke_events
from doctor.checks import REGISTRY
from doctor.checks.active import CHECKS
from doctor.commands.smoke import with_active
from doctor.model.facts import Facts, load_facts
from doctor.model.facts_active import ActiveFacts, ActiveGpu, DriverTest, FrameworkRun, NvmlReading, coerce, driver_test
from doctor.pipeline import diagnose, judged

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fakes(tmp_path_factory)


def smoke(libs: Path, **knobs: Any) -> Outcome:
    return last_outcome(judged(smoke_events(Options(timeout=20, size_mib=4, fma_ms=50, env=env_for(libs, **knobs)))))


def oom(libs: Path, force: bool = False, **knobs: Any) -> Outcome:
    return last_outcome(judged(oom_events(Options(force=force, timeout=20, env=env_for(libs, **knobs)))))


def replayed(outcome: Outcome) -> list[dict[str, Any]]:
    """The active findings `check --facts` gives for a snapshot holding what the test recorded."""
    text = with_active(Facts(), outcome).to_json()
    report = diagnose(load_facts(text))
    return [f.to_dict() for f in report.findings if f.check.startswith("active.")]


# --- replay -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_slow_gpus(fake_driver: Path) -> Outcome:
    """Two GPUs, one of them with slow memory and a thermal slowdown under load: ok, warn and info findings,
    per-GPU and multi-GPU."""
    names = f"{A100}|{H100}"
    return smoke(fake_driver, FAKE_CUDA_DEVICES="8.0|9.0", FAKE_CUDA_NAMES=names, FAKE_NVML_GPUS=names,
                 FAKE_CUDA_MEM_BW_GBS=700, FAKE_CUDA_LAUNCH_SETENV="FAKE_NVML_GPU0_THROTTLE=0x40")


def test_a_snapshot_with_smoke_results_replays_to_identical_findings(two_slow_gpus: Outcome) -> None:
    live = [f.to_dict() for f in two_slow_gpus.findings]
    assert {f["severity"] for f in live} >= {"ok", "warn", "info"}
    assert {f["check"] for f in live} == {"active.smoke", "active.multi_gpu"}
    assert replayed(two_slow_gpus) == live


def test_a_snapshot_with_oom_and_failures_replays_to_identical_findings(fake_driver: Path) -> None:
    for outcome in (oom(fake_driver, FAKE_CUDA_MEM_MIB=2048, FAKE_CUDA_MAX_BLOCK_MIB=1024),
                    smoke(fake_driver, FAKE_CUDA_SYNC_ERROR=719),
                    smoke(fake_driver, FAKE_CUDA_INIT=803)):
        assert outcome.findings
        assert replayed(outcome) == [f.to_dict() for f in outcome.findings]


def test_the_recorded_measurements_are_typed_facts_with_their_sources(two_slow_gpus: Outcome) -> None:
    active = two_slow_gpus.active
    assert isinstance(active, ActiveFacts) and active.smoke is not None
    test = active.smoke
    assert (test.mode, test.device_count, test.done, test.end and test.end.event) == ("smoke", 2, True, "exit")
    assert test.source and "libcuda" in test.source and test.doctor_version
    assert (test.driver_version, test.cuda_driver_version) == ("550.54.15", 12040)  # the fakes' defaults
    g0 = test.gpus[0]
    assert (g0.name, g0.context_created, g0.saxpy and g0.saxpy.wrong) == (A100, True, 0)
    assert g0.device_gbs == pytest.approx(700, rel=1e-3)
    assert g0.nvml_before is not None and g0.nvml_during is not None and g0.nvml_during.throttle_reasons
    assert test.multi_gpu is not None and test.multi_gpu.gpus == [0, 1]
    assert set(test.multi_gpu.copies) == {"0>1", "1>0"}


def test_cli_smoke_snapshot_and_check_facts_agree(fake_driver: Path, tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    env = env_for(fake_driver, FAKE_CUDA_MEM_BW_GBS=700)
    live = subprocess.run([str(GPU_DOCTOR), "smoke", "--json", "-q", "--size-mib", "4", "--snapshot", str(snap)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert live.returncode == 0, live.stderr
    replay = subprocess.run([str(GPU_DOCTOR), "check", "--facts", str(snap), "--json"], capture_output=True,
                            text=True, env=env, timeout=120, check=False)
    assert "Traceback" not in replay.stderr, replay.stderr
    active = [f for f in json.loads(replay.stdout)["findings"] if f["check"].startswith("active.")]
    assert active == json.loads(live.stdout)["findings"]
    assert any(f["severity"] == "warn" and "device memory bandwidth" in f["title"] for f in active)
    text = subprocess.run([str(GPU_DOCTOR), "check", "--facts", str(snap)], capture_output=True, text=True,
                          env=env, timeout=120, check=False).stdout
    assert "only 45% of NVIDIA's published peak" in text


def test_a_snapshot_without_active_results_makes_the_active_checks_not_applicable() -> None:
    report = diagnose(load_facts(Facts().to_json().replace('"active": null,', "")))
    results = {c.id: c.status for c in report.checks if c.id.startswith("active.")}
    assert results == {c.id: "not_applicable" for c in CHECKS}


def test_every_active_finding_code_is_listed_by_a_registered_check(two_slow_gpus: Outcome) -> None:
    listed = {code for c in REGISTRY for code in c.all_codes}
    for code in ("gpu.smoke", "gpu.underperforming", "gpu.throttling", "gpu.hang", "oom.refused", "oom.capacity",
                 "multigpu.peer_bandwidth", "multigpu.nccl_bandwidth", "gpu.burn_faulty", "gpu.dcgm_failed",
                 "framework.cpu_only_build", "gpu.kernel_failed", "oom.batch_size"):
        assert code in listed, code
    assert {f.code for f in two_slow_gpus.findings} <= listed


# --- a child's report is data, never trusted -------------------------------------------------------------


@pytest.mark.parametrize("junk", [None, 3, "x", [], {"gpus": 5}, {"gpus": [{"ordinal": "zero"}]},
                                  {"global": {"device_count": "2"}, "gpus": [{"ordinal": 0, "h2d_gbs": "fast",
                                                                              "saxpy": [1, 2], "errors": "none"}]},
                                  {"gpus": [{"ordinal": 0, "fp32_tflops": 1e400, "nvml_before": {"processes": 7}}]}])
def test_wrong_types_from_the_child_read_as_unknown(junk: Any) -> None:
    results = junk if isinstance(junk, dict) else {"gpus": junk}
    test = driver_test(results)
    assert isinstance(test, DriverTest)
    for g in test.gpus:
        assert g.h2d_gbs is None and g.saxpy is None and g.fp32_tflops is None
    diagnose(Facts(active=ActiveFacts(smoke=test)))  # judged without crashing


def test_a_framework_run_without_its_name_is_dropped() -> None:
    assert coerce(FrameworkRun, {"python": "/usr/bin/python3"}) is None
    assert coerce(FrameworkRun, {"framework": "torch", "python": "/p", "cudnn": 8902}).cudnn == "8.9.2"


# --- the OOM probe never starves someone else --------------------------------------------------------------


def test_oom_refuses_when_nvml_cannot_list_processes_but_half_the_memory_is_used(
        fake_driver: Path, tmp_path: Path) -> None:
    log = tmp_path / "fake_cuda.log"
    out = oom(fake_driver, FAKE_NVML_GPU0_PROCS="err:3", FAKE_CUDA_MEM_MIB=8192, FAKE_NVML_GPU0_MEM_TOTAL_MIB=8192,
              FAKE_NVML_GPU0_MEM_USED_MIB=4096, FAKE_CUDA_USED_MIB=4096, FAKE_CUDA_LOG=log)
    (f,) = [f for f in out.findings if f.code == "oom.refused"]
    assert (f.severity, f.title) == ("warn", f"GPU 0 ({A100}): the OOM probe did not run: 4,096 MiB of 8,192 MiB are "
                                             "in use, by processes NVML does not list (another container or user)")
    assert "--force" in (f.fix.summary if f.fix else "")
    assert not log.exists() or "alloc" not in log.read_text()
    assert out.active.oom.gpus[0].refused_reason == "memory_in_use"


def test_oom_refuses_when_nvml_is_unavailable_although_cuda_works(fake_driver: Path, tmp_path: Path) -> None:
    log = tmp_path / "fake_cuda.log"
    out = oom(fake_driver, FAKE_NVML_INIT_ERROR=9, FAKE_CUDA_LOG=log)
    (f,) = [f for f in out.findings if f.code == "oom.refused"]
    assert f.title.startswith(f"GPU 0 ({A100}): the OOM probe did not run: whether another program uses this GPU "
                              "is unknown (")
    assert not log.exists() or "ctx_create" not in log.read_text()


def test_oom_runs_on_an_idle_gpu_whose_process_list_is_not_supported(fake_driver: Path) -> None:
    out = oom(fake_driver, FAKE_NVML_GPU0_PROCS="err:3", FAKE_CUDA_MEM_MIB=2048, FAKE_CUDA_MAX_BLOCK_MIB=1024)
    assert not [f for f in out.findings if f.code == "oom.refused"]
    assert out.active.oom.gpus[0].total_allocatable == 2048 * MIB


def test_oom_force_runs_where_the_memory_in_use_is_unexplained(fake_driver: Path) -> None:
    out = oom(fake_driver, force=True, FAKE_NVML_GPU0_PROCS="err:3", FAKE_CUDA_MEM_MIB=8192,
              FAKE_NVML_GPU0_MEM_TOTAL_MIB=8192, FAKE_NVML_GPU0_MEM_USED_MIB=4096, FAKE_CUDA_USED_MIB=4096)
    (f,) = [f for f in out.findings if f.code == "oom.capacity"]
    assert "4,096 MiB was in use before the test beyond the processes NVML lists" in f.detail
    assert out.active.oom.force is True


def _children_with(token: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token.encode() in (entry / "environ").read_bytes() and \
                    b"gpu_child" in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGHUP])
def test_the_test_child_dies_with_the_doctor(fake_driver: Path, sig: signal.Signals) -> None:
    """A kernel that never finishes holds the GPU's memory; killing the doctor must end the child too."""
    token = f"FAKE_ORPHAN_TOKEN={uuid.uuid4()}"
    env = env_for(fake_driver, FAKE_CUDA_HANG="sync", FAKE_CUDA_FAULT_KERNEL="saxpy")
    env[token.split("=")[0]] = token.split("=")[1]
    doctor = popen_signalled([str(GPU_DOCTOR), "smoke", "-q", "--timeout", "120", "--size-mib", "4"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        children: list[int] = []
        while not children and time.monotonic() < deadline:
            children = _children_with(token.split("=")[1])
            time.sleep(0.1)
        assert children, "the test child never started"
        time.sleep(1.0)  # inside the hung synchronisation, its buffers allocated
        os.kill(doctor.pid, sig)
        doctor.wait(timeout=60)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in children), "the GPU test process outlived the doctor"
    finally:
        if doctor.poll() is None:
            doctor.kill()
            doctor.wait()
        for p in _children_with(token.split("=")[1]):
            os.kill(p, signal.SIGKILL)


# --- types -------------------------------------------------------------------------------------------------


def test_merging_keeps_earlier_tests_and_replaces_a_rerun() -> None:
    first = ActiveFacts(smoke=DriverTest(mode="smoke", gpus=[ActiveGpu(0, fp32_tflops=10.0)]))
    rerun = ActiveFacts(smoke=DriverTest(mode="smoke", gpus=[ActiveGpu(0, fp32_tflops=12.0)]),
                        oom=DriverTest(mode="oom"))
    merged = first.merged(rerun)
    assert merged.smoke is not None and merged.smoke.gpus[0].fp32_tflops == 12.0 and merged.oom is not None
    assert replace(first, oom=None).merged(None) == first
    assert NvmlReading().processes is None  # unknown, not "no process"


# --- fleet and diff ----------------------------------------------------------------------------------------


def _node_facts(device_gbs: float, fp32: float = 19.0) -> Facts:
    g = ActiveGpu(0, name=A100, device_gbs=device_gbs, fp32_tflops=fp32, h2d_gbs=25.0,
                  nvml_before=NvmlReading(name=A100))
    return Facts(collected_at="2026-11-23T10:00:00Z",
                 active=ActiveFacts(smoke=DriverTest(mode="smoke", gpus=[g], done=True)))


def test_fleet_names_the_node_whose_gpu_measured_far_below_its_peers() -> None:
    from doctor.fleet import aggregate, read_node

    texts = {f"node{i}": json.dumps(diagnose(_node_facts(bw)).to_dict(), indent=2)
             for i, bw in enumerate([1450.0, 1440.0, 1460.0, 700.0])}
    texts["node4"] = _node_facts(1455.0).to_json()  # a facts snapshot, diagnosed on the spot
    nodes = [read_node(text, name, f"{name}.json") for name, text in texts.items()]
    assert all(n.rates for n in nodes)
    fleet = aggregate(nodes)
    slow = [o for o in fleet.outliers if o.kind == "gpu-slow"]
    assert [(o.nodes, o.title) for o in slow] == [(("node3",), f"GPU 0 ({A100}): device memory bandwidth 700.0 GB/s, "
                                                   "48% of the fleet's median 1,450.0 GB/s (5 measurements)")]
    assert fleet.status == "warn"
    assert json.loads(json.dumps(fleet.to_dict()))["nodes"][3]["rates"][0]["label"] == "GPU 0 h2d_gbs"


def test_diff_shows_a_node_that_got_slower() -> None:
    from doctor.diff import diff_facts

    changes = [c for c in diff_facts(_node_facts(1450.0), _node_facts(700.0, fp32=18.5)) if c.area == "Active tests"]
    assert [(c.what, c.kind, c.before, c.after) for c in changes] == [
        ("GPU 0 device memory bandwidth", "changed", "1,450.0 GB/s", "700.0 GB/s (52% slower)")]
    assert not [c for c in diff_facts(_node_facts(1450.0), Facts()) if c.area == "Active tests"]


@pytest.mark.slow  # a few seconds each: with the slow tests (CI runs both) to keep the fast set in budget
def test_cli_snapshot_smoke_and_oom_record_both_tests(fake_driver: Path, tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    env = env_for(fake_driver, FAKE_CUDA_MEM_MIB=2048, FAKE_CUDA_MAX_BLOCK_MIB=1024)
    made = subprocess.run([str(GPU_DOCTOR), "snapshot", "--smoke", "--oom", "-o", str(snap)], capture_output=True,
                          text=True, env=env, timeout=180, check=False)
    assert made.returncode == 0, made.stderr
    active = json.loads(snap.read_text())["active"]
    assert active["recorded_at"] and active["smoke"]["gpus"][0]["saxpy"]["wrong"] == 0
    assert active["oom"]["gpus"][0]["largest_block"] == 1024 * MIB
    report = subprocess.run([str(GPU_DOCTOR), "check", "--facts", str(snap), "--json"], capture_output=True,
                            text=True, env=env, timeout=120, check=False)
    checks = {c["id"]: c["status"] for c in json.loads(report.stdout)["checks"] if c["id"].startswith("active.")}
    assert (checks["active.smoke"], checks["active.oom"]) == ("ok", "warn")  # one block: half the memory
    usage = subprocess.run([str(GPU_DOCTOR), "snapshot", "--smoke", "--root", str(tmp_path)], capture_output=True,
                           text=True, env=env, timeout=120, check=False)
    assert usage.returncode == 2 and "not with --root" in usage.stderr
