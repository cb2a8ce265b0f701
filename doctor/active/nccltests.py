"""`gpu-doctor smoke --level 3`: hand over to nccl-tests' `all_reduce_perf` when it is on PATH and ≥ 2 GPUs
were tested.

`all_reduce_perf -b 8 -e 1G -f 2 -g <n>` (8 B to 1 GiB, doubling, one process driving the n GPUs) under a
timeout. Its table is read: size, count, type, redop, root, then time / algbw / busbw / #wrong out-of-place and
in-place (older builds print no root column and an `error` column instead of `#wrong`), and the
`# Out of bounds values` and `# Avg bus bandwidth` lines, and recorded (facts ``active.nccl_tests``), with the
multi-GPU links the smoke test read as the context :mod:`doctor.checks.active.nccltests` judges them against.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from doctor.active.events import Event, Outcome, Progress

if TYPE_CHECKING:
    from doctor.host import Host

DEFAULT_TIMEOUT = 600.0


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # "N/A"


def _place(t: list[str], new_format: bool) -> dict[str, Any]:
    """time, algbw, busbw and #wrong (new format: a count) or error (old format: a float)."""
    wrong = _num(t[3])
    return {"time_us": _num(t[0]), "algbw": _num(t[1]), "busbw": _num(t[2]),
            "wrong": int(wrong) if wrong is not None and new_format else wrong}


def parse_all_reduce(text: str) -> dict[str, Any]:
    """Pure: the rows of the table, the out-of-bounds count and the average bus bandwidth."""
    rows = []
    for line in text.splitlines():
        tok = line.split()
        if len(tok) not in (12, 13) or not tok[0].isdigit() or not tok[1].isdigit():
            continue
        root = int(tok[4]) if len(tok) == 13 else None
        rest = tok[5:] if len(tok) == 13 else tok[4:]
        new = len(tok) == 13
        rows.append({"size": int(tok[0]), "count": int(tok[1]), "type": tok[2], "redop": tok[3], "root": root,
                     "out_of_place": _place(rest[:4], new), "in_place": _place(rest[4:], new)})
    oob = re.search(r"^#?\s*Out of bounds values\s*:\s*(\d+)\s*(\w+)", text, re.M)
    avg = re.search(r"^#?\s*Avg bus bandwidth\s*:\s*([\d.eE+-]+)", text, re.M)
    ngpus = re.search(r"nGpus\s+(\d+)", text)
    return {"rows": rows, "out_of_bounds": int(oob[1]) if oob else None, "avg_busbw": float(avg[1]) if avg else None,
            "ranks": len(re.findall(r"^#\s+Rank\s+\d+", text, re.M)), "ngpus": int(ngpus[1]) if ngpus else None,
            "old_format": bool(rows) and rows[0]["root"] is None}


def nccl_events(host: Host, ngpus: int, mg: dict[str, Any] | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> Iterator[Event]:
    exe = "all_reduce_perf"
    if host.which(exe) is None:
        yield _outcome({"skipped": "all_reduce_perf (nccl-tests) is not on PATH"})
        return
    if ngpus < 2:
        yield _outcome({"skipped": f"needs ≥2 GPUs, {ngpus} tested"})
        return
    argv = [exe, "-b", "8", "-e", "1G", "-f", "2", "-g", str(ngpus)]
    yield Progress(None, f"{' '.join(argv)} (up to {timeout:g} s)")
    result = host.run(argv, timeout=timeout)
    rec: dict[str, Any] = {"argv": argv, "returncode": result.returncode}
    if result.error:
        yield _outcome({**rec, "error": result.error}, mg)
        return
    text = result.stdout + "\n" + result.stderr
    parsed = parse_all_reduce(text)
    version = re.search(r"nccl-tests version (\S+)", text)
    nccl = re.search(r"NCCL version (\S+)", text)
    rec.update(version=version[1] if version else None, nccl_version=nccl[1] if nccl else None)
    if not parsed["rows"]:
        rec["output"] = (result.stdout + result.stderr).strip()[-500:]
    yield _outcome({**rec, **parsed}, mg)


def _outcome(rec: dict[str, Any], mg: dict[str, Any] | None = None) -> Outcome:
    """The record judged with the multi-GPU facts of the smoke test that ran before (``mg``)."""
    from doctor.active.record import outcome
    from doctor.model.facts_active import ActiveFacts, MultiGpu, NcclTests, coerce

    smoke = None
    if mg is not None:
        from doctor.model.facts_active import DriverTest

        smoke = DriverTest(mode="smoke", multi_gpu=coerce(MultiGpu, mg))
    summary = f"nccl-tests: skipped ({rec['skipped']})" if rec.get("skipped") else None
    active = ActiveFacts(smoke=smoke, nccl_tests=coerce(NcclTests, rec))
    # Only the nccl-tests part is new: the smoke test's facts were recorded (and judged) by the smoke test; they
    # are the links its bandwidth is measured against.
    return outcome(ActiveFacts(nccl_tests=active.nccl_tests), {"nccl_tests": rec}, summary,
                   context=ActiveFacts(smoke=smoke), checks=("active.nccl_tests",))
