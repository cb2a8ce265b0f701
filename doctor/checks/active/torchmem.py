"""torch in the target environment, judged: the recorded :class:`~doctor.model.facts_active.TorchRun` of
`oom --framework torch`, `oom --batch-probe MODULE:FACTORY` and `smoke --nccl` in, findings out. Pure.

An exception's text goes through :func:`doctor.checks.active.frameworks.classify` (a CPU-only build is
``framework.cpu_only_build``), NCCL's own failures through :data:`NCCL_SIGNATURES`.
"""

from __future__ import annotations

import re
from dataclasses import asdict

from doctor.checks.active.frameworks import FALLBACK, classify
from doctor.model.facts_active import DEFAULT_CHILD_TIMEOUT, ActiveEnd, AllReduce, FrameworkError, TorchRun, known
from doctor.model.findings import Evidence, Finding, Fix
from doctor.model.severity import Severity

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


def record_findings(runs: list[TorchRun]) -> list[Finding]:
    """The findings of recorded torch runs (facts ``active.torch``)."""
    return [f for run in runs for f in judge(run, float((run.end.silent_for if run.end is not None else None)
                                                          or DEFAULT_CHILD_TIMEOUT))]


def _f(mode: str, code: str, severity: Severity, title: str, detail: str = "", evidence: list[Evidence] | None = None,
       fix: str | None = None) -> Finding:
    return Finding(code=code, severity=severity, title=title, detail=detail,
                   evidence=evidence or [], fix=Fix(fix) if fix else None, area=AREA[mode], check=code)


def judge(run: TorchRun, timeout: float) -> list[Finding]:
    """The findings of one run of torch_child."""
    mode, python = run.mode, run.python
    who = f"torch {run.version}" if run.version else "torch"
    where = f"{who} in {python}"
    end = run.end or ActiveEnd()
    if end.event == "hang":
        return [_f(mode, "framework.hang", "fail", f"{where} did not finish within {timeout:g} s "
                   f"(at: {run.last_step})", "torch hung: a CUDA call, the model or a collective never "
                   "returned.", [Evidence("framework.step", run.last_step, "child progress")])]
    if run.installed is None:  # the child never said: it died (or could not start) before importing torch
        tail = (end.stderr or end.error or "").strip().splitlines()
        return [_f(mode, "framework.gpu_smoke_failed", "fail", f"torch in {python}: the test process died "
                   f"(exit {end.returncode}) at: {run.last_step or 'start'}",
                   "The interpreter could not run the test, or torch crashed the process.",
                   [Evidence("framework.stderr", "\n".join(tail[-5:]) or None, "child stderr")])]
    if not run.installed:
        return [_f(mode, "framework.not_installed", "warn", f"torch is not installed in {python}", "Nothing to test.")]
    if run.error is not None:
        return [error_finding(mode, where, run.error, end)]
    return {"oom": _oom, "batch": _batch, "allreduce": _allreduce}[mode](run, where)


def error_finding(mode: str, where: str, err: FrameworkError, end: ActiveEnd) -> Finding:
    text = err.text or ""
    ev = [Evidence("framework.error", text, f"torch: {err.step}")]
    first = (text.strip().splitlines()[-1:] or [""])[0][:200]
    for pattern, code, explanation in NCCL_SIGNATURES:
        if re.search(pattern, text):
            severity: Severity = "info" if code == "multigpu.nccl" else "fail"
            if code == "multigpu.nccl" and re.search(r"sees 0\b", text):
                severity = "warn"  # not one GPU: nothing GPU-related was tested, so no "ready" can follow
            return _f(mode, code, severity, f"{where}: {first}", f"{explanation}\nIt failed at: {err.step}.", ev)
    sig = classify(text, end.stderr)
    if sig is FALLBACK and mode == "batch" and (err.step or "").startswith(("importing", "batch")):
        return _f(mode, "oom.batch_probe_failed", "fail", f"{where}: {first}",
                  "The model factory or the model itself raised (not an out-of-memory error): fix it and probe again. "
                  "FACTORY() must return (model, make_batch), make_batch(n) the model's input for a batch of n.", ev)
    return _f(mode, sig.code, sig.severity, f"{where}: {first}", f"{sig.explanation}\nIt failed at: {err.step}.",
              ev, sig.fix)


def _gib(n: int | None) -> str:
    return f"{n / GIB:,.2f} GiB" if n is not None else "?"


