"""Runs in a spawned child: the smoke test or the OOM probe on each selected GPU, through the driver API.

Why a child: a kernel or driver call can hang forever inside C code, and initialising CUDA changes the
process that does it. The parent (doctor.active.gpu) reads our events with a watchdog and kills us when we
fall silent. We print, one per line after the marker, JSON events:

  {"event": "step", "gpu": 0, "step": "…", "fraction": 0.4}   what starts now (the hang is blamed on it)
  {"event": "fact", "gpu": 0, "data": {…}}                    something measured or read, merged by the parent
  {"event": "error", "gpu": 0, "step": "…", "error": {call, code, name, text, log}}
  {"event": "done"}

Usage: python -m doctor.active.gpu_child '{"mode": "smoke"|"oom", "gpus": "all"|[0, 1], …}'
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import signal
import sys
import time
from array import array
from importlib import resources
from typing import Any

from doctor.active.cudadrv import (
    ATTR_CC_MAJOR,
    ATTR_CC_MINOR,
    ATTR_MAX_THREADS_PER_MULTIPROCESSOR,
    ATTR_MULTIPROCESSOR_COUNT,
    OUT_OF_MEMORY,
    PEER_ACCESS_ALREADY_ENABLED,
    CudaError,
    Driver,
)
from doctor.active.nvmlread import Nvml

MARKER = "@@GPU-DOCTOR@@"
MIB = 1 << 20
GRANULE = 2 * MIB  # the driver hands out device memory in 2 MiB pages: the OOM probe asks in whole pages
SAXPY_N = 1 << 20
SAXPY_A = 3.0
FMA_A, FMA_B = 1.0, 0.25
FMA_MAX_ITERS = 2_000_000  # keeps every value of fma.ptx an exact float (see its header)
BLOCK = 256
MAX_GRID = (1 << 31) - 1  # cuLaunchKernel's largest gridDimX
COPY_LAUNCHES = 10  # copy kernels timed per pair of events (see device_copy)
COMPARE_CHUNK = 4 * MIB
# The OOM probe runs only where the GPU's used memory is at most this (see refusal()); the same numbers are
# in doctor/checks/active/gpu.py's explanation (IDLE_TEXT).
IDLE_USED_MIB = 512
IDLE_USED_FRACTION = 0.02


def emit(event: str, **data: Any) -> None:
    sys.stdout.write(MARKER + json.dumps({"event": event, **data}) + "\n")
    sys.stdout.flush()


class Steps:
    """Progress of one GPU among several: step k of n on GPU i of m → one fraction for the whole run."""

    def __init__(self, gpu: int | None, position: int, of: int, steps: int) -> None:
        self.gpu, self.position, self.of, self.steps, self.done = gpu, position, of, steps, 0
        self.current = ""

    def __call__(self, step: str, advance: bool = True) -> None:
        self.current = step
        fraction = (self.position + min(self.done, self.steps) / self.steps) / self.of
        emit("step", gpu=self.gpu, step=step, fraction=round(fraction, 4))
        if advance:
            self.done += 1


class Held:
    """Everything a test allocated in its context, released in reverse order whatever happened."""

    def __init__(self, drv: Driver) -> None:
        self.drv = drv
        self.device: list[int] = []
        self.host: list[int] = []
        self.modules: list[int] = []
        self.events: list[int] = []

    def alloc(self, size: int) -> int:
        ptr = self.drv.alloc(size)
        self.device.append(ptr)
        return ptr

    def host_alloc(self, size: int) -> int:
        ptr = self.drv.host_alloc(size)
        self.host.append(ptr)
        return ptr

    def event(self) -> int:
        ev = self.drv.event()
        self.events.append(ev)
        return ev

    def release(self) -> list[str]:
        """Free everything; the failures (after a sticky error every call fails) as text."""
        problems = []
        for name, items, call in (("cuMemFree_v2", self.device, "cuMemFree_v2"),
                                  ("cuMemFreeHost", self.host, "cuMemFreeHost"),
                                  ("cuModuleUnload", self.modules, "cuModuleUnload"),
                                  ("cuEventDestroy_v2", self.events, "cuEventDestroy_v2")):
            for item in reversed(items):
                try:
                    self.drv.call(call, item)
                except CudaError as exc:
                    problems.append(f"{name}: {exc.name}")
            items.clear()
        return problems


# --- what every test does first -------------------------------------------------------------------


def device_facts(drv: Driver, ordinal: int) -> tuple[int, dict[str, Any]]:
    dev = drv.device(ordinal)
    facts: dict[str, Any] = {"name": drv.name(dev), "pci_bus_id": drv.pci_bus_id(dev),
                             "total_memory": drv.total_mem(dev)}
    facts["compute_capability"] = f"{drv.attribute(ATTR_CC_MAJOR, dev)}.{drv.attribute(ATTR_CC_MINOR, dev)}"
    facts["sm_count"] = drv.attribute(ATTR_MULTIPROCESSOR_COUNT, dev)
    facts["max_threads_per_sm"] = drv.attribute(ATTR_MAX_THREADS_PER_MULTIPROCESSOR, dev)
    return dev, facts


def kernel(drv: Driver, held: Held, name: str) -> int:
    ptx = resources.files("doctor.kernels").joinpath(f"{name}.ptx").read_bytes()
    module = drv.load_ptx(ptx)
    held.modules.append(module)
    return drv.function(module, {"saxpy": "saxpy", "copy": "copy_v4", "fma": "fma_loop"}[name])


def timed(drv: Driver, start: int, stop: int, work: Any) -> float:
    """Milliseconds the GPU spent on ``work`` (events on the default stream around it)."""
    drv.call("cuEventRecord", start, None)
    work()
    drv.call("cuEventRecord", stop, None)
    drv.call("cuEventSynchronize", stop)
    return drv.elapsed_ms(start, stop)


def saxpy_check(drv: Driver, held: Held, func: int, n: int = SAXPY_N) -> dict[str, Any]:
    """Copy x and y in, out = 3·x + y on the GPU, copy out back; compare every element with the exact value."""
    # Host-side work inside a watched step: on a loaded machine building 2^20 expected values takes seconds,
    # which the watchdog would read as the GPU hanging. x and y repeat one period; the expected values are
    # built in chunks, each followed by an "alive" event (host work, not the GPU, is what is running).
    x = _periodic([float(i) for i in range(0x10000)], n)
    y = _periodic([float((i * 7) % 1021) for i in range(1021)], n)
    ax = array("f", map(SAXPY_A.__mul__, x[:1 << 16]))  # a·x repeats with x: one period, then one add per element
    want = array("f")
    for lo in range(0, n, 1 << 16):
        want.extend(map(float.__add__, ax, y[lo:lo + (1 << 16)]))
        emit("alive")
    nbytes = n * 4
    d_x, d_y, d_out = held.alloc(nbytes), held.alloc(nbytes), held.alloc(nbytes)
    drv.call("cuMemcpyHtoD_v2", d_x, x.buffer_info()[0], nbytes)
    drv.call("cuMemcpyHtoD_v2", d_y, y.buffer_info()[0], nbytes)
    drv.launch(func, (n + BLOCK - 1) // BLOCK, BLOCK, [ctypes.c_uint64(d_out), ctypes.c_uint64(d_x),
                                                       ctypes.c_uint64(d_y), ctypes.c_float(SAXPY_A),
                                                       ctypes.c_uint32(n)])
    drv.call("cuCtxSynchronize")
    got = array("f", bytes(n * 4))
    drv.call("cuMemcpyDtoH_v2", got.buffer_info()[0], d_out, nbytes)
    return compare(got, want)


def _periodic(period: list[float], n: int) -> array[float]:
    """The first n elements of the period repeated, as float32."""
    one = array("f", period)
    return (one * (n // len(one) + 1))[:n]


def same_bytes(a: int, b: int, size: int) -> bool:
    """Whether two host buffers hold the same ``size`` bytes: libc's memcmp where the process has one, else a few
    MiB at a time. Never a copy of the whole buffer (two 256 MiB bytes objects cost the smoke test ~0.3 s)."""
    memcmp = _memcmp()
    if memcmp is not None:
        return int(memcmp(a, b, size)) == 0
    for off in range(0, size, COMPARE_CHUNK):
        n = min(COMPARE_CHUNK, size - off)
        if ctypes.string_at(a + off, n) != ctypes.string_at(b + off, n):
            return False
    return True


def _memcmp() -> Any:
    try:
        fn = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def compare(got: array[float], want: array[float]) -> dict[str, Any]:
    result: dict[str, Any] = {"elements": len(want), "wrong": 0}
    if got == want:  # element by element, in C
        return result
    wrong = [i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b]
    result["wrong"] = len(wrong)
    result["first_wrong"] = [{"index": i, "got": got[i], "want": want[i]} for i in wrong[:5]]
    return result


# --- the smoke test -------------------------------------------------------------------------------


def smoke(drv: Driver, nvml: Nvml, ordinal: int, step: Steps, opts: dict[str, Any]) -> None:
    g = ordinal
    step("reading the device")
    dev, facts = device_facts(drv, ordinal)
    emit("fact", gpu=g, data=facts)
    handle = nvml.handle_for_bus(facts["pci_bus_id"])
    emit("fact", gpu=g, data={"nvml_before": nvml.reading(handle)})
    step("creating a context (cuCtxCreate_v2)")
    ctx = drv.ctx_create(dev)
    emit("fact", gpu=g, data={"context_created": True})
    held = Held(drv)
    try:
        free, total = drv.mem_info()
        emit("fact", gpu=g, data={"cuda_free": free, "cuda_total": total})
        step("JIT-compiling the PTX kernels (cuModuleLoadDataEx)")
        t0 = time.monotonic()
        funcs = {name: kernel(drv, held, name) for name in ("saxpy", "copy", "fma")}
        emit("fact", gpu=g, data={"jit_ms": round((time.monotonic() - t0) * 1000, 1)})
        step("saxpy kernel: copy in, launch, copy back, compare every element")
        emit("fact", gpu=g, data={"saxpy": saxpy_check(drv, held, funcs["saxpy"])})
        start, stop = held.event(), held.event()
        size = max(MIB, min(opts.get("size_mib", 256) * MIB, free // 8) // MIB * MIB)
        step(f"host↔device bandwidth, pinned memory, {size // MIB} MiB")
        emit("fact", gpu=g, data=transfers(drv, held, size, start, stop))
        emit("fact", gpu=g, data={"pcie_after_copy": _pcie(nvml.reading(handle))})
        step(f"device memory bandwidth (copy kernel, {size // MIB} MiB)")
        emit("fact", gpu=g, data=device_copy(drv, held, funcs["copy"], size, start, stop))
        step("FP32 throughput (FMA kernel)")
        emit("fact", gpu=g, data=fma(drv, held, funcs["fma"], facts, opts, start, stop, nvml, handle))
    except CudaError as exc:  # reported here: the cleanup below is a step of its own
        emit("error", gpu=g, step=step.current, error=exc.to_dict())
    finally:
        step("releasing memory and destroying the context")
        problems = held.release()
        try:
            drv.call("cuCtxDestroy_v2", ctx)
        except CudaError as exc:
            problems.append(f"cuCtxDestroy_v2: {exc.name}")
        emit("fact", gpu=g, data={"cleanup_problems": problems, "nvml_after": nvml.reading(handle)})


def transfers(drv: Driver, held: Held, size: int, start: int, stop: int) -> dict[str, Any]:
    src, back = held.host_alloc(size), held.host_alloc(size)
    pattern = bytes(range(251)) * (MIB // 251 + 1)
    block = pattern[:MIB]
    for off in range(0, size, MIB):  # a 251-byte period: bytes shifted by anything but a multiple of it show
        ctypes.memmove(src + off, block, min(MIB, size - off))
    dev = held.alloc(size)
    h2d = min(timed(drv, start, stop, lambda: drv.call("cuMemcpyHtoD_v2", dev, src, size)) for _ in range(3))
    d2h = min(timed(drv, start, stop, lambda: drv.call("cuMemcpyDtoH_v2", back, dev, size)) for _ in range(3))
    intact = same_bytes(back, src, size)
    return {"copy_bytes": size, "h2d_ms": h2d, "d2h_ms": d2h, "h2d_gbs": _rate(size, h2d),
            "d2h_gbs": _rate(size, d2h), "roundtrip_intact": intact}


def device_copy(drv: Driver, held: Held, func: int, size: int, start: int, stop: int) -> dict[str, Any]:
    # transfers() left the pattern in its device buffer (the last allocation) and two pinned buffers
    src = held.device[-1]
    dst = held.alloc(size)
    n16 = size // 16
    # One 16-byte vector per thread (the kernel's grid-stride loop covers what a grid cannot), and COPY_LAUNCHES
    # launches back to back between the two events: a single 256 MiB copy lasts ~0.2 ms on an H100, and its
    # ramp-up and tail cost it ~10 % of the rate (measured on an H100 80GB HBM3: benchmarks/smoke_device.py,
    # tests/data/gpu-validate/SOURCES.md). Like this the kernel reaches what the driver's own cuMemcpyDtoD does.
    grid = max(1, min(-(-n16 // BLOCK), MAX_GRID))

    def run() -> None:
        args = [ctypes.c_uint64(dst), ctypes.c_uint64(src), ctypes.c_uint64(n16)]
        for _ in range(COPY_LAUNCHES):
            drv.launch(func, grid, BLOCK, args)

    run()  # the first launch of a kernel pays for loading it onto the GPU
    ms = min(timed(drv, start, stop, run) for _ in range(3)) / COPY_LAUNCHES
    back = held.host[-1]
    drv.call("cuMemcpyDtoH_v2", back, dst, size)
    intact = same_bytes(back, held.host[-2], size)
    return {"device_copy_ms": ms, "device_gbs": _rate(2 * size, ms), "device_copy_intact": intact}


def fma(drv: Driver, held: Held, func: int, facts: dict[str, Any], opts: dict[str, Any], start: int, stop: int,
        nvml: Nvml, handle: Any) -> dict[str, Any]:
    blocks = max(1, facts["sm_count"] * max(1, facts["max_threads_per_sm"] // BLOCK))
    threads = blocks * BLOCK
    out = held.alloc(threads * 4)

    def run(iters: int) -> None:
        drv.launch(func, blocks, BLOCK, [ctypes.c_uint64(out), ctypes.c_uint32(iters), ctypes.c_float(FMA_A),
                                         ctypes.c_float(FMA_B)])

    probe_iters = 256
    ms = timed(drv, start, stop, lambda: run(probe_iters))
    target_ms = float(opts.get("fma_ms", 200))
    iters = int(min(FMA_MAX_ITERS, max(probe_iters, probe_iters * target_ms / ms if ms > 0 else FMA_MAX_ITERS)))
    drv.call("cuEventRecord", start, None)
    run(iters)
    drv.call("cuEventRecord", stop, None)
    during = nvml.reading(handle)  # while the kernel runs: clocks slow down under load, not at idle
    drv.call("cuEventSynchronize", stop)
    ms = drv.elapsed_ms(start, stop)
    got = array("f", bytes(threads * 4))
    drv.call("cuMemcpyDtoH_v2", got.buffer_info()[0], out, threads * 4)
    want = array("f", [8.0 * (t & 1023) + 28.0 + 8.0 * iters for t in range(threads)])
    flops = 64.0 * iters * threads
    return {"fma_iters": iters, "fma_threads": threads, "fma_ms": ms,
            "fp32_tflops": flops / (ms / 1000.0) / 1e12 if ms > 0 else None, "fma": compare(got, want),
            "nvml_during": during}


# --- the OOM probe --------------------------------------------------------------------------------


def oom(drv: Driver, nvml: Nvml, ordinal: int, step: Steps, opts: dict[str, Any]) -> None:
    g = ordinal
    step("reading the device and the processes using it")
    dev, facts = device_facts(drv, ordinal)
    emit("fact", gpu=g, data=facts)
    handle = nvml.handle_for_bus(facts["pci_bus_id"])
    before = nvml.reading(handle)
    emit("fact", gpu=g, data={"nvml_before": before})
    reason = None if opts.get("force") else refusal(before)
    if reason:
        emit("fact", gpu=g, data={"refused": True, "refused_reason": reason})
        return
    step("creating a context (cuCtxCreate_v2)")
    ctx = drv.ctx_create(dev)
    emit("fact", gpu=g, data={"context_created": True})
    held = Held(drv)
    try:
        free0, total = drv.mem_info()
        emit("fact", gpu=g, data={"cuda_free": free0, "cuda_total": total, "nvml_with_context": nvml.reading(handle)})
        step("largest single allocation (binary search)")
        largest, calls = largest_block(drv, free0, step)
        emit("fact", gpu=g, data={"largest_block": largest, "largest_calls": calls})
        step("total allocatable memory (allocating until CUDA_ERROR_OUT_OF_MEMORY)")
        total_alloc, blocks, calls2, free_full = allocate_all(drv, largest, held, step)
        emit("fact", gpu=g, data={"total_allocatable": total_alloc, "total_blocks": blocks, "total_calls": calls2,
                                  "cuda_free_when_full": free_full})
        step("releasing every block")
        problems = held.release()
        free_after = drv.mem_info()[0]
        emit("fact", gpu=g, data={"cuda_free_after_release": free_after, "release_problems": problems})
        step("after the OOM: allocate, run a kernel, free")
        func = kernel(drv, held, "saxpy")
        check = saxpy_check(drv, held, func, n=1 << 16)
        problems += held.release()
        emit("fact", gpu=g, data={"recovery": check, "cuda_free_end": drv.mem_info()[0],
                                  "release_problems": problems})
    except CudaError as exc:
        emit("error", gpu=g, step=step.current, error=exc.to_dict())
    finally:
        step("destroying the context")
        problems = held.release()
        try:
            drv.call("cuCtxDestroy_v2", ctx)
        except CudaError as exc:
            problems.append(f"cuCtxDestroy_v2: {exc.name}")
        emit("fact", gpu=g, data={"cleanup_problems": problems, "nvml_after": nvml.reading(handle)})


def idle_allowance(total: int) -> int:
    """The memory an idle GPU shows as used: the driver's own reservation (a few hundred MiB on drivers that
    count it as used). Above this, someone else holds memory, whether NVML can name the process or not."""
    return max(IDLE_USED_MIB * MIB, int(total * IDLE_USED_FRACTION))


def refusal(before: dict[str, Any] | None) -> str | None:
    """Why the probe must not take every free byte of this GPU, or None when its used memory is known to be
    about zero. Unknown is a refusal: NVML that cannot list processes (NOT_SUPPORTED, another container's
    process) or is not there at all says nothing about who else uses the GPU."""
    if not before or before.get("memory_used") is None or not before.get("memory_total"):
        return "memory_unknown"
    if before.get("processes"):
        return "processes"
    if before["memory_used"] > idle_allowance(before["memory_total"]):
        return "memory_in_use"
    return None


def largest_block(drv: Driver, free: int, step: Steps) -> tuple[int, int]:
    """The largest n·2 MiB that one cuMemAlloc_v2 grants. Returns (bytes, calls).

    On a GPU nothing else uses, the answer lies a few pages under cuMemGetInfo's free memory (the H100 of
    tests/data/gpu-validate: 80,550 of 80,552 MiB), so the search starts there and gallops down, 1, 2, 4 … pages
    under the last refusal, until one fits; then it bisects between that and the last refusal. Two calls on
    that H100 (a bisection from zero took 17, each a multi-GB allocation); at most 2·log2(free / 2 MiB) + 2
    (36 on an 80 GB card) when the answer is far down, as on memory split by another process."""
    lo, hi = 0, free // GRANULE  # in pages; lo always fits (0: nothing), hi+1 never does
    calls = 0
    probe, gap = hi, 1

    def fits(pages: int) -> bool:
        nonlocal calls
        calls += 1
        rc, ptr = drv.try_alloc(pages * GRANULE)
        if rc == 0:
            drv.free(ptr)
            return True
        if rc == OUT_OF_MEMORY:
            return False
        name, text = drv.describe(rc)
        raise CudaError("cuMemAlloc_v2", rc, name, text)

    def report() -> None:
        step(f"largest single allocation: between {lo * GRANULE // MIB} and {hi * GRANULE // MIB} MiB "
             f"({calls} {'call' if calls == 1 else 'calls'})", advance=False)

    while lo < hi:  # galloping down from the top
        if fits(probe):
            lo = probe
            report()
            break
        hi = probe - 1
        report()
        probe, gap = max(lo + 1, hi - gap + 1), gap * 2
    while lo < hi:  # then bisecting what is left
        probe = (lo + hi + 1) // 2
        if fits(probe):
            lo = probe
        else:
            hi = probe - 1
        report()
    return lo * GRANULE, calls


def allocate_all(drv: Driver, largest: int, held: Held, step: Steps, max_calls: int = 4096
                 ) -> tuple[int, int, int, int]:
    """Allocate blocks, the largest first, halving the size at each CUDA_ERROR_OUT_OF_MEMORY down to one
    page: the total the driver grants. Returns (bytes, blocks, calls, cuMemGetInfo free when full)."""
    pages = largest // GRANULE
    total = calls = 0
    while pages >= 1 and calls < max_calls:
        calls += 1
        rc, ptr = drv.try_alloc(pages * GRANULE)
        if rc == 0:
            held.device.append(ptr)
            total += pages * GRANULE
            if len(held.device) % 16 == 1:
                blocks = len(held.device)
                step(f"total allocatable: {total // MIB} MiB in {blocks} {'block' if blocks == 1 else 'blocks'}",
                     advance=False)
        elif rc == OUT_OF_MEMORY:
            pages //= 2
        else:
            name, text = drv.describe(rc)
            raise CudaError("cuMemAlloc_v2", rc, name, text)
    return total, len(held.device), calls, drv.mem_info()[0]


# --- several GPUs: topology, peer access, peer copies ---------------------------------------------

MULTI_STEPS = 5


def multi_gpu(drv: Driver, nvml: Nvml, ordinals: list[int], step: Steps, opts: dict[str, Any]) -> None:
    """Between every two selected GPUs: NVML's topology and NVLink links, cuDeviceCanAccessPeer, and a timed
    cuMemcpyPeer each way (peer access enabled where possible), its data compared byte for byte."""
    out: dict[str, Any] = {"gpus": ordinals}

    def publish() -> None:
        emit("fact", gpu=None, data={"multi_gpu": out})

    step("multi-GPU: topology and NVLink links (NVML)")
    devs = {o: drv.device(o) for o in ordinals}
    bus = {o: drv.pci_bus_id(devs[o]) for o in ordinals}
    handles = {o: nvml.handle_for_bus(bus[o]) for o in ordinals}
    out["bus_ids"] = {str(o): bus[o] for o in ordinals}
    out["topology"] = {f"{a}-{b}": nvml.topology(handles[a], handles[b])
                       for a in ordinals for b in ordinals if a < b}
    out["nvlinks"] = {str(o): nvml.nvlinks(handles[o]) for o in ordinals}
    out["pcie"] = {str(o): _pcie(nvml.reading(handles[o])) for o in ordinals}
    publish()
    step("multi-GPU: peer access matrix (cuDeviceCanAccessPeer)")
    out["can_access_peer"] = {f"{a}>{b}": drv.can_access_peer(devs[a], devs[b])
                              for a in ordinals for b in ordinals if a != b}
    publish()
    step("multi-GPU: a context per GPU, peer access enabled (cuCtxEnablePeerAccess)")
    ctxs: dict[int, int] = {}
    helds: dict[int, Held] = {}
    out["peer_enable_errors"] = {}
    out["copies"] = {}
    try:
        for o in ordinals:
            ctxs[o] = drv.ctx_create(devs[o])
            helds[o] = Held(drv)
        for a in ordinals:
            for b in ordinals:
                if a == b or not out["can_access_peer"][f"{a}>{b}"]:
                    continue
                drv.set_current(ctxs[a])
                rc = drv.rc("cuCtxEnablePeerAccess", ctxs[b], 0)
                if rc not in (0, PEER_ACCESS_ALREADY_ENABLED):
                    name, text = drv.describe(rc)
                    out["peer_enable_errors"][f"{a}>{b}"] = CudaError("cuCtxEnablePeerAccess", rc, name,
                                                                      text).to_dict()
        publish()
        size = max(MIB, min(opts.get("size_mib", 256), 256) * MIB)
        for o in ordinals:
            drv.set_current(ctxs[o])
            size = max(MIB, min(size, drv.mem_info()[0] // 8) // MIB * MIB)
        step(f"multi-GPU: peer copy bandwidth (cuMemcpyPeer, {size // MIB} MiB each way)")
        first = ordinals[0]
        drv.set_current(ctxs[first])
        pattern = helds[first].host_alloc(size)
        back = helds[first].host_alloc(size)
        block = (bytes(range(251)) * (MIB // 251 + 1))[:MIB]
        for off in range(0, size, MIB):
            ctypes.memmove(pattern + off, block, min(MIB, size - off))
        src: dict[int, int] = {}
        dst: dict[int, int] = {}
        events: dict[int, tuple[int, int]] = {}
        for o in ordinals:
            drv.set_current(ctxs[o])
            src[o], dst[o] = helds[o].alloc(size), helds[o].alloc(size)
            drv.call("cuMemcpyHtoD_v2", src[o], pattern, size)
            events[o] = (helds[o].event(), helds[o].event())
        for a in ordinals:
            for b in ordinals:
                if a == b:
                    continue
                step(f"multi-GPU: peer copy GPU {a} → GPU {b}", advance=False)
                drv.set_current(ctxs[a])
                start, stop = events[a]

                def copy(a: int = a, b: int = b) -> None:
                    drv.call("cuMemcpyPeer", dst[b], ctxs[b], src[a], ctxs[a], size)

                ms = min(timed(drv, start, stop, copy) for _ in range(3))
                drv.set_current(ctxs[b])
                drv.call("cuMemcpyDtoH_v2", back, dst[b], size)
                intact = same_bytes(back, pattern, size)
                out["copies"][f"{a}>{b}"] = {"bytes": size, "ms": ms, "gbs": _rate(size, ms), "intact": intact}
                publish()
    except CudaError as exc:
        emit("error", gpu=None, step=step.current, error=exc.to_dict())
    finally:
        step("multi-GPU: releasing memory and destroying the contexts")
        problems = []
        for o, ctx in ctxs.items():
            try:
                drv.set_current(ctx)
            except CudaError as exc:
                problems.append(f"cuCtxSetCurrent: {exc.name}")
            problems += helds[o].release()
            try:
                drv.call("cuCtxDestroy_v2", ctx)
            except CudaError as exc:
                problems.append(f"cuCtxDestroy_v2: {exc.name}")
        out["cleanup_problems"] = problems
        publish()


# --- main -----------------------------------------------------------------------------------------


def _rate(nbytes: int, ms: float) -> float | None:
    return nbytes / (ms / 1000.0) / 1e9 if ms > 0 else None


def _pcie(reading: dict[str, Any] | None) -> dict[str, Any] | None:
    if not reading:
        return None
    return {k: reading.get(k) for k in ("pcie_gen", "pcie_width", "pcie_gen_max", "pcie_width_max")}


STEPS = {"smoke": (smoke, 8), "oom": (oom, 7)}  # the step() calls that advance, per GPU


def _exit_on_signal(signum: int, _frame: Any) -> None:
    # SIGTERM / SIGHUP / SIGINT: unwind through every `finally`, which frees the memory and destroys the
    # contexts; then exit. (SIGKILL, and the parent-death signal, end the process: the driver frees what a
    # dead process held.)
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> int:
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _exit_on_signal)
    opts = json.loads(argv[0]) if argv else {}
    test, nsteps = STEPS[opts.get("mode", "smoke")]
    emit("step", gpu=None, step="reading NVML", fraction=0.0)
    nvml = Nvml()
    emit("fact", gpu=None, data={"nvml_error": nvml.error, "driver_version": nvml.driver_version()})
    emit("step", gpu=None, step="loading libcuda.so.1 and calling cuInit", fraction=0.0)
    try:
        drv = Driver()
    except OSError as exc:
        emit("error", gpu=None, step="loading libcuda.so.1",
             error={"call": "dlopen", "code": None, "name": "LIBCUDA_NOT_LOADABLE", "text": str(exc)})
        emit("done")
        return 0
    try:
        emit("fact", gpu=None, data={"cuda_driver_version": drv.version(), "missing_entry_points": drv.missing})
        drv.call("cuInit", 0)
        count = drv.device_count()
    except CudaError as exc:
        emit("error", gpu=None, step="cuInit", error=exc.to_dict())
        emit("done")
        return 0
    emit("fact", gpu=None, data={"device_count": count})
    wanted = list(range(count)) if opts.get("gpus", "all") == "all" else list(opts["gpus"])
    valid = [o for o in wanted if 0 <= o < count]
    multi = opts.get("mode", "smoke") == "smoke" and len(valid) >= 2 and opts.get("multi_gpu", True)
    phases = len(wanted) + (1 if multi else 0)
    for pos, ordinal in enumerate(wanted):
        if not 0 <= ordinal < count:
            emit("error", gpu=ordinal, step="selecting the GPU",
                 error={"call": "cuDeviceGet", "code": 101, "name": "CUDA_ERROR_INVALID_DEVICE",
                        "text": f"no CUDA device {ordinal}: {count} visible (numbered from 0)"})
            continue
        step = Steps(ordinal, pos, phases, nsteps)
        try:
            test(drv, nvml, ordinal, step, opts)
        except CudaError as exc:
            emit("error", gpu=ordinal, step=step.current, error=exc.to_dict())
    if multi:
        step = Steps(None, len(wanted), phases, MULTI_STEPS)
        try:
            multi_gpu(drv, nvml, valid, step, opts)
        except CudaError as exc:
            emit("error", gpu=None, step=step.current, error=exc.to_dict())
    with contextlib.suppress(Exception):
        nvml.close()
    emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
