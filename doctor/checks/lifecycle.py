"""Rules about the driver branch's place in NVIDIA's lifecycle: an end-of-life branch gets no fixes."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator

from doctor import beliefs
from doctor.checks.common import ev, finding, ok
from doctor.matrix import Matrix, Row, vtuple
from doctor.model.facts import Facts
from doctor.model.findings import Evidence, Finding
from doctor.model.intents import InstallDriverBranch
from doctor.platforms import tegra_board
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
    # Long-term support first, then the nearest branch (the planner's own order: Matrix.supported_branches).
    return [r for r in m.supported_branches(today, current_branch + 1, cap) if r.get("designation") in ("LTSB", "PB")]


@check("driver.branch_eol", AREA, "The driver branch is still supported (not past the end of life in NVIDIA's "
       "data-center driver lifecycle); an end-of-life branch is a warning naming the supported branch to move to.")
def branch_eol(facts: Facts, ctx: Context) -> Iterator[Finding]:
    m = _matrix(ctx)
    b, drv = _branch(m, facts)
    if b is None:
        raise Skip(f"the branch of driver {drv} is unknown (a WSL Windows driver outside NVIDIA's known pairs)")
    if tegra_board(facts, m):
        raise NotApplicable("a Jetson's driver comes with JetPack (L4T), outside NVIDIA's data-center lifecycle")
    row = m.branch_lifecycle(b)
    today = _today(facts)
    ended = m.branch_ended(b, today)
    if row is None and ended is None:
        raise NotApplicable(f"R{b} is newer than NVIDIA's data-center lifecycle table")
    listed = row or {"branch": str(b), "end_of_life": True, "source": _unlisted_source(m)}
    evidence = [ev(facts, "driver.kernel_module" if facts.driver.kernel_module else "driver.userspace"),
                Evidence("compat/cuda.toml:driver_branch", {k: listed.get(k) for k in ("branch", "designation", "eol",
                                                                                        "end_of_life")},
                         listed.get("source"))]
    kind = _DESIGNATION.get(str(listed.get("designation")), "branch")
    if ended is None:
        raise Skip(f"NVIDIA gives no end-of-life date for R{b}")
    if not ended:
        yield ok("driver.branch_eol", f"Driver branch R{b} ({kind}) is supported until {_month(listed)}", *evidence)
        return
    targets = _move_to(m, facts, b, today)
    when = (f"in {_month(listed)}" if listed.get("eol") else "(NVIDIA lists it as past its end of life)" if row
            else "(NVIDIA's lifecycle table no longer lists it: every branch it does not list is past its end of life)")
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
        f"NVIDIA's data-center driver lifecycle: R{b} ({kind}) reached end of life {when}. The driver still works, "
        "but security bulletins after that date are not fixed for it.",
        evidence, fix=fix,
        # Met by any driver step the plan makes anyway (the planner installs supported branches only); on its own
        # it stays a person's decision.
        intents=[InstallDriverBranch(who=f"R{b} is past its end of life", supported=True,
                                     recommended=f"{targets[0]['branch']}" if targets else None)])


def _unlisted_source(m: Matrix) -> str | None:
    """The lifecycle page whose "all other previous driver branches not listed ... are end of life" applies."""
    return next((r.get("source") for r in m.rows("cuda", "driver_branch") if r.get("end_of_life") is True), None)


CHECKS = [branch_eol]
