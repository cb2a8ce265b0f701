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
import datetime as _dt
import re
from typing import Any

from doctor import beliefs
from doctor.beliefs import runtimes, windows_driver
from doctor.matrix import Matrix, branch, driver_runs_cuda, major_minor, vtuple
from doctor.model.facts import Facts, PythonEnv
from doctor.model.findings import Finding
from doctor.model.plan import FixPlan, PlanStep
from doctor.model.records import dataclass
from doctor.model.remedy import (
    INTENTS,
    Action,
    AttachGpu,
    BlacklistNouveau,
    HoldPackages,
    InstallContainerToolkit,
    InstallCudaCompat,
    InstallCudnn,
    InstallDriver,
    InstallDriverBranch,
    InstallToolkit,
    Intent,
    LoadModule,
    Manual,
    OnlyIfWanted,
    PinDriverBranch,
    PipInstall,
    Reboot,
    RebuildDkms,
    ReinstallFramework,
    ReinstallTorch,
    ReloadDriver,
    UnsetEnvVar,
)
from doctor.platforms import infer as _infer_platform
from doctor.platforms import kernel_headers_packaged, tegra_board
from doctor.queries import QueryError, TorchNeeds, driver_floor, pick_torch

# NVIDIA's open GPU kernel modules ship from R515 on ("available from R515", the Turing row of gpus.toml).
OPEN_MODULE_FIRST_BRANCH = 515


def runnable(exe: str) -> str:
    """The interpreter as a program to run: a path as the facts name it; a report's label for an interpreter it
    never named ("python (collect_env)") is no program — the user's own `python` is meant."""
    return exe if exe.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", exe) else "python"



@dataclass(frozen=True)
class Options:
    """What the user asks of a plan: a target driver or CUDA, a wanted framework, Python only."""
    target_driver: str | None = None  # "550" or "550.54.14"
    target_cuda: str | None = None  # "12.4"
    want: str | None = None  # "torch==2.5.1"
    python_only: bool = False  # only what a Python environment can do (fix --format pip|conda)


class PlanError(ValueError):
    """An override the matrix cannot honour (unknown CUDA, malformed driver): one line for the user."""


# --- building it: intents + facts + matrix → one plan ---------------------------------------------

ENGINES = ("docker", "podman", "containerd", "cri-o")
_ORDER = ("blocker", "nouveau", "driver", "dkms", "module", "mismatch", "compat", "toolkit", "cudnn", "container",
          "env", "torch", "tensorflow", "jax", "manual")


def build_plan(facts: Facts, findings: list[Finding], m: Matrix, opts: Options | None = None) -> FixPlan:
    """The one plan for these findings: every failing or warning finding's intents weighed together.

    ``PlanStep.findings`` holds the positions (in ``findings``) of the findings each step resolves, so the fix
    shown under a finding (:func:`fix_for`) is the plan's own step.
    """
    opts = opts or Options()
    _check_options(m, opts)
    return _Planner(facts, findings, m, opts).build()


