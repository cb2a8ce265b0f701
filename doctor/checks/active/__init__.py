"""Active tests: what `smoke`, `oom` and the tools they hand over to measured (facts ``active``), judged.

The runners (doctor/active/) only record what a test measured, as the typed facts of
:mod:`doctor.model.facts_active`; the rules live here, one module per test — :mod:`.gpu` (the smoke test and
the OOM probe, with the CUDA error catalog :mod:`.cuerrors`), :mod:`.multigpu`, :mod:`.frameworks` (with the
framework error catalog), :mod:`.torchmem`, :mod:`.gpuburn`, :mod:`.dcgm`, :mod:`.nccltests` — and each check
below hands one of them its recorded test, with the matrix's GPU specs. A judge is imported only when its test
was recorded, so `check` on a machine where no test ran imports none of them (and says nothing about them:
every one of these checks is not applicable).
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import TYPE_CHECKING, Any

from doctor.model.facts import Facts
from doctor.model.findings import Finding
from doctor.registry import Check, Context, NotApplicable, Skip, check

if TYPE_CHECKING:
    from doctor.model.facts_active import ActiveFacts

AREA = "Active tests"


@cache
def _catalog_codes() -> tuple[str, ...]:
    """The finding codes a CUDA driver error or a framework's error text can become (the error catalogs).
    Read when asked (--list-checks, docs), never at import: a check with no active test never needs them."""
    from doctor.checks.active.cuerrors import meanings
    from doctor.checks.active.frameworks import FALLBACK, signatures

    return tuple(sorted({m.code for m in meanings().values()} | {s.code for s in (*signatures(), FALLBACK)}))


def _active(facts: Facts) -> ActiveFacts:
    if facts.active is None:
        raise NotApplicable("no active test was recorded (`gpu-doctor snapshot --smoke` / `--oom` record them)")
    return facts.active


def _in_area(check_func: Any) -> Any:
    """Every finding of an active-test check in the area "Active tests" (the judges name the test they come
    from, "Smoke test", "OOM probe", …, when called on their own)."""
    def wrapped(facts: Facts, ctx: Context) -> list[Finding]:
        try:
            found = list(check_func(facts, ctx))
        except (TypeError, KeyError, ValueError, AttributeError, IndexError) as exc:
            # The test process always reports these values; a snapshot that lacks them (written by hand, cut,
            # or by another tool) cannot be judged — unknown, not a crash and not a verdict.
            raise Skip(f"the recorded test is incomplete ({type(exc).__name__}: {exc})") from None
        return [dataclasses.replace(f, area=AREA) for f in found]

    wrapped.__name__ = check_func.__name__
    wrapped.__doc__ = check_func.__doc__
    return wrapped


RUN_CODES = ("gpu.hang", "gpu.test_crashed", "gpu.no_cuda_device", "gpu.cuda_error")


@check("active.smoke", AREA, "The driver-API smoke test: a context, PTX kernels with every element exact, copies, "
       "memory bandwidth and FP32 near the GPU's and the link's peaks, no new ECC errors or slowdowns.",
       codes=("gpu.smoke", "gpu.wrong_results", "gpu.underperforming", "gpu.hardware_fault", "gpu.throttling",
              *RUN_CODES))
def smoke(facts: Facts, ctx: Context) -> list[Finding]:
    test = _active(facts).smoke
    if test is None:
        raise NotApplicable("no smoke test was recorded")
    from doctor.checks.active.gpu import smoke_findings

    return smoke_findings(test, ctx.matrix)


@check("active.oom", AREA, "The OOM probe: the largest block and the total a program can allocate against what NVML "
       "says, recovery after running out of memory, every byte released; it refuses a GPU others may use.",
       codes=("oom.refused", "oom.capacity", "oom.recovery", "oom.released", "gpu.wrong_results",
              "gpu.hardware_fault", "gpu.throttling", *RUN_CODES))
def oom(facts: Facts, ctx: Context) -> list[Finding]:
    test = _active(facts).oom
    if test is None:
        raise NotApplicable("no OOM probe was recorded")
    from doctor.checks.active.gpu import oom_findings

    return oom_findings(test, ctx.matrix)


@check("active.multi_gpu", AREA, "Between the tested GPUs: NVLink links up, peer access where NVLink joins them, peer "
       "copies intact and near the link's rate.",
       codes=("multigpu.topology", "multigpu.nvlink_down", "multigpu.peer_access", "multigpu.peer_bandwidth",
              "gpu.wrong_results", "gpu.cuda_error"))
def multi_gpu(facts: Facts, ctx: Context) -> list[Finding]:
    test = _active(facts).smoke
    if test is None or test.multi_gpu is None or len(test.multi_gpu.gpus) < 2:
        raise NotApplicable("no multi-GPU test was recorded (it needs a smoke test of two or more GPUs)")
    from doctor.checks.active.multigpu import findings

    return findings(test.multi_gpu)


@check("active.frameworks", AREA, "Each framework of the target environment computes a matrix product (and a cuDNN "
       "convolution) on the GPU as the CPU does; its tensor cores reach their rate; its error text, classified.",
       codes=("framework.gpu_smoke", "framework.hang", "framework.not_installed", "gpu.wrong_results",
              "gpu.underperforming"))
def framework_runs(facts: Facts, ctx: Context) -> list[Finding]:
    test = _active(facts).frameworks
    if test is None:
        raise NotApplicable("no framework smoke test was recorded")
    from doctor.checks.active.frameworks import record_findings

    return record_findings(test, ctx.matrix)


@check("active.torch", AREA, "torch in the target environment: its caching allocator after an OOM, the largest "
       "batch a model fits, and an NCCL all-reduce across the GPUs with its bus bandwidth.",
       codes=("oom.allocator", "oom.torch", "oom.released", "oom.recovery", "oom.batch_size",
              "oom.batch_probe_failed", "multigpu.nccl", "multigpu.nccl_hang", "multigpu.nccl_failed",
              "framework.hang", "framework.not_installed"))
def torch_runs(facts: Facts, ctx: Context) -> list[Finding]:
    runs = _active(facts).torch
    if not runs:
        raise NotApplicable("no torch test was recorded")
    from doctor.checks.active.torchmem import record_findings

    return record_findings(runs)


@check("active.gpu_burn", AREA, "gpu-burn's verdict per GPU, read from its output (it exits 0 for a FAULTY GPU).",
       codes=("gpu.burn", "gpu.burn_faulty", "gpu.hang"))
def gpu_burn(facts: Facts, ctx: Context) -> list[Finding]:
    rec = _active(facts).gpu_burn
    if rec is None:
        raise NotApplicable("no gpu-burn run was recorded")
    from doctor.checks.active.gpuburn import record_findings

    return record_findings(rec)


@check("active.dcgm", AREA, "DCGM's `dcgmi diag`: every test passed; failures and warnings with DCGM's own message.",
       codes=("gpu.dcgm", "gpu.dcgm_failed", "gpu.dcgm_warning", "gpu.hang"))
def dcgm_diag(facts: Facts, ctx: Context) -> list[Finding]:
    rec = _active(facts).dcgm
    if rec is None:
        raise NotApplicable("no DCGM diagnostic was recorded")
    from doctor.checks.active.dcgm import record_findings

    return record_findings(rec)


@check("active.nccl_tests", AREA, "nccl-tests' all_reduce_perf: correct sums, and a bus bandwidth near the slowest "
       "link the smoke test measured.",
       codes=("multigpu.nccl", "multigpu.nccl_failed", "multigpu.nccl_wrong_results", "multigpu.nccl_bandwidth",
              "multigpu.nccl_hang"))
def nccl_tests(facts: Facts, ctx: Context) -> list[Finding]:
    active = _active(facts)
    if active.nccl_tests is None:
        raise NotApplicable("no nccl-tests run was recorded")
    from doctor.checks.active.nccltests import record_findings

    return record_findings(active.nccl_tests, active.smoke.multi_gpu if active.smoke is not None else None)


def _with_catalog(chk: Check, catalog: bool = False) -> Check:
    """The registered form of a check: its findings in the area "Active tests", its codes with what an error
    catalog maps a driver or framework error to (read when listed)."""
    return dataclasses.replace(chk, func=_in_area(chk.func), more_codes=_catalog_codes if catalog else None)


CHECKS: list[Check] = [
    _with_catalog(smoke, True), _with_catalog(oom, True), _with_catalog(multi_gpu),
    _with_catalog(framework_runs, True), _with_catalog(torch_runs, True), _with_catalog(gpu_burn),
    _with_catalog(dcgm_diag),
    _with_catalog(nccl_tests),
]
