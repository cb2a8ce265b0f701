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
import subprocess
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

_lock = threading.Lock()
_groups: set[int] = set()
_stopping = False
_main_spawning = 0  # > 0 while the main thread is between starting a child and registering it
_pending: BaseException | None = None  # a signal's exception held back until that registration is done


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


P = TypeVar("P", bound="subprocess.Popen[bytes]")


def start(popen: Callable[[], P]) -> P:
    """Start a child (``popen`` must give it its own session) and register its group, with no gap between the
    two where a signal could leave it unregistered: in the main thread, a signal's exception is held back
    until the registration is done. Raises :class:`Stopping` (the child killed) once the doctor is stopping."""
    global _main_spawning, _pending
    main = threading.current_thread() is threading.main_thread()
    if main:
        _main_spawning += 1
    try:
        proc = popen()
        register(proc.pid)
        return proc
    finally:
        if main:
            _main_spawning -= 1
            if _pending is not None and _main_spawning == 0:
                exc, _pending = _pending, None
                raise exc


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
    global _pending
    stop()
    exc: BaseException = KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)
    if _main_spawning:  # the main thread is starting a child: raise once it is registered (then killed)
        _pending = exc
        return
    raise exc


def install_signal_handlers() -> dict[int, Any]:
    """SIGINT, SIGTERM and SIGHUP kill the children, then unwind the main thread. Main thread only.

    A signal that is ignored (``nohup``) stays ignored. Returns the previous handlers for :func:`restore`.
    """
    previous: dict[int, Any] = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) not in (signal.SIG_IGN, None):
            previous[sig] = signal.signal(sig, _on_signal)
    return previous


def restore(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(sig, handler)


atexit.register(kill_all)
