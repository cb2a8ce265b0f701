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
from doctor.model.remedy import InstallCudaCompat, InstallDriver, ReinstallTorch
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


# --- platform: a constraint of the plan, inferred from the facts or given with --platform ------------------


def test_an_arm_only_gpu_is_planned_from_the_aarch64_arch_lists_without_being_told() -> None:
    p = queries.plan(M, "GH200", "580.65.06", None, "3.12")
    assert p["platform"] == "linux-aarch64" and p["possible"]
    var = M.torch_variant(p["torch"], p["cuda"])
    assert "9.0" in var["arch_list_aarch64"] and p["source"] == var["arch_list_aarch64_source"]
    assert "aarch64" in p["source"] and p["install"] == f"pip install torch=={p['torch']}"  # PyPI's aarch64 wheel


def test_platform_linux_aarch64_is_a_constraint_not_a_refusal() -> None:
    p = queries.plan(M, "A100", "580.65.06", None, "3.12", platform="linux-aarch64")
    assert p["possible"] and p["platform"] == "linux-aarch64"
    assert "8.0" in M.torch_variant(p["torch"], p["cuda"])["arch_list_aarch64"]
    # 2.5.1's aarch64 build carries sm_90 only: an A100 never gets it, though the x86_64 one has sm_80
    old = queries.plan(M, "A100", "580.65.06", "torch==2.5.1", "3.12", platform="linux-aarch64")
    assert old["possible"] is False and "sm_80" in old["why"]


def test_a_platform_that_contradicts_the_gpu_is_a_usage_error() -> None:
    with pytest.raises(queries.QueryError, match=r"GH200.*linux-aarch64"):
        queries.plan(M, "GH200", "580.65.06", None, "3.12", platform="linux-x86_64")


def test_jetpack_boards_get_nvidias_builds_and_thor_gets_the_sbsa_cuda13_wheels() -> None:
    orin = queries.plan(M, "Orin (nvgpu)", "540.4.0", None, "3.10")
    assert orin["possible"] is False and orin["channel"] == "NVIDIA (JetPack)" and "JetPack" in orin["why"]
    thor = queries.plan(M, "Jetson AGX Thor", "580.00", None, "3.12")
    assert thor["possible"] and thor["platform"] == "linux-aarch64" and thor["cuda"].startswith("13.")
    assert "11.0" in M.torch_variant(thor["torch"], thor["cuda"])["arch_list_aarch64"]


def test_fix_on_a_tegra_board_never_installs_a_desktop_driver_branch() -> None:
    orin = replace(H100, name="Orin (nvgpu)", compute_capability="8.7", pci_device_id=None)
    facts = make_facts(gpus=[orin], host__arch="aarch64", host__kernel="5.15.148-tegra",
                       driver__kernel_module="540.4.0", driver__userspace="540.4.0", driver__cuda_driver_api="12.6",
                       python_envs=[torch_env("2.5.1", "12.4")])
    plan = plan_of(facts)
    assert not [a for a in plan.actions() if isinstance(a, (InstallDriver, ReinstallTorch))]
    text = " ".join(a.text for a in plan.actions() if hasattr(a, "text"))
    assert "JetPack" in text


@pytest.mark.parametrize(("name", "arch", "expected"), [
    ("NVIDIA GH200 480GB", None, "linux-aarch64"), ("NVIDIA GB10", "aarch64", "linux-aarch64"),
    ("NVIDIA Thor", None, "linux-aarch64"), ("Orin (nvgpu)", "aarch64", "jetson"),
    ("NVIDIA A100-SXM4-80GB", "aarch64", "linux-aarch64"), ("NVIDIA A100-SXM4-80GB", "x86_64", "linux-x86_64")])
