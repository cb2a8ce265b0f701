"""The one progress interface of the active tests: an iterator of events, and the CLI's rendering of it.

A test is a generator of :data:`Event`; the last event is an :class:`Outcome` with the findings. The CLI
draws :class:`Progress` as one line on stderr (:class:`StderrProgress`); the TUI runs the same generator
in a worker thread (its ``doctor.tui.active`` events have the same names and fields, so adapting is a
field-by-field copy). Nothing here knows about CUDA.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from doctor.model.findings import Finding
from doctor.safeio import display


@dataclass(frozen=True)
class Progress:
    """How far the test is: ``fraction`` in [0, 1] (None while unknown); ``step`` says what runs now."""

    fraction: float | None
    step: str = ""
    gpu: int | None = None


@dataclass(frozen=True)
class Log:
    """A line worth keeping in a live log (a measurement, a retry), not a finding."""

    line: str


@dataclass(frozen=True)
class Outcome:
    """The end of a run: ok | warn | fail, one line, the findings, and the raw measurements (JSON-able)."""

    status: str
    summary: str
    findings: list[Finding] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    active: Any = None  # the measurements as facts (model.facts_active.ActiveFacts), from `snapshot --smoke`
    what: str | None = None  # the test's name for its summary line ("smoke test")
    judged: bool = True  # False: as the runner ended it, before doctor.pipeline.judged added the findings
    # For judging only: what an earlier test recorded that this one is measured against (the smoke test's
    # multi-GPU links for nccl-tests), and the checks that judge this test (None: every active-test check).
    context: Any = None
    checks: tuple[str, ...] | None = None


Event = Progress | Log | Outcome


def child_fraction(ev: dict[str, Any]) -> float:
    """How far a test child says it is (its step event's ``fraction``), in [0, 1]; 0 when it does not say or says
    something that is not a fraction (the child runs in the user's interpreter: its output is data)."""
    value = ev.get("fraction")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:  # NaN
        return 0.0
    return min(max(float(value), 0.0), 1.0)


def last_outcome(events: Iterator[Event], on_event: Any = None) -> Outcome:
    """Drain a test's events (passing each to ``on_event``) and return its Outcome."""
    outcome = None
    for ev in events:
        if on_event is not None:
            on_event(ev)
        if isinstance(ev, Outcome):
            outcome = ev
    if outcome is None:  # a generator that ends without one is a bug in the test, not a GPU problem
        raise RuntimeError("the active test ended without an outcome")
    return outcome


class StderrProgress:
    """Renders events for a person: on a terminal one self-overwriting line ``[ 42%] GPU 0: step``; in a
    log (not a terminal) one line per new step, so CI output shows where a run stopped."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.quiet = quiet
        self.last = ""
        self.started = time.monotonic()

    def __call__(self, ev: Event) -> None:
        if self.quiet:
            return
        if isinstance(ev, Progress):
            pct = f"[{ev.fraction * 100:3.0f}%]" if ev.fraction is not None else "[ …  ]"
            where = f"GPU {ev.gpu}: " if ev.gpu is not None else ""
            line = display(f"{pct} {where}{ev.step}", line=True)  # a step may quote the GPU's name: data
            if self.tty:
                self.stream.write("\r\x1b[K" + line[:200])
            elif ev.step != self.last:
                self.stream.write(line + "\n")
            self.last = ev.step
        elif isinstance(ev, Log):
            self.stream.write(("\r\x1b[K" if self.tty else "") + display(ev.line, line=True) + "\n")
        elif isinstance(ev, Outcome) and self.tty:
            self.stream.write("\r\x1b[K")
        self.stream.flush()
