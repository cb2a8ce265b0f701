"""NVML readings around an active test (child process only): before, during and after.

Each reading is a plain dict; a value NVML cannot give is None (an old driver, a GeForce card without
ECC). GPUs are matched to CUDA devices by PCI bus id, never by index: CUDA's order (CUDA_DEVICE_ORDER,
CUDA_VISIBLE_DEVICES) need not be NVML's.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from doctor.model.facts_active import bus_key
from doctor.probes.native_child import _THROTTLE_BITS, _process_name

# nvml.h: NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, _UNCORRECTED = 1; NVML_VOLATILE_ECC = 0 (since the last
# driver load: a change during the test is an error the test itself met)
CORRECTED, UNCORRECTED, VOLATILE = 0, 1, 0


class Nvml:
    def __init__(self) -> None:
        self.n: Any = None
        self.error: str | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.n = pynvml
        except ImportError as exc:
            self.error = f"pynvml not importable: {exc}"
        except Exception as exc:  # pynvml.NVMLError and its dynamic subclasses: the library's own text
            self.error = str(exc) or type(exc).__name__

    def driver_version(self) -> str | None:
        """nvmlSystemGetDriverVersion: the driver the test ran on ("550.54.15")."""
        if self.n is None:
            return None
        value = _text(self._call(self.n.nvmlSystemGetDriverVersion))
        return value if isinstance(value, str) else None

    def close(self) -> None:
        if self.n is not None:
            with contextlib.suppress(Exception):
                self.n.nvmlShutdown()

    def handle_for_bus(self, bus_id: str) -> Any:
        """The NVML handle of the GPU at this PCI address ("0000:3B:00.0" as CUDA prints it)."""
        if self.n is None:
            return None
        want = bus_key(bus_id)
        count = self._call(self.n.nvmlDeviceGetCount) or 0
        for i in range(count):
            h = self._call(self.n.nvmlDeviceGetHandleByIndex, i)
            pci = self._call(self.n.nvmlDeviceGetPciInfo, h) if h is not None else None
            if pci is not None and bus_key(_text(pci.busId)) == want:
                return h
        return None

    def reading(self, h: Any) -> dict[str, Any] | None:
        """What NVML says of one GPU now (memory in bytes, as NVML gives it)."""
        if self.n is None or h is None:
            return None
        n = self.n
        out: dict[str, Any] = {"name": _text(self._call(n.nvmlDeviceGetName, h))}
        mem = self._call(n.nvmlDeviceGetMemoryInfo, h)
        out["memory_total"] = int(mem.total) if mem is not None else None
        out["memory_used"] = int(mem.used) if mem is not None else None
        out["memory_free"] = int(mem.free) if mem is not None else None
        out["ecc_uncorrected"] = self._call(n.nvmlDeviceGetTotalEccErrors, h, UNCORRECTED, VOLATILE)
        out["ecc_corrected"] = self._call(n.nvmlDeviceGetTotalEccErrors, h, CORRECTED, VOLATILE)
        ecc_mode = self._call(n.nvmlDeviceGetEccMode, h)
        out["ecc_enabled"] = bool(ecc_mode[0]) if ecc_mode else None
        mask = self._call(n.nvmlDeviceGetCurrentClocksEventReasons, h)
        if mask is None:
            mask = self._call(n.nvmlDeviceGetCurrentClocksThrottleReasons, h)
        out["throttle_mask"] = mask
        out["throttle_reasons"] = [name for bit, name in _THROTTLE_BITS.items() if mask & bit] if mask is not None \
            else None
        out["pcie_gen"] = self._call(n.nvmlDeviceGetCurrPcieLinkGeneration, h)
        out["pcie_width"] = self._call(n.nvmlDeviceGetCurrPcieLinkWidth, h)
        out["pcie_gen_max"] = self._call(n.nvmlDeviceGetMaxPcieLinkGeneration, h)
        out["pcie_width_max"] = self._call(n.nvmlDeviceGetMaxPcieLinkWidth, h)
        out["temperature_c"] = self._call(n.nvmlDeviceGetTemperature, h, 0)
        power = self._call(n.nvmlDeviceGetPowerUsage, h)
        out["power_w"] = power / 1000.0 if power is not None else None
        mig = self._call(n.nvmlDeviceGetMigMode, h)
        out["mig_mode"] = bool(mig[0]) if mig else None
        me = os.getpid()
        procs = self._call(n.nvmlDeviceGetComputeRunningProcesses, h)
        out["processes"] = None if procs is None else [
            {"pid": p.pid, "name": _process_name(p.pid),
             "used_bytes": int(p.usedGpuMemory) if isinstance(p.usedGpuMemory, int) and p.usedGpuMemory < 1 << 60
             else None}
            for p in procs if p.pid != me]
        return out

    def topology(self, a: Any, b: Any) -> int | None:
        """nvmlDeviceGetTopologyCommonAncestor: 0 same board, 10 one PCIe switch (PIX), 20 several (PXB),
        30 the host bridge (PHB), 40 the NUMA node (NODE), 50 across sockets (SYS)."""
        if self.n is None or a is None or b is None:
            return None
        level = self._call(self.n.nvmlDeviceGetTopologyCommonAncestor, a, b)
        return level if isinstance(level, int) else None

    def nvlinks(self, h: Any) -> list[dict[str, Any]] | None:
        """Each NVLink link NVML answers for: {link, active, version, remote_bus}; None when the GPU has none
        (NVML answers NOT_SUPPORTED for link 0) or NVML is not there."""
        if self.n is None or h is None:
            return None
        n = self.n
        links = []
        for link in range(getattr(n, "NVML_NVLINK_MAX_LINKS", 18)):
            try:
                active = n.nvmlDeviceGetNvLinkState(h, link)
            except Exception:  # NOT_SUPPORTED / INVALID_ARGUMENT: no such link on this GPU
                continue
            pci = self._call(n.nvmlDeviceGetNvLinkRemotePciInfo, h, link)
            links.append({"link": link, "active": bool(active),
                          "version": self._call(n.nvmlDeviceGetNvLinkVersion, h, link),
                          "remote_bus": _text(pci.busId) if pci is not None else None})
        return links or None

    @staticmethod
    def _call(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:
            return None


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
