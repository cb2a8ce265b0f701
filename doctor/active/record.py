"""An active test's end: its measurements as facts, judged by the registered checks.

Every test generator ends here, so the findings a live run shows are by construction the ones
`gpu-doctor check --facts` gives for a snapshot holding the same ``active`` section.
"""

from __future__ import annotations

from typing import Any

from doctor.active.events import Outcome
from doctor.model.facts import Facts
from doctor.model.facts_active import ActiveFacts
from doctor.model.findings import Finding
from doctor.model.severity import SEVERITY_RANK


def judged(active: ActiveFacts, matrix: Any = None) -> list[Finding]:
    """The findings of the active-test checks (doctor/checks/active.py) on facts holding only ``active``."""
    from doctor.checks.active import CHECKS
    from doctor.pipeline import diagnose
    from doctor.registry import Context

    if matrix is None:
        from doctor.matrix import current

        matrix = current()
    return diagnose(Facts(active=active), checks=list(CHECKS), ctx=Context(matrix=matrix)).findings


def status_of(findings: list[Finding]) -> str:
    worst = max((SEVERITY_RANK[f.severity] for f in findings), default=0)
    return "fail" if worst == 3 else "warn" if worst == 2 else "ok"


def outcome(active: ActiveFacts, results: dict[str, Any], summary: str | None = None, matrix: Any = None,
            what: str | None = None) -> Outcome:
    """The Outcome of a test: status, one line (``summary``, else the first problem's title, else the first
    finding's, prefixed with ``what``), the findings the checks give, the raw results and the facts."""
    findings = judged(active, matrix)
    if summary is None:
        bad = [f for f in findings if f.severity in ("fail", "warn")]
        if what is not None:
            summary = f"{what}: " + (bad[0].title + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else "")
                                     if bad else "passed")
        else:
            summary = (bad or findings)[0].title if findings else "nothing to report"
    return Outcome(status_of(findings), summary, findings, results, active)
