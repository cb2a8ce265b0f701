"""Rules the compatibility matrix drives: driver vs CUDA runtimes and GPUs, arch lists, cuDNN, compilers.

Every finding names the rule that decided it and quotes the matrix rows it used, with their source
URLs, in its evidence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from doctor import beliefs
from doctor.beliefs import runtimes
from doctor.checks import require_cuda as rc
from doctor.checks.common import ev, finding, label, ok
from doctor.matrix import Matrix, Row, Verdict, branch, cuda_in, driver_meets, driver_runs_cuda, major_minor, vtuple
from doctor.model.facts import Facts, Gpu, PyPackage, PythonEnv, Toolkit
from doctor.model.findings import Evidence, Finding, value_text
from doctor.model.intents import (
    InstallCudaCompat,
    InstallCudnn,
    InstallDriverBranch,
    InstallToolkit,
    Intent,
    ReinstallFramework,
)
from doctor.model.versions import cudnn_version
from doctor.platforms import infer as infer_platform
from doctor.queries import driver_floor
from doctor.registry import Context, NotApplicable, Skip, check, matrix_of
from doctor.safeio import lazy_compile


def _matrix(ctx: Context) -> Matrix:
    return matrix_of(ctx)


def row_evidence(rows: list[Row], what: str = "compat") -> list[Evidence]:
    out = []
    for r in rows:
        if not r:
            continue
        key = r.get("version") or r.get("package") or r.get("cuda_major") or r.get("name") or r.get("cuda")
        shown = {k: v for k, v in r.items() if k not in ("source", "source2", "note", "variant")}
        out.append(Evidence(f"{what}:{key}", shown, r.get("source")))
    return out


def _driver(facts: Facts) -> str | None:
    return beliefs.driver_version(facts)


def _gpus(facts: Facts) -> list[Gpu]:
    return [g for g in facts.gpus if g.source != "pci"]


def _models(gpus: list[Gpu]) -> list[list[Gpu]]:
    """The GPUs grouped by model (name and compute capability), in the order first seen. What a driver, a
    toolkit or a framework build supports is a property of the model: an 8-GPU node gets one verdict per
    model, naming all its GPUs, not eight identical ones."""
    out: dict[tuple[str | None, str | None], list[Gpu]] = {}
    for g in gpus:
        out.setdefault((g.name, g.compute_capability), []).append(g)
    return list(out.values())


def _segment(m: Matrix, facts: Facts) -> str | None:
    """The GPU segment that decides forward-compatibility eligibility (the least eligible GPU wins)."""
    segs = [(m.gpu(g.name) or {}).get("segment") for g in _gpus(facts)]
    if not segs or None in segs:
        return None
    return "consumer" if "consumer" in segs else segs[0]


def _verdict(m: Matrix, facts: Facts, cuda: str) -> Verdict:
    compat = tuple(p.name for p in facts.driver.packages if p.name.startswith("cuda-compat"))
    # Under WSL2 the driver is the Windows one, and NVML reports its Windows version (e.g. 551.78).
    return driver_runs_cuda(m, _driver(facts), cuda, _segment(m, facts), compat, beliefs.of(facts).driver_cuda.value,
                            windows=beliefs.windows_driver(facts))


def _driver_vs_runtimes(facts: Facts, ctx: Context, kind: str, code: str) -> Iterator[Finding]:
    m = _matrix(ctx)
    items = [r for r in runtimes(facts) if r[2] == kind]
    if not items:
        raise NotApplicable(f"no {'CUDA toolkit' if kind == 'toolkit' else 'CUDA build of a framework'} found")
    if not (_driver(facts) or beliefs.of(facts).driver_cuda.value):
        raise Skip("the driver version is unknown")
    for who, cuda, kind in items:
        v = _verdict(m, facts, cuda)
        evidence = [ev(facts, "driver.kernel_module" if facts.driver.kernel_module else "driver.userspace"),
                    Evidence("runtime", f"{who}: CUDA {cuda}"), Evidence("rule", v.rule),
                    *row_evidence(v.rows)]
        if v.rule == "unknown":
            raise Skip(v.explanation)
        compiles = any(t.nvcc_version for t in facts.toolkits if who.endswith(f" at {t.root}"))
        if v.ok and kind == "toolkit" and v.rule == "minor-version" and compiles:
            # Same major, older driver: SASS runs, but PTX this toolkit emits (nvcc compute_XX, XLA's ptxas,
            # Triton, JIT) is newer than the driver can JIT.
            api = beliefs.of(facts).driver_cuda.value
            newest = m.newest_cuda_for_driver(_driver(facts) or "")
            drv_cuda = api or (major_minor(newest["version"]) if newest else None)
            yield finding(
                code, "warn",
                f"{who} is newer than driver {_driver(facts)} supports natively"
                + (f" (CUDA {drv_cuda})" if drv_cuda else "") + ": PTX it compiles will not load",
                v.explanation + ". Code this toolkit compiles to PTX (nvcc -arch=compute_XX, extensions built "
                "without SASS for this GPU, XLA/Triton kernels) fails on this driver with 'the provided PTX was "
                "compiled with an unsupported toolchain' (CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222). Framework "
                "wheels that ship SASS for the GPU are not affected.",
                evidence,
                fix=_upgrade_or(m.min_driver(cuda), f"compile with a toolkit no newer than CUDA "
                                f"{drv_cuda or 'the driver supports'} (or build SASS for the GPU: -arch=sm_XX)."))
            continue
        if v.ok:
            yield ok(code, f"{who} runs on driver {_driver(facts) or facts.driver.cuda_driver_api} ({v.rule})",
                     *evidence, detail=v.explanation)
            continue
        newest = m.newest_cuda_for_driver(_driver(facts) or "")
        alt = f"; the newest CUDA this driver runs natively is {major_minor(newest['version'])}" if newest else ""
        win = beliefs.windows_driver(facts)
        native = (m.min_driver(cuda, win) or {}).get("windows_min_driver" if win else "linux_min_driver")
        # The lowest driver that runs it is its major's minor-version floor (CUDA 11+), not the full-support one.
        floor = driver_floor(m, cuda, win) or native
        need = InstallDriverBranch(minimum=floor, recommended=native, cuda=cuda, who=who)
        intents: list[Intent] = [need]
        if kind == "framework":
            owner = _owner(facts, who)
            if owner:
                intents.append(ReinstallFramework(owner[0], owner[1].name, owner[1].version, reason="driver"))
        if v.rule == "forward-compat-needs-package":
            pkg = next(r for r in v.rows if r.get("package"))
            intents.insert(0, InstallCudaCompat(pkg["package"], str(pkg["cuda"])))
            fix = f"Install {pkg['package']} (NVIDIA's CUDA repository) and put /usr/local/cuda-{pkg['cuda']}/compat " \
                  "on LD_LIBRARY_PATH, or upgrade the driver."
        else:
            fix = (f"Upgrade the driver to ≥ {floor}, or use a build for an older CUDA{alt}." if floor else
                   f"Upgrade the driver to one that supports CUDA {major_minor(cuda)}, or use a build for an older "
                   f"CUDA{alt}.")
        capped = _driver_cannot_reach(m, facts, floor)
        detail = v.explanation + alt + "."
        if capped:
            # No driver that runs this CUDA drives the GPU: the build (or the image) must come down instead.
            g, arch, last, top = capped
            fix = (f"No driver for {g.name} ({arch['name']}) runs CUDA {major_minor(cuda)}: its last driver branch is "
                   f"R{last}" + (f", which runs CUDA {top} at most" if top else "") + ". Use a build (or a container "
                   f"image) for CUDA {top or 'that branch supports'} instead; upgrading the driver cannot help.")
            intents = [i for i in intents if not isinstance(i, InstallDriverBranch)]
            evidence.append(Evidence("gpu", f"{g.name}: last driver branch R{last}", arch.get("source")))
            detail += " " + fix.split(" Use a build")[0]
        drv = _driver(facts) or f"the one installed (it supports CUDA {beliefs.of(facts).driver_cuda.value})"
        yield finding(code, "fail", f"{who} needs a newer driver than {drv}", detail, evidence, fix=fix,
                      intents=intents)


def _driver_cannot_reach(m: Matrix, facts: Facts, floor: str | None) -> tuple[Gpu, Row, int, str | None] | None:
    """A GPU whose last supported driver branch is below the driver a CUDA needs: (GPU, its architecture row,
    that branch, the newest CUDA that branch runs natively)."""
    need = branch(floor) if floor else None
    if need is None:
        return None
    for g in _gpus(facts):
        _row, arch = m.gpu_for_facts(g.name, g.compute_capability)
        last = (arch or {}).get("last_driver_branch")
        if arch and last and str(last).isdigit() and int(last) < need:
            top = m.newest_cuda_for_driver(str(last))
            return g, arch, int(last), major_minor(top["version"]) if top else None
    return None


def _upgrade_or(row: Row | None, other: str) -> str:
    """'Upgrade the driver to ≥ N, or …' — without a number when the matrix has none (never '≥ ?')."""
    need = (row or {}).get("linux_min_driver")
    return f"Upgrade the driver to ≥ {need}, or {other}" if need else f"Upgrade the driver, or {other}"


def _cc_evidence(g: Gpu, cc: str | None) -> Evidence:
    """A GPU's compute capability, credited to what says it: the probe that read it, or — when it was looked up
    from the GPU's name — the matrix (derived, not observed)."""
    if g.compute_capability:
        return Evidence(f"gpus[{g.index}].compute_capability", cc, g.source)
    return Evidence(f"gpus[{g.index}].compute_capability", cc, f"derived: compat/gpus.toml (by the name {g.name!r})")