class _Planner:
    def __init__(self, facts: Facts, findings: list[Finding], m: Matrix, opts: Options) -> None:
        self.facts, self.m, self.opts = facts, m, opts
        self.bad = [(n, f) for n, f in enumerate(findings) if f.severity in ("fail", "warn")]
        self.steps: dict[str, PlanStep] = {}
        self.notes: list[str] = []
        self.targets: dict[str, Any] = {}
        self.skipped: list[str] = []  # what --format pip|conda leaves to the system (by the step's why)

    # -- bookkeeping ---------------------------------------------------------------------------------
    def add(self, step: PlanStep) -> None:
        if step.id in self.steps:  # merge: one step resolving several findings
            old = self.steps[step.id]
            self.steps[step.id] = dataclasses.replace(
                old, resolves=sorted({*old.resolves, *step.resolves}),
                verify=list(dict.fromkeys([*old.verify, *step.verify])),
                findings=sorted({*old.findings, *step.findings}))
        else:
            self.steps[step.id] = step

    def claim(self, sid: str, who: list[tuple[int, Finding]]) -> None:
        """Mark findings as resolved by an existing step."""
        st = self.steps[sid]
        self.steps[sid] = dataclasses.replace(
            st, resolves=sorted({*st.resolves, *(f.code for _n, f in who)}),
            verify=list(dict.fromkeys([*st.verify, *_verify(who)[2:]])) if st.verify else _verify(who),
            findings=sorted({*st.findings, *(n for n, _f in who)}))

    def feasible(self, intent: Intent) -> bool:
        if self.opts.python_only and not intent.python_only and not isinstance(intent, (UnsetEnvVar, Manual)):
            return False
        # A container uses its host's kernel driver: nothing installed inside it changes the driver.
        return not (isinstance(intent, InstallDriverBranch) and self.facts.host.container)

    # -- the plan ----------------------------------------------------------------------------------------
    def build(self) -> FixPlan:
        chosen: list[tuple[int, Finding, Intent]] = []
        unplanned: list[tuple[int, Finding]] = []
        for n, f in self.bad:
            # Kinds are alternatives, in the order the check gave them; every intent of the chosen kind is done.
            kinds = list(dict.fromkeys(type(i) for i in f.intents))
            kind = next((k for k in kinds if all(self.feasible(i) for i in f.intents if type(i) is k)), None)
            if kind is None:
                unplanned.append((n, f))
                continue
            chosen += [(n, f, i) for i in f.intents if type(i) is kind]
        by = {kind: [(n, f, i) for n, f, i in chosen if isinstance(i, kind)] for kind in INTENTS}
        self._driver(by[InstallDriverBranch])
        for n, f, i in by[InstallCudaCompat]:
            if isinstance(i, InstallCudaCompat):  # always: grouped by kind above
                self._compat_step(i.package, i.cuda, [(n, f)])
        self._simple(by)
        self._module(by[LoadModule])
        self._frameworks(by[ReinstallFramework])
        for n, f in unplanned:
            self._unplanned(n, f)
        self._blocker(by[AttachGpu])
        d = self.facts.driver
        env = _framework_env(self.facts)
        steps = sorted(self.steps.values(), key=_order)
        return FixPlan(os_id=self.facts.host.os_id, os_version=self.facts.host.os_version,
                       os_pretty=self.facts.host.os_pretty, arch=self.facts.host.arch,
                       steps=steps, targets=self.targets,
                       notes=[*self.notes, *self.skipped],
                       python_origin=env.origin if env else None,
                       conda_prefix=(self.facts.env.get("CONDA_PREFIX") or None)
                       if env and env.origin == "CONDA_PREFIX" else None,
                       gpu_visible=bool([g for g in self.facts.gpus if g.source != "pci"])
                       and d.module_loaded is not False,
                       constraints=_constraints([a for s in steps for a in s.actions], self.m))

    def _blocker(self, wants: list[tuple[int, Finding, Any]]) -> None:
        """No NVIDIA GPU on the PCI bus: that is the first step, before any driver or framework step can matter."""
        if beliefs.of(self.facts).gpu_on_bus.value is not False or not (wants or self.steps):
            return
        who = [(n, f) for n, f, _i in wants]
        where = " Inside a container: start it on a GPU host with the GPU requested (docker run --gpus all)." \
            if self.facts.host.container else ""
        self.add(PlanStep("blocker", sorted({f.code for _n, f in who}) or ["no-gpu"],
                          "First attach an NVIDIA GPU: the PCI bus lists none, so no driver, toolkit or framework "
                          "step below can make CUDA work until one is there",
                          [Manual("Attach a GPU (the instance type, PCI passthrough, or the card's seating and power); "
                                  "the steps below apply once `lspci -nn | grep -i nvidia` lists it." + where,
                                  ["lspci -nn | grep -i nvidia"])],
                          _verify(who) or ["gpu-doctor", "check"], root=False, findings=[n for n, _f in who]))

    def _unplanned(self, n: int, f: Finding) -> None:
        system = [i for i in f.intents if not self.feasible(i)]
        if self.opts.python_only:  # only the Python environment's part: the rest is named, for `gpu-doctor fix`
            self.skipped.append(f"not in this format (it needs the system, not the Python environment): "
                                f"{f.title} — run `gpu-doctor fix` for it")
            return
        extra = None
        if any(isinstance(i, InstallDriverBranch) for i in system) and self.facts.host.container:
            need = max((i.minimum or i.recommended for i in f.intents if isinstance(i, InstallDriverBranch)
                        and (i.minimum or i.recommended)), key=vtuple, default=None)
            extra = (f"The driver is the container host's: upgrade it there (to ≥ {need or 'the version named'}); "
                     "nothing installed inside the container changes it.")
        self.add(_manual_step(f"manual-{f.code}", [(n, f)], extra))

    # -- the driver: every need at once --------------------------------------------------------------
    def _driver(self, wants: list[tuple[int, Finding, Intent]]) -> None:
        opts, facts, m = self.opts, self.facts, self.m
        if not wants and not (opts.target_driver and not opts.python_only):
            return
        # "Move to a supported branch" alone stays a person's decision; a driver step planned for another need
        # installs a supported branch and so resolves it too.
        lifecycle = [(n, f) for n, f, i in wants if isinstance(i, InstallDriverBranch) and i.supported]
        wants = [(n, f, i) for n, f, i in wants if not (isinstance(i, InstallDriverBranch) and i.supported)]
        if not wants and not opts.target_driver:
            for n, f in lifecycle:
                self._unplanned(n, f)
            return
        who = [(n, f) for n, f, _i in wants]
        if tegra_board(facts, m):
            # A Jetson's driver is part of Jetson Linux (L4T): a desktop branch never installs there.
            self.add(_manual_step("driver", [*who, *lifecycle], "The GPU driver of a Jetson comes with JetPack "
                                  "(Jetson Linux / L4T), not from a desktop driver branch: upgrade JetPack to a "
                                  "release whose CUDA is new enough (NVIDIA's JetPack release notes name it)."))
            return
        needs = [i for _n, _f, i in wants if isinstance(i, InstallDriverBranch)]
        needs += self._implicit_driver_needs(needs)
        if not opts.target_driver and needs and all(i.cuda for i in needs):
            pkg = self._forward_compat([i.cuda for i in needs if i.cuda])
            if pkg:
                self._compat_step(pkg[0], pkg[1], who)
                for n, f in lifecycle:
                    self._unplanned(n, f)
                return
        row, arch = _gpu(facts, m)
        lasts = [int(str(a["last_driver_branch"])) for g in facts.gpus
                 for a in [m.gpu_for_facts(g.name, g.compute_capability)[1]] if a and a.get("last_driver_branch")]
        last_gpu = min(lasts, default=None)
        last = min([i.last_branch for i in needs if i.last_branch] + lasts, default=None)
        reasons = [f"{i.who or 'it'} needs ≥ {i.minimum or i.recommended}"
                   + (f" ({i.recommended} for full support)" if i.minimum and i.recommended
                      and i.recommended != i.minimum else "")
                   for i in needs if i.recommended or i.minimum]
        reasons = list(dict.fromkeys(reasons))  # a need stated by a check and implied by the facts is said once
        if opts.target_driver:
            target: int | None = int(vtuple(opts.target_driver)[0])
            reasons = [f"--target-driver {opts.target_driver}"]
        else:
            target = max((branch(i.recommended or i.minimum) or 0 for i in needs if i.recommended or i.minimum),
                         default=None) or None
        if target and last and target > last:
            self.notes.append(f"{(row or {}).get('name', 'this GPU')} is supported up to the R{last} branch only, "
                              f"but branch {target} was asked for ({'; '.join(reasons)}): installing R{last} "
                              "instead; what needs a newer driver will still not run on this GPU.")
            target = last
        if target is None and last:
            target = last
            reasons.append(f"{(arch or {}).get('name', 'this GPU')} GPUs are supported up to R{last}")
        if target is None:
            self.add(_manual_step("driver", who, "The driver branch to install could not be chosen: the matrix "
                                  "knows neither this GPU nor a CUDA runtime that needs a given driver. Pass "
                                  "--target-driver BRANCH."))
            return
        if not opts.target_driver:
            target = self._supported_branch(target, last, last_gpu, row, arch)
        else:
            self._warn_if_ended(target, last_gpu, row, arch)
        flavor = _flavor(facts, m, target, next((i.flavor for i in needs if i.flavor), None))
        floor = max([branch(i.minimum) or 0 for i in needs if i.minimum] +
                    [branch(m.first_driver(arch, _cc(g, m))) or 0 for g in facts.gpus
                     for arch in [m.gpu_for_facts(g.name, g.compute_capability)[1]]], default=0)
        floor = min(floor, target) if floor else target
        self.targets["driver_branch"] = target
        self.targets["driver_flavor"] = flavor
        why = f"Install NVIDIA driver branch {target} ({flavor} kernel module)" + (
            ": " + "; ".join(dict.fromkeys(reasons)) if reasons else "")
        action = InstallDriver(target, flavor, facts.driver.running_kernel, floor,
                               (row or {}).get("segment") == "datacenter", last,
                               flavor == "open" and any(_open_required(m, g) for g in facts.gpus),
                               self._headers(facts.driver.running_kernel))
        self.add(PlanStep("driver", sorted({f.code for _n, f in [*who, *lifecycle]}) or ["--target-driver"], why,
                          [action, Reboot(f"the new {target} kernel module loads at boot")],
                          _verify([*who, *lifecycle]) or ["gpu-doctor", "check"], risk="reboot",
                          findings=sorted({n for n, _f in [*who, *lifecycle]})))

    def _headers(self, kernel: str | None) -> bool | None:
        """Whether the distribution packages headers for ``kernel``; a kernel it cannot have is said once."""
        ok = kernel_headers_packaged(self.facts.host.os_id, kernel)
        if ok is False:
            note = (f"The running kernel {kernel} is not one {self.facts.host.os_pretty or self.facts.host.os_id} "
                    "packages (a custom or cloud vendor's kernel): no headers package exists for it, so DKMS can only "
                    "build the nvidia module with the headers that kernel was built with (install them by hand), or "
                    "after booting a distribution kernel.")
            if note not in self.notes:
                self.notes.append(note)
        return ok

    def _today(self) -> _dt.date:
        try:
            return _dt.date.fromisoformat((self.facts.collected_at or "")[:10])
        except ValueError:
            return _dt.date.today()

    def _supported_branch(self, need: int, last: int | None, last_gpu: int | None, row: dict[str, Any] | None,
                          arch: dict[str, Any] | None) -> int:
        """The branch to install for a need of ``need``: the lowest long-term branch NVIDIA still supports at or
        above it (then production, then new-feature), capped by the GPU's last branch; an ended branch only when
        it is the last one that drives the GPU (said in a note)."""
        m, today = self.m, self._today()
        rows = m.supported_branches(today, need, last)
        if rows:
            chosen = int(str(rows[0]["branch"]))
            if chosen != need:
                kind = {"LTSB": "long-term support", "PB": "production", "NFB": "new-feature"}.get(
                    str(rows[0].get("designation")), "supported")
                self.notes.append(f"Driver branch {chosen}: the {kind} branch NVIDIA still supports"
                                  + (f" (until {rows[0]['eol']})" if rows[0].get("eol") else "")
                                  + f" at or above R{need}, which the needs call for"
                                  + (f" (R{need} is past its end of life)" if m.branch_ended(need, today) else ""))
            return chosen
        self._warn_if_ended(need, last_gpu, row, arch)
        return need

    def _warn_if_ended(self, target: int, last_gpu: int | None, row: dict[str, Any] | None,
                       arch: dict[str, Any] | None) -> None:
        if not self.m.branch_ended(target, self._today()):
            return
        name = (row or {}).get("name") or (arch or {}).get("name", "this GPU")
        if last_gpu is not None and target == last_gpu:
            self.notes.append(f"Driver branch R{target} is past NVIDIA's end of life (no more security fixes), but "
                              f"it is the last branch that drives {name}: it is installed anyway; plan the GPU's "
                              "replacement.")
        else:
            self.notes.append(f"Driver branch R{target} is past NVIDIA's end of life (no more security fixes).")

    def _implicit_driver_needs(self, asked: list[InstallDriverBranch]) -> list[InstallDriverBranch]:
        """What a new driver must also satisfy beyond what the findings asked: every CUDA runtime here that the
        installed driver does not run, and every GPU's first driver (a driver installed from nothing)."""
        facts, m = self.facts, self.m
        installed = _driver(facts)
        have = {i.cuda for i in asked if i.cuda}
        out = []
        for who, cuda, _kind in runtimes(facts):
            if cuda in have:
                continue
            if installed is None or not driver_runs_cuda(m, installed, cuda).ok:
                native = (m.min_driver(cuda) or {}).get("linux_min_driver")
                if native:
                    out.append(InstallDriverBranch(minimum=driver_floor(m, cuda) or native, recommended=native,
                                                      cuda=cuda, who=f"{who} (CUDA {major_minor(cuda)})"))
        for g in facts.gpus:
            _row, arch = m.gpu_for_facts(g.name, g.compute_capability)
            first = m.first_driver(arch, _cc(g, m))
            if first and arch is not None and (installed is None or vtuple(installed) < vtuple(first)):
                out.append(InstallDriverBranch(minimum=first, recommended=first, who=f"a {arch['name']} GPU",
                                                  gpu=g.name))
        return out

    def _forward_compat(self, cudas: list[str]) -> tuple[str, str] | None:
        """A cuda-compat package that lets the installed branch run every one of these CUDA runtimes, on GPUs
        forward compatibility supports (data-center and embedded ones, every GPU here)."""
        facts, m = self.facts, self.m
        installed = _driver(facts)
        gpus = [g for g in facts.gpus if g.source != "pci"]
        segments = {(m.gpu(g.name) or {}).get("segment") for g in gpus}
        policy = m.table("cuda", "forward_compat_policy").get("segments", [])
        if not installed or not gpus or not segments <= set(policy) or facts.host.wsl:
            return None
        majors = {vtuple(c)[:1] for c in cudas}
        if len(majors) != 1:
            return None
        top = max(cudas, key=vtuple)
        rows = [r for r in m.forward_compat_rows(top) if str(branch(installed)) in
                [str(b) for b in r.get("driver_branches", [])]]
        best = min(rows, key=lambda r: vtuple(r.get("cuda")), default=None)
        return (best["package"], str(best["cuda"])) if best else None

    def _compat_step(self, package: str, cuda: str, who: list[tuple[int, Finding]]) -> None:
        self.targets["cuda_compat"] = package
        self.add(PlanStep("compat", sorted({f.code for _n, f in who}),
                          f"This data-center GPU can run CUDA {cuda} on driver {_driver(self.facts)} through "
                          f"NVIDIA's forward-compatibility package {package}, without changing the driver",
                          [InstallCudaCompat(package, cuda),
                           Manual(f"Point the application at the compat libraries: LD_LIBRARY_PATH=/usr/local/cuda-"
                                  f"{cuda}/compat:$LD_LIBRARY_PATH")], _verify(who), findings=[n for n, _f in who]))

    # -- one step per intent kind --------------------------------------------------------------------------
    def _simple(self, by: dict[type, list[tuple[int, Finding, Any]]]) -> None:
        facts, m = self.facts, self.m
        for n, f, _i in by[BlacklistNouveau]:
            self.add(PlanStep("nouveau", [f.code], "nouveau holds the GPU at boot, so the nvidia module cannot bind: "
                              "blacklist it in the initramfs",
                              [BlacklistNouveau(), Reboot("nouveau leaves only at the next boot")],
                              _verify([(n, f)]), risk="reboot", findings=[n]))
        for n, f, i in by[RebuildDkms]:
            actions: list[Action] = [dataclasses.replace(i, headers=self._headers(i.kernel))]
            self.add(PlanStep("dkms", [f.code], f"No nvidia module is built for kernel {i.kernel}: install its "
                              "headers and rebuild with DKMS", actions, _verify([(n, f)]), findings=[n]))
            if i.load:
                st = self.steps["dkms"]
                if not any(isinstance(a, LoadModule) for a in st.actions):
                    self.steps["dkms"] = dataclasses.replace(st, actions=[*st.actions, LoadModule("nvidia")])
        for n, f, i in by[ReloadDriver]:
            d = facts.driver
            held = sorted(p.name for p in d.packages if p.manager in ("dpkg", "rpm"))
            acts: list[Action] = [Reboot(f"the loaded module {i.kernel_module or '?'} is older than the user-space "
                                         f"{i.userspace or '?'}; the reboot loads the matching one", always=True),
                                  Manual("Without a reboot: stop every GPU process and the display manager, then "
                                         "reload the modules.",
                                         ["rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia", "modprobe nvidia"])]
            if held:
                acts.insert(0, HoldPackages(held))
            self.add(PlanStep("mismatch", [f.code], "The driver packages were upgraded under a running module: hold "
                              "them so unattended upgrades cannot do it again, and reboot to load the matching module",
                              acts, _verify([(n, f)]), risk="reboot", findings=[n]))
        toolkits = by[InstallToolkit]
        cuda = self.opts.target_cuda if not self.opts.python_only else None
        for _n, _f, i in toolkits:
            cuda = cuda or i.cuda
        if toolkits and not cuda:
            cuda = _toolkit_for_gpu(facts, m, self.targets.get("driver_branch"))
        if cuda and (toolkits or self.opts.target_cuda):
            who = [(n, f) for n, f, _i in toolkits]
            self.targets["toolkit"] = cuda
            self.add(PlanStep("toolkit", sorted({f.code for _n, f in who}) or ["--target-cuda"],
                              f"Install the CUDA {cuda} toolkit from NVIDIA's repository (side by side with others, "
                              f"in /usr/local/cuda-{cuda})",
                              [InstallToolkit(cuda), Manual(f"Use it for builds: export PATH=/usr/local/cuda-{cuda}"
                                                            f"/bin:$PATH CUDA_HOME=/usr/local/cuda-{cuda}")],
                              _verify(who) or ["gpu-doctor", "check"],
                              findings=[n for n, _f in who]))
        elif toolkits:
            for n, f, _i in toolkits:
                self._unplanned(n, f)
        for n, f, i in by[InstallCudnn]:
            cmaj = i.cuda_major or _system_cuda_major(facts)
            if not cmaj:
                self._unplanned(n, f)
                continue
            self.add(PlanStep("cudnn", [f.code], f"Install cuDNN {i.version} built for CUDA {cmaj} from NVIDIA's "
                              "CUDA repository (also published as NVIDIA's redistributable archive)",
                              [dataclasses.replace(i, cuda_major=cmaj)], _verify([(n, f)]), findings=[n]))
        for n, f, i in by[InstallContainerToolkit]:
            self.add(PlanStep("container", [f.code], f"Let {i.engine} containers use the GPU: install and configure "
                              "the NVIDIA container toolkit", [i],
                              _verify([(n, f)]), risk="restart", findings=[n]))
        for n, f, i in by[UnsetEnvVar]:
            self.add(PlanStep(f"env:{i.name}", [f.code], f"Unset {i.name}" + (f": {i.reason}" if i.reason else ""),
                              [Manual(f"Remove {i.name} from the environment where it is set (shell profile, "
                                      "job script, container spec); for this shell:", [f"unset {i.name}"])],
                              _verify([(n, f)]), root=False, findings=[n]))
        for _n, _f, i in by[OnlyIfWanted]:
            if i.text not in self.notes:
                self.notes.append(i.text)
        for n, f, i in by[Manual]:
            self.add(PlanStep(f"manual-{f.code}", [f.code], f"Needs a person: {f.title}",
                              [i], _verify([(n, f)]), root=False, findings=[n]))

    def _module(self, wants: list[tuple[int, Finding, Any]]) -> None:
        if not wants:
            return
        who = [(n, f) for n, f, _i in wants]
        # The module loads once its cause is gone: a step that installs, unblocks or builds it resolves it too.
        cause = next((sid for sid in ("driver", "nouveau", "dkms") if sid in self.steps), None)
        if cause:
            self.claim(cause, who)
            return
        self.add(PlanStep("module", sorted({f.code for _n, f in who}), "The nvidia module is installed but not "
                          "loaded: load it", [LoadModule(wants[0][2].module)], _verify(who),
                          findings=[n for n, _f in who]))

    # -- Python frameworks -------------------------------------------------------------------------------
    def _frameworks(self, wants: list[tuple[int, Finding, Any]]) -> None:
        facts, opts = self.facts, self.opts
        torch: dict[str, list[tuple[int, Finding, ReinstallFramework]]] = {}
        other: dict[tuple[str, str], list[tuple[int, Finding, ReinstallFramework]]] = {}
        for n, f, i in wants:
            if i.reason == "driver" and ("driver" in self.steps or "compat" in self.steps):
                self.claim("driver" if "driver" in self.steps else "compat", [(n, f)])
                continue  # the driver step already lets this build run
            if i.package == "torch":
                torch.setdefault(i.env, []).append((n, f, i))
            else:
                family = "jax" if i.package in ("jax", "jaxlib") else "tensorflow"
                other.setdefault((family, i.env), []).append((n, f, i))
        if opts.want and not torch:
            env = next((e for e in facts.python_envs if any(p.name == "torch" for p in e.packages)), None)
            if env:
                torch[env.executable] = []
        for exe, items in torch.items():
            self._torch(exe, items)
        for (family, exe), items in other.items():
            self._tf_or_jax(family, exe, items)

    def _torch(self, exe: str, items: list[tuple[int, Finding, ReinstallFramework]]) -> None:
        facts, m, opts = self.facts, self.m, self.opts
        env = next((e for e in facts.python_envs if e.executable == exe), None)
        pkg = next((p for p in (env.packages if env else []) if p.name == "torch"), None)
        who = [(n, f) for n, f, _i in items]
        resolves = sorted({f.code for _n, f in who}) or ["--want"]
        base = ((pkg.version if pkg else None) or "").split("+", 1)[0]
        keep = base if items and all(i.reason in ("cpu_only", "driver") for _n, _f, i in items) else None
        needs = self.torch_needs(env, want=opts.want, prefer=keep)
        blocker = self._gpu_driver_blocker(needs.driver)
        if blocker and "driver" not in self.steps and not opts.python_only and not facts.host.container:
            # No build runs until the GPU has a driver that drives it: plan that driver too, then pick for it.
            self._driver([(n, f, InstallDriverBranch()) for n, f, _i in items])
            needs = self.torch_needs(env, want=opts.want, prefer=keep)
            blocker = self._gpu_driver_blocker(needs.driver)
        after_driver = False
        try:
            pick: dict[str, Any] = {"possible": False, "why": blocker or ""}
            # A build the installed driver runs first: the step then stands on its own, whatever is done with
            # the driver step. Only when none fits does the torch step count on the planned driver.
            current = self.torch_needs(env, want=opts.want, prefer=keep, planned=False)
            if not self._gpu_driver_blocker(current.driver) and (current.driver or current.driver_cuda):
                pick = pick_torch(m, current)
            if not pick.get("possible") and not blocker:
                pick = pick_torch(m, needs)
                after_driver = bool(pick.get("possible")) and needs.driver != current.driver
        except QueryError as exc:
            pick = {"possible": False, "why": str(exc)}
        if after_driver and "driver" in self.steps:
            self.claim("driver", who)  # the build runs only once the new driver is in: both steps resolve it
        if opts.target_cuda and pick.get("possible"):
            var = m.torch_variant(pick["torch"], opts.target_cuda)
            if var:
                pick = {**pick, "cuda": var["cuda"]}
        sid = f"torch:{exe}"
        if not pick.get("possible"):
            self.add(PlanStep(sid, resolves, f"No torch build fits: {pick['why']}",
                              [Manual(f"No PyTorch build in the matrix fits: {pick['why']}.")], _verify(who),
                              root=False, findings=[n for n, _f in who]))
            return
        if pick.get("forward_compat"):
            fc = pick["forward_compat"]
            self._compat_step(fc["package"], fc["cuda"], [])
        cuda = pick["cuda"]
        index = f"https://download.pytorch.org/whl/cu{cuda.replace('.', '')}"
        self.targets["torch"] = {"version": pick["torch"], "cuda": cuda, "index_url": index,
                                 "source": pick.get("source")}
        have = {p.name for p in (env.packages if env else [])}
        companions = [f"{name}=={pick[name]}" for name in ("torchvision", "torchaudio")
                      if name in have and pick.get(name)]
        for name in ("torchvision", "torchaudio"):
            if name in have and not pick.get(name):
                self.notes.append(f"{name} is installed in {exe}, but the matrix knows no {name} release paired "
                                  f"with torch {pick['torch']}: reinstall it from {index} after torch.")
        cpu = bool(pkg and pkg.cpu_only)
        what = "replace the CPU-only build" if cpu else (
            f"replace the cu{(pkg.cuda or '?').replace('.', '')} build" if pkg else "install the build")
        self.add(PlanStep(sid, resolves,
                          f"{what[0].upper()}{what[1:]} of torch {pkg.version if pkg else ''} in {exe} with torch "
                          f"{pick['torch']} built for CUDA {cuda} (the driver runs it: {pick.get('rule')})",
                          [ReinstallTorch(runnable(exe), pick["torch"], cuda, index, replace_cpu=cpu,
                                          installed=pkg.version if pkg else None, companions=companions)],
                          _verify(who) or ["gpu-doctor", "check"], root=False,
                          findings=[n for n, _f in who]))

    def _gpu_driver_blocker(self, drv: str | None) -> str | None:
        """Why no framework build can help: a GPU the (planned) driver does not drive."""
        if not drv:
            return None
        full = drv if "." in drv else f"{drv}.999.99"
        for g in self.facts.gpus:
            _row, arch = self.m.gpu_for_facts(g.name, g.compute_capability)
            first, last = self.m.first_driver(arch, _cc(g, self.m)), (arch or {}).get("last_driver_branch")
            if first and arch and vtuple(full) < vtuple(first):
                return f"{g.name} ({arch['name']}) needs driver ≥ {first}: upgrade the driver — no framework " \
                       "build can help"
            if last and vtuple(full)[0] > int(last):
                return f"driver branch {vtuple(full)[0]} no longer drives {g.name}: install the R{last} branch"
        return None

    def torch_needs(self, env: PythonEnv | None, want: str | None = None, prefer: str | None = None,
                    planned: bool = True) -> Any:
        facts, m = self.facts, self.m
        ccs = tuple(sorted({c for g in facts.gpus if g.source != "pci" for c in [_cc(g, m)] if c}))
        segments = [(m.gpu(g.name) or {}).get("segment") for g in facts.gpus if g.source != "pci"]
        segment = None if (not segments or None in segments) else (
            "consumer" if "consumer" in segments else "workstation" if "workstation" in segments else segments[0])
        drv = _driver(facts)
        if planned and "driver_branch" in self.targets:
            drv = str(self.targets["driver_branch"])
        compat = tuple(p.name for p in facts.driver.packages if p.name.startswith("cuda-compat"))
        if planned and "cuda_compat" in self.targets:
            compat = (*compat, self.targets["cuda_compat"])
        # A driver whose version is unknown still tells its CUDA level (nvidia-smi's "CUDA Version",
        # cuDriverGetVersion, torch's "found version"): no build is picked that needs more than that.
        level = None if drv else major_minor(beliefs.of(facts).driver_cuda.value)
        return TorchNeeds(ccs=ccs, driver=drv, segment=segment, python=_py(env.version) if env else None,
                          platform=platform(facts, m), want=want, prefer=prefer,
                          forward_compat=not self.opts.python_only, compat_packages=compat,
                          windows_driver=_windows_driver(facts), driver_cuda=level)

    def _tf_or_jax(self, family: str, exe: str, items: list[tuple[int, Finding, ReinstallFramework]]) -> None:
        facts, m = self.facts, self.m
        env = next((e for e in facts.python_envs if e.executable == exe), None)
        who = [(n, f) for n, f, _i in items]
        codes = sorted({f.code for _n, f in who})
        plat = platform(facts, m)
        if plat != "linux-x86_64" and plat != "linux-aarch64":
            for n, f in who:
                self.add(_manual_step(f"manual-{f.code}", [(n, f)], f"No CUDA build of {family} is published for "
                                      f"this platform ({plat})."))
            return
        pkgs = {p.name: p for p in (env.packages if env else [])}
        if family == "tensorflow":
            p = next((pkgs[k] for k in ("tensorflow", "tensorflow-cpu", "tf-nightly") if k in pkgs), None)
            if not p or not p.version:
                return
            row = m.tensorflow(p.version)
            base = p.version.split("+", 1)[0]
            if not (row or {}).get("and_cuda"):
                # The [and-cuda] extra exists from TensorFlow 2.14 on; older releases load a system CUDA and cuDNN.
                for n, f in who:
                    self.add(_manual_step(f"manual-{f.code}", [(n, f)],
                                          f"TensorFlow {base} has no [and-cuda] extra: install the CUDA "
                                          f"{(row or {}).get('cuda', '?')} and cuDNN {(row or {}).get('cudnn', '?')} "
                                          "it was built with (TensorFlow's tested build configurations), or move "
                                          "to TensorFlow 2.14 or newer."))
                return
            cmaj = vtuple((row or {}).get("cuda"))[:1] or (12,)
            self.add(PlanStep(f"tensorflow:{exe}", codes,
                              f"Install TensorFlow {base} with its CUDA extra, which pins the CUDA and cuDNN wheels "
                              "it was built with" + (f" (CUDA {row.get('cuda')}, cuDNN {row.get('cudnn')})"
                                                     if row else ""),
                              [PipInstall(runnable(exe), [f"tensorflow[and-cuda]=={base}"],
                                          uninstall=["tensorflow-cpu"] if p.name == "tensorflow-cpu" else [],
                                          conda=[f"tensorflow={base}=*cuda*"],
                                          done_when=[f"tensorflow=={base}", f"nvidia-cudnn-cu{cmaj[0]}"],
                                          cuda=(row or {}).get("cuda"))],
                              _verify(who), root=False, findings=[n for n, _f in who]))
            return
        jax = pkgs.get("jax") or pkgs.get("jaxlib")
        if not jax or not jax.version:
            return
        drv = _driver(facts)
        major = 13 if vtuple(jax.version)[:2] >= (0, 7) and drv and vtuple(drv)[0] >= 580 else 12
        self.add(PlanStep(f"jax:{exe}", codes, f"Install JAX {jax.version} with its CUDA {major} plugin and the "
                          "nvidia-* wheels it pins",
                          [PipInstall(runnable(exe), [f"jax[cuda{major}]=={jax.version}"],
                                      conda=[f"jax={jax.version}", f"jaxlib={jax.version}=*cuda*"],
                                      done_when=[f"jax=={jax.version}", f"jax-cuda{major}-plugin"],
                                      cuda=f"{major}.0")],
                          _verify(who), root=False, findings=[n for n, _f in who]))


