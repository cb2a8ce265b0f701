"""Starting a child process and collecting what it printed: the process half of the host seam (:mod:`doctor.host`).

It imports only the standard library's process modules and :mod:`doctor.children`, so that `check` can start its
slowest child (NVML and libcuda, a second interpreter) before its own imports (:mod:`doctor.ahead`); every
command a probe runs goes through :func:`start` and :func:`collect` (``doctor.host.subprocess_runner``).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence

from doctor import children

OUTPUT_CAP = 16 * 1024 * 1024  # per stream; `nvidia-smi -q -x` on 8 GPUs prints ~300 kB


class ChildInput:
    """A child's standard input that the parent fills *after* starting it, with what it learns meanwhile (the
    NVML child starts before the loader's `ldconfig -p` has named the libcudnn it is to ask). The child reads to
    end of file: :meth:`send` writes once and closes; :meth:`close` (always, in a ``finally``) closes both ends,
    so that a child never waits for a parent that failed. Its pipe is not inherited by any other child."""

    def __init__(self) -> None:
        self.read_fd, self._write_fd = os.pipe()  # both close-on-exec; the child gets a dup of read_fd as fd 0
        self.sent_at: float | None = None  # time.monotonic() of send(): the child's own work starts there

    def send(self, text: str | None) -> None:
        if self._write_fd < 0:
            return
        self.sent_at = time.monotonic()
        try:
            if text:
                os.write(self._write_fd, os.fsencode(text))  # a path: far below the pipe's buffer, never blocks
        except OSError:  # the child is gone (killed at its timeout): it needs nothing more
            pass
        finally:
            os.close(self._write_fd)
            self._write_fd = -1

    def close(self) -> None:
        self.send(None)
        if self.read_fd >= 0:
            os.close(self.read_fd)
            self.read_fd = -1


def start(argv: Sequence[str], env: Mapping[str, str], stdin: ChildInput | None = None
          ) -> subprocess.Popen[bytes]:
    """Start argv (never a shell) in a session and process group of its own, registered with
    :mod:`doctor.children`, its stdout and stderr piped, its standard input empty or ``stdin``. Raises what Popen
    raises (FileNotFoundError, PermissionError, OSError, ValueError for a NUL byte) and children.Stopping."""
    child_env = dict(env)
    # Even a SIGKILLed doctor leaves none (doctor.children): marked, the reaper finds the child by its environment
    # until it is registered, and Python starts it with vfork; unmarked, it runs our hook between fork and exec.
    mark = children.child_mark()
    if mark is not None:
        child_env[mark[0]] = mark[1]
    args = tuple(argv)
    return children.start(lambda: subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL if stdin is None or stdin.read_fd < 0 else stdin.read_fd,
        env=child_env,
        start_new_session=True,
        preexec_fn=None if mark is not None else hooked(),
    ))


def collect(proc: subprocess.Popen[bytes], timeout: float, stdin: ChildInput | None = None
            ) -> tuple[bytes, bytes, str | None]:
    """(stdout, stderr, why it was stopped or None) of a child :func:`start` started, read up to the cap within
    ``timeout``; its group killed at the end (nothing it started outlives it) and unregistered, its pipes closed.
    A signal unwinding this thread kills the group too."""
    try:
        return _collect(proc, timeout, stdin)
    except BaseException:  # a signal unwinding the main thread: the group goes with it
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        raise
    finally:
        children.unregister(proc.pid)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _collect(proc: subprocess.Popen[bytes], timeout: float, stdin: ChildInput | None = None
             ) -> tuple[bytes, bytes, str | None]:
    """(stdout, stderr, why it was stopped) of a child, reading both pipes up to the cap and the deadline.

    A child whose input the parent sends later (``stdin``) gets its whole ``timeout`` after that input: the time
    it waits for the parent (importing, running the loader's probe, on a loaded machine seconds) is not its own.
    The wait is bounded all the same: the parent sends or closes the input in a ``finally``."""
    assert proc.stdout is not None and proc.stderr is not None
    bufs: dict[int, bytearray] = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    open_fds = set(bufs)
    started = time.monotonic()

    def deadline() -> float:
        if stdin is None:
            return started + timeout
        if stdin.sent_at is None:  # still waiting for its parent
            return time.monotonic() + timeout
        return max(started, stdin.sent_at) + timeout

    why: str | None = None
    with selectors.DefaultSelector() as sel:
        for fd in open_fds:
            sel.register(fd, selectors.EVENT_READ)
        while open_fds:
            left = deadline() - time.monotonic()
            if left <= 0:
                why = f"timed out after {timeout:.3g}s"
                break
            for key, _ in sel.select(left):
                fd = key.fd
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    sel.unregister(fd)
                    open_fds.discard(fd)
                    continue
                bufs[fd] += chunk
                if len(bufs[fd]) > OUTPUT_CAP:
                    why = f"output truncated at {OUTPUT_CAP // (1024 * 1024)} MB (the command was stopped)"
                    open_fds.clear()
                    break
    if why is None:
        left = max(0.0, deadline() - time.monotonic())
        try:
            proc.wait(timeout=left)
        except subprocess.TimeoutExpired:  # closed its pipes but kept running
            why = f"timed out after {timeout:.3g}s"
    if why is not None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
    else:  # the leader exited: leave no grandchild of its group behind
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
    out, err = (bytes(bufs[proc.stdout.fileno()][:OUTPUT_CAP]), bytes(bufs[proc.stderr.fileno()][:OUTPUT_CAP]))
    return out, err, why


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child before exec
    # PR_SET_PDEATHSIG (1) = SIGKILL: the kernel kills the child when the thread that started it dies, however
    # the doctor ends (SIGKILL included). What the child will start is the reaper's (doctor.children): the child
    # puts its group on its list before exec. Every streamed child (the active tests, which hold GPU memory) gets
    # it; a probe's command only where the reaper cannot find it by its mark (children.child_mark). The caller has
    # resolved prctl first (hooked): nothing is looked up between fork and exec.
    if _PRCTL:
        _PRCTL[0](1, signal.SIGKILL, 0, 0, 0)
    children.announce_child()


_PRCTL: list[Callable[..., int]] = []  # libc's prctl, once hooked() found it


def hooked() -> Callable[[], None]:
    """The hook to pass as ``preexec_fn``, prctl resolved now, in the parent (ctypes is imported only for it)."""
    global _prctl_looked_up
    if not _prctl_looked_up:  # two threads may both look it up: the list then holds it twice, no harm
        if sys.platform.startswith("linux"):
            import ctypes

            with contextlib.suppress(OSError, AttributeError):
                _PRCTL.append(ctypes.CDLL(None, use_errno=True).prctl)
        _prctl_looked_up = True
    return _die_with_parent


_prctl_looked_up = False
