"""Fleet: many nodes' reports → one row per node, nodes grouped by the same problem, outliers.

Pure: text in, summaries out. Finding files, reading them and printing live in
``doctor/commands/fleet.py``.

A node is read from a report (``gpu-doctor check --json``) or from a facts snapshot, which is
diagnosed on the spot. Reports are *not* re-validated against the schema: at 10,000 nodes that
would cost more than everything else. Only what the fleet view shows is read — the problem
findings (fail/warn) and a handful of facts — and a fact of the wrong type reads as unknown. A
report whose own ``status`` is ``ok`` is taken at its word (its findings are not searched for
problems); any other status is checked against the findings found, and the worse one counts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from doctor.model.severity import SEVERITY_RANK
from doctor.safeio import JSON_DECODER, InputError, lazy_compile, load_json

REPORT_SCHEMA = "gpu-doctor.report/v1"  # == doctor.model.report.REPORT_SCHEMA; not imported, to keep workers light
FACTS_SCHEMA = "gpu-doctor.facts/v1"
FLEET_SCHEMA = "gpu-doctor.fleet/v1"

PROBLEM_SEVERITIES = ("fail", "warn")
# The frameworks whose build (version + CUDA) a fleet must agree on.
FRAMEWORKS = ("torch", "tensorflow", "tensorflow-cpu", "tf-nightly", "jaxlib")
# No facts v1 probe records a host name; a later schema, or facts written by another tool, may. The
# node's own word about its name beats the file name it was saved under.
HOST_NAME_FIELDS = ("hostname", "node_name")
HOST_NAME_ENV = ("SLURMD_NODENAME", "NODE_NAME", "HOSTNAME")


class FleetInputError(ValueError):
    """A file that is neither a gpu-doctor report nor a facts snapshot; the message says why."""


@dataclass(frozen=True)
class Problem:
    code: str
    severity: str  # fail | warn
    title: str


@dataclass(frozen=True)
class GpuFault:
    kind: str  # gpu-ecc (uncorrected errors, or a retirement/remap pending) | gpu-pcie
    gpu: str  # "GPU 3 (00000000:3B:00.0)"
    detail: str
    severity: str
    index: str = ""  # the GPU's index and UUID as dcgm-exporter labels them (gpu, UUID); "" when unknown
    uuid: str = ""


@dataclass(frozen=True)
class Rate:
    """One rate an active test measured on a node: "GPU 0 device_gbs" of an "NVIDIA A100-SXM4-40GB"."""

    label: str
    gpu: str | None
    value: float


@dataclass(frozen=True)
class Node:
    """One row of the fleet: what the node's report concluded and the facts compared across nodes."""

    name: str
    file: str
    input: str  # report | facts
    status: str  # ok | warn | fail
    problems: tuple[Problem, ...] = ()
    driver: str | None = None
    cuda_driver_api: str | None = None
    toolkit: str | None = None  # "12.4.1", or "11.8.0, 12.4.1" when several are installed
    framework: str | None = None  # "torch 2.5.1+cu124"
    gpu_count: int = 0
    gpu_model: str | None = None
    gpu_faults: tuple[GpuFault, ...] = ()
    rates: tuple[Rate, ...] = ()  # what its recorded active tests measured (facts `active`)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "file": self.file, "input": self.input, "status": self.status,
            "driver": self.driver, "cuda_driver_api": self.cuda_driver_api, "toolkit": self.toolkit,
            "framework": self.framework, "gpu_count": self.gpu_count, "gpu_model": self.gpu_model,
            "problems": [p.__dict__ for p in self.problems],
            "gpu_faults": [g.__dict__ for g in self.gpu_faults],
            "rates": [r.__dict__ for r in self.rates],
        }


@dataclass(frozen=True)
class FileError:
    file: str
    reason: str


# --- reading one node ------------------------------------------------------------------------

