"""`gpu-doctor smoke --level 3`: hand over to nccl-tests' `all_reduce_perf` when it is on PATH and ≥ 2 GPUs
were tested.

`all_reduce_perf -b 8 -e 1G -f 2 -g <n>` (8 B to 1 GiB, doubling, one process driving the n GPUs) under a
timeout. Its table is read: size, count, type, redop, root, then time / algbw / busbw / #wrong out-of-place and
in-place (older builds print no root column and an `error` column instead of `#wrong`), and the
`# Out of bounds values` and `# Avg bus bandwidth` lines. A non-zero #wrong or out-of-bounds count is a
failure: NCCL returned wrong sums. The bus bandwidth at the largest size is judged against the link the
multi-GPU phase of the smoke test read (NVLink links or the PCIe link, `multigpu.expected_gbs`): below 40 % of
the slowest pair's rate is a warning; where the topology gives no rate (NODE/SYS paths) it is only reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import combinations
from typing import TYPE_CHECKING, Any

from doctor.active.events import Event, Outcome, Progress
from doctor.active.multigpu import expected_gbs
from doctor.model.findings import Evidence, Finding, Fix, FixStep

if TYPE_CHECKING:
    from doctor.host import Host

AREA = "Multi-GPU (nccl-tests)"
DEFAULT_TIMEOUT = 600.0
WARN_FRACTION = 0.4


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # "N/A"


def _place(t: list[str], new_format: bool) -> dict[str, Any]:
    """time, algbw, busbw and #wrong (new format: a count) or error (old format: a float)."""
    wrong = _num(t[3])
    return {"time_us": _num(t[0]), "algbw": _num(t[1]), "busbw": _num(t[2]),
            "wrong": int(wrong) if wrong is not None and new_format else wrong}


def parse_all_reduce(text: str) -> dict[str, Any]:
    """Pure: the rows of the table, the out-of-bounds count and the average bus bandwidth."""
    rows = []
    for line in text.splitlines():
        tok = line.split()
        if len(tok) not in (12, 13) or not tok[0].isdigit() or not tok[1].isdigit():
            continue
        root = int(tok[4]) if len(tok) == 13 else None
        rest = tok[5:] if len(tok) == 13 else tok[4:]
        new = len(tok) == 13
        rows.append({"size": int(tok[0]), "count": int(tok[1]), "type": tok[2], "redop": tok[3], "root": root,
                     "out_of_place": _place(rest[:4], new), "in_place": _place(rest[4:], new)})
    oob = re.search(r"^#?\s*Out of bounds values\s*:\s*(\d+)\s*(\w+)", text, re.M)
    avg = re.search(r"^#?\s*Avg bus bandwidth\s*:\s*([\d.eE+-]+)", text, re.M)
    ngpus = re.search(r"nGpus\s+(\d+)", text)
    return {"rows": rows, "out_of_bounds": int(oob[1]) if oob else None, "avg_busbw": float(avg[1]) if avg else None,
            "ranks": len(re.findall(r"^#\s+Rank\s+\d+", text, re.M)), "ngpus": int(ngpus[1]) if ngpus else None,
            "old_format": bool(rows) and rows[0]["root"] is None}


def expected_busbw(mg: dict[str, Any] | None) -> tuple[float | None, str | None]:
    """The slowest pair's link rate among the tested GPUs (a ring is as fast as its slowest hop), or None when
    any pair's path has no known rate."""
    if not mg or len(mg.get("gpus") or []) < 2:
        return None, None
    rates = []
    for a, b in combinations(mg["gpus"], 2):
        rate, what = expected_gbs(mg, a, b)
        if rate is None:
            return None, None
        rates.append((rate, f"GPU {a}-{b}: {what}"))
    return min(rates)


def nccl_findings(parsed: dict[str, Any], returncode: int | None, mg: dict[str, Any] | None) -> list[Finding]:
    """Pure: wrong results fail; a bus bandwidth far below the link warns; otherwise the number as ok."""
    ev = [Evidence("all_reduce_perf.exit", returncode, "cmd:all_reduce_perf"),
          Evidence("all_reduce_perf.avg_busbw", parsed["avg_busbw"], "cmd:all_reduce_perf (# Avg bus bandwidth)")]
    out = []
    if not parsed["rows"]:
        return [_f("multigpu.nccl_failed", "fail", "all_reduce_perf printed no result table"
                   + (f" (exit {returncode})" if returncode else ""),
                   "It failed before measuring; its output is in the evidence.", ev)]
    for r in parsed["rows"]:
        for where in ("out_of_place", "in_place"):
            wrong = r[where]["wrong"]
            if not parsed["old_format"] and isinstance(wrong, int) and wrong > 0:
                out.append(_f("multigpu.nccl_wrong_results", "fail",
                              f"all_reduce_perf: {wrong} wrong element(s) at {r['size']:,} B "
                              f"({where.replace('_', '-')}, {r['type']} {r['redop']})",
                              "NCCL's all-reduce returned wrong sums: a GPU, its memory or a peer link corrupts "
                              "data (or a broken P2P/IOMMU setup).", ev,
                              "Retry with NCCL_P2P_DISABLE=1: if the errors go away, the peer path is at fault "
                              "(disable the IOMMU / PCIe ACS); check the kernel log for Xid errors.",
                              [FixStep(["sh", "-c", "dmesg | grep -iE 'NVRM|Xid|AER'"], root=True)]))
    if parsed["out_of_bounds"]:
        out.append(_f("multigpu.nccl_wrong_results", "fail",
                      f"all_reduce_perf: {parsed['out_of_bounds']} out-of-bounds value(s) (FAILED)",
                      "nccl-tests counted results outside the expected range.", ev))
    if out:
        return out
    last = parsed["rows"][-1]
    busbw = last["out_of_place"]["busbw"]
    expect, what = expected_busbw(mg)
    size = f"{last['size']:,} B"
    if busbw is not None and expect and busbw < WARN_FRACTION * expect:
        return [_f("multigpu.nccl_bandwidth", "warn",
                   f"all_reduce_perf: bus bandwidth {busbw:g} GB/s at {size}, {busbw / expect:.0%} of the "
                   f"{expect:g} GB/s the slowest link allows ({what})",
                   "A healthy ring reaches most of its slowest link at large sizes. Far below it: a link trained "
                   "down, NVLink down, peer access disabled (traffic through host memory), or another job.",
                   [*ev, Evidence("multigpu.expected_gbs", expect, "nvml (multi-GPU phase)")],
                   "Compare with `nvidia-smi topo -m` and `nvidia-smi nvlink --status`; rerun with NCCL_DEBUG=INFO "
                   "to see the transport NCCL chose.", [FixStep(["nvidia-smi", "topo", "-m"])])]
    judged = f", {busbw / expect:.0%} of {expect:g} GB/s ({what})" if busbw is not None and expect else \
        " (no link rate known to judge it against)"
    avg = f"; average {parsed['avg_busbw']:g} GB/s" if parsed["avg_busbw"] is not None else ""
    return [_f("multigpu.nccl", "ok", f"all_reduce_perf: results correct; bus bandwidth {busbw} GB/s at {size}"
               f"{judged}{avg}", evidence=ev)]


