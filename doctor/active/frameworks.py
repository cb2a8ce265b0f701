"""`gpu-doctor smoke --framework`: each framework's GPU smoke test in the target Python environment.

One child process per (interpreter, framework) runs :mod:`doctor.active.framework_child` with a timeout.
What a framework raises is matched against :data:`SIGNATURES` — the texts frameworks really print, each
row naming where it comes from — and becomes the finding of the same code the static checks use, with the
original text in the evidence. The mapping is pure and table-tested (tests/test_smoke_frameworks.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from doctor.active.events import Event, Log, Progress
from doctor.findings import Evidence, Finding, Fix

DEFAULT_TIMEOUT = 120.0
AREA = "Framework smoke test"


@dataclass(frozen=True)
class Signature:
    pattern: str  # a regular expression, searched (case-sensitive) in the exception text and warnings
    code: str
    explanation: str
    fix: str | None = None
    severity: str = "fail"


# Order matters: the first match wins, so specific texts come before generic ones ("no kernel image" is also
# a "CUDA error").
SIGNATURES: tuple[Signature, ...] = (
    Signature(r"Torch not compiled with CUDA enabled", "framework.cpu_only_build",
              "This torch is a CPU-only build (a +cpu wheel, or the default wheel of a platform without CUDA "
              "wheels): it cannot use any GPU.",
              "Reinstall torch from a CUDA index matching your driver: pip install --force-reinstall torch "
              "--index-url https://download.pytorch.org/whl/cuXYZ (`gpu-doctor plan` names XYZ)."),
    Signature(r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation|"
              r"PyTorch no longer supports this GPU because it is too old|"
              r"Minimum and Maximum cuda capability supported by this version of PyTorch|"
              r"does not include kernels for this GPU|"
              r"No published PyTorch CUDA builds for release \S+ support this GPU",
              "framework.arch_unsupported",
              "This framework build has no kernels for this GPU's architecture.",
              "Install a build whose CUDA version supports this GPU (new GPUs need a newer CUDA variant; old ones "
              "an older release)."),
    Signature(r"no kernel image is available for execution on the device|cudaErrorNoKernelImageForDevice|"
              r"CUDA_ERROR_NO_BINARY_FOR_GPU",
              "framework.arch_unsupported",
              "The framework (or an extension) was compiled without code for this GPU's architecture: no SASS for "
              "its compute capability and no PTX the driver can JIT.",
              "Install a build for this GPU's architecture (or rebuild the extension with its "
              "TORCH_CUDA_ARCH_LIST / -gencode)."),
    Signature(r"The NVIDIA driver on your system is too old \(found version \d+\)",
              "framework.cuda_newer_than_driver",
              "The framework's bundled CUDA runtime is newer than the CUDA version this driver supports.",
              "Upgrade the driver, or install the framework's variant for an older CUDA (`gpu-doctor plan`)."),
    Signature(r"CUDA driver version is insufficient for CUDA runtime version|cudaErrorInsufficientDriver|"
              r"CUDA failure 35",
              "driver.too_old_for_cuda_runtime",
              "The CUDA runtime in use needs a newer driver than the one installed (or, in a container, no driver "
              "was passed in).",
              "Upgrade the driver to the CUDA runtime's minimum, or use a runtime no newer than the driver's CUDA."),
    Signature(r"the provided PTX was compiled with an unsupported toolchain|cudaErrorUnsupportedPtxVersion",
              "driver.too_old_for_cuda_runtime",
              "Code compiled by a newer CUDA toolkit than the driver supports was JIT-compiled (minor-version "
              "compatibility does not cover PTX).", "Upgrade the driver."),
    Signature(r"forward compatibility was attempted on non supported HW|CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE|"
              r"Error 804",
              "driver.forward_compat_unsupported",
              "A forward-compatibility libcuda (cuda-compat) was used on a GPU that does not support it (only "
              "data-center GPUs do).", "Upgrade the host driver instead of relying on cuda-compat."),
    Signature(r"system has unsupported display driver / cuda driver combination|"
              r"kernel version [\d.]+ does not match DSO version|Driver/library version mismatch",
              "driver.module_userspace_mismatch",
              "The driver's kernel module and its user-space libraries are different versions.",
              "Reboot (or reload the nvidia modules) after the driver upgrade."),
    Signature(r"CUDA driver is a stub library|CUDA_ERROR_STUB_LIBRARY|cudaErrorStubLibrary",
              "framework.libs_shadowed",
              "The toolkit's stub libcuda (lib64/stubs) was loaded instead of the driver's library.",
              "Remove the stubs directory from LD_LIBRARY_PATH."),
    Signature(r"undefined symbol: \w+", "framework.libs_shadowed",
              "Two versions of the same CUDA library family are mixed (usually LD_LIBRARY_PATH pointing at a "
              "system CUDA while the framework brings its own pip nvidia-* libraries).",
              "Unset LD_LIBRARY_PATH (or remove the system CUDA directory from it) and run again."),
    Signature(r"Loaded runtime CuDNN library: [\d.]+ .*but source was compiled with|"
              r"Found cuDNN version \d+, but JAX was built against version \d+|Outdated cuDNN installation found",
              "cudnn.version_mismatch",
              "The cuDNN that was loaded is older than the one the framework was built against.",
              "Install the cuDNN version the framework needs (its nvidia-cudnn-cu* wheel) and put it first."),
    Signature(r"Unable to load cuDNN\. Is it installed\?", "cudnn.missing",
              "The framework could not load cuDNN.", "Install the framework's cuDNN wheel (nvidia-cudnn-cu*)."),
    Signature(r"Cannot dlopen some GPU libraries|Could not find cuda drivers on your machine, GPU will not be used|"
              r"Could not load dynamic library 'lib(cudart|cublas|cudnn)",
              "framework.gpu_libs_missing",
              "The framework could not load the CUDA libraries it needs, so it runs on the CPU only.",
              "Install the framework's CUDA variant (e.g. pip install 'tensorflow[and-cuda]') or the matching CUDA "
              "libraries; `gpu-doctor check --deep` shows which libraries it found."),
    Signature(r"CUDA out of memory|OutOfMemoryError|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|"
              r"RESOURCE_EXHAUSTED", "gpu.oom",
              "The GPU ran out of memory for this small test: other processes hold it.",
              "Free the GPU (`nvidia-smi` lists the processes) or choose another with CUDA_VISIBLE_DEVICES."),
    Signature(r"uncorrectable ECC error encountered|CUDA_ERROR_ECC_UNCORRECTABLE|cudaErrorECCUncorrectable",
              "gpu.hardware_fault", "The GPU's memory reported an uncorrectable ECC error.",
              "Reset the GPU; if it recurs, drain the node and RMA it."),
    Signature(r"Found no NVIDIA driver on your system", "driver.missing",
              "The framework found no NVIDIA driver (libcuda.so.1 could not be loaded).",
              "Install the NVIDIA driver, or start the container with a GPU (docker run --gpus all)."),
    Signature(r"No CUDA GPUs are available|no CUDA-capable device is detected|cudaErrorNoDevice|"
              r"CUDA_ERROR_NO_DEVICE|CUDA driver initialization failed, you might not have a CUDA gpu|"
              r"Unknown backend: 'gpu' requested, but no platforms that are instances of gpu are present",
              "gpu.no_cuda_device",
              "The framework's CUDA sees no GPU: none attached, the kernel module not loaded, the container "
              "started without one, or CUDA_VISIBLE_DEVICES hides them.",
              "Run `gpu-doctor check` for the cause."),
)

FALLBACK = Signature(r".", "framework.gpu_smoke_failed",
                     "The framework failed on the GPU with an error gpu-doctor does not recognise; the text is in "
                     "the evidence.", "Run `gpu-doctor check --deep` and search the error text.")


def classify(*texts: str | None) -> Signature:
    """The signature of the first rule that matches any of the texts (exception, warnings, stderr)."""
    joined = "\n".join(t for t in texts if t)
    for sig in SIGNATURES:
        if re.search(sig.pattern, joined):
            return sig
    return FALLBACK


def framework_events(pythons: Sequence[str], frameworks: Sequence[str], timeout: float = DEFAULT_TIMEOUT,
                     only_installed: bool = False, matrix: Any = None) -> Iterator[Event]:
    from doctor.active.runner import child_events

    script = resources.files("doctor.active").joinpath("framework_child.py").read_text()
    runs: list[dict[str, Any]] = []
    total = len(pythons) * len(frameworks)
    done = 0
    for python in pythons:
        for name in frameworks:
            yield Progress(done / total, f"{name} in {python}")
            run: dict[str, Any] = {"framework": name, "python": python}
            for ev in child_events([python, "-c", script, name], _env(), timeout):
                kind = ev.get("event")
                if kind == "step":
                    run["last_step"] = ev.get("step")
                    yield Progress(done / total, f"{name}: {ev.get('step')}")
                elif kind == "framework":
                    run.update({k: v for k, v in ev.items() if k != "event"})
                elif kind in ("exit", "hang"):
                    run["end"] = ev
            done += 1
            if run.get("installed") is False and only_installed:
                continue
            runs.append(run)
            if run.get("ok"):
                yield Log(f"{name}: GPU matrix product matches the CPU")
    from doctor.active.record import outcome
    from doctor.facts_active import ActiveFacts, FrameworkTest, coerce

    test = coerce(FrameworkTest, {"pythons": list(pythons), "requested": list(frameworks), "runs": runs})
    out = outcome(ActiveFacts(frameworks=test), {"frameworks": runs}, matrix=matrix, what="framework smoke test")
    yield out


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")  # TensorFlow says why it has no GPU only in its log
    return env


def record_findings(test: dict[str, Any], matrix: Any = None) -> list[Finding]:
    """Pure: the findings of a recorded framework smoke test (facts ``active.frameworks``, as plain dicts)."""
    findings = [f for run in test.get("runs") or [] for f in judge_run(run, _silence(run), matrix)]
    if not test.get("runs"):
        findings.append(Finding("framework.not_installed", "warn", "No framework (torch, tensorflow, jax, cupy) is "
                                "installed in " + ", ".join(test.get("pythons") or ["the target environment"]),
                                area=AREA, check="framework.not_installed"))
    return findings


def _silence(run: dict[str, Any]) -> float:
    return float((run.get("end") or {}).get("silent_for") or DEFAULT_TIMEOUT)


def judge_run(run: dict[str, Any], timeout: float, matrix: Any = None) -> list[Finding]:
    """The findings of one framework's run. Pure. ``matrix`` gives tensor-core peaks (none: figures only)."""
    name, python = run["framework"], run["python"]
    who = f"{name} {run['version']}" if run.get("version") else name
    where = f"{who} in {python}"
    end = run.get("end") or {}
    if end.get("event") == "hang":
        return [_f("framework.hang", "fail",
                   f"{where} did not finish within {timeout:g} s (at: {run.get('last_step')})",
                   "The framework hung: importing it or its first CUDA call never returned.",
                   [Evidence("framework.step", run.get("last_step"), "child progress")])]
    if "installed" not in run:
        tail = (end.get("stderr") or end.get("error") or "").strip().splitlines()
        return [_f("framework.gpu_smoke_failed", "fail", f"{name} in {python}: the test process died "
                   f"(exit {end.get('returncode')}) at: {run.get('last_step') or 'start'}",
                   "The interpreter could not run the test, or the framework crashed the process.",
                   [Evidence("framework.stderr", "\n".join(tail[-5:]) or None, "child stderr")])]
    if not run["installed"]:
        return [_f("framework.not_installed", "warn", f"{name} is not installed in {python}",
                   "Nothing to test.", [Evidence("framework.installed", False, f"importlib.util.find_spec({name!r})")])]
    out: list[Finding] = []
    for key, what in (("matmul", "matrix product"), ("conv", "cuDNN convolution")):
        res = run.get(key)
        if not res:
            continue
        detail = (f"max |GPU − CPU| = {res['max_abs_err']:.3g}, tolerance {res['tolerance']:.3g} "
                  f"({res['rtol']:g} × the largest CPU value; TF32 off)")
        ev = [Evidence(f"framework.{key}", res, f"{name} on the GPU vs the CPU")]
        if res["ok"]:
            out.append(_f("framework.gpu_smoke", "ok", f"{where}: the GPU {what} matches the CPU", detail, ev))
        else:
            out.append(_f("gpu.wrong_results", "fail", f"{where}: the GPU {what} differs from the CPU", detail +
                          ": the GPU (or its math library) computes wrong results.", ev))
    if run.get("matmul_tflops"):
        from doctor.active.judge import tensor_core_findings

        who_gpu = f"{where}, {run['gpu_name']}" if run.get("gpu_name") else where
        out += tensor_core_findings(who_gpu, run.get("gpu_name"), run["matmul_tflops"], matrix, AREA,
                                    f"{name}.matmul")
    err = run.get("error")
    if err:
        sig = classify(err.get("text"), *run.get("warnings") or [], end.get("stderr"))
        ev = [Evidence("framework.error", err.get("text"), f"{name}: {err.get('step')}")]
        ev += [Evidence("framework.warning", w, f"{name}: warnings") for w in run.get("warnings") or []]
        if sig is FALLBACK or sig.code == "framework.gpu_libs_missing":
            lines = [ln for ln in (end.get("stderr") or "").splitlines() if ln.strip()]
            if lines:
                ev.append(Evidence("framework.log", "\n".join(lines[-8:]), f"{name}: stderr"))
        first = (err.get("text") or "").strip().splitlines()[-1:] or [""]
        out.append(_f(sig.code, sig.severity, f"{where}: {first[0][:200]}",
                      f"{sig.explanation}\nIt failed at: {err.get('step')}.", ev, sig.fix))
    return out


def _f(code: str, severity: str, title: str, detail: str = "", evidence: list[Evidence] | None = None,
       fix: str | None = None) -> Finding:
    return Finding(code=code, severity=severity, title=title, detail=detail,  # type: ignore[arg-type]
                   evidence=evidence or [], fix=Fix(fix) if fix else None,
                   area=AREA, check=code)