def _owner(facts: Facts, who: str) -> tuple[str, PyPackage] | None:
    """The (interpreter, package) a runtime label from :func:`runtimes` names."""
    return next(((env.executable, p) for env in facts.python_envs for p in env.packages if label(p) == who), None)


@check("driver.too_old_for_cuda_runtime", "Driver", "The driver runs the CUDA toolkits installed.", static=True)
def too_old_for_toolkit(facts: Facts, ctx: Context) -> Iterator[Finding]:
    yield from _driver_vs_runtimes(facts, ctx, "toolkit", "driver.too_old_for_cuda_runtime")


@check("framework.cuda_newer_than_driver", "Python & frameworks",
       "The driver runs the CUDA runtime each framework build brings.", static=True)
def framework_cuda_vs_driver(facts: Facts, ctx: Context) -> Iterator[Finding]:
    yield from _driver_vs_runtimes(facts, ctx, "framework", "framework.cuda_newer_than_driver")


def _gpus_with_arch(facts: Facts, ctx: Context) -> Iterator[tuple[Gpu, Row, str, list[Evidence]]]:
    """Each visible GPU whose architecture the matrix knows, with the driver and the evidence both
    driver-vs-GPU rules quote."""
    m = _matrix(ctx)
    drv = _driver(facts)
    gpus = _gpus(facts)
    if not gpus:
        raise NotApplicable("no GPU visible")
    if not drv:
        raise Skip("the driver version is unknown")
    if not vtuple(drv):  # a snapshot from elsewhere may hold anything: "²", "unknown", 5,000 digits
        raise Skip(f"the driver version {drv[:40]!r} is not a version number")
    if facts.host.wsl and not facts.driver.kernel_module:
        # WSL2 reports the Windows driver, numbered apart from Linux (R570 is 572.xx/573.xx): compare its branch.
        b = m.windows_branch(drv)
        if b is None:
            raise Skip(f"WSL: Windows driver {drv} is not between two known Windows releases of one branch in "
                       "NVIDIA's tables, so its branch is unknown")
        drv = str(b)
    for same in _models(gpus):
        g = same[0]
        row, arch = m.gpu_for_facts(g.name, g.compute_capability)
        if arch:
            yield g, arch, drv, [ev(facts, "driver.kernel_module" if facts.driver.kernel_module else
                                    "driver.userspace"), ev(facts, "driver.module_flavor"),
                                 *(Evidence(f"gpus[{x.index}].name", x.name, x.source) for x in same),
                                 *row_evidence([r for r in (row, arch) if r])]


@check("driver.too_old_for_gpu", "Driver", "The driver is new enough for each GPU's architecture.")
def too_old_for_gpu(facts: Facts, ctx: Context) -> Iterator[Finding]:
    m = _matrix(ctx)
    for g, arch, drv, evidence in _gpus_with_arch(facts, ctx):
        row = m.gpu(g.name)
        first = m.first_driver(arch, g.compute_capability or (row or {}).get("compute_capability"))
        if not first:
            continue
        if not driver_meets(drv, first):
            yield finding("driver.too_old_for_gpu", "fail",
                          f"{g.name} ({arch['name']}) needs driver ≥ {first}; found {drv}",
                          f"Drivers older than {first} do not know this {arch['name']} GPU: the GPU is "
                          "not initialised or CUDA reports no device.", evidence,
                          fix=f"Install driver ≥ {first} (`gpu-doctor fix` writes the commands).",
                          intents=[InstallDriverBranch(minimum=first, recommended=first, who=f"a {arch['name']} GPU",
                                                       gpu=g.name)])
        else:
            yield ok("driver.too_old_for_gpu", f"Driver {drv} is new enough for {g.name} ({arch['name']})",
                     *evidence)


@check("driver.gpu_unsupported_by_driver", "Driver",
       "The driver branch (and kernel-module flavour) still supports each GPU.")
