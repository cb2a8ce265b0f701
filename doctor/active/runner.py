"""Run a child process that prints events, with a watchdog: silence longer than the timeout is a hang.

Like :func:`doctor.host.subprocess_runner` (argv only, its own process group, the whole group killed on
timeout) but streaming: each line the child prints after :data:`MARKER` is a JSON event, handed on as
soon as it arrives, so progress is live and whatever the child learned before it hung survives. The
watchdog restarts with every event: a test that keeps reporting is alive, however long it runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from doctor import children

MARKER = b"@@GPU-DOCTOR@@"


def child_events(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> Iterator[dict[str, Any]]:
    """Yield the child's events, then exactly one of:

    ``{"event": "exit", "returncode": N, "stderr": tail}`` when it ended by itself, or
    ``{"event": "hang", "silent_for": s, "reaped": bool, "stderr": tail}`` when the watchdog killed it.
    A child that cannot start yields ``{"event": "exit", "returncode": None, "error": why}``.
    """
    with tempfile.TemporaryFile() as err:
        try:  # registered: SIGINT / SIGTERM / SIGHUP of the doctor kill this group too
            proc = children.start(lambda: subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=err,
                                                           stdin=subprocess.DEVNULL, env=dict(env),
                                                           start_new_session=True))
        except children.Stopping:
            yield {"event": "exit", "returncode": None, "error": "gpu-doctor is stopping", "stderr": ""}
            return
        except OSError as exc:
            yield {"event": "exit", "returncode": None, "error": exc.strerror or str(exc), "stderr": ""}
            return
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        last = time.monotonic()
        hung = False
        try:
            while True:
                wait = timeout - (time.monotonic() - last)
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
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    event = _parse(line)
                    if event is not None:
                        last = time.monotonic()
                        yield event
        finally:
            reaped = _kill_group(proc) if hung or proc.poll() is None else True
            children.unregister(proc.pid)
            proc.stdout.close()
        if buf:
            event = _parse(buf)
            if event is not None:
                yield event
        err.seek(0)
        tail = err.read()[-4000:].decode("utf-8", "replace")
        if hung:
            yield {"event": "hang", "silent_for": timeout, "reaped": reaped, "stderr": tail}
        else:
            yield {"event": "exit", "returncode": proc.returncode, "stderr": tail}


def _parse(line: bytes) -> dict[str, Any] | None:
    """The JSON after the marker; anything else (a driver or library printing on stdout) is ignored."""
    at = line.find(MARKER)
    if at < 0:
        return None
    try:
        event = json.loads(line[at + len(MARKER):])
    except ValueError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


def _kill_group(proc: subprocess.Popen[bytes]) -> bool:
    """SIGKILL the child's process group; True when it is gone. A process stuck in the kernel inside the
    driver (state D) cannot die until the driver lets go: we wait briefly and then leave it, rather than
    hang the doctor with it."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=3.0)
    except subprocess.TimeoutExpired:
        return False
    return True
