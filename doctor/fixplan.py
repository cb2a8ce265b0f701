"""Findings + facts + matrix → a fix plan: ordered steps of abstract actions. Pure: no I/O, no shell text.

A plan says *what* to change (install driver branch 550, replace a CPU-only torch, blacklist nouveau)
and *why* (the finding codes each step resolves). Renderers in ``doctor.render.{apt,dnf,pip,conda}``
turn the same plan into commands for one package manager; a finding whose remedy cannot be expressed as
verified package operations becomes a :class:`Manual` action — printed, never guessed.

Targets come from the compatibility matrix: the driver branch is the one whose minimum driver runs
every CUDA runtime that failed (``cuda.toml``) and knows every GPU (``gpus.toml``); a torch build comes
from the planner in :mod:`doctor.queries`. ``Options`` overrides them (``--target-driver``,
``--target-cuda``, ``--want``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from doctor.facts import Facts, PythonEnv
from doctor.findings import Finding
from doctor.matrix import Matrix, branch, driver_runs_cuda, major_minor, vtuple

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


@dataclass(frozen=True)
class ReinstallTorch(Action):
    python: str
    version: str
    cuda: str
    index_url: str
    replace_cpu: bool = False
    installed: str | None = None  # the version installed now (e.g. 2.5.1+cpu)


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


@dataclass(frozen=True)
class Options:
    target_driver: str | None = None  # "550" or "550.54.14"
    target_cuda: str | None = None  # "12.4"
    want: str | None = None  # "torch==2.5.1"


class PlanError(ValueError):
    """An override the matrix cannot honour (unknown CUDA, malformed driver): one line for the user."""


# --- building it ----------------------------------------------------------------------------------

SYSTEM_ORDER = ("nouveau", "driver", "dkms", "module", "compat", "toolkit", "cudnn", "container")


def build_plan(facts: Facts, findings: list[Finding], m: Matrix, opts: Options | None = None) -> FixPlan:
    opts = opts or Options()
    _check_options(m, opts)
    bad = [f for f in findings if f.severity in ("fail", "warn")]
    codes = {f.code for f in bad}
    steps: dict[str, PlanStep] = {}
    notes: list[str] = []
    targets: dict[str, Any] = {}
    d = facts.driver
    installed = _driver(facts)
    kernel = d.running_kernel

    def add(step: PlanStep) -> None:
        if step.id in steps:  # merge: one step resolving several findings
            old = steps[step.id]
            steps[step.id] = dataclasses.replace(old, resolves=sorted({*old.resolves, *step.resolves}),
                                                 verify=list(dict.fromkeys([*old.verify, *step.verify])))
        else:
            steps[step.id] = step

    # -- the driver branch: the newest need wins, the GPU's last branch caps it --------------------
    need, reasons = _driver_need(facts, bad, m, opts)
    gpu_row, arch = _gpu(facts, m)
    flavor = _flavor(facts, arch)
    wants_driver = bool(opts.target_driver) or bool(codes & {"driver.missing", "driver.too_old_for_cuda_runtime",
                                                               "driver.too_old_for_gpu",
                                                               "driver.gpu_unsupported_by_driver",
                                                               "framework.cuda_newer_than_driver"})
    compat_pkg = _forward_compat(bad)
    if compat_pkg and not opts.target_driver:
        targets["cuda_compat"] = compat_pkg[0]
        add(PlanStep("compat", [c for c in sorted(codes) if c in ("driver.too_old_for_cuda_runtime",
                                                                   "framework.cuda_newer_than_driver")],
                     f"This data-center GPU can run CUDA {compat_pkg[1]} on driver {installed} through NVIDIA's "
                     f"forward-compatibility package {compat_pkg[0]}, without changing the driver",
                     [InstallCudaCompat(compat_pkg[0], compat_pkg[1]),
                      Manual(f"Point the application at the compat libraries: LD_LIBRARY_PATH=/usr/local/cuda-"
                             f"{compat_pkg[1]}/compat:$LD_LIBRARY_PATH")],
                     _verify(bad, "driver.too_old_for_cuda_runtime", "framework.cuda_newer_than_driver")))
        wants_driver = bool(codes & {"driver.missing", "driver.too_old_for_gpu", "driver.gpu_unsupported_by_driver"})
    if wants_driver and "driver.missing" in codes and facts.host.pci_nvidia_gpus == 0:
        wants_driver = False  # no GPU on the bus: a driver cannot help (the finding says attach one)
    if wants_driver and facts.host.container:
        # A container uses its host's kernel driver: nothing installed in the container changes it.
        wants_driver = False
        add(_manual_step("driver", bad, tuple(sorted(codes & {"driver.too_old_for_cuda_runtime",
                                                               "framework.cuda_newer_than_driver",
                                                               "driver.too_old_for_gpu"})),
                         f"The driver is the container host's: upgrade it there (to ≥ {need or 'the version named'}); "
                         "nothing installed inside the container changes it."))
    if wants_driver:
        target = int(vtuple(opts.target_driver)[0]) if opts.target_driver else (branch(need) if need else None)
        last = (arch or {}).get("last_driver_branch")
        if target and last and target > int(last):
            notes.append(f"{(gpu_row or {}).get('name', 'this GPU')} is supported up to the R{last} branch only, "
                         f"but branch {target} was asked for ({'; '.join(reasons)}): installing R{last} instead; "
                         "what needs a newer driver will still not run on this GPU.")
            target = int(last)
        if target is None and last:
            target = int(last)
        if target is None:
            add(_manual_step("driver", bad, ("driver.missing",),
                             "The driver branch to install could not be chosen: the matrix knows neither this GPU "
                             "nor a CUDA runtime that needs a given driver. Pass --target-driver BRANCH."))
        else:
            targets["driver_branch"] = target
            targets["driver_flavor"] = flavor
            why = (f"Install NVIDIA driver branch {target} ({flavor} kernel module): " + "; ".join(reasons)
                   if reasons else f"Install NVIDIA driver branch {target} ({flavor} kernel module)")
            floor = _driver_floor(facts, m, target)
            server = (gpu_row or {}).get("segment") == "datacenter"
            actions: list[Action] = [InstallDriver(target, flavor, kernel, floor, server,
                                                   int(last) if last else None,
                                                   bool((arch or {}).get("open_kernel_module_required")))]
            actions.append(Reboot(f"the new {target} kernel module loads at boot"))
            add(PlanStep("driver", [c for c in sorted(codes) if c in (
                "driver.missing", "driver.too_old_for_cuda_runtime", "driver.too_old_for_gpu",
                "driver.gpu_unsupported_by_driver", "framework.cuda_newer_than_driver")] or ["--target-driver"],
                why, actions, _verify(bad, "driver.missing", "driver.too_old_for_cuda_runtime",
                                      "driver.too_old_for_gpu", "driver.gpu_unsupported_by_driver",
                                      "framework.cuda_newer_than_driver") or ["gpu-doctor", "check"],
                risk="reboot"))

    if "nouveau.active" in codes:
        add(PlanStep("nouveau", ["nouveau.active"],
                     "nouveau holds the GPU at boot, so the nvidia module cannot bind: blacklist it in the initramfs",
                     [BlacklistNouveau(), Reboot("nouveau leaves only at the next boot")],
                     _verify(bad, "nouveau.active"), risk="reboot"))

    if "driver.module_missing_for_kernel" in codes:
        k = d.next_boot_kernel if d.module_for_running_kernel is not False and d.next_boot_kernel else kernel
        if k:
            add(PlanStep("dkms", ["driver.module_missing_for_kernel"],
                         f"No nvidia module is built for kernel {k}: install its headers and rebuild with DKMS",
                         [RebuildDkms(k)], _verify(bad, "driver.module_missing_for_kernel")))
        else:
            add(_manual_step("dkms", bad, ("driver.module_missing_for_kernel",), "The kernel version is unknown."))

    if "driver.not_loaded" in codes:
        # The module loads once its cause is gone: fold the finding into the step that removes the cause.
        cause = next((sid for sid in ("driver", "nouveau", "dkms") if sid in steps), None)
        if facts.host.pci_nvidia_gpus == 0 or facts.host.container:
            cause = None  # no GPU to load the module for, or the host's module: no package here loads it
        if cause == "dkms" and d.module_for_running_kernel is False:
            st = steps["dkms"]
            steps["dkms"] = dataclasses.replace(st, actions=[*st.actions, LoadModule("nvidia")])
        if cause:
            add(dataclasses.replace(steps[cause], resolves=["driver.not_loaded"],
                                    verify=_verify(bad, "driver.not_loaded")))
        elif facts.host.pci_nvidia_gpus == 0 or facts.host.container or "secureboot.blocks_module" in codes:
            add(_manual_step("module", bad, ("driver.not_loaded",)))
        else:
            add(PlanStep("module", ["driver.not_loaded"], "The nvidia module is installed but not loaded: load it",
                         [LoadModule("nvidia")], _verify(bad, "driver.not_loaded")))

    if "driver.module_userspace_mismatch" in codes:
        held = sorted(p.name for p in d.packages if p.manager in ("dpkg", "rpm"))
        actions = [Reboot(f"the loaded module {d.kernel_module or '?'} is older than the user-space "
                          f"{d.userspace or '?'}; the reboot loads the matching one", always=True),
                   Manual("Without a reboot: stop every GPU process and the display manager, then reload the "
                          "modules.", ["rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia", "modprobe nvidia"])]
        if held:
            actions.insert(0, HoldPackages(held))
        add(PlanStep("mismatch", ["driver.module_userspace_mismatch"],
                     "The driver packages were upgraded under a running module: hold them so unattended upgrades "
                     "cannot do it again, and reboot to load the matching module", actions,
                     _verify(bad, "driver.module_userspace_mismatch"), risk="reboot"))

    # -- toolkit, cuDNN, container toolkit ------------------------------------------------------------
    toolkit_cuda = opts.target_cuda
    if not toolkit_cuda and "framework.nvcc_mismatch_for_extensions" in codes:
        toolkit_cuda = _torch_cuda(facts)
    if not toolkit_cuda and "toolkit.gpu_arch_unsupported" in codes:
        toolkit_cuda = _toolkit_for_gpu(facts, m, targets.get("driver_branch"))
    if toolkit_cuda:
        targets["toolkit"] = toolkit_cuda
        add(PlanStep("toolkit", [c for c in ("framework.nvcc_mismatch_for_extensions", "toolkit.gpu_arch_unsupported")
                                 if c in codes] or ["--target-cuda"],
                     f"Install the CUDA {toolkit_cuda} toolkit from NVIDIA's repository (side by side with others, "
                     f"in /usr/local/cuda-{toolkit_cuda})",
                     [InstallToolkit(toolkit_cuda),
                      Manual(f"Use it for builds: export PATH=/usr/local/cuda-{toolkit_cuda}/bin:$PATH "
                             f"CUDA_HOME=/usr/local/cuda-{toolkit_cuda}")],
                     _verify(bad, "framework.nvcc_mismatch_for_extensions", "toolkit.gpu_arch_unsupported")
                     or ["gpu-doctor", "check", "toolkit.missing"]))

    if "cudnn.cuda_mismatch" in codes:
        cmaj = _system_cuda_major(facts)
        if cmaj:
            add(PlanStep("cudnn", ["cudnn.cuda_mismatch"],
                         f"The system cuDNN does not support the installed CUDA {cmaj}: install cuDNN 9 built for "
                         f"CUDA {cmaj}", [InstallCudnn(9, cmaj)], _verify(bad, "cudnn.cuda_mismatch")))

    if "container.toolkit_missing" in codes:
        ct = facts.host.container_toolkit
        engines = (ct.engines if ct else []) or ["docker"]
        engine = min(engines, key=lambda e: ENGINES.index(e) if e in ENGINES else 99)
        add(PlanStep("container", ["container.toolkit_missing"],
                     f"Let {engine} containers use the GPU: install and configure the NVIDIA container toolkit",
                     [InstallContainerToolkit(engine, install=not (ct and ct.installed))],
                     _verify(bad, "container.toolkit_missing"), risk="restart"))

    # -- Python frameworks ----------------------------------------------------------------------------
    for step in _framework_steps(facts, bad, m, opts, targets):
        add(step)

    # -- everything else with a remedy: printed for a person ---------------------------------------
    covered = {c for s in steps.values() for c in s.resolves}
    for f in bad:
        if f.code in covered or f.code in ("doctor.check_crashed",):
            continue
        if f.code == "toolkit.missing" and f.severity == "warn":
            notes.append("No CUDA toolkit is installed; nothing here needs one to run. Pass --target-cuda X.Y to "
                         "install one for compiling CUDA code.")
            covered.add(f.code)
            continue
        add(_manual_step(f"manual-{f.code}", [f], (f.code,)))
        covered.add(f.code)

    ordered = sorted(steps.values(), key=_order)
    env = _framework_env(facts)
    return FixPlan(os_id=facts.host.os_id, os_version=facts.host.os_version, os_pretty=facts.host.os_pretty,
                   arch=facts.host.arch, steps=ordered, targets=targets, notes=notes,
                   python_origin=env.origin if env else None,
                   conda_prefix=(facts.env.get("CONDA_PREFIX") or None) if env and env.origin == "CONDA_PREFIX"
                   else None,
                   gpu_visible=bool([g for g in facts.gpus if g.source != "pci"]) and d.module_loaded is not False)


ENGINES = ("docker", "podman", "containerd", "cri-o")
_ORDER = ("nouveau", "driver", "dkms", "module", "mismatch", "compat", "toolkit", "cudnn", "container",
          "torch", "tensorflow", "jax")


def _order(step: PlanStep) -> tuple[int, str]:
    head = step.id.split(":", 1)[0]
    return (_ORDER.index(head) if head in _ORDER else len(_ORDER), step.id)


def _check_options(m: Matrix, opts: Options) -> None:
    if opts.target_driver and (not vtuple(opts.target_driver) or vtuple(opts.target_driver)[0] < 100):
        raise PlanError(f"--target-driver {opts.target_driver!r}: not an NVIDIA driver branch (e.g. 550)")
    if opts.target_cuda and not m.toolkit_rows(major_minor(opts.target_cuda) or ""):
        raise PlanError(f"--target-cuda {opts.target_cuda!r}: not a CUDA release in the matrix (e.g. 12.4)")
    if opts.want and not opts.want.strip().lower().startswith(("torch", "pytorch")):
        raise PlanError(f"--want {opts.want!r}: only torch wishes are planned (e.g. torch==2.5.1)")


def _driver(facts: Facts) -> str | None:
    return facts.driver.kernel_module or facts.driver.userspace


def _gpu(facts: Facts, m: Matrix) -> tuple[dict | None, dict | None]:
    for g in facts.gpus:
        row, arch = m.gpu_for_facts(g.name, g.compute_capability)
        if row or arch:
            return row, arch
    return None, None


def _flavor(facts: Facts, arch: dict | None) -> str:
    """The kernel-module flavour: what the architecture requires, else what is installed, else NVIDIA's default."""
    if arch and arch.get("open_kernel_module_required"):
        return "open"
    if arch and arch.get("open_kernel_module") is False:
        return "proprietary"
    if facts.driver.module_flavor in ("open", "proprietary"):
        return facts.driver.module_flavor
    return "open" if arch and arch.get("open_kernel_module") else "proprietary"


