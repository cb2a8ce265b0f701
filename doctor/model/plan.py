"""The plan: ordered steps of abstract actions, what ``doctor.fixplan`` makes of the findings' intents and every
renderer (apt, dnf, pip, conda, the fix script, the TUI) reads. Data only: no matrix, no facts, no shell text.

An action says *what* to change (install driver branch 550, replace a CPU-only torch, blacklist nouveau),
independent of the package manager; a remedy that cannot be expressed as verified package operations is a
:class:`~doctor.model.remedy.Manual` action — printed, never guessed. The kinds of action are the remedy
vocabulary's (:mod:`doctor.model.remedy`), the same classes a check's intents use where the two sides agree.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from doctor.model.records import dataclass
from doctor.model.remedy import Action, Manual, PipInstall, Reboot, ReinstallTorch

PLAN_SCHEMA = "gpu-doctor.fixplan/v1"


# --- the plan -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanStep:
    """One step of a fix plan: the findings it resolves, why, its actions, how to verify."""
    id: str
    resolves: list[str]  # finding codes
    why: str
    actions: list[Action]
    verify: list[str]  # argv, usually gpu-doctor check <id>…
    root: bool = True
    risk: str = "safe"  # safe | restart | reboot | destructive
    findings: list[int] = field(default_factory=list)  # which findings (by position) this step resolves

    @property
    def python_only(self) -> bool:
        return all(isinstance(a, (ReinstallTorch, PipInstall, Manual)) for a in self.actions) and not self.root

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "resolves": self.resolves, "why": self.why,
                "actions": [a.as_action() for a in self.actions], "verify": self.verify,
                "root": self.root, "risk": self.risk}


@dataclass(frozen=True)
class FixPlan:
    """The one fix plan for a machine's findings: its steps, for its OS and architecture."""
    os_id: str | None
    os_version: str | None
    os_pretty: str | None
    arch: str | None
    steps: list[PlanStep]
    targets: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    python_origin: str | None = None  # how the framework environment was installed (CONDA_PREFIX, VIRTUAL_ENV …)
    conda_prefix: str | None = None
    gpu_visible: bool = True  # False: conda must be told the CUDA (CONDA_OVERRIDE_CUDA), e.g. in a Docker build
    # The nvidia-* wheel pins of the reviewed matrix rows for the frameworks the plan installs (pip's
    # constraints file); not in the plan's JSON.
    constraints: list[str] = field(default_factory=list)

    @property
    def needs_reboot(self) -> bool:
        return any(isinstance(a, Reboot) for s in self.steps for a in s.actions)

    def actions(self) -> list[Action]:
        return [a for s in self.steps for a in s.actions]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": PLAN_SCHEMA, "os": {"id": self.os_id, "version": self.os_version, "pretty": self.os_pretty,
                                              "arch": self.arch},
                "targets": self.targets, "needs_reboot": self.needs_reboot, "notes": self.notes,
                "python_origin": self.python_origin, "conda_prefix": self.conda_prefix,
                "gpu_visible": self.gpu_visible,
                "steps": [s.to_dict() for s in self.steps]}
