"""The smoke test and the OOM probe as event generators: spawn the child, follow it, judge what it found.

``smoke_events(options)`` and ``oom_events(options)`` yield :class:`~doctor.active.events.Progress` while
the child works and end with one :class:`~doctor.active.events.Outcome` holding the findings and the raw
results. The CLI renders them; the TUI can iterate the same generators in a worker thread.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from doctor.active.events import Event, Log, Progress

DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class Options:
    gpus: str | list[int] = "all"  # "all" or CUDA ordinals
    timeout: float = DEFAULT_TIMEOUT  # the watchdog: a step silent this long is a hang
    force: bool = False  # oom: run although other processes use the GPU
    size_mib: int = 256  # smoke: buffer size of the bandwidth tests
    fma_ms: float = 200.0  # smoke: how long the FP32 measurement runs
    env: Mapping[str, str] | None = None  # the child's environment (default: ours)
    python: str = field(default_factory=lambda: sys.executable or "python3")


def smoke_events(options: Options) -> Iterator[Event]:
    return _events("smoke", options)


def oom_events(options: Options) -> Iterator[Event]:
    return _events("oom", options)


def child_env(options: Options) -> dict[str, str]:
    env = dict(os.environ if options.env is None else options.env)
    # CUDA numbers GPUs fastest-first by default; PCI order makes --gpu N the GPU nvidia-smi calls N
    # (unless the user chose an order).
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    # The child imports doctor from wherever this process did (a pipx venv, a source checkout).
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
    return env


def _events(mode: Literal["smoke", "oom"], options: Options) -> Iterator[Event]:
    from doctor.active.runner import child_events

    opts = {"mode": mode, "gpus": options.gpus, "force": options.force, "size_mib": options.size_mib,
            "fma_ms": options.fma_ms}
    argv = [options.python, "-m", "doctor.active.gpu_child", json.dumps(opts)]
    results: dict[str, Any] = {"mode": mode, "global": {}, "errors": [], "gpus": [], "done": False,
                               "force": options.force}
    gpus: dict[int, dict[str, Any]] = {}

    def gpu(ordinal: int) -> dict[str, Any]:
        if ordinal not in gpus:
            gpus[ordinal] = {"ordinal": ordinal, "errors": []}
        return gpus[ordinal]

    for ev in child_events(argv, child_env(options), options.timeout):
        kind = ev.get("event")
        g = ev.get("gpu")
        if not (g is None or (isinstance(g, int) and not isinstance(g, bool) and 0 <= g < 1 << 16)):
            continue  # a GPU number is a small int: anything else is not an event of ours
        if kind == "step":
            results["last_step"] = {"gpu": g, "step": ev.get("step")}
            if g is not None:
                gpu(g)["last_step"] = ev.get("step")
            yield Progress(ev.get("fraction"), ev.get("step", ""), g)
        elif kind == "fact":
            raw = ev.get("data")
            data: dict[str, Any] = raw if isinstance(raw, dict) else {}
            (results["global"] if g is None else gpu(g)).update(data)
            try:
                line = _measurement_line(g, data)
            except (TypeError, ValueError):  # a value of the wrong type: no live line; the facts read it as unknown
                line = None
            if line:
                yield Log(line)
        elif kind == "error":
            raw = ev.get("error")
            err: dict[str, Any] = raw if isinstance(raw, dict) else {}
            (results["errors"] if g is None else gpu(g)["errors"]).append({"step": ev.get("step"), "error": err})
            yield Log(f"{'GPU ' + str(g) + ': ' if g is not None else ''}{err.get('call')}: {err.get('name')}")
        elif kind == "done":
            results["done"] = True
        elif kind in ("exit", "hang"):
            results["end"] = ev
    results["gpus"] = [gpus[k] for k in sorted(gpus)]
    from doctor import __version__
    from doctor.active.record import outcome
    from doctor.model.facts_active import ActiveFacts, driver_test

    test = driver_test(results, __version__)
    active = ActiveFacts(smoke=test) if mode == "smoke" else ActiveFacts(oom=test)
    yield outcome(active, results, what="smoke test" if mode == "smoke" else "OOM probe")


def _measurement_line(g: int | None, data: dict[str, Any]) -> str | None:
    """The numbers a person watching wants to see as they arrive."""
    who = f"GPU {g}: " if g is not None else ""
    for key, fmt in (("h2d_gbs", "host→device {:.1f} GB/s"), ("device_gbs", "device memory {:.0f} GB/s"),
                     ("fp32_tflops", "FP32 {:.2f} TFLOP/s")):
        if data.get(key) is not None:
            extra = f", device→host {data['d2h_gbs']:.1f} GB/s" if key == "h2d_gbs" and data.get("d2h_gbs") else ""
            return who + fmt.format(data[key]) + extra
    if data.get("largest_block") is not None:
        return f"{who}largest single allocation {data['largest_block'] >> 20:,} MiB ({_calls(data['largest_calls'])})"
    if data.get("total_allocatable") is not None:
        return f"{who}total allocatable {data['total_allocatable'] >> 20:,} MiB ({_calls(data['total_calls'])})"
    return None


def _calls(n: object) -> str:
    return "1 call" if n == 1 else f"{n} calls"


