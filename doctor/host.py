"""The one seam through which probes touch the machine.

Probes never call ``open``, ``subprocess`` or ``os.environ`` directly: they ask a :class:`Host`.
That makes three things possible: ``--root DIR`` (every file read happens under DIR, and
commands are looked up in the PATH *under* DIR), tests with a strict fake runner, and a
guarantee that every command runs with an argv (never a shell) and under a timeout.
Its process half, :mod:`doctor.spawn` (start a child, collect what it printed), is a module of its own, light
enough to import before everything else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Protocol

from doctor import children, safeio, spawn
from doctor.model.records import dataclass
from doctor.spawn import ChildInput

DEFAULT_TIMEOUT = 5.0
_KMSG_ESCAPE = safeio.lazy_compile(rb"\\x([0-9a-fA-F]{2})")  # /dev/kmsg's escape, undone as dmesg undoes it
MAX_READ = 4 * 1024 * 1024  # a probe never needs more of one file; /proc files can be endless


@dataclass(frozen=True)
class CmdResult:
    """What one command did. ``error`` is set when it did not run to an exit status."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    error: str | None = None  # "not found" | "timed out after 5s" | "permission denied" | OSError text

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0

    def describe(self) -> str:
        """One line for the errors list: why this command gave no answer."""
        cmd = " ".join(self.argv)
        if self.error:
            return f"{cmd}: {self.error}"
        tail = (self.stderr or self.stdout).strip().splitlines()
        return f"{cmd}: exit {self.returncode}" + (f": {tail[-1][:200]}" if tail else "")


class Runner(Protocol):
    """How a :class:`Host` runs a command: :func:`subprocess_runner`, or a test's fake."""

    def __call__(self, argv: Sequence[str], timeout: float, env: Mapping[str, str],
                 stdin: ChildInput | None = None) -> CmdResult: ...


OUTPUT_CAP = spawn.OUTPUT_CAP


def subprocess_runner(argv: Sequence[str], timeout: float, env: Mapping[str, str],
                      stdin: ChildInput | None = None) -> CmdResult:
    """Run argv with a timeout and a cap on its output; never raises (except to let a signal unwind). Its
    standard input is empty, or ``stdin`` (see :class:`ChildInput`).

    The child gets its own process group so that on timeout the whole group is killed: a wrapper
    script whose grandchild hangs (holding our pipes open) cannot hang the doctor either. The group is
    registered with :mod:`doctor.children`, so SIGINT / SIGTERM / SIGHUP kill it too. A command that
    prints more than :data:`OUTPUT_CAP` on a stream is killed and its output kept up to the cap.
    (:mod:`doctor.spawn` starts it and collects it.)
    """
    args = tuple(argv)
    try:
        proc = spawn.start(args, env, stdin)
    except FileNotFoundError:
        return CmdResult(args, None, error="not found")
    except PermissionError:
        return CmdResult(args, None, error="permission denied")
    except children.Stopping:
        return CmdResult(args, None, error="not run: gpu-doctor is stopping")
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in an argument or the environment
        return CmdResult(args, None, error=getattr(exc, "strerror", None) or str(exc))
    return finished(args, proc, timeout, stdin)


def finished(args: tuple[str, ...], proc: subprocess.Popen[bytes], timeout: float,
             stdin: ChildInput | None = None) -> CmdResult:
    """What a started child (:func:`doctor.spawn.start`) did, collected within ``timeout``."""
    out, err, why = spawn.collect(proc, timeout, stdin)
    text_out, text_err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    if why is not None:
        return CmdResult(args, None, text_out, text_err, error=why)
    return CmdResult(args, proc.returncode, text_out, text_err)


@dataclass(frozen=True)
class StreamEnd:
    """How a streamed command ended (:func:`stream`): by itself (``returncode``; None with ``error`` when it
    could not start), or killed by the watchdog (``hung``; ``reaped`` False when it could not be killed)."""

    returncode: int | None
    hung: bool = False
    silent_for: float | None = None
    reaped: bool = True
    stderr: str = ""
    error: str | None = None


STREAM_STDERR_TAIL = 4000
STREAM_LINE_MAX = 1 << 20  # a line longer than this is cut: a child printing without newlines cannot fill memory


# A loaded machine can take seconds to start a child's interpreter: that is no step hanging. Until the child's
# first live line the watchdog allows this much (or the silence, when longer); every line after gets the silence.
STREAM_STARTUP_ALLOWANCE = 10.0


