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
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

_lock = threading.RLock()  # re-entrant: the signal handler (main thread) takes it while the main thread may hold it
_groups: set[int] = set()
_stopping = False
_main_spawning = 0  # > 0 while the main thread is between starting a child and registering it
_pending: BaseException | None = None  # a signal's exception held back until that registration is done
_signalled: int | None = None  # the first signal handled since the handlers were installed


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
            _tell_reaper(f"+{pgid}")
            return
    _kill(pgid)
    raise Stopping("gpu-doctor is stopping: no new child process")


def unregister(pgid: int) -> None:
    with _lock:
        if pgid in _groups:
            _groups.discard(pgid)
            _tell_reaper(f"-{pgid}")


# --- the reaper: the groups outlive no SIGKILLed doctor ------------------------------------------------------
#
# A SIGKILLed doctor runs no handler. What it started must go all the same: the commands themselves and what they
# started (a wrapper script's `sleep`, a framework's worker). Those are in the command's process group, so one
# small shell, started with the first child, holds the list of live groups on its standard input; when the doctor
# is gone, however it ended, that pipe reaches end of file and the shell kills every group still listed.
#
# A group is listed once its child has started (:func:`register`, as soon as Popen returns). For the instant
# before that, every child carries a mark in its environment (:func:`child_mark`, inherited by all it starts):
# when the doctor ended without saying goodbye (a SIGKILL, a crash: no "bye" line came), the shell also kills
# every process whose environment carries this doctor's mark. So no child needs code of ours between its fork
# and its exec, and Python starts it with vfork (~0.3 ms, where a fork that runs a Python hook costs ~4 ms and
# holds the interpreter's lock). Where the shell cannot search (no grep, no /proc), or did not start, a child is
# started as before: a parent-death signal and its group put on the list before exec (spawn._die_with_parent).
#
# The shell runs in its own session with the hang-up and interrupt signals ignored (a closing terminal or a
# Ctrl-C on the doctor's group must not end it before the doctor), and it writes nothing anywhere (it never holds
# the caller's output open). Its $1 is the mark ("" when it cannot search by it).

MARK = "GPU_DOCTOR_CHILD_OF"  # the environment variable that marks this doctor's children (value: pid.random)

_REAPER = """trap '' HUP INT QUIT TERM
groups=' '
clean=
while IFS= read -r line; do
  case $line in
    +[0-9]*) g=${line#+}
      case $groups in *" $g "*) ;; *) groups="$groups$g " ;; esac ;;
    -[0-9]*) g=${line#-}
      case $groups in *" $g "*) groups="${groups%% $g *} ${groups#* $g }" ;; esac ;;
    bye) clean=1 ;;
  esac
done
for g in $groups; do kill -KILL "-$g" 2>/dev/null; done
if [ -z "$clean" ] && [ -n "$1" ]; then
  for f in $(grep -lsF -e "$1" /proc/[0-9]*/environ 2>/dev/null); do
    p=${f#/proc/}; p=${p%/environ}
    kill -KILL "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
  done
fi
"""
_reaper_fd: int | None = None
_reaper_pid: int | None = None
_reaper_owner: int | None = None  # the process that started it: only that one says goodbye
_mark: tuple[str, str] | None = None  # (MARK, value) when the reaper can find the children by it


def prepare() -> None:
    """Start the reaper now, in the background, when a command is sure to follow: its fork and exec then overlap
    the imports before the first command instead of delaying it (:func:`start` waits for it if need be)."""
    if _reaper_fd is None:
        threading.Thread(target=_start_reaper_locked, name="gpu-doctor-reaper", daemon=True).start()


def _start_reaper_locked() -> None:
    with _lock:
        _start_reaper()


def _can_search() -> bool:
    """Whether the reaper can find processes by their environment: /proc readable and a grep on its PATH."""
    return os.access("/proc/self/environ", os.R_OK) and any(
        os.access(os.path.join(d, "grep"), os.X_OK) for d in os.defpath.split(os.pathsep) if d)


def _start_reaper() -> None:
    """Under _lock: the reaper, once per process. One that cannot start is no error (the handlers and the
    parent-death signal still cover every other way out)."""
    global _reaper_fd, _reaper_pid, _reaper_owner, _mark
    if _reaper_fd is not None:
        return
    mark = (MARK, f"{os.getpid()}.{os.urandom(8).hex()}") if _can_search() else None
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", _REAPER, "gpu-doctor-reaper", "=".join(mark) if mark else ""],
                                stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, env={"PATH": os.defpath})
    except OSError:
        os.close(write_end)
        _reaper_fd = -1  # no shell here: do not try at every command
        return
    finally:
        os.close(read_end)
    _reaper_fd, _reaper_pid, _reaper_owner, _mark = write_end, proc.pid, os.getpid(), mark
    proc.returncode = 0  # never waited for: it ends after the doctor; no ResourceWarning at exit


