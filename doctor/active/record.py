"""An active test's end: its measurements as facts, nothing judged.

Every test generator ends here. The application layer judges the outcome (doctor.pipeline.judged) with the
registered active-test checks, so the findings a live run shows are by construction the ones
`gpu-doctor check --facts` gives for a snapshot holding the same ``active`` section.
"""

from __future__ import annotations

from typing import Any

from doctor.active.events import Outcome
from doctor.model.facts_active import ActiveFacts


def outcome(active: ActiveFacts, results: dict[str, Any], summary: str | None = None,
            what: str | None = None, context: ActiveFacts | None = None,
            checks: tuple[str, ...] | None = None) -> Outcome:
    """The Outcome of a test as its runner ends it: the measurements as facts and the raw results; the
    findings, the status and (unless ``summary`` is given) the line come from judging it — with ``context``
    (an earlier test's facts it is measured against) by ``checks`` (None: every active-test check)."""
    return Outcome("", summary or "", [], results, active, what=what, judged=False, context=context,
                   checks=checks)
