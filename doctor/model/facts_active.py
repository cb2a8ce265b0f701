"""The ``active`` section of the facts: what ``smoke``, ``oom`` and the tests they hand over to measured.

Facts, not verdicts: every number is what a test measured, with the call or tool it came from
(``source``) and the versions involved, and the error text where a step failed. The registered checks
in :mod:`doctor.checks.active` judge them, attribute by attribute, so a snapshot with active results replays, diffs and
aggregates like every other fact. The section is optional (``Facts.active`` is None in a snapshot
without active tests, and in every snapshot written before it existed).

:func:`coerce` builds these types from what a test process reported: anything of the wrong type reads
as unknown (None), never as a crash — the reports come from a child process that may be a broken
interpreter or a hostile program.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeVar, Union, overload

from doctor.model.versions import cuda_version, cudnn_version, nccl_version

# --- shared ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ActiveError:
    """A failed step: the call (a driver function, a tool), the driver's own name and text, and the JIT log."""

    step: str | None = None
    call: str | None = None
    code: int | None = None
    name: str | None = None
    text: str | None = None
    log: str | None = None


@dataclass(frozen=True)
class ActiveEnd:
    """How a test process ended: ``exit`` (returncode; None when it could not start, with ``error``) or
    ``hang`` (the watchdog killed it after ``silent_for`` seconds; ``reaped`` False when it could not die)."""

    event: str | None = None
    returncode: int | None = None
    error: str | None = None
    silent_for: float | None = None
    reaped: bool | None = None
    stderr: str | None = None


@dataclass(frozen=True)
class Verified:
    """A kernel's result compared element by element with the exact answer on the host."""

    elements: int | None = None
    wrong: int | None = None
    first_wrong: list[WrongElement] = field(default_factory=list)


@dataclass(frozen=True)
class WrongElement:
    index: int | None = None
    got: float | None = None
    want: float | None = None


# --- the driver-API tests (smoke, oom) ---------------------------------------------------------


def bus_key(bus_id: str | None) -> tuple[int, ...] | None:
    """'00000000:3B:00.0' and '0000:3b:00.0' are the same PCI address: (domain, bus, device, function); None for
    anything else. How a recorded NVLink's other end is matched to a tested GPU."""
    if not bus_id:
        return None
    try:
        domain, bus, rest = bus_id.strip().split(":")
        dev, fn = rest.split(".")
        return int(domain, 16), int(bus, 16), int(dev, 16), int(fn, 16)
    except ValueError:
        return None


@dataclass(frozen=True)
class NvmlProcess:
    pid: int | None = None
    name: str | None = None
    used_bytes: int | None = None


@dataclass(frozen=True)
class NvmlReading:
    """What NVML said of one GPU at one moment (before, with the test's context, during, after the test)."""

    name: str | None = None
    memory_total: int | None = None
    memory_used: int | None = None
    memory_free: int | None = None
    ecc_uncorrected: int | None = None
    ecc_corrected: int | None = None
    ecc_enabled: bool | None = None
    throttle_mask: int | None = None
    throttle_reasons: list[str] | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    mig_mode: bool | None = None
    processes: list[NvmlProcess] | None = None  # None: NVML could not list them (NOT_SUPPORTED, no NVML)


@dataclass(frozen=True)
class PcieLink:
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None


