"""`smoke --level 3`: nccl-tests' `all_reduce_perf` table parsed into findings, on a real output
(tests/data/nccl-tests/, source in its SOURCES.md), and the delegation with a stand-in `all_reduce_perf` on PATH
(a recorded run, a hang, too few GPUs, not installed)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from doctor.active.events import Outcome, last_outcome
from doctor.active.nccltests import nccl_events, parse_all_reduce
from doctor.checks.active import nccltests
from doctor.host import Host
from doctor.model.facts_active import MultiGpu, NcclTests, coerce
from doctor.model.findings import Finding
from doctor.pipeline import judged

# The judges read the typed facts a runner records: each case below is given as the child reported it.


def expected_busbw(mg: dict[str, Any] | None) -> tuple[float | None, str | None]:
    return nccltests.expected_busbw(coerce(MultiGpu, mg))


def nccl_findings(parsed: dict[str, Any], returncode: int | None, mg: dict[str, Any] | None) -> list[Finding]:
    return nccltests.nccl_findings(coerce(NcclTests, parsed), returncode, coerce(MultiGpu, mg))

REAL = Path(__file__).parent / "data" / "nccl-tests" / "16x-h100-2nodes-8B-8G.txt"
LAST = ("  8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0    47743  179.92  337.35"
        "      0")


@pytest.mark.parametrize(("index", "size", "count", "oop", "ip"), [
    (0, 8, 2, (135.8, 0.0, 0.0, 0), (123.5, 0.0, 0.0, 0)),
    (17, 1048576, 262144, (203.2, 5.16, 9.68, 0), (207.2, 5.06, 9.49, 0)),
    (28, 2147483648, 536870912, (12646.0, 169.81, 318.40, 0), (12641.0, 169.88, 318.52, 0)),
    (30, 8589934592, 2147483648, (47535.0, 180.71, 338.82, 0), (47743.0, 179.92, 337.35, 0)),
])
def test_rows_of_a_real_table(index: int, size: int, count: int, oop: tuple[float, ...], ip: tuple[float, ...]) -> None:
    row = parse_all_reduce(REAL.read_text())["rows"][index]
    assert (row["size"], row["count"], row["type"], row["redop"], row["root"]) == (size, count, "float", "sum", -1)
    for where, want in (("out_of_place", oop), ("in_place", ip)):
        r = row[where]
        assert (r["time_us"], r["algbw"], r["busbw"], r["wrong"]) == want


def test_summary_lines_of_a_real_table() -> None:
    p = parse_all_reduce(REAL.read_text())
    assert (len(p["rows"]), p["out_of_bounds"], p["avg_busbw"], p["ranks"], p["ngpus"], p["old_format"]) == (
        31, 0, 70.742, 16, 1, False)


def test_correct_results_without_a_known_link_are_reported_only() -> None:
    (f,) = nccl_findings(parse_all_reduce(REAL.read_text()), 0, None)
    assert (f.code, f.severity, f.title) == (
        "multigpu.nccl", "ok", "all_reduce_perf: results correct; bus bandwidth 338.82 GB/s at 8,589,934,592 B "
        "(no link rate known to judge it against); average 70.742 GB/s")


def nvlinked(links: int, version: int) -> dict[str, Any]:
    bus = {"0": "00000000:18:00.0", "1": "00000000:3B:00.0"}
    return {"gpus": [0, 1], "bus_ids": bus, "topology": {"0-1": 10},
            "nvlinks": {str(g): [{"link": i, "active": True, "version": version, "remote_bus": bus[str(1 - g)]}
                                 for i in range(links)] for g in (0, 1)}}


def pcie(gen: int, width: int, level: int = 10) -> dict[str, Any]:
    return {"gpus": [0, 1], "topology": {"0-1": level}, "nvlinks": {"0": None, "1": None},
            "pcie": {str(g): {"pcie_gen": gen, "pcie_width": width} for g in (0, 1)}}


@pytest.mark.parametrize(("mg", "expect"), [
    (pcie(4, 16), 16 * 16 * 128 / 130 / 8), (pcie(4, 16, level=50), None), (None, None), ({"gpus": [0]}, None),
])
def test_expected_bus_bandwidth_from_the_topology(mg: dict[str, Any] | None, expect: float | None) -> None:
    rate, _what = expected_busbw(mg)
    assert rate == pytest.approx(expect) if expect else rate is None


def test_busbw_far_below_the_nvlink_rate_warns() -> None:
    mg = nvlinked(18, 8)  # 18 links at 50 GB/s: 900 GB/s; 338.82 is 38 %
    rate, _ = expected_busbw(mg)
    (f,) = nccl_findings(parse_all_reduce(REAL.read_text()), 0, mg)
    assert (f.code, f.severity) == ("multigpu.nccl_bandwidth", "warn") and rate == 900.0
    assert f.title == ("all_reduce_perf: bus bandwidth 338.82 GB/s at 8,589,934,592 B, 38% of the 900 GB/s the "
                       "slowest link allows (GPU 0-1: 18 NVLink link(s))")


def test_busbw_against_a_pcie_link_is_ok() -> None:
    (f,) = nccl_findings(parse_all_reduce(REAL.read_text()), 0, pcie(4, 16))
    assert f.severity == "ok" and "1075% of 31.5077 GB/s (GPU 0-1: the PCIe gen 4 x16 link)" in f.title


def test_wrong_results_fail() -> None:
    # Derived variant (not a stored output): the last row's in-place #wrong changed from 0 to 3.
    text = REAL.read_text()
    assert LAST in text
    derived = text.replace(LAST, LAST[:-1] + "3")
    (f,) = nccl_findings(parse_all_reduce(derived), 0, None)
    assert (f.code, f.severity, f.title) == ("multigpu.nccl_wrong_results", "fail",
                                             "all_reduce_perf: 3 wrong element(s) at 8,589,934,592 B (in-place, "
                                             "float sum)")


def test_no_table_fails() -> None:
    (f,) = nccl_findings(parse_all_reduce("test: Test CUDA failure common.cu:941 'system not yet initialized'"), 1,
                         None)
    assert (f.code, f.severity, f.title) == ("multigpu.nccl_failed", "fail",
                                             "all_reduce_perf printed no result table (exit 1)")


def fake(directory: Path, body: str) -> None:
    exe = directory / "all_reduce_perf"
    exe.write_text(f'#!/bin/sh\necho "$@" >> "{directory}/argv.log"\n{body}\n')
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


def run(directory: Path, ngpus: int, mg: dict[str, Any] | None = None, timeout: float = 60) -> Outcome:
    host = Host(env={"PATH": f"{directory}{os.pathsep}/usr/bin:/bin"})
    return last_outcome(judged(nccl_events(host, ngpus, mg, timeout)))


def test_not_installed_is_a_skipped_step(tmp_path: Path) -> None:
    out = run(tmp_path, 2)
    assert out.status == "ok" and [(f.severity, f.title) for f in out.findings] == [
        ("info", "nccl-tests skipped: all_reduce_perf (nccl-tests) is not on PATH")]


def test_one_gpu_is_a_skipped_step(tmp_path: Path) -> None:
    fake(tmp_path, "exit 0")
    out = run(tmp_path, 1)
    assert out.findings[0].title == "nccl-tests skipped: needs ≥2 GPUs, 1 tested"
    assert not (tmp_path / "argv.log").exists()


def test_recorded_run_through_the_subprocess(tmp_path: Path) -> None:
    fake(tmp_path, f"cat '{REAL}'")
    out = run(tmp_path, 2, nvlinked(18, 8))
    assert (tmp_path / "argv.log").read_text() == "-b 8 -e 1G -f 2 -g 2\n"
    assert out.status == "warn" and out.findings[0].code == "multigpu.nccl_bandwidth"
    assert out.results["nccl_tests"]["avg_busbw"] == 70.742


def test_a_hang_is_a_clean_finding(tmp_path: Path) -> None:
    fake(tmp_path, "sleep 30")
    out = run(tmp_path, 4, timeout=1)
    (f,) = out.findings
    assert (out.status, f.code, f.title) == ("fail", "multigpu.nccl_hang",
                                             "all_reduce_perf did not finish: timed out after 1s")
