"""`gpu-doctor fix`: plans for the classic failures, and every generated script checked for real.

Every script of the scenario × distribution table passes shellcheck (no finding at any severity) and
`bash -n`, and runs to its end with --dry-run against a fake os-release (GPU_DOCTOR_OS_RELEASE).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fix_scenarios import DISTROS, SCENARIOS, scenario

from doctor.fixplan import Options, PlanError, build_plan
from doctor.matrix import current
from doctor.model.plan import FixPlan
from doctor.model.remedy import BlacklistNouveau, InstallCudaCompat, InstallDriver, Manual, ReinstallTorch
from doctor.pipeline import diagnose
from doctor.render import apt, conda, dnf, pip
from doctor.render.fixscript import render_script

SHELLCHECK = shutil.which("shellcheck")
needs_shellcheck = pytest.mark.skipif(SHELLCHECK is None, reason="shellcheck is not installed (.ci/run installs it)")


def plan_for(name: str, os_id: str = "ubuntu", os_version: str = "22.04", opts: Options | None = None,
             **extra) -> FixPlan:
    facts = scenario(name, os_id, os_version, **extra)
    return build_plan(facts, diagnose(facts).findings, current(), opts)


def script_for(plan: FixPlan, fmt: str = "auto") -> str:
    from doctor.commands.fix import renderers

    system, python = renderers(plan, fmt)
    return render_script(plan, system, python, fmt, "test")


def os_release(tmp_path: Path, os_id: str, version: str) -> Path:
    path = tmp_path / f"os-release-{os_id}-{version}"
    path.write_text(f'NAME="{os_id}"\nID={os_id}\nVERSION_ID="{version}"\n')
    return path


def dry_run(script: Path, osr: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(script), "--dry-run", "--log", str(script.with_suffix(".log")), *args],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "GPU_DOCTOR_OS_RELEASE": str(osr), **(env or {})})


def shellcheck(paths: list[Path]) -> str:
    proc = subprocess.run([SHELLCHECK or "shellcheck", "--severity=style", *map(str, paths)], capture_output=True,
                          text=True, timeout=300)
    return proc.stdout + proc.stderr


# --- the classic failures: what a careful admin expects to read -----------------------------------


def test_driver_too_old_for_toolkit_installs_the_supported_long_term_branch_580_server_on_ubuntu():
    # CUDA 12.4 asks for R550, which NVIDIA lists as past its end of life: the plan installs the lowest long-term
    # branch still supported on the day of the snapshot (R580, until 2028-06), and says why.
    plan = plan_for("driver_too_old_for_toolkit")
    drivers = [a for a in plan.actions() if isinstance(a, InstallDriver)]
    assert drivers == [InstallDriver(580, "proprietary", "5.15.0-105-generic", drivers[0].min_branch, True, None,
                                     False, True)]
    assert any("long-term support branch" in n and "R550 is past its end of life" in n for n in plan.notes)
    text = script_for(plan)
    assert "apt_install linux-headers-5.15.0-105-generic" in text
    assert "apt_install nvidia-driver-580-server" in text
    assert "CUDA toolkit 12.4.1 at /usr/local/cuda-12.4 needs ≥ 525.60.13 (550.54.15 for full support)" in text
    assert "A reboot is needed afterwards" in text


def test_driver_too_old_on_debian12_uses_debians_535_when_it_runs_the_toolkit():
    # 535 runs CUDA 12.4 by minor-version compatibility: Debian's own packages are the careful choice.
    text = script_for(plan_for("driver_too_old_for_toolkit", "debian", "12"))
    assert "apt_install nvidia-driver nvidia-kernel-dkms firmware-misc-nonfree" in text
    assert "cuda-drivers" not in text


def test_driver_too_old_on_debian11_needs_nvidias_repository():
    text = script_for(plan_for("driver_too_old_for_toolkit", "debian", "11"))
    assert "cuda_repo" in text and "apt_install cuda-drivers-580" in text
    assert "Pin: version 580.*" in text  # cuda-drivers-580 alone would drift to newer branches


def test_driver_too_old_on_rhel_uses_the_module_stream():
    el9 = "5.14.0-427.13.1.el9_4.x86_64"
    text = script_for(plan_for("driver_too_old_for_toolkit", "rocky", "9.4", host__kernel=el9,
                               driver__running_kernel=el9))
    assert "run dnf -y module install -- nvidia-driver:580-dkms" in text
    assert f"dnf_install kernel-devel-{el9} kernel-headers" in text


def test_a_kernel_the_distribution_cannot_package_gets_no_headers_install_but_a_note():
    # An Ubuntu kernel name on Rocky (or a custom/cloud kernel): no kernel-devel-<that> package can exist.
    plan = plan_for("driver_too_old_for_toolkit", "rocky", "9.4")
    (drv,) = [a for a in plan.actions() if isinstance(a, InstallDriver)]
    assert drv.headers is False
    assert any("5.15.0-105-generic is not one Rocky Linux 9.4 packages" in n for n in plan.notes)
    text = script_for(plan)
    assert "kernel-devel-5.15.0-105-generic" not in text and "no kernel-devel-… package exists" in text
    custom = "6.1.0-custom"
    ubuntu = script_for(plan_for("driver_too_old_for_toolkit", host__kernel=custom, driver__running_kernel=custom))
    assert f"linux-headers-{custom}" not in ubuntu and "no linux-headers-… package exists" in ubuntu
    assert "cuda-rhel9.repo" in text


def test_cpu_only_torch_is_replaced_explicitly_from_the_cuda_index():
    plan = plan_for("cpu_only_torch")
    (torch,) = [a for a in plan.actions() if isinstance(a, ReinstallTorch)]
    assert (torch.version, torch.cuda, torch.replace_cpu) == ("2.5.1", "12.4", True)
    text = script_for(plan)
    assert "run /venv/bin/python -m pip uninstall -y -- torch" in text
    assert ("run /venv/bin/python -m pip install --index-url https://download.pytorch.org/whl/cu124 -- torch==2.5.1"
            in text)
    assert "[ \"$have\" = 2.5.1+cu124 ]" in text  # idempotent: the right build is left alone


def test_rtx5090_with_cu124_torch_gets_a_build_with_sm120_kernels():
    plan = plan_for("rtx5090_cu124_torch")
    (torch,) = [a for a in plan.actions() if isinstance(a, ReinstallTorch)]
    var = current().torch_variant(torch.version, torch.cuda)
    assert "12.0" in var["arch_list"]
    assert torch.index_url == f"https://download.pytorch.org/whl/cu{torch.cuda.replace('.', '')}"
    assert "framework.arch_unsupported" in next(s for s in plan.steps if s.id.startswith("torch")).resolves


def test_rtx5090_on_an_old_driver_gets_the_open_580_branch_not_the_ended_570():
    plan = plan_for("rtx5090_cu124_torch", driver__kernel_module="550.90.07", driver__userspace="550.90.07")
    (drv,) = [a for a in plan.actions() if isinstance(a, InstallDriver)]
    assert (drv.branch, drv.flavor, drv.open_required) == (580, "open", True)  # R570 PB ended February 2026
    assert "apt_install nvidia-driver-580-open" in script_for(plan)
    # Debian has no 580 of its own, and NVIDIA's open packages are not named per branch: a manual step.
    assert "MANUAL" in script_for(plan_for("rtx5090_cu124_torch", "debian", "12", driver__kernel_module="550.90.07",
                                           driver__userspace="550.90.07"))


def test_nouveau_is_blacklisted_in_the_initramfs_and_asks_for_a_reboot(tmp_path):
    plan = plan_for("nouveau_active")
    assert any(isinstance(a, BlacklistNouveau) for a in plan.actions())
    step = next(s for s in plan.steps if s.id == "nouveau")
    assert set(step.resolves) == {"nouveau.active", "driver.not_loaded"}
    text = script_for(plan)
    assert "run update-initramfs -u" in text
    assert "dracut --force" in script_for(plan_for("nouveau_active", "rhel", "9.4"))
    path = tmp_path / "fix.sh"
    path.write_text(text)
    out = dry_run(path, os_release(tmp_path, "ubuntu", "22.04")).stdout
    assert "A REBOOT IS NEEDED" in out and "[dry-run] reboot" not in out
    out = dry_run(path, os_release(tmp_path, "ubuntu", "22.04"), "--reboot").stdout
    assert "[dry-run] reboot" in out


def test_module_userspace_mismatch_holds_the_packages_and_needs_a_reboot():
    text = script_for(plan_for("module_userspace_mismatch"))
    assert "apt_hold nvidia-driver-550" in text
    assert "need_reboot 'the loaded module 550.54.15 is older" in text
    assert "rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia" in text  # the no-reboot way, as a comment only
    assert "\n  run rmmod" not in text
    assert "run dnf versionlock add -- nvidia-driver-550" in script_for(plan_for("module_userspace_mismatch", "rhel",
                                                                              "8.10"))


def test_tensorflow_without_cudnn_installs_its_cuda_extra():
    text = script_for(plan_for("tf_without_cudnn"))
    assert "run /venv/bin/python -m pip install -- 'tensorflow[and-cuda]==2.21.0'" in text
    assert "nvidia-cudnn-cu12" in text  # already there when this wheel is installed


def test_forward_compat_installs_the_compat_package_instead_of_a_driver():
    plan = plan_for("forward_compat_cu130_on_535")
    assert [a for a in plan.actions() if isinstance(a, InstallCudaCompat)] == [InstallCudaCompat("cuda-compat-13-0",
                                                                                                 "13.0")]
    assert not [a for a in plan.actions() if isinstance(a, InstallDriver)]
    assert "apt_install cuda-compat-13-0" in script_for(plan)


def test_overrides_pick_the_driver_cuda_and_torch():
    plan = plan_for("cpu_only_torch", opts=Options(target_driver="570", target_cuda="12.6", want="torch==2.6.0"))
    assert plan.targets["driver_branch"] == 570 and plan.targets["toolkit"] == "12.6"
    assert plan.targets["torch"]["version"] == "2.6.0"
    with pytest.raises(PlanError):
        plan_for("cpu_only_torch", opts=Options(target_cuda="99.1"))
    with pytest.raises(PlanError):
        plan_for("cpu_only_torch", opts=Options(target_driver="banana"))


def test_every_failing_finding_is_resolved_or_left_to_a_person():
    for name in SCENARIOS:
        facts = scenario(name)
        findings = diagnose(facts).findings
        plan = build_plan(facts, findings, current())
        resolved = {c for s in plan.steps for c in s.resolves}
        for f in findings:
            if f.severity in ("fail", "warn") and f.code != "toolkit.missing":
                assert f.code in resolved, (name, f.code)


def test_unautomated_fixes_are_printed_as_comments_never_run():
    text = script_for(plan_for("secure_boot"))
    assert "# MANUAL" in text and "#   $ sudo mokutil --import /var/lib/dkms/mok.pub" in text
    assert "run mokutil" not in text


# --- every script of the table, for real ------------------------------------------------------------


# One apt and one dnf distribution in the fast set; every other release runs with the slow tests (CI runs both).
FAST_DISTROS = {("ubuntu", "22.04")}  # the others run with the slow tests (CI runs both)


@needs_shellcheck
@pytest.mark.parametrize(("os_id", "version"), [
    pytest.param(i, v, id=f"{i}-{v}", marks=() if (i, v) in FAST_DISTROS else pytest.mark.slow) for i, v in DISTROS])
def test_scripts_pass_shellcheck_bash_n_and_a_dry_run(tmp_path, os_id, version):
    osr = os_release(tmp_path, os_id, version)
    paths = []
    for name in SCENARIOS:
        path = tmp_path / f"{name}.sh"
        path.write_text(script_for(plan_for(name, os_id, version)))
        paths.append(path)
    assert shellcheck(paths) == ""
    for path in paths:
        assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0, path.name
        proc = dry_run(path, osr)
        assert proc.returncode == 0, (path.name, proc.stdout[-2000:], proc.stderr[-2000:])
        assert proc.stdout.rstrip().endswith("gpu-doctor fix: done. Then run: gpu-doctor check"), path.name
        assert "dry run: every command is printed" in proc.stdout


@needs_shellcheck
@pytest.mark.parametrize("fmt", ["pip", "conda"])
def test_python_formats_pass_shellcheck_and_a_dry_run(tmp_path, fmt):
    osr = os_release(tmp_path, "ubuntu", "22.04")
    paths = []
    for name in SCENARIOS:
        path = tmp_path / f"{name}.sh"
        path.write_text(script_for(plan_for(name), fmt))
        paths.append(path)
    assert shellcheck(paths) == ""
    for path in paths:
        proc = dry_run(path, osr, env={"CONDA_EXE": "true"})
        assert proc.returncode == 0, (path.name, proc.stdout[-2000:], proc.stderr[-2000:])


def real_run(script: Path, osr: Path) -> subprocess.CompletedProcess:
    """Run a script for real, but in a PATH where only harmless tools exist and `id -u` says root: a guard that
    failed to stop it could not change this machine (every package manager is "command not found")."""
    import shutil

    stubs = script.parent / "stubs"
    stubs.mkdir(exist_ok=True)
    for tool in ("sed", "head", "tr", "date", "tee", "cat", "mkdir", "touch", "dirname", "basename", "printf"):
        real = shutil.which(tool)
        if real and not (stubs / tool).exists():
            (stubs / tool).symlink_to(real)
    (stubs / "id").write_text("#!/bin/sh\necho 0\n")
    (stubs / "id").chmod(0o755)
    return subprocess.run([shutil.which("bash") or "/bin/bash", str(script), "--log", str(script.with_suffix(".log"))],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": str(stubs), "GPU_DOCTOR_OS_RELEASE": str(osr), "HOME": str(script.parent)})


def test_scripts_stop_on_another_os(tmp_path):
    path = tmp_path / "fix.sh"
    path.write_text(script_for(plan_for("driver_too_old_for_toolkit", "ubuntu", "22.04")))
    proc = real_run(path, os_release(tmp_path, "ubuntu", "24.04"))
    assert proc.returncode == 1
    assert "STOPPED: this plan was made for ubuntu 22.04 but" in proc.stdout + proc.stderr
    assert "apt-get" not in proc.stdout


def test_a_dry_run_on_another_os_shows_the_plan_with_a_loud_note(tmp_path):
    """A dry run changes nothing: reading the plan on another machine is allowed, and said loudly."""
    path = tmp_path / "fix.sh"
    path.write_text(script_for(plan_for("driver_too_old_for_toolkit", "ubuntu", "22.04")))
    proc = dry_run(path, os_release(tmp_path, "debian", "12"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOTE: this plan was made for ubuntu 22.04 but" in proc.stdout
    assert "[dry-run] apt-get" in proc.stdout


def test_rhel_minor_releases_match_the_plan(tmp_path):
    path = tmp_path / "fix.sh"
    path.write_text(script_for(plan_for("nouveau_active", "rocky", "9.4")))
    assert dry_run(path, os_release(tmp_path, "rocky", "9.5")).returncode == 0
    assert real_run(path, os_release(tmp_path, "almalinux", "9.4")).returncode == 1


def test_steps_already_done_are_skipped(tmp_path):
    # On this Debian machine ca-certificates and curl are installed: the CUDA repository step says so.
    if shutil.which("dpkg-query") is None:
        pytest.skip("not a dpkg system")
    path = tmp_path / "fix.sh"
    path.write_text(script_for(plan_for("system_cudnn_for_cuda11", "debian", "12")))
    out = dry_run(path, os_release(tmp_path, "debian", "12")).stdout
    if subprocess.run(["dpkg-query", "-W", "curl"], capture_output=True).returncode == 0:
        assert "already installed: ca-certificates curl" in out
    assert "[dry-run] apt-get install -y -- cudnn9-cuda-12" in out


def test_dry_run_writes_the_log(tmp_path):
    path = tmp_path / "fix.sh"
    path.write_text(script_for(plan_for("cpu_only_torch")))
    dry_run(path, os_release(tmp_path, "ubuntu", "22.04"))
    assert "torch==2.5.1" in path.with_suffix(".log").read_text()


# --- the files and the CLI ---------------------------------------------------------------------------


def test_requirements_constraints_and_environment_yml():
    plan = plan_for("cpu_only_torch")
    req = pip.requirements(plan)
    assert "--extra-index-url https://download.pytorch.org/whl/cu124" in req and "torch==2.5.1+cu124" in req
    assert "nvidia-cudnn-cu12==9.1.0.70" in pip.constraints(plan)
    tf = pip.constraints(plan_for("tf_without_cudnn"))
    assert "nvidia-cudnn-cu12<10.0,>=9.3.0.75" in tf
    env = conda.environment_yml(plan, "3.11")
    assert '- "pytorch-gpu=2.5.1"' in env and '- "cuda-version=12.4"' in env and '- "python=3.11"' in env


def test_conda_without_a_gpu_sets_conda_override_cuda():
    plan = plan_for("cpu_only_torch", gpus=[], host__pci_nvidia_gpus=0)
    assert not plan.gpu_visible
    assert "export CONDA_OVERRIDE_CUDA=12.4" in script_for(plan, "conda")


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, text=True, input=stdin,
                          timeout=120)


def test_cli_fix_prints_the_script_and_the_plan(tmp_path):
    facts = tmp_path / "facts.json"
    facts.write_text(scenario("cpu_only_torch").to_json())
    proc = run_cli("fix", "--facts", str(facts))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("#!/usr/bin/env bash\n# gpu-doctor fix script (format: apt+pip)")
    data = json.loads(run_cli("fix", "--facts", str(facts), "--json").stdout)
    assert data["schema"] == "gpu-doctor.fixplan/v1" and data["steps"][0]["resolves"] == ["framework.cpu_only_build"]
    out = tmp_path / "fix.sh"
    assert run_cli("fix", "--facts", str(facts), "-o", str(out)).returncode == 0
    assert os.access(out, os.X_OK)
    assert "torch==2.5.1+cu124" in run_cli("fix", "--facts", str(facts), "--file", "requirements").stdout


def test_cli_fix_usage_errors(tmp_path):
    facts = tmp_path / "facts.json"
    facts.write_text(scenario("cpu_only_torch", "rocky", "9.4").to_json())
    proc = run_cli("fix", "--facts", str(facts), "--format", "apt")
    assert proc.returncode == 2 and "--format apt: the plan is for rocky 9.4" in proc.stderr
    assert run_cli("fix", "--facts", str(facts), "--target-cuda", "77.7").returncode == 2


def test_cli_pin_writes_holds_and_check_reports_drift(tmp_path):
    from dataclasses import replace

    from fix_scenarios import make_facts

    healthy = make_facts()
    facts = tmp_path / "facts.json"
    facts.write_text(healthy.to_json())
    pinfile = tmp_path / "pin.sh"
    proc = run_cli("pin", "--facts", str(facts), "-o", str(pinfile))
    assert proc.returncode == 0, proc.stderr
    text = pinfile.read_text()
    assert "apt_hold nvidia-driver-550" in text and "Pin: version 550.*" in text
    assert run_cli("pin", "--facts", str(facts), "--check", str(pinfile)).returncode == 0
    drifted = replace(healthy, driver=replace(healthy.driver, kernel_module="550.127.05", userspace="550.127.05"))
    facts.write_text(drifted.to_json())
    proc = run_cli("pin", "--facts", str(facts), "--check", str(pinfile))
    assert proc.returncode == 1 and "driver nvidia: pinned 550.90.07, now 550.127.05" in proc.stdout
    constraints = run_cli("pin", "--facts", str(facts), "--format", "pip").stdout
    assert "torch==2.5.1" in constraints and "nvidia-cudnn-cu12==9.1.0.70" in constraints
    assert "pytorch 2.5.1.*" in run_cli("pin", "--facts", str(facts), "--format", "conda").stdout


def test_cli_pin_refuses_a_failing_state(tmp_path):
    facts = tmp_path / "facts.json"
    facts.write_text(scenario("cpu_only_torch").to_json())
    proc = run_cli("pin", "--facts", str(facts))
    assert proc.returncode == 1 and "not pinning a failing state" in proc.stderr


@needs_shellcheck
@pytest.mark.slow  # ~8 s of shellcheck runs: with the slow tests (CI runs both)
def test_pin_scripts_pass_shellcheck(tmp_path):
    from doctor.commands.fix import render_pin

    paths = []
    for os_id, version in DISTROS:
        path = tmp_path / f"pin-{os_id}-{version}.sh"
        path.write_text(render_pin(scenario("cpu_only_torch", os_id, version), "auto"))
        paths.append(path)
        proc = dry_run(path, os_release(tmp_path, os_id, version))
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert shellcheck(paths) == ""


def test_apt_and_dnf_cover_the_supported_releases():
    for os_id, version in DISTROS:
        assert apt.supports(os_id, version) or dnf.supports(os_id, version), (os_id, version)
    assert not apt.supports("ubuntu", "18.04") and not dnf.supports("rhel", "7.9")
    assert not apt.supports("debian", "10")


def test_manual_action_is_data():
    assert Manual("x", ["y"]).as_action() == {"action": "Manual", "text": "x", "commands": ["y"]}


def _plan_of(facts):
    return build_plan(facts, diagnose(facts).findings, current())


def test_inside_a_container_the_driver_is_the_hosts_and_never_installed_here() -> None:
    from dataclasses import replace

    from factories import H100, make_facts

    from doctor.model.facts import Toolkit

    # a GeForce card: forward compatibility (cuda-compat inside the container) does not apply to it
    rtx = replace(H100, name="NVIDIA GeForce RTX 4090", compute_capability="8.9")
    facts = make_facts(host__container="docker", driver__kernel_module="535.104.05", driver__userspace="535.104.05",
                       gpus=[rtx], toolkits=[Toolkit("/usr/local/cuda-13.0", "13.0.0", "13.0.88", "path")])
    plan = _plan_of(facts)
    actions = [type(a).__name__ for s in plan.steps for a in s.actions]
    assert "InstallDriver" not in actions
    step = next(s for s in plan.steps if "driver.too_old_for_cuda_runtime" in s.resolves)
    assert "container host" in " ".join(str(a) for a in step.actions) + step.why


def test_no_gpu_on_the_bus_never_folds_module_loading_into_a_driver_install() -> None:
    from factories import make_facts

    facts = make_facts(driver__kernel_module=None, driver__module_loaded=False, driver__userspace="535.309.01",
                       driver__nvml_error="Driver Not Loaded", host__pci_nvidia_gpus=0, gpus=[])
    plan = _plan_of(facts)
    step = next(s for s in plan.steps if "driver.not_loaded" in s.resolves)
    assert [type(a).__name__ for a in step.actions] == ["Manual"]
