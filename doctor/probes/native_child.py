"""Runs in a child process: asks the driver libraries (NVML, libcuda, libcudnn) what they know.

Why a child: a call into a wedged driver can block forever inside C code, and initialising CUDA
changes the process that does it. The parent gives this process a timeout and kills it; all it
does is print one JSON object. Every call is guarded: one failing query never hides the others.

Usage: python native_child.py [--cudnn-stdin]   (the libcudnn's path is read from standard input to its end, once
NVML and libcuda have answered; empty: no libcudnn to ask)
"""

from __future__ import annotations

import ctypes
import sys

# What this child imports is its start-up, on the critical path of every `check`: no json (re, enum), contextlib
# or typing (~15 ms together with -S); the annotations are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

CUDA_ERROR_NAMES = {
    0: "CUDA_SUCCESS",
    1: "CUDA_ERROR_INVALID_VALUE",
    2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    304: "CUDA_ERROR_OPERATING_SYSTEM",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}


def _str(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def probe_cuda(out: dict[str, Any]) -> None:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        out["cuda_error"] = f"libcuda.so.1 not loadable: {exc}"
        return
    version = ctypes.c_int(0)
    rc = lib.cuDriverGetVersion(ctypes.byref(version))
    if rc == 0:
        out["cuda_driver_version_int"] = version.value
    else:
        out["cuda_error"] = f"cuDriverGetVersion returned {rc}"
    rc = lib.cuInit(0)
    name = ctypes.c_char_p()
    text = ctypes.c_char_p()
    try:
        if lib.cuGetErrorName(rc, ctypes.byref(name)) == 0 and name.value:
            out["cuinit_name"] = _str(name.value)
        if lib.cuGetErrorString(rc, ctypes.byref(text)) == 0 and text.value:
            out["cuinit_text"] = _str(text.value)
    except AttributeError:
        pass
    out["cuinit_result"] = rc
    out.setdefault("cuinit_name", CUDA_ERROR_NAMES.get(rc, f"CUDA error {rc}"))
    if rc == 0:
        count = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(count)) == 0:
            out["cuda_device_count"] = count.value
            ccs: list[dict[str, Any] | None] = []
            for i in range(count.value):
                dev = ctypes.c_int(0)
                major, minor = ctypes.c_int(0), ctypes.c_int(0)
                if lib.cuDeviceGet(ctypes.byref(dev), i) != 0:
                    ccs.append(None)
                    continue
                # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
                lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)
                lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)
                bus = ctypes.create_string_buffer(64)
                lib.cuDeviceGetPCIBusId(bus, 64, dev)
                ccs.append({"cc": f"{major.value}.{minor.value}", "pci_bus_id": _str(bus.value)})
            out["cuda_devices"] = ccs


NVML_ERROR_DRIVER_NOT_LOADED = 9  # nvml.h; pynvml's text for it, and the library's own (nvmlErrorString)


def _nvml_first_init() -> tuple[Any, int] | None:
    """(the library, nvmlInitWithFlags(0)'s return code) when libnvidia-ml.so.1 loads and pynvml can be imported;
    None otherwise (then pynvml does everything and says what failed).

    Why before pynvml: on a machine whose kernel driver is not loaded, the most common case gpu-doctor diagnoses,
    this answer is all NVML gives, and importing pynvml (~60 ms, most of this process's work) would only wrap it.
    The library is the one pynvml loads (the same soname, so the same handle): when the call succeeds, pynvml's
    own nvmlInit only adds a reference, and the matching nvmlShutdown is called at the end."""
    if not any(_finds(f, "pynvml") for f in sys.meta_path):
        return None  # "pynvml not importable" is pynvml's path to say, with its reason
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        return lib, int(lib.nvmlInitWithFlags(0))
    except (OSError, AttributeError):  # no library, or one without nvmlInitWithFlags: pynvml tells
        return None


def _finds(finder: Any, name: str) -> bool:
    find_spec = getattr(finder, "find_spec", None)
    try:
        return find_spec is not None and find_spec(name, None) is not None
    except Exception:  # a broken import hook: let the import itself say so
        return True


def probe_nvml(out: dict[str, Any]) -> None:
    first = _nvml_first_init()
    if first is not None and first[1] == NVML_ERROR_DRIVER_NOT_LOADED:
        out["nvml_error"] = "Driver Not Loaded"
        return
    try:
        _probe_nvml(out)
    finally:
        if first is not None and first[1] == 0:
            try:  # noqa: SIM105  (contextlib is not imported here: see the imports)
                first[0].nvmlShutdown()
            except Exception:  # the answer is already learned; a failing shutdown changes nothing of it
                pass


