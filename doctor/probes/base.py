"""What every probe shares: the recorder of errors and sources, and the child-process helper."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from doctor.facts import ProbeError
from doctor.host import Host


@dataclass
class Recorder:
    """Collects why a probe could not learn something, and where each value came from."""

    errors: list[ProbeError] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)

    def error(self, probe: str, reason: str) -> None:
        self.errors.append(ProbeError(probe=probe, reason=reason))

    def source(self, fact: str, source: str) -> None:
        self.sources.setdefault(fact, source)


def child_script(name: str) -> str:
    """The source text of one of our child-process scripts (run with ``python -c``)."""
    return resources.files("doctor.probes").joinpath(name).read_text()


MARKER = "\n@@GPU-DOCTOR@@"


def run_python_child(
    host: Host, python: str, script: str, args: list[str], timeout: float, probe: str, rec: Recorder
) -> dict[str, Any] | None:
    """Run one of our scripts in an interpreter and read the JSON it prints after the marker.

    The marker protects against a sitecustomize or framework that prints on import.
    """
    result = host.run([python, "-c", child_script(script), *args], timeout)
    if result.error or result.returncode != 0:
        shown = result.error or f"exit {result.returncode}: {(result.stderr.strip().splitlines() or [''])[-1][:300]}"
        rec.error(probe, f"{python}: {shown}")
        return None
    _, sep, payload = result.stdout.rpartition(MARKER.strip())
    try:
        data = json.loads(payload if sep else result.stdout)
    except json.JSONDecodeError:
        rec.error(probe, f"{python}: unreadable answer from the child process")
        return None
    return data if isinstance(data, dict) else None


def own_python() -> str:
    return sys.executable or "python3"
