"""The human report: grouped by area, one ✓ / ! / ✗ line per finding, a summary line at the end."""

from __future__ import annotations

import os
import sys
import textwrap
from typing import Any, TextIO

from doctor.model.facts import Facts
from doctor.model.findings import AREAS, Finding, value_text
from doctor.model.report import Report, collected_by_probes
from doctor.model.severity import MARKS
from doctor.safeio import display

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
    lines = [f"gpu-doctor — {host or 'unknown host'}", f"{drv}; {cuda}; {gpu}{matrix}"]
    if report.mode != "static" or f.python_envs:
        lines.append(python_line(f))
    return display("\n".join(lines))


WHY_THIS_PYTHON = {"--python": "given with --python", "VIRTUAL_ENV": "$VIRTUAL_ENV", "CONDA_PREFIX": "$CONDA_PREFIX",
                   "PATH": "python3 on PATH", "collect_env": "from the collect_env report"}


def python_line(facts: Facts) -> str:
    """Which interpreter(s) were checked and why each one: the user's code may run in another."""
    envs = [f"{e.executable} ({WHY_THIS_PYTHON.get(e.origin or '', e.origin or 'origin unknown')})"
            for e in facts.python_envs]
    line = "python: " + (", ".join(envs) if envs else "none checked")
    skipped = [e.reason for e in facts.errors if e.probe == "python:own-environment"]
    return line + "".join(f" · {s}" for s in skipped)


def render(report: Report, verbose: bool = False, colour: bool | None = None, stream: TextIO | None = None) -> str:
    """The report for a terminal. Every value from the facts passes :func:`display`: a GPU name or a path
    holding ESC, C1 or NUL characters is shown escaped, never sent to the terminal."""
    colour = use_colour(stream or sys.stdout) if colour is None else colour
    lines = [header(report), ""]
    areas = [a for a in AREAS if any(x.area == a for x in report.findings)]
    areas += sorted({x.area for x in report.findings} - set(areas))
    for area in areas:
        lines.append(display(area, line=True))
        for fnd in (x for x in report.findings if x.area == area):
            lines += _finding_lines(fnd, verbose, colour)
        lines.append("")
    if not verbose:
        lines += deep_lines(report.facts)  # -v shows the same within each environment
    if verbose:
        lines += environment_lines(report.facts)
        quiet = [c for c in report.checks if c.status in ("skipped", "not_applicable")]
        if quiet:
            lines.append("Not checked")
            lines += not_checked_lines(quiet)
            lines.append("")
        if report.facts.errors:
            lines.append("What the probes could not learn" if collected_by_probes(report.facts)
                         else "What the report does not say")
            lines += [display(f"  - {e.probe}: {e.reason}", line=True) for e in report.facts.errors]
            lines.append("")
    lines.append(summary(report))
    return "\n".join(lines) + "\n"


def environment_lines(facts: Facts) -> list[str]:
    """-v: each checked environment's GPU-relevant packages, and what --deep learned by importing them."""
    if not facts.python_envs:
        return []
    out = ["Python environments"]
    for env in facts.python_envs:
        why = WHY_THIS_PYTHON.get(env.origin or "", env.origin or "origin unknown")
        out.append(f"  {env.executable} ({why})" + (f": Python {env.version}" if env.version else ""))
        if env.error:
            out.append(f"    not readable: {env.error}")
        for pkg in env.packages:
            build = "CPU-only build" if pkg.cpu_only else (f"CUDA {pkg.cuda}" if pkg.cuda else "")
            extra = [x for x in (build, pkg.cudnn and f"cuDNN {pkg.cudnn}") if x]
            out.append(f"    {pkg.name} {pkg.version or '(version unknown)'}" + (f": {', '.join(extra)}" if extra
                                                                                  else ""))
            if pkg.deep is not None:
                d = pkg.deep
                if d.error:
                    out.append(f"      --deep: the import failed: {value_text(d.error)}")
                else:
                    learned = [f"is_available {value_text(d.is_available)}",
                               f"{value_text(d.device_count)} device(s)",
                               f"arch list {value_text(d.arch_list)}"]
                    learned += [f"CUDA {d.cuda}"] if d.cuda else []
                    learned += [f"cuDNN {d.cudnn}"] if d.cudnn else []
                    out.append(f"      --deep: {', '.join(learned)}")
                if pkg.loaded_libraries is not None:
                    libs = pkg.loaded_libraries
                    out.append(f"      --deep: CUDA libraries mapped: {', '.join(libs) if libs else 'none'}")
    out.append("")
    return [display(line, line=True) for line in out]  # paths, versions and import errors are data


