"""facts → checks → findings → report. Pure: no probing, no printing, no planning (doctor.pipeline plans)."""

from __future__ import annotations

import re
from dataclasses import replace

from doctor import beliefs
from doctor.checks import REGISTRY
from doctor.model.facts import Facts
from doctor.model.findings import Finding
from doctor.model.report import CheckResult, Report, collected_by_probes
from doctor.registry import Check, Context
from doctor.safeio import lazy_compile


def diagnose(facts: Facts, checks: list[Check] | None, ctx: Context) -> Report:
    """Run these checks (every registered one when None) over the facts, with the matrix ``ctx`` carries.

    The findings carry the checks' own fix text: the plan's (doctor.pipeline) replaces it."""
    if checks is None:
        checks = REGISTRY
    findings: list[Finding] = []
    results: list[CheckResult] = []
    for chk in checks:
        status, reason, found = chk.run(facts, ctx)
        findings += found
        results.append(CheckResult(chk.id, chk.area, chk.summary, status, reason))
    if not collected_by_probes(facts):
        results = [replace(r, reason=replayed_reason(r.reason)) if r.status == "skipped" else r for r in results]
    matrix = ctx.matrix.describe() if ctx.matrix is not None else None
    return Report(facts=facts, findings=findings, checks=results, matrix=matrix,
                  driver_version=beliefs.of(facts).driver_version.value)


# A skip reason that names where this machine's probes look: true of a probed machine, wrong for a report.
_LOCAL_PROBE = lazy_compile(r"/proc|/sys|/lib/modules|EFI|mokutil|NVML|nvidia-smi|not probed|unreadable|readable")


def replayed_reason(reason: str | None) -> str | None:
    """A skip reason as it reads for facts parsed from a report: the report did not say, no probe failed."""
    if not reason or "report" in reason or not _LOCAL_PROBE.search(reason):
        return reason
    base = re.sub(r"\s*\([^()]*\)", lambda m: "" if _LOCAL_PROBE.search(m.group(0)) else m.group(0), reason)
    return f"not in the report: {base.strip()}"