def _windows_driver(facts: Facts) -> bool:
    """The driver is a Windows one (WSL2, native Windows): NVIDIA's Windows minimums apply."""
    return windows_driver(facts)


def _cc(g: Any, m: Matrix) -> str | None:
    """A GPU's compute capability as "X.Y": what the GPU reported when it reads as one, else its matrix row's."""
    v = vtuple(g.compute_capability)
    if len(v) >= 2:
        return f"{v[0]}.{v[1]}"
    return (m.gpu(g.name) or {}).get("compute_capability")


def platform(facts: Facts, m: Matrix) -> str:
    """The wheel platform (doctor.platforms): macos, windows, jetson (JetPack 4-6), linux-aarch64 (SBSA: Grace,
    DGX Spark, Jetson Thor, any Arm host) or linux-x86_64."""
    return _infer_platform(facts, m)


def _constraints(actions: list[Action], m: Matrix) -> list[str]:
    """Pins for the nvidia-* wheels the frameworks the plan installs pull in, from the reviewed matrix rows (the
    cuDNN of a torch variant in compat/pytorch.toml, ``and_cuda`` of compat/tensorflow.toml, JAX's pins)."""
    lines: list[str] = []
    for a in actions:
        if isinstance(a, ReinstallTorch):
            var = m.torch_variant(a.version, a.cuda)
            if var and var.get("cudnn"):
                lines.append(f"nvidia-cudnn-cu{vtuple(a.cuda)[0]}=={var['cudnn']}  # torch {a.version} cu"
                             f"{a.cuda.replace('.', '')} ({var.get('source') or 'compat/pytorch.toml'})")
        elif isinstance(a, PipInstall):
            for r in a.requirements:
                if r.startswith("tensorflow[and-cuda]=="):
                    row = m.tensorflow(r.split("==", 1)[1])
                    if row:
                        lines += [f"{pin}  # tensorflow {row['version']}" for pin in row.get("and_cuda", [])]
                elif r.startswith("jax[cuda"):
                    version = r.split("==", 1)[1] if "==" in r else None
                    jrow = next((j for j in m.rows("jax", "jax") if j.get("version") == version), None)
                    lines += [f"{pin}  # jax {version}" for pin in (jrow or {}).get("pins", []) if "cu" in pin]
    return list(dict.fromkeys(lines))


