"""Run a child process that prints events, with a watchdog: silence longer than the timeout is a hang.

The process itself is run by :func:`doctor.host.stream` — argv only, its own process group, killed as a
group on a hang or whatever stops the doctor, and dying with the doctor — like every command a probe runs.
Here: each line the child prints after :data:`MARKER` is a JSON event, handed on as soon as it arrives, so
progress is live and whatever the child learned before it hung survives. The watchdog restarts with every
event: a test that keeps reporting is alive, however long it runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from doctor.host import Host, StreamEnd

MARKER = b"@@GPU-DOCTOR@@"


def child_events(argv: Sequence[str], env: Mapping[str, str], timeout: float,
                 host: Host | None = None) -> Iterator[dict[str, Any]]:
    """Yield the child's events, then exactly one of:

    ``{"event": "exit", "returncode": N, "stderr": tail}`` when it ended by itself, or
    ``{"event": "hang", "silent_for": s, "reaped": bool, "stderr": tail}`` when the watchdog killed it.
    A child that cannot start yields ``{"event": "exit", "returncode": None, "error": why}``.
    """
    lines = (host or Host()).stream(argv, timeout, env=env, alive=lambda line: _parse(line) is not None)
    for item in lines:
        if isinstance(item, StreamEnd):
            if item.hung:
                yield {"event": "hang", "silent_for": item.silent_for, "reaped": item.reaped, "stderr": item.stderr}
            elif item.error is not None:
                yield {"event": "exit", "returncode": None, "error": item.error, "stderr": ""}
            else:
                yield {"event": "exit", "returncode": item.returncode, "stderr": item.stderr}
            return
        event = _parse(item)
        if event is not None:
            yield event


def _parse(line: bytes) -> dict[str, Any] | None:
    """The JSON after the marker; anything else (a driver or library printing on stdout) is ignored."""
    at = line.find(MARKER)
    if at < 0:
        return None
    try:
        event = json.loads(line[at + len(MARKER):])
    except (ValueError, RecursionError):
        return None
    return event if isinstance(event, dict) and "event" in event else None
