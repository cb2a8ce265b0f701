"""The CUDA driver API through ctypes, for the child process only (never imported by the parent).

Every entry point gets explicit ``argtypes``/``restype`` so sizes are ``size_t``, device pointers are
64-bit ``CUdeviceptr`` and handles are pointers: without them ctypes would pass Python ints as 32-bit C
ints and truncate an 80 GB size or a device address. A failing call raises :class:`CudaError` carrying
the driver's own name and text for the code (``cuGetErrorName``/``cuGetErrorString``), and the call.
"""

from __future__ import annotations

import ctypes
from typing import Any

CUresult = ctypes.c_int
CUdevice = ctypes.c_int
CUdeviceptr = ctypes.c_uint64
HANDLE = ctypes.c_void_p  # CUcontext, CUmodule, CUfunction, CUevent, CUstream
P = ctypes.POINTER

# The entry points we call and their C signatures (cuda.h). The _v2 names are the ABI every driver
# since CUDA 4.0 exports; cuda.h maps the plain names onto them.
SIGNATURES: dict[str, list[Any]] = {
    "cuInit": [ctypes.c_uint],
    "cuDriverGetVersion": [P(ctypes.c_int)],
    "cuGetErrorName": [CUresult, P(ctypes.c_char_p)],
    "cuGetErrorString": [CUresult, P(ctypes.c_char_p)],
    "cuDeviceGetCount": [P(ctypes.c_int)],
    "cuDeviceGet": [P(CUdevice), ctypes.c_int],
    "cuDeviceGetName": [ctypes.c_char_p, ctypes.c_int, CUdevice],
    "cuDeviceGetAttribute": [P(ctypes.c_int), ctypes.c_int, CUdevice],
    "cuDeviceGetPCIBusId": [ctypes.c_char_p, ctypes.c_int, CUdevice],
    "cuDeviceTotalMem_v2": [P(ctypes.c_size_t), CUdevice],
    "cuCtxCreate_v2": [P(HANDLE), ctypes.c_uint, CUdevice],
    "cuCtxDestroy_v2": [HANDLE],
    "cuCtxSynchronize": [],
    "cuMemGetInfo_v2": [P(ctypes.c_size_t), P(ctypes.c_size_t)],
    "cuMemAlloc_v2": [P(CUdeviceptr), ctypes.c_size_t],
    "cuMemFree_v2": [CUdeviceptr],
    "cuMemHostAlloc": [P(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint],
    "cuMemFreeHost": [ctypes.c_void_p],
    "cuMemcpyHtoD_v2": [CUdeviceptr, ctypes.c_void_p, ctypes.c_size_t],
    "cuMemcpyDtoH_v2": [ctypes.c_void_p, CUdeviceptr, ctypes.c_size_t],
    "cuModuleLoadDataEx": [P(HANDLE), ctypes.c_void_p, ctypes.c_uint, P(ctypes.c_int), P(ctypes.c_void_p)],
    "cuModuleUnload": [HANDLE],
    "cuModuleGetFunction": [P(HANDLE), HANDLE, ctypes.c_char_p],
    "cuLaunchKernel": [HANDLE, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                       ctypes.c_uint, ctypes.c_uint, HANDLE, P(ctypes.c_void_p), P(ctypes.c_void_p)],
    "cuEventCreate": [P(HANDLE), ctypes.c_uint],
    "cuEventRecord": [HANDLE, HANDLE],
    "cuEventSynchronize": [HANDLE],
    "cuEventElapsedTime": [P(ctypes.c_float), HANDLE, HANDLE],
    "cuEventDestroy_v2": [HANDLE],
    # several GPUs: switch contexts, peer access between them, copies from one GPU's memory to another's
    "cuCtxSetCurrent": [HANDLE],
    "cuDeviceCanAccessPeer": [P(ctypes.c_int), CUdevice, CUdevice],
    "cuCtxEnablePeerAccess": [HANDLE, ctypes.c_uint],
    "cuMemcpyPeer": [CUdeviceptr, HANDLE, CUdeviceptr, HANDLE, ctypes.c_size_t],
}

# CUdevice_attribute values (cuda.h)
ATTR_MAX_THREADS_PER_BLOCK = 1
ATTR_MULTIPROCESSOR_COUNT = 16
ATTR_MAX_THREADS_PER_MULTIPROCESSOR = 39
ATTR_CC_MAJOR = 75
ATTR_CC_MINOR = 76
# CUjit_option values
JIT_ERROR_LOG_BUFFER = 5
JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
OUT_OF_MEMORY = 2
PEER_ACCESS_ALREADY_ENABLED = 704


class CudaError(Exception):
    """A driver call that did not return CUDA_SUCCESS."""

    def __init__(self, call: str, code: int, name: str, text: str, log: str | None = None) -> None:
        super().__init__(f"{call}: {name} ({code}): {text}")
        self.call, self.code, self.name, self.text, self.log = call, code, name, text, log

    def to_dict(self) -> dict[str, Any]:
        return {"call": self.call, "code": self.code, "name": self.name, "text": self.text, "log": self.log}


class Driver:
    """libcuda.so.1 with typed entry points. ``missing`` lists the ones this driver does not export."""

    def __init__(self, path: str = "libcuda.so.1") -> None:
        self.lib = ctypes.CDLL(path)
        self.missing: list[str] = []
        for name, argtypes in SIGNATURES.items():
            try:
                fn = getattr(self.lib, name)
            except AttributeError:
                self.missing.append(name)
                continue
            fn.argtypes = argtypes
            fn.restype = CUresult

    def describe(self, code: int) -> tuple[str, str]:
        """The driver's name and text for a CUresult (cuGetErrorName / cuGetErrorString)."""
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        try:
            got_name = self.lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value
            got_text = self.lib.cuGetErrorString(code, ctypes.byref(text)) == 0 and text.value
        except AttributeError:
            got_name = got_text = None
        return (name.value.decode() if got_name and name.value else f"CUDA error {code}",
                text.value.decode("utf-8", "replace") if got_text and text.value else "")

    def call(self, name: str, *args: Any, log: Any = None) -> None:
        """Call an entry point; raise CudaError unless it returns CUDA_SUCCESS."""
        if name in self.missing:
            raise CudaError(name, -1, "MISSING_ENTRY_POINT", f"this libcuda.so.1 does not export {name}")
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            err_name, text = self.describe(rc)
            raise CudaError(name, rc, err_name, text, log)

    def rc(self, name: str, *args: Any) -> int:
        """Call an entry point and return its CUresult (for calls whose failure is an answer: cuMemAlloc)."""
        return int(getattr(self.lib, name)(*args))

    # --- the calls the tests make, with C types in and Python values out ------------------------

    def version(self) -> int:
        v = ctypes.c_int(0)
        self.call("cuDriverGetVersion", ctypes.byref(v))
        return v.value

    def device_count(self) -> int:
        n = ctypes.c_int(0)
        self.call("cuDeviceGetCount", ctypes.byref(n))
        return n.value

    def device(self, ordinal: int) -> int:
        d = CUdevice(0)
        self.call("cuDeviceGet", ctypes.byref(d), ordinal)
        return d.value

    def attribute(self, attr: int, dev: int) -> int:
        v = ctypes.c_int(0)
        self.call("cuDeviceGetAttribute", ctypes.byref(v), attr, dev)
        return v.value

    def name(self, dev: int) -> str:
        buf = ctypes.create_string_buffer(256)
        self.call("cuDeviceGetName", buf, 256, dev)
        return buf.value.decode("utf-8", "replace")

    def pci_bus_id(self, dev: int) -> str:
        buf = ctypes.create_string_buffer(64)
        self.call("cuDeviceGetPCIBusId", buf, 64, dev)
        return buf.value.decode()

    def total_mem(self, dev: int) -> int:
        v = ctypes.c_size_t(0)
        self.call("cuDeviceTotalMem_v2", ctypes.byref(v), dev)
        return v.value

    def ctx_create(self, dev: int) -> int:
        ctx = HANDLE()
        self.call("cuCtxCreate_v2", ctypes.byref(ctx), 0, dev)
        return ctx.value or 0

    def mem_info(self) -> tuple[int, int]:
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        self.call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
        return free.value, total.value

    def try_alloc(self, size: int) -> tuple[int, int]:
        """(CUresult, device pointer): an out-of-memory answer is a result here, not an exception."""
        ptr = CUdeviceptr(0)
        return self.rc("cuMemAlloc_v2", ctypes.byref(ptr), size), ptr.value

    def alloc(self, size: int) -> int:
        ptr = CUdeviceptr(0)
        self.call("cuMemAlloc_v2", ctypes.byref(ptr), size)
        return ptr.value

    def free(self, ptr: int) -> None:
        self.call("cuMemFree_v2", ptr)

    def host_alloc(self, size: int) -> int:
        p = ctypes.c_void_p()
        self.call("cuMemHostAlloc", ctypes.byref(p), size, 0)
        return p.value or 0

    def load_ptx(self, ptx: bytes) -> int:
        """cuModuleLoadDataEx with the JIT's error log captured (it is the evidence for INVALID_PTX)."""
        log = ctypes.create_string_buffer(4096)
        options = (ctypes.c_int * 2)(JIT_ERROR_LOG_BUFFER, JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        values = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(4096))
        image = ctypes.create_string_buffer(ptx + b"\0")
        module = HANDLE()
        rc = self.rc("cuModuleLoadDataEx", ctypes.byref(module), image, 2, options, values)
        if rc != 0:
            name, text = self.describe(rc)
            raise CudaError("cuModuleLoadDataEx", rc, name, text, log.value.decode("utf-8", "replace") or None)
        return module.value or 0

    def function(self, module: int, name: str) -> int:
        f = HANDLE()
        self.call("cuModuleGetFunction", ctypes.byref(f), module, name.encode())
        return f.value or 0

    def launch(self, func: int, grid: int, block: int, args: list[Any]) -> None:
        """cuLaunchKernel on a 1-D grid; ``args`` are ctypes values, passed as an array of pointers to them."""
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args])
        self.call("cuLaunchKernel", func, grid, 1, 1, block, 1, 1, 0, None, params, None)

    def event(self) -> int:
        ev = HANDLE()
        self.call("cuEventCreate", ctypes.byref(ev), 0)
        return ev.value or 0

    def elapsed_ms(self, start: int, end: int) -> float:
        ms = ctypes.c_float(0)
        self.call("cuEventElapsedTime", ctypes.byref(ms), start, end)
        return float(ms.value)


    def can_access_peer(self, dev: int, peer: int) -> bool:
        v = ctypes.c_int(0)
        self.call("cuDeviceCanAccessPeer", ctypes.byref(v), dev, peer)
        return bool(v.value)

    def set_current(self, ctx: int) -> None:
        self.call("cuCtxSetCurrent", ctx or None)