def stream(argv: Sequence[str], env: Mapping[str, str], silence: float,
           alive: Callable[[bytes], bool] = lambda line: True) -> Iterator[bytes | StreamEnd]:
    """Run argv (never a shell) in its own process group and yield each line of its stdout as it arrives,
    then exactly one :class:`StreamEnd`. A watchdog kills the whole group when no line that ``alive`` accepts
    came for ``silence`` seconds (a test that keeps reporting is alive, however long it runs). The child dies
    with the doctor (a parent-death signal), and whatever stops this generator — the end, an exception, a
    signal turned into one, ``close()`` — kills the group before it returns.
    """
    import select
    import tempfile
    import time

    with tempfile.TemporaryFile() as err:
        try:  # registered: SIGINT / SIGTERM / SIGHUP of the doctor kill this group too (doctor.children)
            proc = children.start(lambda: subprocess.Popen(
                list(argv), stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, env=dict(env),
                start_new_session=True, preexec_fn=spawn.hooked()))
        except children.Stopping:
            yield StreamEnd(None, error="not run: gpu-doctor is stopping")
            return
        except OSError as exc:
            yield StreamEnd(None, error=exc.strerror or str(exc))
            return
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        last = time.monotonic()
        hung = False
        reaped = True
        spoke = False  # before its first live line the child is starting its interpreter, not waiting on a GPU
        try:
            while True:
                limit = silence if spoke else max(silence, STREAM_STARTUP_ALLOWANCE)
                wait = limit - (time.monotonic() - last)
                if wait <= 0:
                    hung = True
                    break
                ready, _, _ = select.select([fd], [], [], wait)
                if not ready:
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                buf += chunk
                if b"\n" not in buf and len(buf) > STREAM_LINE_MAX:
                    buf = buf[-STREAM_LINE_MAX:]
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if alive(line):
                        last = time.monotonic()
                        spoke = True
                    yield line
        finally:
            if hung or proc.poll() is None:
                reaped = _kill_group(proc)
            else:
                # The child ended; anything it started in its group (a torch worker) goes with it.
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
            children.unregister(proc.pid)
            proc.stdout.close()
        if buf:
            yield buf
        err.seek(max(0, err.seek(0, os.SEEK_END) - STREAM_STDERR_TAIL))
        tail = err.read().decode("utf-8", "replace")
        if hung:
            yield StreamEnd(None, hung=True, silent_for=silence if spoke else max(silence, STREAM_STARTUP_ALLOWANCE),
                            reaped=reaped, stderr=tail)
        else:
            yield StreamEnd(proc.returncode, stderr=tail)


