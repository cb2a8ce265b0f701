"""The report: the findings and the check results over one set of facts (schema ``gpu-doctor.report/v1``)."""

from __future__ import annotations

from dataclasses import field, replace
from typing import Any

from doctor.model.facts import Facts, generate_facts_schema, schema_for
from doctor.model.findings import Finding
from doctor.model.records import dataclass
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
    """How one check ended: its status, and why when it did not run."""
    id: str
    area: str
    summary: str
    status: str  # ok | info | warn | fail | skipped | not_applicable | crashed
    reason: str | None = None


@dataclass(frozen=True)
class Report:
    """The diagnosis of one machine: its facts, the findings and how each check ended."""
    facts: Facts
    findings: list[Finding] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    matrix: str | None = None  # which compatibility matrix the checks read
    mode: str | None = None  # "static" for an image build checked with --static
    # Derived once by the engine from the beliefs, for the renderers; not in the JSON (the facts carry its
    # evidence): the driver version (the loaded module's, else the user space's).
    driver_version: str | None = None

    def with_findings(self, extra: list[Finding]) -> Report:
        """This report plus findings decided outside the check registry (the --require gates)."""
        results = [CheckResult(f.code, f.area, f.title, f.severity) for f in extra]
        return replace(self, findings=[*self.findings, *extra], checks=[*self.checks, *results])

    @property
    def has_evidence(self) -> bool:
        """A verdict needs evidence: some check about the driver, the GPUs or the frameworks concluded
        something (ok, info, warn or fail). A report that says nothing is not "ready"."""
        if self.mode == "static":  # an image: ready only when its CUDA or a framework was learned, or it is for CPUs
            return static_evidence(self.facts)
        return any(f.area not in CONTEXT_AREAS and f.code != "doctor.check_crashed"
                   and (f.code, f.severity) not in NOT_GPU_EVIDENCE for f in self.findings)

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


def live_probed(facts: Facts, area: str) -> bool:
    """This area was probed on the machine itself (live or a snapshot), not read from a pasted report."""
    return (facts.sources.get(area) or "").startswith("probes")


def collected_by_probes(facts: Facts) -> bool:
    """Were these facts probed on a machine (live or a snapshot), not parsed from a pasted report?"""
    return live_probed(facts, "driver")


def generate_report_schema() -> dict[str, Any]:
    """The JSON Schema of report v1 (written to doctor/schemas/report-v1.json by scripts/gen_schema.py)."""
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


FRAMEWORKS = ("torch", "tensorflow", "tensorflow-cpu", "tf-nightly", "jax", "jaxlib", "paddlepaddle-gpu", "mxnet")


def static_evidence(facts: Facts) -> bool:
    """Was anything learned of an image's GPU stack: a CUDA toolkit's version, a framework whose build (CUDA or
    CPU) is known, a CUDA library wheel; or is the image meant for CPUs (--cpu, LABEL gpu-doctor.cpu=true)?"""
    if facts.sources.get("cpu_image") or any(t.version for t in facts.toolkits):
        return True
    return any((p.name in FRAMEWORKS or p.name.startswith(("cupy-cuda", "nvidia-cuda-runtime")))
               and (p.cuda or p.cpu_only is not None) for e in facts.python_envs for p in e.packages)