def _import_pynvml() -> Any:
    try:
        import pynvml
    except ImportError:
        if not sys.flags.no_site:
            raise
        # Started without the site module (-S) and handed the parent's import path: a pynvml that only a .pth
        # file's code makes importable still is, once the site module has run.
        import site

        site.main()
        import pynvml
    return pynvml


def _probe_nvml(out: dict[str, Any]) -> None:
    try:
        n = _import_pynvml()
    except ImportError as exc:
        out["nvml_error"] = f"pynvml not importable: {exc}"
        return
    try:
        n.nvmlInit()
    except n.NVMLError as exc:
        out["nvml_error"] = str(exc)
        return
    except Exception as exc:
        out["nvml_error"] = f"{type(exc).__name__}: {exc}"
        return
    try:
        out["nvml_driver_version"] = _str(n.nvmlSystemGetDriverVersion())
        out["nvml_cuda_driver_version_int"] = _call(n.nvmlSystemGetCudaDriverVersion)
        count = n.nvmlDeviceGetCount()
        gpus, lost = [], []
        for i in range(count):
            # One lost GPU ("GPU is lost", Xid 79) must not hide the healthy ones.
            try:
                gpus.append(_nvml_gpu(n, i))
            except n.NVMLError as exc:
                lost.append(f"GPU {i}: {exc}")
        out["gpus"] = gpus
        if lost:
            out["gpu_errors"] = lost
    except n.NVMLError as exc:
        out["nvml_error"] = str(exc)
    finally:
        try:  # noqa: SIM105  (contextlib is not imported here: see the imports)
            n.nvmlShutdown()
        except Exception:  # the answer is already learned; a failing shutdown changes nothing of it
            pass


