"""Drift between two machines' facts (two nodes, or one node before and after an upgrade). Pure.

What is compared is what decides whether software runs: OS, kernel and compilers, the driver and
its packages, the GPUs (model, memory, ECC and retirement state, PCIe link), the CUDA toolkits and
the libraries the loader finds, cuDNN, each Python environment's packages, and the CUDA-related
environment variables. What changes by the minute (memory in use, temperature, power, processes,
the time of collection) is not drift and is left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from doctor.fleet import FRAMEWORKS, PROBLEM_SEVERITIES, Problem, build_version
from doctor.model.facts import Facts, Gpu, PythonEnv

DIFF_SCHEMA = "gpu-doctor.diff/v1"


@dataclass(frozen=True)
class Change:
    area: str  # Host | Driver | GPUs | CUDA toolkit | cuDNN | Python & frameworks | Environment
    what: str
    kind: str  # changed | added | removed
    before: str | None  # None: unknown (changed) or absent (added)
    after: str | None  # None: unknown (changed) or absent (removed)


@dataclass(frozen=True)
class Drift:
    changes: list[Change] = field(default_factory=list)
    new: list[Problem] = field(default_factory=list)  # failing/warning findings only B has
    vanished: list[Problem] = field(default_factory=list)  # … only A has

    @property
    def drifted(self) -> bool:
        return bool(self.changes or self.new or self.vanished)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": DIFF_SCHEMA,
            "drift": self.drifted,
            "changes": [c.__dict__ for c in self.changes],
            "findings": {"new": [p.__dict__ for p in self.new], "vanished": [p.__dict__ for p in self.vanished]},
        }


def drift(a: Facts, b: Facts, a_findings: Iterable[Problem] = (), b_findings: Iterable[Problem] = ()) -> Drift:
    new, vanished = diff_findings(a_findings, b_findings)
    return Drift(changes=diff_facts(a, b), new=new, vanished=vanished)


def diff_findings(a: Iterable[Problem], b: Iterable[Problem]) -> tuple[list[Problem], list[Problem]]:
    """(new, vanished) failing/warning findings; a finding whose title changed counts as both."""
    before = list(dict.fromkeys(p for p in a if p.severity in PROBLEM_SEVERITIES))
    after = list(dict.fromkeys(p for p in b if p.severity in PROBLEM_SEVERITIES))
    return [p for p in after if p not in set(before)], [p for p in before if p not in set(after)]


def diff_facts(a: Facts, b: Facts) -> list[Change]:
    return [
        *_scalars("Host", a, b, HOST_FIELDS),
        *_scalars("Driver", a, b, DRIVER_FIELDS),
        *_mapping("Driver", "package {}", _packages(a), _packages(b)),
        *_scalars("GPUs", a, b, GPU_COUNT),
        *_gpus(a.gpus, b.gpus),
        *_mapping("CUDA toolkit", "toolkit at {}", {t.root: t.version or "?" for t in a.toolkits},
                  {t.root: t.version or "?" for t in b.toolkits}),
        *_scalars("CUDA toolkit", a, b, LOADER_FIELDS),
        *_mapping("cuDNN", "cuDNN ({})", {c.location or c.source or "?": c.version or "?" for c in a.cudnn},
                  {c.location or c.source or "?": c.version or "?" for c in b.cudnn}),
        *_python(a.python_envs, b.python_envs),
        *_mapping("Environment", "{}", {k: v for k, v in a.env.items() if v is not None},
                  {k: v for k, v in b.env.items() if v is not None}),
        *_active(a, b),
    ]


def _active(a: Facts, b: Facts) -> Iterator[Change]:
    """Rates the active tests measured (facts ``active``) that moved by more than 10 %: a node that got slower."""
    from doctor.model.facts_active import rate_changes

    for what, before, after in rate_changes(a.active, b.active):
        kind = "changed" if before is not None and after is not None else "added" if before is None else "removed"
        yield Change("Active tests", what, kind, before, after)


HOST_FIELDS = (
    ("OS", lambda f: f.host.os_pretty),
    ("kernel", lambda f: f.host.kernel),
    ("architecture", lambda f: f.host.arch),
    ("glibc", lambda f: f.host.glibc),
    ("gcc", lambda f: f.host.gcc),
    ("container", lambda f: f.host.container),
    ("NVIDIA container toolkit", lambda f: f.host.container_toolkit and f.host.container_toolkit.version),
)
DRIVER_FIELDS = (
    ("driver (user space)", lambda f: f.driver.userspace),
    ("driver (kernel module)", lambda f: f.driver.kernel_module),
    ("kernel module loaded", lambda f: f.driver.module_loaded),
    ("kernel module flavour", lambda f: f.driver.module_flavor),
    ("CUDA driver API", lambda f: f.driver.cuda_driver_api),
    ("CUDA version (nvidia-smi)", lambda f: f.driver.smi_cuda_version),
)
GPU_COUNT = (("GPUs visible", lambda f: len([g for g in f.gpus if g.source != "pci"])),)
LOADER_FIELDS = (
    ("nvcc on PATH", lambda f: f.loader.nvcc_on_path and _lib(f.loader.nvcc_on_path)),
    ("libcudart the loader finds", lambda f: f.loader.libcudart and _lib(f.loader.libcudart)),
    ("libcudnn the loader finds", lambda f: f.loader.libcudnn and _lib(f.loader.libcudnn)),
    ("libcuda the loader finds", lambda f: f.loader.libcuda and _lib(f.loader.libcuda)),
)


def _lib(ref: Any) -> str:
    return f"{ref.version or '?'} ({ref.path})"


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def _scalars(area: str, a: Facts, b: Facts, fields: Iterable[tuple[str, Any]]) -> Iterator[Change]:
    for what, get in fields:
        before, after = _text(get(a)), _text(get(b))
        if before != after:
            yield Change(area, what, "changed", before, after)


def _mapping(area: str, what: str, a: dict[str, str], b: dict[str, str]) -> Iterator[Change]:
    for key in dict.fromkeys([*a, *b]):
        if key not in b:
            yield Change(area, what.format(key), "removed", a[key], None)
        elif key not in a:
            yield Change(area, what.format(key), "added", None, b[key])
        elif a[key] != b[key]:
            yield Change(area, what.format(key), "changed", a[key], b[key])


def _packages(f: Facts) -> dict[str, str]:
    return {p.name: p.version or "?" for p in f.driver.packages}


# --- GPUs -----------------------------------------------------------------------------------------

GPU_FIELDS = (
    ("model", lambda g: g.name),
    ("memory", lambda g: None if g.memory_total_mib is None else f"{g.memory_total_mib} MiB"),
    ("compute capability", lambda g: g.compute_capability),
    ("uncorrected ECC errors", lambda g: g.ecc_uncorrected),
    ("page retirement pending", lambda g: g.retired_pages_pending),
    ("row remapping pending", lambda g: g.remapped_rows_pending),
    ("PCIe link width", lambda g: None if g.pcie_width_current is None else
     f"x{g.pcie_width_current} of x{g.pcie_width_max if g.pcie_width_max is not None else '?'}"),
    ("MIG mode", lambda g: g.mig_mode),
)


def _gpus(a: list[Gpu], b: list[Gpu]) -> Iterator[Change]:
    """GPUs by UUID when the two share any (the same machine, maybe reordered), else by index (two nodes)."""
    a_uuids, b_uuids = {g.uuid for g in a if g.uuid}, {g.uuid for g in b if g.uuid}
    by_uuid = bool(a_uuids & b_uuids)

    def key(g: Gpu) -> str | int | None:
        return (g.uuid or f"index {g.index}") if by_uuid else g.index

    before, after = {key(g): g for g in a}, {key(g): g for g in b}
    for k in dict.fromkeys([*before, *after]):
        ga, gb = before.get(k), after.get(k)
        if gb is None:
            yield Change("GPUs", _gpu_label(ga), "removed", _gpu_summary(ga), None)
        elif ga is None:
            yield Change("GPUs", _gpu_label(gb), "added", None, _gpu_summary(gb))
        else:
            for what, get in GPU_FIELDS:
                x, y = _text(get(ga)), _text(get(gb))
                if x != y:
                    yield Change("GPUs", f"{_gpu_label(gb)} {what}", "changed", x, y)


def _gpu_label(g: Gpu | None) -> str:
    assert g is not None
    return f"GPU {g.index}" + (f" ({g.pci_bus_id})" if g.pci_bus_id else "")


def _gpu_summary(g: Gpu | None) -> str:
    assert g is not None
    memory = f", {g.memory_total_mib} MiB" if g.memory_total_mib is not None else ""
    return f"{g.name or 'unknown model'}{memory}" + (f", {g.uuid}" if g.uuid else "")


# --- Python environments ------------------------------------------------------------------------


def _python(a: list[PythonEnv], b: list[PythonEnv]) -> Iterator[Change]:
    area = "Python & frameworks"
    pairs: list[tuple[PythonEnv | None, PythonEnv | None]]
    if len(a) == 1 and len(b) == 1:  # one environment each: compare them even when their paths differ
        pairs = [(a[0], b[0])]
        if a[0].executable != b[0].executable:
            yield Change(area, "Python environment", "changed", a[0].executable, b[0].executable)
    else:
        left, right = {e.executable: e for e in a}, {e.executable: e for e in b}
        pairs = [(left.get(k), right.get(k)) for k in dict.fromkeys([*left, *right])]
    for ea, eb in pairs:
        if eb is None:
            assert ea is not None
            yield Change(area, f"Python environment {ea.executable}", "removed", ea.version, None)
            continue
        if ea is None:
            yield Change(area, f"Python environment {eb.executable}", "added", None, eb.version)
            continue
        where = eb.executable
        if ea.version != eb.version:
            yield Change(area, f"Python ({where})", "changed", ea.version, eb.version)
        if (ea.error or None) != (eb.error or None):
            yield Change(area, f"probe error ({where})", "changed", ea.error, eb.error)
        yield from _mapping(area, f"{{}} ({where})", _pkg_labels(ea), _pkg_labels(eb))


def _pkg_labels(env: PythonEnv) -> dict[str, str]:
    """Frameworks as their build (``2.5.1+cu124``), so a CPU/CUDA swap at the same version shows."""
    return {p.name: build_version(p.version, p.cuda, p.cpu_only) if p.name in FRAMEWORKS else p.version or "?"
            for p in env.packages}
