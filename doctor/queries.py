"""Questions answered from the matrix alone: what a driver runs, what a GPU needs, what a CUDA version
brings, and the planner that picks the newest working combination. Pure: data in, dicts out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # packaging costs ~50 ms to import: only the queries that compare specifiers import it
    from packaging.specifiers import SpecifierSet

from doctor.matrix import Matrix, Row, cuda_in, driver_meets, driver_runs_cuda, is_branch, major_minor, vtuple


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


def query_gpu(m: Matrix, name: str) -> dict[str, Any]:
    row = m.gpu(name)
    if row is None:
        raise QueryError(f"unknown GPU {name!r} (not in compat/gpus.toml; try the name nvidia-smi prints)")
    cc = row["compute_capability"]
    arch = m.architecture(row.get("architecture")) or m.architecture(cc)
    toolkits = [r["cuda"] for r in m.rows("cuda", "sm_support") if cc in r.get("sm", [])]
    torch = []
    for t in m.rows("pytorch", "torch"):
        cudas = [v["cuda"] for v in t.get("variant", []) if v.get("arch_list") and _arch_ok(cc, v)]
        if cudas:
            torch.append({"version": t["version"], "cuda": sorted(cudas, key=vtuple)})
    return {
        "gpu": row["name"], "compute_capability": cc, "architecture": row.get("architecture"),
        "segment": row.get("segment"), "source": _src(row),
        "driver": arch and {"first": m.first_driver(arch, cc), "last_branch": arch.get("last_driver_branch"),
                            "open_kernel_module": arch.get("open_kernel_module"), "source": _src(arch)},
        "toolkits_that_compile_for_it": sorted(toolkits, key=vtuple),
        "torch_builds": torch,
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
        return r["version"] + (f"–{r['last']}" if r.get("last") else "")
    cudnn = [_label(r) for r in m.rows("cudnn", "cudnn")
             if any(cuda_in(cuda, s) for s in r.get("cuda", []) if not s.strip().endswith(".x"))]
    cudnn_major = [_label(r) for r in m.rows("cudnn", "cudnn") if _label(r) not in cudnn
                   and any(cuda_in(cuda, s) for s in r.get("cuda", []) if s.strip().endswith(".x"))]
    torch = [{"version": t["version"], "index_url": _index_url(v["cuda"])} for t in m.rows("pytorch", "torch")
             for v in t.get("variant", []) if major_minor(v["cuda"]) == major_minor(cuda)]
    tf = [t["version"] for t in m.rows("tensorflow", "tensorflow") if major_minor(t.get("cuda")) == major_minor(cuda)]
    return {
        "cuda": cuda,
        "releases": [{"version": r["version"], "label": r.get("label"), "linux_min_driver": r.get("linux_min_driver"),
                      "windows_min_driver": r.get("windows_min_driver"), "driver_branch": r.get("driver_branch"),
                      "source": _src(r)} for r in rows],
        "min_driver": need and need.get("linux_min_driver"),
        "minor_version_compat_floor": mvc and mvc.get("linux_min_driver"),
        "sm_targets": (m.sm_support(cuda) or {}).get("sm"),
        "cudnn": cudnn, "cudnn_same_major_unverified_minor": cudnn_major, "torch": torch, "tensorflow": tf,
    }


PLATFORMS = ("linux-x86_64", "linux-aarch64", "jetson", "windows", "macos")


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
    driver_cuda: str | None = None  # the driver's CUDA version when its version is unknown (a report: "found 11040")


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


def plan(m: Matrix, gpu: str | list[str] | None, driver: str | None, want: str | None, python: str | None,
         explain: bool = True, platform: str = "linux-x86_64") -> dict[str, Any]:
    """The newest torch build that fits every constraint — every GPU named — or which constraint makes it
    impossible."""
    names = [gpu] if isinstance(gpu, str) else list(gpu or [])
    ccs: list[str] = []
    segments: list[str | None] = []
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
    # Forward compatibility needs every GPU on a segment it supports: the least eligible one decides.
    segment = None if (not segments or None in segments) else (
        "consumer" if "consumer" in segments else "workstation" if "workstation" in segments else segments[0])
    return pick_torch(m, TorchNeeds(ccs=tuple(dict.fromkeys(ccs)), driver=driver, segment=segment, python=python,
                                    platform=platform, want=want), explain=explain)


def pick_torch(m: Matrix, needs: TorchNeeds, explain: bool = True) -> dict[str, Any]:
    """The newest torch build meeting every constraint of ``needs`` (the preferred release first), or why none.

    A build the driver runs natively or by minor-version compatibility wins over one that needs a cuda-compat
    package; the package is offered only on a GPU segment forward compatibility supports.
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
        return {"possible": False, "why": "PyTorch's own wheels do not run on Jetson: install the build NVIDIA "
                "publishes for your JetPack release (PyTorch for Jetson)"}
    if needs.platform in ("linux-aarch64", "windows"):
        what = "aarch64 (SBSA)" if needs.platform == "linux-aarch64" else "native Windows"
        return {"possible": False, "why": f"the matrix describes Linux x86_64 builds only; the {what} CUDA wheels "
                "have other arch lists: choose one at https://pytorch.org/get-started/locally/ and confirm with "
                "`gpu-doctor check --deep`"}
    windows = needs.windows_driver
    drv = _full_driver(m, needs.driver) if needs.driver else None
    blocked: dict[str, list[str]] = {"python": [], "gpu": [], "driver": [], "unverified": []}
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
            # A build whose arch list the matrix lacks cannot be confirmed for these GPUs: it is not chosen,
            # but the explanation names it.
            if needs.ccs and not var.get("arch_list"):
                blocked["unverified"].append(name)
                continue
            if any(not _arch_ok(cc, var) for cc in needs.ccs):
                blocked["gpu"].append(name)
                continue
            compat = None
            if drv or needs.driver_cuda:
                v = driver_runs_cuda(m, drv, var["cuda"], needs.segment, needs.compat_packages,
                                     driver_api=None if drv else needs.driver_cuda, windows=windows)
                if v.rule == "forward-compat-needs-package" and needs.forward_compat:
                    if fallback is None:
                        pkg = next(r for r in v.rows if r.get("package"))
                        fallback = _pick(m, row, var, "forward-compat",
                                         {"package": pkg["package"], "cuda": pkg["cuda"], "source": _src(pkg)})
                    continue
                if not v.ok:
                    floor = driver_floor(m, var["cuda"], windows)
                    blocked["driver"].append(f"{name} (needs ≥ {floor})" if floor else f"{name} (needs a newer "
                                             "driver)")
                    continue
                rule = v.rule
            else:
                rule = "no driver given"
            return _pick(m, row, var, rule, compat)
    if fallback is not None:
        return fallback
    return {"possible": False, "why": _why(m, blocked, needs, drv) if explain else ""}