# The fast path leans on the report's own layout (Report.to_dict: schema and status first, facts
# last; each finding starts with code, severity) and on facts v1 key names that occur once. A quoted
# key followed by a colon cannot occur inside a JSON string — a quote there is always escaped — so
# a match is structure. Anything unexpected falls back to a full json.loads: always right, slower.
_REPORT_HEAD = lazy_compile(r'\s*\{\s*"schema"\s*:\s*"gpu-doctor\.report/v1"\s*,\s*"status"\s*:\s*"(ok|warn|fail)"')
_FACTS_AT = lazy_compile(r'"facts"\s*:\s*(?=\{\s*"schema"\s*:\s*"gpu-doctor\.facts/v1")')
_WS = lazy_compile(r"\s*")
_TAIL = lazy_compile(r"\s*\}\s*\}\s*\Z")  # the facts' brace, the report's
_DECODER = JSON_DECODER  # numbers too long to print, NaN and Infinity are refused, not decoded
_ACTIVE_AT = lazy_compile(r'\s*,\s*"active"\s*:\s*')
# What the fleet reads from the facts, in their order (Facts' fields): each key is looked for after
# the one before, so the facts are scanned once. The rest (driver packages, loader …) is skipped.
_FACT_KEYS = (("host", "host"), ("driver", "kernel_module"), ("driver", "userspace"),
              ("driver", "cuda_driver_api"), ("driver", "smi_cuda_version"),
              ("gpus", None), ("toolkits", None), ("python_envs", None),
              ("env", None))


def read_node(text: str, name: str, file: str) -> Node:
    """The node a report or facts snapshot describes; raises :class:`FleetInputError` for anything else."""
    head = _REPORT_HEAD.match(text)
    fast = _read_report_fast(text, head) if head else None
    if fast is not None:
        findings, facts = fast
        return summarize(name, file, "report", findings, facts)
    data = _loads(text)
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema == REPORT_SCHEMA:
        findings, facts = data.get("findings"), data.get("facts")
        if not isinstance(findings, list) or not isinstance(facts, dict):
            raise FleetInputError("a gpu-doctor report without its findings or facts")
        return summarize(name, file, "report", findings, facts, data.get("status"))
    if schema == FACTS_SCHEMA:
        return summarize(name, file, "facts", _diagnose(data), data)
    if isinstance(data, dict):
        raise FleetInputError(f"JSON, but not a gpu-doctor report or facts snapshot (schema: {schema!r})")
    raise FleetInputError(f"JSON, but not a gpu-doctor report or facts snapshot (a {type(data).__name__})")


def _read_report_fast(text: str, head: re.Match[str]) -> tuple[list[Any], dict[str, Any]] | None:
    """(problem findings, the facts the fleet reads) without parsing the rest; None: read it all."""
    at = len(text)
    while True:  # facts is the last key: look from the end
        at = text.rfind('"facts"', head.end(), at)
        if at < 0:
            return None
        facts_key = _FACTS_AT.match(text, at)
        if facts_key:
            break
    try:
        facts: dict[str, Any] = {"driver": {}}
        at_key = facts_key.end()
        for section, key in _FACT_KEYS:
            value, at_key = _value_of(text, key or section, at_key)
            if key is None or section == key:
                facts[section] = value
            else:
                facts[section][key] = value
        active = _ACTIVE_AT.match(text, at_key)  # optional (facts written before it existed lack it)
        if active:
            facts["active"], at_key = _DECODER.raw_decode(text, active.end())
        # Facts end with "sources"; decoding it and finding both closing braces right after proves the
        # file is whole (a report cut short by a killed job or a full disk must not pass for a node).
        if not _TAIL.match(text, _value_of(text, "sources", at_key)[1]):
            return None
        # The findings are always decoded and checked: a report whose findings are not a list of findings
        # is corrupt, whatever its status says, and must not pass for a healthy node.
        all_findings, _ = _value_of(text, "findings", head.end())
        if not isinstance(all_findings, list) or not all(
                isinstance(f, dict) and isinstance(f.get("code"), str) and _rank(f.get("severity"), None) is not None
                for f in all_findings):
            return None
        findings = [f for f in all_findings if f["severity"] in PROBLEM_SEVERITIES]
    except (ValueError, RecursionError):
        return None
    worst = max((_rank(f.get("severity")) or 0 for f in findings if isinstance(f, dict)), default=0)
    if worst != SEVERITY_RANK[head.group(1)]:  # the report's own status disagrees: read it all
        return None
    return findings, facts


def _value_of(text: str, key: str, start: int) -> tuple[Any, int]:
    """(value, where it ends) of the first ``"key":`` from ``start``; ValueError when there is none."""
    at = text.find(f'"{key}":', start)
    if at < 0:
        raise ValueError(f"no {key!r}")  # every facts v1 key is required: this file is laid out differently
    after = at + len(key) + 3
    blank = _WS.match(text, after)  # \s* always matches, if only the empty string
    return _DECODER.raw_decode(text, blank.end() if blank else after)


