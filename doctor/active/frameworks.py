"""`gpu-doctor smoke --framework`: each framework's GPU smoke test in the target Python environment.

One child process per (interpreter, framework) runs :mod:`doctor.active.framework_child` with a timeout, and
what it reported is recorded (facts ``active.frameworks``); :mod:`doctor.checks.active.frameworks` judges it
(what a framework raised, matched against the one error catalog, compat/errors.toml).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from importlib import resources
from typing import Any

from doctor.active.events import Event, Log, Progress, child_fraction
from doctor.model.facts_active import DEFAULT_CHILD_TIMEOUT

DEFAULT_TIMEOUT = DEFAULT_CHILD_TIMEOUT


def framework_events(pythons: Sequence[str], frameworks: Sequence[str], timeout: float = DEFAULT_TIMEOUT,
                     only_installed: bool = False) -> Iterator[Event]:
    from doctor.active.runner import child_events

    script = resources.files("doctor.active").joinpath("framework_child.py").read_text()
    runs: list[dict[str, Any]] = []
    total = len(pythons) * len(frameworks)
    done = 0
    for python in pythons:
        for name in frameworks:
            yield Progress(done / total, f"{name} in {python}")
            run: dict[str, Any] = {"framework": name, "python": python}
            for ev in child_events([python, "-c", script, name], _env(), timeout):
                kind = ev.get("event")
                if kind == "step":
                    run["last_step"] = ev.get("step")
                    yield Progress((done + child_fraction(ev)) / total, f"{name}: {ev.get('step')}")
                elif kind == "framework":
                    run.update({k: v for k, v in ev.items() if k != "event"})
                elif kind in ("exit", "hang"):
                    run["end"] = ev
            done += 1
            if run.get("installed") is False and only_installed:
                continue
            runs.append(run)
            if run.get("ok"):
                yield Log(f"{name}: GPU matrix product matches the CPU")
    from doctor.active.record import outcome
    from doctor.model.facts_active import ActiveFacts, FrameworkTest, coerce

    test = coerce(FrameworkTest, {"pythons": list(pythons), "requested": list(frameworks), "runs": runs})
    out = outcome(ActiveFacts(frameworks=test), {"frameworks": runs}, what="framework smoke test")
    yield out


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")  # TensorFlow says why it has no GPU only in its log
    return env
