"""The compatibility matrix: reviewed data from compat/ and the rules that read it. Pure and offline.

Rows stay the plain dicts of the TOML files (each with its ``source``), so evidence can quote the
row and its URL exactly. The rules here answer one question each and say which rule applied.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import re
import sys
from dataclasses import field
from functools import cache, cached_property
from typing import Any

from doctor.matrix_cache import CACHE_FILE, default_cache_dir, load_cached
from doctor.model.records import dataclass
from doctor.model.versions import branch, major_minor, vtuple
from doctor.safeio import package_data


def _toml() -> Any:
    """tomllib, imported only when a TOML file must be parsed (the compiled JSON copy is what `check` reads)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib


Row = dict[str, Any]
STALE_DAYS = 90  # `gpu-doctor matrix` warns when the data's oldest review is older than this
FILES = ("cuda", "gpus", "cudnn", "pytorch", "tensorflow", "jax", "cupy", "xid", "errors", "images")


def is_branch(driver: str | None) -> bool:
    """'535' (or 'R535', 'r535'): a driver branch, not one release."""
    return bool(re.fullmatch(r"[Rr]?\d{3}", (driver or "").strip()))


def driver_meets(driver: str | None, floor: str | None) -> bool:
    """Is a driver at or above a floor? A bare branch ('535') stands for its newest release: it meets every
    floor of its own branch and below (535 meets 535.104.05, 12.2's minimum)."""
    if not driver or not floor:
        return False
    if is_branch(driver):
        b, fb = int(driver.strip().lstrip("Rr")), branch(floor)
        return fb is not None and b >= fb
    return vtuple(driver) >= vtuple(floor)


def row_runs_natively(row: dict[str, Any], driver: str, windows: bool = False) -> bool:
    """Does this driver run this toolkit row natively: its minimum driver, or (13.3+, where NVIDIA names only
    the branch) its driver branch?"""
    floor = row.get("windows_min_driver" if windows else "linux_min_driver")
    if floor:
        return driver_meets(driver, floor)
    b = row.get("driver_branch")
    if b and not windows:
        own = int(driver.strip().lstrip("Rr")) if is_branch(driver) else branch(driver)
        return own is not None and own >= int(b)
    return False