def _kill_group(proc: subprocess.Popen[bytes]) -> bool:
    """SIGKILL the child's process group; True when it is gone. A process stuck in the kernel inside the
    driver (state D) cannot die until the driver lets go: wait briefly, then leave it rather than hang."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=3.0)
    except subprocess.TimeoutExpired:
        return False
    return True


@dataclass(frozen=True)
class Host:
    """The machine as probes see it: a root directory, an environment and a command runner.

    ``budget`` is one overall deadline (seconds from when the Host is made) for every command together,
    on top of each command's own timeout: ten hung commands cannot add up to ten timeouts. ``notes``
    collects what the host itself had to cut short (a file over its cap); the collector turns them into
    error entries of the snapshot.
    """

    root: Path = Path("/")
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    timeout: float = DEFAULT_TIMEOUT
    runner: Runner = subprocess_runner
    budget: float | None = None
    notes: list[str] = field(default_factory=list, compare=False, repr=False)
    started: float = field(default_factory=time.monotonic, compare=False, repr=False)

    @property
    def live(self) -> bool:
        """True when probing the running system (not a mounted image or a test sysroot)."""
        return self.root == Path("/")

    def path(self, logical: str | os.PathLike[str]) -> Path:
        """Map an absolute path of the inspected system to where it really is. Under a root, its symlinks are
        resolved as that system would resolve them (:meth:`realpath`): an absolute link target stays inside the
        root, so an image's /usr/local/cuda -> /usr/local/cuda-12.4 names the image's toolkit, never this
        machine's, and no file or command outside the root is reached through a link."""
        p = Path(logical)
        if self.live:
            return p
        if p.is_absolute():
            return self._under_root(self.realpath(str(p)))
        return self.root / p

    def _under_root(self, logical: str | os.PathLike[str]) -> Path:
        """The path under the root, links not resolved (what :meth:`realpath` checks one part at a time)."""
        p = Path(logical)
        return self.root / p.relative_to(p.anchor) if p.is_absolute() else self.root / p

    def logical(self, real: Path) -> str:
        """The inverse of :meth:`path`: how the inspected system names a file we found."""
        if self.live:
            return str(real)
        try:
            return "/" + str(real.relative_to(self.root))
        except ValueError:
            return str(real)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def read_text(self, logical: str, limit: int = MAX_READ) -> str:
        """Read a file of the inspected system, up to ``limit`` bytes (a longer file is noted as truncated).

        Only a regular file is read, and opening never blocks: a FIFO or a device (``/dev/zero``) put
        where a file belongs raises OSError like a missing file. ``/proc`` and ``/sys`` files are regular.
        """
        data = self.read_bytes(logical, limit)
        return data.decode("utf-8", "replace")

    def try_read(self, logical: str, limit: int = MAX_READ) -> str | None:
        """Read a file, or None when it does not exist or cannot be read."""
        try:
            return self.read_text(logical, limit)
        except (OSError, ValueError):
            return None

    def kernel_log(self, device: str = "/dev/kmsg", limit: int = MAX_READ) -> str | None:
        """The kernel's log, one message a line (the text dmesg prints after its timestamps), read from
        ``/dev/kmsg``, the device dmesg itself reads, without starting dmesg. Only on the running system; None
        when the device cannot be opened (none in a container, dmesg_restrict without CAP_SYSLOG): the caller
        then asks dmesg, which says why. Reading never blocks (each read is one record; the end is EAGAIN) and
        stops at ``limit`` bytes (noted, as a file cut at its cap)."""
        if not self.live:
            return None
        try:
            fd = os.open(device, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        chunks: list[bytes] = []
        total = 0
        try:
            while total < limit:
                try:
                    data = os.read(fd, 1 << 16)
                except BlockingIOError:
                    break  # no newer record: the end of the log
                except BrokenPipeError:
                    continue  # records overwritten while reading: the read goes on from the oldest one left
                except OSError:
                    if not chunks:
                        return None
                    break
                if not data:
                    break
                chunks.append(data)
                total += len(data)
        finally:
            os.close(fd)
        if total >= limit:
            self.note(f"{device}: output truncated at {limit // (1024 * 1024)} MB")
        lines = []
        for record in b"".join(chunks)[:limit].split(b"\n"):
            # "PRIORITY,SEQUENCE,MICROSECONDS,FLAGS;message"; a line starting with a space continues the record
            # (its SUBSYSTEM= / DEVICE= dictionary).
            head, sep, message = record.partition(b";")
            if sep and not head.startswith(b" "):
                if b"\\x" in message:  # the kernel writes a control byte (a tab, a newline) or a backslash as \xNN
                    message = _KMSG_ESCAPE.sub(lambda m: bytes((int(m.group(1), 16),)), message)
                lines.append(message)
        return b"\n".join(lines).decode("utf-8", "replace") + ("\n" if lines else "")

    def read_head(self, logical: str, size: int) -> bytes:
        """The first ``size`` bytes of a file (to tell what kind of file it is: a script's first lines, a magic
        number); a longer file is what is expected, not a truncation, so nothing is noted. Raises OSError like
        read_text."""
        data, _more = safeio.read_file(self.path(logical), size)
        return data

    def read_bytes(self, logical: str, limit: int = MAX_READ) -> bytes:
        data, more = safeio.read_file(self.path(logical), limit)
        if more:
            self.note(f"{logical}: output truncated at {safeio.megabytes(limit)} (the rest was not read)")
        return data

    def iter_blocks(self, logical: str, limit: int, size: int = 1 << 20) -> Iterator[bytes]:
        """A (large) file in blocks of ``size`` bytes, up to ``limit`` bytes; raises OSError like read_text.
        Blocks, not lines: the caller scans each block with one regular expression, in C, not line by line."""
        with safeio.open_regular(self.path(logical)) as fh:
            seen = 0
            while True:
                block = fh.read(min(size, limit - seen + 1))
                if not block:
                    return
                seen += len(block)
                if seen > limit:
                    self.note(f"{logical}: output truncated at {safeio.megabytes(limit)} (the rest was not read)")
                    yield block[: len(block) - (seen - limit)]
                    return
                yield block

    def exists(self, logical: str) -> bool:
        try:
            return self.path(logical).exists()
        except (OSError, ValueError):
            return False

    def is_dir(self, logical: str) -> bool:
        try:
            return self.path(logical).is_dir()
        except (OSError, ValueError):
            return False

    def glob(self, pattern: str) -> list[str]:
        """Glob an absolute pattern on the inspected system; logical paths, sorted."""
        base = self.path("/")
        rel = pattern.lstrip("/")
        try:
            return sorted(self.logical(p) for p in base.glob(rel))
        except (OSError, ValueError, NotImplementedError):
            return []

    def listdir(self, logical: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(logical)))
        except (OSError, ValueError):
            return []

    def realpath(self, logical: str) -> str:
        """Resolve symlinks inside the inspected system (an absolute link target stays in the root)."""
        if self.live:
            return os.path.realpath(logical)
        cur = Path("/")
        parts = Path(logical).parts[1:]
        todo = list(parts)
        hops = 0
        while todo:
            part = todo.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                cur = cur.parent
                continue
            cand = cur / part
            real = self._under_root(cand)  # cur is resolved: only this last part can be a link
            if real.is_symlink() and hops < 40:
                hops += 1
                target = os.readlink(real)
                if target.startswith("/"):
                    cur = Path("/")
                todo = list(Path(target).parts[1:] if target.startswith("/") else Path(target).parts) + todo
                continue
            cur = cand
        return str(cur)

    def walk_files(self, logical: str, max_files: int = 50_000) -> Iterator[str]:
        """Every file below a directory, bounded so a huge tree cannot stall a probe."""
        count = 0
        for dirpath, _dirs, files in os.walk(self.path(logical)):
            for name in files:
                count += 1
                if count > max_files:
                    return
                yield self.logical(Path(dirpath) / name)

    def getenv(self, name: str) -> str | None:
        return self.env.get(name)

    def which(self, name: str) -> str | None:
        """Find a command on the inspected system's PATH (logical path), as a shell would."""
        try:
            if "/" in name:
                return name if os.access(self.path(name), os.X_OK) else None
            for d in (self.env.get("PATH") or "/usr/local/bin:/usr/bin:/bin").split(os.pathsep):
                if not d:
                    continue
                cand = os.path.join(d, name)
                real = self.path(cand)
                if real.is_file() and os.access(real, os.X_OK):
                    return cand
        except (OSError, ValueError):  # a NUL byte in a name, an unreadable directory on PATH
            return None
        return None

    def remaining(self) -> float | None:
        """Seconds left of the overall budget; None when there is none."""
        if self.budget is None:
            return None
        return self.budget - (time.monotonic() - self.started)

    def stream(self, argv: Sequence[str], silence: float, env: Mapping[str, str] | None = None,
               alive: Callable[[bytes], bool] = lambda line: True) -> Iterator[bytes | StreamEnd]:
        """:func:`stream` with this host's environment (or ``env``): a long-running test child under a watchdog."""
        return stream(argv, self.env if env is None else env, silence, alive)

    def run(self, argv: Sequence[str], timeout: float | None = None, stdin: ChildInput | None = None) -> CmdResult:
        """Run a command of the inspected system (resolved on its PATH) under a timeout; its standard input is
        empty, or what the caller sends through ``stdin`` after it started."""
        exe = self.which(argv[0])
        if exe is None:
            return CmdResult(tuple(argv), None, error="not found")
        limit, cut = self._limit(timeout)
        if limit is None:
            return CmdResult(tuple(argv), None, error=f"not run: the overall deadline ({self.budget:g}s) had passed")
        real_argv = [str(self.path(exe)), *argv[1:]]
        result = self.runner(real_argv, limit, self.env) if stdin is None else \
            self.runner(real_argv, limit, self.env, stdin)
        # Report the command the way the user would type it, not the sysroot path.
        return self._as_run(tuple(argv), result, cut)

    def adopts(self) -> bool:
        """Whether this host collects children started ahead of it (:meth:`adopt`): the running system, run by
        :func:`subprocess_runner` (a test's fake runner, or an inspected root, starts its own)."""
        return self.live and self.runner is subprocess_runner

    def adopt(self, argv: Sequence[str], proc: subprocess.Popen[bytes], timeout: float | None = None,
              stdin: ChildInput | None = None) -> CmdResult:
        """What a child started ahead of this host did (``argv``, the command :meth:`run` would have run, started
        by :func:`doctor.spawn.start`, see :mod:`doctor.ahead`), collected as :meth:`run` collects: its
        timeout (counted from now, or from when ``stdin`` is sent) and the overall deadline."""
        limit, cut = self._limit(timeout)
        result = finished(tuple(argv), proc, 0.0 if limit is None else limit, stdin)
        if limit is None:
            return CmdResult(tuple(argv), None, error=f"not run: the overall deadline ({self.budget:g}s) had passed")
        return self._as_run(tuple(argv), result, cut)

    def _limit(self, timeout: float | None) -> tuple[float | None, bool]:
        """(a command's time limit, or None when the overall deadline has passed; whether that deadline cut it)."""
        limit = timeout or self.timeout
        left = self.remaining()
        if left is None:
            return limit, False
        if left <= 0.05:
            return None, True
        return min(limit, left), left < limit

    def _as_run(self, argv: tuple[str, ...], result: CmdResult, cut: bool) -> CmdResult:
        error = result.error
        if cut and error and error.startswith("timed out"):
            error = f"stopped at the overall deadline ({self.budget:g}s)"
        return CmdResult(argv, result.returncode, result.stdout, result.stderr, error)
