"""What the facts mean together: three-valued beliefs (yes / no / unknown), each with its evidence.

Facts are what the probes (or a pasted report) saw, field by field. Many rules need what several
facts imply at once — "a working driver exists" is proven by any GPU that NVML, nvidia-smi, CUDA or a
framework enumerated, whatever the driver-version line said. This layer derives such beliefs once per
snapshot; checks read them instead of raw fields, and an unknown belief makes a check skip with the
reason instead of failing.

Rules of the layer:

* **Positive evidence wins over absence of evidence.** A GPU listed by a working driver makes
  "user space installed" and "module loaded" true even when the version line says "Could not collect".
* **Absence is only concluded from a probe that looked**, or from an explicit statement of absence
  (NVML's "library not found", torch's "Found no NVIDIA driver on your system", nvidia-smi's "couldn't
  communicate with the NVIDIA driver"). A report that does not say leaves the belief unknown.
* Every belief carries the evidence it rests on, so a finding can quote it.

Pure: facts in, beliefs out. Computed lazily and cached per snapshot object.
"""

from __future__ import annotations

import posixpath
from dataclasses import field
from typing import Any, Generic, TypeVar

from doctor.model.facts import Cudnn, Facts, Gpu, LibRef, Toolkit
from doctor.model.findings import Evidence
from doctor.model.records import dataclass
from doctor.model.report import live_probed as live_probed  # the one rule, in the model (renderers read it)
from doctor.safeio import lazy_compile, small_int

# --- the belief type ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Belief:
    """yes (True) / no (False) / unknown (None), why, and the facts it rests on."""

    value: bool | None
    why: str
    evidence: tuple[Evidence, ...] = ()

    @property
    def yes(self) -> bool:
        return self.value is True

    @property
    def no(self) -> bool:
        return self.value is False

    @property
    def unknown(self) -> bool:
        return self.value is None


V = TypeVar("V")


@dataclass(frozen=True)
class Known(Generic[V]):
    """A derived value (a version, a path) with where it came from; ``value`` None means unknown."""

    value: V | None
    source: str | None = None
    why: str = ""


# --- vocabulary -----------------------------------------------------------------------------------

# Packages that install the NVIDIA driver's user space or kernel module, per distribution and method.
# Debian/Ubuntu: nvidia-driver[-NNN[-open|-server]], libnvidia-compute-NNN, nvidia-dkms-NNN, libcuda1,
# nvidia-kernel-dkms, nvidia-headless-NNN, nvidia-utils-NNN; RHEL/Fedora: kmod-nvidia*, akmod-nvidia,
# xorg-x11-drv-nvidia*, nvidia-driver*, nvidia-kmod*; SUSE: nvidia-compute-G0*, nvidia-driver-G0*,
# nvidia-gl-G0*, nvidia-open-driver-G0*; Arch: nvidia, nvidia-dkms, nvidia-open[-dkms], nvidia-lts,
# nvidia-utils; NVIDIA's CUDA repository: cuda-drivers*; the .run installer: recorded as "nvidia-installer".
DRIVER_PACKAGES = lazy_compile(
    r"^(?:nvidia-driver(?:-.*)?|nvidia-driver-G0\d.*|nvidia-compute-G0\d.*|nvidia-gl-G0\d.*|"
    r"nvidia-open-driver-G0\d.*|nvidia-(?:open|dkms|lts)(?:-.*)?|nvidia|nvidia-utils(?:-.*)?|"
    r"nvidia-headless(?:-.*)?|nvidia-kernel-(?:open-)?dkms|nvidia-kernel-(?:open-)?source|nvidia-kmod.*|"
    r"nvidia-smi|libnvidia-compute-\d+.*|libnvidia-ml1|libcuda1|libcuda\d*-.*|kmod-nvidia.*|akmod-nvidia.*|"
    r"xorg-x11-drv-nvidia.*|cuda-drivers.*|linux-modules-nvidia-.*|nvidia-installer)$"
)
# Packages that are not a driver although their names say nvidia.
NOT_DRIVER = lazy_compile(r"^(?:nvidia-container.*|libnvidia-container.*|nvidia-cuda-toolkit.*|nvidia-cudnn.*|"
                        r"firmware-nvidia.*|nvidia-modprobe|nvidia-settings|nvidia-persistenced|nvidia-fabricmanager.*"
                        r"|cuda-compat.*)$")

