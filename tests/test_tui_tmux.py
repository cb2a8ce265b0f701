"""End to end: the real `gpu-doctor demo` console script in a real terminal (tmux), driven by keys and read
back from the screen with capture-pane — what a new user does first."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (.ci/run installs Debian's tmux)")


class Terminal:
    """One tmux server of our own (-L), so the test never touches a user's sessions."""

    def __init__(self, tmp: Path) -> None:
        self.socket = f"gpu-doctor-test-{uuid.uuid4().hex[:8]}"
        self.session = "demo"
        self.tmp = tmp

    def tmux(self, *args: str) -> str:
        assert TMUX is not None
        return subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True, text=True, timeout=20,
                              check=False).stdout

    def start(self, *argv: str) -> None:
        env = {"TERM": "xterm-256color", "XDG_CACHE_HOME": str(self.tmp / "cache"), "HOME": str(self.tmp),
               "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        exports = " ".join(f"{k}='{v}'" for k, v in env.items())
        # `; sleep` keeps the pane after the program ends, so its exit status can be read back.
        command = f"cd '{self.tmp}' && env -i {exports} {' '.join(argv)}; echo EXIT=$?; sleep 30"
        assert TMUX is not None
        subprocess.run([TMUX, "-L", self.socket, "-f", "/dev/null", "new-session", "-d", "-s", self.session,
                        "-x", "120", "-y", "40", command], check=True, timeout=20)

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", self.session, key)
            time.sleep(0.15)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.session)

    def wait_for(self, *texts: str, timeout: float = 20.0) -> str:
        """The screen once every text is on it (the app draws in several frames)."""
        deadline = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < deadline:
            shown = self.screen()
            if all(t in shown for t in texts):
                return shown
            time.sleep(0.1)
        missing = [t for t in texts if t not in shown]
        raise AssertionError(f"{missing!r} never appeared; the screen was:\n{shown}")

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path)
    yield term
    term.close()


@pytest.mark.slow  # a few seconds each: with the slow tests (CI runs both) to keep the fast set in budget
def test_new_user_finds_why_each_host_is_broken_and_gets_the_fix_script(terminal: Terminal, tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("gpu-doctor")
    terminal.start(str(exe), "demo")
    # the cursor starts on the failure, explained beside it
    terminal.wait_for("[1/6] CUDA 12 PyTorch on an R470 driver", "NOT READY", "q Quit", "f Fix",
                      "torch 2.5.1 needs a newer driver than 470.63.01", "CUDA 12.4 needs driver ≥ 550.54.14")

    terminal.keys("n")
    terminal.wait_for("[2/6] RTX 5090 with a cu124 PyTorch", "has no kernels for NVIDIA GeForce RTX 5090")

    terminal.keys("n")
    terminal.wait_for("[3/6] Driver/library mismatch after an upgrade", "FAIL  Driver/library version mismatch:")
    terminal.keys("f")  # the fix plan as `gpu-doctor fix` writes it, for Ubuntu's apt
    terminal.wait_for("#!/usr/bin/env bash", "gpu-doctor fix script (format: apt)", "s Save", "f Format")
    terminal.keys("s")
    terminal.wait_for("Save the apt fix script")
    terminal.keys("Enter")
    terminal.wait_for("Wrote")
    saved = tmp_path / "gpu-doctor-fix-driver-module_userspace_mismatch-apt.sh"
    assert "\n  apt_hold libnvidia-compute-535 nvidia-driver-535\n" in saved.read_text()
    terminal.keys("f", "f")  # pip, then conda: every format renders the one plan
    terminal.wait_for("conda", "gpu-doctor fix --format conda")
    terminal.keys("Escape")
    terminal.wait_for("FAIL  Driver/library version mismatch:")

    terminal.keys("g")
    terminal.wait_for("No GPU answered NVML", "On the PCI bus: 00000000:01:00.0 (device 0x20B210DE).")

    terminal.keys("q")
    terminal.wait_for("EXIT=0")
