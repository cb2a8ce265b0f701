"""The attack harness, output side: where `--output` writes, what Prometheus must carry, the reports `fleet`
and `diff` read, and `fleet`'s worker processes under signals.

Families (``ATTACK_COUNTS`` records how many inputs each tried; ``GPU_DOCTOR_ATTACK_COUNTS=FILE`` appends them):
* output targets — ``--output`` (check, fleet) and ``-o`` (fix, pin) onto a character device, a FIFO with
  and without a reader, /dev/stdout, a symbolic link (to a file, to a device, to nothing), a directory, a
  socket, a block device: written through or refused in one line, and the node is never replaced by a
  regular file nor chmod-ed;
* prometheus label values — hostile snapshots and non-UTF-8 file names through `check` / `fleet --format
  prometheus`: never a crash, always a file node_exporter's textfile collector reads;
* hostile reports — real reports with hostile values and wrong types through every `fleet` format and `diff`;
* fleet workers under signals (tests/test_hostile_signals.py style, real processes): SIGINT / SIGTERM end
  `fleet -j 2` within seconds and no worker survives; after SIGKILL of the doctor its workers die too, so
  whoever reads its standard output sees the end of it.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile import (
    EXAMPLES,
    alive,
    crashed,
    hostile_int,
    hostile_snapshot,
    hostile_text,
    leaves,
    no_hang_within,
    report_attack_counts,
    run_cli,
    set_at,
    terminal_unsafe,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_prometheus import textfile_rejects

ATTACK_COUNTS: Counter[str] = Counter()
FAST = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=True)
GPU_DOCTOR = Path(sys.executable).with_name("gpu-doctor")
HEALTHY = EXAMPLES[[p.name for p in EXAMPLES].index("healthy-8x-h100.json")]


@pytest.fixture(scope="module", autouse=True)
def report_counts() -> Iterator[None]:
    yield
    report_attack_counts(ATTACK_COUNTS)


def assert_clean_exit(r: Any, allowed: tuple[int, ...] = (0, 1, 2, 4)) -> None:
    assert not crashed(r), r
    assert r.code in allowed, r
    if r.code == 2:
        lines = r.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpu-doctor: error: "), r.err
        assert not terminal_unsafe(r.err), r.err


def kind(path: Path) -> str:
    mode = os.lstat(path).st_mode
    for name, test in (("link", stat.S_ISLNK), ("file", stat.S_ISREG), ("dir", stat.S_ISDIR), ("fifo", stat.S_ISFIFO),
                       ("char", stat.S_ISCHR), ("block", stat.S_ISBLK), ("socket", stat.S_ISSOCK)):
        if test(mode):
            return name
    return "?"


# --- family: output targets -------------------------------------------------------------------------

WRITERS = [
    ["check", "--facts", str(HEALTHY), "--format", "prometheus"],
    ["check", "--facts", str(HEALTHY), "--format", "nfd"],
    ["check", "--facts", str(HEALTHY), "--format", "json"],
    ["check", "--facts", str(HEALTHY), "--format", "github"],
    ["fleet", str(HEALTHY), "--format", "prometheus"],
    ["fleet", str(HEALTHY), "--format", "json"],
]


# `-o FILE` of fix and pin (and snapshot, which probes this machine): the same writer, a script made
# executable only when it is a new file
SCRIPT_WRITERS = [
    ["fix", "--facts", str(EXAMPLES[[p.name for p in EXAMPLES].index("rtx5090-cu124-torch.json")])],
    ["pin", "--force", "--facts", str(HEALTHY)],
]


@pytest.fixture()
def null_device(tmp_path: Path) -> Path:
    """A character device to write onto: as root, a node of our own for /dev/null's device (1, 3), so that a
    regression replaces a file in tmp_path, not the host's /dev/null; otherwise /dev/null (which only root
    could replace)."""
    if os.geteuid() != 0:
        return Path("/dev/null")
    node = tmp_path / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return node


@pytest.mark.parametrize("argv", WRITERS, ids=lambda a: f"{a[0]}-{a[-1]}")
def test_output_onto_a_character_device_writes_through_it(null_device: Path, argv: list[str]) -> None:
    before = os.stat(null_device)
    ATTACK_COUNTS["output targets"] += 1
    with no_hang_within(30, "--output onto a character device"):
        r = run_cli([*argv, "--output", str(null_device)])
    assert_clean_exit(r, (0,))
    after = os.lstat(null_device)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert [p.name for p in null_device.parent.iterdir() if p.name.startswith(".")] == []  # no temporary file


@pytest.mark.parametrize("argv", WRITERS, ids=lambda a: f"{a[0]}-{a[-1]}")
def test_output_onto_a_fifo_with_a_reader_reaches_the_reader(tmp_path: Path, argv: list[str]) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    ATTACK_COUNTS["output targets"] += 1
    with no_hang_within(30, "--output FIFO"):
        deadline = time.monotonic() + 20
        while True:  # the reader's open() may not have happened yet: the first try can see no reader
            r = run_cli([*argv, "--output", str(fifo)])
            if r.code != 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        reader.join(20)
    assert_clean_exit(r, (0,))
    assert kind(fifo) == "fifo" and got and got[0].strip()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary file left


@pytest.mark.parametrize("argv", SCRIPT_WRITERS, ids=lambda a: a[0])
def test_o_onto_a_character_device_neither_replaces_nor_chmods_it(null_device: Path, argv: list[str]) -> None:
    before = os.stat(null_device)
    ATTACK_COUNTS["output targets"] += 1
    with no_hang_within(30, "-o onto a character device"):
        r = run_cli([*argv, "-o", str(null_device)])
    assert_clean_exit(r, (0, 1))
    after = os.lstat(null_device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert stat.S_IMODE(after.st_mode) == stat.S_IMODE(before.st_mode)  # a script's 0755 is for new files only


def test_output_onto_a_fifo_nobody_reads_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for argv in [*WRITERS, *SCRIPT_WRITERS]:
        ATTACK_COUNTS["output targets"] += 1
        option = "-o" if argv[0] in ("fix", "pin") else "--output"
        with no_hang_within(20, f"{option} onto a FIFO without a reader"):
            r = run_cli([*argv, option, str(fifo)])
        assert_clean_exit(r, (2,))
        assert "no process is reading" in r.err
        assert kind(fifo) == "fifo"


@pytest.fixture()
def dev_stdout(tmp_path: Path) -> Path:
    """/dev/stdout, or as root a link of our own to the same place (/proc/self/fd/1), so that a regression
    replaces a link in tmp_path rather than the host's /dev/stdout."""
    if os.geteuid() != 0:
        return Path("/dev/stdout")
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    return link