def gpu_unsupported_by_driver(facts: Facts, ctx: Context) -> Iterator[Finding]:
    for g, arch, drv, evidence in _gpus_with_arch(facts, ctx):
        last = arch.get("last_driver_branch")
        if last and vtuple(drv)[:1] > vtuple(str(last))[:1]:
            yield finding("driver.gpu_unsupported_by_driver", "fail",
                          f"Driver branch {vtuple(drv)[0]} no longer supports {g.name} ({arch['name']}); "
                          f"the last branch that does is R{last}",
                          f"NVIDIA moved {arch['name']} GPUs to the R{last} legacy branch; newer drivers do not "
                          "drive them.", evidence,
                          fix=f"Install the R{last} driver branch (and hold it), or replace the GPU.",
                          intents=[InstallDriverBranch(who=f"{arch['name']} GPUs (supported up to R{last})",
                                                       gpu=g.name, last_branch=int(last))])
        elif facts.driver.module_flavor == "open" and arch.get("open_kernel_module") is False:
            yield finding("driver.gpu_unsupported_by_driver", "fail",
                          f"The open NVIDIA kernel module does not support {g.name} ({arch['name']})",
                          "The open GPU kernel modules support Turing and newer GPUs only; older GPUs need the "
                          "proprietary module of the same driver version.", evidence,
                          fix="Install the proprietary kernel module flavour (e.g. nvidia-driver-NNN instead of "
                              "nvidia-driver-NNN-open, or `nvidia-kernel-dkms` rather than the open variant).",
                          intents=[InstallDriverBranch(minimum=drv, recommended=drv, gpu=g.name,
                                                       who=f"{arch['name']} GPUs (proprietary module)",
                                                       flavor="proprietary")])
        elif facts.driver.module_flavor == "proprietary" and (
                arch.get("open_kernel_module_required")
                or (_matrix(ctx).gpu(g.name) or {}).get("open_kernel_module_required")):  # a GPU row (GH200)
            yield finding("driver.gpu_unsupported_by_driver", "fail",
                          f"{g.name} ({arch['name']}) requires the open NVIDIA kernel module; the proprietary one "
                          "is loaded", "NVIDIA supports this architecture only with the open GPU kernel modules.",
                          evidence, fix="Install the -open flavour of the driver (e.g. nvidia-driver-NNN-open).",
                          intents=[InstallDriverBranch(minimum=drv, recommended=drv, gpu=g.name, flavor="open",
                                                       who=f"{arch['name']} GPUs (open module)")])
        else:
            yield ok("driver.gpu_unsupported_by_driver",
                     f"Driver branch {vtuple(drv)[0]} still supports {g.name} ({arch['name']})", *evidence)


def _arch_list(m: Matrix, pkg: PyPackage, aarch64: bool = False) -> tuple[list[str] | None, str | None, Row | None]:
    """The SASS arch list (as "8.6") and embedded PTX of a framework build, from --deep or the matrix.

    The matrix's `arch_list` is the Linux x86_64 wheel's; aarch64 wheels (SBSA, Jetson Thor) carry other targets
    (`arch_list_aarch64`), so on an Arm host only that list is used, and without one the list is unknown.
    """
    if pkg.arch_list:
        sass = [_cc(a) for a in pkg.arch_list if a.startswith("sm_")]
        ptx = [_cc(a) for a in pkg.arch_list if a.startswith("compute_")]
        return sass, (max(ptx, key=vtuple) if ptx else None), None
    if pkg.name == "torch":
        var = m.torch_variant(pkg.version, pkg.cuda)
        key = "arch_list_aarch64" if aarch64 else "arch_list"
        if var and var.get(key):
            return list(var[key]), (None if aarch64 else var.get("ptx")), var
    return None, None, None


def _is_aarch64(m: Matrix, facts: Facts) -> bool:
    """An Arm host: said by the facts, or implied by a GPU that only comes with an Arm CPU (Grace, Jetson)."""
    return infer_platform(facts, m) in ("linux-aarch64", "jetson")


def _cc(arch: str) -> str:
    digits = arch.split("_", 1)[1].rstrip("afp")
    return f"{digits[:-1]}.{digits[-1]}"


def _supports(cc: str, sass: list[str], ptx: str | None) -> bool:
    """A cubin runs on GPUs of the same major and an equal or higher minor; PTX JITs for any newer GPU."""
    v = vtuple(cc)
    if any(vtuple(s)[:1] == v[:1] and vtuple(s) <= v for s in sass):
        return True
    return bool(ptx) and vtuple(ptx) <= v


@check("framework.arch_unsupported", "Python & frameworks",
       "Each framework build carries kernels (or PTX) for every GPU's compute capability.", static=True)
def arch_unsupported(facts: Facts, ctx: Context) -> Iterator[Finding]:
    m = _matrix(ctx)
    gpus = [g for g in _gpus(facts) if g.compute_capability or m.gpu(g.name)]
    if not gpus:
        raise NotApplicable("no GPU with a known compute capability")
    # A CUDA build whose CUDA (or version) is unknown is still judged against every build the matrix knows.
    pkgs = [(env.executable, p) for env in facts.python_envs for p in env.packages
            if p.name == "torch" and not p.cpu_only and (p.cuda or p.cpu_only is False or p.arch_list)]
    if not pkgs:
        raise NotApplicable("no CUDA build of PyTorch (its arch list is what this rule reads)")
    done = False
    arm = _is_aarch64(m, facts)
    for exe, pkg in pkgs:
        sass, ptx, var = _arch_list(m, pkg, arm)
        if sass is None:
            found = list(_arch_unknown(facts, m, pkg, gpus, exe))
            done = done or bool(found)
            yield from found
            continue
        done = True
        for same in _models(gpus):
            g = same[0]
            cc = g.compute_capability or (m.gpu(g.name) or {}).get("compute_capability")
            if not cc:
                continue  # never: the GPUs were chosen for a known compute capability
            evidence = [*(_cc_evidence(x, cc) for x in same),
                        Evidence("python_envs.packages",
                                 f"{label(pkg)} arch list {value_text(sass)}, PTX {value_text(ptx)}",
                                 "deep" if pkg.arch_list else "compat/pytorch.toml"),
                        *row_evidence([var] if var else [])]
            if _supports(cc, sass, ptx):
                yield ok("framework.arch_unsupported",
                         f"{label(pkg)} has kernels for {g.name} (sm_{cc.replace('.', '')})", *evidence)
                continue
            yield finding(
                "framework.arch_unsupported", "fail",
                f"{label(pkg)} has no kernels for {g.name} (sm_{cc.replace('.', '')}): "
                "'no kernel image is available for execution on the device'",
                f"The build carries code for {', '.join('sm_' + s.replace('.', '') for s in sass)}"
                + (f" and PTX for compute_{ptx.replace('.', '')}" if ptx else "") +
                f"; sm_{cc.replace('.', '')} is not among them (PyTorch warns '… with CUDA capability "
                f"sm_{cc.replace('.', '')} is not compatible with the current PyTorch installation').",
                evidence,
                fix="Install a PyTorch build whose arch list includes this GPU and that this driver runs "
                    "(`gpu-doctor fix` picks it).",
                intents=[ReinstallFramework(exe, "torch", pkg.version, reason="arch", gpu=g.name)],
            )
    if not done:
        raise Skip("the arch list of the installed torch build is unknown (not in the matrix"
                   + (" for aarch64 wheels" if arm else "") + "; run with --deep)")


NO_KERNEL_IMAGE = "no kernel image is available for execution on the device"