# Explicit statements that no driver is installed, anywhere in the snapshot's error texts.
NO_DRIVER_TEXTS = (
    "found no nvidia driver on your system",  # torch: torch/cuda/__init__.py _check_driver
    "nvml shared library not found",
    "libnvidia-ml.so.1: cannot open shared object file",
    "libcuda.so.1: cannot open shared object file",
)
# NVML's own answer when libnvidia-ml cannot be loaded (NVML_ERROR_LIBRARY_NOT_FOUND).
# ("Function Not Found" and other "not found" answers prove libnvidia-ml is there: only the library's own absence.)
NVML_NO_LIBRARY = ("library not found", "shared library not found")
NOT_LOADED_TEXTS = (
    "driver not loaded",  # NVML_ERROR_DRIVER_NOT_LOADED
    "couldn't communicate with the nvidia driver",  # nvidia-smi
    "nvidia-smi has failed because it couldn't communicate",
    "no nvidia gpu device is present",
)
WORKING_SOURCES = ("nvml", "nvidia-smi", "collect_env", "cuda", "deep")


# --- the beliefs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Beliefs:
    """What the facts say together about the driver, the GPUs and the loader, with evidence."""
    userspace_installed: Belief
    module_loaded: Belief
    gpu_on_bus: Belief
    gpu_enumerated: Belief
    no_nvidia_gpu: Belief  # this machine has no NVIDIA GPU at all (CPU builds here are healthy)
    gpu_expected: Belief  # something here wants a GPU (a driver, a toolkit, a CUDA build of a framework)
    driver_version: Known[str]
    driver_cuda: Known[str]  # the CUDA version the driver supports ("12.2")
    libcuda: Known[str]  # real | stub | compat | newer_than_module | wsl | absent
    build_toolkit: Known[tuple[str, str | None, str]]  # (root, version, how) of the toolkit extensions build with
    texts: tuple[str, ...] = field(default_factory=tuple)  # error texts the facts carry (lower-cased)


_CACHE: list[tuple[Facts, Beliefs]] = []


def of(facts: Facts) -> Beliefs:
    """The beliefs of this snapshot (computed once per snapshot object)."""
    for f, b in _CACHE:
        if f is facts:
            return b
    b = derive(facts)
    _CACHE.append((facts, b))
    del _CACHE[:-8]
    return b


def derive(facts: Facts) -> Beliefs:
    texts = _texts(facts)
    return Beliefs(
        userspace_installed=_userspace(facts, texts),
        module_loaded=_module_loaded(facts, texts),
        gpu_on_bus=_gpu_on_bus(facts),
        gpu_enumerated=_gpu_enumerated(facts, texts),
        no_nvidia_gpu=_no_nvidia_gpu(facts, texts),
        gpu_expected=_gpu_expected(facts),
        driver_version=_driver_version(facts),
        driver_cuda=_driver_cuda(facts),
        libcuda=_libcuda(facts),
        build_toolkit=_build_toolkit(facts),
        texts=texts,
    )


# --- helpers --------------------------------------------------------------------------------------


def driver_version(facts: Facts) -> str | None:
    """The driver version: the loaded kernel module's, else the user-space libraries' (the one rule)."""
    return of(facts).driver_version.value


def runtimes(facts: Facts) -> list[tuple[str, str, str]]:
    """(who, cuda version, kind) for every CUDA runtime on the machine: toolkits and framework builds."""
    out = [(f"CUDA toolkit {t.version} at {t.root}", t.version, "toolkit")
           for t in facts.toolkits if t.version and t.source != "pip"]
    # The pip nvidia-cuda-nvcc wheel is the ptxas XLA (jax[cuda12]) and Triton compile with: a compiler like a
    # toolkit's, judged the same way (a ptxas newer than the driver's CUDA emits code the driver cannot load).
    out += [(f"CUDA toolkit {t.version} at {t.root}", t.version, "toolkit")
            for t in facts.toolkits if t.version and t.source == "pip" and t.nvcc_version]
    for env in facts.python_envs:
        for p in env.packages:
            if p.cpu_only or not p.cuda:
                continue
            if p.name in ("torch", "tensorflow", "tf-nightly", "jaxlib", "jax") or p.name.startswith("cupy"):
                cuda = p.cuda if "." in p.cuda else f"{p.cuda}.0"
                # --deep asked the runtime itself (CuPy's runtimeGetVersion()): the wheel's name gives the major only.
                deep = p.deep.cuda if p.deep and p.deep.cuda and not p.deep.error else None
                if deep and "." in deep and _vt(deep)[:1] == _vt(cuda)[:1]:
                    cuda = deep
                out.append((f"{p.name} {p.version}" if p.version else p.name, cuda, "framework"))
    return out


