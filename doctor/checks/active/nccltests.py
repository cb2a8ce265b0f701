"""nccl-tests' `all_reduce_perf` (`gpu-doctor smoke --level 3`), judged: the recorded
:class:`~doctor.model.facts_active.NcclTests` and the links the smoke test's multi-GPU phase read in, findings
out. Pure.

A non-zero #wrong or out-of-bounds count is a failure: NCCL returned wrong sums. The bus bandwidth at the largest
size is judged against the link the multi-GPU phase of the smoke test read (NVLink links or the PCIe link,
:func:`doctor.checks.active.multigpu.expected_gbs`): below 40 % of the slowest pair's rate is a warning; where the
topology gives no rate (NODE/SYS paths) it is only reported.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations

from doctor.checks.active.multigpu import expected_gbs
from doctor.model.facts_active import MultiGpu, NcclTests, known
from doctor.model.findings import Evidence, Finding, Fix, FixStep
from doctor.model.severity import Severity

AREA = "Multi-GPU (nccl-tests)"
WARN_FRACTION = 0.4


def expected_busbw(mg: MultiGpu | None) -> tuple[float | None, str | None]:
    """The slowest pair's link rate among the tested GPUs (a ring is as fast as its slowest hop), or None when
    any pair's path has no known rate."""
    if mg is None or len(mg.gpus) < 2:
        return None, None
    rates = []
    for a, b in combinations(mg.gpus, 2):
        rate, what = expected_gbs(mg, a, b)
        if rate is None:
            return None, None
        rates.append((rate, f"GPU {a}-{b}: {what}"))
    return min(rates)


def nccl_findings(nccl: NcclTests, returncode: int | None, mg: MultiGpu | None) -> list[Finding]:
    """Wrong results fail; a bus bandwidth far below the link warns; otherwise the number as ok."""
    ev = [Evidence("all_reduce_perf.exit", returncode, "cmd:all_reduce_perf"),
          Evidence("all_reduce_perf.avg_busbw", nccl.avg_busbw, "cmd:all_reduce_perf (# Avg bus bandwidth)")]
    out = []
    if not nccl.rows:
        return [_f("multigpu.nccl_failed", "fail", "all_reduce_perf printed no result table"
                   + (f" (exit {returncode})" if returncode else ""),
                   "It failed before measuring; its output is in the evidence.", ev)]
    for r in nccl.rows:
        for where, place in (("out_of_place", r.out_of_place), ("in_place", r.in_place)):
            wrong = known(place, f"{where} result").wrong
            # A count in today's table (an error magnitude in the old format's column, not judged)
            if not nccl.old_format and wrong is not None and wrong > 0:
                out.append(_f("multigpu.nccl_wrong_results", "fail",
                              f"all_reduce_perf: {wrong:g} wrong element(s) at {r.size:,} B "
                              f"({where.replace('_', '-')}, {r.type} {r.redop})",
                              "NCCL's all-reduce returned wrong sums: a GPU, its memory or a peer link corrupts "
                              "data (or a broken P2P/IOMMU setup).", ev,
                              "Retry with NCCL_P2P_DISABLE=1: if the errors go away, the peer path is at fault "
                              "(disable the IOMMU / PCIe ACS); check the kernel log for Xid errors.",
                              [FixStep(["sh", "-c", "dmesg | grep -iE 'NVRM|Xid|AER'"], root=True)]))
    if nccl.out_of_bounds:
        out.append(_f("multigpu.nccl_wrong_results", "fail",
                      f"all_reduce_perf: {nccl.out_of_bounds} out-of-bounds value(s) (FAILED)",
                      "nccl-tests counted results outside the expected range.", ev))
    if out:
        return out
    last = nccl.rows[-1]
    busbw = known(last.out_of_place, "out-of-place result").busbw
    expect, what = expected_busbw(mg)
    size = f"{last.size:,} B"
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
    avg = f"; average {nccl.avg_busbw:g} GB/s" if nccl.avg_busbw is not None else ""
    return [_f("multigpu.nccl", "ok", f"all_reduce_perf: results correct; bus bandwidth {busbw} GB/s at {size}"
               f"{judged}{avg}", evidence=ev)]


def record_findings(rec: NcclTests, mg: MultiGpu | None) -> list[Finding]:
    """The findings of a recorded all_reduce_perf run (facts ``active.nccl_tests``), judged against the links
    the smoke test's multi-GPU phase read (``mg``)."""
    if rec.skipped:
        return [_f("multigpu.nccl", "info", f"nccl-tests skipped: {rec.skipped}",
                   "Level 3 runs nccl-tests' all_reduce_perf (github.com/NVIDIA/nccl-tests) across the tested GPUs "
                   "when it is on PATH.")]
    if rec.error:
        return [_f("multigpu.nccl_hang", "fail", f"all_reduce_perf did not finish: {rec.error}",
                   "An all-reduce that never completes: a peer link or NVSwitch fabric that does not deliver "
                   "(fabric manager down, broken P2P).", [Evidence("all_reduce_perf.error", rec.error,
                                                                   "cmd:all_reduce_perf")])]
    findings = nccl_findings(rec, rec.returncode, mg)
    if not rec.rows:
        findings = [replace(f, evidence=[*f.evidence, Evidence("all_reduce_perf.output", rec.output,
                                                               "cmd:all_reduce_perf")]) for f in findings]
    return findings


def _f(code: str, severity: Severity, title: str, detail: str = "", evidence: list[Evidence] | None = None,
       fix: str | None = None, steps: list[FixStep] | None = None) -> Finding:
    return Finding(code=code, severity=severity, title=title, detail=detail,
                   evidence=evidence or [], fix=Fix(fix, steps or []) if fix else None, area=AREA, check=code)
