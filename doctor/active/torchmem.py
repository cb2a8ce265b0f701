"""torch in the target environment: `oom --framework torch`, `oom --batch-probe MODULE:FACTORY` and
`smoke --nccl`. Each runs :mod:`doctor.active.torch_child` (by path, with the target interpreter) under the
watchdog and records what it reported (facts ``active.torch``); :mod:`doctor.checks.active.torchmem` judges it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from importlib import resources
from typing import Any

from doctor.active.events import Event, Progress, child_fraction
from doctor.model.facts_active import DEFAULT_CHILD_TIMEOUT

DEFAULT_TIMEOUT = DEFAULT_CHILD_TIMEOUT
DEFAULT_BATCH_CAP = 4096


def child_script() -> str:
    return str(resources.files("doctor.active").joinpath("torch_child.py"))


def argv_for(python: str, mode: str, spec: str | None = None, cap: int = DEFAULT_BATCH_CAP,
             max_mib: int = 256, timeout: float = DEFAULT_TIMEOUT) -> list[str]:
    argv = [python, child_script(), mode]
    if mode == "batch":
        argv += [spec or "", str(cap)]
    elif mode == "allreduce":
        argv += [str(max_mib), str(max(5.0, timeout - 10))]
    return argv


def torch_events(pythons: Sequence[str], mode: str, spec: str | None = None, cap: int = DEFAULT_BATCH_CAP,
                 timeout: float = DEFAULT_TIMEOUT, max_mib: int = 256) -> Iterator[Event]:
    """mode: "oom", "batch" (with spec "MODULE:FACTORY" and cap) or "allreduce"."""
    import os

    from doctor.active.runner import child_events

    runs = []
    for i, python in enumerate(pythons):
        yield Progress(i / len(pythons), f"torch ({mode}) in {python}")
        run: dict[str, Any] = {"python": python, "mode": mode}
        for ev in child_events(argv_for(python, mode, spec, cap, max_mib, timeout), dict(os.environ), timeout):
            kind = ev.get("event")
            if kind == "step":
                run["last_step"] = ev.get("step")
                yield Progress((i + child_fraction(ev)) / len(pythons), f"torch: {ev.get('step')}")
            elif kind == "framework":
                run.update({k: v for k, v in ev.items() if k != "event"})
            elif kind in ("exit", "hang"):
                run["end"] = ev
        runs.append(run)
    from doctor.active.record import outcome
    from doctor.model.facts_active import ActiveFacts, TorchRun, coerce

    what = {"oom": "torch OOM probe", "batch": "batch-size probe", "allreduce": "NCCL all-reduce"}[mode]
    records = [r for r in (coerce(TorchRun, run) for run in runs) if r is not None]
    yield outcome(ActiveFacts(torch=records), {"torch": runs}, what=what)