def _loads(text: str) -> Any:
    if not text.strip():
        raise FleetInputError("empty file")
    try:
        return load_json(text)
    except InputError as exc:
        if not str(exc).startswith("not JSON ("):
            raise FleetInputError(str(exc)) from None
        first = text.lstrip().splitlines()[0] if text.strip() else ""
        snippet = first[:60] + ("…" if len(first) > 60 else "")
        raise FleetInputError(f"{exc}; it starts with {snippet!r}") from None


def _diagnose(data: dict[str, Any]) -> list[Any]:
    """A facts snapshot is judged here, like `check --facts`: validated, then every check runs."""
    from doctor.model.facts import Facts, FactsError
    from doctor.pipeline import diagnose

    try:
        facts = Facts.from_dict(data)
    except FactsError as exc:
        raise FleetInputError(f"a facts snapshot that does not match {FACTS_SCHEMA}: {exc}") from None
    return [f.to_dict() for f in diagnose(facts).findings]


def summarize(name: str, file: str, kind: str, findings: Iterable[Any], facts: dict[str, Any],
              status: Any = None) -> Node:
    """A node from a report's findings and facts, as plain JSON data."""
    problems = []
    worst = _rank(status) or 0
    for i, f in enumerate(findings):
        if not isinstance(f, dict) or not isinstance(f.get("code"), str) or _rank(f.get("severity"), None) is None:
            raise FleetInputError(f"findings[{i}] is not a gpu-doctor finding")
        if f["severity"] in PROBLEM_SEVERITIES:
            problems.append(Problem(f["code"], f["severity"], _str(f.get("title")) or f["code"]))
            worst = max(worst, SEVERITY_RANK[f["severity"]])
    host, driver = _dict(facts.get("host")), _dict(facts.get("driver"))
    env = _dict(facts.get("env"))
    own_name = next((v for v in (*(host.get(k) for k in HOST_NAME_FIELDS), *(env.get(k) for k in HOST_NAME_ENV))
                     if isinstance(v, str) and v.strip()), None)
    gpus = [g for g in _list(facts.get("gpus")) if isinstance(g, dict) and g.get("source") != "pci"]
    models = sorted({_str(g.get("name")) or "?" for g in gpus})
    return Node(
        name=own_name.strip() if own_name else name, file=file, input=kind,
        status="fail" if worst == 3 else "warn" if worst == 2 else "ok",
        problems=tuple(problems),
        driver=_str(driver.get("userspace")) or _str(driver.get("kernel_module")),
        cuda_driver_api=_str(driver.get("cuda_driver_api")) or _str(driver.get("smi_cuda_version")),
        toolkit=", ".join(sorted({_str(t.get("version")) or "?" for t in _list(facts.get("toolkits"))
                                  if isinstance(t, dict)})) or None,
        framework=_frameworks(facts),
        gpu_count=len(gpus),
        gpu_model=(models[0] if len(models) == 1 else f"{len(models)} models") if models else None,
        gpu_faults=tuple(fault for g in gpus for fault in gpu_faults(g)),
        rates=_rates(facts.get("active")),
    )


def _rates(active: Any) -> tuple[Rate, ...]:
    if not isinstance(active, dict):
        return ()
    from doctor.model.facts_active import ActiveFacts, coerce, measurements

    return tuple(Rate(label, gpu, value) for label, (gpu, value) in measurements(coerce(ActiveFacts, active)).items())


def _frameworks(facts: dict[str, Any]) -> str | None:
    labels = set()
    for env in _list(facts.get("python_envs")):
        for p in _list(env.get("packages") if isinstance(env, dict) else None):
            if isinstance(p, dict) and p.get("name") in FRAMEWORKS:
                labels.add(build_label(p["name"], _str(p.get("version")), _str(p.get("cuda")), p.get("cpu_only")))
    return "; ".join(sorted(labels)) or None


def build_label(name: str, version: str | None, cuda: str | None, cpu_only: Any) -> str:
    """``torch 2.5.1+cu124`` whether the version carries the local tag or the CUDA came from elsewhere."""
    return f"{name} {build_version(version, cuda, cpu_only)}"


def build_version(version: str | None, cuda: str | None, cpu_only: Any) -> str:
    base, _, local = (version or "?").partition("+")
    tag = "cpu" if cpu_only is True else "cu" + cuda.replace(".", "") if cuda else local
    return f"{base}+{tag}" if tag else base


