"""Markdown for an issue or a ticket: the verdict, a table per area, each problem in full (its detail, evidence
and fix), the facts in a collapsible block. The one Markdown of a report: `check --format markdown` and the TUI's
export both write it."""

from __future__ import annotations

import json

from doctor.model.findings import AREAS, Finding, value_text
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


def _text(text: str) -> str:
    """A paragraph: its line breaks kept, no HTML, no control character."""
    return "\n".join(display(line.replace("<", "&lt;").replace(">", "&gt;"), line=True)
                     for line in str(text).replace("\r\n", "\n").split("\n"))


def render(report: Report, title: str = "") -> str:
    """The report as Markdown; ``title`` names it (the TUI's export asks the user for one)."""
    lines = [f"## gpu-doctor report{': ' + _cell(title) if title else ''}", "",
             *[f"> {line}" for line in header(report).splitlines()], "", f"**{summary(report)}**", ""]
    areas = [a for a in AREAS if any(f.area == a for f in report.findings)]
    areas += sorted({f.area for f in report.findings} - set(areas))
    for area in areas:
        lines += [f"### {area}", "", "| | finding | code or check |", "| --- | --- | --- |"]
        for f in (x for x in report.findings if x.area == area):
            ident = f.code if f.severity in ("fail", "warn") else (f.check or f.code)  # a pass has no failure code
            lines.append(f"| {MARKS[f.severity]} | {_cell(f.title)} | `{_cell(ident)}` |")
        lines.append("")
    problems = [f for f in report.findings if f.severity in ("fail", "warn")]
    if problems:
        lines += ["### How to fix", ""]
        for f in problems:
            lines += _problem(f)
    # ensure_ascii: every control character and surrogate is a JSON escape, and a backtick fence cannot occur
    lines += ["<details><summary>Facts (gpu-doctor.facts/v1)</summary>", "", "```json",
              json.dumps(report.facts.to_dict(), indent=2, ensure_ascii=True), "```", "", "</details>", ""]
    return "\n".join(lines)


def _problem(f: Finding) -> list[str]:
    """One problem in full: its title, why it matters, the evidence with its sources, the fix and its commands."""
    lines = [f"#### {MARKS[f.severity]} {_cell(f.title)}", ""]
    if f.detail:
        lines += [_text(f.detail), ""]
    if f.evidence:
        lines += ["Evidence:", ""]
        lines += [f"- `{_cell(e.fact)}` = `{_cell(value_text(e.value))}`"
                  + (f" ({_cell(e.source)})" if e.source else "") for e in f.evidence]
        lines.append("")
    if f.fix:
        lines += [f"Fix: {_cell(f.fix.summary)}", ""]
        if f.fix.steps:
            lines += ["```bash", *[_code(s.shell()) for s in f.fix.steps], "```", ""]
    lines += [f"`{_cell(f.code)}` · check `{_cell(f.check)}`" if f.check and f.check != f.code else
              f"`{_cell(f.code)}`", ""]
    return lines