def _arch_unknown(facts: Facts, m: Matrix, pkg: PyPackage, gpus: list[Gpu], exe: str) -> Iterator[Finding]:
    """The build's arch list is unknown: still judge what can be known. A 'no kernel image' error in the facts
    is the failure itself; a GPU older than every build the matrix knows for this CUDA is likely unsupported."""
    texts = beliefs.of(facts).texts
    said = next((t for t in texts if NO_KERNEL_IMAGE in t), None)
    if said:
        yield finding("framework.arch_unsupported", "fail",
                      f"{label(pkg)} has no kernels for this GPU: 'no kernel image is available for execution on "
                      "the device'", "The error itself is in the facts: the build lacks code for this GPU's "
                      "compute capability.", [Evidence("errors", said, "deep")],
                      fix="Install a PyTorch build whose arch list includes this GPU (see `gpu-doctor matrix gpu`).",
                      intents=[ReinstallFramework(exe, "torch", pkg.version, reason="arch")])
        return
    major = vtuple(pkg.cuda or "")[:1]
    known = [v for row in m.rows("pytorch", "torch") for v in row.get("variant", [])
             if v.get("arch_list") and (not major or vtuple(v["cuda"])[:1] == major)]
    if not known:
        return
    builds = f"PyTorch build for CUDA {major[0]}.x" if major else "PyTorch build of any release"
    for same in _models(gpus):
        g = same[0]
        cc = g.compute_capability or (m.gpu(g.name) or {}).get("compute_capability")
        if not cc or any(_supports(cc, v["arch_list"], v.get("ptx")) for v in known):
            continue
        oldest = min((min(v["arch_list"], key=vtuple) for v in known), key=vtuple)
        yield finding("framework.arch_unsupported", "warn",
                      f"{label(pkg)} most likely has no kernels for {g.name} (sm_{cc.replace('.', '')})",
                      f"This build's arch list is not in the matrix, but no {builds} that "
                      f"the matrix knows carries code for sm_{cc.replace('.', '')} (the oldest target among them is "
                      f"sm_{oldest.replace('.', '')}); `gpu-doctor check --deep` reads the real list.",
                      [*(_cc_evidence(x, cc) for x in same),
                       Evidence("python_envs.packages", f"{label(pkg)} cuda={pkg.cuda}")],
                      fix="Confirm with `gpu-doctor check --deep`; an older PyTorch release (or a CUDA 11 build) may "
                          "still support this GPU (`gpu-doctor matrix gpu NAME`).")


@check("framework.nvcc_mismatch_for_extensions", "Python & frameworks",
       "nvcc's CUDA major matches torch's, so torch.utils.cpp_extension can build extensions.", static=True)
def nvcc_mismatch(facts: Facts, ctx: Context) -> Iterator[Finding]:
    torches = [p for env in facts.python_envs for p in env.packages if p.name == "torch" and p.cuda]
    if not torches:
        raise NotApplicable("no CUDA build of PyTorch")
    # torch.utils.cpp_extension compiles with CUDA_HOME (then CUDA_PATH), and only then the nvcc on PATH.
    built = beliefs.of(facts).build_toolkit
    if built.value is None:
        raise NotApplicable("no nvcc on PATH and no CUDA_HOME (extensions cannot be built at all; "
                            "see toolkit.path_not_set)")
    root, version, how = built.value
    if not version:
        raise Skip(f"the CUDA version of the toolkit extensions would build with is unknown ({built.why})")
    where = f"{how}={root}" if how != "PATH" else f"nvcc on PATH ({root}/bin/nvcc)"
    if not vtuple(version):
        raise Skip(f"the build toolkit's CUDA version {version[:40]!r} is not a version number")
    for p in torches:
        if not vtuple(p.cuda):
            continue  # torch's CUDA is not a version here: nothing to compare
        evidence = [Evidence("build_toolkit", f"{where}: CUDA {version}", built.source),
                    Evidence("python_envs.packages", f"{label(p)} cuda={p.cuda}")]
        if vtuple(version)[:1] != vtuple(p.cuda)[:1]:
            yield finding(
                "framework.nvcc_mismatch_for_extensions", "warn",
                (f"nvcc is CUDA {major_minor(version)}" if how == "PATH" else
                 f"{how}={root} is CUDA {major_minor(version)}")
                + f" but {label(p)} was built with CUDA {p.cuda}: building CUDA extensions will fail",
                "torch.utils.cpp_extension refuses a different CUDA major: 'The detected CUDA version "
                f"({major_minor(version)}) mismatches the version that was used to compile PyTorch ({p.cuda}).'",
                evidence,
                fix=f"Point CUDA_HOME (and PATH) at a CUDA {vtuple(p.cuda)[0]}.x toolkit when building extensions, "
                    "or install the torch build for your toolkit's CUDA.",
                intents=[InstallToolkit(major_minor(p.cuda), reason=f"the CUDA {label(p)} was built with")])
        else:
            yield ok("framework.nvcc_mismatch_for_extensions",
                     f"The build toolkit (CUDA {major_minor(version)}, {where}) matches {label(p)} (CUDA {p.cuda}) "
                     "for extensions", *evidence)


@check("toolkit.gpu_arch_unsupported", "CUDA toolkit", "Each toolkit can compile for every GPU here.", static=True)
def toolkit_arch(facts: Facts, ctx: Context) -> Iterator[Finding]:
    m = _matrix(ctx)
    toolkits = [t for t in facts.toolkits if t.version and t.source != "pip"]
    gpus = _gpus(facts)
    if not toolkits or not gpus:
        raise NotApplicable("needs a system toolkit and a visible GPU")
    for t in toolkits:
        row = m.sm_support(t.version or "")
        if not row:
            continue
        sms = row.get("sm", [])
        for same in _models(gpus):
            g = same[0]
            cc = g.compute_capability or (m.gpu(g.name) or {}).get("compute_capability")
            if not cc:
                continue
            evidence = [*(_cc_evidence(x, cc) for x in same),
                        Evidence("toolkits", f"{t.version} {t.root}", t.source), *row_evidence([row], "sm_support")]
            if cc in sms:
                yield ok("toolkit.gpu_arch_unsupported", f"CUDA {major_minor(t.version)} compiles for {g.name} "
                         f"(sm_{cc.replace('.', '')})", *evidence)
            elif sms and vtuple(cc) < min(vtuple(s) for s in sms):
                yield finding("toolkit.gpu_arch_unsupported", "fail",
                              f"CUDA {major_minor(t.version)} cannot compile for {g.name} (sm_{cc.replace('.', '')}): "
                              f"its oldest target is sm_{min(sms, key=vtuple).replace('.', '')}",
                              "NVIDIA removed this architecture from the toolkit; nvcc rejects the target.",
                              evidence, fix="Use an older toolkit that still targets this GPU for builds.",
                              intents=[InstallToolkit(None, reason=f"compiles for {g.name}")])
            else:
                yield finding("toolkit.gpu_arch_unsupported", "warn",
                              f"CUDA {major_minor(t.version)} is older than {g.name} (sm_{cc.replace('.', '')}): "
                              "it can only run PTX JIT-compiled by the driver",
                              f"The newest target of this toolkit is sm_{max(sms, key=vtuple).replace('.', '')}.",
                              evidence, fix="Install a toolkit that targets this GPU natively.",
                              intents=[InstallToolkit(None, reason=f"compiles for {g.name}")])


