"""Every child process group gpu-doctor starts, so that every way out kills them.

Children run in their own session (``start_new_session``), so a Ctrl-C on the terminal does not reach
them and a hung ``nvidia-smi`` or framework import would outlive the doctor. Whoever starts one
registers its process group here; on SIGINT, SIGTERM or SIGHUP the handler first stops new children
from starting, kills every registered group, and only then raises in the main thread, so the waits
for those children end at once and the doctor exits within a second. :func:`kill_all` also runs at
interpreter exit as a backstop.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

_lock = threading.Lock()
_groups: set[int] = set()
_stopping = False


class Stopping(Exception):
    """Raised instead of starting a child once the doctor is being stopped."""


class Terminated(SystemExit):
    """SIGTERM / SIGHUP: leave through every ``finally``, exit 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


def stopping() -> bool:
    return _stopping


def register(pgid: int) -> None:
    """Track a child's process group; kills it at once when the doctor is already stopping."""
    with _lock:
        if not _stopping:
            _groups.add(pgid)
            return
    _kill(pgid)
    raise Stopping("gpu-doctor is stopping: no new child process")


def unregister(pgid: int) -> None:
    with _lock:
        _groups.discard(pgid)


@contextlib.contextmanager
def tracked(pgid: int) -> Iterator[None]:
    """Register a child's group for the block; on any exception out of the block, kill the group."""
    register(pgid)
    try:
        yield
    except BaseException:
        _kill(pgid)
        raise
    finally:
        unregister(pgid)


def _kill(pgid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


def kill_all() -> int:
    """SIGKILL every registered process group; how many there were."""
    with _lock:
        groups = list(_groups)
        _groups.clear()
    for pgid in groups:
        _kill(pgid)
    return len(groups)


def stop() -> None:
    """No child starts from now on, and every running one is killed."""
    global _stopping
    with _lock:
        _stopping = True
    kill_all()


def reset() -> None:
    """Allow children again (tests, and a long-running TUI after an interrupted run)."""
    global _stopping
    with _lock:
        _stopping = False


def _on_signal(signum: int, frame: FrameType | None) -> None:
    stop()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def install_signal_handlers() -> None:
    """SIGINT, SIGTERM and SIGHUP kill the children, then unwind the main thread. Main thread only."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(sig, _on_signal)


atexit.register(kill_all)
