"""Findings: what a check concluded, with its evidence and the fix as data."""

from __future__ import annotations

import shlex
from dataclasses import asdict, field, fields, is_dataclass
from typing import Any, Literal

from doctor.model.records import dataclass
from doctor.model.remedy import Intent
from doctor.model.severity import Severity

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
        shown = "not set" if self.value is None and self.fact.startswith("env.") else value_text(self.value)
        return f"{self.fact} = {shown}{src}"


def value_text(value: Any) -> str:
    """A fact's value in words for people: no Python reprs (None, True, LibRef(...)) in any output.

    Unknown is "unknown"; a string with control characters (terminal escapes) is shown escaped, never raw.
    """
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        if not value:
            return "(empty)"
        return value if value.isprintable() else value.encode("unicode_escape").decode("ascii")
    if is_dataclass(value) and not isinstance(value, type):
        parts = [(f.name, getattr(value, f.name)) for f in fields(value)]
        return ", ".join(f"{k} {value_text(v)}" for k, v in parts if v not in (None, [], {}, ""))
    if isinstance(value, dict):
        return ", ".join(f"{value_text(k)}={value_text(v)}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(value_text(v) for v in value) or "none"
    return value_text(str(value))


@dataclass(frozen=True)
class FixStep:
    """One command of a fix. ``risk`` says what running it costs: safe, restart, reboot, destructive."""

    command: list[str]
    root: bool = False
    risk: Literal["safe", "restart", "reboot", "destructive"] = "safe"
    note: str | None = None

    def shell(self) -> str:
        return ("sudo " if self.root else "") + shlex.join(self.command)


@dataclass(frozen=True)
class Fix:
    """What a person reads under a finding: a summary and the steps with their commands."""
    summary: str
    steps: list[FixStep] = field(default_factory=list)


@dataclass(frozen=True)
class Finding:
    """One thing a check found: its code, severity, title, detail, evidence and remedies."""
    code: str
    severity: Severity
    title: str
    detail: str = ""
    evidence: list[Evidence] = field(default_factory=list)
    fix: Fix | None = None
    area: str = ""
    check: str = ""
    # What should change, as typed data (doctor.model.remedy's intents), alternatives best first; the planner turns
    # them into the plan every surface shows. Empty: the check knows no remedy it can express (``fix`` is the text).
    intents: list[Intent] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["intents"] = [i.as_intent() for i in self.intents]
        return out