@dataclass(frozen=True)
class ActiveGpu:
    """One GPU in a smoke test or OOM probe. Rates in GB/s (10^9 bytes) and TFLOP/s, memory in bytes."""

    ordinal: int
    name: str | None = None
    pci_bus_id: str | None = None
    compute_capability: str | None = None
    total_memory: int | None = None
    sm_count: int | None = None
    max_threads_per_sm: int | None = None
    last_step: str | None = None
    errors: list[ActiveError] = field(default_factory=list)
    nvml_before: NvmlReading | None = None
    nvml_with_context: NvmlReading | None = None
    nvml_during: NvmlReading | None = None
    nvml_after: NvmlReading | None = None
    context_created: bool | None = None  # cuCtxCreate_v2 succeeded
    cuda_free: int | None = None  # cuMemGetInfo_v2 with the test's context
    cuda_total: int | None = None
    jit_ms: float | None = None
    saxpy: Verified | None = None  # the kernel result: copy in, launch, copy back, compare
    copy_bytes: int | None = None
    h2d_ms: float | None = None
    d2h_ms: float | None = None
    h2d_gbs: float | None = None  # cuMemcpyHtoD_v2, pinned, best of 3
    d2h_gbs: float | None = None  # cuMemcpyDtoH_v2, pinned, best of 3
    roundtrip_intact: bool | None = None
    pcie_after_copy: PcieLink | None = None
    device_copy_ms: float | None = None
    device_gbs: float | None = None  # D2D: the copy kernel, read + write
    device_copy_intact: bool | None = None
    fma_iters: int | None = None
    fma_threads: int | None = None
    fma_ms: float | None = None
    fp32_tflops: float | None = None
    fma: Verified | None = None
    cleanup_problems: list[str] | None = None
    # the OOM probe
    refused: bool | None = None
    refused_reason: str | None = None  # processes | memory_in_use | memory_unknown
    largest_block: int | None = None
    largest_calls: int | None = None
    total_allocatable: int | None = None
    total_blocks: int | None = None
    total_calls: int | None = None
    cuda_free_when_full: int | None = None
    cuda_free_after_release: int | None = None
    release_problems: list[str] | None = None
    recovery: Verified | None = None  # a kernel after CUDA_ERROR_OUT_OF_MEMORY
    cuda_free_end: int | None = None


@dataclass(frozen=True)
class NvLink:
    link: int | None = None
    active: bool | None = None
    version: int | None = None
    remote_bus: str | None = None


@dataclass(frozen=True)
class PeerCopy:
    bytes: int | None = None
    ms: float | None = None
    gbs: float | None = None
    intact: bool | None = None


@dataclass(frozen=True)
class MultiGpu:
    """Between the tested GPUs. Pairs are "a-b" (a < b) for topology, "a>b" (ordered) for the rest."""

    gpus: list[int] = field(default_factory=list)
    bus_ids: dict[str, str | None] = field(default_factory=dict)
    topology: dict[str, int | None] = field(default_factory=dict)  # nvmlDeviceGetTopologyCommonAncestor
    nvlinks: dict[str, list[NvLink] | None] = field(default_factory=dict)
    pcie: dict[str, PcieLink | None] = field(default_factory=dict)
    can_access_peer: dict[str, bool | None] = field(default_factory=dict)  # cuDeviceCanAccessPeer
    peer_enable_errors: dict[str, ActiveError] = field(default_factory=dict)
    copies: dict[str, PeerCopy] = field(default_factory=dict)  # cuMemcpyPeer, best of 3
    cleanup_problems: list[str] | None = None


@dataclass(frozen=True)
class DriverTest:
    """One run of the driver-API test child (``gpu-doctor smoke`` or ``gpu-doctor oom``)."""

    mode: str  # smoke | oom
    source: str | None = None  # how it was measured
    doctor_version: str | None = None
    driver_version: str | None = None  # nvmlSystemGetDriverVersion
    cuda_driver_version: int | None = None  # cuDriverGetVersion (12020 = CUDA 12.2)
    nvml_error: str | None = None
    missing_entry_points: list[str] = field(default_factory=list)
    device_count: int | None = None
    force: bool | None = None
    errors: list[ActiveError] = field(default_factory=list)  # before any GPU (loading libcuda, cuInit)
    gpus: list[ActiveGpu] = field(default_factory=list)
    multi_gpu: MultiGpu | None = None
    done: bool | None = None  # the child said it finished
    last_step: str | None = None
    last_step_gpu: int | None = None
    end: ActiveEnd | None = None


# --- frameworks in the target environment ------------------------------------------------------

