"""A live GPU sample: what the GPUs table of the TUI shows once a second on a live host."""

from __future__ import annotations

from dataclasses import dataclass

from doctor.model.facts import Gpu


@dataclass(frozen=True)
class GpuSample:
    gpus: list[Gpu]
    error: str | None = None  # why NVML gave no GPU list this time