@check("toolkit.host_compiler_unsupported", "CUDA toolkit", "The system gcc is one nvcc accepts.", static=True)
def host_compiler(facts: Facts, ctx: Context) -> Iterator[Finding]:
    m = _matrix(ctx)
    gcc = facts.host.gcc
    toolkits = [t for t in facts.toolkits if t.version and t.nvcc_version and t.source != "pip"]
    if not toolkits:
        raise NotApplicable("no toolkit with nvcc")
    if not gcc:
        raise Skip("no gcc on PATH, or its version is unknown")
    for t in toolkits:
        row = m.host_compiler(t.version or "")
        if not row or not row.get("gcc_max"):
            continue
        evidence = [ev(facts, "host.gcc"), Evidence("toolkits", f"{t.version} {t.root}", t.source),
                    *row_evidence([row], "host_compiler")]
        limit = vtuple(row["gcc_max"])
        if vtuple(gcc)[: len(limit)] > limit:
            yield finding("toolkit.host_compiler_unsupported", "warn",
                          f"gcc {gcc} is newer than CUDA {major_minor(t.version)}'s nvcc accepts (≤ {row['gcc_max']})",
                          "nvcc stops with '#error -- unsupported GNU version!'; extension builds fail.",
                          evidence, fix=f"Install gcc {row['gcc_max']} and pass it with `nvcc -ccbin g++-"
                          f"{vtuple(row['gcc_max'])[0]}` (or CUDAHOSTCXX / CC/CXX), or use a newer toolkit.")
        else:
            yield ok("toolkit.host_compiler_unsupported", f"gcc {gcc} is supported by CUDA {major_minor(t.version)}",
                     *evidence)


def _lib_version(path: str) -> str | None:
    m = re.search(r"libcudnn(?:_\w+)?\.so\.(\d+(?:\.\d+)*)", path)
    return m.group(1) if m else None


# torch/backends/cudnn/__init__.py: "cuDNN version incompatibility: PyTorch was compiled  against (9, 1, 0) but found
# runtime version (9, 0, 0)" (two spaces before "against"; torch 1.x printed the integers, 8700).
_CUDNN_TUPLE = r"(\(\d{1,6}(?:,\s?\d{1,6}){1,3}\)|\d{1,6})"
_TORCH_CUDNN_ERROR = lazy_compile(rf"compiled\s{{1,4}}against\s{{1,4}}{_CUDNN_TUPLE}\s{{1,4}}"
                                  rf"but found runtime version\s{{1,4}}{_CUDNN_TUPLE}")


def _said_version(text: str) -> str | None:
    if text.startswith("("):
        return ".".join(x.strip() for x in text.strip("()").split(","))
    return cudnn_version(text)


def torch_cudnn_error(p: PyPackage) -> tuple[str | None, str | None] | None:
    """(built, loaded) as torch itself said them when --deep imported it and it refused its cuDNN."""
    m = _TORCH_CUDNN_ERROR.search(p.deep.error) if p.deep and p.deep.error else None
    return (_said_version(m.group(1)), _said_version(m.group(2))) if m else None


def _cudnn_wheels(env: PythonEnv) -> list[PyPackage]:
    return [q for q in env.packages if re.fullmatch(r"nvidia-cudnn(?:-cu\d+)?", q.name) and q.version]


def _loaded_cudnn(facts: Facts, env: PythonEnv, p: PyPackage) -> tuple[str | None, str | None]:
    """(version, where) of the cuDNN this framework loads. --deep's answer is the truth (its version, or the
    error torch raised naming it); else the dynamic loader's order: torch's wheels carry DT_RPATH to their
    nvidia-cudnn wheel (searched before LD_LIBRARY_PATH); other frameworks take the wheel in their
    environment, else the loader's libcudnn."""
    if p.deep and p.deep.cudnn:
        return p.deep.cudnn, f"{p.name} itself (--deep)"
    said = torch_cudnn_error(p)
    if said and said[1]:
        return said[1], f"{p.name}'s own error (--deep): {p.deep.error if p.deep else ''}"[:300]
    for lib in p.loaded_libraries or []:
        v = _lib_version(lib)
        if v:
            return v, f"{lib} (mapped by {p.name}, --deep)"
    wheel = next(iter(_cudnn_wheels(env)), None)
    if wheel and wheel.version:
        return wheel.version, f"{wheel.name} in {env.executable}"
    system = facts.loader.libcudnn
    if system and system.version:
        return system.version, system.path
    return None, None


def _overwritten(env: PythonEnv, p: PyPackage, built: str) -> list[PyPackage] | None:
    """The cuDNN wheels of one major that overwrite each other's libraries (libcudnn.so.9 of both lands in
    the same place: the one installed last wins), when one of them does not fit torch's build and --deep did
    not say which one torch really loads; None otherwise."""
    if p.name != "torch" or (p.deep and (p.deep.cudnn or torch_cudnn_error(p))) or any(
            _lib_version(lib) for lib in p.loaded_libraries or []):
        return None
    major = vtuple(built)[:1]
    same = [w for w in _cudnn_wheels(env) if vtuple(w.version or "")[:1] == major]
    if len({w.version for w in same}) < 2 or all(_cudnn_ok("torch", vtuple(built), vtuple(w.version or ""))
                                                  for w in same):
        return None
    return same


def built_cudnn(m: Matrix, p: PyPackage) -> tuple[str | None, str]:
    """(the cuDNN a build needs, the rule it is held to). torch's own error (--deep) says it best, then its
    wheel metadata's pin (PyPackage.cudnn), then the matrix's row for the build."""
    if p.name == "torch":
        said = torch_cudnn_error(p)
        built = (said[0] if said else None) or p.cudnn or (m.torch_variant(p.version, p.cuda) or {}).get("cudnn")
        return built, "torch"
    if p.name.startswith("tensorflow") or p.name == "tf-nightly":
        # build_info states the cuDNN; without it, the release's tested build (a range bound by the version)
        built = p.cudnn or ((m.tensorflow(p.version) or {}).get("cudnn") if p.cpu_only is False else None)
        return built, "tf1" if (vtuple(p.version or "") or (0,))[0] == 1 else "tf"
    if p.name in ("jax", "jaxlib"):
        major = vtuple(p.cuda or "")[:1]
        rows = [r for r in m.rows("jax", "jax") if r.get("version") == (p.version or "").split("+")[0]
                and (not major or r.get("cuda_major") == major[0]) and r.get("min_cudnn")]
        # the matrix row, else the build's local tag (jaxlib 0.4.7+cuda11.cudnn86 was built with cuDNN 8.6)
        return (rows[0]["min_cudnn"] if rows else p.cudnn), "jax"
    return None, ""


