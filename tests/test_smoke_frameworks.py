"""The framework smoke test's judgement: the exact texts frameworks print, mapped to finding codes.

Each row gives its source: a framework's source file (quoted in /work/shared/reference/matrix-frameworks.md
section 6 and error-signatures.md, which read them from the shipped wheels) or a public issue thread where
a user pasted it. Format strings are filled in with the values of the thread or a plausible GPU.
"""

from __future__ import annotations

from typing import Any

import pytest

from doctor.checks.active import frameworks
from doctor.checks.active.frameworks import FALLBACK, classify
from doctor.model.facts_active import FrameworkRun, coerce
from doctor.model.findings import Finding

# The judges read the typed facts a runner records: each case below is given as the child reported it.


def judge_run(run: dict[str, Any], timeout: float, matrix: Any = None) -> list[Finding]:
    return frameworks.judge_run(coerce(FrameworkRun, run), timeout, matrix)


TORCH_DRIVER_TOO_OLD = (  # c10/cuda/CUDAFunctions.cpp::device_count_impl (libc10_cuda.so 1.12.1 … 2.15.0)
    "The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver by "
    "downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, "
    "go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA "
    "driver.")

TEXTS: list[tuple[str, str, str]] = [
    ("AssertionError: Torch not compiled with CUDA enabled",
     "framework.cpu_only_build", "torch 2.13.0+cpu on this machine (tests/test_smoke_real.py), torch/cuda/__init__.py"),
    ("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
     "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
     "If you want to use the NVIDIA GeForce RTX 5090 GPU with PyTorch, please check the instructions at "
     "https://pytorch.org/get-started/locally/",
     "framework.arch_unsupported", "torch/cuda/__init__.py::_check_cubins (1.12-2.15)"),
    ("Found GPU0 Tesla K80 which is of cuda capability 3.7.\n    PyTorch no longer supports this GPU because it is "
     "too old.\n    The minimum cuda capability supported by this library is 5.0.",
     "framework.arch_unsupported", "torch/cuda/__init__.py::_check_capability (1.12-2.7)"),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device\nCUDA kernel errors might "
     "be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\nFor debugging "
     "consider passing CUDA_LAUNCH_BLOCKING=1.\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
     "framework.arch_unsupported", "github.com/mit-han-lab/llm-awq/issues/238"),
    ("CUDA initialization: " + TORCH_DRIVER_TOO_OLD, "framework.cuda_newer_than_driver",
     "c10/cuda/CUDAFunctions.cpp, as the UserWarning of torch.cuda.is_available()"),
    ("cupy.cuda.runtime.CUDARuntimeError: cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA "
     "runtime version", "driver.too_old_for_cuda_runtime", "github.com/NVIDIA/FastPhotoStyle/issues/68"),
    ("RuntimeError: cuda runtime error (35) : CUDA driver version is insufficient for CUDA runtime version at "
     "/pytorch/torch/csrc/cuda/Module.cpp:34", "driver.too_old_for_cuda_runtime",
     "github.com/mlcommons/inference/issues/54"),
    ("onnxruntime::CudaCall CUDA failure 35: CUDA driver version is insufficient for CUDA runtime version ; "
     "GPU=-2011338632 ; hostname=DESKTOP-F9GHF2T ; expr=cudaSetDevice(info_.device_id);",
     "driver.too_old_for_cuda_runtime", "github.com/C0untFloyd/roop-unleashed/issues/465"),
    ("cudaErrorUnsupportedPtxVersion: the provided PTX was compiled with an unsupported toolchain.",
     "driver.too_old_for_cuda_runtime", "CUDA runtime error text (error-signatures.md #20)"),
    ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
     "driver from http://www.nvidia.com/Download/index.aspx", "driver.missing", "c10/cuda/CUDAFunctions.cpp"),
    ("RuntimeError: No CUDA GPUs are available", "gpu.no_cuda_device", "c10/cuda/CUDAFunctions.cpp"),
    ("RuntimeError: Unknown backend: 'gpu' requested, but no platforms that are instances of gpu are present. "
     "Platforms present are: cpu", "gpu.no_cuda_device", "github.com/jlin816/dynalang/issues/6"),
    ("cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorNoDevice: no CUDA-capable device is detected",
     "gpu.no_cuda_device", "CuPy's CUDARuntimeError format '<cudaGetErrorName>: <cudaGetErrorString>'"),
    ("2024-06-28 00:03:52.493638: I tensorflow/tsl/cuda/cudart_stub.cc:28] Could not find cuda drivers on your "
     "machine, GPU will not be used.", "framework.gpu_libs_missing", "github.com/tensorflow/tensorflow/issues/66750"),
    ("Cannot dlopen some GPU libraries. Please make sure the missing libraries mentioned above are installed "
     "properly if you would like to use GPU. Follow the guide at https://www.tensorflow.org/install/gpu for how to "
     "download and setup the required libraries for your platform.\nSkipping registering GPU devices...",
     "framework.gpu_libs_missing", "tensorflow/core/common_runtime/gpu/gpu_device.cc"),
    ("Outdated cuDNN installation found.\nVersion JAX was built against: 90100\nMinimum supported: 90100\n"
     "Installed version: 8906", "cudnn.version_mismatch", "jax_plugins/cuda/__init__.py"),
    ("Unable to load cuDNN. Is it installed?", "cudnn.missing", "jax_plugins/cuda/__init__.py"),
    ("Loaded runtime CuDNN library: 8.1.0 but source was compiled with: 8.6.0.  CuDNN library needs to have "
     "matching major version and equal or higher minor version.", "cudnn.version_mismatch",
     "tensorflow/stream_executor/cuda/cuda_dnn.cc (error-signatures.md #15)"),
    ("RuntimeError: CUDA driver error: forward compatibility was attempted on non supported HW",
     "driver.forward_compat_unsupported", "cuGetErrorString(804) of libcuda 535.309.01"),
    ("kernel version 470.57.2 does not match DSO version 515.48.7 -- cannot find working devices in this "
     "configuration", "driver.module_userspace_mismatch", "XLA/TF cuda_diagnostics (error-signatures.md #9)"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "gpu.hardware_fault",
     "cudaGetErrorString(cudaErrorECCUncorrectable) (error-signatures.md #29)"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 7.79 "
     "GiB of which 3.56 MiB is free.", "gpu.oom", "c10/cuda/CUDACachingAllocator.cpp (error-signatures.md #28)"),
    ("OSError: /usr/local/lib/python3.10/dist-packages/torch/lib/libcudnn_cnn_infer.so.8: undefined symbol: "
     "_ZN5cudnn3cnn34layerNormFwd_execute_internal_implERKNS_7backend11VariantPackEP11CUstream_stRNS0_18"
     "LayerNormFwdParamsERKNS1_20NormForwardOperationEmb", "framework.libs_shadowed",
     "error-signatures.md #18 (undefined symbol in a CUDA library)"),
    ("RuntimeError: CUDA error: CUDA driver is a stub library", "framework.libs_shadowed",
     "cuGetErrorString(34) of libcuda 535.309.01"),
]


