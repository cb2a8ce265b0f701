"""One answer everywhere: for every example and every fix scenario, the fix line under each finding (`check`), the
scripts of `fix` in each format, the TUI's plan and `gpu-doctor plan` asked the same question name the same torch
build and the same driver branch.

A wrong fix script is worse than none: the user runs it. This walks every recorded machine, so a surface that plans
on its own (or forgets a constraint the planner weighs) shows up as a disagreement here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fix_scenarios import SCENARIOS, scenario

from doctor import queries
from doctor.commands.check import load_facts_file
from doctor.fixplan import InstallDriver, ReinstallTorch, build_plan, platform
from doctor.matrix import bundled
from doctor.pipeline import diagnose
from doctor.tui import fixes

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "doctor" / "examples").glob("*.json"))
M = bundled()
CASES = [(p.stem, lambda p=p: load_facts_file(str(p))) for p in EXAMPLES] + [
    (name, lambda name=name: scenario(name)) for name in SCENARIOS]


@pytest.mark.parametrize(("name", "load"), CASES, ids=[c[0] for c in CASES])
def test_check_fix_tui_and_plan_name_the_same_builds_and_branch(name: str, load) -> None:
    facts = load()
    report = diagnose(facts)
    plan = build_plan(facts, report.findings, M)
    torch = plan.targets.get("torch")
    branch = plan.targets.get("driver_branch")
    problems = [f for f in report.findings if f.severity in ("fail", "warn")]

    # the TUI's plan is the same plan
    tui = fixes.plan_for(report, problems)
    assert tui.targets.get("torch") == torch and tui.targets.get("driver_branch") == branch

    # check's fix lines name only the plan's build and branch
    for f in problems:
        text = f.fix.summary if f.fix else ""
        if "built for CUDA" in text and torch:
            assert f"torch {torch['version']} built for CUDA {torch['cuda']}" in text, (f.code, text)
        if "Install NVIDIA driver branch" in text:
            assert f"Install NVIDIA driver branch {branch} " in text, (f.code, text)

    # every script of `fix` installs that build and that branch, and nothing else
    for fmt in [s.id for s in fixes.script_formats(report, problems)]:
        script = fixes.fix_script(report, problems, fmt)
        pyplan = fixes.plan_for(report, problems, python_only=fmt in ("pip", "conda"))
        for a in pyplan.actions():
            if isinstance(a, ReinstallTorch) and fmt == "pip":
                assert f"torch=={a.version}" in script and f"/cu{a.cuda.replace('.', '')}" in script, fmt
        if branch and fmt in ("apt", "dnf"):
            assert f"Install NVIDIA driver branch {branch} " in script, fmt
        for other in {a.branch for a in plan.actions() if isinstance(a, InstallDriver)} - {branch}:
            raise AssertionError(f"{fmt}: a second driver branch {other}")

    # `gpu-doctor plan`, asked for that release on this machine (its GPUs, platform, planned driver, Python),
    # finds the same CUDA variant: the constraints are the same ones
    if torch:
        env = next(e for e in facts.python_envs for a in plan.actions()
                   if isinstance(a, ReinstallTorch) and a.python == e.executable)
        gpus = [g.name for g in facts.gpus if g.name and M.gpu(g.name)]
        driver = str(branch) if branch else (facts.driver.kernel_module or facts.driver.userspace)
        if "cuda_compat" in plan.targets or facts.host.wsl:
            return  # a compat package or a Windows driver: the plain question would differ
        asked = queries.plan(M, gpus, driver, f"torch=={torch['version']}",
                             ".".join((env.version or "").split(".")[:2]) or None, platform=platform(facts, M))
        assert asked["possible"] and asked["platform"] == platform(facts, M), asked
        assert (asked["torch"], asked["cuda"]) == (torch["version"], torch["cuda"]), (asked, torch)