def test_check_fix_plan_and_matrix_gpu_give_one_platform_for_the_same_board(name: str, arch: str | None,
                                                                             expected: str) -> None:
    from doctor.fixplan import platform

    facts = make_facts(gpus=[replace(H100, name=name, compute_capability=None)], host__arch=arch)
    asked = {"aarch64": "linux-aarch64", "x86_64": "linux-x86_64"}.get(arch or "")  # the host, told as --platform
    assert platform(facts, M) == expected
    assert queries.query_gpu(M, name, asked)["platform"] == expected
    assert queries.plan(M, name, None, None, None, platform=asked)["platform"] == expected


def test_matrix_gpu_lists_the_platforms_builds() -> None:
    gh = queries.query_gpu(M, "GH200")
    assert gh["platform"] == "linux-aarch64"
    assert all(M.torch_variant(t["version"], c).get("arch_list_aarch64") for t in gh["torch_builds"] for c in t["cuda"])
    orin = queries.query_gpu(M, "Orin (nvgpu)")
    assert orin["torch_builds"] == [] and "JetPack" in orin["torch_note"] and orin["driver"]["jetpack"]


# --- stored limits: cuDNN's lowest CC, the open module, the first driver of every CC ---------------------


def test_a_build_whose_bundled_cudnn_cannot_run_on_the_gpu_is_never_recommended() -> None:
    # Pascal (6.0): cuDNN 9.17+ needs CC 7.5 (cudnn.toml), so no build bundling one is offered
    for drv in ("535.104.05", "580.65.06"):
        p = queries.plan(M, "Tesla P100-PCIE-16GB", drv, None, "3.12")
        low, _row = M.cudnn_min_cc(p["cudnn"])
        assert p["possible"] and vtuple(low) <= (6, 0), (drv, p["torch"], p["cudnn"], low)


def test_cudnn_min_cc_carries_forward_from_the_last_release_that_states_it() -> None:
    assert M.cudnn_min_cc("9.10.2.21")[0] == "5.0"
    assert M.cudnn_min_cc("9.26.0.51")[0] == "7.5"  # 9.17.0 dropped Maxwell..Volta; later ones do not add them back
    assert M.cudnn_min_cc("8.7.0.84")[0] == "3.0"


def test_the_open_module_is_never_planned_before_r515_or_for_a_gpu_older_than_turing() -> None:
    v100 = replace(H100, name="Tesla V100-SXM2-16GB", compute_capability="7.0")
    plan = plan_of(make_facts(gpus=[v100], driver__module_flavor="open", driver__kernel_module="450.80.02",
                              driver__userspace="450.80.02", toolkits=[], python_envs=[torch_env("2.5.1", "12.4")]))
    (drv,) = [a for a in plan.actions() if isinstance(a, InstallDriver)]
    assert drv.flavor == "proprietary"
    t4 = replace(H100, name="Tesla T4", compute_capability="7.5")
    old = plan_of(make_facts(gpus=[t4], driver__module_flavor="open", toolkits=[]), Options(target_driver="510"))
    (drv,) = [a for a in old.actions() if isinstance(a, InstallDriver)]
    assert (drv.branch, drv.flavor) == (510, "proprietary")


def test_every_cc_first_targeted_by_a_later_toolkit_needs_that_toolkits_driver() -> None:
    blackwell = M.architecture("Blackwell")
    assert M.first_driver(blackwell, "10.0") == "570.26"
    assert M.first_driver(blackwell, "12.1") == M.min_driver("12.9")["linux_min_driver"]  # GB10: sm_121 from 12.9
    assert M.first_driver(blackwell, "10.3") == M.min_driver("12.9")["linux_min_driver"]
    p = queries.plan(M, "NVIDIA GB300", "570.124.04", None, "3.12")
    assert p["possible"] is False and "needs driver ≥ 575.51.03" in p["why"]


# --- lifecycle: a supported branch (long-term first); an ended one only as the GPU's last --------------