def cudnn_by_version(facts: Facts, sources: tuple[str, ...] | None = None) -> list[tuple[str, list[Cudnn]]]:
    """Each cuDNN version found (of those ``sources``: header, library, pip, conda, image), once, with every place
    it was found, in the order first found. One cuDNN package puts its version in two headers and two or three
    library names (Ubuntu's libcudnn9-dev: cudnn_version.h, cudnn_version_v9.h, libcudnn.so.9.14.0), and a check
    judges the version, not each file: one verdict per version, naming all of them."""
    out: dict[str, list[Cudnn]] = {}
    for c in facts.cudnn:
        if c.version and (sources is None or c.source in sources):
            out.setdefault(c.version, []).append(c)
    return list(out.items())


def _ev(facts: Facts, path: str, value: Any) -> Evidence:
    return Evidence(path, value, facts.sources.get(path))


def _texts(facts: Facts) -> tuple[str, ...]:
    """Every error text the snapshot carries: NVML's, cuInit's, probe errors, frameworks' --deep errors."""
    out = [facts.driver.nvml_error, facts.driver.cuda_init_error]
    out += [e.reason for e in facts.errors]
    out += [p.deep.error for env in facts.python_envs for p in env.packages if p.deep and p.deep.error]
    out += [env.error for env in facts.python_envs if env.error]
    return tuple(t.lower() for t in out if t)


def listed_gpus(facts: Facts) -> list[Gpu]:
    """GPUs a working driver enumerated (NVML, nvidia-smi, torch in a report) — not the PCI scan."""
    return [g for g in facts.gpus if g.source != "pci"]


def deep_sees_gpu(facts: Facts) -> bool:
    return any(p.deep and (p.deep.is_available or (p.deep.device_count or 0) > 0)
               for env in facts.python_envs for p in env.packages)


def driver_packages(facts: Facts) -> list[str]:
    return [p.name for p in facts.driver.packages if DRIVER_PACKAGES.match(p.name) and not NOT_DRIVER.match(p.name)]


def _cuinit_ok(facts: Facts) -> bool:
    return "driver.cuda_init_error" in facts.sources and facts.driver.cuda_init_error is None \
        and facts.driver.cuda_driver_api is not None


def _has(texts: tuple[str, ...], needles: tuple[str, ...]) -> str | None:
    return next((t for t in texts for n in needles if n in t), None)


def _original(facts: Facts, lowered: str) -> str:
    """The error text as the snapshot wrote it (matching is done lower-cased)."""
    raw = [facts.driver.nvml_error, facts.driver.cuda_init_error, *(e.reason for e in facts.errors),
           *(p.deep.error for env in facts.python_envs for p in env.packages if p.deep and p.deep.error)]
    return next((t for t in raw if t and t.lower() == lowered), lowered)


def windows_driver(facts: Facts) -> bool:
    """The driver is a Windows one (numbered differently from Linux): under WSL2, or on native Windows."""
    return bool(facts.host.wsl) or facts.host.os_id == "windows"


def probed(facts: Facts, what: str) -> bool:
    return what in facts.sources


# --- each belief ----------------------------------------------------------------------------------


