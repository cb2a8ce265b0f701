"""The words a user meets on the command line (issue 13: output words)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hostile import popen_signalled

from doctor.cli import build_parser, main
from doctor.engine import replayed_reason
from doctor.model.facts import LibRef
from doctor.model.findings import Evidence, value_text

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "doctor" / "examples" / "debian12-535-no-gpu.json"
MACOS = REPO / "tests" / "data" / "collect_env" / "pytorch-121067-macos-no-gpu-torch2.2.2.txt"


@pytest.mark.parametrize(("typed", "meant"), [("chek", "check"), ("snapshto", "snapshot"), ("flet", "fleet")])
def test_a_misspelt_command_suggests_the_command(typed: str, meant: str, capsys) -> None:
    assert main([typed]) == 2
    err = capsys.readouterr().err
    assert f"did you mean `gpu-doctor {meant}`" in err and err.count("\n") == 1


def test_a_misspelt_check_id_suggests_the_check_id(capsys) -> None:
    assert main(["check", "--facts", str(EXAMPLE), "driver.not_loadd"]) == 2
    assert "did you mean 'driver.not_loaded'" in capsys.readouterr().err


def test_help_says_what_gpu_doctor_alone_does() -> None:
    text = build_parser().format_help()
    assert "opens the interactive view" in " ".join(text.split()) and "alone runs `check`." not in text


def test_a_commands_parse_makes_only_its_parser_and_the_help_still_lists_every_command(capsys) -> None:
    # `check` parses its own arguments only (the other commands' parsers cost every run ~5 ms); `--help` alone and
    # a command's --help say what they always said.
    from doctor.cli import COMMANDS

    commands = build_parser(only="check")._subparsers._group_actions[0].choices
    assert list(commands) == ["check"]
    assert build_parser(only="check").parse_args(["check", "--json", "driver.loaded"]).checks == ["driver.loaded"]
    listed = build_parser(only="").format_help()
    assert all(f"    {name} " in listed for name in COMMANDS)
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    assert "--dockerfile" in capsys.readouterr().out


def test_timeout_zero_says_it_must_be_more_than_zero(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["check", "--timeout", "0"])
    assert exc.value.code == 2
    assert "must be more than 0 and at most 3600 seconds, got 0" in capsys.readouterr().err


@pytest.mark.parametrize(("value", "shown"), [
    (None, "unknown"), (False, "no"), (True, "yes"), ("", "(empty)"), ("\x1b[31mred", "\\x1b[31mred"),
    (LibRef(path="/usr/lib/libcuda.so.1", version="535.309.01", stub=False),
     "path /usr/lib/libcuda.so.1, version 535.309.01, stub no"),
    ([1, 2], "1, 2"), ([], "none"),
])
def test_evidence_values_are_words_not_python_reprs(value: object, shown: str) -> None:
    assert value_text(value) == shown


def test_an_unset_environment_variable_reads_not_set() -> None:
    assert Evidence("env.CUDA_VISIBLE_DEVICES", None, "env").line() == "env.CUDA_VISIBLE_DEVICES = not set  [env]"


def test_verbose_report_shows_no_repr_and_passing_lines_name_their_check(capsys) -> None:
    main(["check", "--facts", str(EXAMPLE), "-v"])
    out = capsys.readouterr().out
    assert "LibRef(" not in out and "= None" not in out and "= False" not in out
    passing = out.split("✓ NVIDIA driver", 1)[1].split("\n  ", 1)[0]
    assert "check: driver.missing" in out and "code: driver.missing" not in passing


def test_markdown_passing_rows_name_the_check_not_a_failure_code(capsys) -> None:
    main(["check", "--facts", str(EXAMPLE), "--format", "markdown"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ✓")]
    assert rows and all("`driver.missing`" in r or "driver.missing" not in r for r in rows)
    assert any("`toolkit.missing`" in r for r in rows)


def test_check_facts_accepts_a_report_like_diff_and_fleet(tmp_path: Path, capsys) -> None:
    main(["check", "--facts", str(EXAMPLE), "--json"])
    report = tmp_path / "report.json"
    report.write_text(capsys.readouterr().out)
    assert main(["check", "--facts", str(report), "--json"]) == 1
    again = json.loads(capsys.readouterr().out)
    assert {f["code"] for f in again["findings"]} == {f["code"] for f in json.loads(report.read_text())["findings"]}


def test_not_checked_reasons_of_a_pasted_report_do_not_describe_this_machines_probes(capsys) -> None:
    main(["check", "-v", "--from-collect-env", str(MACOS)])
    out = capsys.readouterr().out
    assert "/proc/modules" not in out and "mokutil" not in out
    assert "What the report does not say" in out and "What the probes could not learn" not in out


def test_a_replayed_reason_keeps_the_rule_and_drops_the_probe_detail() -> None:
    assert replayed_reason("the loaded modules are unknown (/proc/modules unreadable)") == \
        "not in the report: the loaded modules are unknown"
    assert replayed_reason("no GPU visible") == "no GPU visible"


def test_ctrl_c_early_is_one_line_not_a_traceback(monkeypatch, capsys) -> None:
    import doctor.cli as cli

    def interrupted(only: str | None = None) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert main(["check"]) == 130
    assert capsys.readouterr().err == "gpu-doctor: interrupted\n"


def test_ctrl_c_in_the_first_moments_of_the_real_command(tmp_path: Path) -> None:
    """SIGINT at several moments of start-up: never a traceback through gpu-doctor's code.

    Before the interpreter has run the console script's first lines (tens of ms) Python itself reports the
    interrupt; no program can catch that, so only frames of gpu-doctor's own files count.
    """
    import os
    import signal
    import subprocess
    import sys
    import time

    exe = Path(sys.prefix) / "bin" / "gpu-doctor"
    for delay in (0.02, 0.05, 0.08, 0.1, 0.15, 0.25):
        proc = popen_signalled([str(exe), "check", "--facts", str(EXAMPLE)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        # line 1 of doctor/__init__.py installs the handler: an interrupt during that one statement is Python's
        ours = [f for f in re.findall(r'File "[^"]*/doctor/[^"]*", line \d+', err) if not f.endswith("line 1")]
        assert not ours, (delay, err)


def test_ctrl_c_once_running_is_exactly_one_line(tmp_path: Path) -> None:
    """Deterministic: interrupted while it waits for a snapshot on standard input (certainly in main)."""
    import signal
    import subprocess
    import sys
    import time

    exe = Path(sys.prefix) / "bin" / "gpu-doctor"
    proc = popen_signalled([str(exe), "check", "--facts", "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while "pipe" not in Path(f"/proc/{proc.pid}/wchan").read_text():  # blocked reading the pipe: in main
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (130, "gpu-doctor: interrupted\n")


def test_verbose_shows_what_deep_learned(tmp_path: Path, capsys) -> None:
    from dataclasses import replace

    from doctor.model.facts import DeepResult, PyPackage, PythonEnv, load_facts

    facts = load_facts(EXAMPLE.read_text())
    torch = PyPackage(name="torch", version="2.5.1+cu124", cuda="12.4", cpu_only=False,
                      loaded_libraries=["/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9"],
                      deep=DeepResult(is_available=False, device_count=0, cuda="12.4", cudnn="90100",
                                      arch_list=["sm_50", "sm_90"]))
    env = PythonEnv(executable="/venv/bin/python", version="3.11.9", origin="VIRTUAL_ENV", packages=[torch])
    snap = tmp_path / "deep.json"
    snap.write_text(replace(facts, python_envs=[env]).to_json())
    main(["check", "--facts", str(snap), "-v"])
    out = capsys.readouterr().out
    assert "/venv/bin/python ($VIRTUAL_ENV): Python 3.11.9" in out
    assert "--deep: is_available no, 0 device(s), arch list sm_50, sm_90, CUDA 12.4, cuDNN 9.1.0" in out
    assert "--deep: CUDA libraries mapped: /venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9" in out


# --- issue 23: what a new user trips on ------------------------------------------------------------------


def test_plan_without_arguments_plans_for_this_machine(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from factories import make_facts

    import doctor.probes

    facts = make_facts()  # an H100 on driver 550.90.07, Python 3.11
    monkeypatch.setattr(doctor.probes, "collect", lambda host, **kw: facts)
    code = main(["plan"])
    out, err = capsys.readouterr()
    assert "planning for this machine" in err and "driver 550.90.07" in err and facts.gpus[0].name in err
    assert code == 0 and out.startswith("torch ")
    assert main(["plan", "--driver", "550.90.07", "--gpu", facts.gpus[0].name, "--python", "3.11"]) == 0
    assert capsys.readouterr().out == out  # the same plan as when the machine is described by hand


def test_plan_without_arguments_on_a_machine_without_gpu_or_driver_says_what_to_give(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from factories import make_facts

    import doctor.probes

    monkeypatch.setattr(doctor.probes, "collect", lambda host, **kw: make_facts(
        gpus=[], driver__kernel_module=None, driver__userspace=None, driver__cuda_driver_api=None,
        driver__smi_cuda_version=None))
    assert main(["plan"]) == 2
    assert "--gpu, --driver or --want" in capsys.readouterr().err


def test_plan_without_arguments_plans_within_the_driver_cuda_level_when_the_version_is_unknown(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from factories import make_facts

    import doctor.probes

    monkeypatch.setattr(doctor.probes, "collect", lambda host, **kw: make_facts(
        driver__kernel_module=None, driver__userspace=None, driver__cuda_driver_api="12.2",
        driver__smi_cuda_version=None))
    assert main(["plan", "--json"]) == 0
    out = capsys.readouterr().out
    import json

    plan = json.loads(out)
    cuda = tuple(int(x) for x in str(plan["cuda"]).split(".")[:2])
    assert cuda[0] < 13, plan  # a CUDA 13 build needs R580: never proposed to a driver that runs CUDA 12.2


def test_help_names_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for code in ("0 no failure", "1 at least one failure", "2 usage", "3 internal error", "4 (check)"):
        assert code in text


def test_pin_help_speaks_of_pinning_not_of_a_plan(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["pin", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "plan" not in text.lower()


def test_verbose_says_each_reason_for_not_checking_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from factories import make_facts

    snap = tmp_path / "facts.json"
    snap.write_text(make_facts().to_json())
    main(["check", "--facts", str(snap), "-v"])
    out = capsys.readouterr().out
    hint = "no active test was recorded"
    assert out.count(hint) == 1
    block = out[out.index(hint):].split("\n\n")[0]
    assert "active.smoke" in block and "active.nccl_tests" in block


def test_deep_text_output_shows_what_the_frameworks_answered_and_mapped(tmp_path: Path, capsys) -> None:
    from dataclasses import replace

    from doctor.model.facts import DeepResult, PyPackage, PythonEnv, load_facts

    facts = load_facts(EXAMPLE.read_text())
    torch = PyPackage(name="torch", version="2.9.0+cu130", cuda="13.0", cpu_only=False,
                      loaded_libraries=["/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
                                        "/venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcudart.so.13"],
                      deep=DeepResult(is_available=True, device_count=1, cuda="13.0", cudnn="92400"))
    jax = PyPackage(name="jaxlib", version="0.4.30", deep=DeepResult(error="ImportError: libcudnn.so.9: cannot open"))
    snap = tmp_path / "deep.json"
    snap.write_text(replace(facts, python_envs=[PythonEnv(executable="/venv/bin/python", version="3.11.9",
                                                          origin="VIRTUAL_ENV", packages=[torch, jax])]).to_json())
    main(["check", "--facts", str(snap)])  # not -v: the default text output
    out = capsys.readouterr().out
    block = out[out.index("What --deep learned"):]
    assert "torch 2.9.0+cu130 in /venv/bin/python" in block
    assert "said: CUDA available yes; 1 device(s); CUDA 13.0; cuDNN 9.24.0" in block
    assert "mapped: libcudnn.so.9, libcudart.so.13" in block
    assert "the import failed: ImportError: libcudnn.so.9: cannot open" in block


def test_without_deep_the_text_output_has_no_deep_section(tmp_path: Path, capsys) -> None:
    main(["check", "--facts", str(EXAMPLE)])
    assert "What --deep learned" not in capsys.readouterr().out


@pytest.mark.parametrize(("command", "collects"), [("check", False), ("explain", False), ("fleet", True),
                                                   ("tui", True), ("demo", True)])
def test_only_the_long_lived_commands_run_with_the_cycle_collector(monkeypatch: pytest.MonkeyPatch, command: str,
                                                                    collects: bool) -> None:
    """A one-shot command leaves its few cycles to the end of the process (the collector's passes over its imports
    cost `check` ~5-10 ms); the TUI and a fleet of reports keep it; the caller's setting comes back either way."""
    import gc
    import importlib

    from doctor import cli

    seen: list[bool] = []
    module = importlib.import_module(cli.COMMANDS[command][0])
    monkeypatch.setattr(module, "run", lambda name, args: seen.append(gc.isenabled()) or 0)
    argv = {"check": ["check", "--facts", "-"], "explain": ["explain", "x"], "fleet": ["fleet", "."]}.get(
        command, [command])
    assert gc.isenabled()
    assert cli.main(argv) == 0
    assert seen == [collects] and gc.isenabled()
    gc.disable()
    try:
        cli.main(argv)
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()


def test_a_one_shot_command_ends_the_process_at_once_with_everything_written(tmp_path: Path) -> None:
    """`gpu-doctor check` skips the interpreter's teardown (a full collection, ~180 modules unloaded): its output,
    its exit code and its atexit handlers are those of a normal exit."""
    import subprocess
    import sys

    example = Path(__file__).parent.parent / "doctor" / "examples" / "healthy-8x-h100.json"
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.stderr.write('atexit ran\\n'))\n"
            f"sys.argv = ['gpu-doctor', 'check', '--facts', {str(example)!r}, '--format', 'json']\n"
            "from doctor.cli import main\n"
            "main()\n"
            "sys.stderr.write('not reached\\n')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.stderr == "atexit ran\n"
    report = json.loads(proc.stdout)  # the whole report, flushed
    assert (report["status"], proc.returncode) == ("ok", 0)
    assert main(["check", "--facts", str(example), "--format", "json"]) == proc.returncode  # in-process: returns