def test_a_kepler_gpu_gets_its_last_branch_r470_and_is_told_it_has_ended() -> None:
    k80 = replace(H100, name="Tesla K80", compute_capability="3.7")
    plan = plan_of(make_facts(gpus=[k80], driver__kernel_module="418.226.00", driver__userspace="418.226.00",
                              driver__module_flavor="proprietary", toolkits=[],
                              python_envs=[torch_env("2.3.1", "11.8")]))
    (drv,) = [a for a in plan.actions() if isinstance(a, InstallDriver)]
    assert (drv.branch, drv.flavor) == (470, "proprietary")
    assert any("R470 is past NVIDIA's end of life" in n and "last branch that drives Tesla K80" in n
               for n in plan.notes)


def test_an_asked_for_ended_branch_is_installed_with_a_warning() -> None:
    plan = plan_of(make_facts(), Options(target_driver="550"))
    assert plan.targets["driver_branch"] == 550
    assert any("R550 is past NVIDIA's end of life" in n for n in plan.notes)


def test_a_lifecycle_warning_alone_plans_no_driver_but_joins_a_driver_step() -> None:
    alone = plan_of(make_facts())  # R550, ended without a date: a person's decision
    assert not [a for a in alone.actions() if isinstance(a, InstallDriver)]
    assert [s for s in alone.steps if "driver.branch_eol" in s.resolves]
    both = plan_of(make_facts(toolkits=[], python_envs=[torch_env("2.14.1", "13.0")]))  # needs R580 anyway
    (step,) = [s for s in both.steps if "driver.branch_eol" in s.resolves]
    assert step.id == "driver" and both.targets["driver_branch"] == 580


# --- hints: only what the constraints allow --------------------------------------------------------------


def test_no_newer_torch_is_suggested_when_no_newer_release_has_the_arch() -> None:
    p = queries.plan(M, "Tesla V100-SXM2-16GB", "580.65.06", "torch>=2.15", "3.12")  # 2.15 dropped Volta
    assert p["possible"] is False and "take a newer torch" not in p["why"]
    assert "no newer release has them either" in p["why"] and "2.14.1" in p["why"]


def test_builds_whose_cuda_cannot_target_the_gpu_are_never_offered_as_maybe() -> None:
    p = queries.plan(M, "Tesla P100-PCIE-16GB", "580.65.06", "torch>=2.15", "3.12")
    assert p["possible"] is False and "cu130" not in p["why"]  # CUDA 13 has no sm_60 target
    assert queries.cuda_targets(M, "13.0", "6.0") is False and queries.cuda_targets(M, "12.6", "6.0") is True


def test_a_newer_torch_is_suggested_only_with_one_that_has_the_kernels() -> None:
    p = queries.plan(M, "NVIDIA GeForce RTX 5090", "580.65.06", "torch<2.7", "3.12")
    if "take a newer torch" in p["why"]:
        assert "cu12" in p["why"] or "cu13" in p["why"]


# --- an unknown driver version with a known CUDA level ---------------------------------------------------


def test_a_driver_known_only_by_its_cuda_level_bounds_the_build() -> None:
    p = queries.plan(M, "A100", None, None, "3.12", driver_cuda="12.2")
    assert p["possible"] and p["cuda"].startswith("12.")  # minor-version compatibility, never CUDA 13
    facts = make_facts(driver__kernel_module=None, driver__userspace=None, driver__cuda_driver_api="12.2",
                       toolkits=[], python_envs=[torch_env("2.5.1+cpu", None, cpu_only=True)])
    (torch,) = [a for a in plan_of(facts, Options(python_only=True)).actions() if isinstance(a, ReinstallTorch)]
    assert vtuple(torch.cuda)[0] == 12


def test_never_a_build_that_needs_a_newer_driver_than_the_one_rejected() -> None:
    p = queries.plan(M, "A100", None, "torch>=2.11", "3.12", driver_cuda="11.4")
    assert p["possible"] is False and "too old" in p["why"]
    assert "relax the version" not in p["why"] or "cu11" in p["why"]


# --- TensorFlow and JAX --------------------------------------------------------------------------------


