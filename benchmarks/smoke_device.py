#!/usr/bin/env python3
"""On a real GPU: where the smoke test's time goes, and which copy kernel measures device memory bandwidth best.

Two parts, both printed as a table and written as JSON (``--out``, default ``$OUT/smoke-device.json`` when the
device tool's ``$OUT`` is set):

1. ``steps``: the smoke test's own child (``python -m doctor.active.gpu_child``) run as ``gpu-doctor smoke`` runs
   it, each event stamped as it arrives, so every step's seconds show (cuInit, the context, the JIT, the copies,
   the FMA kernel, the cleanup).
2. ``copy``: copy kernels timed with CUDA events over device buffers: the kernel in ``doctor/kernels/copy.ptx``
   and any ``--ptx FILE`` given (an entry named ``copy_v4`` with the same parameters), at several grid sizes,
   buffer sizes and launches per timing, against the driver's own ``cuMemcpyDtoD``. Each result is checked
   byte for byte on an odd-sized buffer first, so a faster kernel that copies wrong never wins.

Usage (the repository's root on ``sys.path``; any Python >= 3.10 with pynvml for part 1):
    python benchmarks/smoke_device.py [--ptx FILE ...] [--out FILE]
Needs libcuda and a GPU; without them it says so and exits 1.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from doctor.active.cudadrv import (  # noqa: E402
    ATTR_MAX_THREADS_PER_MULTIPROCESSOR,
    ATTR_MULTIPROCESSOR_COUNT,
    CudaError,
    Driver,
)

MIB = 1 << 20
BLOCK = 256


def steps(size_mib: int, mode: str = "smoke", tree: Path = REPO) -> dict[str, Any]:
    """The real smoke (or OOM) child of ``tree``, every event line stamped with the seconds since it started."""
    opts = {"mode": mode, "gpus": "all", "size_mib": size_mib}
    argv = [sys.executable, "-m", "doctor.active.gpu_child", json.dumps(opts)]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tree)
    assert proc.stdout is not None
    events = []
    for line in proc.stdout:
        t = time.monotonic() - t0
        if line.startswith("@@GPU-DOCTOR@@"):
            event = json.loads(line[len("@@GPU-DOCTOR@@"):])
            events.append({"t": round(t, 4), "event": event["event"], "step": event.get("step"),
                           "keys": sorted(event.get("data", {}))})
    proc.wait(timeout=120)
    total = time.monotonic() - t0
    timeline = []
    marks = [e for e in events if e["event"] == "step"] + [{"t": total, "step": "(exit)"}]
    for a, b in itertools.pairwise(marks):
        timeline.append({"step": a["step"], "seconds": round(b["t"] - a["t"], 4)})
    return {"mode": mode, "tree": str(tree), "size_mib": size_mib, "total_s": round(total, 4),
            "returncode": proc.returncode, "timeline": timeline,
            "events": events, "stderr": proc.stderr.read()[-2000:] if proc.stderr else ""}


class Copy:
    def __init__(self, drv: Driver, ptx: bytes, label: str) -> None:
        self.drv, self.label = drv, label
        self.module = drv.load_ptx(ptx)
        self.func = drv.function(self.module, "copy_v4")

    def launcher(self, grid: int, dst: int, src: int, n16: int) -> Any:
        def run() -> None:
            self.drv.launch(self.func, grid, BLOCK, [ctypes.c_uint64(dst), ctypes.c_uint64(src), ctypes.c_uint64(n16)])
        return run


def best_ms(drv: Driver, start: int, stop: int, run: Any, reps: int, tries: int = 5) -> float:
    run()  # warm-up: the first launch pays for loading the kernel
    drv.call("cuCtxSynchronize")
    times = []
    for _ in range(tries):
        drv.call("cuEventRecord", start, None)
        for _ in range(reps):
            run()
        drv.call("cuEventRecord", stop, None)
        drv.call("cuEventSynchronize", stop)
        times.append(drv.elapsed_ms(start, stop) / reps)
    return min(times)


def copies(ptx_files: list[Path]) -> dict[str, Any]:
    drv = Driver()
    drv.call("cuInit", 0)
    dev = drv.device(0)
    sms = drv.attribute(ATTR_MULTIPROCESSOR_COUNT, dev)
    per_sm = drv.attribute(ATTR_MAX_THREADS_PER_MULTIPROCESSOR, dev) // BLOCK
    ctx = drv.ctx_create(dev)
    out: dict[str, Any] = {"name": drv.name(dev), "sm_count": sms, "blocks_per_sm": per_sm, "results": [],
                           "checks": []}
    kernels = [Copy(drv, (REPO / "doctor/kernels/copy.ptx").read_bytes(), "copy.ptx")]
    kernels += [Copy(drv, p.read_bytes(), p.name) for p in ptx_files]
    start, stop = drv.event(), drv.event()
    biggest = 1024 * MIB
    src, dst = drv.alloc(biggest + MIB), drv.alloc(biggest + MIB)
    host_a, host_b = drv.host_alloc(64 * MIB), drv.host_alloc(64 * MIB)
    pattern = bytes(range(251)) * (64 * MIB // 251 + 1)
    ctypes.memmove(host_a, pattern, 64 * MIB)
    dtod = drv.lib.cuMemcpyDtoD_v2
    dtod.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t]
    # correctness on an odd size (not a multiple of the grid or of 4 vectors) at every grid: byte for byte
    odd = 64 * MIB - 16 * 7
    for k in kernels:
        for grid in (1024, sms * per_sm, sms * per_sm * 4):
            drv.call("cuMemcpyHtoD_v2", src, host_a, 64 * MIB)
            drv.call("cuMemcpyHtoD_v2", dst, host_b, 64 * MIB)  # whatever was there: not the pattern
            k.launcher(grid, dst, src, odd // 16)()
            drv.call("cuCtxSynchronize")
            drv.call("cuMemcpyDtoH_v2", host_b, dst, 64 * MIB)
            got = ctypes.string_at(host_b, odd)
            out["checks"].append({"kernel": k.label, "grid": grid, "bytes": odd, "exact": got == pattern[:odd]})
    for size_mib in (256, 1024):
        size = size_mib * MIB
        n16 = size // 16
        grids = {"1024": 1024, "sm*occ": sms * per_sm, "4*sm*occ": 4 * sms * per_sm,
                 "one per vector": n16 // BLOCK}
        for reps in (1, 10):
            ms = best_ms(drv, start, stop, lambda size=size: drv.call("cuMemcpyDtoD_v2", dst, src, size), reps)
            out["results"].append({"kernel": "cuMemcpyDtoD", "grid": None, "mib": size_mib, "reps": reps,
                                   "ms": ms, "gbs": 2 * size / ms / 1e6})
            for k in kernels:
                for gname, grid in grids.items():
                    if gname == "one per vector" and k.label != "copy.ptx":
                        grid = max(1, n16 // BLOCK // 4)  # four vectors per thread
                    ms = best_ms(drv, start, stop, k.launcher(grid, dst, src, n16), reps)
                    out["results"].append({"kernel": k.label, "grid": f"{gname} ({grid})", "mib": size_mib,
                                           "reps": reps, "ms": ms, "gbs": 2 * size / ms / 1e6})
    drv.call("cuCtxDestroy_v2", ctx)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ptx", type=Path, action="append", default=[], help="another copy_v4 kernel to time")
    default = Path(os.environ["OUT"]) / "smoke-device.json" if os.environ.get("OUT") else None
    ap.add_argument("--out", type=Path, default=default, help="write the results as JSON here")
    ap.add_argument("--steps-mib", type=int, action="append", default=[],
                    help="part 1's buffer size (--size-mib of the smoke test); repeat to compare (default 256)")
    ap.add_argument("--oom", action="store_true", help="part 1 also times the OOM probe's child")
    ap.add_argument("--tree", type=Path, action="append", default=[],
                    help="part 1 also runs the children of this other source tree (holding doctor/), to compare")
    ap.add_argument("--no-steps", action="store_true", help="skip part 1 (the smoke child's timeline)")
    ap.add_argument("--no-copy", action="store_true", help="skip part 2 (the copy kernels)")
    args = ap.parse_args()
    result: dict[str, Any] = {}
    if not args.no_steps:
        modes = ["smoke", "oom"] if args.oom else ["smoke"]
        result["steps"] = [steps(mib, mode, tree) for tree in [REPO, *args.tree] for mode in modes
                           for mib in (args.steps_mib or [256] if mode == "smoke" else [256])]
        for run in result["steps"]:
            print(f"{run['mode']} child of {run['tree']}, {run['size_mib']} MiB: {run['total_s']:.3f} s, "
                  f"exit {run['returncode']}")
            for row in run["timeline"]:
                print(f"  {row['seconds']:7.3f} s  {row['step']}")
    if args.no_copy:
        if args.out:
            args.out.write_text(json.dumps(result, indent=1))
        return 0
    try:
        result["copy"] = copies(args.ptx)
    except (OSError, CudaError) as exc:
        print(f"smoke_device: no GPU to time copies on: {exc}", file=sys.stderr)
        result["copy_error"] = str(exc)
    else:
        c = result["copy"]
        print(f"copies on {c['name']} ({c['sm_count']} SMs, {c['blocks_per_sm']} blocks of {BLOCK} per SM)")
        for chk in c["checks"]:
            print(f"  exact: {chk['exact']}  {chk['kernel']} grid {chk['grid']} {chk['bytes']} bytes")
        for r in c["results"]:
            print(f"  {r['gbs']:8.1f} GB/s  {r['ms']:8.4f} ms  {r['mib']:5d} MiB x{r['reps']:<3d} {r['kernel']} "
                  f"{r['grid'] or ''}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return 0 if "copy" in result else 1


if __name__ == "__main__":
    sys.exit(main())
