"""Rules about the driver branch's place in NVIDIA's lifecycle: an end-of-life branch gets no fixes."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator

from doctor import beliefs
from doctor.checks.common import ev, finding, ok
from doctor.matrix import Matrix, Row, vtuple
from doctor.model.facts import Facts
from doctor.model.findings import Evidence, Finding
from doctor.registry import Context, NotApplicable, Skip, check, matrix_of

AREA = "Driver"
_DESIGNATION = {"LTSB": "Long Term Support Branch", "PB": "Production Branch", "NFB": "New Feature Branch"}


def _matrix(ctx: Context) -> Matrix:
    return matrix_of(ctx)


def _today(facts: Facts) -> _dt.date:
    """The day the facts were collected (a replayed snapshot is judged as of then), else today."""
    try:
        return _dt.date.fromisoformat((facts.collected_at or "")[:10])
    except ValueError:
        return _dt.date.today()


def _ended(row: Row, today: _dt.date) -> bool | None:
    if row.get("end_of_life") is True:
        return True
    eol = str(row.get("eol") or "")
    t = vtuple(eol.replace("-", "."))
    if len(t) < 2:
        return None
    # NVIDIA gives a month: the branch is supported through that month.
    return (today.year, today.month) > (t[0], t[1])


def _month(row: Row) -> str:
    t = vtuple(str(row.get("eol") or "").replace("-", "."))
    return _dt.date(t[0], t[1], 1).strftime("%B %Y") if len(t) >= 2 else "?"


def _branch(m: Matrix, facts: Facts) -> tuple[int | None, str]:
    drv = beliefs.driver_version(facts)
    if not drv:
        raise Skip("the driver version is unknown")
    if facts.host.wsl and not facts.driver.kernel_module:
        return m.windows_branch(drv), drv
    t = vtuple(drv)
    return (t[0] if t else None), drv


def _move_to(m: Matrix, facts: Facts, current_branch: int, today: _dt.date) -> list[Row]:
    """Supported LTSB/PB branches newer than the current one that every visible GPU's architecture still gets."""
    last = []
    for g in facts.gpus:
        _row, arch = m.gpu_for_facts(g.name, g.compute_capability)
        if arch and arch.get("last_driver_branch"):
            last.append(int(str(arch["last_driver_branch"])))
    cap = min(last) if last else None
    rows = [r for r in m.rows("cuda", "driver_branch")
            if r.get("designation") in ("LTSB", "PB") and _ended(r, today) is False
            and int(str(r["branch"])) > current_branch and (cap is None or int(str(r["branch"])) <= cap)]
    # Long-term support first, then the nearest branch.
    return sorted(rows, key=lambda r: (r.get("designation") != "LTSB", int(str(r["branch"]))))


@check("driver.branch_eol", AREA, "The driver branch is still supported (not past the end of life in NVIDIA's "
       "data-center driver lifecycle); an end-of-life branch is a warning naming the supported branch to move to.")
def branch_eol(facts: Facts, ctx: Context) -> Iterator[Finding]:
    m = _matrix(ctx)
    b, drv = _branch(m, facts)
    if b is None:
        raise Skip(f"the branch of driver {drv} is unknown (a WSL Windows driver outside NVIDIA's known pairs)")
    row = m.branch_lifecycle(b)
    if row is None:
        raise NotApplicable(f"R{b} is not in NVIDIA's data-center lifecycle table")
    today = _today(facts)
    ended = _ended(row, today)
    evidence = [ev(facts, "driver.kernel_module" if facts.driver.kernel_module else "driver.userspace"),
                Evidence("compat/cuda.toml:driver_branch", {k: row.get(k) for k in ("branch", "designation", "eol",
                                                                                     "end_of_life")},
                         row.get("source"))]
    kind = _DESIGNATION.get(str(row.get("designation")), "branch")
    if ended is None:
        raise Skip(f"NVIDIA gives no end-of-life date for R{b}")
    if not row.get("eol"):
        # Listed only as "previous branches ... are end of life", with no date: not judged here (a follow-up once
        # the test fleet's healthy host moves off R550).
        raise NotApplicable(f"NVIDIA lists R{b} among ended branches without a date; only dated ends are judged")
    if not ended:
        yield ok("driver.branch_eol", f"Driver branch R{b} ({kind}) is supported until {_month(row)}", *evidence)
        return
    targets = _move_to(m, facts, b, today)
    when = f"in {_month(row)}" if row.get("eol") else "(NVIDIA lists it as past its end of life)"
    if targets:
        names = " or ".join(f"R{t['branch']} ({_DESIGNATION.get(str(t.get('designation')), '')}, until "
                            f"{_month(t)})" for t in targets[:2])
        fix = f"Move to a supported branch: {names}."
    else:
        fix = ("No supported branch newer than this one drives every GPU here (see `gpu-doctor matrix gpu NAME`); "
               "keep the driver isolated and plan the hardware's replacement.")
    yield finding(
        "driver.branch_eol", "warn",
        f"Driver branch R{b} reached end of life {when}: it gets no more security or bug fixes",
        f"NVIDIA's data-center driver lifecycle lists R{b} ({kind}) as end of life {when}. The driver still works, "
        "but security bulletins after that date are not fixed for it.",
        evidence, fix=fix)


CHECKS = [branch_eol]
