"""The framework rows PyPI can tell, fetched into a user cache: `gpu-doctor matrix refresh`.

PyPI knows, for each torch / tensorflow / jax CUDA plugin release, the exact ``nvidia-*`` wheels it
pins in ``Requires-Dist``. This module lists releases through the simple index in its JSON form
(PEP 691), reads each chosen wheel's core metadata (PEP 658, ``<wheel url>.metadata``) and derives
rows in the formats of compat/pytorch.toml, tensorflow.toml and jax.toml, each with the URL it came
from as ``source``. Everything else in the matrix (GPU tables, driver minimums, arch lists) stays
hand-reviewed: PyPI cannot tell it.

Only this module talks to the network, and only when asked: ``check`` never imports it, and
``requests`` is imported inside the functions that need it. A refresh that cannot finish keeps what
was there (the previous cache, else the bundled matrix) and says so in one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.parser import HeaderParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from doctor import __version__
from doctor.matrix import major_minor
from doctor.matrix_cache import CACHE_FILE, GROUPS, SCHEMA, counts, default_cache_dir, load_cached, validate

SIMPLE_URL = "https://pypi.org/simple/{name}/"
PROJECT_URL = "https://pypi.org/pypi/{name}/json"
RELEASE_URL = "https://pypi.org/pypi/{name}/{version}/json"  # PyPI's per-release JSON API
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
NEWEST = 8  # releases per package: bounds the traffic of one refresh to a few dozen small files
WHEEL_TRIES = 3  # wheels of one release whose metadata we try before giving up on the release

Row = dict[str, Any]


@dataclass(frozen=True)
class Package:
    name: str  # the PyPI project
    file: str  # the compat/ file its rows belong to
    table: str  # the table inside that file
    floor: str | None  # oldest release the bundled matrix covers; older ones are not fetched


PACKAGES = (
    Package("torch", "pytorch", "torch", "1.12"),
    Package("tensorflow", "tensorflow", "tensorflow", "2.4"),
    Package("jax-cuda12-plugin", "jax", "jax", None),
    Package("jax-cuda13-plugin", "jax", "jax", None),
)
class FetchError(Exception):
    """A PyPI answer the refresh cannot use. ``kind``: offline | http | bad."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind
        self.detail = " ".join(detail.split())  # one line, whatever the server said


class NotFound(FetchError):
    def __init__(self, url: str):
        super().__init__("http", f"{url} answered 404")


@dataclass(frozen=True)
class RefreshResult:
    ok: bool
    message: str  # one line, for humans
    path: Path | None  # the cache file in effect (None: the bundled matrix)
    fetched_at: str | None  # when the rows in effect were fetched (None: bundled)
    counts: dict[str, int] = field(default_factory=dict)  # rows per table in effect


# --- where the cache lives --------------------------------------------------------------------


