"""Active tests (smoke test, OOM probe) as the TUI sees them: descriptors, and the engine's stream of events.

The tests belong to the engine (`gpu-doctor smoke`, `gpu-doctor oom`): :func:`doctor.active.gpu.smoke_events`
and :func:`~doctor.active.gpu.oom_events` spawn the child process that talks to the CUDA driver and yield
:mod:`doctor.active.events` — ``Progress``, ``Log`` and one final ``Outcome`` with the findings. The TUI uses
those very classes (re-exported here), so there is nothing to translate: a *runner* is a function
``(test, facts) -> Iterator[Event]`` that the app iterates in a worker thread, drawing the progress bar, the
live log and, at the end, the findings. :func:`engine_runner` is the real one; tests pass fake streams.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from doctor.model.records import dataclass

if TYPE_CHECKING:
    from doctor.active.events import Event, Log, Outcome, Progress
    from doctor.active.gpu import Options
    from doctor.model.facts import Facts

_EVENTS = ("Event", "Log", "Outcome", "Progress")


def __getattr__(name: str) -> Any:
    """The engine's event classes, imported when first asked for (a test's events, after the first frame): the
    TUI's first frame needs the descriptors below, not the engine's model (issue 23, start-up)."""
    if name in _EVENTS:
        from doctor.active import events

        globals().update({n: getattr(events, n) for n in _EVENTS})
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["NOT_AVAILABLE", "OOM", "SMOKE", "TESTS", "ActiveTest", "Event", "Log", "Outcome", "Progress", "Runner",
           "engine_runner", "result_line", "unavailable_reason"]


@dataclass(frozen=True)
class ActiveTest:
    """One active test as the TUI offers it: its id, its name, what it does, the question asked before it runs."""

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
            "fail with 'out of memory' meanwhile (it refuses to start where other processes compute). Run it?")
TESTS: tuple[ActiveTest, ...] = (SMOKE, OOM)

Runner = Callable[[ActiveTest, "Facts"], Iterator["Event"]]

NOT_AVAILABLE = "active tests are switched off in this session"


def engine_runner(options: Options | None = None) -> Runner:
    """The engine's tests as a runner, with the options of `gpu-doctor smoke` / `oom` (their defaults when None:
    every GPU, the 30 s watchdog, no --force; ``options.env`` is the child process's environment)."""

    def run(test: ActiveTest, facts: Facts) -> Iterator[Event]:
        # ``facts`` is not used: the child asks NVML and the driver itself, so a stale snapshot cannot mislead it.
        from doctor.active import gpu
        from doctor.pipeline import judged

        opts = options or gpu.Options()
        if test.id == SMOKE.id:
            return judged(gpu.smoke_events(opts))
        if test.id == OOM.id:
            return judged(gpu.oom_events(opts))
        raise ValueError(f"no active test {test.id!r}")

    return run


def result_line(test: ActiveTest, outcome: Outcome) -> str:
    """The outcome's one line for a place that already names the test ("Smoke test: passed", not "Smoke test:
    smoke test: passed": the engine's summaries start with the test's name so they read alone on the CLI)."""
    head = f"{test.title.lower()}: "
    return outcome.summary[len(head):] if outcome.summary.lower().startswith(head) else outcome.summary


def unavailable_reason(runner: Runner | None, live: bool) -> str | None:
    """Why the active tests cannot run here, or None when they can."""
    if runner is None:
        return NOT_AVAILABLE
    if not live:
        return "active tests run on this machine's GPUs only; this is a recorded snapshot"
    return None
