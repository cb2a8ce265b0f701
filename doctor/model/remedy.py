"""The one remedy vocabulary: every kind of remedy, from a check's intent through the plan to each renderer.

A remedy kind is one class, defined here and nowhere else. A check attaches remedies to its finding as
*intents* (what should change, :class:`Intent`); the planner (:mod:`doctor.fixplan`) weighs them against the
facts and the matrix and orders *actions* (what the plan does, :class:`Action`) into steps; every renderer
(apt, dnf, pip, conda, the fix script, the fix line under a finding, the TUI) reads those actions. A kind the
check can state completely is both: the planner carries it out as given, the very class the check wrote.

Where what a check knows and what the plan does really differ, the kinds are distinct, with distinct names
(intent → the actions the planner makes of it, and why they differ):

- InstallDriverBranch → InstallDriver + Reboot (or InstallCudaCompat, or Manual): a need with bounds (minimum,
  recommended, last branch, who needs it); the planner weighs every need at once and picks one branch.
- ReinstallFramework → ReinstallTorch | PipInstall | Manual: "this environment's build is wrong"; the build,
  its index and its CUDA come from the matrix and the driver.
- ReloadDriver → HoldPackages + Reboot + Manual: a module older than its user space.
- UnsetEnvVar → Manual; AttachGpu → Manual (the plan's first step); OnlyIfWanted → a note of the plan, no step.

Both sides, one class: BlacklistNouveau (+ Reboot), LoadModule, RebuildDkms (+ LoadModule when ``load``),
InstallToolkit (+ Manual: the PATH), InstallCudnn, InstallCudaCompat (+ Manual: LD_LIBRARY_PATH),
InstallContainerToolkit, Manual. Only the plan's: InstallDriver, ReinstallTorch, PipInstall, HoldPackages,
PinDriverBranch, Reboot.

A field of a shared kind may belong to one side: :data:`ASKED` (what the check asked; the finding's intent
shows it, the plan does not repeat it) or :data:`PLANNED` (what the planner settles from the facts and the
matrix; a check leaves it unset, the intent does not show it). So the JSON of each side says only its part:
``{"intent": kind, …}`` in a report's findings, ``{"action": kind, …}`` in a plan's steps.

What a person reads under a finding, :class:`doctor.model.findings.Fix` (prose and its commands), is not a
remedy kind but the *rendering* of the plan's steps for one finding (:func:`doctor.render.fixline.fix_for`); a check's
own ``Fix`` is the wording a :class:`Manual` step carries when no intent can express the remedy.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import field
from typing import TYPE_CHECKING, Any

from doctor.model.records import dataclass as _dataclass

if TYPE_CHECKING:
    from dataclasses import dataclass as kind
else:

    def kind(**params: Any) -> Any:
        """``dataclass(frozen=True)`` of :mod:`doctor.model.records`, applied when the class is first used."""
        assert params == {"frozen": True}

        def defer(cls: type) -> type:
            for name in _STAND_INS:
                setattr(cls, name, _StandIn(name))
            _pending.add(cls)
            return cls

        return defer


ASKED = {"side": "intent"}  # field metadata: a check's wish the plan does not repeat
PLANNED = {"side": "plan"}  # field metadata: settled by the planner; absent from the check's intent

# --- each kind becomes a dataclass on first use ----------------------------------------------------------------
#
# Making a frozen dataclass compiles its __init__, __setattr__ and __delattr__ (~0.45 ms a class); a run makes
# about five of these 23 classes, and every command imports them all (the planner and the renderers name them).
# So each kind's class statement runs at import (a plain class: the names, isinstance and issubclass work at
# once) and the dataclass decorator runs on it when it is first used: its first instance (Remedy.__new__, which
# copy and pickle reach too) or the first look-up of what the decorator adds to the class itself
# (``dataclasses.fields(kind)``, ``is_dataclass``, ``__match_args__``, ``kind.__init__``: a stand-in in the class's
# own namespace, which would otherwise find a base's). Until then no instance of it exists, so nothing can tell.

_STAND_INS = ("__dataclass_fields__", "__dataclass_params__", "__match_args__", "__init__")
_pending: set[type] = set()  # kinds whose decorator has not run yet
_defining = threading.RLock()


class _StandIn:
    """What the class-level look-up of one of :data:`_STAND_INS` finds on a kind not yet made: makes it, then
    answers with what the decorator put there."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, instance: object, owner: type) -> Any:
        _define(owner)
        return getattr(owner if instance is None else instance, self.name)