def _write_atomic(path: Path, data: bytes) -> None:
    """Readers see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class HttpCache:
    """Response bodies with their validators (ETag, Last-Modified), one pair of files per URL."""

    def __init__(self, root: Path):
        self.root = root / "http"

    def _paths(self, url: str) -> tuple[Path, Path]:
        key = hashlib.sha256(url.encode()).hexdigest()[:32]
        return self.root / f"{key}.json", self.root / f"{key}.body"

    def load(self, url: str) -> tuple[dict[str, Any], bytes] | None:
        meta_path, body_path = self._paths(url)
        try:
            meta = json.loads(meta_path.read_text())
            body = body_path.read_bytes()
        except (OSError, ValueError):
            return None
        return (meta, body) if isinstance(meta, dict) and meta.get("url") == url else None

    def forget(self, url: str) -> None:
        for path in self._paths(url):
            path.unlink(missing_ok=True)

    def store(self, url: str, meta: dict[str, Any], body: bytes) -> None:
        meta_path, body_path = self._paths(url)
        _write_atomic(body_path, body)  # body first: a meta file always has its body
        _write_atomic(meta_path, json.dumps({"url": url, **meta}).encode())


def _get(session: Any, url: str, timeout: float, cache: HttpCache | None, *,
         accept: str | None = None, immutable: bool = False) -> bytes:
    """GET one URL; every failure becomes a FetchError. A 304 reuses the cached body.

    ``immutable``: wheel metadata lives at a content-addressed URL, so a cached copy is never
    asked for again.
    """
    import requests

    cached = cache.load(url) if cache else None
    if cached and immutable:
        return cached[1]
    headers = {"User-Agent": f"gpu-doctor/{__version__} (matrix refresh)"}
    if accept:
        headers["Accept"] = accept
    if cached:
        if cached[0].get("etag"):
            headers["If-None-Match"] = cached[0]["etag"]
        if cached[0].get("last_modified"):
            headers["If-Modified-Since"] = cached[0]["last_modified"]
    host = urlsplit(url).hostname or url
    try:
        resp = session.get(url, headers=headers, timeout=timeout)
        body: bytes = resp.content
    except requests.Timeout:
        raise FetchError("offline", f"{host} did not answer within {timeout:g}s") from None
    except requests.ConnectionError:
        raise FetchError("offline", f"cannot reach {host}") from None
    except requests.RequestException as exc:
        raise FetchError("offline", f"{url}: {type(exc).__name__}") from None
    if resp.status_code == 304:
        if cached:
            return cached[1]
        raise FetchError("bad", f"{url} answered 304 to a request without validators")
    if resp.status_code == 404:
        raise NotFound(url)
    if resp.status_code != 200:
        raise FetchError("http", f"{url} answered HTTP {resp.status_code}")
    etag, modified = resp.headers.get("ETag"), resp.headers.get("Last-Modified")
    if cache and (immutable or etag or modified):
        cache.store(url, {"etag": etag, "last_modified": modified}, body)
    return body


def _get_json(session: Any, url: str, timeout: float, cache: HttpCache | None,
              accept: str | None = None) -> dict[str, Any]:
    body = _get(session, url, timeout, cache, accept=accept)
    try:
        return _json(body, url)
    except FetchError:
        if cache:  # else a 304 would hand back the same broken body on every refresh
            cache.forget(url)
        raise


def _json(body: bytes, url: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        raise FetchError("bad", f"{url} is not valid JSON") from None
    if not isinstance(data, dict):
        raise FetchError("bad", f"{url} is JSON but not an object")
    return data


# --- choosing releases and wheels (pure) ------------------------------------------------------


@dataclass(frozen=True)
class Wheel:
    filename: str
    url: str
    version: Version
    python: str  # "3.11": the interpreter its markers are evaluated for
    rank: tuple[int, ...]  # lower is preferred
    metadata: bool | None  # advertised by core-metadata / data-dist-info-metadata; None: not said


def _linux_wheels(files: list[dict[str, Any]]) -> list[Wheel]:
    """CPython manylinux x86_64 wheels that are not yanked, cp311 first, then newest Python first."""
    out = []
    for f in files:
        name = f.get("filename")
        if not isinstance(name, str) or not name.endswith(".whl") or f.get("yanked"):
            continue
        try:
            _, version, build, tags = parse_wheel_filename(name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        best = None
        for tag in tags:
            m = re.fullmatch(r"cp3(\d+)", tag.interpreter)
            if not m or "manylinux" not in tag.platform or not tag.platform.endswith("x86_64"):
                continue
            minor = int(m.group(1))
            # cp311 is what the matrix's users run most; a free-threaded build ("cp313t") comes last.
            # A re-uploaded build ("torch-2.10.0-3-cp311-…") replaces the earlier ones.
            rank = (0 if minor == 11 else 1, 1 if tag.abi.endswith("t") else 0, -minor, -(build[0] if build else 0))
            if best is None or rank < best[0]:
                best = (rank, f"3.{minor}")
        if best is None:
            continue
        advertised = f.get("core-metadata", f.get("data-dist-info-metadata"))
        out.append(Wheel(name, str(f.get("url", "")), version, best[1], best[0],
                         None if advertised is None else bool(advertised)))
    return sorted(out, key=lambda w: w.rank)


def select_releases(index: dict[str, Any], floor: str | None, newest: int) -> list[tuple[str, list[Wheel]]]:
    """The newest ``newest`` final releases at or above ``floor`` that have a Linux x86_64 wheel,
    newest first, each with its candidate wheels in order of preference."""
    wheels: dict[Version, list[Wheel]] = {}
    for w in _linux_wheels(index.get("files", [])):
        wheels.setdefault(w.version, []).append(w)
    low = Version(floor) if floor else None
    keep = [v for v in wheels if not (v.is_prerelease or v.is_devrelease) and (low is None or v >= low)]
    keep.sort(reverse=True)
    return [(str(v), wheels[v]) for v in keep[: max(newest, 0)]]


# --- reading core metadata (pure) -------------------------------------------------------------


@dataclass(frozen=True)
class Metadata:
    version: str
    requires_python: str | None
    requires_dist: list[str]
    extras: list[str]


def parse_metadata(text: str) -> Metadata:
    """The fields we need from a METADATA file (RFC 822 headers; the body is the description)."""
    msg = HeaderParser().parsestr(text, headersonly=True)
    return Metadata(version=(msg.get("Version") or "").strip(),
                    requires_python=(msg.get("Requires-Python") or "").strip() or None,
                    requires_dist=[str(s) for s in msg.get_all("Requires-Dist") or []],
                    extras=[str(s).strip() for s in msg.get_all("Provides-Extra") or []])


def _environment(python: str, extra: str = "") -> dict[str, str]:
    """Marker variables of a Linux x86_64 CPython — the platform of the plain PyPI wheels we read."""
    return {"os_name": "posix", "sys_platform": "linux", "platform_system": "Linux",
            "platform_machine": "x86_64", "platform_release": "", "platform_version": "",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "implementation_version": f"{python}.0", "python_version": python,
            "python_full_version": f"{python}.0", "extra": extra}


def _requirements(lines: list[str]) -> list[Requirement]:
    out = []
    for line in lines:
        try:
            out.append(Requirement(line))
        except (InvalidRequirement, InvalidMarker):
            continue  # one unreadable line does not hide the pins around it
    return out


def _applies(req: Requirement, python: str, extra: str = "") -> bool:
    if req.marker is None:
        return True
    try:
        return req.marker.evaluate(_environment(python, extra))
    except (UndefinedComparison, UndefinedEnvironmentName):
        return False  # a marker this platform cannot decide does not describe it


def _exact(req: Requirement) -> str | None:
    """'9.1.0.70' for nvidia-cudnn-cu12==9.1.0.70; None for a range."""
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return None


def _pin_text(req: Requirement) -> str:
    return f"{req.name}{req.specifier}"


def _nvidia(reqs: list[Requirement], lib: str) -> Requirement | None:
    """The requirement on NVIDIA's wheel for ``lib``: nvidia-cudnn-cu12, or CUDA 13's unsuffixed nvidia-cudnn."""
    pattern = re.compile(rf"nvidia-{re.escape(lib)}(-cu\d+)?")
    return next((r for r in reqs if pattern.fullmatch(canonicalize_name(r.name))), None)


def _cuda_runtime_pin(reqs: list[Requirement]) -> str | None:
    """The CUDA runtime a wheel pins: nvidia-cuda-runtime-cu12==12.4.127, or (torch 2.11 on) the
    metapackage cuda-toolkit[cudart,...]==13.0.2, whose version is the CUDA release."""
    runtime = _nvidia(reqs, "cuda-runtime")
    if runtime and _exact(runtime):
        return _exact(runtime)
    toolkit = next((r for r in reqs if canonicalize_name(r.name) == "cuda-toolkit" and "cudart" in r.extras), None)
    return _exact(toolkit) if toolkit else None


def _extra_named(meta: Metadata, wanted: str) -> str | None:
    """The extra as the metadata spells it ('and-cuda', 'with_cuda') if one normalises to ``wanted``."""
    return next((e for e in meta.extras if canonicalize_name(e) == canonicalize_name(wanted)), None)


def _python(meta: Metadata) -> str | None:
    if not meta.requires_python:
        return None
    try:
        SpecifierSet(meta.requires_python)
    except InvalidSpecifier:
        return None
    return meta.requires_python


def torch_row(meta: Metadata, source: str, python: str) -> Row:
    reqs = [r for r in _requirements(meta.requires_dist) if _applies(r, python)]
    row: Row = {"version": meta.version}
    if _python(meta):
        row["python"] = _python(meta)
    cuda = major_minor(_cuda_runtime_pin(reqs))
    if cuda:  # torch < 1.13 bundles its CUDA libraries: no pins, so no CUDA facts from PyPI
        row["default_cuda"] = cuda
        variant: Row = {"cuda": cuda}
        for key, lib in (("cudnn", "cudnn"), ("nccl", "nccl")):
            req = _nvidia(reqs, lib)
            if req and _exact(req):
                variant[key] = _exact(req)
        variant["source"] = source
        row["variant"] = [variant]
    row["source"] = source
    return row


def tensorflow_row(meta: Metadata, source: str, python: str) -> Row:
    row: Row = {"version": meta.version}
    if _python(meta):
        row["python"] = _python(meta)
    extra = _extra_named(meta, "and-cuda")
    if extra:  # tensorflow[and-cuda] exists from 2.14 on; before, the key is left out
        reqs = _requirements(meta.requires_dist)
        row["and_cuda"] = [_pin_text(r) for r in reqs
                           if _applies(r, python, extra) and not _applies(r, python)]
    row["source"] = source
    return row


def jax_plugin_row(meta: Metadata, source: str, python: str, plugin: str) -> Row:
    row: Row = {"version": meta.version, "plugin": plugin}
    m = re.fullmatch(r"jax-cuda(\d+)-plugin", plugin)
    if m:
        row["cuda_major"] = int(m.group(1))
    if _python(meta):
        row["python"] = _python(meta)
    extra = _extra_named(meta, "with-cuda") or ""
    reqs = _requirements(meta.requires_dist)
    row["pins"] = [_pin_text(r) for r in reqs
                   if canonicalize_name(r.name).startswith("nvidia-") and _applies(r, python, extra)]
    row["source"] = source
    return row


def derive_row(pkg: Package, meta: Metadata, source: str, python: str) -> Row:
    if pkg.table == "torch":
        return torch_row(meta, source, python)
    if pkg.table == "tensorflow":
        return tensorflow_row(meta, source, python)
    return jax_plugin_row(meta, source, python, pkg.name)


# --- fetching ---------------------------------------------------------------------------------


def _release_metadata(session: Any, timeout: float, cache: HttpCache | None, version: str,
                      wheels: list[Wheel]) -> tuple[Metadata, str, str] | None:
    """Core metadata of the first candidate wheel that has it: (metadata, its URL, the wheel's Python)."""
    tried = 0
    for w in wheels:
        # A False says the index has no metadata file for it. Absent (not said) we still try:
        # some indexes serve the .metadata files without advertising them.
        if w.metadata is False or not w.url.startswith("https://"):
            continue
        if tried == WHEEL_TRIES:
            break
        tried += 1
        url = w.url + ".metadata"
        try:
            meta = parse_metadata(_get(session, url, timeout, cache, immutable=True).decode("utf-8", "replace"))
        except NotFound:
            continue
        if _same_version(meta.version, version):
            return meta, url, w.python
    return None


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return False


def _project_metadata(session: Any, timeout: float, cache: HttpCache | None, name: str,
                      version: str) -> tuple[Metadata, str] | None:
    """The project JSON's ``info`` describes the newest release: a second source for that one."""
    url = PROJECT_URL.format(name=name)
    try:
        info = _get_json(session, url, timeout, cache).get("info")
    except NotFound:
        return None
    if not isinstance(info, dict) or str(info.get("version")) != version:
        return None
    dist = info.get("requires_dist") or []
    extras = info.get("provides_extra") or []
    if not isinstance(dist, list) or not isinstance(extras, list):
        raise FetchError("bad", f"{url} has a malformed requires_dist")
    if not extras:  # older project JSON lacks provides_extra: read the extras off the markers
        extras = sorted({m for d in dist for m in re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", str(d))})
    return Metadata(version, info.get("requires_python") or None, [str(d) for d in dist],
                    [str(e) for e in extras]), url


def _release_json_metadata(session: Any, timeout: float, cache: HttpCache | None, name: str,
                           version: str) -> tuple[tuple[Metadata, str] | None, str]:
    """The per-release JSON API's ``info.requires_dist``: (metadata and its URL, or None; what happened)."""
    url = RELEASE_URL.format(name=name, version=version)
    try:
        info = _get_json(session, url, timeout, cache).get("info")
    except NotFound:
        return None, f"its release JSON ({url}) answered 404"
    if not isinstance(info, dict) or not _same_version(str(info.get("version")), version):
        return None, f"its release JSON ({url}) describes another version"
    dist = info.get("requires_dist")
    if dist is None:
        return None, f"its release JSON ({url}) has no requires_dist"
    if not isinstance(dist, list):
        raise FetchError("bad", f"{url} has a malformed requires_dist")
    extras = info.get("provides_extra") or []
    if not isinstance(extras, list) or not extras:
        extras = sorted({m for d in dist for m in re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", str(d))})
    return (Metadata(version, info.get("requires_python") or None, [str(d) for d in dist],
                     [str(e) for e in extras]), url), "read"


def package_rows(session: Any, timeout: float, cache: HttpCache | None, pkg: Package,
                 newest: int = NEWEST) -> tuple[list[Row], list[str]]:
    """Rows for one PyPI project, newest first, and a line for each release that gave none."""
    index_url = SIMPLE_URL.format(name=pkg.name)
    index = _get_json(session, index_url, timeout, cache, accept=SIMPLE_JSON)
    files = index.get("files")
    if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
        raise FetchError("bad", f"{index_url} has no file list")
    rows, skipped = [], []
    for i, (version, wheels) in enumerate(select_releases(index, pkg.floor, newest)):
        found = _release_metadata(session, timeout, cache, version, wheels)
        if found is None and i == 0:
            project = _project_metadata(session, timeout, cache, pkg.name, version)
            found = (project[0], project[1], wheels[0].python) if project else None
        why = ""
        if found is None:
            # The index reached may not serve .metadata files (PEP 658): the release JSON API still has
            # requires_dist.
            release, why = _release_json_metadata(session, timeout, cache, pkg.name, version)
            found = (release[0], release[1], wheels[0].python) if release else None
        if found is None:
            skipped.append(f"{pkg.name} {version}: PyPI serves no core metadata for its Linux x86_64 wheels, and "
                           f"{why}")
            continue
        meta, source, python = found
        rows.append(derive_row(pkg, meta, source, python))
    return rows, skipped


def fetch_pypi_rows(session: Any, timeout: float, cache_dir: Path | str | None, *, newest: int = NEWEST,
                    packages: tuple[Package, ...] = PACKAGES) -> dict[str, Any]:
    """The PyPI-derived rows of every package, grouped as the compat/ files are.

    Returns {"pytorch": {"torch": [...]}, "tensorflow": {"tensorflow": [...]}, "jax": {"jax": [...]},
    "skipped": [one line per release without metadata]}. Raises FetchError when PyPI cannot be
    reached or answers something unusable; a release whose metadata is missing is only skipped.
    """
    cache = HttpCache(Path(cache_dir)) if cache_dir else None
    out: dict[str, Any] = {file: {table: []} for file, table in GROUPS}
    skipped: list[str] = []
    for pkg in packages:
        rows, missing = package_rows(session, timeout, cache, pkg, newest)
        out[pkg.file][pkg.table].extend(rows)
        skipped.extend(missing)
    jax = out["jax"]["jax"]
    jax.sort(key=lambda r: (Version(r["version"]), r.get("plugin", "")), reverse=True)
    out["skipped"] = skipped
    return out


# --- validating and loading the cache ---------------------------------------------------------


# --- the user command -------------------------------------------------------------------------

_KIND = {"offline": "offline", "http": "PyPI error", "bad": "bad download"}


def refresh(timeout: float = 10.0, cache_dir: Path | str | None = None, *, newest: int = NEWEST,
            session: Any = None) -> RefreshResult:
    """Fetch the PyPI rows into the cache; on any failure keep what was there and say so in one line."""
    import requests

    root = Path(cache_dir) if cache_dir else default_cache_dir()
    target = root / CACHE_FILE
    own = session is None
    session = session or requests.Session()
    try:
        data = fetch_pypi_rows(session, timeout, root, newest=newest)
        data = {"schema": SCHEMA, "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), **data}
        problems = validate(data)
        if problems:
            raise FetchError("bad", f"{len(problems)} invalid rows, first: {problems[0]}")
        if not any(counts(data).values()):
            raise FetchError("bad", "PyPI gave no usable framework rows")
        _write_atomic(target, (json.dumps(data, indent=1, sort_keys=False) + "\n").encode())
    except FetchError as exc:
        return _kept(root, _KIND.get(exc.kind, exc.kind), exc.detail)
    except OSError as exc:
        return _kept(root, "cache not writable", f"{exc.filename or root}: {exc.strerror or exc}")
    finally:
        if own:
            session.close()
    n = counts(data)
    skipped = len(data["skipped"])
    note = f"; {skipped} release{'s' if skipped != 1 else ''} without metadata skipped" if skipped else ""
    if skipped:  # say what could not be read, not only how many
        shown = "; ".join(str(line) for line in data["skipped"][:5])
        note += f" ({shown}{'; …' if skipped > 5 else ''})"
    return RefreshResult(True, f"refreshed from PyPI: {n['torch']} torch, {n['tensorflow']} tensorflow, "
                         f"{n['jax']} jax rows → {target}{note}", target, data["fetched_at"], n)


def _kept(root: Path, what: str, why: str) -> RefreshResult:
    previous = load_cached(root)
    if previous:
        return RefreshResult(False, f"{what}: kept the PyPI rows fetched {previous['fetched_at']} — {why}",
                             root / CACHE_FILE, previous["fetched_at"], counts(previous))
    from doctor.matrix import bundled

    reviewed = bundled().reviewed
    kept = "the bundled matrix" + (f" (reviewed {reviewed})" if reviewed else "")
    return RefreshResult(False, f"{what}: kept {kept} — {why}", None, None, {})
