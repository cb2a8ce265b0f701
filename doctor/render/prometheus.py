"""The report as Prometheus metrics (text exposition format), written with the official ``prometheus_client``.

For node_exporter's textfile collector: ``gpu-doctor check --format prometheus --output
/var/lib/node_exporter/textfile_collector/gpu_doctor.prom`` (written atomically, see
:mod:`doctor.render.files`). DCGM's exporter covers the hardware counters; these say whether the software
stack can run the work. What the textfile collector accepts shapes every metric here (node_exporter
``collector/textfile.go``: the file is parsed with ``expfmt.TextParser``, a file with client timestamps
is skipped whole, and the gatherer refuses a series collected twice and a name seen with two types or two
help texts — one bad series drops every metric of the file):

* no series twice: every family is keyed by its label values and keeps the first of a repeat; a problem
  of one GPU is one series of that GPU (``gpu``, ``UUID`` as dcgm-exporter labels its series, so
  ``on(gpu, UUID)`` joins them), a problem of the node one series per finding code;
* one unit per metric, in base units, named in the metric (``…_bytes_per_second``, ``…_seconds``);
* every status metric carries all its states as 0/1 (``gpu_doctor_status``, ``gpu_doctor_check_status``);
* ``area`` label values are slugs (``driver``, ``frameworks``, ``cuda-toolkit`` …);
* every label value is valid UTF-8: a lone surrogate (a non-UTF-8 file name, a hostile fact) is written
  as a visible ``\\udcff`` escape, never a crash;
* ``check`` and ``fleet`` share no metric name, so both files can sit in one textfile directory.

Metrics of ``check`` (all ``gpu_doctor_*``, documented in the README):

* ``gpu_doctor_status{status}``        1 for the report's status (ok | warn | fail | unknown), 0 for the others
* ``gpu_doctor_ready``                 1 when no check fails and there was evidence to say so (ok, warn)
* ``gpu_doctor_check_status{check,area,status}``  per check, 1 for its status and 0 for the other six
  (ok | info | warn | fail | skipped | not_applicable | crashed)
* ``gpu_doctor_findings{severity}``    findings per severity
* ``gpu_doctor_problem{code,area,severity}``  1 per failing or warning finding code about the node
* ``gpu_doctor_gpu_problem{gpu,UUID,code,area,severity}``  1 per failing or warning code about one GPU
* ``gpu_doctor_gpus``                  GPUs visible
* ``gpu_doctor_gpu_info{gpu,UUID,name,pci_bus_id,compute_capability}``  1 per GPU
* ``gpu_doctor_versions_info{…}``      1, the driver / CUDA / cuDNN / framework versions as labels
* ``gpu_doctor_active_bandwidth_bytes_per_second{gpu,UUID,source,measure}``  bandwidths the active tests
  measured (GB/s × 10⁹), ``gpu_doctor_active_flop_per_second{…}`` their arithmetic rates (TFLOP/s × 10¹²)
* ``gpu_doctor_last_run_timestamp_seconds``  when the report was rendered: alert when it grows old

Metrics of ``fleet``: ``gpu_doctor_node_status{node,status}``, ``gpu_doctor_node_ready{node}``,
``gpu_doctor_node_problem{node,code,severity}``, ``gpu_doctor_node_gpu_problem{node,gpu,UUID,kind,severity}``,
``gpu_doctor_node_info{node,driver,cuda_driver_api,toolkit,framework,gpu_model,gpus}``,
``gpu_doctor_fleet_nodes{status}``, ``gpu_doctor_fleet_status{status}``, ``gpu_doctor_fleet_outliers``,
``gpu_doctor_fleet_unreadable_files``, ``gpu_doctor_fleet_last_run_timestamp_seconds``.

``prometheus_client`` is imported here only, so `check` in its other formats never loads it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from doctor.model.findings import Finding
from doctor.model.severity import SEVERITY_RANK

_K = TypeVar("_K")

CHECK_STATES = ("ok", "info", "warn", "fail", "skipped", "not_applicable", "crashed")
# A check id repeated in a report (two --require gates of one kind) is one series: the worse status wins —
# a check's status on the severity scale, below it when it did not run, above it when it crashed.
CHECK_RANK = {"not_applicable": -2, "skipped": -1, **SEVERITY_RANK, "crashed": max(SEVERITY_RANK.values()) + 1}
STATES = ("ok", "warn", "fail", "unknown")  # a report's status; unknown: too little evidence to say ready
PROBLEMS = ("fail", "warn")
# measurement unit → (metric, factor to the base unit)
UNITS = {"GB/s": ("gpu_doctor_active_bandwidth_bytes_per_second", 1e9),
         "TFLOP/s": ("gpu_doctor_active_flop_per_second", 1e12)}
_GPU_EVIDENCE = re.compile(r"gpus\[(-?[0-9]{1,9})\]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def label(value: Any) -> str:
    """A label value the exposition can carry: a string, valid UTF-8 (a lone surrogate becomes ``\\udcff``)."""
    text = "" if value is None else str(value)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def ready(status: str) -> float:
    """1 when the node can take work: nothing failed and there was evidence to say so."""
    return 1.0 if status in ("ok", "warn") else 0.0


class _Family:
    """A gauge family that holds each label set once (the first wins), as the textfile collector demands."""

    def __init__(self, name: str, documentation: str, labels: list[str] | None = None,
                 value: float | None = None, info: bool = False) -> None:
        from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily

        self.seen: set[tuple[str, ...]] = set()
        if info:
            self.family: Any = InfoMetricFamily(name, documentation, labels=labels or [])
        else:
            self.family = GaugeMetricFamily(name, documentation, labels=labels, value=value)

    def add(self, values: Iterable[Any], value: Any) -> None:
        key = tuple(label(v) for v in values)
        if key in self.seen:
            return
        self.seen.add(key)
        if isinstance(value, dict):
            self.family.add_metric(list(key), {k: label(v) for k, v in value.items()})
        else:
            self.family.add_metric(list(key), float(value))


def versions(report: Any) -> dict[str, str]:
    """The versions worth a label: driver, CUDA driver API, toolkits, cuDNN, frameworks, OS, kernel, GPU."""
    f = report.facts
    out = {
        "driver": report.driver_version or "",
        "cuda_driver_api": f.driver.cuda_driver_api or f.driver.smi_cuda_version or "",  # libcuda's, else nvidia-smi's
        "toolkit": ",".join(sorted({t.version for t in f.toolkits if t.version})),
        "cudnn": ",".join(sorted({c.version for c in f.cudnn if c.version})),
        "os": " ".join(x for x in (f.host.os_id, f.host.os_version) if x),
        "kernel": f.host.kernel or "",
        "gpu": ",".join(sorted({g.name for g in f.gpus if g.name})),
    }
    for name in ("torch", "tensorflow", "jax", "jaxlib"):
        found = sorted({p.version for e in f.python_envs for p in e.packages if p.name == name and p.version})
        if found:
            out[name] = ",".join(found)
    return out


def _gpus(report: Any) -> dict[str, Any]:
    """The GPUs the driver enumerated, by their index as dcgm-exporter's ``gpu`` label writes it."""
    out: dict[str, Any] = {}
    for g in report.facts.gpus:
        if g.source != "pci" and isinstance(g.index, int):
            out.setdefault(str(g.index), g)
    return out