def _define(cls: type) -> None:
    """Apply the dataclass decorator to ``cls``, its pending bases first, once, whichever thread asks first (the
    others wait for it). A kind leaves ``_pending`` only once it is complete."""
    with _defining:
        for klass in reversed(cls.__mro__):
            if klass in _pending:
                # The decorator replaces the other two stand-ins itself; these two it would leave in place.
                delattr(klass, "__init__")
                delattr(klass, "__match_args__")
                _dataclass(frozen=True)(klass)
                _pending.discard(klass)


@kind(frozen=True)
class Remedy:
    """Any remedy kind: its JSON as an intent and as an action."""

    if not TYPE_CHECKING:

        def __new__(cls, *_args: Any, **_kwargs: Any) -> Any:
            if cls in _pending:
                _define(cls)
            return object.__new__(cls)

    @property
    def kind(self) -> str:
        return type(self).__name__

    def _fields(self, other_side: str) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        return {f.name: values[f.name] for f in dataclasses.fields(self) if f.metadata.get("side") != other_side}

    def as_intent(self) -> dict[str, Any]:
        """The intent's JSON, as a report's finding carries it."""
        return {"intent": self.kind, **self._fields("plan")}

    def as_action(self) -> dict[str, Any]:
        """The action's JSON, as a plan's step carries it."""
        return {"action": self.kind, **self._fields("intent")}


@kind(frozen=True)
class Intent(Remedy):
    """A kind a check may attach to its finding."""

    @property
    def python_only(self) -> bool:
        """Carried out inside a Python environment alone (no root, no system package manager)."""
        return False


@kind(frozen=True)
class Action(Remedy):
    """A kind a plan's step may hold: what to change, independent of the package manager."""


# --- kinds a check asks for and the planner carries out as given -------------------------------------


@kind(frozen=True)
class BlacklistNouveau(Intent, Action):
    """Keep the nouveau module from loading, so that the NVIDIA one can."""


@kind(frozen=True)
class LoadModule(Intent, Action):
    """Load a kernel module."""
    module: str = "nvidia"


@kind(frozen=True)
class RebuildDkms(Intent, Action):
    """Rebuild the driver's DKMS module for a kernel."""
    kernel: str
    # The module is wanted in the running kernel now: the plan loads it after the build (a LoadModule action).
    load: bool = field(default=False, metadata=ASKED)
    # False: the distribution has no headers package for ``kernel`` (a custom kernel).
    headers: bool | None = field(default=None, metadata=PLANNED)


@kind(frozen=True)
class InstallToolkit(Intent, Action):
    """A CUDA toolkit X.Y. A check may leave ``cuda`` None: the newest that compiles for every GPU and the
    (planned) driver runs; a plan's action always names it."""

    cuda: str | None = None
    reason: str = field(default="", metadata=ASKED)


@kind(frozen=True)
class InstallCudnn(Intent, Action):
    """Install cuDNN of a major version for a CUDA major."""
    version: int  # cuDNN major (9)
    cuda_major: int | None = None  # a check's None: the system toolkit's major; a plan's action always names it


@kind(frozen=True)
class InstallCudaCompat(Intent, Action):
    """Install the CUDA forward-compatibility package."""
    package: str  # cuda-compat-12-4, from compat/cuda.toml [[forward_compat]]
    cuda: str


@kind(frozen=True)
class InstallContainerToolkit(Intent, Action):
    """Install the NVIDIA Container Toolkit, or configure an engine for it."""
    engine: str  # docker | containerd | podman | cri-o
    install: bool = True  # False: installed, only the engine's configuration is missing


@kind(frozen=True)
class Manual(Intent, Action):
    """A remedy gpu-doctor will not automate: shown as text with the commands a person runs (as comments in a
    script)."""

    text: str
    commands: list[str] = field(default_factory=list)


# --- what a check asks for, which the planner turns into other actions --------------------------------


@kind(frozen=True)
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


@kind(frozen=True)
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