def test_plan_tensorflow_with_its_own_floors() -> None:
    p = queries.plan(M, "NVIDIA GeForce RTX 4090", "550.54.14", "tensorflow>=2.16", "3.11")
    assert p["framework"] == "tensorflow" and p["possible"]
    assert vtuple(p["tensorflow"]) >= (2, 16) and p["install"].startswith("pip install 'tensorflow[and-cuda]==")
    old = queries.plan(M, "A100", "470.256.02", "tensorflow>=2.16", "3.11")
    assert old["possible"] is False and "needs driver ≥ 525.60.13" in old["why"]
    py = queries.plan(M, None, None, "tensorflow>=2.16", "3.8")
    assert py["possible"] is False and "Python 3.8" in py["why"]


def test_plan_jax_picks_the_cuda_plugin_the_driver_runs() -> None:
    p = queries.plan(M, "H100 80GB HBM3", "535.104.05", "jax", "3.12")
    assert p["framework"] == "jax" and p["possible"] and p["cuda_major"] == 12  # CUDA 13 plugin needs >= 580
    assert p["install"] == f"pip install 'jax[cuda12]=={p['jax']}'" and "cuda12-local" in p["local"]
    new = queries.plan(M, "H100 80GB HBM3", "580.65.06", "jax", "3.12")
    assert new["cuda_major"] == 13
    # a Kepler K80 (3.7) is below every plugin's SM 5.2: only the CUDA 11 jaxlib of JAX's own index is left
    k80 = queries.plan(M, "Tesla K80", "470.256.02", "jax", "3.10")
    assert k80["possible"] and k80["cuda_major"] == 11 and k80["install"] is None
    assert "JAX's own release index" in k80["channel"]
    assert queries.plan(M, "Tesla K80", "470.256.02", "jax>=0.4.31", "3.10")["possible"] is False


# --- where a build comes from -----------------------------------------------------------------------------


def test_each_build_says_where_it_comes_from() -> None:
    default = queries.plan(M, "H100 80GB HBM3", "595.45.04", "torch==2.15.0", "3.12")
    assert default["cuda"] == "13.2" and default["channel"].startswith("PyPI")
    other = queries.plan(M, "H100 80GB HBM3", "560.28.03", "torch==2.14.1", "3.12")
    assert other["cuda"] == "12.6" and other["channel"].startswith("PyTorch's own index")


# --- steps that cannot run here ---------------------------------------------------------------------------


def test_no_gpu_on_the_bus_makes_attaching_one_the_first_step_and_no_step_repeats() -> None:
    from doctor.commands.check import load_facts_file

    facts = load_facts_file(str(EXAMPLES / "debian12-535-no-gpu.json"))
    plan = plan_of(facts)
    assert plan.steps[0].id == "blocker" and "attach an NVIDIA GPU" in plan.steps[0].why
    resolved = [code for s in plan.steps for code in s.resolves]
    assert len(resolved) == len(set(resolved))  # each finding is resolved by one step only


# --- the property: every recommendation meets every constraint, read from the TOML rows ---------------

GPU_ROWS = [g for g in GPUS["gpu"] if g.get("compute_capability")]
ARCH = {a["name"]: a for a in GPUS["architecture"]}
CUDNN = toml("cudnn")["cudnn"]
DRIVERS = sorted({r["linux_min_driver"] for r in CUDA["toolkit"] if r.get("linux_min_driver")}
                 | {r["linux_min_driver"] for r in CUDA["minor_version_compat"]}
                 | {"450.80.02", "470.256.02", "535.104.05", "550.90.07", "570.124.04", "575.57.08", "580.65.06"},
                 key=vtuple)
