"""One remedy vocabulary (issue 19): each kind of remedy is one class, from a check's intent through the planner to
every renderer, and each side's JSON says only its part."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

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


# --- each kind becomes a dataclass on first use (start-up speed, issue 23) --------------------------------------

_FRESH = """
import dataclasses, inspect, json, threading
from doctor.model import remedy
from doctor.model.remedy import ACTIONS, INTENTS
out = {"pending_at_import": len(remedy._pending)}
import doctor.fixplan, doctor.render.apt, doctor.render.fixline  # the planner and a renderer name every kind
out["pending_after_planner"] = len(remedy._pending)
# first use through each way in, one kind each: class-level look-ups, a constructor from a report, threads at once
out["fields"] = [f.name for f in dataclasses.fields(remedy.InstallDriver)]
out["is_dataclass"] = dataclasses.is_dataclass(remedy.PinDriverBranch)
out["match_args"] = list(remedy.HoldPackages.__match_args__)
out["signature"] = str(inspect.signature(remedy.UnsetEnvVar))
out["from_dict"] = repr(remedy.intent_from_dict({"intent": "LoadModule", "module": "nvidia-drm"}))
made = []
threads = [threading.Thread(target=lambda: made.append(remedy.Reboot("boot", always=True))) for _ in range(8)]
[t.start() for t in threads]; [t.join() for t in threads]
out["threads"] = sorted({repr(m) for m in made})
kinds = {*INTENTS, *ACTIONS}
out["parameters"] = {k.__name__: list(inspect.signature(k).parameters) for k in kinds}
out["init_fields"] = {k.__name__: [f.name for f in dataclasses.fields(k) if f.init] for k in kinds}
out["pending_at_end"] = len(remedy._pending)
print(json.dumps(out))
"""


def _fresh() -> dict[str, Any]:
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True, timeout=120,
                          cwd=DOCTOR.parent, check=True)
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_importing_the_planner_and_renderers_makes_no_kind_and_first_use_makes_the_same_dataclass() -> None:
    out = _fresh()
    assert out["pending_at_import"] == out["pending_after_planner"] == 23  # 20 kinds and their three bases
    assert out["fields"] == ["branch", "flavor", "kernel", "min_branch", "server", "max_branch", "open_required",
                             "headers"]
    assert out["is_dataclass"] is True
    assert out["match_args"] == ["names"]
    assert out["signature"] == "(name: 'str', reason: 'str' = '') -> None"
    assert out["from_dict"] == "LoadModule(module='nvidia-drm')"
    assert out["threads"] == ["Reboot(reason='boot', always=True)"]
    assert out["parameters"] == out["init_fields"]  # each constructor is its own, never a base's
    assert out["pending_at_end"] == 0


def test_a_kind_first_met_unpickled_compares_hashes_and_prints_by_its_fields() -> None:
    """A report's remedies cross a process boundary pickled (fleet's workers): in the process that reads them the
    kind is first met there, made without its constructor."""
    import pickle
    import subprocess
    import sys

    blob = pickle.dumps([RebuildDkms("6.8.0", load=True), RebuildDkms("6.8.0")]).hex()
    code = ("import pickle, sys\nfrom doctor.model import remedy\n"
            f"a, b = pickle.loads(bytes.fromhex({blob!r}))\n"
            "print(repr(a), a == b, a == remedy.RebuildDkms('6.8.0', load=True), hash(a) == hash(remedy.RebuildDkms("
            "'6.8.0', load=True)), remedy.RebuildDkms in remedy._pending)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=DOCTOR.parent, check=True).stdout
    assert out.split() == ["RebuildDkms(kernel='6.8.0',", "load=True,", "headers=None)", "False", "True", "True",
                           "False"]