@dataclass(frozen=True)
class Matrix:
    """The compatibility matrix: the compat/*.toml tables, where they came from and when reviewed."""
    data: dict[str, dict[str, Any]]
    origin: str = "bundled"
    reviewed: str | None = None
    problems: list[str] = field(default_factory=list)

    def rows(self, file: str, table: str) -> list[Row]:
        value = self.data.get(file, {}).get(table, [])
        return value if isinstance(value, list) else []

    def table(self, file: str, table: str) -> Row:
        value = self.data.get(file, {}).get(table, {})
        return value if isinstance(value, dict) else {}

    def describe(self) -> str:
        return f"{self.origin} matrix" + (f", reviewed {self.reviewed}" if self.reviewed else "")

    @property
    def oldest_review(self) -> str | None:
        """The oldest `reviewed` date among the files: the data is no fresher than that."""
        dates = [str(d.get("reviewed")) for d in self.data.values() if isinstance(d, dict) and d.get("reviewed")]
        return min(dates, default=None)

    def staleness(self, today: _dt.date | None = None, max_days: int = STALE_DAYS) -> str | None:
        """A warning when the oldest review is more than ``max_days`` old (None when fresh or undated)."""
        oldest = self.oldest_review
        if not oldest:
            return None
        try:
            age = ((today or _dt.date.today()) - _dt.date.fromisoformat(oldest[:10])).days
        except ValueError:
            return None
        if age <= max_days:
            return None
        return (f"the compatibility data was last reviewed on {oldest}, {age} days ago (more than {max_days}): "
                "releases since then are missing; upgrade gpu-doctor (`gpu-doctor matrix refresh` updates the "
                "framework rows only)")

    # --- CUDA toolkit and driver ------------------------------------------------------------

    def toolkit_rows(self, cuda: str) -> list[Row]:
        """Rows of the toolkit table for a CUDA version ('12.4' → every 12.4.x; '12.4.1' → that one).

        A version that is no release is a component's number: nvcc's `V12.4.131`, the runtime wheel's 12.4.127,
        version.txt's 11.0.207, a runfile's date patch (11.8.20220929). CUDA's components share the release's
        major.minor (nvcc, cudart, the nvidia-cuda-runtime/-nvcc wheels), so they resolve to every release of that
        minor — never to no row, which would read as "a CUDA newer than any driver".
        """
        want = vtuple(cuda)
        rows = [r for r in self.rows("cuda", "toolkit") if vtuple(r.get("version"))[: len(want)] == want]
        if not rows and len(want) > 2:
            rows = [r for r in self.rows("cuda", "toolkit") if vtuple(r.get("version"))[:2] == want[:2]]
        return sorted(rows, key=lambda r: vtuple(r.get("version")))

    def cuda_release(self, version: str | None) -> str | None:
        """The CUDA release a version names: the release itself ('12.4.1'), or, for a component's number
        ('12.4.131', '11.8.20220929'), its major.minor. None when the matrix knows no such CUDA."""
        rows = self.toolkit_rows(version or "") if vtuple(version) else []
        if not rows:
            return None
        exact = [r for r in rows if vtuple(r.get("version")) == vtuple(version)]
        return str(exact[0]["version"]) if exact else major_minor(version)

    def min_driver(self, cuda: str, windows: bool = False) -> Row | None:
        """The row that sets the native minimum driver for this CUDA (the lowest of its releases).

        ``windows``: compare against NVIDIA's Windows column — what WSL2 reports is the Windows driver.
        """
        key = "windows_min_driver" if windows else "linux_min_driver"
        rows = [r for r in self.toolkit_rows(cuda) if r.get(key)]
        if not rows and len(vtuple(cuda)) > 2:  # a patch release the table lacks: its major.minor's floor
            rows = [r for r in self.toolkit_rows(major_minor(cuda) or "") if r.get(key)]
        return min(rows, key=lambda r: vtuple(r[key]), default=None)

    def mvc(self, cuda_major: int) -> Row | None:
        return next((r for r in self.rows("cuda", "minor_version_compat") if r.get("cuda_major") == cuda_major), None)

    def forward_compat_rows(self, cuda: str) -> list[Row]:
        """cuda-compat packages able to bring this CUDA (the package for it or a newer one, same major)."""
        want = vtuple(major_minor(cuda))
        return [r for r in self.rows("cuda", "forward_compat")
                if vtuple(r.get("cuda"))[:1] == want[:1] and vtuple(r.get("cuda")) >= want]

    def native_toolkits(self, driver: str, windows: bool = False) -> list[Row]:
        """Toolkit releases this driver (or bare branch) runs natively, by minimum driver or driver branch."""
        return [r for r in self.rows("cuda", "toolkit") if row_runs_natively(r, driver, windows)]

    def newest_cuda_for_driver(self, driver: str) -> Row | None:
        return max(self.native_toolkits(driver), key=lambda r: vtuple(r["version"]), default=None)

    def sm_support(self, cuda: str) -> Row | None:
        mm = major_minor(cuda)
        return next((r for r in self.rows("cuda", "sm_support") if major_minor(r.get("cuda")) == mm), None)

    def host_compiler(self, cuda: str) -> Row | None:
        mm = major_minor(cuda)
        return next((r for r in self.rows("cuda", "host_compiler") if major_minor(r.get("cuda")) == mm), None)

    # --- GPUs ---------------------------------------------------------------------------------

    def gpu(self, name: str | None) -> Row | None:
        """The GPU row for a name as NVML/nvidia-smi print it or as users type it, never a different GPU.

        Exact names and aliases first. Otherwise a row matches when the two names differ only by words that do not
        make another GPU: brand words ("GeForce", "Tesla"), memory size and form factor ("80GB", "SXM4", "PCIe"),
        and, for a printed name longer than the row's, "Laptop GPU" / "Max-Q". "RTX 5070 Ti" is not the RTX 5070,
        "Jetson Nano" is not the Jetson Orin Nano, "RTX 5080 SUPER" is not the RTX 5080.
        """
        if not name:
            return None
        want = _norm_gpu(name)
        rows = self.gpu_rows
        for r in rows:
            if want in {_norm_gpu(n) for n in [r.get("name", ""), *r.get("aliases", [])]}:
                return r
        typed = set(want.split())
        if not typed:
            return None
        best: tuple[int, int, Row] | None = None
        for order, r in enumerate(rows):
            for n in [r.get("name", ""), *r.get("aliases", [])]:
                words = set(_norm_gpu(n).split())
                if not words:
                    continue
                if typed <= words and all(_filler(w) for w in words - typed):
                    extra = len(words - typed)   # the user typed fewer words: fewest extras wins
                elif words <= typed and all(_filler(w) or w in _PRINTED_EXTRA for w in typed - words):
                    extra = len(typed - words)   # the printed name is longer: the row naming most of it wins
                else:
                    continue
                if best is None or (extra, order) < best[:2]:
                    best = (extra, order, r)
        return best[2] if best else None

    @cached_property
    def gpu_rows(self) -> list[Row]:
        """The [[gpu]] rows, then one row per name of the [[gpu_names]] tables (NVIDIA's lists: name, compute
        capability, architecture and segment only, with the table's source)."""
        rows = list(self.rows("gpus", "gpu"))
        for table in self.rows("gpus", "gpu_names"):
            listed = table.get("aliases")
            aliases: Row = listed if isinstance(listed, dict) else {}
            for name in table.get("names", []):
                if not isinstance(name, str):
                    continue
                rows.append({"name": name, "aliases": list(aliases.get(name, [])),
                             **{k: table[k] for k in ("compute_capability", "architecture", "segment", "source")
                                if k in table}})
        return rows

    def architecture(self, name_or_cc: str | None) -> Row | None:
        if not name_or_cc:
            return None
        for r in self.rows("gpus", "architecture"):
            if r.get("name") == name_or_cc or name_or_cc in r.get("compute_capabilities", []):
                return r
        return None

    def first_driver(self, arch: Row | None, cc: str | None) -> str | None:
        """The oldest Linux driver that knows a GPU: per compute capability where NVIDIA's data differ from the
        architecture's first GPU (sm_86 RTX 30 / A40 / A10 need 455.23, not the A100's 450.36.06)."""
        if not arch:
            return None
        by_cc = arch.get("first_driver_by_cc") or {}
        # Where NVIDIA names only a branch (Rubin: R615), the bare branch stands for its first release.
        base = ((by_cc.get(cc) if cc and isinstance(by_cc, dict) else None) or arch.get("first_driver")
                or (str(arch["first_driver_branch"]) if arch.get("first_driver_branch") else None))
        # A compute capability first targeted by a later toolkit than the architecture's first GPU (sm_103, sm_121
        # in CUDA 12.9) needs at least that toolkit's minimum driver: the same rule for every such CC.
        first_cuda = (arch.get("first_cuda_by_cc") or {}).get(cc) if cc else None
        need = (self.min_driver(str(first_cuda)) or {}).get("linux_min_driver") if first_cuda else None
        if need and (not base or vtuple(need) > vtuple(base)):
            return str(need)
        return base

    # --- the driver lifecycle -----------------------------------------------------------------

    def branch_ended(self, branch_number: int | None, today: _dt.date) -> bool | None:
        """Is a driver branch past NVIDIA's end of life on ``today``? True for a branch listed as ended (with or
        without a date) and for one older than the table's newest branch that the table does not list (NVIDIA:
        "all other previous driver branches not listed ... are end of life"); None when nothing says."""
        if branch_number is None:
            return None
        rows = self.rows("cuda", "driver_branch")
        row = self.branch_lifecycle(branch_number)
        if row is None:
            listed = [int(str(r["branch"])) for r in rows if str(r.get("branch", "")).isdigit()]
            return True if listed and branch_number < max(listed) else None
        if row.get("end_of_life") is True:
            return True
        t = vtuple(str(row.get("eol") or "").replace("-", "."))
        if len(t) < 2:
            return None
        return (today.year, today.month) > (t[0], t[1])  # NVIDIA gives a month: supported through it

    def supported_branches(self, today: _dt.date, at_least: int = 0, at_most: int | None = None) -> list[Row]:
        """Branches NVIDIA still supports on ``today`` in [at_least, at_most]: long-term first, then production,
        then new-feature branches, each lowest first (the smallest change that meets the need)."""
        rank = {"LTSB": 0, "PB": 1, "NFB": 2}
        rows = [r for r in self.rows("cuda", "driver_branch") if str(r.get("branch", "")).isdigit()
                and self.branch_ended(int(str(r["branch"])), today) is False
                and int(str(r["branch"])) >= at_least and (at_most is None or int(str(r["branch"])) <= at_most)]
        return sorted(rows, key=lambda r: (rank.get(str(r.get("designation")), 3), int(str(r["branch"]))))

    def windows_branch(self, windows_driver: str | None) -> int | None:
        """The Linux branch of a Windows driver version (what WSL2 reports), from NVIDIA's Linux/Windows pairs.

        Windows numbers are not branch numbers (R570 ships as 572.xx/573.xx). A version maps to a branch only when
        it lies between two known Windows versions of that same branch; otherwise it is unknown (None).
        """
        v = vtuple(windows_driver)
        if not v:
            return None
        pairs = [(r["linux"], r["windows"]) for r in self.rows("cuda", "windows_driver")
                 if r.get("linux") and r.get("windows")]
        pairs += [(r["linux_min_driver"], r["windows_min_driver"]) for r in self.rows("cuda", "toolkit")
                  if r.get("linux_min_driver") and r.get("windows_min_driver")]
        by_branch: dict[int, list[tuple[int, ...]]] = {}
        for lin, win in pairs:
            b = branch(lin)
            if b is not None:
                by_branch.setdefault(b, []).append(vtuple(win))
        for b, wins in by_branch.items():
            if min(wins) <= v <= max(wins):
                return b
        return None

    def branch_lifecycle(self, branch_number: int | None) -> Row | None:
        """NVIDIA's data-center lifecycle row of a driver branch (designation, end of life), if listed."""
        if branch_number is None:
            return None
        return next((r for r in self.rows("cuda", "driver_branch") if str(r.get("branch")) == str(branch_number)),
                    None)

    def gpu_for_facts(self, name: str | None, cc: str | None) -> tuple[Row | None, Row | None]:
        row = self.gpu(name)
        cc = cc or (row or {}).get("compute_capability")
        arch = self.architecture((row or {}).get("architecture")) or self.architecture(cc)
        return row, arch

    # --- cuDNN and frameworks -----------------------------------------------------------------

    def cudnn(self, version: str) -> Row | None:
        v = vtuple(version)[:3]
        for r in self.rows("cudnn", "cudnn"):
            lo = vtuple(r.get("version"))[:3]
            hi = vtuple(r.get("last") or r.get("version"))[:3]
            if lo <= v <= hi or (len(v) < 3 and lo[: len(v)] == v):
                return r
        return None

    def cudnn_min_cc(self, version: str | None) -> tuple[str | None, Row | None]:
        """The lowest compute capability a cuDNN release runs on, with the row that states it: its own row's, else
        the highest one stated for an older release (NVIDIA only ever drops architectures: 9.17 needs 7.5, so
        9.20 does too). (None, None) when no release up to it states one."""
        v = vtuple(version)[:3]
        if not v:
            return None, None
        own = self.cudnn(version or "")
        if own and own.get("min_compute_capability"):
            return str(own["min_compute_capability"]), own
        older = [r for r in self.rows("cudnn", "cudnn") if r.get("min_compute_capability")
                 and vtuple(r.get("version"))[:3] <= v and vtuple(r.get("version"))[:1] == v[:1]]
        best = max(older, key=lambda r: vtuple(str(r["min_compute_capability"])), default=None)
        return (str(best["min_compute_capability"]), best) if best else (None, None)

    def torch(self, version: str | None) -> Row | None:
        base = (version or "").split("+", 1)[0]
        return next((r for r in self.rows("pytorch", "torch") if r.get("version") == base), None)

    def torch_variant(self, version: str | None, cuda: str | None) -> Row | None:
        row = self.torch(version)
        if not row or not cuda:
            return None
        mm = major_minor(cuda)
        return next((v for v in row.get("variant", []) if major_minor(v.get("cuda")) == mm), None)

    def tensorflow(self, version: str | None) -> Row | None:
        mm = major_minor(version)
        rows = [r for r in self.rows("tensorflow", "tensorflow") if major_minor(r.get("version")) == mm]
        return max(rows, key=lambda r: vtuple(r.get("version")), default=None)


