"""The NVML child, started ahead: `check` and `snapshot` on this machine start their slowest child before their own
imports, and the probes adopt it.

Asking NVML and libcuda takes a second interpreter ~50 ms of CPU (nvmlInit, cuInit answering, the interpreter) and
is the last answer `check` waits for. Started when the probes start, it waited for the imports of argparse, the
host seam, the facts model and the pipeline (~30 ms at 2 CPUs) while the other CPU was idle. So the command module,
once it has seen from the arguments that this machine will be probed (:func:`doctor.commands.check.start_ahead`),
calls :func:`start_native`, which needs only :mod:`doctor.spawn` (the host seam's process half) and the standard
library: it lives outside :mod:`doctor.probes`, whose package imports the whole host seam.
:func:`doctor.probes.native.run_native` then takes it (:func:`take`) instead of starting its own, and collects it
through the host (``Host.adopt``): the same command line, timeout, overall deadline and answer. A child nobody
took (the arguments turned out wrong, the check stopped) is killed and its pipes closed (:func:`discard`, from the
command's ``finally``), so a next command in the same process never sees it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

from doctor import children, spawn

NATIVE_ARGS = ("--cudnn-stdin",)  # the libcudnn to ask reaches the child later, on its standard input


class Ahead:
    """A child started ahead: its command line, its process, its standard input."""

    def __init__(self, argv: tuple[str, ...], proc: subprocess.Popen[bytes], stdin: spawn.ChildInput) -> None:
        self.argv, self.proc, self.stdin = argv, proc, stdin


_native: Ahead | None = None


def own_child_argv(python: str, script: str, source: str, args: Sequence[str]) -> list[str]:
    """The command line of one of our child scripts in gpu-doctor's own interpreter: its import path is this
    process's, so the child starts without the site module (-S: no .pth files, no sitecustomize, ~10-20 ms of its
    start) and is handed that path instead."""
    path = [p for p in sys.path[1:] if isinstance(p, str)]
    code = (f"import sys\nsys.path += [p for p in {path!r} if p not in sys.path]\n"
            f"exec(compile({source!r}, {script!r}, 'exec'))")
    return [python, "-S", "-c", code, *args]


def start_native() -> bool:
    """Start the NVML child now, on this machine, for :func:`doctor.probes.native.run_native` to take. False (nothing
    started) when one is already waiting, when gpu-doctor is stopping, or when its script or interpreter cannot be
    had this way: the probes then start it themselves, as always."""
    global _native
    if _native is not None:
        return False
    python = sys.executable
    try:
        with open(os.path.join(os.path.dirname(__file__), "probes", "native_child.py"), encoding="utf-8") as fh:
            source = fh.read()
    except (OSError, ValueError):  # a package that is no directory of files (a zip): the usual way then
        return False
    if not python:
        return False
    argv = tuple(own_child_argv(python, "native_child.py", source, NATIVE_ARGS))
    stdin = spawn.ChildInput()
    try:
        proc = spawn.start(argv, os.environ, stdin)
    except (OSError, ValueError, children.Stopping):
        stdin.close()
        return False
    _native = Ahead(argv, proc, stdin)
    return True


def take(argv: Sequence[str]) -> Ahead | None:
    """The child started ahead, when it is the one ``argv`` would start (the same interpreter, script, import path
    and arguments); it is then the caller's to collect. None otherwise (the one waiting, if any, is discarded)."""
    global _native
    ahead, _native = _native, None
    if ahead is None:
        return None
    if ahead.argv != tuple(argv):
        _drop(ahead)
        return None
    return ahead


def discard() -> None:
    """Kill the child started ahead that nobody took, and close its pipes."""
    global _native
    ahead, _native = _native, None
    if ahead is not None:
        _drop(ahead)


def _drop(ahead: Ahead) -> None:
    ahead.stdin.close()
    spawn.collect(ahead.proc, 0.0)  # no wait: the group is killed, unregistered, reaped, its pipes closed
