"""GitHub Actions workflow commands: one `::error` / `::warning` / `::notice` line per finding, with
``file=`` and ``line=`` where the finding points at a file (check --dockerfile), so a CI step annotates
the Dockerfile line in the pull request. Values are escaped as the workflow-command syntax requires."""

from __future__ import annotations

from typing import Any

from doctor.render.text import summary
from doctor.safeio import display, small_int

LEVEL = {"fail": "error", "warn": "warning", "info": "notice"}


def _data(text: str) -> str:
    # display(): an ESC or C1 from the facts must not colour or rewrite the CI log either
    return display(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def location(finding: Any) -> tuple[str, int] | None:
    """(file, line) from the finding's ``dockerfile`` evidence (``path:line``), if any."""
    for e in finding.evidence:
        if e.fact == "dockerfile" and isinstance(e.value, str) and ":" in e.value:
            path, _, line = e.value.rpartition(":")
            if small_int(line) is not None:
                return path, int(line)
    return None


def render(report: Any, strict: bool = False) -> str:
    lines = []
    for f in report.findings:
        level = LEVEL.get(f.severity)
        if level is None or not report.announced(f):
            continue
        if strict and level == "warning":
            level = "error"
        where = location(f)
        title = f.title
        props = []
        if where:
            props += [f"file={_prop(where[0])}", f"line={where[1]}"]
            prefix = f"{where[0]}:{where[1]}: "
            title = title.removeprefix(prefix)
        props.append(f"title={_prop(f.code)}")
        body = [title]
        if f.detail and f.severity in ("fail", "warn"):
            body.append(f.detail)
        if f.fix:
            body.append("fix: " + f.fix.summary)
        lines.append(f"::{level} {','.join(props)}::{_data(chr(10).join(body))}")
    lines.append(f"gpu-doctor: {summary(report)}")
    return "\n".join(lines) + "\n"