# The watchdog of the framework and torch tests (their children's silence) unless --timeout says otherwise: what a
# record that does not say how long it waited was run with.
DEFAULT_CHILD_TIMEOUT = 120.0


@dataclass(frozen=True)
class Comparison:
    """The GPU's result against the CPU's (framework smoke test)."""

    max_abs_err: float | None = None
    tolerance: float | None = None
    ok: bool | None = None
    rtol: float | None = None
    shape: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class TensorRate:
    """A half-precision matrix product (tensor cores) timed with CUDA events, or why it was skipped."""

    tflops: float | None = None
    n: int | None = None
    iters: int | None = None
    warmup: int | None = None
    seconds: float | None = None
    skipped: str | None = None


@dataclass(frozen=True)
class FrameworkError:
    type: str | None = None
    text: str | None = None
    step: str | None = None


@dataclass(frozen=True)
class FrameworkRun:
    """``smoke --framework``: one framework in one interpreter."""

    framework: str
    python: str
    python_version: str | None = None
    installed: bool | None = None
    version: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    is_available: bool | None = None
    device_count: int | None = None
    gpu_name: str | None = None
    capability: str | None = None
    ok: bool | None = None
    matmul: Comparison | None = None
    conv: Comparison | None = None
    matmul_tflops: dict[str, TensorRate] | None = None  # bf16 / fp16
    warnings: list[str] = field(default_factory=list)
    error: FrameworkError | None = None
    last_step: str | None = None
    end: ActiveEnd | None = None

    def __post_init__(self) -> None:
        if self.cudnn is not None:  # one representation of a cuDNN version (torch answers 92400)
            object.__setattr__(self, "cudnn", cudnn_version(self.cudnn))
        if self.cuda is not None:  # and of a CUDA version (CuPy's runtimeGetVersion() answers 13020)
            object.__setattr__(self, "cuda", cuda_version(self.cuda))


@dataclass(frozen=True)
class FrameworkTest:
    """``smoke --framework``: the interpreters and frameworks asked for, and each run judged (with ``all``,
    the frameworks not installed are left out)."""

    pythons: list[str] = field(default_factory=list)
    requested: list[str] = field(default_factory=list)
    runs: list[FrameworkRun] = field(default_factory=list)


@dataclass(frozen=True)
class BatchTrial:
    batch: int | None = None
    fits: bool | None = None
    peak_allocated: int | None = None
    reserved: int | None = None


@dataclass(frozen=True)
class AllReduceSize:
    bytes: int | None = None
    us: float | None = None
    algbw: float | None = None
    busbw: float | None = None
    correct: bool | None = None


@dataclass(frozen=True)
class AllReduce:
    world: int | None = None
    sizes: list[AllReduceSize] = field(default_factory=list)


@dataclass(frozen=True)
class TorchRun:
    """torch in the target environment: ``oom --framework torch``, ``oom --batch-probe``, ``smoke --nccl``."""

    mode: str  # oom | batch | allreduce
    python: str
    installed: bool | None = None
    version: str | None = None
    cuda: str | None = None
    nccl: str | None = None  # torch.cuda.nccl.version() (smoke --nccl)
    gpu_name: str | None = None
    ok: bool | None = None
    alloc: dict[str, str | None] = field(default_factory=dict)  # PYTORCH_CUDA_ALLOC_CONF, backend
    mem_get_info_before: list[int] | None = None
    mem_get_info_full: list[int] | None = None
    mem_get_info_after: list[int] | None = None
    oom: FrameworkError | None = None
    oom_is_OutOfMemoryError: bool | None = None
    allocated_at_oom: int | None = None
    reserved_at_oom: int | None = None
    reserved_after_del: int | None = None
    reserved_after_empty_cache: int | None = None
    recovered: bool | None = None
    largest_batch: int | None = None
    cap: int | None = None
    parameters: int | None = None
    trials: list[BatchTrial] = field(default_factory=list)
    allreduce: AllReduce | None = None
    error: FrameworkError | None = None
    last_step: str | None = None
    end: ActiveEnd | None = None

    def __post_init__(self) -> None:
        # One representation of each version, whatever form the child's torch answered it in.
        if self.cuda is not None:
            object.__setattr__(self, "cuda", cuda_version(self.cuda))
        if self.nccl is not None:
            object.__setattr__(self, "nccl", nccl_version(self.nccl))