def _userspace(facts: Facts, texts: tuple[str, ...]) -> Belief:
    d = facts.driver
    evidence: list[Evidence] = []
    reasons: list[str] = []
    if d.userspace:
        evidence.append(_ev(facts, "driver.userspace", d.userspace))
        reasons.append(f"user space {d.userspace}")
    if d.kernel_module:
        evidence.append(_ev(facts, "driver.kernel_module", d.kernel_module))
        reasons.append(f"kernel module {d.kernel_module}")
    if d.cuda_driver_api:
        evidence.append(_ev(facts, "driver.cuda_driver_api", d.cuda_driver_api))
        reasons.append(f"libcuda answers (CUDA {d.cuda_driver_api})")
    smi_cuda = getattr(d, "smi_cuda_version", None)
    if smi_cuda:
        evidence.append(_ev(facts, "driver.smi_cuda_version", smi_cuda))
        reasons.append(f"nvidia-smi reports CUDA {smi_cuda}")
    lib = facts.loader.libcuda
    if lib and not lib.stub:
        evidence.append(_ev(facts, "loader.libcuda", lib.path))
        reasons.append(f"libcuda at {lib.path}")
    if d.nvml_error and not _has((d.nvml_error.lower(),), NO_DRIVER_TEXTS + NVML_NO_LIBRARY):
        # NVML answered with an error: libnvidia-ml itself is there ("Driver Not Loaded", a mismatch …)
        evidence.append(_ev(facts, "driver.nvml_error", d.nvml_error))
        reasons.append(f"NVML answers {d.nvml_error!r}")
    pkgs = driver_packages(facts)
    if pkgs:
        evidence.append(_ev(facts, "driver.packages", pkgs))
        reasons.append(f"driver package(s) {', '.join(pkgs[:3])}")
    gpus = listed_gpus(facts)
    if gpus:
        evidence.append(Evidence("gpus", [g.name for g in gpus], gpus[0].source))
        reasons.append(f"{len(gpus)} GPU(s) enumerated by a working driver")
    if deep_sees_gpu(facts):
        evidence.append(Evidence("python_envs.packages.deep", "a framework sees a GPU", "deep"))
        reasons.append("a framework sees a GPU")
    if reasons:
        return Belief(True, "; ".join(reasons), tuple(evidence))
    said = _has(texts, NO_DRIVER_TEXTS) or _has(tuple(t.lower() for t in (d.nvml_error,) if t), NVML_NO_LIBRARY)
    if said:
        said = _original(facts, said)
        return Belief(False, f"the facts say so: {said!r}", (Evidence("errors", said, None),))
    if probed(facts, "driver") and not facts.host.container:
        return Belief(False, "the probes found no NVIDIA library, kernel module or driver package",
                      (_ev(facts, "driver.userspace", None), _ev(facts, "driver.kernel_module", None),
                       _ev(facts, "driver.packages", [p.name for p in d.packages])))
    if probed(facts, "driver") and facts.host.container:
        return Belief(False, "no NVIDIA driver library inside this container (the host injects it with a GPU "
                      "request)", (_ev(facts, "loader.libcuda", None),))
    return Belief(None, "the driver was not inspected (a recorded report that does not say)")


def _module_loaded(facts: Facts, texts: tuple[str, ...]) -> Belief:
    d = facts.driver
    gpus = listed_gpus(facts)
    if d.nvml_error and "mismatch" in d.nvml_error.lower():
        return Belief(True, f"a module is loaded but mismatched: NVML says {d.nvml_error!r}",
                      (_ev(facts, "driver.nvml_error", d.nvml_error),))
    # Enumeration by a working driver is proof; an explicit "not loaded" beats a module list that may be stale;
    # the module list and /proc/driver/nvidia/version come last.
    yes: list[tuple[str, Evidence]] = []
    if gpus:
        yes.append((f"{len(gpus)} GPU(s) enumerated", Evidence("gpus", [g.name for g in gpus], gpus[0].source)))
    if _cuinit_ok(facts):
        # The error fact is recorded and empty: shown as "unknown" it would say the opposite of what it proves.
        yes.append(("cuInit succeeded", _ev(facts, "driver.cuda_init_error", "none (cuInit returned CUDA_SUCCESS)")))
    if deep_sees_gpu(facts):
        yes.append(("a framework sees a GPU", Evidence("python_envs.packages.deep", True, "deep")))
    if yes:
        return Belief(True, "; ".join(w for w, _e in yes), tuple(e for _w, e in yes))
    not_loaded = _has(texts, NOT_LOADED_TEXTS)
    if not_loaded:
        ev = [_ev(facts, "driver.module_loaded", d.module_loaded)]
        if d.nvml_error:
            ev.append(_ev(facts, "driver.nvml_error", d.nvml_error))
        if d.cuda_init_error:
            ev.append(_ev(facts, "driver.cuda_init_error", d.cuda_init_error))
        return Belief(False, f"the facts say so: {_original(facts, not_loaded)!r}", tuple(ev))
    if d.module_loaded:
        yes.append(("/proc/modules lists nvidia", _ev(facts, "driver.module_loaded", True)))
    if d.kernel_module:
        yes.append((f"/proc/driver/nvidia/version says {d.kernel_module}",
                    _ev(facts, "driver.kernel_module", d.kernel_module)))
    if yes:
        return Belief(True, "; ".join(w for w, _e in yes), tuple(e for _w, e in yes))
    if d.module_loaded is False:
        ev = [_ev(facts, "driver.module_loaded", False)]
        ev += [_ev(facts, f"driver.{k}", getattr(d, k)) for k in ("nvml_error", "cuda_init_error") if getattr(d, k)]
        return Belief(False, "/proc/modules does not list nvidia", tuple(ev))
    return Belief(None, "whether the kernel module is loaded is unknown (no /proc/modules and no answer from NVML)")