def _oom(run: TorchRun, where: str) -> list[Finding]:
    out = []
    conf = run.alloc
    setting = conf.get("PYTORCH_CUDA_ALLOC_CONF") or conf.get("PYTORCH_ALLOC_CONF")
    backend = conf.get("backend")
    out.append(_f("oom", "oom.allocator", "info", f"{where}: allocator "
                  + (f"PYTORCH_CUDA_ALLOC_CONF={setting}" if setting else "defaults (PYTORCH_CUDA_ALLOC_CONF not set)")
                  + (f", backend {backend}" if backend else ""),
                  evidence=[Evidence("torch.alloc_conf", dict(conf),
                                     "environment, torch.cuda.get_allocator_backend()")]))
    unknown: list[int | None] = [None, None]
    free0, total = (run.mem_get_info_before or unknown)[:2]
    if run.oom is None:
        out.append(_f("oom", "oom.torch", "warn", f"{where}: the GPU never ran out of memory",
                      "The probe stopped before torch raised OutOfMemoryError (too many blocks)."))
        return out
    clean = run.oom_is_OutOfMemoryError
    out.append(_f("oom", "oom.torch", "ok" if clean else "warn",
                  f"{where}: " + ("torch.cuda.OutOfMemoryError raised cleanly" if clean else
                                  "out of memory raised as a plain RuntimeError (torch < 1.13)")
                  + f" with {_gib(run.allocated_at_oom)} allocated of {_gib(free0)} free / {_gib(total)}",
                  evidence=[Evidence("torch.oom", run.oom.text, "torch.empty"),
                            Evidence("torch.mem_get_info", {"mem_get_info_before": run.mem_get_info_before,
                                                            "mem_get_info_full": run.mem_get_info_full,
                                                            "mem_get_info_after": run.mem_get_info_after},
                                     "torch.cuda.mem_get_info")]))
    after = (run.mem_get_info_after or unknown)[0]
    kept = run.reserved_after_empty_cache
    if after is not None and free0 is not None and after >= free0 - 64 * MIB and not kept:
        out.append(_f("oom", "oom.released", "ok", f"{where}: empty_cache() gave every byte back "
                      f"(reserved {_gib(run.reserved_after_del)} after del → 0; free {_gib(after)})"))
    else:
        out.append(_f("oom", "oom.released", "warn", f"{where}: after empty_cache() {_gib(kept)} stay reserved and "
                      f"free memory is {_gib(after)} instead of {_gib(free0)}",
                      "Memory the caching allocator keeps after an OOM is memory a retry cannot use."))
    out.append(_f("oom", "oom.recovery", "ok" if run.recovered else "fail",
                  f"{where}: " + ("the GPU computes correctly after the OOM" if run.recovered else
                                  "a matrix product after the OOM gave a wrong result")))
    return out


def _batch(run: TorchRun, where: str) -> list[Finding]:
    n, cap = run.largest_batch, run.cap
    trials = run.trials
    table = "\n".join(f"batch {t.batch:>6}: {'fits' if t.fits else 'OOM':4}  peak {_gib(t.peak_allocated)}"
                      f"  reserved {_gib(t.reserved)}" for t in trials)
    ev = [Evidence("batch.trials", [asdict(t) for t in trials], "torch.cuda.max_memory_allocated per try")]
    if not n:
        return [_f("batch", "oom.batch_size", "fail", f"{where}: not even a batch of 1 fits on {run.gpu_name}",
                   table, ev, "Use a smaller model, mixed precision, gradient checkpointing or a larger GPU.")]
    note = " (the cap: raise --batch-cap to look further)" if n == cap else ""
    return [_f("batch", "oom.batch_size", "ok", f"{where}: the largest batch that fits is {n}{note}, "
               f"{len(trials)} tries (forward + backward)", table, ev)]


def _allreduce(run: TorchRun, where: str) -> list[Finding]:
    res = run.allreduce or AllReduce()
    sizes = res.sizes
    if not sizes:
        return [_f("allreduce", "multigpu.nccl_failed", "fail", f"{where}: the all-reduce reported nothing")]
    wrong = [s for s in sizes if not s.correct]
    best = max(sizes, key=lambda s: known(s.busbw, "bus bandwidth"))
    table = "\n".join(f"{known(s.bytes, 'size') >> 20:>6} MiB  {known(s.us, 'time'):>10.1f} us  algbw "
                      f"{known(s.algbw, 'algorithm bandwidth'):.1f}  busbw {known(s.busbw, 'bus bandwidth'):.1f} GB/s"
                      for s in sizes)
    out = [_f("allreduce", "multigpu.nccl", "ok" if not wrong else "fail",
              f"{where}: NCCL all-reduce across {res.world} GPUs, bus bandwidth {best.busbw:.1f} GB/s "
              f"at {known(best.bytes, 'size') >> 20} MiB"
              + (f"; WRONG results at {len(wrong)} size(s)" if wrong else ""),
              table, [Evidence("nccl.allreduce", [asdict(s) for s in sizes], "torch.distributed.all_reduce (nccl)")])]
    return out
