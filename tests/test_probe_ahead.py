"""`check` starts the NVML child before its own imports (doctor.ahead) when its arguments surely ask to probe
this machine; the probes adopt it and learn exactly what they would have learned by starting it; a child nobody
adopted is killed, and a hung one is stopped at the same timeout and deadline as any command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hostile import alive, survivors

from doctor import ahead, spawn
from doctor.commands import check
from doctor.host import Host

PLAIN_PYTHON = {**os.environ, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}


@pytest.mark.parametrize(("argv", "starts"), [
    ([], True),
    (["--json"], True),
    (["-v", "--strict", "driver.not_loaded"], True),
    (["--format", "json", "--output", "/tmp/x.json"], True),
    (["--format=markdown", "--timeout", "3", "--python", "/usr/bin/python3", "--deep"], True),
    (["--facts", "snap.json"], False),
    (["--root", "/mnt/image"], False),
    (["--from-collect-env", "-"], False),
    (["--static", "--dockerfile", "Dockerfile"], False),
    (["--list-checks"], False),
    (["--help"], False),
    (["--fa", "snap.json"], False),  # an abbreviation argparse would take for --facts
    (["--output", "--facts"], True),  # a value, however it looks (argparse then parses it the same way)
    (["-vq"], False),
])
def test_the_nvml_child_starts_ahead_only_for_a_probe_of_this_machine(monkeypatch: pytest.MonkeyPatch,
                                                                      argv: list[str], starts: bool) -> None:
    calls: list[bool] = []
    monkeypatch.setattr(ahead, "start_native", lambda: calls.append(True) or True)
    end = check.start_ahead("check", argv)
    assert bool(calls) == starts and (end is ahead.discard) == starts
    assert check.start_ahead("snapshot", ["-o", "x.json", "--smoke"]) is ahead.discard
    assert check.start_ahead("snapshot", ["--facts", "x"]) is None



def test_a_child_started_ahead_and_not_taken_is_killed_by_the_command(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The arguments turn out wrong after the child started: it is killed, its pipes closed, nothing waits."""
    from doctor import cli

    started: list[int] = []
    real = ahead.start_native

    def spy() -> bool:
        ok = real()
        if ok and ahead._native is not None:
            started.append(ahead._native.proc.pid)
        return ok

    monkeypatch.setattr(ahead, "start_native", spy)
    with pytest.raises(SystemExit) as exited:  # argparse's usage error
        cli.main(["check", "--format", "no-such-format"])
    assert exited.value.code == 2 and "invalid choice" in capsys.readouterr().err
    assert len(started) == 1 and ahead._native is None
    assert survivors(started) == []


@pytest.mark.real_driver
def test_the_adopted_child_answers_as_a_child_started_by_the_probes(tmp_path: Path) -> None:
    """The same facts, field by field, whether the NVML child was started ahead (plain `snapshot`) or by the probes
    (`--root /`: the same machine, but no head start)."""
    outs = []
    for extra in ([], ["--root", "/"]):
        proc = subprocess.run([sys.executable, "-m", "doctor", "snapshot", *extra], capture_output=True, text=True,
                              env=PLAIN_PYTHON, cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, proc.stderr
        facts = json.loads(proc.stdout)
        facts.pop("collected_at")
        outs.append(facts)
    assert outs[0]["driver"] == outs[1]["driver"] and outs[0]["driver"].get("userspace")
    assert outs[0] == outs[1]


def _hung_child(tmp_path: Path) -> ahead.Ahead:
    argv = ("/bin/sh", "-c", "echo started; exec sleep 1000")
    stdin = spawn.ChildInput()
    return ahead.Ahead(argv, spawn.start(argv, os.environ, stdin), stdin)


def test_an_adopted_child_that_hangs_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    child = _hung_child(tmp_path)
    host = Host(timeout=0.5)
    t0 = time.monotonic()
    child.stdin.send(None)
    result = host.adopt(child.argv, child.proc, 0.5, child.stdin)
    assert result.error == "timed out after 0.5s" and result.stdout == "started\n"
    assert time.monotonic() - t0 < 30 and not alive(child.proc.pid)


def test_an_adopted_child_is_held_to_the_overall_deadline(tmp_path: Path) -> None:
    child = _hung_child(tmp_path)
    host = Host(timeout=5.0, budget=0.01)
    time.sleep(0.1)  # the overall deadline has passed
    child.stdin.close()
    result = host.adopt(child.argv, child.proc, 5.0, child.stdin)
    assert result.error is not None and result.error.startswith("not run: the overall deadline")
    assert result.returncode is None and not alive(child.proc.pid)


def test_a_child_for_another_command_line_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probes take the child only when it is the very one they would start (same interpreter, import path,
    script and arguments); any other is discarded, killed."""
    child = _hung_child(Path("."))
    monkeypatch.setattr(ahead, "_native", child)
    assert ahead.take(["/bin/sh", "-c", "something else"]) is None
    assert ahead._native is None
    assert survivors([child.proc.pid]) == []


def test_a_host_that_is_not_this_machine_or_has_its_own_runner_adopts_nothing(tmp_path: Path) -> None:
    from doctor.probes import native

    def runner(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not run")

    assert not Host(root=tmp_path).adopts() and not Host(runner=runner).adopts() and Host().adopts()
    assert native.started_ahead(Host(root=tmp_path)) is None
