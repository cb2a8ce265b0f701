"""Fix scripts for the fix view: the one fix plan of `gpu-doctor fix`, rendered for apt, dnf, pip or conda.

A script is exactly what `gpu-doctor fix --format FMT` prints: the plan from :func:`doctor.pipeline.plan`
(the facts, the findings the user picked, the matrix; pip and conda take the plan's Python-only routes), the
renderers :func:`doctor.pipeline.script_renderers` chooses for that format, the script from
:func:`doctor.pipeline.fix_script`. Nothing is planned or rendered here — there is no second script
writer — so with every problem selected (``F``) the script is byte for byte what the command prints.

The fix view lists the formats :func:`script_formats` returns (apt or dnf only where the renderer knows the
snapshot's distribution) and shows what :func:`fix_script` gives. Formats that do not exist are never shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from doctor.model.findings import Finding
from doctor.model.report import Report

if TYPE_CHECKING:
    from doctor.model.plan import FixPlan


@dataclass(frozen=True)
class ScriptFormat:
    id: str
    label: str
    about: str = ""  # one line under the switcher: what this script covers


PLAN_FORMATS = ("apt", "dnf", "pip", "conda")  # `gpu-doctor fix --format …`, in the order the view offers them


def plan_for(report: Report, findings: list[Finding], python_only: bool = False) -> FixPlan:
    """The fix plan `gpu-doctor fix` makes, for these findings only (it plans for failures and warnings)."""
    from doctor import pipeline

    return pipeline.plan(report.facts, findings, python_only=python_only)


def script_formats(report: Report, findings: list[Finding]) -> list[ScriptFormat]:
    """The formats a script can be written in for these findings: the system's package manager where one is
    supported, then the Python one the environment was installed with, then the other. None when the plan has
    no step (or could not be made: a planner bug is never shown as half a plan)."""
    try:
        plan = plan_for(report, findings)
    except Exception:  # a planner bug must not take the view down
        return []
    if not plan.steps:
        return []
    return _plan_formats(plan, "every problem" if len(findings) > 1 else "this finding")


def _plan_formats(plan: FixPlan, scope: str) -> list[ScriptFormat]:
    from doctor.pipeline import script_renderers as renderers
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
        out.append(ScriptFormat(fmt, fmt, f"gpu-doctor fix --format {fmt}, for {scope}: what the Python "
                                          "environment alone can do; what needs the system is named, not run."))
    return out


def _name(module: object) -> str:
    return getattr(module, "__name__", "?").rsplit(".", 1)[-1]


def fix_script(report: Report, findings: list[Finding], fmt: str = "apt") -> str:
    """The script in one of the formats :func:`script_formats` offered (ValueError for any other)."""
    if fmt not in PLAN_FORMATS:
        raise ValueError(f"no {fmt} script: the formats are {', '.join(PLAN_FORMATS)}")
    from doctor.pipeline import PYTHON_FORMATS, fix_script

    plan = plan_for(report, findings, python_only=fmt in PYTHON_FORMATS)
    return fix_script(plan, fmt)  # ScriptFormatError (a ValueError): apt or dnf for a distribution it does not render


def script_file_name(findings: list[Finding], fmt: str = "apt") -> str:
    what = findings[0].code.replace(".", "-") if len(findings) == 1 else "all"
    return f"gpu-doctor-fix-{what}-{fmt}.sh"
