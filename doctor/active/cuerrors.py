"""What a CUDA driver error means, in plain words, and which finding it becomes. Pure data.

Keys are the driver's own names (cuGetErrorName); the numbers and texts are those of the real libcuda
535.309.01 (Debian's libcuda1), read with cuGetErrorName/cuGetErrorString. A name not listed here still
becomes a finding (``gpu.cuda_error``) with the driver's name and text; nothing is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.findings import FixStep


@dataclass(frozen=True)
class Meaning:
    code: str  # the finding code
    explanation: str
    fix: str | None = None
    steps: list[FixStep] = field(default_factory=list)
    severity: str = "fail"


_XID = FixStep(["sh", "-c", "dmesg | grep -iE 'NVRM|Xid'"], root=True, note="the driver's kernel log says why")
_RESET = FixStep(["nvidia-smi", "--gpu-reset", "-i", "N"], root=True, risk="restart",
                 note="with no process on that GPU; or reboot")
_SMI = FixStep(["nvidia-smi"])

MEANINGS: dict[str, Meaning] = {
    "CUDA_ERROR_NO_DEVICE": Meaning(
        "gpu.no_cuda_device",
        "The CUDA driver sees no GPU: no NVIDIA GPU is attached, its kernel module is not loaded, the process "
        "cannot open /dev/nvidia*, or CUDA_VISIBLE_DEVICES hides every GPU.",
        "Run `gpu-doctor check` for the cause (driver.not_loaded, container.no_gpu_passthrough, "
        "env.cuda_visible_devices).", [FixStep(["gpu-doctor", "check"])]),
    "CUDA_ERROR_INVALID_DEVICE": Meaning(
        "gpu.cuda_error", "There is no CUDA device with that number (CUDA numbers the visible GPUs from 0).",
        "Pick a GPU from `nvidia-smi -L`, counted among the ones CUDA_VISIBLE_DEVICES leaves visible."),
    "CUDA_ERROR_NOT_INITIALIZED": Meaning(
        "gpu.cuda_error", "The driver was used before cuInit succeeded: a bug in the caller, or a failed cuInit."),
    "CUDA_ERROR_STUB_LIBRARY": Meaning(
        "framework.libs_shadowed",
        "The libcuda.so.1 that was loaded is the toolkit's link-time stub (lib64/stubs), not the driver: a stubs "
        "directory is on LD_LIBRARY_PATH or in the loader cache.",
        "Remove the stubs directory from LD_LIBRARY_PATH and /etc/ld.so.conf.d; stubs are for linking only."),
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": Meaning(
        "driver.module_userspace_mismatch",
        "The driver's user-space library (libcuda.so.1) and its kernel module are different versions, usually "
        "after a driver upgrade without a reboot.",
        "Reboot (or unload and reload the nvidia modules) so the kernel module matches the library.",
        [FixStep(["reboot"], root=True, risk="reboot")]),
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": Meaning(
        "driver.forward_compat_unsupported",
        "A forward-compatibility libcuda (the cuda-compat package, e.g. from a container image newer than the "
        "host driver) was loaded, but forward compatibility only works on data-center GPUs.",
        "Upgrade the host driver to one that supports this CUDA natively, or remove the compat libraries "
        "(/usr/local/cuda/compat) from the library path."),
    "CUDA_ERROR_SYSTEM_NOT_READY": Meaning(
        "driver.fabric_manager_not_running",
        "The system is not ready for CUDA: on NVSwitch systems (HGX/DGX) this means the NVIDIA Fabric Manager "
        "service is not running or does not match the driver version.",
        "Start nvidia-fabricmanager (the same version as the driver) and try again.",
        [FixStep(["systemctl", "enable", "--now", "nvidia-fabricmanager"], root=True, risk="restart")]),
    "CUDA_ERROR_DEVICE_UNAVAILABLE": Meaning(
        "gpu.busy_exclusive",
        "The GPU is in an exclusive compute mode and another process holds it, or it is unavailable.",
        "Check the compute mode and the processes on the GPU.",
        [FixStep(["nvidia-smi", "--query-gpu=index,compute_mode", "--format=csv"]), _SMI]),
    "CUDA_ERROR_OUT_OF_MEMORY": Meaning(
        "gpu.oom",
        "The GPU has no memory left for this small test: other processes hold it (see `nvidia-smi`).",
        "Free the GPU or pick another one.", [_SMI]),
    "CUDA_ERROR_INVALID_PTX": Meaning(
        "gpu.ptx_jit_failed",
        "The driver's PTX JIT compiler rejected the test kernel. Its PTX is deliberately old (ISA 5.0, sm_30) "
        "and checked with ptxas; a rejection points at a broken libnvidia-ptxjitcompiler.so.1 (from another "
        "driver version than libcuda.so.1) rather than at the kernel.",
        "Reinstall the driver so libnvidia-ptxjitcompiler matches libcuda; the JIT log is in the evidence."),
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": Meaning(
        "driver.too_old_for_cuda_runtime",
        "The PTX was written for a newer CUDA than this driver's JIT compiler understands (PTX is forward-only: "
        "minor-version compatibility does not cover JIT).",
        "Upgrade the driver, or compile with a toolkit no newer than the driver's CUDA version."),
    "CUDA_ERROR_JIT_COMPILER_NOT_FOUND": Meaning(
        "gpu.ptx_jit_failed",
        "The driver's PTX JIT compiler library (libnvidia-ptxjitcompiler.so.1) is missing: containers get it "
        "only with NVIDIA_DRIVER_CAPABILITIES including 'compute'.",
        "Install the driver's ptxjitcompiler library (Debian: libnvidia-ptxjitcompiler1), or start the container "
        "with NVIDIA_DRIVER_CAPABILITIES=compute,utility."),
    "CUDA_ERROR_JIT_COMPILATION_DISABLED": Meaning(
        "gpu.ptx_jit_failed", "PTX JIT compilation is disabled (CUDA_DISABLE_PTX_JIT is set?).",
        "Unset CUDA_DISABLE_PTX_JIT for this test."),
    "CUDA_ERROR_NO_BINARY_FOR_GPU": Meaning(
        "framework.arch_unsupported",
        "The module has no code this GPU can run: no SASS for its architecture and no PTX the driver can JIT."),
    "CUDA_ERROR_INVALID_IMAGE": Meaning("gpu.ptx_jit_failed", "The driver could not load the kernel image."),
    "CUDA_ERROR_ECC_UNCORRECTABLE": Meaning(
        "gpu.hardware_fault",
        "The GPU's memory returned an uncorrectable ECC error while the test ran: the data in memory was "
        "corrupted. The context is lost; a retired page or remapped row needs a GPU reset.",
        "Reset the GPU (or reboot) and look at `nvidia-smi -q -d ECC,ROW_REMAPPER`; if it recurs, drain the node "
        "and RMA the GPU.", [_RESET, FixStep(["nvidia-smi", "-q", "-d", "ECC,ROW_REMAPPER"])]),
    "CUDA_ERROR_NVLINK_UNCORRECTABLE": Meaning(
        "gpu.hardware_fault", "An uncorrectable NVLink error happened during the test.",
        "Check `nvidia-smi nvlink -e` and the kernel log; reset the GPUs; RMA if it recurs.", [_XID]),
    "CUDA_ERROR_LAUNCH_FAILED": Meaning(
        "gpu.kernel_failed",
        "The test kernel failed on the GPU (\"unspecified launch failure\"): with a kernel this simple that "
        "points at the GPU or driver — the kernel log usually has an Xid (13, 31, 43, 79 …) with the reason.",
        "Read the Xid in the kernel log (`gpu-doctor check` explains known Xids); reset the GPU.", [_XID, _RESET]),
    "CUDA_ERROR_ILLEGAL_ADDRESS": Meaning(
        "gpu.kernel_failed",
        "The test kernel touched memory outside its buffers: with these fixed kernels that is a driver or "
        "hardware fault (Xid 13/31 in the kernel log), not a bug in the test.", None, [_XID, _RESET]),
    "CUDA_ERROR_ILLEGAL_INSTRUCTION": Meaning(
        "gpu.kernel_failed", "The GPU met an illegal instruction in JIT-compiled test code: a JIT or hardware "
        "fault.", None, [_XID]),
    "CUDA_ERROR_HARDWARE_STACK_ERROR": Meaning("gpu.kernel_failed", "A hardware stack error.", None, [_XID]),
    "CUDA_ERROR_LAUNCH_TIMEOUT": Meaning(
        "gpu.kernel_failed",
        "The kernel ran longer than the display watchdog allows: this GPU drives a display (X/Wayland) with the "
        "kernel run-time limit on.", "Use a GPU that drives no display for compute, or stop the display server."),
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": Meaning(
        "gpu.kernel_failed", "The GPU refused the launch for lack of registers or threads."),
    "CUDA_ERROR_UNKNOWN": Meaning(
        "gpu.cuda_error",
        "The driver gave no reason. At cuInit this is often a missing nvidia-uvm module or /dev/nvidia-uvm node, "
        "or a GPU in a bad state after suspend.",
        "Load nvidia-uvm and check the device nodes; read the kernel log.",
        [FixStep(["modprobe", "nvidia-uvm"], root=True), _XID]),
    "CUDA_ERROR_OPERATING_SYSTEM": Meaning(
        "gpu.cuda_error", "An operating-system call inside the driver failed (a container without access to "
        "the device nodes, a seccomp or cgroup rule).", None, [_XID]),
    "CUDA_ERROR_NOT_PERMITTED": Meaning("gpu.cuda_error", "The operation is not permitted (MPS or a policy)."),
    "CUDA_ERROR_NOT_SUPPORTED": Meaning("gpu.cuda_error", "The operation is not supported on this GPU/driver."),
    "CUDA_ERROR_MPS_CONNECTION_FAILED": Meaning(
        "gpu.cuda_error", "CUDA_MPS_PIPE_DIRECTORY points at an MPS daemon that does not answer.",
        "Start the MPS control daemon, or unset CUDA_MPS_PIPE_DIRECTORY."),
    "CUDA_ERROR_DEVICE_NOT_LICENSED": Meaning(
        "gpu.cuda_error", "This vGPU has no valid license; CUDA is restricted until it gets one.",
        "Check the vGPU licensing service (nvidia-gridd)."),
    "LIBCUDA_NOT_LOADABLE": Meaning(
        "driver.missing", "libcuda.so.1, the driver's CUDA library, cannot be loaded: no NVIDIA driver user space "
        "is installed, or (in a container) it was not injected.",
        "Install the NVIDIA driver, or start the container with a GPU (docker run --gpus all)."),
    "MISSING_ENTRY_POINT": Meaning(
        "gpu.cuda_error", "This libcuda.so.1 lacks an entry point every driver since CUDA 4 exports: it is not a "
        "real NVIDIA driver library (a stub or a shim)."),
}


def meaning(name: str) -> Meaning:
    return MEANINGS.get(name) or Meaning("gpu.cuda_error", "The CUDA driver reported an error it does not explain "
                                                           "further; its name and text are in the title.")