def _call(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        return None


def _nvml_gpu(n: Any, i: int) -> dict[str, Any]:
    h = n.nvmlDeviceGetHandleByIndex(i)
    gpu: dict[str, Any] = {"index": i, "source": "nvml"}
    gpu["name"] = _str(_call(n.nvmlDeviceGetName, h))
    gpu["uuid"] = _str(_call(n.nvmlDeviceGetUUID, h))
    pci = _call(n.nvmlDeviceGetPciInfo, h)
    if pci is not None:
        gpu["pci_bus_id"] = _str(pci.busId)
        gpu["pci_device_id"] = f"0x{pci.pciDeviceId:08X}"
    cc = _call(n.nvmlDeviceGetCudaComputeCapability, h)
    gpu["compute_capability"] = f"{cc[0]}.{cc[1]}" if cc else None
    mem = _call(n.nvmlDeviceGetMemoryInfo, h)
    if mem is not None:
        gpu["memory_total_mib"] = int(mem.total // (1024 * 1024))
        gpu["memory_used_mib"] = int(mem.used // (1024 * 1024))
    mig = _call(n.nvmlDeviceGetMigMode, h)
    gpu["mig_mode"] = bool(mig[0]) if mig else None
    pm = _call(n.nvmlDeviceGetPersistenceMode, h)
    gpu["persistence_mode"] = bool(pm) if pm is not None else None
    # NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1, NVML_VOLATILE_ECC = 0
    gpu["ecc_uncorrected"] = _call(n.nvmlDeviceGetTotalEccErrors, h, 1, 0)
    pending = _call(n.nvmlDeviceGetRetiredPagesPendingStatus, h)
    gpu["retired_pages_pending"] = bool(pending) if pending is not None else None
    remap = _call(n.nvmlDeviceGetRemappedRows, h)
    gpu["remapped_rows_pending"] = bool(remap[2]) if remap else None
    gpu["temperature_c"] = _call(n.nvmlDeviceGetTemperature, h, 0)
    util = _call(n.nvmlDeviceGetUtilizationRates, h)
    gpu["utilization_pct"] = int(util.gpu) if util is not None else None
    power = _call(n.nvmlDeviceGetPowerUsage, h)
    gpu["power_draw_w"] = power / 1000.0 if power is not None else None
    gpu["pcie_gen_current"] = _call(n.nvmlDeviceGetCurrPcieLinkGeneration, h)
    gpu["pcie_gen_max"] = _call(n.nvmlDeviceGetMaxPcieLinkGeneration, h)
    gpu["pcie_width_current"] = _call(n.nvmlDeviceGetCurrPcieLinkWidth, h)
    gpu["pcie_width_max"] = _call(n.nvmlDeviceGetMaxPcieLinkWidth, h)
    reasons = _call(n.nvmlDeviceGetCurrentClocksThrottleReasons, h)
    gpu["throttle_reasons"] = _throttle_names(n, reasons) if reasons is not None else None
    procs = _call(n.nvmlDeviceGetComputeRunningProcesses, h) or []
    gpu["processes"] = [
        {
            "pid": p.pid,
            "name": _process_name(p.pid),
            "used_mib": int(p.usedGpuMemory // (1024 * 1024)) if isinstance(p.usedGpuMemory, int) else None,
        }
        for p in procs
    ]
    gpu["mig_devices"] = []
    if gpu["mig_mode"]:
        for j in range(_call(n.nvmlDeviceGetMaxMigDeviceCount, h) or 0):
            mh = _call(n.nvmlDeviceGetMigDeviceHandleByIndex, h, j)
            if mh is None:
                continue
            mmem = _call(n.nvmlDeviceGetMemoryInfo, mh)
            gpu["mig_devices"].append(
                {
                    "index": j,
                    "uuid": _str(_call(n.nvmlDeviceGetUUID, mh)),
                    "name": _str(_call(n.nvmlDeviceGetName, mh)),
                    "memory_total_mib": int(mmem.total // (1024 * 1024)) if mmem else None,
                }
            )
    return gpu


_THROTTLE_BITS = {
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def _throttle_names(_n: Any, mask: int) -> list[str]:
    # Bit values from nvml.h (nvmlClocksThrottleReason*); 0x1 (GPU idle) is not a slowdown.
    return [name for bit, name in _THROTTLE_BITS.items() if mask & bit]


def _process_name(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def probe_cudnn(out: dict[str, Any], path: str) -> None:
    try:
        lib = ctypes.CDLL(path)
        lib.cudnnGetVersion.restype = ctypes.c_size_t
        out["cudnn_version_int"] = int(lib.cudnnGetVersion())
    except (OSError, AttributeError) as exc:
        out["cudnn_error"] = str(exc)


def emit(section: str, out: dict[str, Any]) -> None:
    """Print one section as soon as it is known: if a later call hangs and the parent kills us, what
    was already learned survives (the parent reads every section that arrived)."""
    sys.stdout.write("\n@@GPU-DOCTOR@@" + dumps({"section": section, **out}))
    sys.stdout.flush()


class _NotPlain(Exception):
    """A value :func:`dumps` leaves to the json module."""


def dumps(value: Any) -> str:
    """``json.dumps(value)``, the same text, for the plain values this child prints (dicts with string keys,
    lists, strings, ints, finite floats, booleans, None) without importing json; anything else goes to json."""
    quote: Callable[[str], str] | None
    try:
        from _json import encode_basestring_ascii as quote
    except ImportError:
        quote = None
    if quote is not None:
        try:
            return _plain(value, quote)
        except _NotPlain:
            pass
    import json

    return json.dumps(value)


def _plain(value: Any, quote: Any) -> str:
    kind = type(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float and value == value and value not in (float("inf"), float("-inf")):
        return float.__repr__(value)
    if kind is str:
        return str(quote(value))
    if kind is list or kind is tuple:
        return "[" + ", ".join(_plain(v, quote) for v in value) + "]"
    if kind is dict and all(type(k) is str for k in value):
        return "{" + ", ".join(f"{quote(k)}: {_plain(v, quote)}" for k, v in value.items()) + "}"
    raise _NotPlain


def main(argv: list[str]) -> int:
    nvml: dict[str, Any] = {}
    probe_nvml(nvml)
    emit("nvml", nvml)
    cuda: dict[str, Any] = {}
    probe_cuda(cuda)
    emit("libcuda", cuda)
    path = None
    if argv[:1] == ["--cudnn-stdin"]:
        # The parent starts this child before its loader probe has found the libcudnn: it sends the path (or
        # nothing) and closes the pipe meanwhile, long before NVML and libcuda have answered here.
        data = sys.stdin.buffer.read() if sys.stdin is not None else b""
        path = data.decode(sys.getfilesystemencoding(), "surrogateescape") if data else None
    if path:
        cudnn: dict[str, Any] = {}
        probe_cudnn(cudnn, path)
        emit("cudnn", cudnn)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
