"""The plan: ordered steps of abstract actions, what ``doctor.fixplan`` makes of the findings' intents and every
renderer (apt, dnf, pip, conda, the fix script, the TUI) reads. Data only: no matrix, no facts, no shell text.

An action says *what* to change (install driver branch 550, replace a CPU-only torch, blacklist nouveau),
independent of the package manager; a remedy that cannot be expressed as verified package operations is a
:class:`Manual` action — printed, never guessed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

from doctor.model.records import dataclass

PLAN_SCHEMA = "gpu-doctor.fixplan/v1"

# --- actions: what to change, independent of the package manager -------------------------------


@dataclass(frozen=True)
class Action:
    @property
    def kind(self) -> str:
        return type(self).__name__

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.kind, **dataclasses.asdict(self)}


@dataclass(frozen=True)
class InstallDriver(Action):
    branch: int
    flavor: str  # open | proprietary
    kernel: str | None = None  # the running kernel, whose headers DKMS needs
    min_branch: int | None = None  # the oldest branch that would also do (minor-version compatibility)
    server: bool = False  # a data-center GPU: distributions' -server driver flavour where they have one
    max_branch: int | None = None  # the GPU architecture's last supported branch (legacy GPUs)
    open_required: bool = False  # the architecture works only with the open kernel module (Blackwell)
    headers: bool | None = None  # False: the distribution has no headers package for ``kernel`` (a custom kernel)


@dataclass(frozen=True)
class InstallToolkit(Action):
    cuda: str  # "12.4"


@dataclass(frozen=True)
class InstallCudnn(Action):
    version: int  # cuDNN major (9)
    cuda_major: int


@dataclass(frozen=True)
class InstallCudaCompat(Action):
    package: str  # cuda-compat-12-4, from compat/cuda.toml [[forward_compat]]
    cuda: str


@dataclass(frozen=True)
class InstallContainerToolkit(Action):
    engine: str  # docker | containerd | podman | cri-o
    install: bool = True  # False: installed, only the engine's configuration is missing


@dataclass(frozen=True)
class BlacklistNouveau(Action):
    pass


@dataclass(frozen=True)
class LoadModule(Action):
    module: str = "nvidia"


@dataclass(frozen=True)
class RebuildDkms(Action):
    kernel: str
    headers: bool | None = None  # False: the distribution has no headers package for ``kernel`` (a custom kernel)


@dataclass(frozen=True)
class ReinstallTorch(Action):
    python: str
    version: str
    cuda: str
    index_url: str
    replace_cpu: bool = False
    installed: str | None = None  # the version installed now (e.g. 2.5.1+cpu)
    companions: list[str] = field(default_factory=list)  # torchvision==0.20.1 … installed beside it: same index


@dataclass(frozen=True)
class PipInstall(Action):
    python: str
    requirements: list[str]
    uninstall: list[str] = field(default_factory=list)  # removed first (tensorflow-cpu)
    conda: list[str] = field(default_factory=list)  # the conda-forge equivalent specs
    done_when: list[str] = field(default_factory=list)  # "name==version" / "name": installed means done
    cuda: str | None = None  # the CUDA the requirement brings (for conda's cuda-version)


@dataclass(frozen=True)
class HoldPackages(Action):
    names: list[str]


@dataclass(frozen=True)
class PinDriverBranch(Action):
    """Keep the package manager on one driver branch (apt preferences / dnf versionlock)."""

    branch: int


@dataclass(frozen=True)
class Reboot(Action):
    reason: str
    always: bool = False  # False: only when the step changed something


@dataclass(frozen=True)
class Manual(Action):
    """A remedy gpu-doctor will not automate: printed as comments, with the finding's own commands."""

    text: str
    commands: list[str] = field(default_factory=list)


# --- the plan -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanStep:
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
                "actions": [a.to_dict() for a in self.actions], "verify": self.verify,
                "root": self.root, "risk": self.risk}


@dataclass(frozen=True)
class FixPlan:
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
