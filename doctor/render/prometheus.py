"""The report as Prometheus metrics (exposition format), written with the official ``prometheus_client``.

For node_exporter's textfile collector: ``gpu-doctor check --format prometheus --output
/var/lib/node_exporter/textfile_collector/gpu_doctor.prom`` (``write_to_textfile`` renames a temporary file
over the target, so a scrape never reads half a file). DCGM's exporter covers the hardware counters; these
say whether the software stack can run the work. Names (all ``gpu_doctor_*``, documented in the README):

* ``gpu_doctor_status{status}``            1 for the report's status (ok | warn | fail | unknown), 0 for the others
* ``gpu_doctor_ready``                     1 when no check fails and there was evidence to say so (ok, warn)
* ``gpu_doctor_check_status{check,area,status}``  1, one series per check, with its status
  (ok | info | warn | fail | skipped | not_applicable | crashed)
* ``gpu_doctor_findings{severity}``        findings per severity
* ``gpu_doctor_gpus``                      GPUs visible
* ``gpu_doctor_versions_info{…}``          1, the driver / CUDA / cuDNN / framework versions as labels
* ``gpu_doctor_active_value{subject,figure,unit}``  rates the active tests measured, where present
  (subject "GPU 0", "torch", "nccl-tests"; figure device_gbs, fp32_tflops, bf16_tflops, nccl_busbw …)
* ``gpu_doctor_last_run_timestamp_seconds``  when the report was made
* fleet: ``gpu_doctor_node_status{node,status}``, ``gpu_doctor_node_ready{node}``,
  ``gpu_doctor_node_problem{node,code,severity}``,
  ``gpu_doctor_node_info{node,driver,cuda_driver_api,toolkit,framework,gpu_model,gpus}``,
  ``gpu_doctor_fleet_nodes{status}``, ``gpu_doctor_fleet_status{status}``, ``gpu_doctor_fleet_outliers``,
  ``gpu_doctor_fleet_unreadable_files``

``prometheus_client`` is imported here only, so `check` in its other formats never loads it.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator
from typing import Any

CHECK_STATES = ("ok", "info", "warn", "fail", "skipped", "not_applicable", "crashed")
STATES = ("ok", "warn", "fail", "unknown")  # a report's status; unknown: too little evidence to say ready


def ready(status: str) -> float:
    """1 when the node can take work: nothing failed and there was evidence to say so."""
    return 1.0 if status in ("ok", "warn") else 0.0
FIGURE = re.compile(r"(tflops|gflops|gbs|gb_s|bandwidth|busbw|algbw)$")


def versions(report: Any) -> dict[str, str]:
    """The versions worth a label: driver, CUDA driver API, toolkits, cuDNN, frameworks, OS, kernel, GPU."""
    f = report.facts
    out = {
        "driver": f.driver.kernel_module or f.driver.userspace or "",
        "cuda_driver_api": f.driver.cuda_driver_api or "",
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


def active_figures(active: Any) -> list[tuple[str, str, str, float]]:
    """(subject, figure, unit, value) for every rate the active tests measured: through the active section's
    own ``measurements()`` (doctor.model.facts_active) when it exists, else by walking the section for numeric
    fields whose name says they are a rate (…_tflops, …_gbs, busbw …)."""
    if active is None:
        return []
    try:
        from doctor.model.facts_active import MEASURES, measurements
    except ImportError:
        measurements = None
    if measurements is not None and not isinstance(active, dict):
        out = []
        for label, (_name, value) in measurements(active).items():
            subject, _, key = label.rpartition(" ")
            out.append((subject or "node", key, MEASURES.get(key, ("", ""))[1], float(value)))
        return out
    return list(_walk(dataclasses.asdict(active) if dataclasses.is_dataclass(active) else active, [], ""))


def _walk(node: Any, path: list[str], gpu: str) -> Iterator[tuple[str, str, str, float]]:
    if isinstance(node, dict):
        g = str(node["index"]) if isinstance(node.get("index"), int) else gpu
        for k, v in node.items():
            if isinstance(v, bool):
                continue
            if isinstance(v, (int, float)) and FIGURE.search(str(k)):
                unit = "TFLOP/s" if "flops" in str(k) else "GB/s" if re.search(r"gbs|gb_s|bw|bandwidth", str(k)) else ""
                yield (f"GPU {g}" if g else ".".join(path) or "node"), str(k), unit, float(v)
            elif isinstance(v, (dict, list)):
                yield from _walk(v, [*path, str(k)], g)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item, path, gpu)


class ReportCollector:
    """A prometheus_client collector over one report (gpu-doctor check)."""

    def __init__(self, report: Any) -> None:
        self.report = report

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily

        r = self.report
        status = GaugeMetricFamily("gpu_doctor_status", "1 for the report's status (ok, warn, fail, unknown)",
                                   labels=["status"])
        for s in STATES:
            status.add_metric([s], 1.0 if r.status == s else 0.0)
        yield status
        yield GaugeMetricFamily("gpu_doctor_ready", "1 when no gpu-doctor check fails and the evidence says ready",
                                value=ready(r.status))
        checks = GaugeMetricFamily("gpu_doctor_check_status", "1 per check, labelled with its status",
                                   labels=["check", "area", "status"])
        for c in r.checks:
            checks.add_metric([c.id, c.area, c.status], 1.0)
        yield checks
        findings = GaugeMetricFamily("gpu_doctor_findings", "findings by severity", labels=["severity"])
        for sev in ("fail", "warn", "info", "ok"):
            findings.add_metric([sev], float(sum(1 for f in r.findings if f.severity == sev)))
        yield findings
        yield GaugeMetricFamily("gpu_doctor_gpus", "GPUs visible",
                                value=float(len([g for g in r.facts.gpus if g.source != "pci"])))
        yield InfoMetricFamily("gpu_doctor_versions", "driver, CUDA, cuDNN and framework versions",
                               value=versions(r))
        figures = active_figures(getattr(r.facts, "active", None))
        if figures:
            fam = GaugeMetricFamily("gpu_doctor_active_value", "rates the active tests measured (larger is better)",
                                    labels=["subject", "figure", "unit"])
            for subject, name, unit, value in figures:
                fam.add_metric([subject, name, unit], value)
            yield fam
        yield GaugeMetricFamily("gpu_doctor_last_run_timestamp_seconds", "when this report was made",
                                value=time.time())


class FleetCollector:
    """A prometheus_client collector over a fleet (gpu-doctor fleet): one series per node."""

    def __init__(self, fleet: Any) -> None:
        self.fleet = fleet

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily

        fl = self.fleet
        status = GaugeMetricFamily("gpu_doctor_node_status", "1 for each node's status", labels=["node", "status"])
        ready_ = GaugeMetricFamily("gpu_doctor_node_ready", "1 when no check fails on the node", labels=["node"])
        info = InfoMetricFamily("gpu_doctor_node", "each node's versions", labels=["node"])
        for n in fl.nodes:
            for s in STATES:
                status.add_metric([n.name, s], 1.0 if n.status == s else 0.0)
            ready_.add_metric([n.name], ready(n.status))
            info.add_metric([n.name], {"driver": n.driver or "", "cuda_driver_api": n.cuda_driver_api or "",
                                       "toolkit": n.toolkit or "", "framework": n.framework or "",
                                       "gpu_model": n.gpu_model or "", "gpus": str(n.gpu_count)})
        problems = GaugeMetricFamily("gpu_doctor_node_problem", "1 per failing or warning finding code on a node",
                                     labels=["node", "code", "severity"])
        for n in fl.nodes:
            for pr in n.problems:
                problems.add_metric([n.name, pr.code, pr.severity], 1.0)
        yield status
        yield ready_
        yield info
        yield problems
        counts = GaugeMetricFamily("gpu_doctor_fleet_nodes", "nodes by status", labels=["status"])
        by = fl.counts()
        for k in STATES:
            counts.add_metric([k], float(by.get(k, sum(1 for n in fl.nodes if n.status == k))))
        yield counts
        yield GaugeMetricFamily("gpu_doctor_fleet_outliers", "nodes' values that differ from the majority",
                                value=float(by["outliers"]))
        yield GaugeMetricFamily("gpu_doctor_fleet_unreadable_files", "files that are not a readable report",
                                value=float(by["errors"]))
        yield _fleet_status(fl)


def _fleet_status(fl: Any) -> Any:
    from prometheus_client.core import GaugeMetricFamily

    fam = GaugeMetricFamily("gpu_doctor_fleet_status", "1 for the fleet's status (ok, warn, fail)", labels=["status"])
    for s in STATES:
        fam.add_metric([s], 1.0 if fl.status == s else 0.0)
    return fam


def registry(collector: Any) -> Any:
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return reg


def render(report: Any) -> str:
    from prometheus_client import generate_latest

    return generate_latest(registry(ReportCollector(report))).decode("utf-8")


def render_fleet(fleet: Any) -> str:
    from prometheus_client import generate_latest

    return generate_latest(registry(FleetCollector(fleet))).decode("utf-8")


def write_textfile(report_or_fleet: Any, path: str, fleet: bool = False) -> None:
    """prometheus_client's write_to_textfile: a temporary file in the same directory renamed over ``path``."""
    from prometheus_client import write_to_textfile

    from doctor.render.files import OutputError

    collector = FleetCollector(report_or_fleet) if fleet else ReportCollector(report_or_fleet)
    try:
        write_to_textfile(path, registry(collector))
    except OSError as exc:
        raise OutputError(f"{path}: {exc.strerror or exc}") from None
