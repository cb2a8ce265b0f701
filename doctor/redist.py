"""NVIDIA's machine-readable release manifests, read into what the matrix needs: `gpu-doctor matrix refresh`.

NVIDIA publishes one ``redistrib_<release>.json`` per release of each product
(https://developer.download.nvidia.com/compute/<product>/redist/):

- CUDA (``compute/cuda/redist``): release → every component's version (``cuda_cudart`` 13.4.92, ``cuda_nvcc`` …),
  so a component version seen on a machine maps to its toolkit release;
- drivers (``compute/nvidia-driver/redist``): release → its branch, and the CUDA of the forward-compatibility
  package it carries (``cuda_compat`` → ``cuda_variant`` ["13.5"]);
- cuDNN (``compute/cudnn/redist``): release → the CUDA majors it is built for (``cuda_variant`` ["12", "13"]) and,
  per platform (``linux-x86_64``, ``linux-sbsa`` …), which of them exist.

PyPI's ``nvidia-*`` wheels are a second signal: the newest ``nvidia-cuda-runtime`` / ``nvidia-cudnn-cuNN``.

The parsers and the comparison with the bundled matrix are pure; :func:`fetch` is the only code here that talks
to the network (through doctor.refresh's HTTP helper, with its timeouts and ETag cache). Nothing is written into
compat/: what differs becomes a *proposal* (a row in the compat/ format, with the manifest's URL as its source)
for a maintainer to review (scripts/update_matrix.py --nvidia), and the newest releases seen are kept in the
user cache so `gpu-doctor matrix` can say how far behind the bundled data is.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from doctor.matrix import Matrix, major_minor, vtuple
from doctor.safeio import load_json, read_file

BASE = "https://developer.download.nvidia.com/compute/{product}/redist/"
PRODUCTS = {"cuda": "cuda", "driver": "nvidia-driver", "cudnn": "cudnn"}
PYPI_SIGNALS = {"cuda": ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12"),
                "cudnn": ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12")}
CACHE_FILE = "nvidia-releases.json"
SCHEMA = 1
NEWEST = 4  # manifests per product fetched by one refresh (the newest ones the index lists)

Row = dict[str, Any]
_LABEL = re.compile(r"redistrib_(\d+(?:\.\d+){1,3})\.json")
_VERSION = re.compile(r"\d{1,4}(?:\.\d{1,9}){0,5}")
_URL = re.compile(r"https://[\x21-\x7e]{1,300}")
_WHEN = re.compile(r"\d{4}-\d{2}-\d{2}T[0-9:+.\-Z]{1,20}")


@dataclass(frozen=True)
class CudaRelease:
    label: str  # "13.4.2"
    date: str | None
    components: dict[str, str]  # "cuda_cudart" -> "13.4.92"
    source: str


@dataclass(frozen=True)
class DriverRelease:
    label: str  # "620.70.06"
    date: str | None
    branch: int | None  # 620
    compat_cuda: list[str]  # the CUDA of its cuda_compat package: ["13.5"]; [] when it carries none
    source: str


@dataclass(frozen=True)
class CudnnRelease:
    label: str  # "9.28.1"
    date: str | None
    version: str | None  # "9.28.1.4"
    cuda_majors: list[int]  # [13, 12], newest first
    platforms: dict[str, list[int]]  # "linux-sbsa" -> [13, 12]
    source: str


@dataclass(frozen=True)
class Proposal:
    kind: str  # new | changed
    file: str  # cuda | cudnn
    table: str  # toolkit | cudnn
    name: str  # "CUDA 13.5.0", "cuDNN 9.28.1"
    detail: str
    row: Row = field(default_factory=dict)


class ManifestError(ValueError):
    """A manifest that is not the documented shape."""


# --- parsing -----------------------------------------------------------------------------------


def _doc(data: Any, source: str, product: str) -> tuple[dict[str, Any], str]:
    if not isinstance(data, dict):
        raise ManifestError(f"{source}: not a JSON object")
    found = data.get("release_product")
    if found is not None and found != product:
        raise ManifestError(f"{source}: a {found} manifest, not {product}")
    label = data.get("release_label")
    if not isinstance(label, str) or not _VERSION.fullmatch(label):
        match = _LABEL.search(source)  # the oldest manifests have no release_label: the file name has it
        label = match.group(1) if match else None
    if not label or not _VERSION.fullmatch(label):
        raise ManifestError(f"{source}: no release label")
    return data, label


def _date(data: dict[str, Any]) -> str | None:
    value = data.get("release_date")
    return value if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) else None


def _components(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in data.items() if isinstance(v, dict) and isinstance(v.get("version"), str)
            and _VERSION.fullmatch(v["version"])}


def parse_cuda(data: Any, source: str) -> CudaRelease:
    data, label = _doc(data, source, "cuda")
    return CudaRelease(label, _date(data), {k: v["version"] for k, v in _components(data).items()}, source)


def parse_driver(data: Any, source: str) -> DriverRelease:
    data, label = _doc(data, source, "nvidia-driver")
    compat = _components(data).get("cuda_compat") or {}
    cudas = compat.get("cuda_variant") if isinstance(compat.get("cuda_variant"), list) else []
    if not cudas:  # no cuda_variant list: the per-platform keys still say "cuda13.5"
        cudas = sorted({k[4:] for plat in compat.values() if isinstance(plat, dict) for k in plat
                        if isinstance(k, str) and re.fullmatch(r"cuda\d+\.\d+", k)}, key=vtuple)
    majors = vtuple(label)
    return DriverRelease(label, _date(data), majors[0] if majors else None,
                         [str(c) for c in cudas if isinstance(c, str) and re.fullmatch(r"\d+\.\d+", c)], source)


def parse_cudnn(data: Any, source: str) -> CudnnRelease:
    data, label = _doc(data, source, "cudnn")
    cudnn = _components(data).get("cudnn")
    if cudnn is None:
        raise ManifestError(f"{source}: no cudnn component")
    platforms: dict[str, list[int]] = {}
    for plat, builds in cudnn.items():
        if not isinstance(builds, dict) or plat in ("name", "license", "license_path", "version", "cuda_variant"):
            continue
        majors = sorted({int(k[4:]) for k in builds if isinstance(k, str) and re.fullmatch(r"cuda\d{1,2}", k)},
                        reverse=True)
        if majors:
            platforms[plat] = majors
    variant = cudnn.get("cuda_variant")
    listed: list[Any] = variant if isinstance(variant, list) else []
    majors = sorted({int(v) for v in listed if isinstance(v, str) and v.isdigit()}
                    | {m for ms in platforms.values() for m in ms}, reverse=True)
    return CudnnRelease(label, _date(data), cudnn.get("version"), majors, platforms, source)


def parse_index(text: str) -> list[str]:
    """Release labels an index page of a redist directory lists, oldest first."""
    return sorted(set(_LABEL.findall(text)), key=vtuple)


def component_release(releases: list[CudaRelease], component: str, version: str) -> CudaRelease | None:
    """The (first) CUDA release whose manifest carries this component version: cuda_cudart 13.4.92 → 13.4.2."""
    hits = [r for r in releases if r.components.get(component) == version]
    return min(hits, key=lambda r: vtuple(r.label), default=None)


# --- what the bundled matrix knows, and what it lacks ------------------------------------------


def bundled_newest(m: Matrix) -> dict[str, str | None]:
    """The newest release the matrix has per component: CUDA toolkit, driver branch, cuDNN."""
    toolkits = [str(r["version"]) for r in m.rows("cuda", "toolkit") if r.get("version")]
    branches = [str(r["driver_branch"]) for r in m.rows("cuda", "toolkit") if r.get("driver_branch")]
    branches += [str(r["branch"]) for r in m.rows("cuda", "driver_branch") if r.get("branch")]
    cudnn = [str(r.get("last") or r.get("version")) for r in m.rows("cudnn", "cudnn") if r.get("version")]
    return {"cuda": max(toolkits, key=vtuple, default=None),
            "driver_branch": max(branches, key=vtuple, default=None),
            "cudnn": max(cudnn, key=vtuple, default=None)}


def _cudnn_majors(row: Row) -> set[int]:
    out = set()
    for spec in row.get("cuda", []):
        t = vtuple(str(spec).split("-")[-1])
        if t:
            out.add(t[0])
    return out


def propose(m: Matrix, cuda: list[CudaRelease], drivers: list[DriverRelease],
            cudnn: list[CudnnRelease]) -> list[Proposal]:
    """Rows the manifests say and the matrix lacks or contradicts, each with its manifest as the source."""
    out: list[Proposal] = []
    # CUDA major.minor -> (branch, the driver manifest that carries its cuda_compat)
    branch_of: dict[str, tuple[int | None, DriverRelease]] = {}
    for d in sorted(drivers, key=lambda d: vtuple(d.label)):
        for c in d.compat_cuda:
            branch_of.setdefault(c, (d.branch, d))  # the first driver release carrying that CUDA's compat
    known = {str(r.get("version")) for r in m.rows("cuda", "toolkit")}
    for rel in sorted(cuda, key=lambda r: vtuple(r.label), reverse=True):
        if rel.label in known:
            continue
        row: Row = {"version": rel.label}
        paired = branch_of.get(major_minor(rel.label) or "")
        if paired and paired[0]:
            row["driver_branch"] = str(paired[0])
        row["source"] = rel.source
        if paired:
            row["source2"] = paired[1].source
        row["note"] = (f"proposed from NVIDIA's redistrib manifest (cudart {rel.components.get('cuda_cudart', '?')}, "
                       f"released {rel.date or '?'}); label and Linux minimum driver to be read in the release notes")
        out.append(Proposal("new", "cuda", "toolkit", f"CUDA {rel.label}",
                            f"cudart {rel.components.get('cuda_cudart', '?')}"
                            + (f", driver branch R{paired[0]} (cuda_compat of {paired[1].label})" if paired else ""),
                            row))
    for mm, (b, d) in sorted(branch_of.items(), key=lambda kv: vtuple(kv[0]), reverse=True):
        rows = m.toolkit_rows(mm)
        if rows and b and all(str(r.get("driver_branch") or "") not in ("", str(b)) for r in rows):
            out.append(Proposal("changed", "cuda", "toolkit", f"CUDA {mm}",
                                f"driver branch: {rows[0].get('driver_branch')} → {b} ({d.label} carries "
                                f"cuda_compat {mm})", {"source": d.source}))
        elif not rows and not any(major_minor(c.label) == mm for c in cuda):
            out.append(Proposal("new", "cuda", "toolkit", f"CUDA {mm}",
                                f"driver {d.label} (R{b}) carries cuda_compat {mm}; the toolkit's own manifest was "
                                "not read", {"source": d.source}))
    for lib in sorted(cudnn, key=lambda r: vtuple(r.label), reverse=True):
        bundled = m.cudnn(lib.label)
        majors = set(lib.cuda_majors)
        plats = "; ".join(f"{p}: CUDA {', '.join(map(str, ms))}" for p, ms in sorted(lib.platforms.items()))
        proposed = {"version": lib.label, "cuda": [f"{x}.x" for x in sorted(majors, reverse=True)],
                    "note": f"per-major builds from NVIDIA's cuDNN redistrib manifest ({plats})",
                    "source": lib.source}
        if bundled is None:
            out.append(Proposal("new", "cudnn", "cudnn", f"cuDNN {lib.label}", plats, proposed))
        elif majors and _cudnn_majors(bundled) != majors:
            have = ", ".join(map(str, sorted(_cudnn_majors(bundled), reverse=True))) or "?"
            out.append(Proposal("changed", "cudnn", "cudnn", f"cuDNN {lib.label}",
                                f"CUDA majors: {have} → {', '.join(map(str, sorted(majors, reverse=True)))} ({plats})",
                                proposed))
    return out


def newest_seen(cuda: list[CudaRelease], drivers: list[DriverRelease], cudnn: list[CudnnRelease],
                pypi: dict[str, tuple[str, str]] | None = None) -> dict[str, dict[str, str]]:
    """The newest release per component the manifests (and PyPI's nvidia-* wheels) show, with where it was seen."""
    seen: dict[str, dict[str, str]] = {}

    def offer(key: str, version: str | None, source: str) -> None:
        if version and vtuple(version) > vtuple(seen.get(key, {}).get("version")):
            seen[key] = {"version": version, "source": source}

    for c in cuda:
        offer("cuda", c.label, c.source)
    for d in drivers:
        offer("driver_branch", str(d.branch) if d.branch else None, d.source)
        for mm in d.compat_cuda:  # the driver's compat package names a CUDA before its toolkit manifest is read
            offer("cuda", mm, d.source)
    for n in cudnn:
        offer("cudnn", n.label, n.source)
    for key, (package, version) in (pypi or {}).items():
        t = vtuple(version)
        if key == "cuda":
            offer("cuda", major_minor(version), f"https://pypi.org/project/{package}/{version}/")
        elif key == "cudnn" and len(t) >= 3:
            offer("cudnn", ".".join(map(str, t[:3])), f"https://pypi.org/project/{package}/{version}/")
    return seen


def behind(m: Matrix, seen: dict[str, dict[str, str]]) -> list[str]:
    """One line per component where a refresh has seen a release newer than the bundled matrix has."""
    have = bundled_newest(m)
    words = {"cuda": "CUDA", "driver_branch": "driver branch R", "cudnn": "cuDNN"}
    out = []
    for key, info in seen.items():
        mine = have.get(key)
        new = info.get("version")
        if not new or not vtuple(new):
            continue
        width = len(vtuple(new))
        if mine and vtuple(new) <= vtuple(mine)[:width]:
            continue
        sep = "" if key == "driver_branch" else " "
        out.append(f"{words.get(key, key)}{sep}{new} is out (seen at {info.get('source')}); the bundled data knows "
                   f"{words.get(key, key)}{sep}{mine or 'nothing'} at most")
    return out


# --- the user cache ------------------------------------------------------------------------------


def save(root: Path, seen: dict[str, dict[str, str]], proposals: list[Proposal], notes: list[str]) -> Path:
    from doctor.refresh import _write_atomic

    path = root / CACHE_FILE
    data = {"schema": SCHEMA, "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seen": seen, "proposals": [asdict(p) for p in proposals], "notes": notes}
    _write_atomic(path, (json.dumps(data, indent=1) + "\n").encode())
    return path


def load_seen(cache_dir: Path | str | None = None) -> dict[str, Any] | None:
    """What the last refresh saw ({"fetched_at", "seen": {component: {"version", "source"}}}), or None. Offline."""
    from doctor.refresh import default_cache_dir

    path = Path(cache_dir or default_cache_dir()) / CACHE_FILE
    try:  # read by every `gpu-doctor matrix`: a FIFO or a huge file here must not hang it
        raw, more = read_file(path, 4 * 1024 * 1024)
        data = None if more else load_json(raw)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("seen"), dict):
        return None
    # Shown on the terminal: only plain version numbers and printable https URLs are taken from the file.
    seen = {k: {"version": v["version"], "source": v.get("source") if _URL.fullmatch(str(v.get("source"))) else "?"}
            for k, v in data["seen"].items()
            if k in ("cuda", "driver_branch", "cudnn") and isinstance(v, dict)
            and isinstance(v.get("version"), str) and _VERSION.fullmatch(v["version"])}
    when = data.get("fetched_at")
    return {"fetched_at": when if isinstance(when, str) and _WHEN.fullmatch(when) else "?", "seen": seen}


