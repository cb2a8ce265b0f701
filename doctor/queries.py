"""Questions answered from the matrix alone: what a driver runs, what a GPU needs, what a CUDA version
brings, and the planner that picks the newest working combination. Pure: data in, dicts out.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # packaging costs ~50 ms to import: only the queries that compare specifiers import it
    from packaging.specifiers import SpecifierSet

from doctor.matrix import Matrix, Row, cuda_in, driver_meets, driver_runs_cuda, is_branch, major_minor, vtuple
from doctor.model.records import dataclass
from doctor.platforms import PLATFORMS, for_gpus
from doctor.platforms import gpu_platform as gpu_platform_of


class QueryError(ValueError):
    """The question cannot be asked (unknown GPU, malformed version): a one-line message for the user."""


def _src(row: Row | None) -> str | None:
    return (row or {}).get("source")


def _driver_ok(m: Matrix, driver: str, cuda: str, segment: str | None = None) -> tuple[bool, str]:
    v = driver_runs_cuda(m, driver, cuda, segment)
    return v.ok, v.rule


def query_driver(m: Matrix, driver: str) -> dict[str, Any]:
    if not vtuple(driver) or vtuple(driver)[0] < 100:
        raise QueryError(f"{driver!r} is not an NVIDIA driver version (e.g. 535.104.05)")
    # A bare branch ("535") means the branch: its newest release (matrix.driver_meets).
    native = m.native_toolkits(driver)
    mvc = [r for r in m.rows("cuda", "minor_version_compat")
           if r.get("linux_min_driver") and driver_meets(driver, r["linux_min_driver"])]
    newest = max(native, key=lambda r: vtuple(r["version"]), default=None)
    return {
        "driver": driver,
        "branch": is_branch(driver) or None,
        "newest_native_cuda": newest and {"version": newest["version"], "label": newest.get("label"),
                                          "min_driver": newest.get("linux_min_driver")
                                          or f"R{newest.get('driver_branch')}", "source": _src(newest)},
        "native_cuda": sorted({major_minor(r["version"]) for r in native}, key=vtuple),
        "minor_version_compat": [{"cuda_major": r["cuda_major"], "floor": r["linux_min_driver"], "source": _src(r)}
                                 for r in mvc],
        "newest_frameworks": _newest_frameworks(m, driver),
    }


def _newest_frameworks(m: Matrix, driver: str, cc: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for row in sorted(m.rows("pytorch", "torch"), key=lambda r: vtuple(r["version"]), reverse=True):
        for var in sorted(row.get("variant", []), key=lambda v: vtuple(v["cuda"]), reverse=True):
            ok, rule = _driver_ok(m, driver, var["cuda"])
            if ok and (cc is None or _arch_ok(cc, var)):
                out["torch"] = {"version": row["version"], "cuda": var["cuda"], "rule": rule,
                                "index_url": _index_url(var["cuda"]), "source": _src(var) or _src(row)}
                break
        if "torch" in out:
            break
    for row in sorted(m.rows("tensorflow", "tensorflow"), key=lambda r: vtuple(r["version"]), reverse=True):
        if row.get("cuda") and _driver_ok(m, driver, row["cuda"])[0]:
            out["tensorflow"] = {"version": row["version"], "cuda": row["cuda"], "cudnn": row.get("cudnn"),
                                 "source": _src(row)}
            break
    for row in sorted(m.rows("jax", "jax"), key=lambda r: vtuple(r["version"]), reverse=True):
        need = row.get("min_driver")
        if row.get("local_cuda"):  # runs on the machine's own toolkit: that toolkit's minimum, no MVC (JAX's README)
            own = m.min_driver(str(row["local_cuda"]))
            need = own.get("linux_min_driver") if own else None
            if not need:
                continue
        if need and not driver_meets(driver, need):
            continue
        if not need and row.get("cuda_major") and not _driver_ok(m, driver, f"{row['cuda_major']}.0")[0]:
            continue
        out["jax"] = {"version": row["version"], "plugin": row.get("plugin"), "cuda_major": row.get("cuda_major"),
                      "source": _src(row)}
        break
    return out


def _index_url(cuda: str) -> str:
    return f"https://download.pytorch.org/whl/cu{cuda.replace('.', '')}"


def _arch_ok(cc: str, variant: Row) -> bool:
    sass = variant.get("arch_list") or []
    v = vtuple(cc)
    if any(vtuple(s)[:1] == v[:1] and vtuple(s) <= v for s in sass):
        return True
    ptx = variant.get("ptx")
    return bool(ptx) and vtuple(ptx) <= v


def query_gpu(m: Matrix, name: str, platform: str | None = None) -> dict[str, Any]:
    row = m.gpu(name)
    if row is None:
        raise QueryError(f"unknown GPU {name!r} (not in compat/gpus.toml; try the name nvidia-smi prints)")
    cc = row["compute_capability"]
    try:
        plat = for_gpus(m, [name], platform)
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    arch = m.architecture(row.get("architecture")) or m.architecture(cc)
    toolkits = [r["cuda"] for r in m.rows("cuda", "sm_support") if cc in r.get("sm", [])]
    torch = []
    key = arch_key(plat)
    for t in m.rows("pytorch", "torch") if plat in ("linux-x86_64", "linux-aarch64") else []:
        cudas = [v["cuda"] for v in t.get("variant", []) if v.get(key)
                 and _arch_ok(cc, {"arch_list": v[key], "ptx": v.get("ptx") if key == "arch_list" else None})
                 and not _cudnn_blocks(m, v, (cc,))]
        if cudas:
            torch.append({"version": t["version"], "cuda": sorted(cudas, key=vtuple)})
    tegra = gpu_platform_of(row) == "jetson"
    return {
        "gpu": row["name"], "compute_capability": cc, "architecture": row.get("architecture"),
        "segment": row.get("segment"), "source": _src(row), "platform": plat,
        "driver": arch and {"first": None if tegra else m.first_driver(arch, cc),
                            "last_branch": None if tegra else arch.get("last_driver_branch"),
                            "jetpack": tegra,
                            "open_kernel_module": None if tegra else arch.get("open_kernel_module"),
                            "open_kernel_module_required": None if tegra else bool(
                                arch.get("open_kernel_module_required") or row.get("open_kernel_module_required")),
                            "source": _src(arch)},
        "toolkits_that_compile_for_it": sorted(toolkits, key=vtuple),
        "torch_builds": torch,
        "torch_note": (f"no CUDA wheels on PyPI for JetPack 4-6 boards: NVIDIA publishes builds per JetPack release "
                       f"({JETSON_PYTORCH})" if plat == "jetson" else
                       "the matrix describes Linux builds only" if plat not in ("linux-x86_64", "linux-aarch64")
                       else None),
        "forward_compat_eligible": row.get("segment") in m.table("cuda", "forward_compat_policy").get("segments", []),
    }


def query_cuda(m: Matrix, cuda: str) -> dict[str, Any]:
    rows = m.toolkit_rows(cuda)
    if not vtuple(cuda) or not (rows or m.sm_support(cuda)):
        raise QueryError(f"CUDA {cuda!r} is not in the matrix (e.g. 12.4 or 12.4.1)")
    need = m.min_driver(cuda)
    mvc = m.mvc(vtuple(cuda)[0])
    # NVIDIA's support matrices name CUDA minors ("12.0-12.2"); a row known only per major ("12.x", from which
    # nvidia-cudnn-cuNN wheels exist) does not say it supports this minor, so it is listed apart.
    def _label(r: Row) -> str:
        return str(r["version"]) + (f"–{r['last']}" if r.get("last") else "")
    cudnn = [_label(r) for r in m.rows("cudnn", "cudnn")
             if any(cuda_in(cuda, s) for s in r.get("cuda", []) if not s.strip().endswith(".x"))]
    cudnn_major = [_label(r) for r in m.rows("cudnn", "cudnn") if _label(r) not in cudnn
                   and any(cuda_in(cuda, s) for s in r.get("cuda", []) if s.strip().endswith(".x"))]
    torch = [{"version": t["version"], "index_url": _index_url(v["cuda"]),
              "on_pypi": major_minor(t.get("default_cuda")) == major_minor(v["cuda"])}
             for t in m.rows("pytorch", "torch") for v in t.get("variant", [])
             if major_minor(v["cuda"]) == major_minor(cuda)]
    tf = [t["version"] for t in m.rows("tensorflow", "tensorflow") if major_minor(t.get("cuda")) == major_minor(cuda)]
    return {
        "cuda": cuda,
        "releases": [{"version": r["version"], "label": r.get("label"), "linux_min_driver": r.get("linux_min_driver"),
                      "driver_branch": r.get("driver_branch"),
                      "windows_min_driver": r.get("windows_min_driver"), "source": _src(r)} for r in rows],
        "min_driver": (need and need.get("linux_min_driver")) or next(
            (f"R{r['driver_branch']}" for r in rows if r.get("driver_branch")), None),
        "minor_version_compat_floor": mvc and mvc.get("linux_min_driver"),
        "sm_targets": (m.sm_support(cuda) or {}).get("sm"),
        "cudnn": cudnn, "cudnn_same_major_unverified_minor": cudnn_major, "torch": torch, "tensorflow": tf,
    }




@dataclass(frozen=True)
class TorchNeeds:
    """Every constraint a torch build must meet on one machine, weighed at once by :func:`pick_torch`.

    ``ccs``: the compute capability of every GPU (each needs SASS of its major at or below it, or PTX at or below
    it); ``driver``: the installed (or planned) driver, a bare branch meaning any release of it; ``segment``: the
    least forward-compatible GPU segment (forward compatibility is for data-center and embedded GPUs only);
    ``python``: the environment's X.Y (only releases with wheels for it); ``platform``: one of PLATFORMS;
    ``prefer``: a release to keep when it fits (a CPU build replaced by the same release's CUDA build).
    """

    ccs: tuple[str, ...] = ()
    driver: str | None = None
    segment: str | None = None
    python: str | None = None
    platform: str = "linux-x86_64"
    want: str | None = None
    prefer: str | None = None
    forward_compat: bool = True  # may a cuda-compat package bring a newer CUDA (eligible GPUs only)?
    compat_packages: tuple[str, ...] = ()  # cuda-compat packages already installed
    windows_driver: bool = False  # WSL2: the driver is the Windows one (its own minimums)
    driver_cuda: str | None = None  # the driver CUDA level when its version is unknown (nvidia-smi, cuDriverGetVersion)


def driver_floor(m: Matrix, cuda: str, windows: bool = False) -> str | None:
    """The lowest driver that runs an application bundling CUDA ``cuda`` (SASS, no newer-PTX JIT): the
    minor-version-compatibility floor of its major where NVIDIA gives one (CUDA 11+), else its own minimum."""
    key = "windows_min_driver" if windows else "linux_min_driver"
    major = vtuple(cuda)[:1]
    mvc = m.mvc(major[0]) if major else None
    if mvc and mvc.get(key):
        return str(mvc[key])
    need = m.min_driver(cuda, windows)
    return str(need[key]) if need and need.get(key) else None


def python_ok(row: Row, python: str | None) -> bool:
    """Does this torch release publish wheels for Python X.Y? (RELEASE.md's range, else Requires-Python.)"""
    if not python:
        return True
    spec = row.get("python_wheels") or row.get("python")
    if not spec:
        return True
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return Version(".".join(python.split(".")[:2])) in SpecifierSet(spec)
    except (InvalidSpecifier, InvalidVersion):
        return False


def framework_of(want: str | None) -> str:
    """Which framework a --want names: torch (the default), tensorflow or jax."""
    head = re.match(r"\s*([A-Za-z][A-Za-z0-9_\-]*)", want or "")
    name = (head.group(1).lower().replace("_", "-") if head else "")
    if name in ("tensorflow", "tf", "tensorflow-gpu", "tensorflow-cpu"):
        return "tensorflow"
    if name in ("jax", "jaxlib"):
        return "jax"
    return "torch"


def plan(m: Matrix, gpu: str | list[str] | None, driver: str | None, want: str | None, python: str | None,
         explain: bool = True, platform: str | None = None, driver_cuda: str | None = None) -> dict[str, Any]:
    """The newest build of the wanted framework (torch unless --want names tensorflow or jax) that fits every
    constraint — every GPU named, the platform they imply, the driver or only its CUDA level — or which
    constraint makes it impossible."""
    names = [gpu] if isinstance(gpu, str) else list(gpu or [])
    ccs: list[str] = []
    segments: list[str | None] = []
    if driver_cuda is not None and len(vtuple(driver_cuda)) < 2:
        raise QueryError(f"--driver-cuda {driver_cuda!r}: not a CUDA version (e.g. 12.4)")
    drv = _full_driver(m, driver) if driver and vtuple(driver) and vtuple(driver)[0] >= 100 else None
    for name in names:
        row = m.gpu(name)
        if row is None:
            raise QueryError(f"unknown GPU {name!r} (not in compat/gpus.toml)")
        ccs.append(row["compute_capability"])
        segments.append(row.get("segment"))
        arch = m.architecture(row.get("architecture")) or {}
        first = m.first_driver(arch, row.get("compute_capability"))
        if drv and first and vtuple(drv) < vtuple(first):
            return {"possible": False, "why": f"{row['name']} ({arch['name']}) needs driver ≥ {first}, "
                    f"older than {driver}: upgrade the driver first — no framework build can help"}
        last = arch.get("last_driver_branch")
        if drv and last and vtuple(drv)[:1] > vtuple(str(last))[:1]:
            return {"possible": False, "why": f"driver branch {vtuple(drv)[0]} no longer supports {arch['name']} "
                    f"GPUs (last: R{last}): install the R{last} branch"}
    try:
        plat = for_gpus(m, names, platform)
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    # Forward compatibility needs every GPU on a segment it supports: the least eligible one decides.
    segment = None if (not segments or None in segments) else (
        "consumer" if "consumer" in segments else "workstation" if "workstation" in segments else segments[0])
    needs = TorchNeeds(ccs=tuple(dict.fromkeys(ccs)), driver=driver, segment=segment, python=python,
                       platform=plat, want=want, driver_cuda=major_minor(driver_cuda) if driver_cuda else None)
    family = framework_of(want)
    pick = {"tensorflow": lambda: pick_tensorflow(m, needs), "jax": lambda: pick_jax(m, needs),
            "torch": lambda: pick_torch(m, needs, explain=explain)}[family]()
    return {"framework": family, "platform": plat, **pick}


def _wish(want: str | None, names: tuple[str, ...]) -> SpecifierSet | None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    body = (want or "").strip()
    for name in sorted(names, key=len, reverse=True):
        if body.lower().startswith(name):
            body = body[len(name):].strip()
            break
    if body.startswith("["):  # an extra: jax[cuda12]>=0.6
        body = body.split("]", 1)[-1].strip()
    if not body:
        return None
    try:
        return SpecifierSet(body if body[0] in "<>=!~" else f"=={body}")
    except InvalidSpecifier:
        raise QueryError(f"--want {want!r}: not a version specifier (e.g. {names[0]}>=2.16)") from None


def _python_range(spec: str | None, python: str | None) -> bool:
    """TensorFlow's tested range "3.9-3.12", or a Requires-Python specifier."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    if not python or not spec:
        return True
    if re.fullmatch(r"\d+\.\d+-\d+\.\d+", spec):
        lo, hi = spec.split("-")
        return vtuple(lo) <= vtuple(python)[:2] <= vtuple(hi)
    try:
        return Version(".".join(python.split(".")[:2])) in SpecifierSet(spec)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _driver_blocks(m: Matrix, needs: TorchNeeds, cuda: str, floor: str | None = None) -> str | None:
    """Why the driver (or its CUDA level) cannot run an application bundling CUDA ``cuda``; None when it can or
    nothing is known."""
    if needs.driver:
        full = _full_driver(m, needs.driver)
        if floor:
            return None if driver_meets(full, floor) else f"needs driver ≥ {floor}"
        v = driver_runs_cuda(m, full, cuda, windows=needs.windows_driver)
        return None if v.ok else f"needs driver ≥ {driver_floor(m, cuda) or '?'}"
    if needs.driver_cuda:
        v = driver_runs_cuda(m, None, cuda, driver_api=needs.driver_cuda)
        return None if v.ok else (f"needs a driver for CUDA ≥ {major_minor(cuda)}; this one runs CUDA "
                                  f"{needs.driver_cuda}")
    return None


def pick_tensorflow(m: Matrix, needs: TorchNeeds) -> dict[str, Any]:
    """The newest TensorFlow GPU build for these constraints: its Python range, its CUDA (the driver must run
    it), its cuDNN (the GPUs must meet its lowest compute capability), Linux x86_64 wheels (native Windows GPU
    only up to 2.10)."""
    spec = _wish(needs.want, ("tensorflow-gpu", "tensorflow-cpu", "tensorflow", "tf"))
    if needs.platform in ("macos", "jetson", "linux-aarch64"):
        where = {"macos": "macOS", "jetson": "a JetPack 4-6 board (NVIDIA publishes TensorFlow for JetPack)",
                 "linux-aarch64": "Linux aarch64 (the matrix describes TensorFlow's x86_64 GPU builds only)"}
        return {"possible": False, "why": f"no TensorFlow CUDA build in the matrix for {where[needs.platform]}"}
    blocked: list[str] = []
    for row in sorted(m.rows("tensorflow", "tensorflow"), key=lambda r: vtuple(r["version"]), reverse=True):
        name = f"tensorflow {row['version']}"
        if spec is not None and not _in_spec(row["version"], spec):
            continue
        if needs.platform == "windows" and not row.get("gpu_on_windows"):
            blocked.append(f"{name} (no native-Windows GPU build after 2.10: use WSL2)")
            continue
        if not _python_range(row.get("python"), needs.python):
            blocked.append(f"{name} (no wheels for Python {needs.python}: {row.get('python')})")
            continue
        low, _r = m.cudnn_min_cc(row.get("cudnn"))
        if low and any(vtuple(cc) < vtuple(low) for cc in needs.ccs):
            blocked.append(f"{name} (its cuDNN {row.get('cudnn')} needs compute capability ≥ {low})")
            continue
        why = _driver_blocks(m, needs, str(row.get("cuda")))
        if why:
            blocked.append(f"{name} (CUDA {row.get('cuda')}: {why})")
            continue
        base = row["version"]
        if row.get("and_cuda"):
            install = f"pip install 'tensorflow[and-cuda]=={base}'"
            channel = (f"PyPI: tensorflow and the nvidia-* CUDA {row.get('cuda')} / cuDNN {row.get('cudnn')} "
                       "wheels its [and-cuda] extra pins")
        else:
            install = f"pip install tensorflow=={base}"
            channel = (f"PyPI (tensorflow) + a system CUDA {row.get('cuda')} and cuDNN {row.get('cudnn')} from NVIDIA "
                       "(its installers or redistributable archives): this release has no [and-cuda] extra")
        return {"possible": True, "tensorflow": base, "cuda": row.get("cuda"), "cudnn": row.get("cudnn"),
                "install": install, "channel": channel, "platform": needs.platform,
                "driver_floor": driver_floor(m, str(row.get("cuda"))), "source": _src(row)}
    return {"possible": False, "why": ("; ".join(blocked[:3]) if blocked
                                       else f"no TensorFlow release in the matrix satisfies {needs.want!r}")}


JAX_INDEX = "https://storage.googleapis.com/jax-releases/jax_cuda_releases.html"


def pick_jax(m: Matrix, needs: TorchNeeds) -> dict[str, Any]:
    """The newest JAX CUDA build for these constraints: its Python, its CUDA major (the driver floor JAX's guide
    states, else minor-version compatibility), its lowest compute capability and cuDNN, Linux x86_64 wheels. The
    pip route brings CUDA and cuDNN as nvidia-* wheels; the -local route needs them on the system."""
    spec = _wish(needs.want, ("jaxlib", "jax"))
    if needs.platform in ("macos", "windows", "jetson", "linux-aarch64"):
        where = {"macos": "macOS", "windows": "native Windows (JAX: use WSL2)", "jetson": "a JetPack 4-6 board",
                 "linux-aarch64": "Linux aarch64 (the matrix describes JAX's x86_64 CUDA wheels only)"}
        return {"possible": False, "why": f"no JAX CUDA build in the matrix for {where[needs.platform]}"}
    blocked: list[str] = []
    rows = sorted(m.rows("jax", "jax"), key=lambda r: (vtuple(r["version"]), "plugin" in str(r.get("plugin")),
                                                        r.get("cuda_major") or 0), reverse=True)
    for row in rows:
        name = f"jax {row['version']} ({row.get('plugin')})"
        major = row.get("cuda_major")
        if spec is not None and not _in_spec(row["version"], spec):
            continue
        if not _python_range(row.get("python"), needs.python):
            blocked.append(f"{name}: no wheels for Python {needs.python} ({row.get('python')})")
            continue
        low = row.get("min_compute_capability") or m.cudnn_min_cc(row.get("min_cudnn"))[0]
        if low and any(vtuple(cc) < vtuple(str(low)) for cc in needs.ccs):
            blocked.append(f"{name}: needs compute capability ≥ {low}")
            continue
        why = _driver_blocks(m, needs, f"{major}.0", row.get("min_driver") if needs.driver else None)
        if why:
            blocked.append(f"{name}: {why}")
            continue
        plugin = "plugin" in str(row.get("plugin"))
        modern = plugin and vtuple(row["version"]) >= (0, 4, 26)
        out = {"possible": True, "jax": row["version"], "plugin": row.get("plugin"), "cuda_major": major,
               "min_cudnn": row.get("min_cudnn"), "platform": needs.platform, "source": _src(row),
               "driver_floor": row.get("min_driver") or driver_floor(m, f"{major}.0")}
        if modern:
            out["install"] = f"pip install 'jax[cuda{major}]=={row['version']}'"
            out["channel"] = f"PyPI: jax, {row.get('plugin')} and the nvidia-* CUDA {major} wheels it pins"
            if vtuple(row["version"]) >= (0, 5):
                out["local"] = (f"pip install 'jax[cuda{major}-local]=={row['version']}' with a system CUDA "
                                f"{major}.x and cuDNN ≥ {row.get('min_cudnn') or '?'} from NVIDIA (installers or "
                                "redistributable archives) — the same driver rules apply")
        else:
            out["install"] = None
            out["channel"] = (f"JAX's own release index {JAX_INDEX} ({row.get('plugin')}), not PyPI, with a system "
                              f"CUDA {major} and cuDNN ≥ {row.get('min_cudnn') or '?'}")
        return out
    return {"possible": False, "why": ("; ".join(blocked[:3]) if blocked
                                       else f"no JAX release in the matrix satisfies {needs.want!r}")}


JETSON_PYTORCH = "https://docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform/index.html"


def arch_key(platform: str) -> str:
    """The pytorch.toml key holding a variant's SASS list on this platform."""
    return "arch_list_aarch64" if platform == "linux-aarch64" else "arch_list"


def cuda_targets(m: Matrix, cuda: str, cc: str) -> bool | None:
    """Can a CUDA ``cuda`` toolkit build SASS that runs on ``cc`` (same major, equal or lower minor)? None when the
    matrix has no target list for that minor. CUDA 13 cannot target sm_60 or sm_70, whatever a build claims."""
    row = m.sm_support(cuda)
    if not row or not row.get("sm"):
        return None
    v = vtuple(cc)
    return any(vtuple(s)[:1] == v[:1] and vtuple(s) <= v for s in row["sm"])


def _cudnn_blocks(m: Matrix, var: Row, ccs: tuple[str, ...]) -> str | None:
    """The bundled cuDNN cannot run on one of these GPUs: why, else None."""
    if not var.get("cudnn") or not ccs:
        return None
    low, _row = m.cudnn_min_cc(var["cudnn"])
    bad = [cc for cc in ccs if low and vtuple(cc) < vtuple(low)]
    return f"its cuDNN {var['cudnn']} needs compute capability ≥ {low}" if bad else None


def pick_torch(m: Matrix, needs: TorchNeeds, explain: bool = True) -> dict[str, Any]:
    """The newest torch build meeting every constraint of ``needs`` (the preferred release first), or why none.

    The constraints, each read from the matrix: the platform's wheels (x86_64 or aarch64 arch lists; none on
    JetPack 4-6 boards or macOS), the Python's wheels, every GPU's SASS (or PTX), the bundled cuDNN's lowest
    compute capability, and the driver (its version, or only its CUDA level). A build the driver runs natively or
    by minor-version compatibility wins over one that needs a cuda-compat package; the package is offered only on
    a GPU segment forward compatibility supports.
    """
    spec = _spec(needs.want)
    if needs.driver and (not vtuple(needs.driver) or vtuple(needs.driver)[0] < 100):
        raise QueryError(f"{needs.driver!r} is not an NVIDIA driver version (e.g. 535 or 535.104.05)")
    if needs.platform not in PLATFORMS:
        raise QueryError(f"unknown platform {needs.platform!r} (one of {', '.join(PLATFORMS)})")
    if needs.platform == "macos":
        return {"possible": False, "why": "PyTorch publishes no CUDA builds for macOS (its macOS wheels use the CPU "
                "or Apple's MPS); an NVIDIA GPU needs Linux or Windows"}
    if needs.platform == "jetson":
        return {"possible": False, "channel": "NVIDIA (JetPack)", "source": JETSON_PYTORCH,
                "why": "PyPI has no CUDA wheels for JetPack 4-6 boards (PyPI's aarch64 wheels are SBSA builds, which "
                "do not run there): install the PyTorch build NVIDIA publishes for your JetPack release "
                f"({JETSON_PYTORCH})"}
    if needs.platform == "windows":
        return {"possible": False, "why": "the matrix describes Linux builds only; the native Windows CUDA wheels "
                "have other arch lists: choose one at https://pytorch.org/get-started/locally/ and confirm with "
                "`gpu-doctor check --deep`"}
    key = arch_key(needs.platform)
    windows = needs.windows_driver
    drv = _full_driver(m, needs.driver) if needs.driver else None
    blocked: dict[str, list[str]] = {"python": [], "gpu": [], "cudnn": [], "driver": [], "unverified": []}
    rows = sorted(m.rows("pytorch", "torch"), key=lambda r: (r["version"] == needs.prefer, vtuple(r["version"])),
                  reverse=True)
    fallback: dict[str, Any] | None = None
    for row in rows:
        if spec is not None and not _in_spec(row["version"], spec):
            continue
        if not python_ok(row, needs.python):
            blocked["python"].append(row["version"])
            continue
        for var in sorted(row.get("variant", []), key=lambda v: vtuple(v["cuda"]), reverse=True):
            name = f"{row['version']} cu{var['cuda'].replace('.', '')}"
            sass = var.get(key)
            ptx = var.get("ptx") if key == "arch_list" else None
            if sass:
                if any(not _arch_ok(cc, {"arch_list": sass, "ptx": ptx}) for cc in needs.ccs):
                    blocked["gpu"].append(name)
                    continue
            elif needs.ccs and any(cuda_targets(m, var["cuda"], cc) is False for cc in needs.ccs):
                blocked["gpu"].append(name)  # its CUDA cannot even build for the GPU
                continue
            cudnn = _cudnn_blocks(m, var, needs.ccs)
            if cudnn:
                blocked["cudnn"].append(f"{name} ({cudnn})")
                continue
            compat = None
            if drv or needs.driver_cuda:
                v = driver_runs_cuda(m, drv, var["cuda"], needs.segment, needs.compat_packages,
                                     driver_api=needs.driver_cuda, windows=windows)
                if v.rule == "forward-compat-needs-package" and needs.forward_compat and sass:
                    if fallback is None:
                        pkg = next(r for r in v.rows if r.get("package"))
                        fallback = _pick(m, row, var, "forward-compat",
                                         {"package": pkg["package"], "cuda": pkg["cuda"], "source": _src(pkg)},
                                         needs.platform)
                    continue
                if not v.ok:
                    need = (f"≥ {driver_floor(m, var['cuda'], windows) or '?'}" if drv
                            else f"a driver for CUDA ≥ {major_minor(var['cuda'])}")
                    blocked["driver"].append(f"{name} (needs {need})")
                    continue
                rule = v.rule
            else:
                rule = "no driver given"
            if needs.ccs and not sass:
                # Its arch list is not in the matrix: it may carry kernels for these GPUs, so the explanation
                # names it, but it is never chosen.
                blocked["unverified"].append(name)
                continue
            return _pick(m, row, var, rule, compat, needs.platform)
    if fallback is not None:
        return fallback
    return {"possible": False, "why": _why(m, blocked, needs, drv) if explain else ""}


def _pick(m: Matrix, row: Row, var: Row, rule: str, compat: dict[str, Any] | None,
          platform: str = "linux-x86_64") -> dict[str, Any]:
    index = _index_url(var["cuda"])
    aarch64 = platform == "linux-aarch64"
    source = (var.get("arch_list_aarch64_source") if aarch64 else None) or _src(var) or _src(row)
    on_pypi = (str(source or "").startswith("https://files.pythonhosted.org/") if aarch64
               else major_minor(var["cuda"]) == major_minor(row.get("default_cuda")))
    channel = ("PyPI (its default aarch64 wheel is this CUDA build)" if aarch64 and on_pypi else
               f"PyPI (its default wheel is this CUDA {var['cuda']} build; also on {index})" if on_pypi else
               f"PyTorch's own index {index} (not PyPI: PyPI's default wheel of {row['version']} is built for "
               f"CUDA {row.get('default_cuda') or '?'})")
    install = (f"pip install torch=={row['version']}" if aarch64 and on_pypi
               else f"pip install torch=={row['version']} --index-url {index}")
    return {
        "possible": True,
        "torch": row["version"], "cuda": var["cuda"], "rule": rule, "platform": platform,
        "install": install,
        "channel": channel,
        "torchvision": row.get("torchvision"), "torchaudio": row.get("torchaudio"), "cudnn": var.get("cudnn"),
        "min_driver": (m.min_driver(var["cuda"]) or {}).get("linux_min_driver"),
        "driver_floor": driver_floor(m, var["cuda"]),
        "forward_compat": compat,
        "base_image": base_image(m, var["cuda"]),
        "source": source,
    }


NVIDIA_CUDA_TAGS = "https://gitlab.com/nvidia/container-images/cuda/blob/master/doc/supported-tags.md"


def base_image(m: Matrix, cuda: str) -> dict[str, str] | None:
    """An nvidia/cuda base image of the same CUDA minor, for images that need the system runtime too.

    NVIDIA tags them ``<full CUDA version>-<flavour>-<os>``; the newest release of that minor in the
    toolkit table is used. Wheels bring their own runtime, so ``base`` is the lean choice for torch.
    """
    rows = m.toolkit_rows(major_minor(cuda) or cuda)
    if not rows:
        return None
    full = rows[-1]["version"]
    return {"tag": f"nvidia/cuda:{full}-base-ubuntu22.04", "runtime": f"nvidia/cuda:{full}-runtime-ubuntu22.04",
            "source": NVIDIA_CUDA_TAGS}


def _why(m: Matrix, blocked: dict[str, list[str]], needs: TorchNeeds, drv: str | None) -> str:
    if not any(blocked.values()):
        return f"no PyTorch release in the matrix satisfies {needs.want!r}"
    parts = []
    if blocked["driver"]:
        what = f"driver {needs.driver}" if needs.driver else f"the driver (CUDA {needs.driver_cuda})"
        parts.append(f"{what} is too old for {blocked['driver'][0]}: upgrade the driver")
        # Relaxing the version is offered only with a build that meets every other constraint too.
        older = _relaxed(m, needs) if needs.want else None
        if older and older.get("possible") and not older.get("forward_compat"):
            parts.append(f"or relax the version: torch {older['torch']} cu{older['cuda'].replace('.', '')} runs on it")
    if blocked["gpu"] and not blocked["driver"]:  # builds with kernels exist in range when the driver blocks them
        sms = ", ".join(f"sm_{cc.replace('.', '')}" for cc in needs.ccs)
        if len(needs.ccs) > 1:
            parts.append(f"no build in range has kernels for every GPU here ({sms}; e.g. {blocked['gpu'][0]}): no "
                         "single torch build runs on all of them")
        else:
            alt = _relaxed(m, needs) if needs.want else None
            newest = max((v for v in _in_range(m, needs)), key=vtuple, default=None)
            if alt and alt.get("possible") and newest and vtuple(alt["torch"]) > vtuple(newest):
                parts.append(f"no build in range has kernels for {sms} (e.g. {blocked['gpu'][0]}): take a newer "
                             f"torch ({alt['torch']} cu{alt['cuda'].replace('.', '')} has them)")
            elif alt and alt.get("possible"):
                parts.append(f"no build in range has kernels for {sms} (e.g. {blocked['gpu'][0]}): no newer release "
                             f"has them either; torch {alt['torch']} cu{alt['cuda'].replace('.', '')} is the newest "
                             "that does")
            else:
                parts.append(f"no {needs.platform} PyTorch build in the matrix has kernels for {sms} that also meets "
                             f"the other constraints (e.g. {blocked['gpu'][0]} lacks them)")
    if blocked["cudnn"]:
        parts.append(f"the cuDNN bundled with {blocked['cudnn'][0]}; cuDNN is what convolutions and RNNs run on")
    if blocked["python"]:
        parts.append(f"your Python {needs.python} has no wheels (Requires-Python, RELEASE.md) for "
                     f"{', '.join(blocked['python'][:3])}")
    if blocked["unverified"]:
        parts.append(f"builds whose {needs.platform} arch lists are not in the matrix may have kernels for this GPU "
                     f"(e.g. {', '.join(blocked['unverified'][:2])}; their CUDA can target it and the driver runs "
                     "it): install one and confirm with `gpu-doctor check --deep`")
    return "; ".join(parts)


def _in_range(m: Matrix, needs: TorchNeeds) -> list[str]:
    spec = _spec(needs.want)
    return [r["version"] for r in m.rows("pytorch", "torch") if spec is None or _in_spec(r["version"], spec)]


def _relaxed(m: Matrix, needs: TorchNeeds) -> dict[str, Any] | None:
    """The newest build meeting every constraint but the wished version (None when no driver/GPU narrows it)."""
    return pick_torch(m, replace(needs, want=None, prefer=None), explain=False)


def _full_driver(m: Matrix, driver: str) -> str:
    """A bare branch ('535') stands for that branch's newest release the matrix knows of (or its floor)."""
    if "." in driver:
        return driver
    return f"{driver}.999.99"  # any release of the branch: compare against the branch as a whole


def _spec(text: str | None) -> SpecifierSet | None:
    if not text:
        return None
    body = text.strip()
    for name in ("torch", "pytorch"):
        if body.lower().startswith(name):
            body = body[len(name):].strip()
    if not body:
        return None
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(body if body[0] in "<>=!~" else f"=={body}")
    except InvalidSpecifier:
        raise QueryError(f"--want {text!r}: not a version specifier (e.g. torch>=2.4)") from None


def _in_spec(version: str, spec: SpecifierSet) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version) in spec
    except InvalidVersion:
        return False
