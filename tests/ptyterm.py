"""A pseudo-terminal for driving the real TUI: the doctor runs as the session leader of a pty of its own, so that
closing the terminal (the master side) hangs it up exactly as an SSH drop or `tmux kill-session` does.

Used by tests/test_tui_pty.py and benchmarks/tui_speed.py. Linux only (TIOCSCTTY, /proc)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Sequence

_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def _controlling_tty() -> None:  # runs in the child between fork and exec
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Pty:
    """One program on one pseudo-terminal of ``cols`` × ``rows``; ``text`` is everything it drew, escapes removed."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], cols: int = 120, rows: int = 40,
                 cwd: str | None = None, sighup: object = signal.SIG_DFL) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.started = time.monotonic()
        self.raw = b""
        # The child's SIGHUP disposition is set here, not inherited: the caller may run under nohup.
        previous = signal.signal(signal.SIGHUP, sighup)  # type: ignore[arg-type]
        try:
            self.proc = subprocess.Popen(list(argv), stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                                         start_new_session=True, preexec_fn=_controlling_tty)
        finally:
            signal.signal(signal.SIGHUP, previous)
        os.close(slave)

    @property
    def text(self) -> str:
        return _ESCAPES.sub("", self.raw.decode("utf-8", "replace"))

    def pump(self, seconds: float) -> None:
        """Read what the program draws for up to ``seconds``."""
        deadline = time.monotonic() + seconds
        while self.master >= 0:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(min(left, 0.05)):
                return

    def _read(self, wait: float) -> bool:
        """Read what is there, waiting up to ``wait`` seconds for it; False once the program closed its side."""
        ready, _, _ = select.select([self.master], [], [], wait)
        if ready:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return False  # EIO: the program closed its side
            if not chunk:
                return False
            self.raw += chunk
        return True

    def wait_for(self, needle: str | tuple[str, ...], timeout: float) -> float | None:
        """Seconds from start until ``needle`` (or any of several) was on screen, None if not within ``timeout``.

        The screen is looked at as soon as what the program wrote has been read (each burst of output, read to its
        end), not at fixed intervals: the time is when the needle arrived (benchmarks/tui_speed.py)."""
        needles = (needle,) if isinstance(needle, str) else needle
        deadline = time.monotonic() + timeout
        while True:
            if any(n in self.text for n in needles):
                return time.monotonic() - self.started
            if self.proc.poll() is not None or self.master < 0:
                self.pump(0.1)
                return time.monotonic() - self.started if any(n in self.text for n in needles) else None
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            before = len(self.raw)
            if not self._read(min(left, 0.05)):
                time.sleep(0.01)  # its side is closed: the poll above ends this once the program has exited
                continue
            while len(self.raw) > before and self.master >= 0:  # the rest of the burst, without waiting
                before = len(self.raw)
                if not self._read(0):
                    break

    def send(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def hang_up(self) -> None:
        """Close the terminal: the kernel sends SIGHUP to the session (and EIO to its reads)."""
        if self.master >= 0:
            os.close(self.master)
            self.master = -1

    def wait_exit(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def cpu_seconds(self) -> float:
        """User + system CPU the program has used so far (/proc/PID/stat, in clock ticks)."""
        with open(f"/proc/{self.proc.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        self.hang_up()