def _driver_need(facts: Facts, bad: list[Finding], m: Matrix, opts: Options) -> tuple[str | None, list[str]]:
    """The lowest driver that satisfies every failing CUDA runtime and GPU, with the reasons."""
    needs: list[tuple[str, str]] = []
    if opts.target_driver:
        return opts.target_driver, [f"--target-driver {opts.target_driver}"]
    from doctor.checks.compat import runtimes

    for who, cuda, _kind in runtimes(facts):
        v = driver_runs_cuda(m, _driver(facts), cuda)
        if v.rule in ("too-old", "forward-compat-needs-package") or _driver(facts) is None:
            row = m.min_driver(cuda)
            if row and row.get("linux_min_driver"):
                needs.append((row["linux_min_driver"], f"{who} needs ≥ {row['linux_min_driver']} "
                                                        f"(CUDA {major_minor(cuda)})"))
    _row, arch = _gpu(facts, m)
    if arch and arch.get("first_driver"):
        first = arch["first_driver"]
        if _driver(facts) is None or vtuple(_driver(facts)) < vtuple(first):
            needs.append((first, f"{arch['name']} GPUs need ≥ {first}"))
    if any(f.code == "driver.gpu_unsupported_by_driver" for f in bad) and arch and arch.get("last_driver_branch"):
        needs.append((f"{arch['last_driver_branch']}", f"{arch['name']} GPUs are supported up to "
                                                       f"R{arch['last_driver_branch']}"))
    if not needs:
        return None, []
    best = max(needs, key=lambda n: vtuple(n[0]))
    return best[0], [r for _v, r in needs]


