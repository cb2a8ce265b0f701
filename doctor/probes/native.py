"""The probes that start first: the driver libraries' child process (NVML, libcuda, libcudnn) and, where NVML cannot
list GPUs, nvidia-smi. They are the slowest answers of every `check`, so this module imports only the host and the
child-process helper: :func:`doctor.probes.collect` starts them before it imports the other probes and the facts
model, and runs the loader's `ldconfig -p` while they answer (the libcudnn to ask reaches the child afterwards, on
its standard input)."""

from __future__ import annotations

from typing import Any

from doctor import ahead
from doctor.ahead import Ahead
from doctor.host import ChildInput, CmdResult, Host
from doctor.probes.base import Recorder, child_answer, own_python, python_child_argv, run_python_child

SMI_ARGV = ("nvidia-smi", "-q", "-x")


def started_ahead(host: Host) -> Ahead | None:
    """The NVML child `check` started before its imports (:mod:`doctor.ahead`), when ``host`` is the running
    system that would start the very same one; the caller then hands it to :func:`run_native`, and sends the
    libcudnn to ask through its ``stdin``. None otherwise (a child waiting for another host is discarded)."""
    if not host.adopts():
        ahead.discard()
        return None
    return ahead.take(python_child_argv(own_python(), "native_child.py", list(ahead.NATIVE_ARGS), own=True))


def run_native(host: Host, rec: Recorder, cudnn_later: ChildInput | None = None,
               started: Ahead | None = None) -> dict[str, Any] | None:
    """Ask NVML and libcuda in a child process (only on the running system), and cudnnGetVersion of the libcudnn
    that ``cudnn_later`` names once the caller knows it (nothing sent, or no ``cudnn_later``: none asked). The
    child is ``started`` when it was started ahead (:func:`started_ahead`; ``cudnn_later`` is then its input)."""
    if not host.live:
        rec.error("native", "--root: the driver libraries of an inspected image are not called")
        return None
    python = own_python()
    if started is not None:
        return child_answer(host.adopt(started.argv, started.proc, host.timeout, cudnn_later), python, "native", rec)
    args = list(ahead.NATIVE_ARGS) if cudnn_later is not None else []
    return run_python_child(host, python, "native_child.py", args, host.timeout, "native", rec, own=True,
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
