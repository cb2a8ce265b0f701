from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from factories import make_facts

from doctor.engine import Report, diagnose
from doctor.facts import Facts

DATA = Path(__file__).parent / "data"


def findings_for(facts: Facts, code: str) -> list:
    """The findings a single check produces for these facts."""
    from doctor.checks import REGISTRY

    report = diagnose(facts, checks=[c for c in REGISTRY if c.id == code or code in c.codes])
    return [f for f in report.findings if f.code == code or f.check == code]


def run_check(facts: Facts, check_id: str) -> Report:
    from doctor.checks import by_id

    chk = by_id(check_id)
    assert chk is not None, check_id
    return diagnose(facts, checks=[chk])


@pytest.fixture
def healthy() -> Facts:
    return make_facts()