# --- tools the doctor hands over to (smoke --level 3) ------------------------------------------


@dataclass(frozen=True)
class GpuBurn:
    """gpu-burn's output, read (its exit code says nothing: it exits 0 for a FAULTY GPU)."""

    skipped: str | None = None
    command: list[str] = field(default_factory=list)
    seconds: int | None = None
    returncode: int | None = None
    error: str | None = None  # did not finish (timeout) or could not start
    tested: int | None = None
    verdicts: dict[str, str] = field(default_factory=dict)  # GPU → OK | FAULTY
    init_errors: list[str] = field(default_factory=list)
    last_errors: list[int] = field(default_factory=list)
    died: list[int] = field(default_factory=list)
    temps: list[int] = field(default_factory=list)
    aborted: bool | None = None


@dataclass(frozen=True)
class DcgmMessage:
    kind: str | None = None  # Info | Warning | Error
    text: str | None = None


@dataclass(frozen=True)
class DcgmTest:
    category: str | None = None
    name: str | None = None
    status: str | None = None
    scope: str | None = None
    messages: list[DcgmMessage] = field(default_factory=list)
    gpus: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DcgmDiag:
    skipped: str | None = None
    level: int | None = None
    returncode: int | None = None
    error: str | None = None
    version: str | None = None  # DCGM's own (Metadata table)
    driver: str | None = None
    device_ids: str | None = None
    table: bool | None = None
    tests: list[DcgmTest] = field(default_factory=list)
    output: str | None = None  # the tail of its output when it printed no table


@dataclass(frozen=True)
class NcclPlace:
    time_us: float | None = None
    algbw: float | None = None
    busbw: float | None = None
    wrong: float | None = None  # #wrong (a count) or, in old builds, the error column


@dataclass(frozen=True)
class NcclRow:
    size: int | None = None
    count: int | None = None
    type: str | None = None
    redop: str | None = None
    root: int | None = None
    out_of_place: NcclPlace | None = None
    in_place: NcclPlace | None = None


@dataclass(frozen=True)
class NcclTests:
    """nccl-tests' all_reduce_perf across the tested GPUs."""

    skipped: str | None = None
    argv: list[str] = field(default_factory=list)
    returncode: int | None = None
    error: str | None = None
    version: str | None = None  # "# nccl-tests version …" where the build prints it
    nccl_version: str | None = None
    rows: list[NcclRow] = field(default_factory=list)
    out_of_bounds: int | None = None
    avg_busbw: float | None = None
    ranks: int | None = None
    ngpus: int | None = None
    old_format: bool | None = None
    output: str | None = None


@dataclass(frozen=True)
class ActiveFacts:
    """Every active test recorded in this snapshot; a test that did not run is None / empty."""

    recorded_at: str | None = None
    smoke: DriverTest | None = None
    oom: DriverTest | None = None
    frameworks: FrameworkTest | None = None
    torch: list[TorchRun] = field(default_factory=list)
    gpu_burn: GpuBurn | None = None
    dcgm: DcgmDiag | None = None
    nccl_tests: NcclTests | None = None

    def merged(self, other: ActiveFacts | None) -> ActiveFacts:
        """This record with what ``other`` measured on top (a test run later replaces the earlier one)."""
        if other is None:
            return self
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(other, f.name)
            if value not in (None, []):
                changes[f.name] = value
        return dataclasses.replace(self, **changes)


# --- building them from what a test reported -----------------------------------------------------


T = TypeVar("T")