def _driver_floor(facts: Facts, m: Matrix, target: int) -> int:
    """The oldest branch that still runs every CUDA runtime here (minor-version compatibility allowed) and knows
    the GPU: a distribution's packaged branch at or above it is as good as the target."""
    from doctor.checks.compat import runtimes

    floor = 0
    for _who, cuda, _kind in runtimes(facts):
        mvc = m.mvc(vtuple(cuda)[0]) if vtuple(cuda) else None
        row = mvc if mvc and mvc.get("linux_min_driver") else m.min_driver(cuda)
        if row and row.get("linux_min_driver"):
            floor = max(floor, branch(row["linux_min_driver"]) or 0)
    _row, arch = _gpu(facts, m)
    if arch and arch.get("first_driver"):
        floor = max(floor, branch(arch["first_driver"]) or 0)
    return min(floor, target) if floor else target


def _forward_compat(bad: list[Finding]) -> tuple[str, str] | None:
    for f in bad:
        if f.code not in ("driver.too_old_for_cuda_runtime", "framework.cuda_newer_than_driver"):
            continue
        rule = next((e.value for e in f.evidence if e.fact == "rule"), None)
        if rule != "forward-compat-needs-package":
            return None  # one runtime needs a real driver upgrade: the compat package is not enough
        row = next((e.value for e in f.evidence if e.fact.startswith("compat:cuda-compat")), None)
        if isinstance(row, dict) and row.get("package"):
            return row["package"], str(row.get("cuda"))
    return None


