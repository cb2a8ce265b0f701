"""One remedy vocabulary (issue 19): each kind of remedy is one class, from a check's intent through the planner to
every renderer, and each side's JSON says only its part."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from doctor.model import remedy
from doctor.model.findings import Finding
from doctor.model.plan import FixPlan, PlanStep
from doctor.model.remedy import (
    ACTIONS,
    INTENTS,
    Action,
    InstallCudnn,
    InstallToolkit,
    Intent,
    Manual,
    Reboot,
    RebuildDkms,
)
from doctor.pipeline import fix_script
from doctor.render import apt, conda, dnf, pip

DOCTOR = Path(__file__).resolve().parent.parent / "doctor"
KINDS = {k.__name__ for k in (*INTENTS, *ACTIONS)}


def test_every_remedy_kind_is_defined_once_in_the_package() -> None:
    defined: dict[str, list[str]] = {}
    for path in DOCTOR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name in KINDS | {"Intent", "Action"}:
                defined.setdefault(node.name, []).append(str(path.relative_to(DOCTOR)))
    assert {name: where for name, where in defined.items() if where != ["model/remedy.py"]} == {}
    assert set(defined) == KINDS | {"Intent", "Action"}


def test_a_kind_both_sides_share_is_one_class_the_planner_carries_out() -> None:
    shared = set(INTENTS) & set(ACTIONS)
    assert {k.__name__ for k in shared} == {"BlacklistNouveau", "LoadModule", "RebuildDkms", "InstallToolkit",
                                            "InstallCudnn", "InstallCudaCompat", "InstallContainerToolkit", "Manual"}
    assert all(issubclass(k, Intent) and issubclass(k, Action) for k in shared)


def test_each_side_of_a_shared_kind_shows_only_its_own_fields() -> None:
    # The check asked for the module to be loaded; the planner found the distribution has no headers package.
    dkms = RebuildDkms("6.8.0-custom", load=True, headers=False)
    assert dkms.as_intent() == {"intent": "RebuildDkms", "kernel": "6.8.0-custom", "load": True}
    assert dkms.as_action() == {"action": "RebuildDkms", "kernel": "6.8.0-custom", "headers": False}
    toolkit = InstallToolkit("12.4", reason="compiles for NVIDIA H100")
    assert toolkit.as_intent() == {"intent": "InstallToolkit", "cuda": "12.4", "reason": "compiles for NVIDIA H100"}
    assert toolkit.as_action() == {"action": "InstallToolkit", "cuda": "12.4"}


def test_a_report_and_a_plan_serialise_the_same_object_by_their_side() -> None:
    cudnn = InstallCudnn(9, 12)
    finding = Finding("cudnn.missing", "fail", "cuDNN 9 is missing", intents=[cudnn])
    step = PlanStep("cudnn", ["cudnn.missing"], "Install cuDNN 9", [cudnn], ["gpu-doctor", "check"])
    assert finding.to_dict()["intents"] == [{"intent": "InstallCudnn", "version": 9, "cuda_major": 12}]
    assert step.to_dict()["actions"] == [{"action": "InstallCudnn", "version": 9, "cuda_major": 12}]


def test_an_intent_read_back_from_a_report_ignores_the_planners_fields() -> None:
    assert remedy.intent_from_dict({"intent": "RebuildDkms", "kernel": "6.1", "load": True, "headers": True}) == \
        RebuildDkms("6.1", load=True)
    assert remedy.intent_from_dict({"intent": "InstallDriver", "branch": 550}) is None  # a plan-only kind


# One of each kind a plan can hold, as the planner would make it.
EXAMPLES: dict[type, Action] = {a.__class__: a for a in (
    remedy.InstallDriver(550, "proprietary", "6.1.0-18-amd64"), InstallToolkit("12.4"), InstallCudnn(9, 12),
    remedy.InstallCudaCompat("cuda-compat-12-4", "12.4"), remedy.InstallContainerToolkit("docker"),
    remedy.BlacklistNouveau(), remedy.LoadModule(), RebuildDkms("6.1.0-18-amd64"),
    remedy.ReinstallTorch("/venv/bin/python", "2.5.1", "12.4", "https://download.pytorch.org/whl/cu124"),
    remedy.PipInstall("/venv/bin/python", ["tensorflow[and-cuda]==2.21.0"], conda=["tensorflow=2.21.0=*cuda*"]),
    remedy.HoldPackages(["nvidia-driver"]),
    remedy.PinDriverBranch(550), Reboot("the new module loads at boot"), Manual("do it by hand", ["true"]))}


def test_the_examples_cover_every_action_kind() -> None:
    assert set(EXAMPLES) == set(ACTIONS)


@pytest.mark.parametrize("kind", ACTIONS, ids=lambda k: k.__name__)
def test_every_action_kind_reaches_a_rendered_step(kind: type[Action]) -> None:
    """No action a plan can hold falls through the renderers: the fix script itself writes Manual and Reboot; every
    other kind renders for apt and dnf (the system) or for pip and conda (the Python environment)."""
    action = EXAMPLES[kind]
    plan = FixPlan("ubuntu", "24.04", "Ubuntu 24.04", "x86_64", [PlanStep("s", ["x"], "why", [action], [])])
    if kind in (Manual, Reboot):  # the fix script writes these itself, whatever the package manager
        assert ("# MANUAL: " if kind is Manual else "need_reboot ") in fix_script(plan, "apt")
        return
    system = [r.render(action, plan) for r in (apt, dnf)]
    python = [r.render(action, plan) for r in (pip, conda)]
    assert all(system) or all(python), f"{kind.__name__} is rendered by no package manager"


@pytest.mark.parametrize("action", [InstallToolkit(None), InstallCudnn(9, cuda_major=None)], ids=repr)
@pytest.mark.parametrize("fmt", ["apt", "dnf"])
def test_a_toolkit_or_cudnn_the_plan_did_not_name_is_left_to_the_person(action: Action, fmt: str) -> None:
    """The planner names the CUDA of each toolkit and cuDNN it installs; an action without it (a check's intent
    handed over as it is) has no package name: the script says the step is not automated, it neither crashes nor
    installs `cudnn9-cuda-None`."""
    os_id, version, pretty = ("ubuntu", "24.04", "Ubuntu 24.04") if fmt == "apt" else ("rocky", "9", "Rocky Linux 9")
    plan = FixPlan(os_id, version, pretty, "x86_64", [PlanStep("s", ["x"], "a CUDA toolkit", [action], [])])
    script = fix_script(plan, fmt)
    assert "not automated for this system" in script
    assert "cuda-toolkit-" not in script and "-cuda-None" not in script