def about_gpus(finding: Any) -> list[str]:
    """The GPU indices a finding's evidence names (``gpus[3].ecc_uncorrected``): the GPUs it is about."""
    found = []
    for e in finding.evidence:
        m = _GPU_EVIDENCE.match(str(e.fact))
        if m and m.group(1) not in found:
            found.append(m.group(1))
    return found


def active_rates(report: Any) -> list[tuple[str, str, str, str, float]]:
    """(metric, gpu, source, measure, value in base units) for every rate the active tests measured, read
    through the active section's own ``measurements()`` (doctor.model.facts_active)."""
    active = getattr(report.facts, "active", None)
    if active is None:
        return []
    from doctor.model.facts_active import MEASURES, measure_key, measurements

    out = []
    for text, (_name, value) in measurements(active).items():
        key = measure_key(text)
        subject = text[: -len(key)].strip()
        unit = UNITS.get(MEASURES.get(key, ("", ""))[1])
        if unit is None:
            continue
        gpu = subject[4:] if subject.startswith("GPU ") else ""
        out.append((unit[0], gpu, "smoke" if gpu else subject, key, float(value) * unit[1]))
    return out


class ReportCollector:
    """A prometheus_client collector over one report (gpu-doctor check)."""

    def __init__(self, report: Any, now: float | None = None) -> None:
        self.report = report
        self.now = now

    def collect(self) -> Iterator[Any]:
        from doctor.render.nfd import slug

        r = self.report
        status = _Family("gpu_doctor_status", "1 for the report's status (ok, warn, fail, unknown), 0 for the others",
                         ["status"])
        for s in STATES:
            status.add([s], 1.0 if r.status == s else 0.0)
        yield status.family
        yield _Family("gpu_doctor_ready", "1 when no gpu-doctor check fails and the evidence says ready",
                      value=ready(r.status)).family
        worst: dict[str, Any] = {}
        for c in r.checks:
            if c.id not in worst or CHECK_RANK.get(c.status, 0) > CHECK_RANK.get(worst[c.id].status, 0):
                worst[c.id] = c
        checks = _Family("gpu_doctor_check_status", "per check: 1 for its status, 0 for the others",
                         ["check", "area", "status"])
        for c in worst.values():
            for s in CHECK_STATES:
                checks.add([c.id, slug(c.area), s], 1.0 if c.status == s else 0.0)
        yield checks.family
        findings = _Family("gpu_doctor_findings", "findings by severity", ["severity"])
        for sev in ("fail", "warn", "info", "ok"):
            findings.add([sev], sum(1 for f in r.findings if f.severity == sev))
        yield findings.family
        yield from self._problems()
        gpus = _gpus(r)
        yield _Family("gpu_doctor_gpus", "GPUs visible", value=len(gpus)).family
        info = _Family("gpu_doctor_gpu", "each GPU the driver enumerated", ["gpu", "UUID"], info=True)
        for index, g in gpus.items():
            info.add([index, g.uuid], {"name": g.name, "pci_bus_id": g.pci_bus_id,
                                       "compute_capability": g.compute_capability})
        yield info.family
        yield self._versions()
        rates = {metric: _Family(metric, f"{'bandwidths' if 'bytes' in metric else 'arithmetic rates'} the "
                                 "active tests measured (larger is better)", ["gpu", "UUID", "source", "measure"])
                 for metric, _factor in UNITS.values()}
        for metric, gpu, source, measure, value in active_rates(r):
            rates[metric].add([gpu, getattr(gpus.get(gpu), "uuid", None), source, measure], value)
        yield from (fam.family for fam in rates.values() if fam.seen)
        yield _Family("gpu_doctor_last_run_timestamp_seconds", "when gpu-doctor check wrote this report (Unix time)",
                      value=time.time() if self.now is None else self.now).family

    def _versions(self) -> Any:
        fam = _Family("gpu_doctor_versions", "driver, CUDA, cuDNN and framework versions", [], info=True)
        fam.add([], versions(self.report))
        return fam.family

    def _problems(self) -> Iterator[Any]:
        from doctor.render.nfd import slug

        gpus = _gpus(self.report)
        node: dict[str, Finding] = {}
        per_gpu: dict[tuple[str, str], Finding] = {}
        for f in self.report.findings:
            if f.severity not in PROBLEMS:
                continue
            where = about_gpus(f)
            for g in where:
                _keep_worst(per_gpu, (g, f.code), f)
            if not where:
                _keep_worst(node, f.code, f)
        problems = _Family("gpu_doctor_problem", "1 per failing or warning finding code about the node",
                           ["code", "area", "severity"])
        for code, f in node.items():
            problems.add([code, slug(f.area), f.severity], 1)
        yield problems.family
        on_gpu = _Family("gpu_doctor_gpu_problem", "1 per failing or warning finding code about one GPU "
                         "(gpu and UUID as dcgm-exporter labels its series)",
                         ["gpu", "UUID", "code", "area", "severity"])
        for (gpu, code), f in per_gpu.items():
            on_gpu.add([gpu, getattr(gpus.get(gpu), "uuid", None), code, slug(f.area), f.severity], 1)
        yield on_gpu.family