def _pick(m: Matrix, row: Row, var: Row, rule: str, compat: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "possible": True,
        "torch": row["version"], "cuda": var["cuda"], "rule": rule,
        "install": f"pip install torch=={row['version']} --index-url {_index_url(var['cuda'])}",
        "torchvision": row.get("torchvision"), "torchaudio": row.get("torchaudio"), "cudnn": var.get("cudnn"),
        "min_driver": (m.min_driver(var["cuda"]) or {}).get("linux_min_driver"),
        "driver_floor": driver_floor(m, var["cuda"]),
        "forward_compat": compat,
        "base_image": base_image(m, var["cuda"]),
        "source": _src(var) or _src(row),
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
        parts.append(f"driver {needs.driver} is too old for {blocked['driver'][0]}: upgrade the driver")
        # Relaxing the version is offered only with a build that meets every other constraint too.
        older = pick_torch(m, TorchNeeds(ccs=needs.ccs, driver=needs.driver, segment=needs.segment,
                                         python=needs.python, platform=needs.platform,
                                         compat_packages=needs.compat_packages,
                                         windows_driver=needs.windows_driver), explain=False) if drv else None
        if older and older.get("possible") and not older.get("forward_compat"):
            parts.append(f"or relax the version: torch {older['torch']} cu{older['cuda'].replace('.', '')} runs on it")
    if blocked["gpu"] and not blocked["driver"]:  # builds with kernels exist in range when the driver blocks them
        sms = ", ".join(f"sm_{cc.replace('.', '')}" for cc in needs.ccs)
        parts.append(f"no build in range has kernels for {sms} (e.g. {blocked['gpu'][0]}): take a newer torch"
                     if len(needs.ccs) < 2 else f"no build in range has kernels for every GPU here ({sms}; e.g. "
                     f"{blocked['gpu'][0]}): no single torch build runs on all of them")
    if blocked["python"]:
        parts.append(f"your Python {needs.python} has no wheels (Requires-Python, RELEASE.md) for "
                     f"{', '.join(blocked['python'][:3])}")
    if blocked["unverified"]:
        parts.append(f"builds whose arch lists are not in the matrix may have kernels for this GPU (e.g. "
                     f"{', '.join(blocked['unverified'][:2])}): install one and confirm with `gpu-doctor check --deep`")
    return "; ".join(parts)


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
