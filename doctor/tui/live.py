"""The live GPU sample behind the GPUs table, through the engine's own probes.

Called once a second from a worker thread while the GPUs view is shown on a live host. It asks
NVML in the probes' child process (killed on timeout), so a wedged driver cannot hang the UI.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.host import Host
from doctor.model.facts import Gpu


@dataclass(frozen=True)
class GpuSample:
    gpus: list[Gpu]
    error: str | None = None  # why NVML gave no GPU list this time


def sample_gpus(host: Host) -> GpuSample:
    from doctor.probes import driver
    from doctor.probes.base import Recorder

    rec = Recorder()
    native = driver.run_native(host, rec, None)
    if native and native.get("gpus"):
        return GpuSample(driver.probe_gpus(host, rec, native, None))
    reason = (native or {}).get("nvml_error") or (rec.errors[0].reason if rec.errors else "NVML listed no GPU")
    return GpuSample([], str(reason))
