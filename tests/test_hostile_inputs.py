"""The attack harness, input side: hostile snapshots, reports, pin files, pasted texts and special files.

Every run goes through the real command line in-process (``cli.main``) with strict UTF-8 byte streams, and
must end with exit 0, 1 or 2 — never 3 ("internal error"), never a traceback, never a hang (each test is
under an alarm) — and text meant for a terminal must hold no control character. Counts are bounded so the
whole file stays within a few seconds; ``ATTACK_COUNTS`` records how many inputs each family tried.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile import (
    EXAMPLES,
    crashed,
    hostile_snapshot,
    hostile_text,
    leaves,
    load_example,
    no_hang_within,
    report_attack_counts,
    run_cli,
    set_at,
    terminal_unsafe,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ATTACK_COUNTS: Counter[str] = Counter()
FAST = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=True)
GPU_DOCTOR = Path(sys.executable).with_name("gpu-doctor")


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    with no_hang_within(20, "the command"):
        yield


@pytest.fixture(scope="module", autouse=True)
def report_counts() -> Iterator[None]:
    yield
    report_attack_counts(ATTACK_COUNTS)


def write_json(path: Path, data: Any) -> str:
    # surrogatepass: a lone surrogate from a strategy is written as JSON escapes by json.dumps (ensure_ascii)
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def assert_clean_exit(r: Any, allowed: tuple[int, ...] = (0, 1, 2, 4)) -> None:
    assert not crashed(r), r
    assert r.code in allowed, r
    if r.code == 2:
        lines = r.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpu-doctor: error: "), r.err
        assert not terminal_unsafe(r.err), r.err


# --- family 1: schema-valid snapshots with hostile values, through every renderer ------------------

RENDERS = [
    (["check", "-v"], "text"),
    (["check", "--format", "markdown"], "text"),
    (["check", "--format", "junit"], "junit"),
    (["check", "--json"], "json"),
    (["fix"], "script"),
    (["fix", "--file", "requirements"], "requirements"),
    (["pin", "--force", "--format", "pip"], "script"),
    (["explain", "CUDA error: no kernel image is available for execution on the device"], "text"),
]


@settings(FAST, max_examples=60)
@given(snapshot=hostile_snapshot(), which=st.sampled_from(RENDERS))
def test_hostile_snapshot_never_crashes_any_renderer(tmp_path_factory: pytest.TempPathFactory,
                                                    snapshot: dict[str, Any], which: tuple[list[str], str]) -> None:
    argv, kind = which
    path = write_json(tmp_path_factory.mktemp("snap") / "s.json", snapshot)
    ATTACK_COUNTS["hostile snapshots"] += 1
    r = run_cli([*argv, "--facts", path])
    assert_clean_exit(r)
    if kind == "text":
        assert terminal_unsafe(r.out) == [], r.out
    elif kind == "junit" and r.code in (0, 1):
        ET.fromstring(r.out.split("\n", 1)[1])  # well-formed XML 1.0, whatever the facts held
    elif kind == "json":
        report = json.loads(r.out)
        assert report["schema"] == "gpu-doctor.report/v1"
        assert [c["id"] for c in report["checks"] if c["status"] == "crashed"] == [], "a check crashed on a value"
    elif kind == "requirements":
        assert not any(line.endswith("\\") for line in r.out.splitlines()), "pip would join the next line"


# --- family 2: JSON that cannot be printed or parsed safely -----------------------------------------

HEALTHY = EXAMPLES[[p.name for p in EXAMPLES].index("healthy-8x-h100.json")]


def bomb_texts() -> list[tuple[str, bytes]]:
    base = HEALTHY.read_text()
    mem = '"memory_total_mib": 81559'
    assert mem in base
    return [
        ("5000-digit int", base.replace(mem, '"memory_total_mib": ' + "9" * 5000, 1).encode()),
        ("41-digit int", base.replace(mem, '"memory_total_mib": ' + "9" * 41, 1).encode()),
        ("huge float", base.replace(mem, '"memory_total_mib": 1e999', 1).encode()),
        ("NaN", base.replace(mem, '"memory_total_mib": NaN', 1).encode()),
        ("-Infinity", base.replace(mem, '"memory_total_mib": -Infinity', 1).encode()),
        ("deep nesting", b"[" * 200_000 + b"]" * 200_000),
        ("deep object", b'{"a":' * 100_000 + b"1" + b"}" * 100_000),
        ("not UTF-8", b"\xff\xfe\x00{" + base.encode("utf-16")[:200]),
        ("UTF-16", base.encode("utf-16")),
        ("empty", b""),
        ("a list", b"[1, 2, 3]"),
        ("NUL bytes", b"\x00" * 1000),
        ("lone surrogates", base.replace('"NVIDIA H100 80GB HBM3"', '"\\ud800\\udfff\\u001b[2J"').encode()),
    ]


BOMB_COMMANDS = [
    ["check", "--facts", "{}"], ["check", "--format", "junit", "--facts", "{}"], ["fix", "--facts", "{}"],
    ["pin", "--force", "--facts", "{}"], ["diff", "{}", str(HEALTHY)], ["diff", str(HEALTHY), "{}"],
    ["fleet", "{}"], ["explain", "--facts", "{}", "CUDA error: out of memory"],
]


@pytest.mark.parametrize(("name", "data"), bomb_texts(), ids=[n for n, _ in bomb_texts()])
def test_json_bombs_are_one_line_errors(tmp_path: Path, name: str, data: bytes) -> None:
    path = tmp_path / "bomb.json"
    path.write_bytes(data)
    for argv in BOMB_COMMANDS:
        ATTACK_COUNTS["JSON bombs"] += 1
        r = run_cli([a if a != "{}" else str(path) for a in argv])
        assert_clean_exit(r)
        if name != "lone surrogates":
            assert r.code in (1, 2) if argv[0] == "fleet" else r.code == 2, (argv, r)
        if argv[0] == "fleet" and name != "lone surrogates":
            assert r.code == 1 and str(path) in r.out, "an unreadable report is named and fails the fleet"
        assert not terminal_unsafe(r.out) or argv[0] in ("fix", "pin")


# --- family 3: type confusion (the schema refuses; nothing downstream meets a wrong type) -----------

WRONG = st.sampled_from([3, -1, 1.5, True, None, "x", [], [1], {}, {"a": 1}, "\ud800"])


@settings(FAST, max_examples=25)
@given(example=st.sampled_from(EXAMPLES), data=st.data())
def test_wrong_types_are_refused_or_tolerated(tmp_path_factory: pytest.TempPathFactory, example: Path,
                                              data: st.DataObject) -> None:
    snap = copy.deepcopy(load_example(example))
    spots = [p for p, _ in leaves(snap) if p and p[0] != "schema"]
    for _ in range(data.draw(st.integers(1, 4))):
        set_at(snap, data.draw(st.sampled_from(spots)), data.draw(WRONG))
    report = {"schema": "gpu-doctor.report/v1", "status": data.draw(st.sampled_from(["ok", "warn", "fail", 3])),
              "matrix": None, "findings": data.draw(st.sampled_from([{}, [1], [{"code": 1}], "x", None,
                                                                     [{"code": "a", "severity": 3}]])),
              "checks": [], "facts": snap}
    d = tmp_path_factory.mktemp("types")
    snap_path, report_path = write_json(d / "snap.json", snap), write_json(d / "report.json", report)
    for argv in (["check", "--facts", snap_path], ["diff", snap_path, str(HEALTHY)],
                 ["fleet", snap_path, report_path], ["pin", "--force", "--facts", snap_path]):
        ATTACK_COUNTS["type confusion"] += 1
        r = run_cli(argv)
        assert_clean_exit(r)
    r = run_cli(["fleet", report_path])
    assert r.code == 1 and report_path in r.out, "a report whose findings are not findings fails the fleet"


def test_a_corrupt_report_that_says_ok_is_not_a_healthy_node(tmp_path: Path) -> None:
    r = run_cli(["check", "--json", "--facts", str(HEALTHY)])
    good = json.loads(r.out)
    (tmp_path / "good.json").write_text(r.out)
    for i, findings in enumerate([{}, "none", [1, 2], [{"code": "x"}], None]):
        bad = {**good, "status": "ok", "findings": findings}
        (tmp_path / f"bad{i}.json").write_text(json.dumps(bad, indent=2))
    r = run_cli(["fleet", str(tmp_path)])
    assert r.code == 1
    for i in range(5):
        assert f"bad{i}.json" in r.out
    assert "5 unreadable file(s)" in r.out


# --- family 4: special files where a file belongs ---------------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> str:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return str(path)


@pytest.mark.parametrize("special", ["fifo", "/dev/urandom", "/dev/zero", "dir"])
def test_special_files_are_refused_at_once(tmp_path: Path, fifo: str, special: str) -> None:
    path = fifo if special == "fifo" else str(tmp_path) if special == "dir" else special
    pin = tmp_path / "pin.txt"
    pin.write_text("# gpu-doctor-pin v1\n")
    for argv in (["check", "--facts", path], ["check", "--from-collect-env", path], ["fix", "--facts", path],
                 ["pin", "--check", path, "--facts", str(HEALTHY)], ["diff", path, str(HEALTHY)],
                 ["explain", "--facts", path, "CUDA error"], ["explain", "--from-collect-env", path, "CUDA error"],
                 ["check", "--dockerfile", path]):
        ATTACK_COUNTS["special files"] += 1
        r = run_cli(argv)
        assert_clean_exit(r, (2,))
    r = run_cli(["fleet", path] if special != "dir" else ["fleet", str(HEALTHY), fifo])
    assert r.code in (1, 2) and not crashed(r)


def test_a_fifo_inside_a_fleet_directory_is_named_not_waited_for(tmp_path: Path) -> None:
    run = run_cli(["check", "--json", "--facts", str(HEALTHY)])
    (tmp_path / "node1.json").write_text(run.out)
    os.mkfifo(tmp_path / "node2.json")
    os.symlink("/dev/urandom", tmp_path / "node3.json")
    ATTACK_COUNTS["special files"] += 1
    r = run_cli(["fleet", str(tmp_path)])
    assert r.code == 1
    assert "node2.json: cannot read: a named pipe, not a regular file" in r.out
    assert "node3.json: cannot read: a device, not a regular file" in r.out


# --- family 5: bytes on standard input under a strict locale ----------------------------------------


@settings(FAST, max_examples=40)
@given(data=st.one_of(st.binary(max_size=200), st.sampled_from([b"\xff\xfe\xfd", b"\x80" * 50, b"\xed\xa0\x80"])),
       argv=st.sampled_from([["check", "--facts", "-"], ["check", "--from-collect-env", "-"], ["explain", "-"],
                             ["diff", "-", str(HEALTHY)], ["fix", "--facts", "-"]]))
def test_any_bytes_on_stdin(data: bytes, argv: list[str]) -> None:
    ATTACK_COUNTS["stdin bytes"] += 1
    r = run_cli([*argv, *(["--no-probe"] if argv[0] == "explain" else [])], stdin=data)
    assert_clean_exit(r)
    assert not terminal_unsafe(r.out)


def test_non_utf8_stdin_under_a_strict_c_locale(tmp_path: Path) -> None:
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": "ascii:strict"}
    for argv in (["check", "--from-collect-env", "-"], ["explain", "--no-probe", "-"]):
        ATTACK_COUNTS["stdin bytes"] += 1
        p = subprocess.run([str(GPU_DOCTOR), *argv], input=b"CUDA error: out of memory \xff\xfe\x80",
                           capture_output=True, env=env, timeout=30, check=False)
        assert p.returncode in (0, 1, 2, 4), p.stderr
        assert b"Traceback" not in p.stderr and b"internal error" not in p.stderr


# --- family 6: pasted texts (collect_env reports, error logs) ---------------------------------------

COLLECT_ENV = sorted((Path(__file__).parent / "data" / "collect_env").glob("*.txt"))
LONG = ["9" * 5000, "1" * 60, "535." + "9" * 5000, "²³", "\x1b[31m", "[/]"]


@settings(FAST, max_examples=30)
@given(report=st.sampled_from(COLLECT_ENV), data=st.data())
def test_hostile_collect_env_reports(tmp_path_factory: pytest.TempPathFactory, report: Path,
                                     data: st.DataObject) -> None:
    lines = report.read_text(encoding="utf-8", errors="replace").splitlines()
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(lines) - 1))
        value = data.draw(st.one_of(hostile_text, st.sampled_from(LONG)))
        head, sep, _tail = lines[i].partition(": ")
        lines[i] = f"{head}{sep}{value}" if sep else value + lines[i]
    path = tmp_path_factory.mktemp("ce") / "report.txt"
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    ATTACK_COUNTS["collect_env texts"] += 1
    r = run_cli(["check", "-v", "--from-collect-env", str(path)])
    assert_clean_exit(r)
    assert not terminal_unsafe(r.out)


EXPLAIN_BITS = ["RuntimeError: The NVIDIA driver on your system is too old (found version ",
                "CUDA error: no kernel image is available", "Tried to allocate ", " GiB", "sm_",
                "CUDA driver version is insufficient for CUDA runtime version", "GPU ", "NCCL error",
                # what explain reads as stated facts and loader-path notes (doctor/explain.py)
                "Ignoring visible gpu device (device: 0, name: ", ") with Cuda compute capability ",
                "The NVIDIA driver's CUDA version is ", " which is older than the ptxas CUDA version (",
                "Could not load dynamic library 'libcublas.so.", ": cannot open shared object file", "64_11.dll"]


@settings(FAST, max_examples=40)
@given(text=st.lists(st.one_of(hostile_text, st.sampled_from(LONG), st.sampled_from(EXPLAIN_BITS)),
                     min_size=1, max_size=8).map("".join))
def test_hostile_error_texts_for_explain(text: str) -> None:
    ATTACK_COUNTS["explain texts"] += 1
    r = run_cli(["explain", "--no-probe", "-"], stdin=text.encode("utf-8", "surrogatepass"))
    assert_clean_exit(r)
    assert not terminal_unsafe(r.out)


@settings(FAST, max_examples=25)
@given(text=st.lists(st.one_of(hostile_text, st.sampled_from(LONG), st.sampled_from(EXPLAIN_BITS)),
                     min_size=1, max_size=8).map("".join))
def test_hostile_error_texts_judged_on_a_snapshot(text: str) -> None:
    # the text's own statements become facts (explain.with_stated_facts) and name loader directories
    ATTACK_COUNTS["explain texts"] += 1
    r = run_cli(["explain", "--facts", str(HEALTHY), "-"], stdin=text.encode("utf-8", "surrogatepass"))
    assert_clean_exit(r)
    assert not terminal_unsafe(r.out)


# --- family 7: pin files -------------------------------------------------------------------------------


def test_pins_with_whitespace_and_control_characters_round_trip(tmp_path: Path) -> None:
    snap = load_example(HEALTHY)
    snap["driver"]["packages"] = [{"name": "nvidia driver 535", "version": "535.104 .05", "manager": "dpkg"},
                                  {"name": "libnvidia\ncompute", "version": "535\t1", "manager": "dpkg"},
                                  {"name": "x%20y", "version": "''", "manager": "dpkg"}]
    facts = write_json(tmp_path / "a.json", snap)
    pin = tmp_path / "pin.txt"
    assert run_cli(["pin", "--force", "--format", "pip", "-o", str(pin), "--facts", facts]).code == 0
    r = run_cli(["pin", "--check", str(pin), "--facts", facts])
    assert r.code == 0 and "No drift:" in r.out, r
    snap["driver"]["packages"][0]["version"] = "535.104 .06"
    r = run_cli(["pin", "--check", str(pin), "--facts", write_json(tmp_path / "b.json", snap)])
    assert r.code == 1 and "package nvidia driver 535: pinned 535.104 .05, now 535.104 .06" in r.out


def test_a_pin_line_that_cannot_be_read_is_an_error_not_no_drift(tmp_path: Path) -> None:
    pin = tmp_path / "pin.txt"
    pin.write_text("# gpu-doctor-pin v1\n# pin: pkg nvidia driver 535.104.05\n")
    ATTACK_COUNTS["pin files"] += 1
    r = run_cli(["pin", "--check", str(pin), "--facts", str(HEALTHY)])
    assert r.code == 2 and "line 2: a pin line must be '# pin: KIND NAME VERSION'" in r.err


# --- family 8: values that must reach a script exactly -----------------------------------------------


@pytest.mark.parametrize("python", ["/opt/my\nenv/bin/python", "/opt/env\\", "/opt/e'n v\\/bin/py\\",
                                    "/opt/\x1b[2J/python"])
def test_interpreter_paths_survive_the_fix_script_exactly(tmp_path: Path, python: str) -> None:
    snap = load_example(EXAMPLES[[p.name for p in EXAMPLES].index("rtx5090-cu124-torch.json")])
    for env in snap["python_envs"]:
        env["executable"] = python
    facts = write_json(tmp_path / "s.json", snap)
    ATTACK_COUNTS["script values"] += 1
    script = run_cli(["fix", "--facts", facts])
    assert script.code == 0
    lines = [x for x in script.out.splitlines() if x.strip().startswith("need_python ")]
    assert lines, script.out
    word = lines[0].strip()[len("need_python "):]
    echoed = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True).stdout
    assert echoed == python.encode()
    req = run_cli(["fix", "--facts", facts, "--file", "requirements"])
    assert not any(x.endswith("\\") for x in req.out.splitlines())


# --- family 9: output that cannot be written ---------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_disk_is_a_one_line_io_error() -> None:
    with open("/dev/full", "w") as full:
        p = subprocess.run([str(GPU_DOCTOR), "check", "-v", "--facts", str(HEALTHY)], stdout=full,
                           stderr=subprocess.PIPE, timeout=60, check=False)
    ATTACK_COUNTS["full disk"] += 1
    assert p.returncode == 2
    assert p.stderr.decode().strip() == "gpu-doctor: error: cannot write the output: No space left on device"


@pytest.mark.parametrize("digits", ["9" * 5000, "²³", "١٢٣"])
def test_long_and_foreign_numbers_in_pasted_texts(tmp_path: Path, digits: str) -> None:
    too_old = f"RuntimeError: The NVIDIA driver on your system is too old (found version {digits})."
    report = tmp_path / "ce.txt"
    report.write_text(f"PyTorch version: 2.5.1+cu124\nCUDA used to build PyTorch: 12.4\nGPU models and "
                      f"configuration:\nGPU {digits}: NVIDIA A100\nNvidia driver version: 550.{digits}\n{too_old}\n")
    for argv, stdin in ((["explain", "--no-probe", "-"], too_old.encode()),
                        (["check", "-v", "--from-collect-env", str(report)], b""),
                        (["explain", "--from-collect-env", str(report), too_old], b"")):
        ATTACK_COUNTS["long numbers in texts"] += 1
        r = run_cli(argv, stdin=stdin)
        assert_clean_exit(r)


@pytest.mark.parametrize("kind", ["fifo"])
def test_a_hostile_matrix_cache_never_blocks_or_crashes_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              kind: str) -> None:
    cache = tmp_path / "gpu-doctor" / "pypi-rows.json"
    cache.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(cache)
    else:
        cache.write_bytes(b"[" * 100_000)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from doctor import matrix

    monkeypatch.setattr(matrix, "current", matrix.current.__wrapped__ if hasattr(matrix.current, "__wrapped__")
                        else matrix.current)
    ATTACK_COUNTS["special files"] += 1
    r = run_cli(["check", "--facts", str(HEALTHY)])
    assert_clean_exit(r)


def test_a_lone_surrogate_written_to_a_file_is_no_crash(tmp_path: Path) -> None:
    snap = load_example(EXAMPLES[[p.name for p in EXAMPLES].index("rtx5090-cu124-torch.json")])
    for env in snap["python_envs"]:
        env["executable"] = "/opt/\ud800/bin/python"
    facts = write_json(tmp_path / "s.json", snap)
    for argv in (["fix", "-o", str(tmp_path / "fix.sh")], ["fix", "--json", "-o", str(tmp_path / "plan.json")],
                 ["pin", "--force", "-o", str(tmp_path / "pin.sh")]):
        ATTACK_COUNTS["script values"] += 1
        r = run_cli([*argv, "--facts", facts])
        assert_clean_exit(r, (0,))
    assert json.loads((tmp_path / "plan.json").read_text())  # a JSON escape: still valid JSON


@pytest.mark.parametrize("kind", ["fifo", "deep", "nasty"])
def test_a_hostile_nvidia_releases_cache_never_blocks_crashes_or_reaches_the_terminal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    from doctor import redist

    cache = tmp_path / "gpu-doctor" / redist.CACHE_FILE
    cache.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(cache)
    elif kind == "deep":
        cache.write_bytes(b"[" * 100_000)
    else:
        cache.write_text(json.dumps({"schema": 1, "fetched_at": "\x1b[2J2026", "seen": {
            "cuda": {"version": "99.0\x1b]0;pwned\x07", "source": "https://x/\x9b31m"},
            "cudnn": {"version": "99.1", "source": "https://x/\u202e[red]"},
            "driver_branch": {"version": "9" * 5000, "source": "$(touch /tmp/x)"}}}))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    ATTACK_COUNTS["special files"] += 1
    for argv in (["matrix"], ["matrix", "driver", "620"], ["matrix", "--json"]):
        r = run_cli(argv)
        assert_clean_exit(r)
        assert not terminal_unsafe(r.out), (argv, terminal_unsafe(r.out))
        assert "pwned" not in r.out and "$(touch" not in r.out


# --- family 9: the planner's questions (plan --want/--driver/--driver-cuda/--gpu, matrix gpu --platform) ----

PLAN_BITS = ["torch", "tensorflow", "jax", "jax[cuda12]", ">=", "==", "2.16", "12.4", "580", "[", "]", " ", ",",
             "--", "-rf", "$(id)", "`id`", ";", "\n", "9" * 300]


@settings(FAST, max_examples=40)
@given(want=st.lists(st.one_of(hostile_text, st.sampled_from(PLAN_BITS)), max_size=6).map("".join),
       level=st.lists(st.one_of(hostile_text, st.sampled_from(PLAN_BITS)), max_size=4).map("".join),
       gpu=st.sampled_from(["GH200", "Orin (nvgpu)", "Tesla K80", "A100"]),
       platform=st.sampled_from(["linux-x86_64", "linux-aarch64", "jetson"]))
def test_hostile_plan_questions(want: str, level: str, gpu: str, platform: str) -> None:
    ATTACK_COUNTS["plan questions"] += 1
    r = run_cli(["plan", "--gpu", gpu, "--platform", platform, "--want", want or "torch", "--driver-cuda",
                 level or "12.4", "--python", "3.12"])
    assert_clean_exit(r)
    assert not terminal_unsafe(r.out)