def _cudnn_ok(rule: str, built: tuple[int, ...], have: tuple[int, ...]) -> bool:
    if not have or not built or have[:1] != built[:1]:
        return False
    if rule == "tf1":  # TensorFlow 1.x loads exactly the cuDNN major.minor it was built with
        return len(have) < 2 or len(built) < 2 or have[:2] == built[:2]
    # torch (torch/backends/cudnn/__init__.py), TF 2 and JAX: same major, runtime minor ≥ build minor
    return have[: len(built)] >= built[: len(have)] if len(have) >= 2 else True


@check("cudnn.version_mismatch", "cuDNN", "The cuDNN that will be loaded matches what each framework needs.",
       static=True)
def cudnn_version_mismatch(facts: Facts, ctx: Context) -> Iterator[Finding]:
    m = _matrix(ctx)
    pairs = [(env, p) for env in facts.python_envs for p in env.packages
             if p.name in ("torch", "tensorflow", "tensorflow-gpu", "tf-nightly", "jax", "jaxlib")
             and not p.cpu_only and (p.cuda or p.cudnn)]
    headers = {c.version for c in facts.cudnn if c.source == "header" and c.version}
    libraries = {c.version for c in facts.cudnn if c.source == "library" and c.version and len(vtuple(c.version)) >= 2}
    judged = False
    if len(headers) == 1 and len(libraries) == 1 and major_minor(next(iter(headers))) != \
            major_minor(next(iter(libraries))):
        judged = True
        h, lib = next(iter(headers)), next(iter(libraries))
        yield finding("cudnn.version_mismatch", "warn",
                      f"The cuDNN header says {h} but the library is {lib}",
                      "Two cuDNN installations are mixed: code compiled against the header calls into a library "
                      "of another version (link errors, 'cuDNN version mismatch' at run time).",
                      [Evidence("cudnn", f"{c.version} ({c.location})", c.source) for c in facts.cudnn
                       if c.source in ("header", "library")],
                      fix="Remove one of the two cuDNN installations (or point the include path and the library "
                          "path at the same one).")
    for env, p in pairs:
        built, rule = built_cudnn(m, p)
        if not built or not vtuple(built):  # a recorded cuDNN that is not a version: nothing to compare
            continue
        clash = _overwritten(env, p, built)
        if clash:
            judged = True
            names = ", ".join(f"{w.name} {w.version}" for w in clash)
            major = vtuple(built)[0]
            cuda = vtuple(p.cuda or "")[:1]
            pinned = next((w.name for w in clash if cuda and w.name.endswith(f"-cu{cuda[0]}")), clash[0].name)
            yield finding("cudnn.version_mismatch", "warn",
                          f"{label(p)} was built with cuDNN {built}, but {len(clash)} cuDNN {major}.x wheels share "
                          f"its environment ({names}): the one installed last decides which torch loads",
                          f"The wheels install the same library files (libcudnn.so.{major} …) into one directory, so "
                          "the later install overwrote the earlier one; when the survivor is older than the build, "
                          "torch raises 'cuDNN version incompatibility' at its first convolution. `gpu-doctor check "
                          "--deep` imports torch and says which one it loads.",
                          [Evidence("python_envs.packages", f"{label(p)} pins cuDNN {built}", env.executable),
                           *[Evidence("python_envs.packages", f"{w.name} {w.version}", env.executable)
                             for w in clash]],
                          fix=f"Keep only the cuDNN wheel torch pins: uninstall the others, then `pip install "
                              f"--force-reinstall --no-deps {pinned}=={built}` in {env.executable}.")
            continue
        loaded, src = _loaded_cudnn(facts, env, p)
        if not loaded:
            continue  # cudnn.missing says whether one is needed and absent
        judged = True
        need = "exactly " + ".".join(str(x) for x in vtuple(built)[:2]) if rule == "tf1" else f"≥ {built}"
        evidence = [Evidence("python_envs.packages", f"{label(p)} needs cuDNN {need}", env.executable),
                    Evidence("cudnn", f"{loaded} ({src})")]
        if rule == "jax":
            evidence += row_evidence([r for r in m.rows("jax", "jax") if r.get("version") == p.version][:1], "jax")
        if _cudnn_ok(rule, vtuple(built), vtuple(loaded)):
            # torch reports what it loaded in three parts (91900): the title compares at that precision, so
            # that it never reads "≥ 9.19.0.56 gets 9.19.0"; the evidence keeps the pin whole
            parts = len(vtuple(loaded))
            shown = need if rule == "tf1" or parts >= len(vtuple(built)) else \
                "≥ " + ".".join(str(x) for x in vtuple(built)[:parts])
            yield ok("cudnn.version_mismatch", f"{label(p)} (cuDNN {shown}) gets cuDNN {loaded}", *evidence)
            continue
        says = {
            "torch": f"torch raises 'cuDNN version incompatibility: PyTorch was compiled against {built} but found "
                     f"runtime version {loaded}' (torch/backends/cudnn/__init__.py: same major, runtime minor ≥ "
                     "build minor).",
            "tf": f"TensorFlow refuses it: 'Loaded runtime CuDNN library: {loaded} but source was compiled with: "
                  f"{built}'.",
            "tf1": f"TensorFlow 1.x loads only cuDNN {need.split()[-1]}: 'Loaded runtime CuDNN library: {loaded} but "
                   f"source was compiled with: {built}'.",
            "jax": f"JAX {p.version} requires cuDNN ≥ {built} and fails at start-up with 'Loaded runtime CuDNN "
                   f"library: {loaded} but source was compiled with …'.",
        }[rule]
        title = (f"{label(p)} needs cuDNN {need} but will load cuDNN {loaded}" if rule == "jax" else
                 f"{label(p)} was built with cuDNN {built} but will load cuDNN {loaded}")
        yield finding("cudnn.version_mismatch", "fail", title, says, evidence,
                      fix=(f"Install the cuDNN {vtuple(built)[0]}.x the build expects (pip install "
                           f"nvidia-cudnn-cu{vtuple(p.cuda)[0]}), or remove the other cuDNN from LD_LIBRARY_PATH.")
                      if p.cuda and vtuple(p.cuda)[0] >= 11 else
                      f"Install cuDNN {'.'.join(str(x) for x in vtuple(built)[:2])}"
                      + (f" for CUDA {p.cuda} " if p.cuda else " for the build's CUDA ") +
                      "(NVIDIA's cuDNN archive; no pip wheel exists for it), or remove the other cuDNN from "
                      "LD_LIBRARY_PATH.",
                      # TensorFlow's [and-cuda] and JAX's [cudaNN] extras pin the cuDNN wheel the release needs.
                      intents=[ReinstallFramework(env.executable, p.name, p.version, reason="cudnn")]
                      if rule in ("tf", "jax") else [])
    if not judged:
        if not pairs:
            raise NotApplicable("no framework build here needs a particular cuDNN")
        raise Skip("the cuDNN a framework needs or loads is unknown")