def pin_plan(facts: Facts, manager: str) -> FixPlan:
    """Keep the driver where it is (`gpu-doctor pin`): hold its packages of ``manager`` (dpkg or rpm; a package
    whose manager is unknown too) and pin the package manager to its branch."""
    held = [p.name for p in facts.driver.packages if p.manager in (manager, None)]
    drv = _driver(facts)
    actions: list[Action] = []
    if held:
        actions.append(HoldPackages(held))
    if branch(drv):
        actions.append(PinDriverBranch(int(branch(drv) or 0)))
    steps = [PlanStep("pin", ["pin"], f"Keep the driver {drv or '?'} and its packages where they are", actions,
                      ["gpu-doctor", "pin", "--check", "THIS_FILE"])] if actions else []
    h = facts.host
    return FixPlan(h.os_id, h.os_version, h.os_pretty, h.arch, steps)


def _check_options(m: Matrix, opts: Options) -> None:
    if opts.target_driver and (not vtuple(opts.target_driver) or vtuple(opts.target_driver)[0] < 100):
        raise PlanError(f"--target-driver {opts.target_driver!r}: not an NVIDIA driver branch (e.g. 550)")
    if opts.target_cuda and not m.toolkit_rows(major_minor(opts.target_cuda) or ""):
        raise PlanError(f"--target-cuda {opts.target_cuda!r}: not a CUDA release in the matrix (e.g. 12.4)")
    if opts.want and not opts.want.strip().lower().startswith(("torch", "pytorch")):
        raise PlanError(f"--want {opts.want!r}: only torch wishes are planned (e.g. torch==2.5.1)")


