"""Findings: what a check concluded, with its evidence and the fix as data."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Severity = Literal["fail", "warn", "info", "ok"]
SEVERITY_RANK: dict[str, int] = {"fail": 3, "warn": 2, "info": 1, "ok": 0}

AREAS = ("Driver", "GPUs", "CUDA toolkit", "cuDNN", "Python & frameworks", "Environment", "Active tests",
         "Requirements")


@dataclass(frozen=True)
class Evidence:
    """One fact a finding rests on: its path in the snapshot, its value and where it came from."""

    fact: str
    value: Any
    source: str | None = None

    def line(self) -> str:
        src = f"  [{self.source}]" if self.source else ""
        return f"{self.fact} = {self.value!r}{src}"


@dataclass(frozen=True)
class FixStep:
    """One command of a fix. ``risk`` says what running it costs: safe, restart, reboot, destructive."""

    command: list[str]
    root: bool = False
    risk: Literal["safe", "restart", "reboot", "destructive"] = "safe"
    note: str | None = None

    def shell(self) -> str:
        import shlex

        return ("sudo " if self.root else "") + shlex.join(self.command)


@dataclass(frozen=True)
class Fix:
    summary: str
    steps: list[FixStep] = field(default_factory=list)


@dataclass(frozen=True)
class Finding:
    code: str
    severity: Severity
    title: str
    detail: str = ""
    evidence: list[Evidence] = field(default_factory=list)
    fix: Fix | None = None
    area: str = ""
    check: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
