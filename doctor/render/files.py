"""How ``--output`` writes a file (every format, through :func:`doctor.pipeline.write`).

``--output PATH`` writes what the format rendered, by what PATH is:

* nothing there yet, or a regular file: atomically — a dot-file in the same directory renamed over PATH,
  so a reader (node_exporter's textfile collector, NFD's features.d) sees the old file or the new one,
  never half of one (NFD ignores dot-files, node_exporter reads only ``*.prom``);
* a symbolic link: followed, never replaced — the file it points to is written as above (the link stays
  and keeps pointing there), and a link that points at nothing is refused;
* a character device (``/dev/null``, a terminal) or a FIFO with a reader: written *through*, as a shell's
  ``>`` would — never renamed over, which would replace the device node or the pipe with a regular file
  (as root that breaks the host); ``/dev/stdout`` and ``/dev/stderr`` are our own standard streams;
* a FIFO that no process reads: refused at once (waiting for a reader would hang);
* a block device (a disk), a socket, a directory: refused — a report is never written onto a disk;
* ``-``: standard output.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from pathlib import Path


class OutputError(Exception):
    """The output file could not be written; the message names the path and why."""


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def write_output(path: str | Path, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` as the module's docstring says; :class:`OutputError` with a one-line reason.
    ``mode`` is the new regular file's (0o755 for a script); a device or FIFO written through keeps its own."""
    data = text.encode("utf-8", errors="backslashreplace")  # a lone surrogate is shown, not a crash
    target = os.fspath(path)
    if target == "-":  # the usual name of standard output
        _through_fd(target, 1, data)
        return
    try:
        st = os.stat(target)  # follows links: what a write would reach
    except FileNotFoundError:
        if os.path.islink(target):
            raise OutputError(f"{target}: a symbolic link to {os.readlink(target)!r}, which does not exist") \
                from None
        _replace(target, data, mode)
        return
    except OSError as exc:
        raise OutputError(f"{target}: {_why(exc)}") from None
    mode = st.st_mode
    if stat.S_ISREG(mode):
        for fd in (1, 2):  # --output /dev/stdout with standard output redirected to a file
            if _same(st, fd):
                _through_fd(target, fd, data)
                return
        _replace(os.path.realpath(target), data, mode)
    elif stat.S_ISDIR(mode):
        raise OutputError(f"{target}: is a directory")
    elif stat.S_ISBLK(mode):
        raise OutputError(f"{target}: a block device (a disk): gpu-doctor does not write a report onto it")
    elif stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        own = next((fd for fd in (1, 2) if _same(st, fd)), None)
        if own is not None:  # /dev/stdout, /dev/stderr, /proc/self/fd/1: our own stream, whatever it is
            _through_fd(target, own, data)
        elif stat.S_ISSOCK(mode):
            raise OutputError(f"{target}: a socket: not a file gpu-doctor can write")
        else:
            _through(target, data, fifo=stat.S_ISFIFO(mode))
    else:
        raise OutputError(f"{target}: not a regular file")


def _same(st: os.stat_result, fd: int) -> bool:
    try:
        other = os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (other.st_dev, other.st_ino)


def _through_fd(target: str, fd: int, data: bytes) -> None:
    stream = sys.stdout if fd == 1 else sys.stderr
    with contextlib.suppress(AttributeError, OSError, ValueError):
        stream.flush()
    _write_all(target, fd, data)


def _through(target: str, data: bytes, fifo: bool) -> None:
    """Open an existing device or FIFO for writing (no create, no truncate) and write into it."""
    flags = os.O_WRONLY | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0) | (os.O_NONBLOCK if fifo else 0)
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if fifo and exc.errno == errno.ENXIO:
            raise OutputError(f"{target}: a FIFO that no process is reading") from None
        raise OutputError(f"{target}: {_why(exc)}") from None
    try:
        if fifo:
            os.set_blocking(fd, True)  # a reader is there: from now on a full pipe waits for it, as `>` does
        _write_all(target, fd, data)
    finally:
        os.close(fd)


def _write_all(target: str, fd: int, data: bytes) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        raise OutputError(f"{target}: {_why(exc)}") from None


def _replace(target: str, data: bytes, mode: int) -> None:
    """A dot-file in the target's directory, renamed over it."""
    where = Path(target)
    directory = where.parent if str(where.parent) else Path(".")
    if not directory.is_dir():
        raise OutputError(f"{target}: the directory {directory} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{where.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OutputError(f"{target}: {_why(exc)}") from None
    try:
        try:
            _write_all(target, fd, data)
        finally:
            os.close(fd)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except (OSError, OutputError) as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OutputError(str(exc) if isinstance(exc, OutputError) else f"{target}: {_why(exc)}") from None


write_atomic = write_output  # the name callers used before special files were handled