def deep_lines(facts: Facts) -> list[str]:
    """check --deep: what importing each framework taught (its answers, the CUDA libraries it mapped), so the
    slower run shows what it bought. Nothing when --deep did not run."""
    out = []
    for env in facts.python_envs:
        for pkg in env.packages:
            if pkg.deep is None and pkg.loaded_libraries is None:
                continue
            out.append(f"  {pkg.name} {pkg.version or '(version unknown)'} in {env.executable}")
            d = pkg.deep
            if d is not None and d.error:
                out.append(f"    the import failed: {value_text(d.error)}")
            elif d is not None:
                said = [f"CUDA available {value_text(d.is_available)}", f"{value_text(d.device_count)} device(s)"]
                said += [f"CUDA {d.cuda}"] if d.cuda else []
                said += [f"cuDNN {d.cudnn}"] if d.cudnn else []
                said += [f"architectures {', '.join(d.arch_list)}"] if d.arch_list else []
                out.append(f"    said: {'; '.join(said)}")
            if pkg.loaded_libraries is not None:
                libs = pkg.loaded_libraries
                names = ", ".join(dict.fromkeys(os.path.basename(lib) for lib in libs)) if libs else "none"
                out.append(f"    mapped: {names}")
                out += [f"      from {d}" for d in dict.fromkeys(os.path.dirname(lib) for lib in libs)]
    if not out:
        return []
    return [display(line, line=True) for line in ["What --deep learned", *out, ""]]


def not_checked_lines(quiet: list[Any]) -> list[str]:
    """The checks that did not run, each reason said once: checks skipped for one reason share its line."""
    by_reason: dict[str, list[str]] = {}
    for c in quiet:
        by_reason.setdefault(str(c.reason), []).append(c.id)
    out = []
    for reason, ids in by_reason.items():
        if len(ids) == 1:
            out.append(display(f"  - {ids[0]}: {reason}", line=True))
            continue
        out.append(display(f"  - {reason}:", line=True))
        out += [display(line, line=True) for line in textwrap.wrap(", ".join(ids), 100, initial_indent="      ",
                                                                   subsequent_indent="      ")]
    return out


def _finding_lines(f: Finding, verbose: bool, colour: bool) -> list[str]:
    out = [f"  {_paint(MARKS[f.severity], f.severity, colour)} {display(f.title, line=True)}"]
    problem = f.severity in ("fail", "warn")
    if problem or verbose:
        if f.detail:
            out += [display(f"      {line}", line=True) for line in _lines(f.detail)]
        if f.fix:
            out += [display(f"      fix: {line}" if i == 0 else f"           {line}", line=True)
                    for i, line in enumerate(_lines(f.fix.summary))]
            # a command keeps its own newlines (a file's content in printf): escaped, it would copy differently
            out += [display(f"        $ {s.shell()}" + (f"   # {s.note}" if s.note else "")) for s in f.fix.steps]
    if verbose:
        out += [display(f"      evidence: {e.line()}", line=True) for e in f.evidence]
        # A passing line names the check that passed, not the code it would fail with.
        out.append(display(f"      code: {f.code}" if problem else f"      check: {f.check or f.code}", line=True))
    return out


def _lines(text: str) -> list[str]:
    # split on "\n" only: str.splitlines() also splits on \x1c-\x1e, \x85 and U+2028, which display() escapes
    return text.split("\n")


def summary(report: Report) -> str:
    counts = {s: sum(1 for f in report.findings if f.severity == s) for s in ("fail", "warn", "ok")}
    word = {"fail": "NOT READY", "warn": "usable, with warnings", "ok": "ready",
            "unknown": "UNKNOWN (too little evidence: the driver, GPU and framework checks could not run)"
            }[report.status]
    return f"{word}: {counts['fail']} failure(s), {counts['warn']} warning(s), {counts['ok']} ok"
