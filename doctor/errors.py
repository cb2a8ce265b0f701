"""The error signatures of the one error catalog (compat/errors.toml): what a pasted GPU error is, its causes.

`explain` weighs the causes against a machine's facts; the framework smoke test classifies a framework's error
text with the same rows. Reading the catalog imports nothing that judges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from doctor.matrix import bundled

MAX_TEXT = 1_000_000  # a pasted log longer than this keeps its head and tail: the error lines are there


@dataclass(frozen=True)
class Cause:
    code: str
    text: str


@dataclass(frozen=True)
class Signature:
    id: str
    pattern: re.Pattern[str]
    title: str
    causes: tuple[Cause, ...]
    fix: str
    source: str
    examples: tuple[str, ...] = ()


def bounded(text: str) -> str:
    """At most MAX_TEXT characters: the head and the tail of a longer text (a traceback ends a log)."""
    if len(text) <= MAX_TEXT:
        return text
    half = MAX_TEXT // 2
    return text[:half] + "\n" + text[-half:]


def signatures(rows: list[dict[str, Any]] | None = None) -> list[Signature]:
    """The reviewed signatures, in file order; a row that does not compile is left out (the tests forbid it)."""
    if rows is None:
        return list(_bundled())
    return [s for s in (_signature(r) for r in rows) if s is not None]


@cache
def _bundled() -> tuple[Signature, ...]:
    return tuple(signatures(bundled().rows("errors", "signature")))


def _signature(row: dict[str, Any]) -> Signature | None:
    try:
        pattern = re.compile(str(row["pattern"]))
        causes = tuple(Cause(str(c["code"]), str(c["text"])) for c in row.get("causes", []))
        return Signature(id=str(row["id"]), pattern=pattern, title=str(row["title"]), causes=causes,
                         fix=str(row.get("fix", "")), source=str(row.get("source", "")),
                         examples=tuple(str(e) for e in row.get("examples", [])))
    except (KeyError, TypeError, re.error):
        return None


def match(text: str, sigs: list[Signature] | None = None) -> list[tuple[Signature, str]]:
    """Every signature found in the text with the line it matched, in the order the text shows them."""
    text = bounded(text)
    found = []
    for order, sig in enumerate(sigs if sigs is not None else signatures()):
        m = sig.pattern.search(text)
        if m:
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.end())
            line = text[start:end if end >= 0 else len(text)].strip()
            found.append((m.start(), order, sig, line[:400]))
    found.sort(key=lambda x: (x[0], x[1]))
    return [(sig, line) for _pos, _order, sig, line in found]