def _verify(bad: list[Finding], *codes: str) -> list[str]:
    ids = list(dict.fromkeys(f.check or f.code for f in bad if f.code in codes))
    return ["gpu-doctor", "check", *ids] if ids else []


def _manual_step(sid: str, bad: list[Finding], codes: tuple[str, ...], extra: str | None = None) -> PlanStep:
    found = [f for f in bad if f.code in codes]
    texts, cmds = [], []
    for f in found:
        if f.fix:
            texts.append(f.fix.summary)
            cmds += [s.shell() + (f"   # {s.note}" if s.note else "") for s in f.fix.steps]
    if extra:
        texts.append(extra)
    title = found[0].title if found else codes[0]
    return PlanStep(sid, list(codes), f"Needs a person: {title}",
                    [Manual(" ".join(texts) or "See `gpu-doctor check -v` for the evidence.", cmds)],
                    _verify(bad, *codes), root=False)


def _torch_cuda(facts: Facts) -> str | None:
    t = next((p for e in facts.python_envs for p in e.packages if p.name == "torch" and p.cuda and not p.cpu_only),
             None)
    return major_minor(t.cuda) if t else None


def _system_cuda_major(facts: Facts) -> int | None:
    t = next((t for t in facts.toolkits if t.version and t.source != "pip"), None)
    return vtuple(t.version)[0] if t else None


