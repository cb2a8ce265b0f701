"""Fix intents: what a check says should change, as data — never prose, never argv.

A check that knows a remedy attaches one or more intents to its finding. The *kinds* of intent on one finding
are alternatives, best first: the planner (:mod:`doctor.fixplan`) chooses the first kind it can carry out here
("upgrade the driver", else "install a torch build this driver runs") and then does every intent of that kind
(reinstall the framework in each environment the finding names). Each intent names what it is
about — the Python environment, the package, the GPU, the kernel — so the planner never has to read a
finding's title or branch on its check id, and an environment that no intent names is left alone.

The planner weighs every intent against the facts and the matrix at once and renders one plan; every surface
(the fix line under a finding, ``explain``, the TUI, ``fix``, ``plan``) shows that plan.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

from doctor.model.records import dataclass


@dataclass(frozen=True)
class Intent:
    @property
    def kind(self) -> str:
        return type(self).__name__

    @property
    def python_only(self) -> bool:
        """Carried out inside a Python environment alone (no root, no system package manager)."""
        return False

    def to_dict(self) -> dict[str, Any]:
        return {"intent": self.kind, **dataclasses.asdict(self)}


@dataclass(frozen=True)
class ReinstallFramework(Intent):
    """Replace a framework build in one environment with one that fits the machine.

    ``reason``: cpu_only (a CPU build where a GPU is), arch (no kernels for a GPU), driver (its CUDA is newer
    than the driver runs), cudnn / runtime (its cuDNN or CUDA runtime is missing or wrong).
    """

    env: str  # the interpreter, as the facts name it
    package: str  # torch | tensorflow | tensorflow-cpu | jax | jaxlib
    installed: str | None = None  # the version installed now (2.5.1+cpu)
    reason: str = "cpu_only"
    gpu: str | None = None  # the GPU the build must run on, when one is named

    @property
    def python_only(self) -> bool:
        return True


@dataclass(frozen=True)
class InstallDriverBranch(Intent):
    """Install an NVIDIA driver new (or old) enough.

    ``minimum``: the lowest driver that fixes the finding (for a framework's CUDA runtime the minor-version
    floor of its major, not the full-support driver); ``recommended``: the driver of full support (the
    toolkit's own minimum); ``cuda``: the runtime that needs it (forward compatibility can bring it instead on
    a data-center GPU); ``last_branch``: the GPU's last supported branch (legacy GPUs); ``flavor``: a kernel
    module flavour the GPU requires (open | proprietary).
    """

    minimum: str | None = None
    recommended: str | None = None
    cuda: str | None = None
    who: str = ""  # what needs it, for the plan's "why"
    gpu: str | None = None
    last_branch: int | None = None
    flavor: str | None = None
    supported: bool = False  # the need is only "a supported branch": met by a driver step planned for another need


@dataclass(frozen=True)
class AttachGpu(Intent):
    """No NVIDIA GPU on the PCI bus: nothing else can help until one is attached (the plan's first step)."""

    @property
    def python_only(self) -> bool:
        return True  # a person's step, in every format


@dataclass(frozen=True)
class InstallCudaCompat(Intent):
    package: str  # cuda-compat-13-0
    cuda: str


@dataclass(frozen=True)
class LoadModule(Intent):
    module: str = "nvidia"


@dataclass(frozen=True)
class RebuildDkms(Intent):
    kernel: str
    load: bool = False  # the module is wanted in the running kernel now (load it after the build)


@dataclass(frozen=True)
class BlacklistNouveau(Intent):
    pass


@dataclass(frozen=True)
class ReloadDriver(Intent):
    """A newer user space than the loaded module: load the matching module (reboot), hold the packages."""

    kernel_module: str | None = None
    userspace: str | None = None


@dataclass(frozen=True)
class InstallToolkit(Intent):
    """A CUDA toolkit: ``cuda`` X.Y, or None for the newest that compiles for every GPU and the driver runs."""

    cuda: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class InstallCudnn(Intent):
    version: int  # cuDNN major (9)
    cuda_major: int | None = None  # None: the system toolkit's major


@dataclass(frozen=True)
class InstallContainerToolkit(Intent):
    engine: str  # docker | containerd | podman | cri-o
    install: bool = True  # False: installed, only the engine's configuration is missing


@dataclass(frozen=True)
class UnsetEnvVar(Intent):
    name: str
    reason: str = ""


@dataclass(frozen=True)
class Manual(Intent):
    """A remedy gpu-doctor will not automate: shown as text with the commands a person runs."""

    text: str
    commands: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class OnlyIfWanted(Intent):
    """Nothing needs changing for what runs here; ``text`` says when a person would still want it. A note in the
    plan, never a step."""

    text: str

    @property
    def python_only(self) -> bool:
        return True


INTENTS: tuple[type[Intent], ...] = (ReinstallFramework, InstallDriverBranch, InstallCudaCompat, LoadModule,
                                     RebuildDkms, BlacklistNouveau, ReloadDriver, InstallToolkit, InstallCudnn,
                                     InstallContainerToolkit, UnsetEnvVar, Manual, OnlyIfWanted, AttachGpu)


def from_dict(data: dict[str, Any]) -> Intent | None:
    """An intent from its JSON form (a report read back); None for an unknown kind or bad fields."""
    kinds = {k.__name__: k for k in INTENTS}
    kind = kinds.get(str(data.get("intent")))
    if kind is None:
        return None
    names = {f.name for f in dataclasses.fields(kind)}
    try:
        return kind(**{k: v for k, v in data.items() if k in names})
    except TypeError:
        return None
