"""The fix under a finding: the plan's own steps for it, rendered as one sentence and the commands a person types.

This is what `check` prints under a finding and what ``explain`` and the TUI show; every other rendering of the same
plan is a script (:mod:`doctor.render.fixscript` with apt, dnf, pip or conda). A finding's fix is the plan's, never
a second opinion: :func:`with_plan_fixes` replaces a check's own wording with the plan's steps, except where the
plan carries out the check's intent as given (its wording, with the commands, says the same thing) or leaves it to
a person (the check's commands stay).
"""

from __future__ import annotations

import dataclasses

from doctor.model.findings import Finding, Fix, FixStep
from doctor.model.plan import FixPlan
from doctor.model.remedy import (
    AttachGpu,
    BlacklistNouveau,
    HoldPackages,
    InstallContainerToolkit,
    LoadModule,
    Manual,
    PipInstall,
    Reboot,
    RebuildDkms,
    ReinstallTorch,
    ReloadDriver,
    UnsetEnvVar,
)


def fix_for(plan: FixPlan, index: int) -> Fix | None:
    """The fix shown under finding number ``index``: the plan's own steps for it, in the plan's order."""
    steps = [s for s in plan.steps if index in s.findings]
    if not steps:
        return None
    parts: list[str] = []
    commands: list[FixStep] = []
    system = False
    for s in steps:
        manual = [a for a in s.actions if isinstance(a, Manual)]
        if all(isinstance(a, Manual) for a in s.actions):
            parts.append(" ".join(a.text for a in manual))
            continue
        short = [f"pip install torch=={a.version} {' '.join(a.companions)} --index-url {a.index_url}".replace("  ", " ")
                 for a in s.actions if isinstance(a, ReinstallTorch)]
        short += [f"pip install {' '.join(a.requirements)}" for a in s.actions if isinstance(a, PipInstall)]
        parts.append(s.why + (": " + "; ".join(f"`{c}`" for c in short) if short else ""))
        for a in s.actions:
            if isinstance(a, ReinstallTorch):
                if a.replace_cpu:
                    commands.append(FixStep([a.python, "-m", "pip", "uninstall", "-y", "torch"],
                                            note="a CPU-only build counts as 'already satisfied'"))
                commands.append(FixStep([a.python, "-m", "pip", "install", f"torch=={a.version}", *a.companions,
                                         "--index-url", a.index_url]))
            elif isinstance(a, PipInstall):
                commands.append(FixStep([a.python, "-m", "pip", "install", *a.requirements]))
            elif not isinstance(a, (Manual, Reboot)):
                system = True
    summary = ". ".join(p.rstrip(".") for p in parts if p) + "."
    if system:
        summary += " (`gpu-doctor fix` writes the commands for this distribution.)"
    return Fix(summary=summary, steps=commands)


# Intents the planner carries out as given (it chooses no version, package or branch for them): when the plan's
# step for a finding starts with that very action, the check's own wording of it — with the commands a person
# types — says the same thing as the plan and stays.
_VERBATIM: dict[type, tuple[type, ...]] = {
    BlacklistNouveau: (BlacklistNouveau,), LoadModule: (LoadModule,), RebuildDkms: (RebuildDkms,),
    ReloadDriver: (HoldPackages, Reboot), InstallContainerToolkit: (InstallContainerToolkit,),
    UnsetEnvVar: (Manual,), AttachGpu: (Manual,),
}


def with_plan_fixes(findings: list[Finding], plan: FixPlan, python_plan: FixPlan | None = None) -> list[Finding]:
    """Findings whose fix is the plan's: a finding with intents shows the step the plan made of them, and, when
    the plan changes the system but the finding also named a route inside the Python environment, that route from
    ``python_plan`` (the plan of `fix --format pip`)."""
    out = []
    for n, f in enumerate(findings):
        if not f.intents or f.severity not in ("fail", "warn"):
            out.append(f)
            continue
        steps = [s for s in plan.steps if n in s.findings]
        if f.fix and len(steps) == 1 and steps[0].actions and any(
                isinstance(steps[0].actions[0], _VERBATIM.get(type(i), ())) for i in f.intents):
            out.append(f)
            continue
        fix = fix_for(plan, n)
        if fix and f.fix and all(isinstance(a, Manual) for s in steps for a in s.actions):
            fix = dataclasses.replace(fix, steps=f.fix.steps)  # left to a person: the check's commands stay
        py = [s for s in (python_plan.steps if python_plan else []) if n in s.findings]
        if python_plan is not None and fix and py and not all(s.python_only for s in steps) and all(
                s.python_only and not all(isinstance(a, Manual) for a in s.actions) for s in py):
            alt = fix_for(python_plan, n)
            if alt:
                fix = Fix(summary=f"{fix.summary} Or, inside the Python environment alone: {alt.summary}",
                          steps=[*fix.steps, *alt.steps])
        out.append(dataclasses.replace(f, fix=fix) if fix else f)
    return out
