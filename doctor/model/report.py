"""The report: the findings and the check results over one set of facts (schema ``gpu-doctor.report/v1``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from doctor.model.facts import Facts
from doctor.model.findings import Finding
from doctor.model.severity import SEVERITY_RANK

REPORT_SCHEMA = "gpu-doctor.report/v1"
# A machine is called ready only when a check about the driver, the GPUs, the frameworks or an active test
# concluded something; these areas alone (what is installed beside them) are not enough.
CONTEXT_AREAS = ("CUDA toolkit", "cuDNN", "Environment", "Requirements")
# Findings that judge nothing GPU-related: a CPU-only build on a machine where no GPU was seen is consistent,
# but says nothing about whether GPU work would run ("ready" needs evidence about a driver, a GPU or a GPU build).
NOT_GPU_EVIDENCE = (("framework.cpu_only_build", "info"),)


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
        return any(f.area not in CONTEXT_AREAS and f.code != "doctor.check_crashed"
                   and (f.code, f.severity) not in NOT_GPU_EVIDENCE for f in self.findings) \
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


def collected_by_probes(facts: Facts) -> bool:
    """Were these facts probed on a machine (live or a snapshot), not parsed from a pasted report?"""
    return str(facts.sources.get("driver", "")).startswith("probes")


def generate_report_schema() -> dict[str, Any]:
    """The JSON Schema of report v1 (written to doctor/schemas/report-v1.json by scripts/gen_schema.py)."""
    from doctor.model.facts import generate_facts_schema, schema_for

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
