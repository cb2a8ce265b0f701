"""The attack harness, signals: SIGINT / SIGTERM / SIGHUP while a command hangs leave no process behind,
and gpu-doctor returns within a second, without a traceback.

The fakes record every process they start (the command itself and a grandchild that holds its pipes), so
"no orphan" is checked on the real pids, not inferred.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile import alive, popen_signalled, report_attack_counts, survivors

GPU_DOCTOR = Path(sys.executable).with_name("gpu-doctor")
HEALTHY = Path(__file__).parent.parent / "doctor" / "examples" / "healthy-8x-h100.json"
SIGNALS = [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]
COUNTS: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def report_counts() -> Iterator[None]:
    yield
    report_attack_counts({f"signals: {family}": n for family, n in COUNTS.items()})




def hanging_script(path: Path, pids: Path, when: str = "true") -> None:
    """A command that, when ``when`` holds, starts a grandchild holding its pipes, records both pids, and hangs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nif {when}; then\n  sleep 1000 &\n  echo $! >> {pids}\n  echo $$ >> {pids}\n"
                    "  wait\nfi\n"
                    "printf '\\n@@GPU-DOCTOR@@{\"section\": \"env\", \"version\": \"3.11.0\", \"packages\": "
                    "[{\"name\": \"torch\", \"version\": \"2.5.1+cu124\"}]}\\n'\n")
    path.chmod(0o755)


def wait_for(pids: Path, count: int = 2, within: float = 20.0) -> list[int]:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if pids.exists():
            found = [int(x) for x in pids.read_text().split()]
            if len(found) >= count:
                return found
        time.sleep(0.02)
    raise AssertionError("the fake command never started")


def interrupt(proc: subprocess.Popen[bytes], sig: int, started: list[int], code: int) -> None:
    proc.send_signal(sig)
    t0 = time.monotonic()
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        for pid in started:  # the fakes too: nothing of a failed test may run on into the next one
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"still running 60 s after {signal.Signals(sig).name}") from None
    took = time.monotonic() - t0
    # It exits within a second on an idle machine; the hung commands would hold it for 1000 s. The bound leaves
    # room for a load of 10 on two cores, and is still far from a hang.
    assert took < 15, f"{signal.Signals(sig).name}: took {took:.2f}s to exit"
    assert proc.returncode == code, err
    assert b"Traceback" not in err and b"internal error" not in err, err
    time.sleep(0.05)
    left = [p for p in started if alive(p)]
    assert left == [], ("orphans left behind", [Path(f"/proc/{p}/cmdline").read_bytes() for p in left])


@pytest.mark.parametrize(("sig", "code"), SIGNALS, ids=[s.name for s, _ in SIGNALS])
def test_signal_during_check_with_a_hung_nvidia_smi(tmp_path: Path, sig: int, code: int) -> None:
    pids = tmp_path / "pids"
    hanging_script(tmp_path / "root/usr/bin/nvidia-smi", pids)
    proc = popen_signalled([str(GPU_DOCTOR), "check", "--root", str(tmp_path / "root"), "--timeout", "60"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "PATH": "/usr/bin"})
    interrupt(proc, sig, wait_for(pids), code)