def _gpu_on_bus(facts: Facts) -> Belief:
    n = facts.host.pci_nvidia_gpus
    if facts.gpus:
        return Belief(True, f"{len(facts.gpus)} NVIDIA GPU(s) listed", (Evidence("gpus", [g.name for g in facts.gpus],
                                                                                  facts.gpus[0].source),))
    if n:
        return Belief(True, f"{n} NVIDIA GPU(s) on the PCI bus", (_ev(facts, "host.pci_nvidia_gpus", n),))
    if n == 0:
        return Belief(False, "the PCI bus lists no NVIDIA display or 3D controller",
                      (_ev(facts, "host.pci_nvidia_gpus", 0),))
    return Belief(None, "the PCI bus was not read")


def _gpu_enumerated(facts: Facts, texts: tuple[str, ...]) -> Belief:
    gpus = listed_gpus(facts)
    if gpus:
        return Belief(True, f"{len(gpus)} GPU(s) listed by {gpus[0].source}",
                      (Evidence("gpus", [g.name for g in gpus], gpus[0].source),))
    if deep_sees_gpu(facts):
        return Belief(True, "a framework sees a GPU", (Evidence("python_envs.packages.deep", True, "deep"),))
    d = facts.driver
    if d.nvml_error or d.cuda_init_error:
        return Belief(False, f"NVML: {d.nvml_error!r}; cuInit: {d.cuda_init_error!r}",
                      (_ev(facts, "driver.nvml_error", d.nvml_error), _ev(facts, "driver.cuda_init_error",
                                                                          d.cuda_init_error)))
    return Belief(None, "no working driver was asked for its GPUs")


def _no_nvidia_gpu(facts: Facts, texts: tuple[str, ...]) -> Belief:
    """The machine has no NVIDIA GPU at all: then CPU builds are the right builds."""
    if facts.gpus or facts.host.pci_nvidia_gpus:
        return Belief(False, "an NVIDIA GPU is listed")
    if facts.host.pci_nvidia_gpus == 0:
        return Belief(True, "the PCI bus lists no NVIDIA GPU", (_ev(facts, "host.pci_nvidia_gpus", 0),))
    if facts.host.os_id == "macos":
        return Belief(True, "macOS: no NVIDIA CUDA GPU support since CUDA 10.2", (Evidence("host.os_id", "macos"),))
    return Belief(None, "whether an NVIDIA GPU is attached is unknown")


def _gpu_expected(facts: Facts) -> Belief:
    why = []
    if driver_packages(facts) or facts.driver.userspace or facts.driver.kernel_module:
        why.append("an NVIDIA driver is installed")
    if [t for t in facts.toolkits if t.source != "pip"]:
        why.append("a CUDA toolkit is installed")
    cuda_builds = [p for env in facts.python_envs for p in env.packages if p.cuda and p.cpu_only is False]
    if cuda_builds:
        why.append(f"{cuda_builds[0].name} is a CUDA build")
    if why:
        return Belief(True, "; ".join(why))
    return Belief(None, "nothing here says it wants a GPU")