def test_output_onto_dev_stdout_is_standard_output_and_the_link_stays(dev_stdout: Path) -> None:
    link = os.readlink(dev_stdout)
    for argv in (WRITERS[0], WRITERS[1], WRITERS[4]):  # a subprocess each: the three textfile writers
        ATTACK_COUNTS["output targets"] += 1
        p = subprocess.run([str(GPU_DOCTOR), *argv, "--output", str(dev_stdout)], capture_output=True,
                           timeout=60, check=False)
        assert p.returncode == 0, p.stderr
        assert p.stdout.strip(), "the report reached standard output"
        assert b"Traceback" not in p.stderr
    assert kind(dev_stdout) == "link" and os.readlink(dev_stdout) == link


def test_dev_stdout_redirected_to_a_file_fills_that_file(tmp_path: Path, dev_stdout: Path) -> None:
    out = tmp_path / "out.prom"
    with open(out, "wb") as fh:
        p = subprocess.run([str(GPU_DOCTOR), *WRITERS[0], "--output", str(dev_stdout)], stdout=fh,
                           stderr=subprocess.PIPE, timeout=60, check=False)
    ATTACK_COUNTS["output targets"] += 1
    assert p.returncode == 0, p.stderr
    assert textfile_rejects(out.read_text()) == [] and "gpu_doctor_ready" in out.read_text()
    assert sorted(x.name for x in tmp_path.iterdir() if x != dev_stdout) == ["out.prom"]


def test_a_symlink_is_followed_never_replaced(tmp_path: Path) -> None:
    real = tmp_path / "real.prom"
    real.write_text("old\n")
    link = tmp_path / "gpu_doctor.prom"
    link.symlink_to(real.name)
    ATTACK_COUNTS["output targets"] += 1
    r = run_cli([*WRITERS[0], "--output", str(link)])
    assert_clean_exit(r, (0,))
    assert kind(link) == "link" and os.readlink(link) == real.name
    assert "gpu_doctor_ready" in real.read_text()
    to_null = tmp_path / "to-null"
    to_null.symlink_to("/dev/null")  # followed: /dev/null is opened and written, never renamed over
    ATTACK_COUNTS["output targets"] += 1
    assert_clean_exit(run_cli([*WRITERS[1], "--output", str(to_null)]), (0,))
    assert kind(to_null) == "link" and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere" / "x")
    ATTACK_COUNTS["output targets"] += 1
    r = run_cli([*WRITERS[2], "--output", str(dangling)])
    assert_clean_exit(r, (2,))
    assert "does not exist" in r.err and kind(dangling) == "link"


