"""Hold GPU memory as another user's job would, for gpu-validate's "oom must refuse" step.

    python3 hold_memory.py MIB SECONDS

Creates a CUDA context on GPU 0 through the driver API (ctypes, no framework), allocates MIB MiB, prints one
line "holding …" and sleeps SECONDS (or until SIGTERM). A context makes the process a compute process in
NVML's list, which is what `gpu-doctor oom` reads before it refuses. Any failure is printed and exits 1.
"""

import ctypes
import os
import signal
import sys
import time


def main() -> int:
    mib, seconds = int(sys.argv[1]), float(sys.argv[2])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        print(f"cannot load libcuda.so.1: {exc}", flush=True)
        return 1
    cuda.cuCtxCreate_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_int]
    cuda.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    device, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    for name, call in (("cuInit", lambda: cuda.cuInit(0)),
                       ("cuDeviceGet", lambda: cuda.cuDeviceGet(ctypes.byref(device), 0)),
                       ("cuCtxCreate_v2", lambda: cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, device)),
                       ("cuMemAlloc_v2", lambda: cuda.cuMemAlloc_v2(ctypes.byref(ptr), mib << 20))):
        rc = call()
        if rc:
            print(f"{name} failed with CUresult {rc}", flush=True)
            return 1
    print(f"holding {mib} MiB on GPU 0 in pid {os.getpid()}", flush=True)
    time.sleep(seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
