"""GitHub Actions workflow commands: one `::error` / `::warning` / `::notice` line per finding, with
``file=`` and ``line=`` where the finding points at a file (check --dockerfile), so a CI step annotates
the Dockerfile line in the pull request. GitHub places an annotation by the file's path in the
repository: a path is written relative to ``$GITHUB_WORKSPACE`` (the checkout) when it lies inside it.
Failing and warning findings are errors and warnings; an information finding becomes a notice only when
it points at a line (the minimum host driver an image needs, a RUN line whose effect is unknown).
Values are escaped as the workflow-command syntax requires."""

from __future__ import annotations

from typing import Any

from doctor.render.locations import location, relative
from doctor.render.text import summary
from doctor.safeio import display

LEVEL = {"fail": "error", "warn": "warning", "info": "notice"}


def _data(text: str) -> str:
    # display(): an ESC or C1 from the facts must not colour or rewrite the CI log either
    return display(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(report: Any, strict: bool = False, workspace: str | None = None, cwd: str | None = None) -> str:
    lines = []
    for f in report.findings:
        level = LEVEL.get(f.severity)
        where = location(f)
        if level is None or (f.severity == "info" and where is None):
            continue
        if strict and level == "warning":
            level = "error"
        title = f.title
        props = []
        if where:
            props += [f"file={_prop(relative(where[0], workspace, cwd))}", f"line={where[1]}"]
            title = title.removeprefix(f"{where[0]}:{where[1]}: ")
        props.append(f"title={_prop(f.code)}")
        body = [title]
        if f.detail and f.severity in ("fail", "warn"):
            body.append(f.detail)
        if f.fix:
            body.append("fix: " + f.fix.summary)
        lines.append(f"::{level} {','.join(props)}::{_data(chr(10).join(body))}")
    lines.append(f"gpu-doctor: {summary(report)}")
    return "\n".join(lines) + "\n"
