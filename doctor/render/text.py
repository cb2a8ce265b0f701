"""The human report: grouped by area, one ✓ / ! / ✗ line per finding, a summary line at the end."""

from __future__ import annotations

import os
import sys
from typing import TextIO

from doctor.engine import Report
from doctor.findings import AREAS, Finding

MARKS = {"ok": "✓", "info": "·", "warn": "!", "fail": "✗"}
COLOURS = {"ok": "32", "info": "2", "warn": "33", "fail": "31"}


def use_colour(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if "NO_COLOR" in os.environ:
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def _paint(text: str, severity: str, colour: bool) -> str:
    return f"\x1b[{COLOURS[severity]}m{text}\x1b[0m" if colour else text


def header(report: Report) -> str:
    f = report.facts
    d = f.driver
    host = " ".join(x for x in (f.host.os_pretty, f.host.kernel and f"kernel {f.host.kernel}") if x)
    module = d.kernel_module or ("not loaded" if d.module_loaded is False or d.nvml_error else "unknown")
    drv = f"driver: module {module}, user space {d.userspace or ('none' if 'driver' in f.sources else 'unknown')}"
    if report.mode == "static":
        drv = f"image check (--static): host driver {d.kernel_module or 'not given (--host-driver)'}"
    cuda = (f"CUDA driver API {d.cuda_driver_api}" if d.cuda_driver_api else
            f"CUDA driver API {d.smi_cuda_version} (nvidia-smi)" if d.smi_cuda_version else "CUDA driver API unknown")
    gpus = [g for g in f.gpus if g.source != "pci"]
    gpu = f"{len(gpus)} GPU(s) visible" if gpus else (
        f"{f.host.pci_nvidia_gpus} NVIDIA GPU(s) on PCI" if f.host.pci_nvidia_gpus else "no GPU visible")
    matrix = f"; {report.matrix}" if report.matrix else ""
    return f"gpu-doctor — {host or 'unknown host'}\n{drv}; {cuda}; {gpu}{matrix}"


def render(report: Report, verbose: bool = False, colour: bool | None = None, stream: TextIO | None = None) -> str:
    colour = use_colour(stream or sys.stdout) if colour is None else colour
    lines = [header(report), ""]
    areas = [a for a in AREAS if any(x.area == a for x in report.findings)]
    areas += sorted({x.area for x in report.findings} - set(areas))
    for area in areas:
        lines.append(area)
        for fnd in (x for x in report.findings if x.area == area):
            lines += _finding_lines(fnd, verbose, colour)
        lines.append("")
    if verbose:
        quiet = [c for c in report.checks if c.status in ("skipped", "not_applicable")]
        if quiet:
            lines.append("Not checked")
            lines += [f"  - {c.id}: {c.reason}" for c in quiet]
            lines.append("")
        if report.facts.errors:
            lines.append("What the probes could not learn")
            lines += [f"  - {e.probe}: {e.reason}" for e in report.facts.errors]
            lines.append("")
    lines.append(summary(report))
    return "\n".join(lines) + "\n"


def _finding_lines(f: Finding, verbose: bool, colour: bool) -> list[str]:
    out = [f"  {_paint(MARKS[f.severity], f.severity, colour)} {f.title}"]
    problem = f.severity in ("fail", "warn")
    if problem or verbose:
        if f.detail and (problem or verbose):
            out += [f"      {line}" for line in f.detail.splitlines()]
        if f.fix:
            out += [f"      fix: {line}" if i == 0 else f"           {line}"
                    for i, line in enumerate(f.fix.summary.splitlines())]
            out += [f"        $ {s.shell()}" + (f"   # {s.note}" if s.note else "") for s in f.fix.steps]
    if verbose:
        out += [f"      evidence: {e.line()}" for e in f.evidence]
        out.append(f"      code: {f.code}")
    return out


def summary(report: Report) -> str:
    counts = {s: sum(1 for f in report.findings if f.severity == s) for s in ("fail", "warn", "ok")}
    word = {"fail": "NOT READY", "warn": "usable, with warnings", "ok": "ready",
            "unknown": "UNKNOWN (too little evidence: the driver, GPU and framework checks could not run)"
            }[report.status]
    return f"{word}: {counts['fail']} failure(s), {counts['warn']} warning(s), {counts['ok']} ok"