@kind(frozen=True)
class AttachGpu(Intent):
    """No NVIDIA GPU on the PCI bus: nothing else can help until one is attached (the plan's first step)."""

    @property
    def python_only(self) -> bool:
        return True  # a person's step, in every format


@kind(frozen=True)
class ReloadDriver(Intent):
    """A newer user space than the loaded module: load the matching module (reboot), hold the packages."""

    kernel_module: str | None = None
    userspace: str | None = None


@kind(frozen=True)
class UnsetEnvVar(Intent):
    """Unset an environment variable that gets in the way."""
    name: str
    reason: str = ""


@kind(frozen=True)
class OnlyIfWanted(Intent):
    """Nothing needs changing for what runs here; ``text`` says when a person would still want it. A note in the
    plan, never a step."""

    text: str

    @property
    def python_only(self) -> bool:
        return True


# --- what only the planner decides --------------------------------------------------------------------


@kind(frozen=True)
class InstallDriver(Action):
    """Install one driver branch and flavour."""
    branch: int
    flavor: str  # open | proprietary
    kernel: str | None = None  # the running kernel, whose headers DKMS needs
    min_branch: int | None = None  # the oldest branch that would also do (minor-version compatibility)
    server: bool = False  # a data-center GPU: distributions' -server driver flavour where they have one
    max_branch: int | None = None  # the GPU architecture's last supported branch (legacy GPUs)
    open_required: bool = False  # the architecture works only with the open kernel module (Blackwell)
    headers: bool | None = None  # False: the distribution has no headers package for ``kernel`` (a custom kernel)


@kind(frozen=True)
class ReinstallTorch(Action):
    """Reinstall torch from the index of the build the plan chose."""
    python: str
    version: str
    cuda: str
    index_url: str
    replace_cpu: bool = False
    installed: str | None = None  # the version installed now (e.g. 2.5.1+cpu)
    companions: list[str] = field(default_factory=list)  # torchvision==0.20.1 … installed beside it: same index


@kind(frozen=True)
class PipInstall(Action):
    """Install requirements with pip (or their conda equivalents)."""
    python: str
    requirements: list[str]
    uninstall: list[str] = field(default_factory=list)  # removed first (tensorflow-cpu)
    conda: list[str] = field(default_factory=list)  # the conda-forge equivalent specs
    done_when: list[str] = field(default_factory=list)  # "name==version" / "name": installed means done
    cuda: str | None = None  # the CUDA the requirement brings (for conda's cuda-version)


@kind(frozen=True)
class HoldPackages(Action):
    """Keep the package manager from upgrading these packages."""
    names: list[str]


@kind(frozen=True)
class PinDriverBranch(Action):
    """Keep the package manager on one driver branch (apt preferences / dnf versionlock)."""

    branch: int


@kind(frozen=True)
class Reboot(Action):
    """Reboot, for a kernel module to load."""
    reason: str
    always: bool = False  # False: only when the step changed something


# The kinds of each side, in the order the planner handles intents and the schema lists actions.
INTENTS: tuple[type[Intent], ...] = (ReinstallFramework, InstallDriverBranch, InstallCudaCompat, LoadModule,
                                     RebuildDkms, BlacklistNouveau, ReloadDriver, InstallToolkit, InstallCudnn,
                                     InstallContainerToolkit, UnsetEnvVar, Manual, OnlyIfWanted, AttachGpu)
ACTIONS: tuple[type[Action], ...] = (InstallDriver, InstallToolkit, InstallCudnn, InstallCudaCompat,
                                     InstallContainerToolkit, BlacklistNouveau, LoadModule, RebuildDkms,
                                     ReinstallTorch, PipInstall, HoldPackages, PinDriverBranch, Reboot, Manual)


def intent_from_dict(data: dict[str, Any]) -> Intent | None:
    """An intent from its JSON form (a report read back); None for an unknown kind or bad fields."""
    kinds = {k.__name__: k for k in INTENTS}
    kind = kinds.get(str(data.get("intent")))
    if kind is None:
        return None
    names = {f.name for f in dataclasses.fields(kind) if f.metadata.get("side") != "plan"}
    try:
        return kind(**{k: v for k, v in data.items() if k in names})
    except TypeError:
        return None
