"""A value that starts with '-' never reaches a command as an option (issue 12, "option injection").

Every action the renderers can emit is rendered for apt, dnf, pip and conda with hostile values where the facts
can put one (package names, kernel releases, interpreter paths, the conda prefix): each is either refused (the
script says so and passes it to nothing) or sits after the `--` that ends the tool's options. The pin scripts,
made from a snapshot's package list, are checked the same way, and a dry run proves nothing ran.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from factories import make_facts
from fix_scenarios import scenario

from doctor.model.facts import Package
from doctor.model.plan import FixPlan, PlanStep
from doctor.model.remedy import (
    BlacklistNouveau,
    HoldPackages,
    InstallContainerToolkit,
    InstallCudaCompat,
    InstallCudnn,
    InstallDriver,
    InstallToolkit,
    LoadModule,
    PinDriverBranch,
    PipInstall,
    RebuildDkms,
    ReinstallTorch,
)
from doctor.render import apt, conda, dnf, pip
from doctor.render.fixscript import render_script
from doctor.render.values import fits

HOSTILE = ["-oAPT::Update::Pre-Invoke::=touch /tmp/gpu-doctor-pwned", "--help", "-k", "-x;touch /tmp/y",
           "--config-file=/tmp/evil"]


def every_action(value: str) -> list:
    return [InstallDriver(550, "proprietary", value, 535, False, None, False), InstallToolkit("12.4"),
            InstallCudnn(9, 12), InstallCudaCompat("cuda-compat-12-4", "12.4"),
            InstallContainerToolkit("docker"), InstallContainerToolkit("podman", install=False),
            BlacklistNouveau(), LoadModule("nvidia"), RebuildDkms(value), PinDriverBranch(550),
            HoldPackages(["nvidia-driver-550", value]),
            ReinstallTorch(value, "2.5.1", "12.4", "https://download.pytorch.org/whl/cu124", replace_cpu=True),
            ReinstallTorch("/venv/bin/python", "2.5.1", "12.4", "https://download.pytorch.org/whl/cu124",
                           companions=["torchvision==0.20.1"]),
            PipInstall(value, ["tensorflow[and-cuda]==2.21.0"]),
            PipInstall("/venv/bin/python", ["tensorflow[and-cuda]==2.21.0", value], uninstall=[value],
                       done_when=[value])]


def plan_with(value: str, os_id: str, version: str) -> FixPlan:
    steps = [PlanStep(f"s{n}", ["x.y"], "a step", [a], ["gpu-doctor", "check"]) for n, a in
             enumerate(every_action(value))]
    return FixPlan(os_id, version, f"{os_id} {version}", "x86_64", steps, conda_prefix=value,
                   python_origin="CONDA_PREFIX")


def commands(script: str) -> list[list[str]]:
    """The argv of every command line that runs something (comments and `say` lines excluded)."""
    out = []
    for line in script.splitlines():
        s = line.strip()
        if not s or s.startswith("#") or s.startswith("say "):
            continue
        try:
            out.append(shlex.split(s, comments=True))
        except ValueError:
            continue
    return out


def assert_no_option_injection(script: str, value: str) -> None:
    for argv in commands(script):
        if value not in argv:
            continue
        # A hostile value may appear only after the `--` that ends the options of the command it is given to.
        assert "--" in argv and argv.index("--") < argv.index(value), argv


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize(("os_id", "version", "system"), [("ubuntu", "22.04", apt), ("debian", "12", apt),
                                                           ("rocky", "9.4", dnf)])
def test_every_renderer_refuses_or_ends_options_before_a_hostile_value(value, os_id, version, system) -> None:
    plan = plan_with(value, os_id, version)
    for python in (pip, conda):
        script = render_script(plan, system, python, "test", "test")
        assert_no_option_injection(script, value)
        assert "REFUSED" in script and "is not a kernel release (uname -r)" in script
        if python is pip:
            assert "is not an absolute path, so it is not passed to the Python interpreter that runs pip" in script
    for python in (pip, conda):
        assert_no_option_injection(render_script(plan, None, python, "test", "test"), value)


def test_a_refused_package_keeps_the_good_ones_held() -> None:
    value = HOSTILE[0]
    lines = apt.render(HoldPackages(["nvidia-driver-550", value]), plan_with(value, "ubuntu", "22.04"))
    assert lines is not None and "apt_hold nvidia-driver-550" in lines
    assert any(line.startswith("# REFUSED:") and "is not a Debian package name" in line for line in lines)
    rpm = dnf.render(HoldPackages(["nvidia-driver-550", value]), plan_with(value, "rocky", "9.4"))
    assert rpm is not None and "run dnf versionlock add -- nvidia-driver-550" in rpm


@pytest.mark.parametrize(("kind", "good", "bad"), [
    ("debian-package", ["nvidia-driver-550", "libnvidia-compute-535", "g++-12", "libc6"], ["-o", "Nvidia", "a", "x y"]),
    ("rpm-package", ["kmod-nvidia-latest-dkms", "xorg-x11-drv-nvidia-cuda", "_x"], ["-q", "a b", "a;b", ""]),
    ("kernel", ["5.15.0-105-generic", "6.8.0-57-generic", "5.14.0-427.13.1.el9_4.x86_64", "6.1.0+rpt-rpi-v8"],
     ["-k", "generic", "5.15 x", "5.15\n"]),
    ("path", ["/venv/bin/python", "/opt/conda/envs/gpu"], ["-x", "venv/bin/python", "/a\x00b", ""]),
])
def test_grammars(kind, good, bad) -> None:
    assert all(fits(kind, v) for v in good)
    assert not any(fits(kind, v) for v in bad)


def test_pin_scripts_refuse_a_hostile_package_from_the_snapshot(tmp_path: Path) -> None:
    from doctor.commands.fix import render_pin

    value = HOSTILE[0]
    for os_id, version in (("ubuntu", "22.04"), ("rocky", "9.4")):
        facts = make_facts(host__os_id=os_id, host__os_version=version,
                           driver__packages=[Package("nvidia-driver-550", "550.90.07-0ubuntu1", "dpkg" if os_id ==
                                                     "ubuntu" else "rpm"),
                                             Package(value, "1", "dpkg" if os_id == "ubuntu" else "rpm")])
        script = render_pin(facts, "auto")
        assert_no_option_injection(script, value)
        assert "REFUSED" in script
        path = tmp_path / f"pin-{os_id}.sh"
        path.write_text(script)
        osr = tmp_path / f"os-release-{os_id}"
        osr.write_text(f"ID={os_id}\nVERSION_ID={version}\n")
        proc = subprocess.run(["bash", str(path), "--dry-run", "--log", str(tmp_path / "log")], capture_output=True,
                              text=True, timeout=60, env={**os.environ, "GPU_DOCTOR_OS_RELEASE": str(osr)})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"[dry-run] apt-mark hold -- {value}" not in proc.stdout
        assert not Path("/tmp/gpu-doctor-pwned").exists()


def test_a_hostile_kernel_from_the_snapshot_is_refused_in_the_fix_script() -> None:
    from doctor.fixplan import build_plan
    from doctor.matrix import current
    from doctor.pipeline import diagnose

    facts = scenario("module_missing_for_kernel")
    facts = dataclasses.replace(facts, driver=dataclasses.replace(facts.driver, running_kernel="-k"))
    plan = build_plan(facts, diagnose(facts).findings, current())
    script = render_script(plan, apt, pip, "test", "test")
    assert_no_option_injection(script, "-k")
    assert "refused: '-k' is not a kernel release (uname -r), so it is not passed to dkms -k" in script


def test_a_conda_spec_with_a_version_that_is_not_one_is_refused() -> None:
    plan = plan_with("/venv/bin/python", "ubuntu", "22.04")
    lines = conda.render(PipInstall("/venv/bin/python", ["tensorflow[and-cuda]==2.21.0"],
                                    conda=["tensorflow=--override-channels=*cuda*"]), plan)
    assert lines is not None and all(line.startswith(("# REFUSED", "say ")) for line in lines)
    good = conda.render(PipInstall("/venv/bin/python", ["x"], conda=["tensorflow=2.21.0=*cuda*"], cuda="12.5"), plan)
    assert good is not None and any("--override-channels -- cuda-version=12.5 'tensorflow=2.21.0=*cuda*'" in line
                                    for line in good)
