"""A hostile snapshot cannot inject a command: every string field carries shell metacharacters, the scripts
still pass shellcheck, a dry run creates none of the marker files, and the values are echoed literally."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fix_scenarios import SCENARIOS, scenario

from doctor.fixplan import build_plan
from doctor.matrix import current
from doctor.model.facts import Facts
from doctor.pipeline import diagnose
from doctor.render import apt, conda, dnf, pip
from doctor.render.fixscript import render_script

SUFFIX = "';touch {m}1;'\"$(touch {m}2)\"`touch {m}3`;touch {m}4 #"
KEEP = {"os_id", "os_version", "schema", "source", "manager", "origin", "name"}


def poison(value: Any, marker: str, key: str = "") -> Any:
    """Every string gets a hostile suffix (version-like strings keep their numeric prefix, so the planner still
    uses them); the OS identity stays, so the plan is still rendered for the distribution."""
    if isinstance(value, str):
        return value if key in KEEP else value + SUFFIX.format(m=marker)
    if isinstance(value, list):
        return [poison(v, marker, key) for v in value]
    if isinstance(value, dict):
        return {k: poison(v, marker, k) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: poison(getattr(value, f.name), marker, f.name)
                                             for f in dataclasses.fields(value)})
    return value


def hostile(name: str, os_id: str, version: str, marker: str) -> Facts:
    facts = scenario(name, os_id, version)
    bad = poison(facts, marker)
    # Package names are what apt-mark/versionlock receive: poison them too.
    return dataclasses.replace(bad, driver=dataclasses.replace(bad.driver, packages=[
        dataclasses.replace(p, name=p.name + SUFFIX.format(m=marker)) for p in bad.driver.packages]))


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (.ci/run installs it)")
# ~8 s each (shellcheck over every script): with the slow tests (CI runs both); the fast set keeps
# tests/test_option_injection.py and the renderers' attack harness (tests/test_hostile_inputs.py)
@pytest.mark.parametrize(("os_id", "version", "system"), [
    pytest.param("ubuntu", "22.04", apt, marks=pytest.mark.slow),
    pytest.param("debian", "12", apt, marks=pytest.mark.slow),
    pytest.param("rocky", "9.4", dnf, marks=pytest.mark.slow)])  # dnf's argv: tests/test_option_injection.py
def test_hostile_facts_are_quoted_everywhere(tmp_path, os_id, version, system):
    marker = str(tmp_path / "PWNED")
    osr = tmp_path / "os-release"
    osr.write_text(f"ID={os_id}\nVERSION_ID={version}\n")
    paths = []
    for name in SCENARIOS:
        facts = hostile(name, os_id, version, marker)
        plan = build_plan(facts, diagnose(facts).findings, current())
        for python in (pip, conda):
            path = tmp_path / f"{name}-{python.__name__.rsplit('.', 1)[-1]}.sh"
            path.write_text(render_script(plan, system, python, "test", "test"))
            paths.append(path)
    check = subprocess.run(["shellcheck", "--severity=style", *map(str, paths)], capture_output=True, text=True)
    assert check.stdout == "", check.stdout[:3000]
    outputs = []
    for path in paths:
        proc = subprocess.run(["bash", str(path), "--dry-run", "--log", str(path.with_suffix(".log"))],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "GPU_DOCTOR_OS_RELEASE": str(osr), "CONDA_EXE": "true"})
        assert proc.returncode == 0, (path.name, proc.stdout[-1500:], proc.stderr[-1500:])
        outputs.append(proc.stdout)
    assert not list(Path(tmp_path).glob("PWNED*")), "a hostile value was executed"
    everything = "\n".join(outputs)
    # The values are printed literally, metacharacters and all.
    assert f"/venv/bin/python{SUFFIX.format(m=marker)} -m pip install" in everything
    # A package name that is not a package name (here: full of shell syntax) is refused, never held.
    assert f"apt-mark hold -- nvidia-driver-550{SUFFIX.format(m=marker)}" not in everything
    assert "is not a Debian package name, so it is not passed to apt-mark hold" in everything or system is dnf


def test_newlines_in_facts_cannot_end_a_comment(tmp_path):
    facts = scenario("module_userspace_mismatch")
    evil = "\nrm -rf /tmp/nothing-here\n"
    facts = dataclasses.replace(facts, host=dataclasses.replace(facts.host, os_pretty="Ubuntu" + evil),
                                driver=dataclasses.replace(facts.driver, userspace="550.90.07" + evil))
    plan = build_plan(facts, diagnose(facts).findings, current())
    text = render_script(plan, apt, pip, "test", "test")
    assert "\nrm -rf" not in text
