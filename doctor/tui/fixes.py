"""Fix scripts for the fix view — the seam the fix-plan work (`gpu-doctor fix`) replaces.

Today a script is one rendering of a finding's Fix: its summary as comments and its steps'
``FixStep.shell()`` lines. When real fix plans land (a plan from facts + findings + matrix, rendered
for apt, dnf, conda or pip), replace the bodies of :func:`script_formats` and :func:`fix_script`:
both receive the whole report (facts, findings, matrix name) and the findings the user picked. The
fix view only lists the formats :func:`script_formats` returns and shows what :func:`fix_script`
gives, so nothing else in the TUI changes. Formats that do not exist are never shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.engine import Report
from doctor.findings import Finding


@dataclass(frozen=True)
class ScriptFormat:
    id: str
    label: str


BASH = ScriptFormat("bash", "bash: the finding's own steps")
# What the fix-plan work will add; named here so the view can say they are coming, never offered.
PLANNED = ("apt", "dnf", "conda", "pip")


def script_formats(report: Report, findings: list[Finding]) -> list[ScriptFormat]:
    """The formats a script can be written in for these findings (only those that exist)."""
    return [BASH] if any(f.fix for f in findings) else []


def _comment(text: str) -> list[str]:
    return [f"# {line}".rstrip() for line in text.splitlines()] or ["#"]


def fix_script(report: Report, findings: list[Finding], fmt: str = "bash") -> str:
    """A bash script for the fixes of these findings, safe to read before it is run.

    Steps that restart something, reboot or destroy data are written commented out: the steps of
    a Fix can be alternatives ("reboot, or reload the module"), so running them all in a row is not
    what the finding asks for. Commands are ``shlex``-quoted by FixStep.shell().
    """
    if fmt != "bash":
        raise ValueError(f"no {fmt} renderer yet")
    fixable = [f for f in findings if f.fix]
    out = ["#!/usr/bin/env bash",
           "# Written by gpu-doctor from its findings; read each step first.",
           "# Steps that restart, reboot or destroy data are commented out:",
           "# uncomment the ones you choose.",
           "set -euo pipefail"]
    if not fixable:
        return "\n".join([*out, "", "# Nothing to fix: no finding here carries a fix.", ""])
    for f in fixable:
        assert f.fix is not None
        out += ["", f"# --- {f.code}: {f.severity}", *_comment(f.title), "#", *_comment(f.fix.summary)]
        if not f.fix.steps:
            out.append("# (no command is recorded for this fix: follow the text above)")
        for step in f.fix.steps:
            note = f"  ({step.note})" if step.note else ""
            if step.risk == "safe":
                out += [f"# risk: safe{note}", step.shell()]
            else:
                out += [f"# risk: {step.risk}{note} — uncomment to run", f"# {step.shell()}"]
    return "\n".join(out) + "\n"


def script_file_name(findings: list[Finding]) -> str:
    if len(findings) == 1:
        return f"gpu-doctor-fix-{findings[0].code.replace('.', '-')}.sh"
    return "gpu-doctor-fix-all.sh"