# --- the network ---------------------------------------------------------------------------------


def fetch(session: Any, timeout: float, cache_dir: Path | str | None, *, newest: int = NEWEST,
          pypi: dict[str, list[str]] | None = None) -> tuple[list[CudaRelease], list[DriverRelease],
                                                             list[CudnnRelease], dict[str, tuple[str, str]],
                                                             list[str]]:
    """Read the newest manifests of each product, and the newest nvidia-* wheels on PyPI.

    Returns (cuda, drivers, cudnn, pypi {component: (package, version)}, notes). A product whose index cannot be
    read is only a note: the other signals still count.
    """
    from doctor.refresh import SIMPLE_JSON, SIMPLE_URL, FetchError, HttpCache, _get, _get_json

    cache = HttpCache(Path(cache_dir)) if cache_dir else None
    parsed: dict[str, list[Any]] = {"cuda": [], "driver": [], "cudnn": []}
    parse = {"cuda": parse_cuda, "driver": parse_driver, "cudnn": parse_cudnn}
    notes: list[str] = []
    for key, product in PRODUCTS.items():
        base = BASE.format(product=product)
        try:
            labels = parse_index(_get(session, base, timeout, cache).decode("utf-8", "replace"))
            for label in labels[-newest:]:
                url = f"{base}redistrib_{label}.json"
                try:
                    parsed[key].append(parse[key](_get_json(session, url, timeout, cache), url))
                except ManifestError as exc:
                    notes.append(str(exc))
        except FetchError as exc:
            notes.append(f"{product} manifests: {exc.kind}: {exc.detail}")
    wheels: dict[str, tuple[str, str]] = {}
    for key, packages in (pypi or {k: list(v) for k, v in PYPI_SIGNALS.items()}).items():
        for package in packages:
            try:
                index = _get_json(session, SIMPLE_URL.format(name=package), timeout, cache, accept=SIMPLE_JSON)
            except FetchError as exc:
                notes.append(f"PyPI {package}: {exc.kind}: {exc.detail}")
                continue
            versions = [str(v) for v in index.get("versions", []) if re.fullmatch(r"\d+(\.\d+)+", str(v))]
            if versions:
                top = max(versions, key=vtuple)
                if key not in wheels or vtuple(top) > vtuple(wheels[key][1]):
                    wheels[key] = (package, top)
    return parsed["cuda"], parsed["driver"], parsed["cudnn"], wheels, notes


def refresh(session: Any, timeout: float, root: Path, m: Matrix) -> tuple[bool, str]:
    """Fetch, compare with the matrix and keep what was seen in the cache; one line for humans."""
    cuda, drivers, cudnn, wheels, notes = fetch(session, timeout, root)
    if not (cuda or drivers or cudnn or wheels):
        first = notes[0] if notes else "nothing answered"
        return False, f"NVIDIA releases: nothing read ({first}); `gpu-doctor matrix` keeps its last answer"
    seen = newest_seen(cuda, drivers, cudnn, wheels)
    proposals = propose(m, cuda, drivers, cudnn)
    path = save(root, seen, proposals, notes)
    late = behind(m, seen)
    what = "; ".join(late) if late else "the bundled data has the newest CUDA, driver branch and cuDNN seen"
    unread = f" ({len(notes)} source{'s' if len(notes) != 1 else ''} unread: {notes[0]})" if notes else ""
    return True, f"NVIDIA releases: {what} → {path}{unread}"