def cuda_in(cuda: str, spec: str) -> bool:
    """Is a CUDA version inside '12.0-12.4', '11.8', '12.x'?"""
    v = vtuple(major_minor(cuda))
    spec = spec.strip()
    if spec.endswith(".x"):
        return v[:1] == vtuple(spec[:-2])[:1]
    if "-" in spec:
        lo, hi = spec.split("-", 1)
        return vtuple(lo) <= v <= vtuple(hi)
    return v == vtuple(major_minor(spec))


# Words that never tell two GPUs apart. "Generation": NVML prints "NVIDIA RTX 4000 Ada Generation" where NVIDIA's
# page says "RTX 4000 Ada". Variant words ("Ti", "SUPER", "D", "SFF", "Server", "Max-Q" on a workstation board's
# own name) are NOT here: each names another GPU, which needs its own row.
_BRAND = frozenset({"geforce", "tesla", "quadro", "graphics", "edition", "gpu", "generation"})
# Words NVML adds to a notebook part's name: "... Laptop GPU", "... with Max-Q Design".
_PRINTED_EXTRA = frozenset({"laptop", "mobile", "max", "q", "maxq", "with", "design"})


def _filler(word: str) -> bool:
    """A word that does not tell two GPUs apart: a brand word, a memory size, a form factor."""
    return word in _BRAND or bool(re.fullmatch(r"\d{1,3}gb|sxm\d?|pcie|hbm\d?e?|nvl|smx\d?", word))


