"""torch in the target environment: `oom --framework torch`, `oom --batch-probe MODULE:FACTORY` and
`smoke --nccl`. Each runs :mod:`doctor.active.torch_child` (by path, with the target interpreter) under the
watchdog, and :func:`judge` turns what it reported into findings. Pure judging, like the other tests: an
exception's text goes through :func:`doctor.active.frameworks.classify` (a CPU-only build is
``framework.cpu_only_build``), NCCL's own failures through :data:`NCCL_SIGNATURES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from importlib import resources
from typing import Any

from doctor.active.events import Event, Progress
from doctor.active.frameworks import FALLBACK, classify
from doctor.model.findings import Evidence, Finding, Fix

DEFAULT_TIMEOUT = 120.0
DEFAULT_BATCH_CAP = 4096
GIB = 1 << 30
MIB = 1 << 20
AREA = {"oom": "OOM probe (torch)", "batch": "Batch-size probe", "allreduce": "Multi-GPU (NCCL)"}

# NCCL's failures, as its error strings and WARN lines read (nccl/src/misc/utils.cc ncclGetErrorString,
# torch's ProcessGroupNCCL). The first match wins.
NCCL_SIGNATURES: tuple[tuple[str, str, str], ...] = (
    (r"needs ≥2 CUDA GPUs", "multigpu.nccl", "An all-reduce needs at least two GPUs that CUDA can see."),
    (r"did not finish within", "multigpu.nccl_hang",
     "The collective never completed: a peer path that does not deliver (peer access broken, IOMMU/ACS on a PCIe "
     "switch), or a GPU that hung. NCCL_P2P_DISABLE=1 tells the two apart."),
    (r"Error while creating shared memory segment|No space left on device.*(shm|/dev/shm)",
     "multigpu.nccl_failed",
     "NCCL could not create its shared-memory segment: /dev/shm is too small (Docker's default is 64 MB). Start "
     "the container with --shm-size=1g or --ipc=host."),
    (r"Duplicate GPU detected", "multigpu.nccl_failed",
     "Two ranks were given the same GPU (CUDA_VISIBLE_DEVICES or the device selection)."),
    (r"unhandled cuda error|ncclUnhandledCudaError", "multigpu.nccl_failed",
     "A CUDA call inside NCCL failed; NCCL_DEBUG=INFO shows which."),
    (r"unhandled system error|ncclSystemError|remote process exited or there was a network error",
     "multigpu.nccl_failed",
     "A system call inside NCCL failed (shared memory, sockets, or a peer process that died); NCCL_DEBUG=INFO "
     "shows which."),
    (r"internal error|ncclInternalError|invalid usage|ncclInvalidUsage", "multigpu.nccl_failed",
     "NCCL reported an internal error or invalid usage; NCCL_DEBUG=INFO shows the cause."),
    (r"has no NCCL", "multigpu.nccl_failed", "This torch build has no NCCL (a CPU or ROCm build, or Windows)."),
)


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
                yield Progress(i / len(pythons), f"torch: {ev.get('step')}")
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


def record_findings(runs: list[dict[str, Any]]) -> list[Finding]:
    """Pure: the findings of recorded torch runs (facts ``active.torch``, as plain dicts)."""
    return [f for run in runs for f in judge(run, float((run.get("end") or {}).get("silent_for") or DEFAULT_TIMEOUT))]


def _f(mode: str, code: str, severity: str, title: str, detail: str = "", evidence: list[Evidence] | None = None,
       fix: str | None = None) -> Finding:
    return Finding(code=code, severity=severity, title=title, detail=detail,  # type: ignore[arg-type]
                   evidence=evidence or [], fix=Fix(fix) if fix else None, area=AREA[mode], check=code)


def judge(run: dict[str, Any], timeout: float) -> list[Finding]:
    """The findings of one run of torch_child. Pure."""
    mode, python = run["mode"], run["python"]
    who = f"torch {run['version']}" if run.get("version") else "torch"
    where = f"{who} in {python}"
    end = run.get("end") or {}
    if end.get("event") == "hang":
        return [_f(mode, "framework.hang", "fail", f"{where} did not finish within {timeout:g} s "
                   f"(at: {run.get('last_step')})", "torch hung: a CUDA call, the model or a collective never "
                   "returned.", [Evidence("framework.step", run.get("last_step"), "child progress")])]
    if "installed" not in run:
        tail = (end.get("stderr") or end.get("error") or "").strip().splitlines()
        return [_f(mode, "framework.gpu_smoke_failed", "fail", f"torch in {python}: the test process died "
                   f"(exit {end.get('returncode')}) at: {run.get('last_step') or 'start'}",
                   "The interpreter could not run the test, or torch crashed the process.",
                   [Evidence("framework.stderr", "\n".join(tail[-5:]) or None, "child stderr")])]
    if not run["installed"]:
        return [_f(mode, "framework.not_installed", "warn", f"torch is not installed in {python}", "Nothing to test.")]
    err = run.get("error")
    if err:
        return [error_finding(mode, where, err, end)]
    return {"oom": _oom, "batch": _batch, "allreduce": _allreduce}[mode](run, where)


def error_finding(mode: str, where: str, err: dict[str, Any], end: dict[str, Any]) -> Finding:
    text = err.get("text") or ""
    ev = [Evidence("framework.error", text, f"torch: {err.get('step')}")]
    first = (text.strip().splitlines()[-1:] or [""])[0][:200]
    for pattern, code, explanation in NCCL_SIGNATURES:
        if re.search(pattern, text):
            severity = "info" if code == "multigpu.nccl" else "fail"
            if code == "multigpu.nccl" and re.search(r"sees 0\b", text):
                severity = "warn"  # not one GPU: nothing GPU-related was tested, so no "ready" can follow
            return _f(mode, code, severity, f"{where}: {first}", f"{explanation}\nIt failed at: {err.get('step')}.",
                      ev)
    sig = classify(text, end.get("stderr"))
    if sig is FALLBACK and mode == "batch" and err.get("step", "").startswith(("importing", "batch")):
        return _f(mode, "oom.batch_probe_failed", "fail", f"{where}: {first}",
                  "The model factory or the model itself raised (not an out-of-memory error): fix it and probe again. "
                  "FACTORY() must return (model, make_batch), make_batch(n) the model's input for a batch of n.", ev)
    return _f(mode, sig.code, sig.severity, f"{where}: {first}", f"{sig.explanation}\nIt failed at: {err.get('step')}.",
              ev, sig.fix)


def _gib(n: int | None) -> str:
    return f"{n / GIB:,.2f} GiB" if n is not None else "?"


def _oom(run: dict[str, Any], where: str) -> list[Finding]:
    out = []
    conf = run.get("alloc") or {}
    setting = conf.get("PYTORCH_CUDA_ALLOC_CONF") or conf.get("PYTORCH_ALLOC_CONF")
    out.append(_f("oom", "oom.allocator", "info", f"{where}: allocator "
                  + (f"PYTORCH_CUDA_ALLOC_CONF={setting}" if setting else "defaults (PYTORCH_CUDA_ALLOC_CONF not set)")
                  + (f", backend {conf['backend']}" if conf.get("backend") else ""),
                  evidence=[Evidence("torch.alloc_conf", conf, "environment, torch.cuda.get_allocator_backend()")]))
    free0, total = (run.get("mem_get_info_before") or [None, None])[:2]
    if not run.get("oom"):
        out.append(_f("oom", "oom.torch", "warn", f"{where}: the GPU never ran out of memory",
                      "The probe stopped before torch raised OutOfMemoryError (too many blocks)."))
        return out
    clean = run.get("oom_is_OutOfMemoryError")
    out.append(_f("oom", "oom.torch", "ok" if clean else "warn",
                  f"{where}: " + ("torch.cuda.OutOfMemoryError raised cleanly" if clean else
                                  "out of memory raised as a plain RuntimeError (torch < 1.13)")
                  + f" with {_gib(run.get('allocated_at_oom'))} allocated of {_gib(free0)} free / {_gib(total)}",
                  evidence=[Evidence("torch.oom", run["oom"].get("text"), "torch.empty"),
                            Evidence("torch.mem_get_info", {k: run.get(k) for k in (
                                "mem_get_info_before", "mem_get_info_full", "mem_get_info_after")},
                                "torch.cuda.mem_get_info")]))
    after = (run.get("mem_get_info_after") or [None])[0]
    kept = run.get("reserved_after_empty_cache")
    if after is not None and free0 is not None and after >= free0 - 64 * MIB and not kept:
        out.append(_f("oom", "oom.released", "ok", f"{where}: empty_cache() gave every byte back "
                      f"(reserved {_gib(run.get('reserved_after_del'))} after del → 0; free {_gib(after)})"))
    else:
        out.append(_f("oom", "oom.released", "warn", f"{where}: after empty_cache() {_gib(kept)} stay reserved and "
                      f"free memory is {_gib(after)} instead of {_gib(free0)}",
                      "Memory the caching allocator keeps after an OOM is memory a retry cannot use."))
    out.append(_f("oom", "oom.recovery", "ok" if run.get("recovered") else "fail",
                  f"{where}: " + ("the GPU computes correctly after the OOM" if run.get("recovered") else
                                  "a matrix product after the OOM gave a wrong result")))
    return out


def _batch(run: dict[str, Any], where: str) -> list[Finding]:
    n, cap = run.get("largest_batch"), run.get("cap")
    trials = run.get("trials") or []
    table = "\n".join(f"batch {t['batch']:>6}: {'fits' if t['fits'] else 'OOM':4}  peak {_gib(t['peak_allocated'])}"
                      f"  reserved {_gib(t['reserved'])}" for t in trials)
    ev = [Evidence("batch.trials", trials, "torch.cuda.max_memory_allocated per try")]
    if not n:
        return [_f("batch", "oom.batch_size", "fail", f"{where}: not even a batch of 1 fits on {run.get('gpu_name')}",
                   table, ev, "Use a smaller model, mixed precision, gradient checkpointing or a larger GPU.")]
    note = " (the cap: raise --batch-cap to look further)" if n == cap else ""
    return [_f("batch", "oom.batch_size", "ok", f"{where}: the largest batch that fits is {n}{note}, "
               f"{len(trials)} tries (forward + backward)", table, ev)]


def _allreduce(run: dict[str, Any], where: str) -> list[Finding]:
    res = run.get("allreduce") or {}
    sizes = res.get("sizes") or []
    if not sizes:
        return [_f("allreduce", "multigpu.nccl_failed", "fail", f"{where}: the all-reduce reported nothing")]
    wrong = [s for s in sizes if not s.get("correct")]
    best = max(sizes, key=lambda s: s["busbw"])
    table = "\n".join(f"{s['bytes'] >> 20:>6} MiB  {s['us']:>10.1f} us  algbw {s['algbw']:.1f}  busbw "
                      f"{s['busbw']:.1f} GB/s" for s in sizes)
    out = [_f("allreduce", "multigpu.nccl", "ok" if not wrong else "fail",
              f"{where}: NCCL all-reduce across {res.get('world')} GPUs, bus bandwidth {best['busbw']:.1f} GB/s "
              f"at {best['bytes'] >> 20} MiB" + (f"; WRONG results at {len(wrong)} size(s)" if wrong else ""),
              table, [Evidence("nccl.allreduce", sizes, "torch.distributed.all_reduce (nccl)")])]
    return out