def _order(step: PlanStep) -> tuple[int, str]:
    head = step.id.split(":", 1)[0].split("-", 1)[0]
    return (_ORDER.index(head) if head in _ORDER else len(_ORDER), step.id)


def _driver(facts: Facts) -> str | None:
    return beliefs.driver_version(facts)


def _gpu(facts: Facts, m: Matrix) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    for g in facts.gpus:
        row, arch = m.gpu_for_facts(g.name, g.compute_capability)
        if row or arch:
            return row, arch
    return None, None


def _open_required(m: Matrix, g: Any) -> bool:
    row, arch = m.gpu_for_facts(g.name, g.compute_capability)
    return bool((arch or {}).get("open_kernel_module_required") or (row or {}).get("open_kernel_module_required"))


def _flavor(facts: Facts, m: Matrix, target: int, asked: str | None = None) -> str:
    """The kernel-module flavour for branch ``target``: the open module exists from R515 and drives Turing and
    newer only; a GPU that requires it gets it; else what was asked, what is installed, NVIDIA's default."""
    arches = [m.gpu_for_facts(g.name, g.compute_capability) for g in facts.gpus if g.name or g.compute_capability]
    if target < OPEN_MODULE_FIRST_BRANCH or any(a and a.get("open_kernel_module") is False for _r, a in arches):
        return "proprietary"
    if any(_open_required(m, g) for g in facts.gpus):
        return "open"
    if asked in ("open", "proprietary"):
        return asked
    if facts.driver.module_flavor in ("open", "proprietary"):
        return facts.driver.module_flavor
    return "open" if arches and all(a and a.get("open_kernel_module") for _r, a in arches) else "proprietary"


def _verify(who: list[tuple[int, Finding]]) -> list[str]:
    ids = list(dict.fromkeys(f.check or f.code for _n, f in who))
    return ["gpu-doctor", "check", *ids] if ids else []


def _manual_step(sid: str, who: list[tuple[int, Finding]], extra: str | None = None) -> PlanStep:
    texts, cmds = [], []
    for _n, f in who:
        if f.fix:
            texts.append(f.fix.summary)
            cmds += [s.shell() + (f"   # {s.note}" if s.note else "") for s in f.fix.steps]
    if extra and not any(t.startswith(extra) for t in texts):  # a finding the plan already fixed says it once
        texts.insert(0, extra)
    title = who[0][1].title if who else sid
    return PlanStep(sid, sorted({f.code for _n, f in who}), f"Needs a person: {title}",
                    [Manual(" ".join(texts) or "See `gpu-doctor check -v` for the evidence.", cmds)],
                    _verify(who), root=False, findings=[n for n, _f in who])


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


def _py(version: str | None) -> str | None:
    return major_minor(version)