@pytest.mark.parametrize(("text", "code", "source"), TEXTS, ids=[c + ":" + s[:40] for _, c, s in TEXTS])
def test_framework_error_text_maps_to_its_code(text: str, code: str, source: str) -> None:
    assert classify(text).code == code, source


def test_unknown_text_falls_back_without_losing_it() -> None:
    assert classify("ValueError: something nobody has seen") is FALLBACK
    run = {"framework": "jax", "python": "/venv/bin/python", "installed": True, "version": "0.4.30", "ok": False,
           "error": {"type": "builtins.ValueError", "text": "ValueError: something nobody has seen",
                     "step": "jax.devices('gpu')"},
           "end": {"event": "exit", "returncode": 0, "stderr": "W0000 a log line"}}
    (f,) = judge_run(run, 60)
    assert (f.code, f.title) == ("framework.gpu_smoke_failed", "jax 0.4.30 in /venv/bin/python: ValueError: something "
                                                               "nobody has seen")
    assert [e.value for e in f.evidence] == ["ValueError: something nobody has seen", "W0000 a log line"]


def test_a_warning_is_matched_when_the_exception_is_generic() -> None:
    run = {"framework": "torch", "python": "/p", "installed": True, "version": "2.4.0+cu124", "ok": False,
           "warnings": ["CUDA initialization: " + TORCH_DRIVER_TOO_OLD],
           "error": {"text": "RuntimeError: CUDA unavailable", "step": "a tensor on cuda:0"}}
    (f,) = judge_run(run, 60)
    assert f.code == "framework.cuda_newer_than_driver"
    evidence = [(e.fact, e.value) for e in f.evidence]
    assert ("framework.warning", "CUDA initialization: " + TORCH_DRIVER_TOO_OLD) in evidence


def _result(err: float) -> dict[str, Any]:
    return {"max_abs_err": err, "tolerance": 0.128, "ok": err <= 0.128, "rtol": 1e-3, "shape": [512, 512]}


def test_products_within_tolerance_pass_and_outside_fail() -> None:
    run = {"framework": "torch", "python": "/p", "installed": True, "version": "2.5.1+cu124", "ok": True,
           "matmul": _result(3e-5), "conv": _result(0.5)}
    ok, bad = judge_run(run, 60)
    assert (ok.code, ok.severity, ok.title) == ("framework.gpu_smoke", "ok", "torch 2.5.1+cu124 in /p: the GPU matrix "
                                                "product matches the CPU")
    assert ok.detail == "max |GPU − CPU| = 3e-05, tolerance 0.128 (0.001 × the largest CPU value; TF32 off)"
    assert (bad.code, bad.severity) == ("gpu.wrong_results", "fail")


def test_a_hung_framework_is_framework_hang() -> None:
    run = {"framework": "tensorflow", "python": "/p", "last_step": "import tensorflow",
           "end": {"event": "hang", "silent_for": 5, "reaped": True}}
    (f,) = judge_run(run, 5)
    assert (f.code, f.title) == ("framework.hang", "tensorflow in /p did not finish within 5 s (at: import tensorflow)")