def child_mark() -> tuple[str, str] | None:
    """(name, value) to put in a child's environment, the reaper started: a child that carries it needs nothing run
    between its fork and its exec. None when the reaper cannot find children by it: the child must then set its
    own parent-death signal and call :func:`announce_child` before exec."""
    with _lock:
        _start_reaper()
        return _mark if _reaper_owner == os.getpid() else None


def announce_child() -> None:  # pragma: no cover - runs in the forked child before exec
    """Between fork and exec, in the child: its own group goes on the reaper's list before the command can start
    anything (the parent's :func:`register` comes only after Popen returns, and a SIGKILL can fall in between).
    The reaper's list holds each group once."""
    if _reaper_fd is not None and _reaper_fd >= 0:
        with contextlib.suppress(OSError):
            os.write(_reaper_fd, b"+%d\n" % os.getpid())


def _tell_reaper(line: str) -> None:
    """Under _lock: "+PGID" a group to kill if the doctor dies, "-PGID" one that is gone."""
    if _reaper_fd is not None and _reaper_fd >= 0:
        with contextlib.suppress(OSError):
            os.write(_reaper_fd, f"{line}\n".encode())


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
        with _lock:
            _start_reaper()  # before the child: there is no moment when a child runs and no reaper does
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
    if groups:
        with _lock:
            for pgid in groups:
                _tell_reaper(f"-{pgid}")
    return len(groups)


def stop() -> None:
    """No child starts from now on, and every running one is killed."""
    global _stopping
    with _lock:
        _stopping = True
    kill_all()


def reset() -> None:
    """Allow children again (tests, and a long-running TUI after an interrupted run)."""
    global _stopping, _signalled
    with _lock:
        _stopping = False
        _signalled = None


def on_signal(signum: int, frame: FrameType | None) -> None:
    """The handler :func:`install_signal_handlers` installs (the TUI recognises it to replace it)."""
    global _pending, _signalled
    if _signalled is None:
        _signalled = signum
    stop()
    exc = signal_exception(signum)
    if _main_spawning:  # the main thread is starting a child: raise once it is registered (then killed)
        _pending = exc
        return
    raise exc


def signal_exception(signum: int) -> BaseException:
    """What a signal becomes: KeyboardInterrupt for SIGINT, :class:`Terminated` for the others."""
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def raise_if_signalled() -> None:
    """Raise for a signal whose exception went astray. Python prints and drops an exception raised inside a
    weakref callback or a ``__del__`` (an import's module lock has one), and a signal handled there would
    otherwise be lost: the command would go on, its children killed, and exit as if nothing had happened."""
    if _signalled is not None:
        raise signal_exception(_signalled)


def _astray(unraisable: Any) -> None:
    """sys.unraisablehook: the exception of a signal raised where Python drops it is not printed (as "Exception
    ignored in … Traceback"): :func:`raise_if_signalled` raises it again where it can end the command."""
    if _signalled is not None and isinstance(unraisable.exc_value, (KeyboardInterrupt, Terminated)):
        return
    _previous_hook(unraisable)


_previous_hook: Callable[[Any], object] = sys.unraisablehook  # what _astray hands every other exception to


def install_signal_handlers() -> dict[int, Any]:
    """SIGINT, SIGTERM and SIGHUP kill the children, then unwind the main thread. Main thread only.

    A signal that is ignored (``nohup``) stays ignored. Returns the previous handlers for :func:`restore`.
    """
    global _signalled, _previous_hook
    _signalled = None  # a new command (several run in one process in the tests)
    if sys.unraisablehook is not _astray:
        _previous_hook = sys.unraisablehook
        sys.unraisablehook = _astray
    previous: dict[int, Any] = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) not in (signal.SIG_IGN, None):
            previous[sig] = signal.signal(sig, on_signal)
    return previous


def restore(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(sig, handler)


def _at_exit() -> None:
    """At interpreter exit: every group killed, then goodbye to the reaper (it need not search for marked
    processes: none was left starting). A doctor that exits without this (SIGKILL) gets the search."""
    kill_all()
    if _reaper_owner == os.getpid():
        with _lock:
            _tell_reaper("bye")


atexit.register(_at_exit)
