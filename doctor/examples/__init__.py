"""Example facts snapshots of real-world hosts, for `gpu-doctor demo` (and `check --facts`).

Each JSON file is a facts v1 snapshot written by scripts/gen_examples.py; this module lists them in
the order the demo shows them, each with a title and a one-line description. No Textual here: the
examples are data, usable from any command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from doctor.model.records import dataclass

if TYPE_CHECKING:
    from doctor.model.facts import Facts


@dataclass(frozen=True)
class Example:
    """One bundled example host: its snapshot's name, a title and a line saying what it shows."""

    name: str  # the file name without .json; also `gpu-doctor demo NAME`
    title: str
    description: str

    def text(self) -> str:
        from importlib import resources  # when an example is read: `demo` lists them before its first frame

        return resources.files(__name__).joinpath(f"{self.name}.json").read_text(encoding="utf-8")

    def facts(self) -> Facts:
        from doctor.model.facts import load_facts  # the list is read by `demo`'s arguments; the model when loaded

        return load_facts(self.text())


EXAMPLES: tuple[Example, ...] = (
    Example("r470-geforce-cu124-torch", "CUDA 12 PyTorch on an R470 driver",
            "A GeForce RTX 3080 desktop still on driver 470.63.01 (CUDA 11.4) after `pip install torch` "
            "brought a cu124 build."),
    Example("rtx5090-cu124-torch", "RTX 5090 with a cu124 PyTorch",
            "A new Blackwell card (sm_120) on driver 570 with torch 2.5.1+cu124, whose kernels stop at sm_90."),
    Example("module-userspace-mismatch", "Driver/library mismatch after an upgrade",
            "unattended-upgrades replaced the 535 user space; the old kernel module is still loaded, "
            "so nvidia-smi fails."),
    Example("shared-p100-memory-held", "Shared server: GPU memory already taken",
            "Two Tesla P100s whose memory a job in another container holds: the next job runs out of memory."),
    Example("healthy-8x-h100", "Healthy 8×H100 training node",
            "Driver 550, CUDA 12.4, torch 2.5.1+cu124 and cuDNN 9 that all fit together."),
    Example("debian12-535-no-gpu", "NVIDIA user space, no GPU, no module",
            "gpu-doctor's own development container: Debian 12 with NVIDIA's 535 libraries but no GPU "
            "attached."),
)


def by_name(name: str) -> Example | None:
    return next((e for e in EXAMPLES if e.name == name), None)