def gpu_faults(g: dict[str, Any]) -> list[GpuFault]:
    width, width_max = _int(g.get("pcie_width_current")), _int(g.get("pcie_width_max"))
    if (not g.get("ecc_uncorrected") and g.get("retired_pages_pending") is not True
            and g.get("remapped_rows_pending") is not True
            and (width is None or width_max is None or width >= width_max)):
        return []  # the healthy GPU, most of them, cheaply
    label = f"GPU {g.get('index', '?')}" + (f" ({g['pci_bus_id']})" if _str(g.get("pci_bus_id")) else "")
    index = str(g["index"]) if _int(g.get("index")) is not None else ""
    uuid = _str(g.get("uuid")) or ""
    out = []
    ecc = _int(g.get("ecc_uncorrected"))
    memory = [f"{ecc} uncorrected ECC error(s)"] if ecc else []
    memory += [f"{what} pending until the GPU is reset" for key, what in
               (("retired_pages_pending", "page retirement"), ("remapped_rows_pending", "row remapping"))
               if g.get(key) is True]
    if memory:
        out.append(GpuFault("gpu-ecc", label, "; ".join(memory), "fail", index, uuid))
    if width is not None and width_max is not None and width < width_max:
        out.append(GpuFault("gpu-pcie", label, f"PCIe link trained at x{width} of x{width_max}", "warn", index, uuid))
    return out


def _rank(severity: Any, unknown: int | None = 0) -> int | None:
    """The rank of a severity; ``unknown`` for anything else (JSON may hold a list where a string belongs)."""
    return SEVERITY_RANK[severity] if isinstance(severity, str) and severity in SEVERITY_RANK else unknown


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


# --- the fleet ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """Nodes with the same set of failing/warning finding codes."""

    severity: str
    problems: tuple[Problem, ...]  # one per code, as the first node (by name) words it
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Outlier:
    kind: str  # driver | cuda-toolkit | framework | gpu-count | gpu-ecc | gpu-pcie
    severity: str
    title: str
    nodes: tuple[str, ...]
    value: str | None = None
    majority: str | None = None  # None: a GPU fault, or no value is held by more than half the nodes


@dataclass(frozen=True)
class Fleet:
    nodes: list[Node] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    outliers: list[Outlier] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)

    @property
    def status(self) -> str:
        """fail: a node fails, a file could not be read, or a GPU is faulty; warn: warnings or outliers."""
        if (any(n.status == "fail" for n in self.nodes) or self.errors
                or any(o.severity == "fail" for o in self.outliers)):
            return "fail"
        return "warn" if any(n.status == "warn" for n in self.nodes) or self.outliers else "ok"

    def counts(self) -> dict[str, int]:
        by = Counter(n.status for n in self.nodes)
        return {"nodes": len(self.nodes), "ok": by["ok"], "warn": by["warn"], "fail": by["fail"],
                "errors": len(self.errors), "outliers": len(self.outliers)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": FLEET_SCHEMA,
            "status": self.status,
            "counts": self.counts(),
            "nodes": [n.to_dict() for n in self.nodes],
            "groups": [{"severity": g.severity, "codes": [p.code for p in g.problems],
                        "problems": [p.__dict__ for p in g.problems], "nodes": list(g.nodes)} for g in self.groups],
            "outliers": [{**o.__dict__, "nodes": list(o.nodes)} for o in self.outliers],
            "errors": [e.__dict__ for e in self.errors],
        }


def natural_key(name: str) -> tuple[Any, ...]:
    """node2 before node10."""
    # [0-9] and a length bound: \d and isdigit() take digits int() cannot read or cannot print
    return tuple((0, int(p), "") if len(p) < 30 and p.isascii() and p.isdigit() else (1, 0, p)
                 for p in re.split(r"([0-9]+)", name) if p)


def aggregate(nodes: Iterable[Node], errors: Iterable[FileError] = ()) -> Fleet:
    rows = sorted(nodes, key=lambda n: natural_key(n.name))
    return Fleet(nodes=rows, groups=group_problems(rows), outliers=find_outliers(rows),
                 errors=sorted(errors, key=lambda e: natural_key(e.file)))


def group_problems(nodes: list[Node]) -> list[Group]:
    by_codes: dict[frozenset[str], list[Node]] = {}
    for n in nodes:
        if n.problems:
            by_codes.setdefault(frozenset(p.code for p in n.problems), []).append(n)
    groups = []
    for members in by_codes.values():
        first: dict[str, Problem] = {}
        for p in members[0].problems:
            if p.code not in first or SEVERITY_RANK[p.severity] > SEVERITY_RANK[first[p.code].severity]:
                first[p.code] = p
        problems = tuple(sorted(first.values(), key=lambda p: (-SEVERITY_RANK[p.severity], p.code)))
        groups.append(Group(problems[0].severity, problems, tuple(n.name for n in members)))
    return sorted(groups, key=lambda g: (-SEVERITY_RANK[g.severity], -len(g.nodes), [p.code for p in g.problems]))