def _keep_worst(into: dict[_K, Finding], key: _K, finding: Finding) -> None:
    """One series per key: the worst finding of that key (the first of equally bad ones) is the one kept."""
    if key not in into or SEVERITY_RANK[finding.severity] > SEVERITY_RANK[into[key].severity]:
        into[key] = finding


class FleetCollector:
    """A prometheus_client collector over a fleet (gpu-doctor fleet): one series per node."""

    def __init__(self, fleet: Any, now: float | None = None) -> None:
        self.fleet = fleet
        self.now = now

    def collect(self) -> Iterator[Any]:
        fl = self.fleet
        status = _Family("gpu_doctor_node_status", "1 for each node's status, 0 for the others", ["node", "status"])
        ready_ = _Family("gpu_doctor_node_ready", "1 when no check fails on the node", ["node"])
        info = _Family("gpu_doctor_node", "each node's versions", ["node"], info=True)
        problems = _Family("gpu_doctor_node_problem", "1 per failing or warning finding code on a node",
                           ["node", "code", "severity"])
        on_gpu = _Family("gpu_doctor_node_gpu_problem", "1 per fault of one GPU of a node (gpu and UUID as "
                         "dcgm-exporter labels its series)", ["node", "gpu", "UUID", "kind", "severity"])
        for n in fl.nodes:
            if (label(n.name),) in ready_.seen:
                continue  # two rows of one name: the first is the node's, as in every other family
            for s in STATES:
                status.add([n.name, s], 1.0 if n.status == s else 0.0)
            ready_.add([n.name], ready(n.status))
            info.add([n.name], {"driver": n.driver, "cuda_driver_api": n.cuda_driver_api, "toolkit": n.toolkit,
                                "framework": n.framework, "gpu_model": n.gpu_model, "gpus": str(n.gpu_count)})
            worst: dict[str, str] = {}
            for pr in n.problems:
                if SEVERITY_RANK.get(pr.severity, 0) > SEVERITY_RANK.get(worst.get(pr.code, "ok"), 0):
                    worst[pr.code] = pr.severity
            for code, sev in worst.items():
                problems.add([n.name, code, sev], 1)
            for fault in n.gpu_faults:
                on_gpu.add([n.name, getattr(fault, "index", ""), getattr(fault, "uuid", ""), fault.kind,
                            fault.severity], 1)
        yield from (status.family, ready_.family, info.family, problems.family, on_gpu.family)
        by = fl.counts()
        counts = _Family("gpu_doctor_fleet_nodes", "nodes by status", ["status"])
        for k in STATES:
            counts.add([k], by.get(k, 0))
        yield counts.family
        yield _Family("gpu_doctor_fleet_outliers", "nodes' values that differ from the majority",
                      value=by["outliers"]).family
        yield _Family("gpu_doctor_fleet_unreadable_files", "files that are not a readable report",
                      value=by["errors"]).family
        fleet_status = _Family("gpu_doctor_fleet_status", "1 for the fleet's status (ok, warn, fail), 0 for the others",
                               ["status"])
        for s in STATES:
            fleet_status.add([s], 1.0 if fl.status == s else 0.0)
        yield fleet_status.family
        yield _Family("gpu_doctor_fleet_last_run_timestamp_seconds", "when gpu-doctor fleet wrote this (Unix time)",
                      value=time.time() if self.now is None else self.now).family


def registry(collector: Any) -> Any:
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return reg


def _text(collector: Any) -> str:
    from prometheus_client import generate_latest

    return generate_latest(registry(collector)).decode("utf-8")


def render(report: Any, now: float | None = None) -> str:
    return _text(ReportCollector(report, now))


def render_fleet(fleet: Any, now: float | None = None) -> str:
    return _text(FleetCollector(fleet, now))


def write_textfile(report_or_fleet: Any, path: str, fleet: bool = False) -> None:
    """The exposition written to ``path`` as :func:`doctor.render.files.write_output` writes any output:
    atomically for a regular file, through a device or FIFO, never renamed over one."""
    from doctor.render.files import write_output

    write_output(path, render_fleet(report_or_fleet) if fleet else render(report_or_fleet))