def _norm_gpu(name: str) -> str:
    """Lower case, without "NVIDIA", brackets and dashes; a variant glued to the number as users type it
    ("3060Ti", "4070super") is a word of its own."""
    text = re.sub(r"[()\[\],]", " ", name.lower().replace("nvidia", ""))
    text = re.sub(r"(\d)(ti|super)\b", r"\1 \2", text)
    return re.sub(r"[\s_\-]+", " ", text).strip()


def _sha256(data: bytes) -> str:
    """SHA-256 of ``data`` in hex, from the interpreter's built-in module where it has one: hashlib's first import
    initialises OpenSSL (~5 ms of every `check`) for one hash of a few hundred kB. The same digest either way."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]  # CPython ≤ 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]  # CPython ≥ 3.12
        except ImportError:
            from hashlib import sha256
    return str(sha256(data).hexdigest())


COMPILED = "matrix.json"  # a JSON copy of the TOML files, for speed: tomllib needs ~100 ms for them all


def compile_matrix() -> dict[str, Any]:
    """Parse every compat/*.toml into one JSON-able dict, keyed by the SHA-256 of each file's bytes."""
    out: dict[str, Any] = {"sha256": {}, "data": {}}
    for name in FILES:
        try:
            raw = package_data("doctor.compat", f"{name}.toml")
        except FileNotFoundError:
            continue
        out["sha256"][name] = _sha256(raw)
        out["data"][name] = _toml().loads(raw.decode("utf-8"))
    return out


@cache
def bundled() -> Matrix:
    """The matrix shipped in the package (compat/*.toml).

    The reviewed TOML files are the truth; compat/matrix.json (scripts/compile_matrix.py) is a faster
    copy used only while every file's hash matches it, so an edited TOML file is never shadowed.
    """
    data: dict[str, dict[str, Any]] = {}
    problems = []
    compiled: dict[str, Any] = {}
    with contextlib.suppress(FileNotFoundError, OSError, ValueError):
        compiled = json.loads(package_data("doctor.compat", COMPILED).decode("utf-8"))
    for name in FILES:
        try:
            raw = package_data("doctor.compat", f"{name}.toml")
        except FileNotFoundError:
            data[name] = {}
            continue
        except OSError as exc:
            problems.append(f"compat/{name}.toml: {exc}")
            data[name] = {}
            continue
        if compiled.get("sha256", {}).get(name) == _sha256(raw):
            data[name] = compiled["data"][name]
            continue
        tomllib = _toml()
        try:
            data[name] = tomllib.loads(raw.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            problems.append(f"compat/{name}.toml: {exc}")
            data[name] = {}
    # The header names the newest review; `gpu-doctor matrix` also states the oldest (Matrix.oldest_review) and
    # warns when that one is more than STALE_DAYS old.
    reviewed = max((str(d.get("reviewed")) for d in data.values() if d.get("reviewed")), default=None)
    return Matrix(data=data, origin="bundled", reviewed=reviewed, problems=problems)


# --- the central rule: can this driver run that CUDA runtime? -----------------------------------


@dataclass(frozen=True)
class Verdict:
    """Whether a driver runs a CUDA runtime, by which rule, and the rows that say so."""
    ok: bool
    rule: str  # native | minor-version | forward-compat | forward-compat-needs-package | too-old | unknown
    explanation: str
    rows: list[Row] = field(default_factory=list)

    @property
    def needs(self) -> str | None:
        row = next((r for r in self.rows if r.get("linux_min_driver")), None)
        return row.get("linux_min_driver") if row else None


def driver_runs_cuda(m: Matrix, driver: str | None, cuda: str, gpu_segment: str | None = None,
                     compat_packages: tuple[str, ...] = (), driver_api: str | None = None,
                     windows: bool = False) -> Verdict:
    """Does a driver run an application built with (or bundling) CUDA runtime ``cuda``?

    The rules, in NVIDIA's order (CUDA Compatibility guide): the toolkit's own minimum driver
    (native); within one major, any driver at or above the major's floor runs newer minors
    (minor-version compatibility, without PTX JIT of newer PTX); a data-center/embedded GPU can run a
    newer CUDA through the cuda-compat package for its driver branch (forward compatibility).
    """
    key = "windows_min_driver" if windows else "linux_min_driver"
    need = m.min_driver(cuda, windows)
    if need and windows:
        need = {**need, "linux_min_driver": need[key]}  # the messages below speak of "the" minimum
    major = vtuple(cuda)[0] if vtuple(cuda) else None
    if driver is None:
        if driver_api and vtuple(driver_api):
            if vtuple(major_minor(cuda)) <= vtuple(driver_api):
                return Verdict(True, "native", f"the driver's CUDA API is {driver_api} ≥ {major_minor(cuda)}")
            if vtuple(driver_api)[:1] == (major,) and m.mvc(major or 0):
                return Verdict(True, "minor-version", f"same CUDA major as the driver's API {driver_api}: runs by "
                               "minor-version compatibility", [m.mvc(major or 0) or {}])
            return Verdict(False, "too-old", f"the driver's CUDA API is {driver_api}, older than {cuda}")
        return Verdict(False, "unknown", "the driver version is unknown")
    if need is None and not windows:
        by_branch = [r for r in m.toolkit_rows(cuda) if r.get("driver_branch")]
        if by_branch and row_runs_natively(by_branch[0], driver):
            b = by_branch[0]["driver_branch"]
            return Verdict(True, "native", f"CUDA {major_minor(cuda)} pairs with driver branch R{b}; {driver} is "
                           "that branch or newer", [by_branch[0]])
    if need and driver_meets(driver, need["linux_min_driver"]):
        return Verdict(True, "native", f"CUDA {major_minor(cuda)} needs driver ≥ {need['linux_min_driver']} "
                       f"({need.get('label', need['version'])}); {driver} qualifies", [need])
    mvc = m.mvc(major) if major is not None else None
    if mvc and windows:
        mvc = {**mvc, "linux_min_driver": mvc.get(key)}
    if mvc and mvc.get("linux_min_driver") and driver_meets(driver, mvc["linux_min_driver"]):
        asks = (f"driver {driver} is older than CUDA {major_minor(cuda)} asks for (≥ {need['linux_min_driver']})"
                if need else f"the matrix has no minimum driver for CUDA {major_minor(cuda)}")
        return Verdict(True, "minor-version",
                       asks + f", but CUDA {major}.x runs on any driver ≥ "
                       f"{mvc['linux_min_driver']} by minor-version compatibility (no JIT of newer PTX; a few newer "
                       "APIs return cudaErrorCallRequiresNewerDriver)", [r for r in (need, mvc) if r])
    own = int(driver.strip().lstrip("Rr")) if is_branch(driver) else branch(driver)
    fwd = [] if windows else [r for r in m.forward_compat_rows(cuda)
                              if str(own) in [str(b) for b in r.get("driver_branches", [])]]
    policy = m.table("cuda", "forward_compat_policy")
    eligible = gpu_segment in policy.get("segments", []) if gpu_segment else None
    if fwd and eligible:
        installed = [p for p in compat_packages if p.startswith("cuda-compat")]
        pkg = min(fwd, key=lambda r: vtuple(r.get("cuda")))
        if installed:
            return Verdict(True, "forward-compat", f"{', '.join(installed)} lets driver branch {branch(driver)} run "
                           f"CUDA {major_minor(cuda)} on this {gpu_segment} GPU", [pkg, policy])
        return Verdict(False, "forward-compat-needs-package",
                       f"driver {driver} is too old for CUDA {major_minor(cuda)}, but this {gpu_segment} GPU can run "
                       f"it with the forward-compatibility package {pkg['package']}",
                       [r for r in (need, pkg, policy) if r])
    if (need is None or not need.get("linux_min_driver")) and (mvc is None or not mvc.get("linux_min_driver")):
        return Verdict(False, "unknown", f"CUDA {cuda} is not in the matrix"
                       + (" (with a Windows driver minimum)" if windows else ""))
    floor = (need or {}).get("linux_min_driver") or (mvc or {}).get("linux_min_driver")  # one of them has it
    why = f"CUDA {major_minor(cuda)} needs driver ≥ {floor}; {driver} is older"
    if fwd and eligible is False:
        why += " (forward compatibility does not apply: it is for data-center and embedded GPUs, not " \
               f"{gpu_segment} ones)"
    return Verdict(False, "too-old", why, [r for r in (need, mvc) if r])


@cache
def current() -> Matrix:
    """The bundled matrix, plus PyPI-derived framework releases from `gpu-doctor matrix refresh` that the
    bundle does not have yet (hand-reviewed rows always win). Reads a local cache file; never the network."""
    base = bundled()
    if not (default_cache_dir() / CACHE_FILE).exists():
        return base  # no refresh was ever run: nothing to read, nor to validate (packaging is not imported)
    try:
        cached = load_cached()
    except (ImportError, OSError, ValueError):
        cached = None
    if not cached:
        return base
    data = {name: dict(content) for name, content in base.data.items()}
    added = 0
    for file, table in (("pytorch", "torch"), ("tensorflow", "tensorflow"), ("jax", "jax")):
        rows = (cached.get(file) or {}).get(table) or []
        known = {str(r.get("version")) for r in data.get(file, {}).get(table, [])}
        new = [r for r in rows if isinstance(r, dict) and str(r.get("version")) not in known]
        if new:
            data.setdefault(file, {})[table] = [*data.get(file, {}).get(table, []), *new]
            added += len(new)
    origin = f"bundled + {added} PyPI row(s) fetched {str(cached.get('fetched_at', '?'))[:10]}" if added else "bundled"
    return Matrix(data=data, origin=origin, reviewed=base.reviewed, problems=base.problems)