PYTHONS = ["3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]
COLLECTED = (2026, 11)  # healthy_facts().collected_at: the day every lifecycle question is asked


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


def _first_driver(gpu: dict) -> tuple[int, ...] | None:
    """The oldest driver that knows this GPU: the architecture's (or its CC's) first driver, and no older than the
    minimum driver of the first toolkit that targets its CC."""
    arch, cc = _arch(gpu), gpu["compute_capability"]
    first = (arch.get("first_driver_by_cc") or {}).get(cc) or arch.get("first_driver")
    cuda = (arch.get("first_cuda_by_cc") or {}).get(cc)
    need = _native_min(cuda) if cuda else None
    out = [vtuple(x) for x in (first,) if x] + ([need] if need else [])
    return max(out) if out else None


def _cudnn_min_cc(version: str) -> tuple[int, ...] | None:
    """cuDNN's lowest CC, straight from cudnn.toml: the release's own, else the highest stated by an older release
    of the same major (architectures are only ever dropped)."""
    v = vtuple(version)[:3]
    stated = [(vtuple(r["version"]), vtuple(r["min_compute_capability"])) for r in CUDNN
              if r.get("min_compute_capability") and vtuple(r["version"])[:1] == v[:1]]
    own = next((cc for ver, cc in stated
                for r in CUDNN if vtuple(r["version"]) == ver
                and ver <= v <= vtuple(r.get("last") or r["version"])), None)
    older = [cc for ver, cc in stated if ver <= v]
    return own or (max(older) if older else None)


def _platform(gpu: dict, asked: str | None) -> str:
    """The platform the answer must be for: what the GPU row implies, else what was asked, else x86_64."""
    own = gpu.get("platform") or ("jetson" if gpu.get("segment") == "embedded" else None)
    return own or asked or "linux-x86_64"


def _branch_supported(b: int) -> bool:
    row = next((r for r in CUDA["driver_branch"] if int(r["branch"]) == b), None)
    if row is None or row.get("end_of_life") or not row.get("eol"):
        return False
    y, mo = (int(x) for x in row["eol"].split("-"))
    return (y, mo) >= COLLECTED


def _meets(gpu: dict, driver: str, python: str, version: str, cuda: str, rule_compat: str | None,
           platform: str = "linux-x86_64") -> None:
    """The build ``version`` cu``cuda`` meets every constraint of (gpu, driver, python, platform), read from the
    TOML: wheels for the Python, SASS (or PTX) for the GPU in that platform's arch list, a bundled cuDNN that runs on
    the GPU, a driver that knows the GPU and runs the build's CUDA."""
    assert platform in ("linux-x86_64", "linux-aarch64")  # no CUDA wheel where the matrix describes none
    row = next(r for r in TORCH if r["version"] == version)
    var = next(v for v in row["variant"] if v["cuda"] == cuda)
    assert Version(python) in SpecifierSet(row.get("python_wheels") or row["python"])
    cc = vtuple(gpu["compute_capability"])
    key = "arch_list_aarch64" if platform == "linux-aarch64" else "arch_list"
    sass = [vtuple(s) for s in var[key]]
    ptx = var.get("ptx") if key == "arch_list" else None
    assert any(s[:1] == cc[:1] and s <= cc for s in sass) or (ptx and vtuple(ptx) <= cc)
    if var.get("cudnn"):
        low = _cudnn_min_cc(var["cudnn"])
        assert low is None or cc >= low, (var["cudnn"], low)
    d = vtuple(driver)
    first = _first_driver(gpu)
    if first:
        assert d >= first[: len(d)]
    arch = _arch(gpu)
    if arch.get("last_driver_branch"):
        assert d[0] <= int(arch["last_driver_branch"])
    if rule_compat:
        fc = next(r for r in CUDA["forward_compat"] if r["package"] == rule_compat)
        assert str(d[0]) in fc["driver_branches"] and gpu.get("segment") in CUDA["forward_compat_policy"]["segments"]
    else:
        native, floor = _native_min(var["cuda"]), _floor(var["cuda"])
        assert (native and d >= native[: len(d)]) or (floor and d >= floor[: len(d)])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu=st.sampled_from(GPU_ROWS), driver=st.sampled_from(DRIVERS), python=st.sampled_from(PYTHONS),
       platform=st.sampled_from([None, "linux-x86_64", "linux-x86_64", "linux-aarch64", "linux-aarch64", "jetson",
                                 "windows", "macos"]))