def _driver_version(facts: Facts) -> Known[str]:
    d = facts.driver
    if d.kernel_module:
        return Known(d.kernel_module, facts.sources.get("driver.kernel_module"), "the loaded kernel module")
    if d.userspace:
        return Known(d.userspace, facts.sources.get("driver.userspace"), "the user-space libraries")
    return Known(None, None, "the driver version is unknown")


def _driver_cuda(facts: Facts) -> Known[str]:
    """cuDriverGetVersion first (what libcuda itself says), then nvidia-smi's header / XML, then a framework's
    'found version N' warning (recorded by the report reader as the driver API)."""
    d = facts.driver
    if d.cuda_driver_api:
        return Known(d.cuda_driver_api, facts.sources.get("driver.cuda_driver_api"), "cuDriverGetVersion")
    smi = getattr(d, "smi_cuda_version", None)
    if smi:
        return Known(smi, facts.sources.get("driver.smi_cuda_version"), "nvidia-smi's CUDA Version")
    return Known(None, None, "the CUDA version of the driver is unknown")


def _vt(v: str | None) -> tuple[int, ...]:
    out = []
    for piece in (v or "").split("."):
        n = small_int(piece)  # ASCII digits, bounded: "²".isdigit() is True but int("²") raises
        if n is None:
            break
        out.append(n)
    return tuple(out)


def libcuda_kind(lib: LibRef | None, module: str | None, compat_pkgs: bool = False) -> str | None:
    if lib is None:
        return None
    path = lib.path
    if lib.stub or "/stubs/" in path:
        return "stub"
    if path.startswith("/usr/lib/wsl/"):
        return "wsl"
    if "/compat/" in path or "cuda-compat" in path:
        return "compat"
    if module and lib.version and len(_vt(lib.version)) >= 2 and _vt(lib.version)[0] >= 100 \
            and _vt(lib.version) > _vt(module):
        return "newer_than_module"
    return "real"


def _libcuda(facts: Facts) -> Known[str]:
    lib = facts.loader.libcuda
    kind = libcuda_kind(lib, facts.driver.kernel_module)
    if kind is None:
        if probed(facts, "loader"):
            return Known("absent", facts.sources.get("loader"), "the loader finds no libcuda")
        return Known(None, None, "the loader was not inspected")
    return Known(kind, facts.sources.get("loader"), lib.path if lib else "")


def norm_path(path: str | None) -> str:
    """A path compared by what it names: no trailing slash, no '//' or '/./' (symlinks need the probe)."""
    p = (path or "").strip()
    return posixpath.normpath(p) if p.startswith("/") else p.rstrip("/\\")


def toolkit_named_by(facts: Facts, var: str) -> Toolkit | None:
    """The toolkit CUDA_HOME / CUDA_PATH names — whichever probe found it first: the one found through the
    variable, the one it resolves to (the probe records the real path), or one at the same normalised path."""
    home = facts.env.get(var)
    if not home:
        return None
    tk = next((t for t in facts.toolkits if t.source == f"env:{var}"), None)
    if tk:
        return tk
    real = (facts.sources.get(f"toolkits.env:{var}") or "").removeprefix("realpath:")
    want = {norm_path(home), norm_path(real)} - {""}
    return next((t for t in facts.toolkits if norm_path(t.root) in want), None)


def _build_toolkit(facts: Facts) -> Known[tuple[str, str | None, str]]:
    """The toolkit extension builds use: CUDA_HOME / CUDA_PATH first (torch.utils.cpp_extension reads
    CUDA_HOME, then CUDA_PATH), then nvcc on PATH."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = facts.env.get(var)
        if home:
            tk = toolkit_named_by(facts, var)
            if tk:
                return Known((tk.root, tk.version, var), f"env:{var}", f"{var}={home}")
            return Known((home, None, var), f"env:{var}", f"{var}={home} (no toolkit found there)")
    nvcc = facts.loader.nvcc_on_path
    if nvcc:
        return Known((nvcc.path.rsplit("/bin/", 1)[0], nvcc.version, "PATH"), facts.sources.get("loader.nvcc_on_path"),
                     f"nvcc on PATH: {nvcc.path}")
    return Known(None, None, "no CUDA_HOME and no nvcc on PATH")
