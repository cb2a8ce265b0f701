"""The probes that start first: the driver libraries' child process (NVML, libcuda, libcudnn) and, where NVML cannot
list GPUs, nvidia-smi. They are the slowest answers of every `check`, so this module imports only the host and the
child-process helper: :func:`doctor.probes.collect` starts them before it imports the other probes and the facts
model, and runs the loader's `ldconfig -p` while they answer (the libcudnn to ask reaches the child afterwards, on
its standard input)."""

from __future__ import annotations

from typing import Any

from doctor.host import ChildInput, CmdResult, Host
from doctor.probes.base import Recorder, own_python, run_python_child

SMI_ARGV = ("nvidia-smi", "-q", "-x")


def run_native(host: Host, rec: Recorder, cudnn_later: ChildInput | None = None) -> dict[str, Any] | None:
    """Ask NVML and libcuda in a child process (only on the running system), and cudnnGetVersion of the libcudnn
    that ``cudnn_later`` names once the caller knows it (nothing sent, or no ``cudnn_later``: none asked)."""
    if not host.live:
        rec.error("native", "--root: the driver libraries of an inspected image are not called")
        return None
    args = ["--cudnn-stdin"] if cudnn_later is not None else []
    return run_python_child(host, own_python(), "native_child.py", args, host.timeout, "native", rec, own=True,
                            stdin=cudnn_later)


def nvml_cannot_list(host: Host) -> bool:
    """Whether NVML is sure to list no GPU here, so that nvidia-smi's answer will be needed: a live host whose
    kernel module is not loaded (no /proc/driver/nvidia) outside WSL (where NVML works through dxgkrnl)."""
    return (host.live and not host.exists("/proc/driver/nvidia/version") and not host.exists("/usr/lib/wsl/lib")
            and host.which("nvidia-smi") is not None)


def smi_output(host: Host) -> CmdResult | None:
    """What `nvidia-smi -q -x` printed; None when there is no nvidia-smi."""
    if host.which("nvidia-smi") is None:
        return None
    return host.run(list(SMI_ARGV))