# kind, the node attribute compared, how a value reads
COMPARED: tuple[tuple[str, str, Any], ...] = (
    ("driver", "driver", lambda v: f"driver {v}" if v else "no driver"),
    ("cuda-toolkit", "toolkit", lambda v: f"CUDA toolkit {v}" if v else "no CUDA toolkit"),
    ("framework", "framework", lambda v: v or "no ML framework"),
    ("gpu-count", "gpu_count", lambda v: f"{v} GPU(s)"),
)


def find_outliers(nodes: list[Node]) -> list[Outlier]:
    out: list[Outlier] = []
    for kind, attr, describe in COMPARED:
        found = _against_majority(nodes, kind, attr, describe)
        if kind == "gpu-count":  # more GPUs than the rest is no fault
            found = [o for o in found if o.majority is None or int(o.value or 0) < int(o.majority)]
        out += found
    for n in nodes:
        for f in n.gpu_faults:
            out.append(Outlier(f.kind, f.severity, f"{f.gpu}: {f.detail}", (n.name,)))
    out += slow_gpus(nodes)
    return sorted(out, key=lambda o: (-SEVERITY_RANK[o.severity], o.kind, natural_key(o.nodes[0])))


def _against_majority(nodes: list[Node], kind: str, attr: str, describe: Any) -> list[Outlier]:
    """Nodes whose value differs from the one more than half the nodes share; every variant when none does."""
    by_value: dict[Any, list[str]] = {}
    for n in nodes:
        by_value.setdefault(getattr(n, attr), []).append(n.name)
    if len(by_value) < 2:
        return []
    top, top_nodes = max(by_value.items(), key=lambda kv: len(kv[1]))
    total = len(nodes)
    if 2 * len(top_nodes) > total:
        return [Outlier(kind, "warn", f"{describe(v)}{f' on {len(names)} nodes' if len(names) > 1 else ''}, while "
                        f"{len(top_nodes)} of {total} nodes have {describe(top)}", tuple(names), _text(v), _text(top))
                for v, names in by_value.items() if v != top]
    # No majority: no node is the odd one out, so none is listed as an outlier. One line per axis says the
    # fleet is split, and how (7 nodes on 7 drivers is one fact, not 7 outliers).
    variants = sorted(by_value.items(), key=lambda kv: (-len(kv[1]), natural_key(kv[1][0])))
    shown = "; ".join(f"{describe(v)} on {_names(names)}" for v, names in variants[:5])
    more = f"; {len(variants) - 5} more" if len(variants) > 5 else ""
    return [Outlier(kind, "warn", f"no majority: {len(variants)} different values over {total} nodes: {shown}{more}",
                    tuple(sorted((n for _, names in variants for n in names), key=natural_key)))]


def _names(names: list[str], limit: int = 3) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


# A measured rate below this fraction of the fleet's median for the same GPU model and measurement is an
# outlier: identical GPUs on healthy nodes measure within a few percent of each other; 80 % leaves room for
# boost clocks and NUMA placement and still catches a link at half width or a GPU stuck at low clocks.
SLOW_FRACTION = 0.8
MIN_PEERS = 3  # a median of fewer values says nothing about what is normal


def slow_gpus(nodes: list[Node]) -> list[Outlier]:
    """Per-node bandwidth / TFLOP/s outliers: a GPU that measured far below its identical peers."""
    from statistics import median

    from doctor.model.facts_active import MEASURES, measure_key

    by: dict[tuple[str | None, str], list[tuple[str, Rate]]] = {}
    for n in nodes:
        for r in n.rates:
            by.setdefault((r.gpu, measure_key(r.label)), []).append((n.name, r))
    out = []
    for (gpu, key), rows in sorted(by.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        if len(rows) < MIN_PEERS:
            continue
        mid = median(r.value for _, r in rows)
        what, unit = MEASURES.get(key, (key, ""))
        for name, r in rows:
            if mid > 0 and r.value < SLOW_FRACTION * mid:
                who = r.label.rsplit(" ", 1)[0]
                out.append(Outlier("gpu-slow", "warn", f"{who}{f' ({gpu})' if gpu else ''}: {what} {r.value:,.1f} "
                                   f"{unit}, {r.value / mid:.0%} of the fleet's median {mid:,.1f} {unit} "
                                   f"({len(rows)} measurements)", (name,), f"{r.value:.1f}", f"{mid:.1f}"))
    return out