def test_a_directory_a_socket_and_a_block_device_are_refused(tmp_path: Path) -> None:
    targets = [tmp_path / "dir"]
    targets[0].mkdir()
    sock_path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    targets.append(sock_path)
    if os.geteuid() == 0:  # a block device node of our own (an unused loop minor): never opened
        blk = tmp_path / "disk"
        os.mknod(blk, stat.S_IFBLK | 0o600, os.makedev(7, 250))
        targets.append(blk)
    try:
        for target in targets:
            before = kind(target)
            for argv in WRITERS:
                ATTACK_COUNTS["output targets"] += 1
                r = run_cli([*argv, "--output", str(target)])
                assert_clean_exit(r, (2,))
                assert kind(target) == before, f"{target} was replaced"
    finally:
        server.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(t.name for t in targets)


# --- family: prometheus label values -----------------------------------------------------------------


@settings(FAST, max_examples=25)
@given(snapshot=hostile_snapshot())
def test_hostile_snapshots_give_a_textfile_node_exporter_reads(tmp_path_factory: pytest.TempPathFactory,
                                                              snapshot: dict[str, Any]) -> None:
    path = tmp_path_factory.mktemp("snap") / "s.json"
    path.write_text(json.dumps(snapshot))
    ATTACK_COUNTS["prometheus label values"] += 1
    with no_hang_within(30, "check --format prometheus"):
        r = run_cli(["check", "--format", "prometheus", "--facts", str(path)])
    assert_clean_exit(r)
    if r.code != 2:
        assert textfile_rejects(r.out) == [], r.out[:2000]


@pytest.mark.parametrize("name", [b"node-\xff\xfe", b"gpu-\xc3(.json", b"\xed\xa0\x80", "gpu-\u202e".encode()])
def test_a_fleet_directory_with_non_utf8_names_scrapes_clean(tmp_path: Path, name: bytes) -> None:
    directory = tmp_path / "reports"
    directory.mkdir()
    raw = os.fsencode(directory) + b"/" + name + (b"" if name.endswith(b".json") else b".json")
    with open(raw, "wb") as fh:
        fh.write(HEALTHY.read_bytes())
    (directory / "plain.json").write_bytes(HEALTHY.read_bytes())
    for fmt in ("prometheus", "text", "json", "markdown"):
        ATTACK_COUNTS["prometheus label values"] += 1
        r = run_cli(["fleet", str(directory), "--format", fmt])
        assert_clean_exit(r, (0, 1))
        if fmt == "prometheus":
            assert textfile_rejects(r.out) == [], r.out
            nodes = {line.split('node="', 1)[1].split('"', 1)[0] for line in r.out.splitlines()
                     if line.startswith("gpu_doctor_node_ready{")}
            assert len(nodes) == 2, nodes
        elif fmt == "text":
            assert terminal_unsafe(r.out) == []


# --- family: hostile reports for fleet and diff ------------------------------------------------------

_REPORTS: dict[str, dict[str, Any]] = {}


def real_report(example: Path) -> dict[str, Any]:
    if example.name not in _REPORTS:
        r = run_cli(["check", "--json", "--facts", str(example)])
        _REPORTS[example.name] = json.loads(r.out)
    return copy.deepcopy(_REPORTS[example.name])


def real_active() -> dict[str, Any]:
    """A recorded smoke test of two GPUs, as a report's facts carry it."""
    import dataclasses

    from doctor.model.facts_active import ActiveEnd, ActiveFacts, ActiveGpu, DriverTest, NvmlReading

    name = "NVIDIA A100-SXM4-40GB"
    gpus = [ActiveGpu(i, name=name, nvml_before=NvmlReading(name=name), device_gbs=1480.5 - i, fp32_tflops=18.9,
                      h2d_gbs=24.6) for i in (0, 1)]
    smoke = DriverTest(mode="smoke", done=True, end=ActiveEnd(event="exit", returncode=0), device_count=2, gpus=gpus)
    return dataclasses.asdict(ActiveFacts(smoke=smoke))


WRONG = st.one_of(st.none(), st.just([]), st.just({}), st.just(True), hostile_int, hostile_text,
                  st.just([{"code": 1}]), st.just({"severity": "fail"}), st.just(1e308), st.just("fail"))


