"""What every probe shares: the recorder of errors and sources, and the child-process helper."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from doctor.ahead import own_child_argv
from doctor.host import ChildInput, CmdResult, Host
from doctor.safeio import InputError, load_json, package_data

if TYPE_CHECKING:
    from doctor.model.facts import ProbeError


@dataclass
class Recorder:
    """Collects why a probe could not learn something, and where each value came from."""

    errors: list[ProbeError] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)

    def error(self, probe: str, reason: str) -> None:
        from doctor.model.facts import ProbeError  # not at import: the first probes start before the facts model

        self.errors.append(ProbeError(probe=probe, reason=reason))

    def source(self, fact: str, source: str) -> None:
        self.sources.setdefault(fact, source)

    def merge(self, other: Recorder) -> None:
        """What a probe run beside the others recorded on its own, as if recorded here now."""
        self.errors.extend(other.errors)
        for fact, source in other.sources.items():
            self.source(fact, source)


def child_script(name: str) -> str:
    """The source text of one of our child-process scripts (run with ``python -c``)."""
    return package_data("doctor.probes", name).decode("utf-8")


MARKER = "\n@@GPU-DOCTOR@@"


def run_python_child(
    host: Host, python: str, script: str, args: list[str], timeout: float, probe: str, rec: Recorder,
    own: bool = False, stdin: ChildInput | None = None,
) -> dict[str, Any] | None:
    """Run one of our scripts in an interpreter and merge the JSON sections it prints after the marker. ``own``:
    the interpreter is gpu-doctor's own (:func:`own_python`).

    The marker protects against a sitecustomize or framework that prints on import. A child that
    times out still contributes the sections it printed before it hung; the error names the part
    that did not answer.
    """
    result = host.run(python_child_argv(python, script, args, own), timeout, stdin=stdin)
    return child_answer(result, python, probe, rec)


def python_child_argv(python: str, script: str, args: list[str], own: bool = False) -> list[str]:
    """The command line that runs one of our scripts in ``python`` (see :func:`run_python_child`)."""
    if own:
        return own_child_argv(python, script, child_script(script), args)
    return [python, "-c", child_script(script), *args]


def child_answer(result: CmdResult, python: str, probe: str, rec: Recorder) -> dict[str, Any] | None:
    """The JSON sections a child script printed after the marker, merged; its failure recorded as ``probe``'s."""
    merged: dict[str, Any] = {}
    sections = []
    for chunk in result.stdout.split(MARKER.strip())[1:]:
        try:
            data = load_json(chunk)  # the child runs in someone's environment: its answer is untrusted input
        except InputError:
            continue
        if isinstance(data, dict):
            sections.append(data.pop("section", None))
            merged.update(data)
    if result.error or result.returncode != 0:
        shown = result.error or f"exit {result.returncode}: {(result.stderr.strip().splitlines() or [''])[-1][:300]}"
        after = f" (after the {', '.join(s for s in sections if s)} part answered)" if any(sections) else ""
        rec.error(probe, f"{python}: {shown}{after}")
        return merged or None
    if not sections:
        rec.error(probe, f"{python}: unreadable answer from the child process")
        return None
    return merged


def own_python() -> str:
    return sys.executable or "python3"