def record_findings(rec: dict[str, Any], mg: dict[str, Any] | None) -> list[Finding]:
    """Pure: the findings of a recorded all_reduce_perf run (facts ``active.nccl_tests``), judged against the
    links the smoke test's multi-GPU phase read (``mg``)."""
    if rec.get("skipped"):
        return [_f("multigpu.nccl", "info", f"nccl-tests skipped: {rec['skipped']}",
                   "Level 3 runs nccl-tests' all_reduce_perf (github.com/NVIDIA/nccl-tests) across the tested GPUs "
                   "when it is on PATH.")]
    if rec.get("error"):
        return [_f("multigpu.nccl_hang", "fail", f"all_reduce_perf did not finish: {rec['error']}",
                   "An all-reduce that never completes: a peer link or NVSwitch fabric that does not deliver "
                   "(fabric manager down, broken P2P).", [Evidence("all_reduce_perf.error", rec["error"],
                                                                   "cmd:all_reduce_perf")])]
    parsed = {"rows": [], "out_of_bounds": None, "avg_busbw": None, "old_format": False, **rec}
    findings = nccl_findings(parsed, rec.get("returncode"), mg)
    if not parsed["rows"]:
        findings = [Finding(**{**f.__dict__, "evidence": [*f.evidence, Evidence(
            "all_reduce_perf.output", rec.get("output"), "cmd:all_reduce_perf")]}) for f in findings]
    return findings


def nccl_events(host: Host, ngpus: int, mg: dict[str, Any] | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> Iterator[Event]:
    exe = "all_reduce_perf"
    if host.which(exe) is None:
        yield _outcome({"skipped": "all_reduce_perf (nccl-tests) is not on PATH"})
        return
    if ngpus < 2:
        yield _outcome({"skipped": f"needs ≥2 GPUs, {ngpus} tested"})
        return
    argv = [exe, "-b", "8", "-e", "1G", "-f", "2", "-g", str(ngpus)]
    yield Progress(None, f"{' '.join(argv)} (up to {timeout:g} s)")
    result = host.run(argv, timeout=timeout)
    rec: dict[str, Any] = {"argv": argv, "returncode": result.returncode}
    if result.error:
        yield _outcome({**rec, "error": result.error}, mg)
        return
    text = result.stdout + "\n" + result.stderr
    parsed = parse_all_reduce(text)
    version = re.search(r"nccl-tests version (\S+)", text)
    nccl = re.search(r"NCCL version (\S+)", text)
    rec.update(version=version[1] if version else None, nccl_version=nccl[1] if nccl else None)
    if not parsed["rows"]:
        rec["output"] = (result.stdout + result.stderr).strip()[-500:]
    yield _outcome({**rec, **parsed}, mg)


def _outcome(rec: dict[str, Any], mg: dict[str, Any] | None = None) -> Outcome:
    """The record judged with the multi-GPU facts of the smoke test that ran before (``mg``)."""
    from doctor.active.record import outcome
    from doctor.model.facts_active import ActiveFacts, MultiGpu, NcclTests, coerce

    smoke = None
    if mg is not None:
        from doctor.model.facts_active import DriverTest

        smoke = DriverTest(mode="smoke", multi_gpu=coerce(MultiGpu, mg))
    summary = f"nccl-tests: skipped ({rec['skipped']})" if rec.get("skipped") else None
    active = ActiveFacts(smoke=smoke, nccl_tests=coerce(NcclTests, rec))
    # Only the nccl-tests part is new: the smoke test's facts were recorded (and judged) by the smoke test; they
    # are the links its bandwidth is measured against.
    return outcome(ActiveFacts(nccl_tests=active.nccl_tests), {"nccl_tests": rec}, summary,
                   context=ActiveFacts(smoke=smoke), checks=("active.nccl_tests",))


def _f(code: str, severity: str, title: str, detail: str = "", evidence: list[Evidence] | None = None,
       fix: str | None = None, steps: list[FixStep] | None = None) -> Finding:
    return Finding(code=code, severity=severity, title=title, detail=detail,  # type: ignore[arg-type]
                   evidence=evidence or [], fix=Fix(fix, steps or []) if fix else None, area=AREA, check=code)