@check("cudnn.cuda_mismatch", "cuDNN", "Each system cuDNN supports the installed CUDA toolkit.", static=True)
def cudnn_cuda_mismatch(facts: Facts, ctx: Context) -> Iterator[Finding]:
    m = _matrix(ctx)
    system = beliefs.cudnn_by_version(facts, ("header", "library"))
    # One verdict per (cuDNN version, CUDA major.minor): the same toolkit may be found under two roots too.
    toolkits: dict[str, list[Toolkit]] = {}
    for t in facts.toolkits:
        if t.version and t.source != "pip":
            toolkits.setdefault(major_minor(t.version) or t.version, []).append(t)
    if not system or not toolkits:
        raise NotApplicable("needs a system cuDNN and a system CUDA toolkit")
    for version, places in system:
        if len(vtuple(version)) < 2:
            continue  # "8" (from cudnn64_8.dll) cannot be placed among the 8.x rows
        row = m.cudnn(version)
        if not row:
            continue
        for cuda, roots in toolkits.items():
            evidence = [*(Evidence("cudnn", f"{version} ({c.location})", c.source) for c in places),
                        *(Evidence("toolkits", f"{t.version} {t.root}", t.source) for t in roots),
                        *row_evidence([row], "cudnn")]
            if any(cuda_in(roots[0].version or "", spec) for spec in row.get("cuda", [])):
                yield ok("cudnn.cuda_mismatch", f"cuDNN {version} supports CUDA {cuda}", *evidence)
            else:
                t = roots[0]
                yield finding("cudnn.cuda_mismatch", "warn",
                              f"cuDNN {version} does not list CUDA {cuda} as supported "
                              f"(it supports {', '.join(row.get('cuda', []))})",
                              "A cuDNN built for another CUDA major fails to load its CUDA libraries, or mixes "
                              "two CUDA runtimes in one process.", evidence,
                              fix="Install the cuDNN build for this CUDA (e.g. libcudnn9-cuda-12 for CUDA 12).",
                              intents=[InstallCudnn(9, vtuple(t.version)[0])] if vtuple(t.version) else [])


SHADOWABLE = {"libcudnn": "nvidia-cudnn", "libcublas": "nvidia-cublas"}
# CUDA 12 wheels are named nvidia-cudnn-cu12 / nvidia-cublas-cu12; the CUDA 13 ones nvidia-cudnn-cu13 / nvidia-cublas.
_WHEEL = lazy_compile(r"^(nvidia-cudnn|nvidia-cublas)(?:-cu\d+)?$")


def _older_toolkit_on_ld_path(facts: Facts, env: PythonEnv, ld_dirs: list[str]) -> str | None:
    """A system toolkit's library directory on LD_LIBRARY_PATH whose CUDA is older than (same major as) the torch
    wheel's: the transitive libraries (nvJitLink) resolve there first."""
    torch = next((p for p in env.packages if p.name == "torch" and p.cuda and not p.cpu_only), None)
    if not torch or not any(p.name.startswith("nvidia-") for p in env.packages):
        return None
    for d in ld_dirs:
        for t in facts.toolkits:
            if t.source == "pip" or not t.version or not (d == t.root or d.startswith(t.root.rstrip("/") + "/")):
                continue
            tv, cv = vtuple(t.version), vtuple(torch.cuda)
            if tv[:1] == cv[:1] and tv[:2] < cv[:2]:
                return f"{d} (CUDA {major_minor(t.version)}, older than torch's CUDA {torch.cuda})"
    return None


def _cudnn_sublibraries_shadowed(facts: Facts, wheel: PyPackage, ld_dirs: list[str]) -> str | None:
    """A cuDNN of the wheel's major but another version in a directory on LD_LIBRARY_PATH (cuDNN's sub-libraries
    are opened by name, so that directory wins for them even where DT_RPATH wins for libcudnn itself)."""
    refs = [(c.location, c.version) for c in facts.cudnn if c.source == "library" and c.location]
    if facts.loader.libcudnn:
        refs.append((facts.loader.libcudnn.path, facts.loader.libcudnn.version))
    for path, version in refs:
        if path and path.rsplit("/", 1)[0].rstrip("/") in ld_dirs and "/nvidia/" not in path \
                and version and vtuple(version)[:1] == vtuple(wheel.version)[:1] \
                and vtuple(version)[:3] != vtuple(wheel.version)[:3]:  # another major has other sonames
            return f"{path} (cuDNN {version})"
    return None


def _rpath_wins(env: PythonEnv) -> bool:
    """torch's CUDA wheels find their nvidia-* wheels through DT_RPATH, which the loader searches before
    LD_LIBRARY_PATH: a directory there cannot shadow them."""
    return any(p.name == "torch" and p.cuda and not p.cpu_only for p in env.packages)


@check("framework.libs_shadowed", "Python & frameworks",
       "The cuDNN/cuBLAS that a framework's nvidia-* wheels ship are the ones it loads.", static=True)