@pytest.mark.parametrize(("sig", "code"), SIGNALS[1:2], ids=[s.name for s, _ in SIGNALS[1:2]])
def test_signal_during_a_hung_deep_framework_import(tmp_path: Path, sig: int, code: int) -> None:
    pids = tmp_path / "pids"
    hanging_script(tmp_path / "root/usr/bin/python3", pids, when='[ "$3" = --deep ]')
    proc = popen_signalled([str(GPU_DOCTOR), "check", "--root", str(tmp_path / "root"), "--deep",
                             "--python", "/usr/bin/python3", "--deep-timeout", "120"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    interrupt(proc, sig, wait_for(pids), code)


def test_sigterm_during_smoke_with_a_hung_cuinit(tmp_path_factory: pytest.TempPathFactory) -> None:
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler to build the fake libcuda")
    libs = tmp_path_factory.mktemp("fake-cuda")
    fakes = Path(__file__).parent / "fakes"
    for source, lib in (("fake_nvml.c", "libnvidia-ml.so.1"), ("fake_cuda.c", "libcuda.so.1")):
        subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(libs / lib), str(fakes / source)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_")}
    env.update({"LD_LIBRARY_PATH": str(libs), "FAKE_CUDA_HANG": "1", "FAKE_CUDA_DEVICES": "8.0",
                "FAKE_NVML_GPUS": "NVIDIA A100-SXM4-40GB"})
    proc = popen_signalled([str(GPU_DOCTOR), "smoke", "--timeout", "120"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)
    children: list[int] = []
    end = time.monotonic() + 20
    while not children and time.monotonic() < end:  # the smoke child, in its own session, once started
        time.sleep(0.05)
        children = [int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid(int(p)) == proc.pid]
    assert children, "the smoke child never started"
    time.sleep(0.3)  # let it reach cuInit
    interrupt(proc, signal.SIGTERM, children, 143)


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def test_ctrl_c_while_waiting_for_input_is_one_line(tmp_path: Path) -> None:
    proc = popen_signalled([str(GPU_DOCTOR), "check", "--facts", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.6)  # well past the interpreter's own start-up: gpu-doctor waits on standard input
    interrupt(proc, signal.SIGINT, [], 130)


def test_ctrl_c_anywhere_in_gpu_doctors_start_up_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """KeyboardInterrupt from argument parsing or from importing a command (the start-up) is caught."""
    from doctor import cli

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    for target in ("build_parser", "_tolerant_streams"):
        with monkeypatch.context() as m:
            m.setattr(cli, target, interrupted)
            assert cli.main(["check", "--facts", str(HEALTHY)]) == 130
        assert capsys.readouterr().err == "gpu-doctor: interrupted\n"
    with monkeypatch.context() as m:
        m.setattr(cli.importlib, "import_module", interrupted)
        assert cli.main(["check", "--facts", str(HEALTHY)]) == 130
    assert capsys.readouterr().err == "gpu-doctor: interrupted\n"


def _children_of(pid: int) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid(int(p)) == pid]


@pytest.mark.parametrize("grandchild", [False, True], ids=["the-command", "its-grandchild"])
def test_sigkill_of_the_doctor_leaves_no_process_of_a_hung_command(tmp_path: Path, grandchild: bool) -> None:
    """kill -9 runs no handler: the command dies by its parent-death signal, what it started (in its process
    group) by the reaper, which itself ends once it has killed them."""
    pids = tmp_path / "pids"
    smi = tmp_path / "root/usr/bin/nvidia-smi"
    if grandchild:
        hanging_script(smi, pids)  # `sleep 1000 &` holding the pipes, then waits for it
    else:
        smi.parent.mkdir(parents=True)
        smi.write_text(f"#!/bin/sh\necho $$ >> {pids}\nexec sleep 1000\n")  # the command itself hangs
        smi.chmod(0o755)
    proc = popen_signalled([str(GPU_DOCTOR), "check", "--root", str(tmp_path / "root"), "--timeout", "60"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = wait_for(pids, count=2 if grandchild else 1)
    reaper = [p for p in _children_of(proc.pid) if b"trap" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(reaper) == 1, "no reaper beside the command"
    proc.kill()  # no handler runs
    proc.wait()
    # a loaded machine: the reaper is a shell that must be scheduled first
    assert survivors([*started, *reaper]) == [], "outlived a SIGKILLed doctor"


def test_a_normal_exit_ends_the_reaper_too(tmp_path: Path) -> None:
    root = tmp_path / "root/usr/bin"
    root.mkdir(parents=True)
    (root / "nvidia-smi").write_text("#!/bin/sh\nsleep 0.5\nexit 9\n")
    (root / "nvidia-smi").chmod(0o755)
    proc = subprocess.Popen([str(GPU_DOCTOR), "check", "--root", str(tmp_path / "root")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    reaper: list[int] = []
    end = time.monotonic() + 20
    while not reaper and proc.poll() is None and time.monotonic() < end:
        reaper = [p for p in _children_of(proc.pid) if b"trap" in Path(f"/proc/{p}/cmdline").read_bytes()]
        time.sleep(0.01)
    out, _ = proc.communicate(timeout=60)  # the reaper never holds the caller's pipe: this returns
    assert b"gpu-doctor" in out and reaper
    end = time.monotonic() + 10
    while alive(reaper[0]) and time.monotonic() < end:
        time.sleep(0.02)
    assert not alive(reaper[0])


# --- the TUI's start: a signal while Textual composes the screen --------------------------------------------


def _tui_signalled(sig: int, after_first_frame: float, *argv: str) -> tuple[int, str]:
    """`gpu-doctor tui` on a pseudo-terminal, sent ``sig`` that long after it first wrote to the terminal;
    (exit code, everything it wrote)."""
    import pty
    import select

    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "LANG": "C.UTF-8"}
    proc = popen_signalled([str(GPU_DOCTOR), "tui", *argv], stdin=slave, stdout=slave, stderr=slave, env=env,
                           start_new_session=True)
    os.close(slave)
    out = b""
    sent_at: float | None = None
    first: float | None = None
    try:
        while True:
            now = time.monotonic()
            if first is not None and sent_at is None and now - first >= after_first_frame:
                proc.send_signal(sig)
                sent_at = now
            if sent_at is not None and now - sent_at > 60:  # a load of 10, far from a TUI that never ends
                raise AssertionError(f"still running 60 s after {signal.Signals(sig).name}")
            ready, _, _ = select.select([master], [], [], 0.02)
            if ready:
                try:
                    chunk = os.read(master, 1 << 16)
                except OSError:  # EIO: every writer of the terminal is gone
                    chunk = b""
                if not chunk:
                    break
                out += chunk
                first = first if first is not None else time.monotonic()
            elif proc.poll() is not None:
                break
        return proc.wait(timeout=10), out.decode("utf-8", "replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


MOMENTS = {"first-frame": 0.0, "composing": 0.1, "probing": 0.3}
# Each signal at one moment in the fast set (a start costs seconds); every signal at every moment with the slow.
TUI_CASES = [pytest.param(sig, code, after, id=f"{sig.name}-{moment}",
                          marks=() if (i - j) % 3 == 0 else pytest.mark.slow)
             for i, (sig, code) in enumerate(SIGNALS) for j, (moment, after) in enumerate(MOMENTS.items())]


@pytest.mark.parametrize(("sig", "code", "after"), TUI_CASES)
def test_a_signal_during_the_tuis_start_ends_it_with_one_line(sig: int, code: int, after: float) -> None:
    rc, text = _tui_signalled(sig, after)
    assert rc == code
    assert "Traceback" not in text and "Error" not in text and "Exception" not in text, text[-3000:]
    last = text.replace("\r", "").rstrip("\n").rsplit("\n", 1)[-1]
    assert last.endswith("gpu-doctor: interrupted" if sig == signal.SIGINT else f"gpu-doctor: stopped by signal {sig}")


def test_a_signal_whose_exception_python_drops_still_ends_the_command(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Python prints and drops an exception raised in a weakref callback (an import's module lock has one):
    a signal handled there must still end the command as a signal, in one line, with no "Exception ignored"."""
    import weakref

    from doctor import children, cli
    from doctor.commands import check

    def run(name: str, args: object) -> int:
        class Anything:
            pass

        thing = Anything()
        ref = weakref.ref(thing, lambda _: children.on_signal(signal.SIGTERM, None))
        del thing  # the callback runs here: the handler raises inside it, and Python drops the exception
        assert ref() is None
        return 0

    monkeypatch.setattr(check, "run", run)
    try:
        assert cli.main(["check", "--facts", str(HEALTHY)]) == 143
    finally:
        children.reset()
    assert capsys.readouterr().err == "gpu-doctor: stopped by signal 15\n"


# --- whatever the caller did to signals: the suite under nohup or as a background job -----------------------


@pytest.mark.slow  # a few seconds each: with the slow tests (CI runs both) to keep the fast set in budget
def test_the_signal_tests_pass_when_the_caller_ignores_the_signals(tmp_path: Path) -> None:
    """`nohup pytest` ignores SIGHUP, `pytest &` in a script ignores SIGINT; ignored dispositions are inherited by
    every process a test starts. tests/conftest.py turns them into caught ones for this run, so the tests hold."""
    selected = "hung_nvidia_smi and (SIGHUP or SIGINT or SIGTERM)"
    done = subprocess.run(["/bin/sh", "-c", "trap '' HUP INT TERM; exec \"$@\"", "sh", sys.executable, "-m", "pytest",
                           __file__, "-q", "-p", "no:cacheprovider", "-k", selected],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "3 passed" in done.stdout


# --- the instant between a child's start and its registration ----------------------------------------------

_DOCTOR_DIES_BEFORE_REGISTERING = """
import os, signal, subprocess, sys
from doctor import children, spawn
search = sys.argv[1] == "search"
if not search:
    children._can_search = lambda: False  # a host without grep or /proc: the reaper cannot find marked children
pids = sys.argv[2]
mark = children.child_mark()
assert (mark is not None) == search, mark
# Started exactly as the probes start a command (host.subprocess_runner), then the doctor is SIGKILLed before
# children.register() runs: the moment no list can cover.
env = dict(os.environ)
if mark:
    env[mark[0]] = mark[1]
script = f"sleep 1000 & echo $! >> {pids}; echo $$ >> {pids}; wait"
subprocess.Popen(["/bin/sh", "-c", script], env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                 preexec_fn=None if mark else spawn.hooked())
while not (os.path.exists(pids) and len(open(pids).read().split()) >= 2):
    pass
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("how", ["search", "hook"], ids=["marked-found-by-the-reaper", "no-search-parent-death"])
def test_a_doctor_killed_before_registering_its_child_leaves_no_process(tmp_path: Path, how: str) -> None:
    """kill -9 between a command's start and its registration: with the reaper able to search, the command and
    what it started carry the doctor's mark in their environment, and the reaper finds and kills them (they were
    started without any hook: Python's vfork); where it cannot search, the command was started with the
    parent-death signal (and its group announced to the reaper) before its exec."""
    pids = tmp_path / "pids"
    proc = subprocess.run([sys.executable, "-c", _DOCTOR_DIES_BEFORE_REGISTERING, how, str(pids)],
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    started = [int(x) for x in pids.read_text().split()]
    assert len(started) == 2
    assert survivors(started) == [], "outlived a doctor SIGKILLed before it registered them"
    COUNTS["SIGKILL before a child is registered"] = COUNTS.get("SIGKILL before a child is registered", 0) + 1


def test_a_probe_command_starts_without_a_hook_and_with_the_doctors_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probes' commands start by vfork (no Python between fork and exec, ~0.3 ms instead of ~4 ms each): no
    preexec_fn, and the mark the reaper knows them by; the caller's environment is not changed."""
    from doctor import children, host

    seen: dict[str, object] = {}
    real = subprocess.Popen

    def spy(*args: object, **kwargs: object) -> object:
        seen.update(kwargs)
        return real(*args, **kwargs)  # type: ignore[call-overload]

    mark = children.child_mark()
    assert mark is not None and mark[0] == children.MARK
    monkeypatch.setattr(subprocess, "Popen", spy)
    env = {"PATH": "/usr/bin:/bin"}
    result = host.subprocess_runner(["/bin/sh", "-c", 'printf %s "$GPU_DOCTOR_CHILD_OF"'], 30, env)
    assert result.ok and result.stdout == mark[1]
    assert seen["preexec_fn"] is None and env == {"PATH": "/usr/bin:/bin"}
