"""Which interpreter `check` inspects, and what a bad --python says (issue 13: the checked environment)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from doctor.cli import main
from doctor.host import Host
from doctor.probes import pyenvs
from doctor.probes.base import Recorder

REPO = Path(__file__).resolve().parent.parent


def fake_env(root: Path, name: str) -> Path:
    """An environment directory whose bin/python3 is a real interpreter (a symlink, like a venv's)."""
    (root / name / "bin").mkdir(parents=True)
    (root / name / "bin" / "python3").symlink_to(sys.executable)
    return root / name


def test_gpu_doctors_own_venv_is_skipped_and_the_report_says_so(tmp_path: Path, monkeypatch) -> None:
    own, user = fake_env(tmp_path, "tool-venv"), fake_env(tmp_path, "user-bin")
    monkeypatch.setattr(pyenvs, "own_prefix", lambda: os.path.realpath(own))
    host = Host(env={"VIRTUAL_ENV": str(own), "PATH": f"{own}/bin:{user}/bin"})
    rec = Recorder()
    assert pyenvs.target_pythons(host, [], rec) == [(f"{user}/bin/python3", "PATH")]
    (err,) = rec.errors
    assert err.probe == pyenvs.OWN_ENV_PROBE and f"--python {own}" in err.reason


def test_the_active_venv_is_checked_when_it_is_not_gpu_doctors(tmp_path: Path, monkeypatch) -> None:
    own, user = fake_env(tmp_path, "tool-venv"), fake_env(tmp_path, "project")
    monkeypatch.setattr(pyenvs, "own_prefix", lambda: os.path.realpath(own))
    host = Host(env={"VIRTUAL_ENV": str(user), "PATH": "/usr/bin"})
    assert pyenvs.target_pythons(host, [], Recorder()) == [(f"{user}/bin/python3", "VIRTUAL_ENV")]


def test_own_venv_is_checked_when_asked_with_python(tmp_path: Path, monkeypatch) -> None:
    own = fake_env(tmp_path, "tool-venv")
    monkeypatch.setattr(pyenvs, "own_prefix", lambda: os.path.realpath(own))
    host = Host(env={"VIRTUAL_ENV": str(own)})
    assert pyenvs.target_pythons(host, [str(own)]) == [(f"{own}/bin/python3", "--python")]


def test_installed_in_a_venv_check_names_the_interpreter_it_checked_and_why(tmp_path: Path) -> None:
    """The real console script of this repository's venv: activated, it must not check itself."""
    venv = Path(sys.prefix)
    user = fake_env(tmp_path, "user")
    env = {**os.environ, "VIRTUAL_ENV": str(venv), "PATH": f"{venv}/bin:{user}/bin:/usr/bin:/bin"}
    env.pop("CONDA_PREFIX", None)
    out = subprocess.run([str(venv / "bin" / "gpu-doctor"), "check", "--format", "text"], env=env,
                         capture_output=True, text=True, timeout=120)
    want = f"python: {user}/bin/python3 (python3 on PATH) · gpu-doctor's own environment {venv} is not checked"
    assert want in out.stdout


@pytest.mark.parametrize(("given", "words"), [
    ("/etc/passwd", "exists but is not a Python interpreter"),
    ("/bin/false", "exists but is not a Python interpreter (exit 1)"),
    ("/tmp", "a directory but not a Python environment"),
    ("/nonexistent/python3", "not found"),
])
def test_a_bad_python_is_a_one_line_usage_error(given: str, words: str, capsys) -> None:
    assert main(["check", "--python", given]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and given in err


def test_a_relative_python_is_stored_as_an_absolute_path(tmp_path: Path, monkeypatch, capsys) -> None:
    fake_env(tmp_path, "tv")
    monkeypatch.chdir(tmp_path)
    assert main(["snapshot", "--python", "tv", "--timeout", "20"]) == 0
    import json

    (env,) = json.loads(capsys.readouterr().out)["python_envs"]
    assert env["executable"] == f"{tmp_path}/tv/bin/python3" and env["origin"] == "--python"


def test_empty_root_is_an_error_not_this_machine(capsys) -> None:
    assert main(["check", "--root", ""]) == 2
    assert "--root" in capsys.readouterr().err


def test_a_python_2_interpreter_is_named_as_such(tmp_path: Path, capsys) -> None:
    old = tmp_path / "python2.7"
    old.write_text("#!/bin/sh\necho 'python 2 7'\n")  # what the version question prints in Python 2.7
    old.chmod(0o755)
    assert main(["check", "--python", str(old)]) == 2
    assert "Python 2.7; gpu-doctor reads environments of Python 3.6 or later" in capsys.readouterr().err


# --- issue 23: a pyenv shim is resolved as pyenv resolves it, without running its shell chain -------------


def fake_pyenv(root: Path, versions: tuple[str, ...] = ("3.12.1",), default: str | None = "3.12.1") -> Path:
    (root / "shims").mkdir(parents=True)
    shim = root / "shims" / "python3"
    shim.write_text(f'#!/usr/bin/env bash\nset -e\nprogram="${{0##*/}}"\nexport PYENV_ROOT="{root}"\n'
                    f'exec "{root}/libexec/pyenv" exec "$program" "$@"\n')
    shim.chmod(0o755)
    for v in versions:
        fake_env(root / "versions", v)
    if default:
        (root / "version").write_text(f"{default}\n")
    return root


@pytest.mark.parametrize(("env", "local", "want"), [
    ({}, None, "versions/3.12.1/bin/python3"),  # $PYENV_ROOT/version
    ({"PYENV_VERSION": "3.11.9"}, None, "versions/3.11.9/bin/python3"),  # the shell's choice wins
    ({}, "3.11.9", "versions/3.11.9/bin/python3"),  # a .python-version of the directory
    ({"PYENV_VERSION": "system"}, None, "usr-bin/bin/python3"),  # "system": the next python3 on PATH
    ({"PYENV_VERSION": "3.9.0"}, None, "shims/python3"),  # not installed: pyenv itself must say so
])
def test_a_pyenv_shim_is_resolved_to_the_interpreter_it_runs(tmp_path: Path, env: dict, local: str | None,
                                                             want: str) -> None:
    root = fake_pyenv(tmp_path / "pyenv", versions=("3.12.1", "3.11.9"))
    system = fake_env(tmp_path, "usr-bin")
    project = tmp_path / "project" / "sub"
    project.mkdir(parents=True)
    if local:
        (tmp_path / "project" / ".python-version").write_text(f"# pinned\n{local}\n")
    host = Host(env={"PATH": f"{root}/shims:{system}/bin", "PYENV_DIR": str(project), **env})
    ((exe, origin),) = pyenvs.target_pythons(host, [], Recorder())
    assert origin == "PATH"
    assert exe in (f"{root}/{want}", f"{tmp_path}/{want}"), exe


def test_a_real_interpreter_on_path_is_not_reported_as_a_truncated_read(tmp_path: Path) -> None:
    # Seen on a real GPU machine (tests/data/gpu-validate/h100-580-2026-11-27): telling a pyenv shim from an
    # interpreter reads the first 4 KiB of python3, and every real interpreter is longer than that. It is not
    # something the probes "could not learn".
    env = fake_env(tmp_path, "venv")  # bin/python3: this interpreter, megabytes of ELF
    exe = env / "bin" / "python3"
    assert os.path.getsize(exe) > pyenvs._SHIM_MAX
    host = Host(env={"PATH": f"{env}/bin"})
    ((found, origin),) = pyenvs.target_pythons(host, [], Recorder())
    assert (found, origin) == (str(exe), "PATH")
    assert not [n for n in host.notes if "truncated" in n], host.notes


def test_own_interpreter_with_a_framework_is_the_users_environment(tmp_path: Path, monkeypatch) -> None:
    site = tmp_path / "site"
    (site / "torch-2.5.1+cu124.dist-info").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [str(site)])
    assert pyenvs._holds_frameworks()
    monkeypatch.setattr(sys, "path", [str(tmp_path / "nothing-here")])
    assert not pyenvs._holds_frameworks()