def _toolkit_for_gpu(facts: Facts, m: Matrix, target_branch: int | None) -> str | None:
    """The newest toolkit minor that compiles for every GPU here and that the (target) driver runs natively."""
    ccs = {g.compute_capability or (m.gpu(g.name) or {}).get("compute_capability") for g in facts.gpus} - {None}
    drv = f"{target_branch}.999.99" if target_branch else _driver(facts)
    best = None
    for r in m.rows("cuda", "sm_support"):
        if not ccs <= set(r.get("sm", [])):
            continue
        need = m.min_driver(r["cuda"])
        if drv and need and need.get("linux_min_driver") and vtuple(drv) < vtuple(need["linux_min_driver"]):
            continue
        if need and (best is None or vtuple(r["cuda"]) > vtuple(best)):
            best = major_minor(r["cuda"])
    return best


def _framework_env(facts: Facts) -> PythonEnv | None:
    return next((e for e in facts.python_envs if e.packages), facts.python_envs[0] if facts.python_envs else None)


def _framework_steps(facts: Facts, bad: list[Finding], m: Matrix, opts: Options,
                     targets: dict[str, Any]) -> list[PlanStep]:
    from doctor.queries import QueryError, plan

    codes = {f.code for f in bad}
    out: list[PlanStep] = []
    driver_branch = targets.get("driver_branch")
    drv = f"{driver_branch}.999.99" if driver_branch else _driver(facts)
    gpu_name = next((g.name for g in facts.gpus if g.name and m.gpu(g.name)), None)
    torch_codes = [c for c in ("framework.cpu_only_build", "framework.arch_unsupported") if c in codes]
    if "framework.cuda_newer_than_driver" in codes and not driver_branch and "cuda_compat" not in targets:
        torch_codes.append("framework.cuda_newer_than_driver")  # no driver step: take an older torch build instead
    for env in facts.python_envs:
        for p in env.packages:
            mine = [f for f in bad if f.code in torch_codes and _about(f, p.name, env.executable)]
            if p.name == "torch" and (mine or opts.want):
                base = (p.version or "").split("+", 1)[0]
                want = opts.want or (f"torch=={base}" if base and "framework.arch_unsupported" not in
                                     {f.code for f in mine} else None)
                try:
                    pick = plan(m, gpu_name, drv, want, _py(env.version))
                    if not pick.get("possible") and want and not opts.want:
                        pick = plan(m, gpu_name, drv, None, _py(env.version))
                except QueryError as exc:
                    pick = {"possible": False, "why": str(exc)}
                if opts.target_cuda and pick.get("possible"):
                    var = m.torch_variant(pick["torch"], opts.target_cuda)
                    if var:
                        pick = {**pick, "cuda": var["cuda"]}
                resolves = sorted({f.code for f in mine}) or ["--want"]
                if not pick.get("possible"):
                    out.append(PlanStep(f"torch:{env.executable}", resolves, f"No torch build fits: {pick['why']}",
                                        [Manual(f"No PyTorch build in the matrix fits: {pick['why']}.")],
                                        _verify(mine, *resolves), root=False))
                    continue
                cuda = pick["cuda"]
                index = f"https://download.pytorch.org/whl/cu{cuda.replace('.', '')}"
                targets["torch"] = {"version": pick["torch"], "cuda": cuda, "index_url": index,
                                    "source": pick.get("source")}
                old_cu = (p.cuda or "?").replace(".", "")
                what = "replace the CPU-only build" if p.cpu_only else f"replace the cu{old_cu} build"
                out.append(PlanStep(
                    f"torch:{env.executable}", resolves,
                    f"{what[0].upper()}{what[1:]} of torch {p.version} in {env.executable} with torch "
                    f"{pick['torch']} built for "
                    f"CUDA {cuda} (the driver runs it: {pick.get('rule')})",
                    [ReinstallTorch(env.executable, pick["torch"], cuda, index, replace_cpu=bool(p.cpu_only),
                                    installed=p.version)],
                    _verify(mine, *resolves) or ["gpu-doctor", "check", "framework.cpu_only_build",
                                                 "framework.arch_unsupported"], root=False))
            elif p.name.startswith("tensorflow") or p.name == "tf-nightly":
                mine = [f for f in bad if f.code in ("framework.cpu_only_build", "cudnn.missing",
                                                     "cudnn.version_mismatch", "toolkit.missing")
                        and _about(f, p.name, env.executable)]
                if not mine or not p.version:
                    continue
                row = m.tensorflow(p.version)
                base = p.version.split("+", 1)[0]
                req = f"tensorflow[and-cuda]=={base}"
                why = f"Install TensorFlow {base} with its CUDA extra, which pins the CUDA and cuDNN wheels it was " \
                      "built with" + (f" (CUDA {row.get('cuda')}, cuDNN {row.get('cudnn')})" if row else "")
                cmaj = vtuple((row or {}).get("cuda"))[:1] or (12,)
                out.append(PlanStep(f"tensorflow:{env.executable}", sorted({f.code for f in mine}), why,
                                    [PipInstall(env.executable, [req],
                                                uninstall=["tensorflow-cpu"] if p.name == "tensorflow-cpu" else [],
                                                conda=[f"tensorflow={base}=*cuda*"],
                                                done_when=[f"tensorflow=={base}", f"nvidia-cudnn-cu{cmaj[0]}"],
                                                cuda=(row or {}).get("cuda"))],
                                    _verify(mine, *{f.code for f in mine}), root=False))
            elif p.name in ("jax", "jaxlib"):
                mine = [f for f in bad if f.code in ("framework.cpu_only_build", "cudnn.missing", "toolkit.missing")
                        and _about(f, p.name, env.executable)]
                if not mine or not p.version or any(s.id == f"jax:{env.executable}" for s in out):
                    continue
                jax = next((q for q in env.packages if q.name == "jax"), p)
                major = 13 if vtuple(jax.version)[:2] >= (0, 7) and _driver(facts) and \
                    vtuple(_driver(facts))[0] >= 580 else 12
                req = f"jax[cuda{major}]=={jax.version}"
                out.append(PlanStep(f"jax:{env.executable}", sorted({f.code for f in mine}),
                                    f"Install JAX {jax.version} with its CUDA {major} plugin and the nvidia-* wheels "
                                    "it pins", [PipInstall(env.executable, [req],
                                                           conda=[f"jax={jax.version}", f"jaxlib={jax.version}=*cuda*"],
                                                           done_when=[f"jax=={jax.version}",
                                                                      f"jax-cuda{major}-plugin"],
                                                           cuda=f"{major}.0")],
                                    _verify(mine, *{f.code for f in mine}), root=False))
    return out


def _about(f: Finding, name: str, executable: str) -> bool:
    """Does this finding concern this package (by its title or evidence)?"""
    text = f.title + " " + " ".join(str(e.value) for e in f.evidence)
    return name in text and (executable in text or f.code != "framework.cpu_only_build")


def _py(version: str | None) -> str | None:
    return major_minor(version)
