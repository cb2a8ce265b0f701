"""The one severity scale: each level's rank (for "the worst of") and its mark (for people), in one table.

A finding's severity is stored as its name (``"fail"``, ``"warn"``, ``"info"``, ``"ok"``), as the JSON contracts
have it; :data:`LEVELS` gives each name its rank and its mark. A report's status adds ``"unknown"`` (too little
evidence), which has a mark but no rank.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from doctor.model.records import dataclass

Severity = Literal["fail", "warn", "info", "ok"]


@dataclass(frozen=True)
class Level:
    """One severity: its name, its rank and the mark shown before it."""
    name: str
    rank: int  # fail 3 > warn 2 > info 1 > ok 0
    mark: str  # what text, markdown and the TUI print before it


LEVELS: dict[str, Level] = {
    "fail": Level("fail", 3, "✗"),
    "warn": Level("warn", 2, "!"),
    "info": Level("info", 1, "·"),
    "ok": Level("ok", 0, "✓"),
}
# A report's status beyond the severities: nothing failed, but too little evidence to call the machine ready.
UNKNOWN_MARK = "?"

SEVERITY_RANK: dict[str, int] = {name: level.rank for name, level in LEVELS.items()}
MARKS: dict[str, str] = {name: level.mark for name, level in LEVELS.items()}
STATUS_MARKS: dict[str, str] = {**MARKS, "unknown": UNKNOWN_MARK}


_NAMES: dict[str, Severity] = {"fail": "fail", "warn": "warn", "info": "info", "ok": "ok"}


def severity_of(value: object, default: Severity) -> Severity:
    """``value`` when it names a severity (a catalog row's), else ``default``: an unknown word never reaches a
    finding, where ranking it would fail."""
    return _NAMES.get(value, default) if isinstance(value, str) else default


def rank(severity: str) -> int:
    return LEVELS[severity].rank


def worst(severities: Iterable[str]) -> str:
    """The worst of these severities; ``"ok"`` when there are none."""
    return max(severities, key=rank, default="ok")


def status(severities: Iterable[str]) -> str:
    """fail | warn | ok: the status of a test whose findings have these severities (info counts as ok)."""
    w = worst(severities)
    return "ok" if w == "info" else w