def test_every_recommendation_meets_every_constraint(gpu: dict, driver: str, python: str, platform: str | None) -> None:
    try:
        p = queries.plan(M, gpu["name"], driver, None, python, platform=platform)
    except queries.QueryError as exc:
        # only a platform that contradicts the GPU's own (a GH200 asked for x86_64)
        assert platform and _platform(gpu, None) not in (platform, "linux-x86_64"), exc
        return
    if not p["possible"]:
        return
    want = _platform(gpu, platform)
    assert p["platform"] == want
    _meets(gpu, driver, python, p["torch"], p["cuda"],
           p["forward_compat"]["package"] if p.get("forward_compat") else None, want)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu=st.sampled_from(GPU_ROWS), driver=st.sampled_from(DRIVERS), python=st.sampled_from(PYTHONS[1:]),
       arch=st.sampled_from(["x86_64", "x86_64", "aarch64"]))
def test_every_planned_torch_build_meets_every_constraint(gpu: dict, driver: str, python: str, arch: str) -> None:
    """The same property through the whole pipeline: facts → checks → intents → plan (a CPU build to replace),
    plus the driver step's lifecycle and module flavour, read from the TOML."""
    card = replace(H100, name=gpu["name"], compute_capability=gpu["compute_capability"])
    env = PythonEnv(executable="/venv/bin/python", version=f"{python}.1", origin="VIRTUAL_ENV",
                    packages=[PyPackage("torch", "2.5.1+cpu", cpu_only=True)])
    facts = make_facts(gpus=[card], driver__kernel_module=driver, driver__userspace=driver, toolkits=[],
                       python_envs=[env], host__arch=arch)
    plan = plan_of(facts)
    drivers = [a for a in plan.actions() if isinstance(a, InstallDriver)]
    platform = _platform(gpu, "linux-aarch64" if arch == "aarch64" else None)
    if platform == "jetson":
        assert not drivers  # a Jetson's driver comes with JetPack, never a desktop branch
    for d in drivers:
        last = _arch(gpu).get("last_driver_branch")
        # a supported branch, or an ended one only when it is the GPU's last (and the plan says so)
        assert _branch_supported(d.branch) or (last and d.branch == int(last)), d.branch
        if not _branch_supported(d.branch):
            assert any(f"R{d.branch} is past NVIDIA's end of life" in n for n in plan.notes)
        if d.flavor == "open":
            assert d.branch >= 515 and _arch(gpu).get("open_kernel_module") is True
        if _arch(gpu).get("open_kernel_module_required") or gpu.get("open_kernel_module_required"):
            assert d.flavor == "open"
    torches = [a for a in plan.actions() if isinstance(a, ReinstallTorch)]
    if platform not in ("linux-x86_64", "linux-aarch64"):
        assert not torches  # no PyPI wheel on a JetPack 4-6 board: never a guess
        return
    planned = f"{drivers[0].branch}" if drivers else driver  # a planned branch: any release of it
    compat = [a.package for a in plan.actions() if isinstance(a, InstallCudaCompat)]
    for t in torches:
        _meets(gpu, planned, python, t.version, t.cuda, compat[0] if compat and not drivers else None, platform)


def test_matrix_cuda_names_each_channel_and_never_prints_an_unknown_driver_for_a_branch_row() -> None:
    from doctor.commands.matrix import TEXT

    a = queries.query_cuda(M, "13.3")
    text = "\n".join(TEXT["cuda"]({**a, "matrix": "m"}))
    assert "≥ ?" not in text and "Linux driver ≥ R610 (branch" in text
    b = queries.query_cuda(M, "12.4")
    text = "\n".join(TEXT["cuda"]({**b, "matrix": "m"}))
    assert "redistributable archives" in text and "PyPI's default wheel for" in text
