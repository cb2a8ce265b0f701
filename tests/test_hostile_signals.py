"""The attack harness, signals: SIGINT / SIGTERM / SIGHUP while a command hangs leave no process behind,
and gpu-doctor returns within a second, without a traceback.

The fakes record every process they start (the command itself and a grandchild that holds its pipes), so
"no orphan" is checked on the real pids, not inferred.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile import popen_signalled

GPU_DOCTOR = Path(sys.executable).with_name("gpu-doctor")
HEALTHY = Path(__file__).parent.parent / "doctor" / "examples" / "healthy-8x-h100.json"
SIGNALS = [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


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


def test_sigkill_of_the_doctor_still_takes_a_hung_command_with_it(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    smi = tmp_path / "root/usr/bin/nvidia-smi"
    smi.parent.mkdir(parents=True)
    smi.write_text(f"#!/bin/sh\necho $$ >> {pids}\nexec sleep 1000\n")  # the command itself hangs
    smi.chmod(0o755)
    proc = popen_signalled([str(GPU_DOCTOR), "check", "--root", str(tmp_path / "root"), "--timeout", "60"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = wait_for(pids, count=1)
    proc.kill()  # no handler runs: only the parent-death signal can end the child
    proc.wait()
    end = time.monotonic() + 2
    while [p for p in started if alive(p)] and time.monotonic() < end:
        time.sleep(0.02)
    assert [p for p in started if alive(p)] == [], "a hung command outlived a SIGKILLed doctor"
