"""Active tests (smoke test, OOM probe) as the TUI sees them: descriptors and a stream of events.

The tests themselves belong to the engine (`gpu-doctor smoke`, `gpu-doctor oom`). The TUI needs
only a *runner*: a function ``(test, facts) -> Iterator[Event]`` that it iterates in a worker
thread, turning each event into the progress bar, the live log and, at the end, findings. Until
the engine has active tests, :func:`engine_runner` returns None and the actions say so; nothing is
simulated. To plug the real tests in, make :func:`engine_runner` return an adapter from the
engine's progress events to these three.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from doctor.facts import Facts
from doctor.findings import Finding


@dataclass(frozen=True)
class Progress:
    """How far the test is: ``fraction`` in [0, 1], or None while unknown; ``step`` names what runs."""

    fraction: float | None
    step: str = ""


@dataclass(frozen=True)
class Log:
    line: str


@dataclass(frozen=True)
class Outcome:
    """The end of a run: its status (ok | warn | fail | error), one line, and findings for the report."""

    status: str
    summary: str
    findings: list[Finding] = field(default_factory=list)


Event = Progress | Log | Outcome


@dataclass(frozen=True)
class ActiveTest:
    id: str
    title: str
    what: str
    confirm: str | None = None  # the question asked before running; None: runs without asking


SMOKE = ActiveTest(
    "smoke", "Smoke test",
    "Creates a CUDA context on each GPU through the driver API, copies data in, runs a small kernel, copies it "
    "back and checks every element; measures copy bandwidth and compute throughput. Needs no framework.")
OOM = ActiveTest(
    "oom", "OOM probe",
    "Finds the largest single allocation and the total memory a program can really get on each GPU, explains "
    "any gap with what NVML reports, and proves the context still works after running out of memory.",
    confirm="The OOM probe allocates all free memory of each GPU for a few seconds: other jobs on these GPUs can "
            "fail with 'out of memory' meanwhile. Run it?")
TESTS: tuple[ActiveTest, ...] = (SMOKE, OOM)

Runner = Callable[[ActiveTest, Facts], Iterator[Event]]

NOT_AVAILABLE = ("not available yet: the active tests (`gpu-doctor smoke`, `gpu-doctor oom`) are not part of "
                 "this version")


def engine_runner() -> Runner | None:
    """The engine's active-test runner, or None while the engine has none (this version)."""
    return None


def unavailable_reason(runner: Runner | None, live: bool) -> str | None:
    """Why the active tests cannot run here, or None when they can."""
    if runner is None:
        return NOT_AVAILABLE
    if not live:
        return "active tests run on this machine's GPUs only; this is a recorded snapshot"
    return None
