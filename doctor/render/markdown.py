"""Markdown for pasting into an issue: the verdict, a table per area, fixes, facts in a collapsible block."""

from __future__ import annotations

import json

from doctor.model.findings import AREAS
from doctor.model.report import Report
from doctor.model.severity import MARKS
from doctor.render.text import header, summary
from doctor.safeio import display


def _cell(text: str) -> str:
    """One table cell or list item: no line break, no pipe, no HTML, no control character."""
    flat = str(text).replace("\r\n", " ").replace("\n", " ")
    return display(flat.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;"),
                   line=True)


def _code(text: str) -> str:
    """A line inside a fenced code block: shown literally, so only control characters need escaping."""
    return display(text, line=True)


def render(report: Report) -> str:
    lines = ["## gpu-doctor report", "", *[f"> {line}" for line in header(report).splitlines()], "",
             f"**{summary(report)}**", ""]
    areas = [a for a in AREAS if any(f.area == a for f in report.findings)]
    areas += sorted({f.area for f in report.findings} - set(areas))
    for area in areas:
        lines += [f"### {area}", "", "| | finding | code or check |", "| --- | --- | --- |"]
        for f in (x for x in report.findings if x.area == area):
            ident = f.code if f.severity in ("fail", "warn") else (f.check or f.code)  # a pass has no failure code
            lines.append(f"| {MARKS[f.severity]} | {_cell(f.title)} | `{_cell(ident)}` |")
        lines.append("")
    fixes = [f for f in report.findings if f.fix and f.severity in ("fail", "warn")]
    if fixes:
        lines += ["### How to fix", ""]
        for f in fixes:
            lines.append(f"- **{_cell(f.title)}** — {_cell(f.fix.summary)}")  # type: ignore[union-attr]
            cmds = [s.shell() for s in f.fix.steps]  # type: ignore[union-attr]
            if cmds:
                lines += ["  ```bash", *[f"  {_code(c)}" for c in cmds], "  ```"]
        lines.append("")
    # ensure_ascii: every control character and surrogate is a JSON escape, and a backtick fence cannot occur
    lines += ["<details><summary>Facts (gpu-doctor.facts/v1)</summary>", "", "```json",
              json.dumps(report.facts.to_dict(), indent=2, ensure_ascii=True), "```", "", "</details>", ""]
    return "\n".join(lines)
