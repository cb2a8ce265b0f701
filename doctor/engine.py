"""facts → checks → findings → report. Pure: no probing, no printing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from doctor.facts import Facts
from doctor.findings import SEVERITY_RANK, Finding
from doctor.registry import Check, Context
from doctor.safeio import lazy_compile

REPORT_SCHEMA = "gpu-doctor.report/v1"
# A machine is called ready only when a check about the driver, the GPUs, the frameworks or an active test
# concluded something; these areas alone (what is installed beside them) are not enough.
CONTEXT_AREAS = ("CUDA toolkit", "cuDNN", "Environment", "Requirements")


@dataclass(frozen=True)
class CheckResult:
    id: str
    area: str
    summary: str
    status: str  # ok | info | warn | fail | skipped | not_applicable | crashed
    reason: str | None = None


@dataclass(frozen=True)
class Report:
    facts: Facts
    findings: list[Finding] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    matrix: str | None = None  # which compatibility matrix the checks read
    mode: str | None = None  # "static" for an image build checked with --static

    def with_findings(self, extra: list[Finding]) -> Report:
        """This report plus findings decided outside the check registry (the --require gates)."""
        results = [CheckResult(f.code, f.area, f.title, f.severity) for f in extra]
        return Report(facts=self.facts, findings=[*self.findings, *extra], checks=[*self.checks, *results],
                      matrix=self.matrix, mode=self.mode)

    @property
    def has_evidence(self) -> bool:
        """A verdict needs evidence: some check about the driver, the GPUs or the frameworks concluded
        something (ok, info, warn or fail). A report that says nothing is not "ready"."""
        return any(f.area not in CONTEXT_AREAS and f.code != "doctor.check_crashed" for f in self.findings) \
            or self.mode == "static"

    @property
    def status(self) -> str:
        """fail | warn | ok | unknown. ``unknown``: nothing failed, and the driver, GPU and framework areas
        were all skipped or not applicable — there was too little evidence to call the machine ready."""
        worst = max((SEVERITY_RANK[f.severity] for f in self.findings), default=0)
        if worst == 3:
            return "fail"
        if not self.has_evidence:
            return "unknown"
        return "warn" if worst == 2 else "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "status": self.status,
            "matrix": self.matrix,
            "findings": [f.to_dict() for f in self.findings],
            "checks": [c.__dict__ for c in self.checks],
            "facts": self.facts.to_dict(),
        }


def diagnose(facts: Facts, checks: list[Check] | None = None, ctx: Context | None = None) -> Report:
    from doctor.checks import REGISTRY

    if ctx is None:
        from doctor.matrix import current

        ctx = Context(matrix=current())
    findings: list[Finding] = []
    results: list[CheckResult] = []
    for chk in checks if checks is not None else REGISTRY:
        status, reason, found = chk.run(facts, ctx)
        findings += found
        results.append(CheckResult(chk.id, chk.area, chk.summary, status, reason))
    if not collected_by_probes(facts):
        results = [replace(r, reason=replayed_reason(r.reason)) if r.status == "skipped" else r for r in results]
    matrix = ctx.matrix.describe() if hasattr(ctx.matrix, "describe") else None
    return Report(facts=facts, findings=planned_fixes(facts, findings, ctx), checks=results, matrix=matrix)


def planned_fixes(facts: Facts, findings: list[Finding], ctx: Context) -> list[Finding]:
    """The findings with the fix the one plan gives them (doctor.fixplan), so `check`, `explain`, the TUI and
    `fix` say the same thing. A planner failure leaves the checks' own fix text: the report still stands."""
    if not any(f.intents for f in findings):
        return findings
    from doctor.fixplan import build_plan, with_plan_fixes
    from doctor.matrix import Matrix

    if not isinstance(ctx.matrix, Matrix):
        return findings
    from doctor.fixplan import Options

    try:
        python_plan = build_plan(facts, findings, ctx.matrix, Options(python_only=True)) if any(
            any(i.python_only for i in f.intents) and not all(i.python_only for i in f.intents) for f in findings
        ) else None
        return with_plan_fixes(findings, build_plan(facts, findings, ctx.matrix), python_plan)
    except Exception:
        return findings


def collected_by_probes(facts: Facts) -> bool:
    """Were these facts probed on a machine (live or a snapshot), not parsed from a pasted report?"""
    return str(facts.sources.get("driver", "")).startswith("probes")


# A skip reason that names where this machine's probes look: true of a probed machine, wrong for a report.
_LOCAL_PROBE = lazy_compile(r"/proc|/sys|/lib/modules|EFI|mokutil|NVML|nvidia-smi|not probed|unreadable|readable")


def replayed_reason(reason: str | None) -> str | None:
    """A skip reason as it reads for facts parsed from a report: the report did not say, no probe failed."""
    if not reason or "report" in reason or not _LOCAL_PROBE.search(reason):
        return reason
    base = re.sub(r"\s*\([^()]*\)", lambda m: "" if _LOCAL_PROBE.search(m.group(0)) else m.group(0), reason)
    return f"not in the report: {base.strip()}"


def generate_report_schema() -> dict[str, Any]:
    """The JSON Schema of report v1 (written to doctor/schemas/report-v1.json by scripts/gen_schema.py)."""
    from doctor.facts import generate_facts_schema, schema_for

    defs: dict[str, Any] = {}
    finding = schema_for(Finding, defs)
    check = schema_for(CheckResult, defs)
    facts = generate_facts_schema()
    defs.update(facts.pop("$defs"))
    for key in ("$schema", "$id", "title"):
        facts.pop(key)
    defs["Facts"] = facts
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/nvgpu-doctor/schemas/report-v1.json",
        "title": "gpu-doctor report, version 1",
        "type": "object",
        "properties": {
            "schema": {"const": REPORT_SCHEMA},
            "status": {"enum": ["ok", "warn", "fail", "unknown"]},
            "matrix": {"type": ["string", "null"]},
            "findings": {"type": "array", "items": finding},
            "checks": {"type": "array", "items": check},
            "facts": {"$ref": "#/$defs/Facts"},
        },
        "required": ["schema", "status", "matrix", "findings", "checks", "facts"],
        "$defs": dict(sorted(defs.items())),
    }
