"""`smoke --level 3`: DCGM's `dcgmi diag` text output parsed into findings, on real outputs (tests/data/dcgmi/,
sources in its SOURCES.md), and the delegation with stand-in `dcgmi` scripts on PATH (host engine missing, a
recorded run, a hang)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from test_smoke_fake import build_fakes, gpu_doctor

from doctor.active.dcgm import dcgm_events, level_for, parse_dcgmi_diag
from doctor.active.events import Outcome, last_outcome
from doctor.checks.active import dcgm
from doctor.host import Host
from doctor.model.facts_active import DcgmDiag, coerce
from doctor.model.findings import Finding
from doctor.pipeline import judged

# The judges read the typed facts a runner records: each case below is given as the child reported it.


def diag_findings(parsed: dict[str, Any], returncode: int | None, level: int) -> list[Finding]:
    return dcgm.diag_findings(coerce(DcgmDiag, parsed), returncode, level)

DATA = Path(__file__).parent / "data" / "dcgmi"
PASS = DATA / "h100-3.3.8-r2-pass.txt"
FAIL = DATA / "8x-h100-3.3.8-r3-fail-early-gpu-memory-fail.txt"
CUINIT = ("Error using CUDA API cuInit Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun "
          "diagnostics. Unable to initialize CUDA library: 'system not yet initialized'. . Please check if a CUDA "
          "sample program can be run successfully on this host. Refer to https://github.com/nvidia/cuda-samples")


@pytest.mark.parametrize(("path", "version", "driver", "ids", "n_tests", "statuses"), [
    (PASS, "3.3.8", "535.309.01", "2330", 11,
     {"Denylist": ("Deployment", "Pass", None), "PCIe": ("Integration", "Pass", "All"),
      "GPU Memory": ("Hardware", "Pass", "All")}),
    (FAIL, "3.3.8", "560.35.03", ",".join(["2330"] * 8), 13,
     {"Persistence Mode": ("Deployment", "Pass", None), "PCIe": ("Integration", "Skip", "All"),
      "GPU Memory": ("Hardware", "Fail", "All"), "EUD Test": ("Stress", "Skip", "All")}),
])
def test_parse_real_text_tables(path: Path, version: str, driver: str, ids: str, n_tests: int,
                                statuses: dict[str, tuple[str, str, str | None]]) -> None:
    parsed = parse_dcgmi_diag(path.read_text())
    assert (parsed["version"], parsed["driver"], parsed["device_ids"]) == (version, driver, ids)
    assert parsed["table"] and len(parsed["tests"]) == n_tests
    by_name = {t["name"]: t for t in parsed["tests"]}
    for name, (category, status, scope) in statuses.items():
        assert (by_name[name]["category"], by_name[name]["status"], by_name[name]["scope"]) == (category, status, scope)


def test_wrapped_messages_are_joined_exactly() -> None:
    info = parse_dcgmi_diag(PASS.read_text())["tests"][4]["messages"]
    assert info == [{"kind": "Info", "text": 'Persistence mode for GPU 0 is disabled. Enable persistence mode by '
                     'running "nvidia-smi -i <gpuId> -pm 1 " as root.'}]
    memory = next(t for t in parse_dcgmi_diag(FAIL.read_text())["tests"] if t["name"] == "GPU Memory")
    assert [m["text"] for m in memory["messages"]] == [f"GPU {g} {CUINIT}" for g in range(8)]
    assert {m["kind"] for m in memory["messages"]} == {"Warning"}


def test_all_pass_is_ok() -> None:
    (f,) = diag_findings(parse_dcgmi_diag(PASS.read_text()), 0, 2)
    assert (f.code, f.severity, f.title) == ("gpu.dcgm", "ok", "DCGM diag -r 2: 11 test(s) passed (DCGM 3.3.8)")


def test_failed_test_is_a_failure_per_gpu_with_dcgms_message_and_skips_are_listed() -> None:
    findings = diag_findings(parse_dcgmi_diag(FAIL.read_text()), 226, 3)
    fails = [f for f in findings if f.severity == "fail"]
    assert [f.title for f in fails] == [f"GPU {g}: DCGM 'GPU Memory' failed: GPU {g} {CUINIT}" for g in range(8)]
    assert {f.code for f in fails} == {"gpu.dcgm_failed"}
    assert fails[0].detail == "dcgmi diag -r 3, Hardware test 'GPU Memory': Fail - All."
    (skip,) = [f for f in findings if f.severity == "info"]
    assert skip.title == "DCGM skipped 3 test(s): PCIe, Memory Bandwidth, EUD Test"


def test_no_table_is_a_failure() -> None:
    (f,) = diag_findings(parse_dcgmi_diag(""), 255, 1)
    assert (f.severity, f.title) == ("fail", "dcgmi diag -r 1 gave no result table (exit 255)")


@pytest.mark.parametrize(("seconds", "level"), [(1, 1), (299, 1), (300, 2), (1199, 2), (1200, 3), (1800, 3)])
def test_level_from_the_time_budget(seconds: int, level: int) -> None:
    assert level_for(seconds) == level


def fake_dcgmi(directory: Path, discovery: str, diag: str) -> Path:
    """A stand-in `dcgmi`: shell snippets for `discovery` and `diag`; it logs its arguments."""
    exe = directory / "dcgmi"
    exe.write_text(f'#!/bin/sh\necho "$@" >> "{directory}/argv.log"\ncase "$1" in\n  discovery) {discovery} ;;\n'
                   f"  diag) {diag} ;;\nesac\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def run(directory: Path, seconds: int) -> Outcome:
    return last_outcome(judged(dcgm_events(Host(env={"PATH": f"{directory}{os.pathsep}/usr/bin:/bin"}), seconds)))


def test_missing_dcgmi_is_a_skipped_step(tmp_path: Path) -> None:
    out = run(tmp_path, 1800)
    assert out.status == "ok" and [(f.severity, f.title) for f in out.findings] == [
        ("info", "DCGM diagnostics skipped: dcgmi is not installed")]


def test_no_host_engine_is_a_skipped_step_with_dcgms_reason(tmp_path: Path) -> None:
    fake_dcgmi(tmp_path, "echo 'Error: Unable to establish a connection to the specified host: localhost'; exit 255",
               "exit 99")
    out = run(tmp_path, 1800)
    assert out.status == "ok"
    assert out.findings[0].title == ("DCGM diagnostics skipped: no DCGM host engine answered `dcgmi discovery -l`: "
                                     "Error: Unable to establish a connection to the specified host: localhost")
    assert (tmp_path / "argv.log").read_text() == "discovery -l\n"  # diag never ran


def test_recorded_run_through_the_subprocess(tmp_path: Path) -> None:
    fake_dcgmi(tmp_path, "echo '8 GPUs found.'", f"cat '{FAIL}'; exit 226")
    out = run(tmp_path, 1800)
    assert out.status == "fail" and len([f for f in out.findings if f.severity == "fail"]) == 8
    assert (tmp_path / "argv.log").read_text() == "discovery -l\ndiag -r 3\n"
    assert out.results["dcgm"]["level"] == 3 and out.results["dcgm"]["version"] == "3.3.8"


def test_a_small_budget_runs_level_1_and_a_hang_is_a_clean_finding(tmp_path: Path) -> None:
    fake_dcgmi(tmp_path, "echo '1 GPU found.'", "sleep 30")
    out = run(tmp_path, 1)
    assert (tmp_path / "argv.log").read_text() == "discovery -l\ndiag -r 1\n"
    (f,) = out.findings
    assert (out.status, f.code, f.title) == ("fail", "gpu.hang", "dcgmi diag -r 1 did not finish: timed out after 1s")


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fakes(tmp_path_factory)


def test_level_3_cli_reads_a_recorded_dcgm_run(fake_driver: Path, tmp_path: Path) -> None:
    fake_dcgmi(tmp_path, "echo '1 GPU found.'", f"cat '{PASS}'")
    result = gpu_doctor(fake_driver, "smoke", "--level", "3", "--dcgm-seconds", "300", "--size-mib", "4", "--json",
                        "-q", PATH=f"{tmp_path}{os.pathsep}/usr/bin:/bin")
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert {"gpu.smoke", "gpu.burn", "gpu.dcgm", "multigpu.nccl"} <= {f["code"] for f in doc["findings"]}
    assert doc["active"]["results"]["dcgm"]["level"] == 2
    assert "DCGM diag -r 2: 11 test(s) passed (DCGM 3.3.8)" in {f["title"] for f in doc["findings"]}


def test_level_3_cli_rejects_a_bad_budget(fake_driver: Path) -> None:
    result = gpu_doctor(fake_driver, "smoke", "--level", "3", "--dcgm-seconds", "0", "-q")
    assert result.returncode == 2
