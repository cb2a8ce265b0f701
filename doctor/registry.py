"""The check interface and the machinery that runs checks over facts.

A check is a pure function ``(facts, ctx) -> Iterable[Finding]``. It raises :class:`Skip` when
the facts it needs are missing (the report says why) and :class:`NotApplicable` when the rule
does not concern this machine (no WSL, no container). A check that raises anything else becomes
a ``doctor.check_crashed`` finding instead of a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import field, replace
from typing import Any

from doctor.matrix import Matrix
from doctor.model.facts import Facts
from doctor.model.findings import Evidence, Finding
from doctor.model.records import dataclass
from doctor.model.severity import worst


class Skip(Exception):
    """The facts this check needs are unknown; the message says which and why."""


class NotApplicable(Exception):
    """The rule does not concern this machine."""


@dataclass(frozen=True)
class Context:
    """What checks may consult beside the facts: the compatibility matrix the caller passed in (checks never
    fetch one themselves) and the run's options (``static``)."""

    matrix: Matrix | None = None
    options: dict[str, Any] = field(default_factory=dict)


def matrix_of(ctx: Context) -> Matrix:
    """The matrix this run was given; a check that needs one and has none skips, saying so."""
    if not isinstance(ctx.matrix, Matrix):
        raise Skip("no compatibility matrix was given to the checks")
    return ctx.matrix


CheckFunc = Callable[[Facts, Context], Iterable[Finding]]


@dataclass(frozen=True)
class Check:
    """One registered check: its id, area, summary, function and the finding codes it gives."""
    id: str
    area: str
    summary: str
    func: CheckFunc
    codes: tuple[str, ...] = ()
    static: bool = False  # judges an image's own consistency: runs in `check --static` (no GPU, no driver)
    # More codes read from a catalog (the error tables of compat/errors.toml), asked only by what lists codes
    # (--list-checks, docs), so that registering the check costs nothing at import time.
    more_codes: Callable[[], tuple[str, ...]] | None = field(default=None, compare=False, repr=False)

    @property
    def all_codes(self) -> tuple[str, ...]:
        """Every finding code this check can produce."""
        if self.more_codes is None:
            return self.codes
        return tuple(dict.fromkeys((*self.codes, *self.more_codes())))

    def run(self, facts: Facts, ctx: Context) -> tuple[str, str | None, list[Finding]]:
        """Run the check; returns (status, reason, findings). Never raises."""
        try:
            found = list(self.func(facts, ctx))
        except Skip as exc:
            return "skipped", str(exc), []
        except NotApplicable as exc:
            return "not_applicable", str(exc), []
        except Exception as exc:
            crash = Finding(
                code="doctor.check_crashed",
                severity="warn",
                title=f"The check {self.id} crashed: {type(exc).__name__}: {exc}",
                detail="This is a bug in gpu-doctor; the other checks are unaffected. "
                "Please report it with the output of `gpu-doctor snapshot`.",
                evidence=[Evidence("check", self.id)],
            )
            return "crashed", str(exc), [replace(crash, area=self.area, check=self.id)]
        found = [replace(f, area=f.area or self.area, check=self.id) for f in found]
        return worst(f.severity for f in found), None, found


def check(id: str, area: str, summary: str, codes: tuple[str, ...] = (), static: bool = False
          ) -> Callable[[CheckFunc], Check]:
    """Declare a check. The registry (doctor/checks/__init__.py) lists them in report order."""

    def wrap(func: CheckFunc) -> Check:
        return Check(id=id, area=area, summary=summary, func=func, codes=codes or (id,), static=static)

    return wrap