class Incomplete(ValueError):
    """A value the test process always reports is missing from a recorded test (a snapshot written by hand, cut,
    or by another tool): its judge cannot judge it, and the check says so — skipped, not crashed, no verdict."""


def known(value: T | None, what: str) -> T:
    """``value``, which a complete record always has; :class:`Incomplete` when the record lacks it."""
    if value is None:
        raise Incomplete(f"the record has no {what}")
    return value


@overload
def coerce(tp: type[T], value: Any) -> T | None: ...
@overload
def coerce(tp: Any, value: Any) -> Any: ...


def coerce(tp: Any, value: Any) -> Any:
    """``value`` (JSON-like data from a test process) as type ``tp``; a value of the wrong type becomes None
    (or the field's default), so a broken or hostile child can never crash the doctor."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return None if value is None else coerce(args[0], value)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            return None
        return [v for v in (coerce(item, v) for v in value[:10_000]) if v is not None]
    if origin is dict:
        _k, item = typing.get_args(tp)
        if not isinstance(value, dict):
            return None
        out = {}
        for k, v in list(value.items())[:10_000]:
            c = coerce(item, v)
            if c is not None or v is None:
                out[str(k)] = c
        return out
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            return None
        hints = _hints(tp)
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(tp):
            if f.name not in value:
                continue
            c = coerce(hints[f.name], value[f.name])
            if c is None and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                return None  # a required field of the wrong type: the whole record is unusable
            if c is not None or _optional(hints[f.name]):
                kwargs[f.name] = c
        try:
            return tp(**kwargs)
        except TypeError:  # a required field missing
            return None
    if tp is bool:
        return value if isinstance(value, bool) else None
    if tp is int:
        return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 63 else None
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        try:
            number = float(value)
        except OverflowError:
            return None
        return number if math.isfinite(number) else None
    if tp is str:
        if isinstance(value, str):
            return value[:20_000]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # a version reported as a number (cudnn 8902)
        return None
    return value


def _optional(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType) and type(None) in typing.get_args(tp)


@cache
def _hints(tp: type) -> dict[str, Any]:
    return typing.get_type_hints(tp)


def driver_test(results: dict[str, Any], doctor_version: str | None = None) -> DriverTest | None:
    """The record of a smoke test / OOM probe from the results :mod:`doctor.active.gpu` assembled."""
    glob: dict[str, Any] = results["global"] if isinstance(results.get("global"), dict) else {}
    last: dict[str, Any] = results["last_step"] if isinstance(results.get("last_step"), dict) else {}
    mode = results.get("mode") if results.get("mode") in ("smoke", "oom") else "smoke"
    listed: list[Any] = results["gpus"] if isinstance(results.get("gpus"), list) else []
    gpus = [{**g, "errors": _errors(g.get("errors"))} for g in listed if isinstance(g, dict)]
    data = {**{k: v for k, v in glob.items() if k != "multi_gpu"}, "mode": mode,
            "errors": _errors(results.get("errors")), "gpus": gpus,
            "multi_gpu": _multi(glob.get("multi_gpu")), "done": results.get("done"), "force": results.get("force"),
            "last_step": last.get("step"), "last_step_gpu": last.get("gpu"), "end": results.get("end"),
            "doctor_version": doctor_version,
            "source": "gpu-doctor child: libcuda driver API (ctypes) and NVML (pynvml)"}
    return coerce(DriverTest, data)


def _errors(entries: Any) -> list[dict[str, Any]]:
    """[{"step", "error": {call, code, name, text, log}}] → flat ActiveError dicts."""
    out = []
    for e in entries if isinstance(entries, list) else []:
        if isinstance(e, dict):
            err: dict[str, Any] = e["error"] if isinstance(e.get("error"), dict) else {}
            out.append({**err, "step": e.get("step")})
    return out


def _multi(mg: Any) -> Any:
    if not isinstance(mg, dict):
        return None
    errs = mg.get("peer_enable_errors")
    return {**mg, "peer_enable_errors": errs if isinstance(errs, dict) else {}}


# --- what fleet and diff compare ---------------------------------------------------------------

# measurement key → (what it is, unit); larger is better for all of them
MEASURES: dict[str, tuple[str, str]] = {
    "h2d_gbs": ("host→device copy", "GB/s"),
    "d2h_gbs": ("device→host copy", "GB/s"),
    "device_gbs": ("device memory bandwidth", "GB/s"),
    "fp32_tflops": ("FP32 throughput", "TFLOP/s"),
    "bf16_tflops": ("bf16 tensor-core matrix product", "TFLOP/s"),
    "fp16_tflops": ("fp16 tensor-core matrix product", "TFLOP/s"),
    "nccl_busbw": ("NCCL all-reduce bus bandwidth", "GB/s"),
}


def measurements(active: ActiveFacts | None) -> dict[str, tuple[str | None, float]]:
    """Every rate the active section holds, as {"GPU 0 device_gbs": (gpu name, value)}: what `fleet` compares
    across nodes and `diff` between two snapshots."""
    out: dict[str, tuple[str | None, float]] = {}
    if active is None:
        return out
    if active.smoke is not None:
        for g in active.smoke.gpus:
            name = g.name or (g.nvml_before.name if g.nvml_before else None)
            for key in ("h2d_gbs", "d2h_gbs", "device_gbs", "fp32_tflops"):
                value = getattr(g, key)
                if isinstance(value, float) and value > 0:
                    out[f"GPU {g.ordinal} {key}"] = (name, value)
    for run in active.frameworks.runs if active.frameworks else []:
        for dtype, rate in (run.matmul_tflops or {}).items():
            if rate.tflops and rate.tflops > 0:
                out[f"{run.framework} {dtype}_tflops"] = (run.gpu_name, rate.tflops)
    for trun in active.torch:
        sizes = trun.allreduce.sizes if trun.allreduce else []
        best = max((s.busbw for s in sizes if s.busbw), default=None)
        if best:
            out["torch nccl_busbw"] = (trun.gpu_name, best)
    if active.nccl_tests is not None and active.nccl_tests.rows:
        last = active.nccl_tests.rows[-1].out_of_place
        if last is not None and last.busbw:
            out["nccl-tests nccl_busbw"] = (None, last.busbw)
    return out


def measure_key(label: str) -> str:
    """"GPU 0 device_gbs" → "device_gbs"."""
    return label.rsplit(" ", 1)[-1]


# Two measurements of the same rate within this fraction of each other are the same (run-to-run noise of a
# healthy GPU is a few percent); beyond it `diff` shows the change, slower or faster.
DIFF_TOLERANCE = 0.1


def rate_changes(a: ActiveFacts | None, b: ActiveFacts | None) -> list[tuple[str, str | None, str | None]]:
    """(what, before, after) for every rate both snapshots measured that differs by more than
    :data:`DIFF_TOLERANCE`, and for a rate only one of them measured: `diff` shows a node that got slower."""
    before, after = measurements(a), measurements(b)
    if not before or not after:
        return []  # one side ran no active test: nothing to compare, not a change
    out: list[tuple[str, str | None, str | None]] = []
    for label in dict.fromkeys([*before, *after]):
        what, unit = MEASURES.get(measure_key(label), (measure_key(label), ""))
        name = f"{label.rsplit(' ', 1)[0]} {what}"
        x, y = before.get(label), after.get(label)
        if x is None or y is None:
            out.append((name, None if x is None else f"{x[1]:,.1f} {unit}",
                        None if y is None else f"{y[1]:,.1f} {unit}"))
            continue
        change = y[1] / x[1] - 1 if x[1] else 0.0
        if abs(change) > DIFF_TOLERANCE:
            out.append((name, f"{x[1]:,.1f} {unit}",
                        f"{y[1]:,.1f} {unit} ({abs(change):.0%} {'slower' if change < 0 else 'faster'})"))
    return out
