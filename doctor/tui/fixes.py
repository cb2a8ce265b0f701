"""Fix scripts for the fix view: the fix plan of `gpu-doctor fix` for apt, dnf, pip or conda, and the findings'
own steps as plain bash.

A package-manager script is exactly what `gpu-doctor fix --format FMT` prints: the plan from
:func:`doctor.fixplan.build_plan` (the facts, the findings the user picked, the matrix), the renderers
:func:`doctor.commands.fix.renderers` chooses for that format, the script from
:func:`doctor.render.fixscript.render_script`. Nothing is planned or rendered here; with every problem selected
(``F``), the script is byte for byte what the command prints for the same snapshot.

The fix view lists the formats :func:`script_formats` returns (apt or dnf only where the renderer knows the
snapshot's distribution) and shows what :func:`fix_script` gives. Formats that do not exist are never shown.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from doctor.engine import Report
from doctor.findings import Finding

if TYPE_CHECKING:
    from doctor.fixplan import FixPlan


@dataclass(frozen=True)
class ScriptFormat:
    id: str
    label: str
    about: str = ""  # one line under the switcher: what this script covers


BASH = ScriptFormat("bash", "bash: the finding's own steps",
                    "The findings' own fix steps, in order; steps that restart, reboot or destroy data are "
                    "commented out.")
PLAN_FORMATS = ("apt", "dnf", "pip", "conda")  # `gpu-doctor fix --format …`, in the order the view offers them


def plan_for(report: Report, findings: list[Finding]) -> FixPlan:
    """The fix plan `gpu-doctor fix` makes, for these findings only (it plans for failures and warnings)."""
    from doctor.fixplan import build_plan
    from doctor.matrix import current

    return build_plan(report.facts, findings, current())


def script_formats(report: Report, findings: list[Finding]) -> list[ScriptFormat]:
    """The formats a script can be written in for these findings: the plan's formats first (the system's package
    manager where one is supported, then the Python one the environment was installed with, then the other),
    then the findings' own steps."""
    out: list[ScriptFormat] = []
    bash = BASH
    try:
        plan = plan_for(report, findings)
    except Exception as exc:  # a planner bug must not take the view down: the findings' own steps remain
        plan = None
        bash = dataclasses.replace(BASH, about=f"The fix plan could not be made ({type(exc).__name__}: {exc}); "
                                               "these are the findings' own fix steps.")
    if plan is not None and plan.steps:
        out = _plan_formats(plan, "every problem" if len(findings) > 1 else "this finding")
    if any(f.fix for f in findings):
        out.append(bash)
    return out


def _plan_formats(plan: FixPlan, scope: str) -> list[ScriptFormat]:
    from doctor.commands.fix import renderers
    from doctor.render import apt, dnf

    where = plan.os_pretty or f"{plan.os_id or '?'} {plan.os_version or ''}".strip()
    out = []
    for fmt, system in (("apt", apt), ("dnf", dnf)):
        if system.supports(plan.os_id, plan.os_version):
            python = _name(renderers(plan, fmt)[1])
            out.append(ScriptFormat(fmt, fmt, f"gpu-doctor fix --format {fmt}, for {scope}: {fmt} for the system, "
                                              f"{python} for Python ({where})."))
    first = _name(renderers(plan, "auto")[1])  # conda for a conda environment, else pip
    for fmt in sorted(("pip", "conda"), key=lambda f: f != first):
        out.append(ScriptFormat(fmt, fmt, f"gpu-doctor fix --format {fmt}, for {scope}: the Python steps only; "
                                          "the others are listed, not run."))
    return out


def _name(module: object) -> str:
    return getattr(module, "__name__", "?").rsplit(".", 1)[-1]


def fix_script(report: Report, findings: list[Finding], fmt: str = "bash") -> str:
    """The script in one of the formats :func:`script_formats` offered (ValueError for any other)."""
    if fmt == "bash":
        return steps_script(findings)
    if fmt not in PLAN_FORMATS:
        raise ValueError(f"no {fmt} script: the formats are bash, {', '.join(PLAN_FORMATS)}")
    from doctor import __version__
    from doctor.cli import UsageError
    from doctor.commands.fix import renderers
    from doctor.render.fixscript import render_script

    plan = plan_for(report, findings)
    try:
        system, python = renderers(plan, fmt)
    except UsageError as exc:  # apt or dnf for a distribution it does not render
        raise ValueError(str(exc)) from None
    return render_script(plan, system, python, fmt, __version__)


def _comment(text: str) -> list[str]:
    return [f"# {line}".rstrip() for line in text.splitlines()] or ["#"]


def steps_script(findings: list[Finding]) -> str:
    """A bash script for the fixes of these findings, safe to read before it is run.

    Steps that restart something, reboot or destroy data are written commented out: the steps of
    a Fix can be alternatives ("reboot, or reload the module"), so running them all in a row is not
    what the finding asks for. Commands are ``shlex``-quoted by FixStep.shell().
    """
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


def script_file_name(findings: list[Finding], fmt: str = "bash") -> str:
    what = findings[0].code.replace(".", "-") if len(findings) == 1 else "all"
    return f"gpu-doctor-fix-{what}-{fmt}.sh"