def libs_shadowed(facts: Facts, ctx: Context) -> Iterator[Finding]:
    envs = [e for e in facts.python_envs if any(_WHEEL.match(p.name) for p in e.packages)]
    if not envs:
        raise NotApplicable("no nvidia-cudnn/cublas wheels in the checked environments")
    ld_dirs = [d.rstrip("/") for d in (facts.env.get("LD_LIBRARY_PATH") or "").split(":") if d]
    for env in envs:
        wheels = {prefix: next((p for p in env.packages if (_WHEEL.match(p.name) or [None, ""])[1] == w), None)
                  for prefix, w in SHADOWABLE.items()}
        problems: list[tuple[str, str, str]] = []  # (library, path, how we know)
        loaded = [lib for p in env.packages for lib in (p.loaded_libraries or [])]
        for lib in loaded:
            name = lib.rsplit("/", 1)[-1]
            for prefix, wheel in wheels.items():
                # libcudnn.so.9 and its sub-libraries (libcudnn_ops.so.9, libcudnn_graph.so.9 …)
                if wheel and re.match(rf"{prefix}(?:_\w+)?\.", name) and "/nvidia/" not in lib:
                    problems.append((prefix, lib, "loaded by the framework (--deep)"))
        ref = facts.loader.libcudnn
        if ref and wheels["libcudnn"] and ref.path.rsplit("/", 1)[0] in ld_dirs and not _rpath_wins(env):
            version = f" (cuDNN {ref.version})" if ref.version else ""
            problems.append(("libcudnn", f"{ref.path}{version}", "first on LD_LIBRARY_PATH"))
        elif wheels["libcudnn"] and _rpath_wins(env):
            sub = _cudnn_sublibraries_shadowed(facts, wheels["libcudnn"], ld_dirs)
            if sub:
                problems.append(("libcudnn_sub", sub, "on LD_LIBRARY_PATH, where cuDNN's sub-libraries are looked up"))
        older = _older_toolkit_on_ld_path(facts, env, ld_dirs)
        if older:
            problems.append(("libnvJitLink", older, "an older CUDA of the same major on LD_LIBRARY_PATH"))
        evidence = [ev(facts, "env.LD_LIBRARY_PATH"), *[Evidence("python_envs.packages", f"{w.name} {w.version}")
                                                       for w in wheels.values() if w]]
        wheel = wheels["libcudnn"]
        if problems and problems[0][0] == "libcudnn_sub" and wheel is not None:  # a sub-library problem has a wheel
            _lib, path, how = problems[0]
            yield finding(
                "framework.libs_shadowed", "warn",
                f"A system cuDNN on LD_LIBRARY_PATH ({path}) will be mixed with the {wheel.name} {wheel.version} wheel "
                f"in {env.executable}",
                "torch loads libcudnn.so from its wheel through DT_RPATH, but cuDNN opens its sub-libraries "
                "(libcudnn_ops, libcudnn_cnn, libcudnn_graph …) by name, and the loader looks on LD_LIBRARY_PATH "
                "first: the sub-libraries come from the other cuDNN, and 'Could not load library "
                "libcudnn_cnn_train.so.8 … undefined symbol' / 'Invalid handle. Cannot load symbol' follows.",
                [*evidence, Evidence("library", path, how)],
                fix="Remove that cuDNN's directory from LD_LIBRARY_PATH for this environment (or unset "
                    "LD_LIBRARY_PATH); the wheels need no LD_LIBRARY_PATH.")
        elif problems and problems[0][0] == "libnvJitLink":
            _lib, path, how = problems[0]
            yield finding(
                "framework.libs_shadowed", "warn",
                f"LD_LIBRARY_PATH puts {path} before the CUDA libraries torch's wheels bring in {env.executable}",
                "torch finds its direct libraries through DT_RPATH, but the libraries those load (libcusparse → "
                "libnvJitLink, cuDNN's sub-libraries) are searched on LD_LIBRARY_PATH first. An older CUDA of the "
                "same major there gives \"undefined symbol: __nvJitLinkAddData_12_x, version libnvJitLink.so.12\" or "
                "'libcusparse.so.12: undefined symbol' at `import torch`.",
                [*evidence, Evidence("library", path, how)],
                fix="Remove that toolkit's lib64 from LD_LIBRARY_PATH for this environment (or unset LD_LIBRARY_PATH); "
                    "the wheels need no LD_LIBRARY_PATH.")
        elif problems:
            lib, path, how = problems[0]
            wheel = wheels[lib]
            yield finding(
                "framework.libs_shadowed", "warn",
                f"{path} shadows the {wheel.name} {wheel.version} wheel in {env.executable}" if wheel else path,
                f"The library is {how}: LD_LIBRARY_PATH is searched before the wheels' own RUNPATH, so a system "
                "or toolkit copy of another version is used — the cause of 'undefined symbol' errors and of "
                "'Loaded runtime CuDNN library … but source was compiled with …'.",
                [*evidence, Evidence("library", path, how)],
                fix="Remove that directory from LD_LIBRARY_PATH for this environment (or unset LD_LIBRARY_PATH).")
        else:
            yield ok("framework.libs_shadowed", f"Nothing on LD_LIBRARY_PATH shadows the nvidia-* wheels in "
                     f"{env.executable}", *evidence)


CHECKS_DRIVER = [too_old_for_toolkit, too_old_for_gpu, gpu_unsupported_by_driver]
CHECKS_TOOLKIT = [toolkit_arch, host_compiler]
CHECKS_CUDNN = [cudnn_cuda_mismatch, cudnn_version_mismatch]
CHECKS_FRAMEWORK = [framework_cuda_vs_driver, arch_unsupported, nvcc_mismatch, libs_shadowed]


@check("image.min_host_driver", "Environment", "With --static: the oldest host driver this image's CUDA runtimes "
       "run on.", static=True)
def min_host_driver(facts: Facts, ctx: Context) -> Iterator[Finding]:
    if not ctx.options.get("static"):
        raise NotApplicable("only with --static (an image build, judged without its future host)")
    m = _matrix(ctx)
    items = runtimes(facts)
    req = None if rc.disabled(facts.env.get("NVIDIA_DISABLE_REQUIRE")) else rc.parse(
        facts.env.get("NVIDIA_REQUIRE_CUDA"))
    req_row = rc.cuda_floor(m, req) if req else None
    if not items and not req_row:
        raise NotApplicable("no CUDA runtime in the image (no toolkit, no CUDA build of a framework)")
    native: list[tuple[str, Row]] = []
    floor: list[tuple[str, Row]] = []
    for who, cuda, _kind in items:
        need = m.min_driver(cuda)
        if not need:
            raise Skip(f"CUDA {cuda} ({who}) is not in the matrix")
        native.append((who, need))
        mvc = m.mvc(vtuple(cuda)[0])
        floor.append((who, mvc if mvc and mvc.get("linux_min_driver") else need))
    if req and req_row:  # the runtime refuses a container below this driver, whatever the libraries could do
        who = f"NVIDIA_REQUIRE_CUDA (cuda>={req.cuda})"
        native.append((who, req_row))
        floor.append((who, req_row))
    top_native = max(native, key=lambda x: vtuple(x[1]["linux_min_driver"]))
    top_floor = max(floor, key=lambda x: vtuple(x[1]["linux_min_driver"]))
    compat = [p.name for p in facts.driver.packages if p.name.startswith("cuda-compat")]
    low, high = top_floor[1]["linux_min_driver"], top_native[1]["linux_min_driver"]
    if req is not None and top_floor[0].startswith("NVIDIA_REQUIRE_CUDA"):
        detail = (f"The image's NVIDIA_REQUIRE_CUDA (cuda>={req.cuda}) makes the NVIDIA container runtime refuse "
                  f"to start it on a driver older than CUDA {req.cuda}'s ({low}), whatever minor-version "
                  "compatibility could do.")
        branches = rc.branches_text(req) if req else ""
        if branches:
            detail += f" Its exceptions also start it on {branches}."
        elif facts.sources.get("require_cuda"):
            detail += f" {facts.sources['require_cuda']}."
    else:
        detail = (f"{top_native[0]} needs driver ≥ {high} for full support; by minor-version compatibility it runs "
                  f"on ≥ {low} (no JIT of newer PTX).")
    if compat:
        detail += (f" The image carries {', '.join(compat)}: on data-center GPUs with a supported driver branch, "
                   "forward compatibility lowers this further.")
    title = f"This image needs a host driver ≥ {low}" + (f" (≥ {high} for full support)" if high != low else "")
    if req and req.exceptions and top_floor[0].startswith("NVIDIA_REQUIRE_CUDA"):
        consumer = any(s & rc.SEGMENT_BRANDS["consumer"] for _b, s in req.exceptions)
        names = [str(b) for b, _s in req.exceptions]
        listed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
        title += (f", or a {listed} driver" + (" for the GPU brands it lists" if consumer else
                                               " on data-center GPUs (not GeForce or TITAN)"))
    evidence = [Evidence("runtime", f"{w}") for w, _c, _k in items] + row_evidence([top_native[1], top_floor[1]])
    if req:
        evidence.insert(0, ev(facts, "env.NVIDIA_REQUIRE_CUDA", req.text if len(req.text) < 160 else
                              req.text[:157] + "…", "env"))
    yield finding("image.min_host_driver", "info", title, detail, evidence, fix=None)


CHECKS_IMAGE = [min_host_driver]
