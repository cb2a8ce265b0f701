"""The one planner: answers that were wrong, each a test, and a property over the whole matrix.

The property test checks every recommendation against the TOML rows themselves (read here with tomllib and
packaging), not through the planner's own code.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import tomllib
from factories import H100, make_facts, torch_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from doctor import queries
from doctor.fixplan import Options, build_plan
from doctor.matrix import bundled, vtuple
from doctor.model.facts import PyPackage, PythonEnv
from doctor.model.plan import InstallCudaCompat, InstallDriver, ReinstallTorch
from doctor.pipeline import diagnose

ROOT = Path(__file__).resolve().parent.parent
COMPAT = ROOT / "compat"
EXAMPLES = ROOT / "doctor" / "examples"
M = bundled()


def toml(name: str) -> dict:
    return tomllib.loads((COMPAT / f"{name}.toml").read_text())


TORCH = toml("pytorch")["torch"]
CUDA = toml("cuda")
GPUS = toml("gpus")


def plan_of(facts, opts: Options | None = None):
    return build_plan(facts, diagnose(facts).findings, M, opts)


# --- answers that were wrong ----------------------------------------------------------------------


def test_a100_on_470_with_torch_2_4_or_newer_gets_a_cu118_build() -> None:
    p = queries.plan(M, "A100", "470.256.02", "torch>=2.4", None)
    assert p["possible"] is True, p
    assert vtuple(p["torch"])[:2] in ((2, 4), (2, 5)) and p["cuda"] == "11.8"
    assert p["rule"] == "minor-version"  # 470 runs 11.x from the 450.80.02 floor on


@pytest.mark.parametrize("driver", ["450.80.02", "470.256.02"])
@pytest.mark.parametrize("gpu", ["A100", "Tesla V100-SXM2-16GB", "Tesla T4"])
def test_r450_and_r470_cards_get_a_newer_torch_than_2_0_1(gpu: str, driver: str) -> None:
    p = queries.plan(M, gpu, driver, None, "3.10")
    assert p["possible"] is True and vtuple(p["torch"]) > (2, 0, 1), p
    assert p["cuda"] == "11.8"


def test_an_rtx3090_on_r470_gets_a_cu118_build_and_on_450_80_is_told_its_driver_is_too_old() -> None:
    p = queries.plan(M, "NVIDIA GeForce RTX 3090", "470.256.02", None, "3.10")
    assert p["possible"] is True and vtuple(p["torch"]) > (2, 0, 1) and p["cuda"] == "11.8"
    p = queries.plan(M, "NVIDIA GeForce RTX 3090", "450.80.02", None, "3.10")
    assert p["possible"] is False and "needs driver ≥ 455.23" in p["why"]  # sm_86 came with 455.23


def test_rtx5090_on_570_never_is_told_to_relax_to_a_build_without_sm120() -> None:
    p = queries.plan(M, "NVIDIA GeForce RTX 5090", "570.124.04", "torch>=2.12", None)
    assert p["possible"] is False
    relaxed = re.search(r"relax the version: torch (\S+) cu(\d+)", p["why"])
    assert relaxed, p["why"]
    version, cu = relaxed.groups()
    row = next(r for r in TORCH if r["version"] == version)
    var = next(v for v in row["variant"] if v["cuda"].replace(".", "") == cu)
    assert "12.0" in var["arch_list"]


def test_cuda13_builds_need_the_minor_version_floor_not_the_full_support_driver() -> None:
    assert queries.driver_floor(M, "13.2") == "580"
    p = queries.plan(M, None, "575.57.08", "torch==2.15.0", None)
    assert p["possible"] is False and "(needs ≥ 580)" in p["why"] and "595" not in p["why"]
    facts = make_facts(driver__kernel_module="575.57.08", driver__userspace="575.57.08",
                       python_envs=[torch_env("2.15.0", "13.2")])
    f = next(f for f in diagnose(facts).findings if f.code == "framework.cuda_newer_than_driver")
    assert f.fix is not None and "needs ≥ 580 (595" in f.fix.summary


def test_a_datacenter_gpu_on_r535_is_offered_the_forward_compat_package() -> None:
    p = queries.plan(M, "H100", "535.104.05", "torch==2.15.0", None)
    assert p["possible"] is True and p["forward_compat"]["package"] == "cuda-compat-13-2"
    assert queries.plan(M, "NVIDIA GeForce RTX 4090", "535.104.05", "torch==2.15.0", None)["possible"] is False
    facts = make_facts(driver__kernel_module="535.104.05", driver__userspace="535.104.05", toolkits=[],
                       python_envs=[torch_env("2.15.0", "13.2")])
    plan = plan_of(facts)
    assert [a for a in plan.actions() if isinstance(a, InstallCudaCompat)] == [
        InstallCudaCompat("cuda-compat-13-2", "13.2")]
    assert not [a for a in plan.actions() if isinstance(a, InstallDriver)]


def test_python_3_8_never_gets_a_release_without_cp38_wheels() -> None:
    p = queries.plan(M, None, None, None, "3.8")
    assert p["possible"] is True and p["torch"] == "2.4.1"  # 2.5.x says >=3.8 but ships no cp38 wheels
    p = queries.plan(M, None, None, "torch==2.5.1", "3.8")
    assert p["possible"] is False and "2.5.1" in p["why"]


def test_every_gpu_of_a_mixed_machine_constrains_the_build() -> None:
    p = queries.plan(M, ["Tesla V100-SXM2-16GB", "NVIDIA GeForce RTX 5090"], "575.57.08", None, "3.11")
    assert (p["possible"], p["torch"], p["cuda"]) == (True, "2.10.0", "12.8")  # sm_70 and sm_120 in one build
    p = queries.plan(M, ["Tesla P100-PCIE-16GB", "NVIDIA GeForce RTX 5090"], "575.57.08", None, "3.11")
    assert p["possible"] is False and "no single torch build runs on all of them" in p["why"]


def test_the_headline_rtx5090_finding_fix_is_the_plans_build() -> None:
    run = [sys.executable, "-m", "doctor"]
    snap = str(EXAMPLES / "rtx5090-cu124-torch.json")
    text = subprocess.run([*run, "check", "--facts", snap, "framework.arch_unsupported"], capture_output=True,
                          text=True, timeout=120).stdout
    plan = json.loads(subprocess.run([*run, "fix", "--facts", snap, "--json"], capture_output=True, text=True,
                                     timeout=120).stdout)
    torch = plan["targets"]["torch"]
    assert (torch["version"], torch["cuda"]) == ("2.11.0", "12.8")  # driver 570 runs 12.8, not 13.2 (≥ 580)
    assert f"torch {torch['version']} built for CUDA {torch['cuda']}" in text and "2.15.0" not in text


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.stem)
def test_every_finding_fix_agrees_with_the_plan(path: Path) -> None:
    from doctor.commands.check import load_facts_file

    facts = load_facts_file(str(path))
    report = diagnose(facts)
    plan = build_plan(facts, report.findings, M)
    wanted = plan.targets.get("torch")
    for f in report.findings:
        if f.fix and f.intents and "built for CUDA" in f.fix.summary and wanted:
            assert f"torch {wanted['version']} built for CUDA {wanted['cuda']}" in f.fix.summary


def test_a_healthy_second_environment_is_left_alone() -> None:
    sick = torch_env("2.5.1+cpu", None, cpu_only=True)
    healthy = PythonEnv(executable="/opt/other/bin/python", version="3.11.9", origin="VIRTUAL_ENV",
                        packages=[PyPackage("torch", "2.5.1", cuda="12.4", cpu_only=False)])
    plan = plan_of(make_facts(python_envs=[sick, healthy]))
    assert [a.python for a in plan.actions() if isinstance(a, ReinstallTorch)] == [sick.executable]


def test_a_torch_step_runs_on_the_installed_driver_when_a_build_does() -> None:
    # A CUDA 13.0 toolkit asks for driver 580; the CPU torch is still replaced by a build 535 runs (cu126), so
    # the torch step does not silently depend on the driver step.
    from doctor.model.facts import Toolkit

    rtx4090 = replace(H100, name="NVIDIA GeForce RTX 4090", compute_capability="8.9")  # no forward compat
    facts = make_facts(driver__kernel_module="535.104.05", driver__userspace="535.104.05", gpus=[rtx4090],
                       toolkits=[Toolkit("/usr/local/cuda-13.0", "13.0.0", "13.0.88", "path")],
                       python_envs=[torch_env("2.13.0+cpu", None, cpu_only=True)])
    plan = plan_of(facts)
    assert plan.targets["driver_branch"] == 580
    (torch,) = [a for a in plan.actions() if isinstance(a, ReinstallTorch)]
    assert (torch.version, torch.cuda) == ("2.13.0", "12.6")


def test_companions_come_from_the_same_index_with_their_pair() -> None:
    env = torch_env("2.5.1+cpu", None, cpu_only=True)
    env = replace(env, packages=[*env.packages, PyPackage("torchvision", "0.20.1+cpu", cpu_only=True)])
    (torch,) = [a for a in plan_of(make_facts(python_envs=[env])).actions() if isinstance(a, ReinstallTorch)]
    assert torch.companions == ["torchvision==0.20.1"]


def test_a_macos_report_is_never_told_to_install_a_cuda_build() -> None:
    facts = make_facts(host__os_id="macos", host__os_version="14.5", host__os_pretty="macOS 14.5",
                       host__arch="arm64", python_envs=[torch_env("2.2.2", None, cpu_only=True)])
    report = diagnose(facts)
    text = " ".join(f.fix.summary for f in report.findings if f.fix)
    assert "download.pytorch.org/whl/cu" not in text and "cu121" not in text
    assert "PyTorch publishes no CUDA builds for macOS" in text
    assert not [a for a in plan_of(facts).actions() if isinstance(a, ReinstallTorch)]


def test_fix_format_pip_prints_only_the_python_route() -> None:
    out = subprocess.run([sys.executable, "-m", "doctor", "fix", "--facts", str(EXAMPLES / "r470-geforce-cu124-torch"
                                                                             ".json"), "--format", "pip"],
                         capture_output=True, text=True, timeout=120).stdout
    assert "-m pip install --index-url https://download.pytorch.org/whl/cu118 -- torch==" in out
    assert "apt_install" not in out and "InstallDriver" not in out and "need_reboot 'the new" not in out


def test_container_driver_needs_are_the_hosts_and_torch_takes_the_python_route() -> None:
    facts = make_facts(host__container="docker", driver__kernel_module="470.223.02", driver__userspace="470.223.02",
                       toolkits=[], python_envs=[torch_env("2.5.1", "12.4")],
                       gpus=[replace(H100, name="NVIDIA A100-SXM4-80GB", compute_capability="8.0")])
    plan = plan_of(facts)
    assert not [a for a in plan.actions() if isinstance(a, InstallDriver)]
    (torch,) = [a for a in plan.actions() if isinstance(a, ReinstallTorch)]
    assert torch.cuda == "11.8"


# --- the property: every recommendation meets every constraint, read from the TOML rows ---------------

GPU_ROWS = [g for g in GPUS["gpu"] if g.get("compute_capability")]
ARCH = {a["name"]: a for a in GPUS["architecture"]}
DRIVERS = sorted({r["linux_min_driver"] for r in CUDA["toolkit"] if r.get("linux_min_driver")}
                 | {r["linux_min_driver"] for r in CUDA["minor_version_compat"]}
                 | {"450.80.02", "470.256.02", "535.104.05", "550.90.07", "570.124.04", "575.57.08", "580.65.06"},
                 key=vtuple)
PYTHONS = ["3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]


def _arch(gpu: dict) -> dict:
    return ARCH.get(gpu.get("architecture"), {}) or next(
        (a for a in GPUS["architecture"] if gpu["compute_capability"] in a.get("compute_capabilities", [])), {})


def _native_min(cuda: str) -> tuple[int, ...] | None:
    mm = vtuple(cuda)[:2]
    mins = [vtuple(r["linux_min_driver"]) for r in CUDA["toolkit"]
            if vtuple(r["version"])[:2] == mm and r.get("linux_min_driver")]
    return min(mins) if mins else None


def _floor(cuda: str) -> tuple[int, ...] | None:
    row = next((r for r in CUDA["minor_version_compat"] if r["cuda_major"] == vtuple(cuda)[0]), None)
    return vtuple(row["linux_min_driver"]) if row else None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu=st.sampled_from(GPU_ROWS), driver=st.sampled_from(DRIVERS), python=st.sampled_from(PYTHONS),
       platform=st.sampled_from(["linux-x86_64", "linux-x86_64", "linux-x86_64", "linux-aarch64", "jetson", "windows",
                                 "macos"]))
def test_every_recommendation_meets_every_constraint(gpu: dict, driver: str, python: str, platform: str) -> None:
    p = queries.plan(M, gpu["name"], driver, None, python, platform=platform)
    if not p["possible"]:
        return
    assert platform == "linux-x86_64"  # no CUDA wheel is recommended where the matrix describes none
    row = next(r for r in TORCH if r["version"] == p["torch"])
    var = next(v for v in row["variant"] if v["cuda"] == p["cuda"])
    # Python: wheels exist for it
    assert Version(python) in SpecifierSet(row.get("python_wheels") or row["python"])
    # every GPU's arch: SASS of the same major at or below it, or PTX at or below it
    cc = vtuple(gpu["compute_capability"])
    sass = [vtuple(s) for s in var["arch_list"]]
    assert any(s[:1] == cc[:1] and s <= cc for s in sass) or (var.get("ptx") and vtuple(var["ptx"]) <= cc)
    # the GPU is driven by this driver at all
    arch = _arch(gpu)
    d = vtuple(driver)
    first = (arch.get("first_driver_by_cc") or {}).get(gpu["compute_capability"]) or arch.get("first_driver")
    if first:
        assert d >= vtuple(first)
    if arch.get("last_driver_branch"):
        assert d[0] <= int(arch["last_driver_branch"])
    # the driver runs the build's CUDA: natively, by minor-version compatibility, or with a compat package on a
    # GPU whose segment forward compatibility supports
    native, floor = _native_min(var["cuda"]), _floor(var["cuda"])
    if p["rule"] == "forward-compat":
        fc = next(r for r in CUDA["forward_compat"] if r["package"] == p["forward_compat"]["package"])
        assert str(d[0]) in fc["driver_branches"] and gpu.get("segment") in CUDA["forward_compat_policy"]["segments"]
    else:
        assert (native and d >= native) or (floor and d >= floor)


def _meets(gpu: dict, driver: str, python: str, version: str, cuda: str, rule_compat: str | None) -> None:
    """The build ``version`` cu``cuda`` meets every constraint of (gpu, driver, python), read from the TOML."""
    row = next(r for r in TORCH if r["version"] == version)
    var = next(v for v in row["variant"] if v["cuda"] == cuda)
    assert Version(python) in SpecifierSet(row.get("python_wheels") or row["python"])
    cc = vtuple(gpu["compute_capability"])
    sass = [vtuple(s) for s in var["arch_list"]]
    assert any(s[:1] == cc[:1] and s <= cc for s in sass) or (var.get("ptx") and vtuple(var["ptx"]) <= cc)
    d = vtuple(driver)
    arch = _arch(gpu)
    first = (arch.get("first_driver_by_cc") or {}).get(gpu["compute_capability"]) or arch.get("first_driver")
    if first:
        assert d >= vtuple(first)[: len(d)]
    if rule_compat:
        fc = next(r for r in CUDA["forward_compat"] if r["package"] == rule_compat)
        assert str(d[0]) in fc["driver_branches"] and gpu.get("segment") in CUDA["forward_compat_policy"]["segments"]
    else:
        native, floor = _native_min(var["cuda"]), _floor(var["cuda"])
        assert (native and d >= native[: len(d)]) or (floor and d >= floor[: len(d)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu=st.sampled_from(GPU_ROWS), driver=st.sampled_from(DRIVERS), python=st.sampled_from(PYTHONS[1:]),
       arch=st.sampled_from(["x86_64", "x86_64", "aarch64"]))
def test_every_planned_torch_build_meets_every_constraint(gpu: dict, driver: str, python: str, arch: str) -> None:
    """The same property through the whole pipeline: facts → checks → intents → plan (a CPU build to replace)."""
    card = replace(H100, name=gpu["name"], compute_capability=gpu["compute_capability"])
    env = PythonEnv(executable="/venv/bin/python", version=f"{python}.1", origin="VIRTUAL_ENV",
                    packages=[PyPackage("torch", "2.5.1+cpu", cpu_only=True)])
    facts = make_facts(gpus=[card], driver__kernel_module=driver, driver__userspace=driver, toolkits=[],
                       python_envs=[env], host__arch=arch)
    plan = plan_of(facts)
    torches = [a for a in plan.actions() if isinstance(a, ReinstallTorch)]
    if arch != "x86_64":
        assert not torches  # the matrix describes no aarch64 wheels: never a guess
        return
    drivers = [a for a in plan.actions() if isinstance(a, InstallDriver)]
    planned = f"{drivers[0].branch}" if drivers else driver  # a planned branch: any release of it
    compat = [a.package for a in plan.actions() if isinstance(a, InstallCudaCompat)]
    for t in torches:
        _meets(gpu, planned, python, t.version, t.cuda, compat[0] if compat and not drivers else None)