@st.composite
def hostile_report(draw: st.DrawFn) -> dict[str, Any]:
    report = real_report(draw(st.sampled_from(EXAMPLES)))
    spots = [(p, v) for p, v in leaves(report) if p and p[0] != "schema"]
    for _ in range(draw(st.integers(1, 8))):
        path, value = draw(st.sampled_from(spots))
        new = draw(WRONG) if draw(st.booleans()) else (draw(hostile_text) if isinstance(value, str) else
                                                       draw(hostile_int) if isinstance(value, int) else draw(WRONG))
        set_at(report, path, new)
    if draw(st.booleans()) and report["findings"]:
        f = report["findings"][0]
        f[draw(st.sampled_from(["code", "severity", "title", "evidence", "area"]))] = draw(WRONG)
    if draw(st.booleans()) and isinstance(report.get("facts"), dict):  # the node's own name, as fleet reads it
        where = report["facts"].get("host") if draw(st.booleans()) else report["facts"].get("env")
        if isinstance(where, dict):
            where[draw(st.sampled_from(["hostname", "node_name", "SLURMD_NODENAME", "NODE_NAME"]))] = \
                draw(st.one_of(hostile_text, st.just("node-1"), WRONG))
    if draw(st.booleans()) and isinstance(report.get("facts"), dict):
        active = real_active()
        rates = [(p, v) for p, v in leaves(active) if p]
        for _ in range(draw(st.integers(0, 6))):
            path, _value = draw(st.sampled_from(rates))
            set_at(active, path, draw(st.one_of(WRONG, st.sampled_from([1e308, 5e-324, -1.0, 0.0]))))
        report["facts"]["active"] = active
    if draw(st.booleans()):
        report[draw(st.sampled_from(["status", "findings", "facts", "checks"]))] = draw(WRONG)
    return report


FLEET_FORMATS = ["text", "json", "markdown", "prometheus"]


@settings(FAST, max_examples=30)
@given(a=hostile_report(), b=hostile_report(), fmt=st.sampled_from(FLEET_FORMATS))
def test_hostile_reports_never_crash_fleet_or_diff(tmp_path_factory: pytest.TempPathFactory, a: dict[str, Any],
                                                   b: dict[str, Any], fmt: str) -> None:
    directory = tmp_path_factory.mktemp("fleet")
    for name, data in (("a", a), ("b", b)):
        (directory / f"{name}.json").write_text(json.dumps(data))
    ATTACK_COUNTS["hostile reports"] += 1
    with no_hang_within(30, "fleet / diff on hostile reports"):
        r = run_cli(["fleet", str(directory), "--format", fmt])
        assert_clean_exit(r, (0, 1))
        if fmt == "prometheus":
            assert textfile_rejects(r.out) == []
        elif fmt == "text":
            assert terminal_unsafe(r.out) == []
        elif fmt == "json":
            assert json.loads(r.out)["schema"] == "gpu-doctor.fleet/v1"
        for argv in (["diff", str(directory / "a.json"), str(directory / "b.json")],
                     ["diff", "--json", str(directory / "a.json"), str(directory / "b.json")]):
            r = run_cli(argv)
            assert_clean_exit(r, (0, 1, 2))
            if "--json" not in argv:
                assert terminal_unsafe(r.out) == []


# --- family: fleet workers under signals -------------------------------------------------------------



def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return out


@pytest.fixture(scope="module")
def slow_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """400 facts snapshots: each is diagnosed where it is read, so two workers take half a minute."""
    directory = tmp_path_factory.mktemp("slow-fleet")
    text = HEALTHY.read_text()
    for i in range(400):
        (directory / f"node{i:04d}.json").write_text(text)
    return directory


def _start_fleet(directory: Path) -> tuple[subprocess.Popen[bytes], list[int]]:
    proc = subprocess.Popen([str(GPU_DOCTOR), "fleet", "-j", "2", str(directory)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers = _children(proc.pid)
        if len(workers) >= 2:
            time.sleep(0.5)  # the workers are reading now
            return proc, _children(proc.pid)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    _out, err = proc.communicate()
    raise AssertionError(f"fleet -j 2 never started its workers: {err[-500:]!r}")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_fleet_workers_and_all(slow_fleet: Path, sig: int, code: int) -> None:
    proc, workers = _start_fleet(slow_fleet)
    ATTACK_COUNTS["fleet workers under signals"] += 1
    proc.send_signal(sig)
    try:
        _out, err = proc.communicate(timeout=10)  # EOF on stdout: nobody holds it open any more
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the workers too
        proc.communicate()
        raise AssertionError(f"fleet still running 10 s after {signal.Signals(sig).name}") from None
    assert proc.returncode == code, err
    assert b"Traceback" not in err and len(err.strip().splitlines()) == 1, err
    time.sleep(0.2)
    assert [w for w in workers if alive(w)] == [], "fleet workers outlived the doctor"


def test_after_sigkill_of_fleet_its_workers_die_and_stdout_ends(slow_fleet: Path) -> None:
    proc, workers = _start_fleet(slow_fleet)
    ATTACK_COUNTS["fleet workers under signals"] += 1
    proc.kill()
    ends = threading.Event()

    def drain() -> None:
        assert proc.stdout is not None
        proc.stdout.read()
        ends.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        assert ends.wait(10), "the workers still hold fleet's standard output open after its SIGKILL"
        time.sleep(0.2)
        assert [w for w in workers if alive(w)] == []
    finally:
        if any(alive(w) for w in workers):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
