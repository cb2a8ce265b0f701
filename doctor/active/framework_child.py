"""Runs inside the *target* Python environment (python -c): one framework's GPU smoke test.

It imports the framework (which gpu-doctor itself never does), runs a matrix product on the GPU and on
the CPU and compares them, a cuDNN convolution for torch and TensorFlow, a cuBLAS product for CuPy, and
prints JSON events after the marker. Every exception becomes data: its type and the framework's own text,
which the parent maps to a finding. Plain syntax on purpose: the interpreter may be old (Python >= 3.6).

Usage: python -c "$(this file)" FRAMEWORK
"""

import json
import sys
import traceback
import warnings

# Annotations for mypy only, as in doctor/probes/pyenv_child.py, kept readable by Python 3.6: a signature's are
# quoted unless a builtin name (they are evaluated when the function is defined, and `list[str]` fails before 3.9),
# a local variable's are never evaluated, and typing is not imported at run time (mypy takes this name as true; the
# interpreter never enters the block). tests/test_types.py holds these files to it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import ModuleType
    from typing import Any

    # A framework's tensor or array (torch, NumPy, CuPy, JAX): the frameworks are not installed where mypy runs
    # and gpu-doctor itself never imports them, so their values are typed by this name only.
    Array = Any
    Out = dict[str, object]  # what one framework's test reports, sent as JSON

MARKER = "@@GPU-DOCTOR@@"
N = 512  # the matrix products are N x N, float32
TC_N, TC_WARMUP, TC_ITERS = 8192, 3, 10  # the half-precision throughput products: 8192 x 8192, ~11 TFLOP in all
RTOL = 1e-3  # |GPU - CPU| <= RTOL * max|CPU|, with TF32 off (float32 accumulation-order differences are ~1e-5)


def emit(event: str, **data: object) -> None:
    data["event"] = event
    sys.stdout.write(MARKER + json.dumps(data, default=str) + "\n")
    sys.stdout.flush()


PROGRESS = [0, 1]  # steps done, steps planned (main() sets the plan of the framework under test)


def step(text: str) -> None:
    """Say what runs now, with how far along the run is: the parent draws it as a percentage."""
    done, planned = PROGRESS
    emit("step", step=text, fraction=round(min(done / planned, 1.0), 4))
    PROGRESS[0] = done + 1


def error_of(exc: BaseException, where: str) -> "dict[str, str]":
    lines = traceback.format_exception_only(type(exc), exc)
    return {"type": type(exc).__module__ + "." + type(exc).__name__, "text": "".join(lines).strip(), "step": where}


def verdict(err: float, scale: float, shape: "Iterable[int]") -> "dict[str, object]":
    tol = RTOL * scale
    return {"max_abs_err": err, "tolerance": tol, "ok": bool(err <= tol), "rtol": RTOL, "shape": list(shape)}


def compare(gpu: "Array", cpu: "Array") -> "dict[str, object]":
    """max |gpu - cpu| against the tolerance, for two NumPy arrays already on the host."""
    import numpy as np

    gpu, cpu = np.asarray(gpu, dtype=np.float64), np.asarray(cpu, dtype=np.float64)
    return verdict(float(np.max(np.abs(gpu - cpu))), float(np.max(np.abs(cpu))), cpu.shape)


def compare_torch(gpu: "Array", cpu: "Array") -> "dict[str, object]":
    """The same for torch tensors (torch wheels do not require NumPy)."""
    gpu, cpu = gpu.cpu().double(), cpu.double()
    return verdict(float((gpu - cpu).abs().max()), float(cpu.abs().max()), cpu.shape)


def inputs(seed: int = 0) -> "tuple[Array, Array]":
    import numpy as np

    rng = np.random.RandomState(seed)
    return rng.uniform(-1, 1, (N, N)).astype(np.float32), rng.uniform(-1, 1, (N, N)).astype(np.float32)


def test_torch(out: "Out") -> None:
    step("import torch")
    import torch

    out["version"] = torch.__version__
    out["cuda"] = torch.version.cuda
    step("torch.cuda.is_available()")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out["is_available"] = torch.cuda.is_available()
        out["device_count"] = torch.cuda.device_count()
    out["warnings"] = [str(w.message) for w in caught]
    step("a tensor on cuda:0")
    x = torch.zeros(1, device="cuda")  # raises the error a user's code would meet
    out["gpu_name"] = torch.cuda.get_device_name(0)
    out["capability"] = "{}.{}".format(*torch.cuda.get_device_capability(0))
    out["arch_list"] = torch.cuda.get_arch_list()
    del x
    step("matrix product on the GPU vs the CPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    g = torch.Generator().manual_seed(0)
    a, b = (torch.rand(N, N, generator=g) * 2 - 1 for _ in range(2))
    out["matmul"] = compare_torch(a.cuda() @ b.cuda(), a @ b)
    step("cuDNN convolution on the GPU vs the CPU")
    out["cudnn"] = torch.backends.cudnn.version()
    img, w = torch.rand(8, 16, 32, 32, generator=g), torch.rand(32, 16, 3, 3, generator=g)
    conv = torch.nn.functional.conv2d
    out["conv"] = compare_torch(conv(img.cuda(), w.cuda()), conv(img, w))
    tensor_core_rates(torch, out)


def tflops(n: int, iters: int, seconds: "float | None") -> "float | None":
    """Achieved TFLOP/s of `iters` n x n x n matrix products in `seconds`: 2*n^3 flops each (a multiply and an add)."""
    if not seconds or seconds <= 0:
        return None
    return 2.0 * n ** 3 * iters / seconds / 1e12


def tensor_core_rates(torch: "ModuleType", out: "Out") -> None:
    """bf16 and fp16 TC_N x TC_N products timed with CUDA events: the figures compared with the datasheet."""
    step("half-precision matrix product throughput (tensor cores)")
    major = torch.cuda.get_device_capability(0)[0]
    rates: dict[str, dict[str, object]] = {}
    for name in ("bf16", "fp16"):
        if name == "bf16" and major < 8:  # bf16 tensor cores arrived with Ampere (sm_80)
            rates[name] = {"skipped": "bf16 needs compute capability 8.0 or newer"}
            continue
        dtype = torch.bfloat16 if name == "bf16" else torch.float16
        a = torch.rand(TC_N, TC_N, device="cuda", dtype=dtype)
        b = torch.rand(TC_N, TC_N, device="cuda", dtype=dtype)
        c = torch.empty(TC_N, TC_N, device="cuda", dtype=dtype)
        for _ in range(TC_WARMUP):  # cuBLAS heuristics, clocks ramping up
            torch.matmul(a, b, out=c)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(TC_ITERS):
            torch.matmul(a, b, out=c)
        stop.record()
        stop.synchronize()
        seconds = start.elapsed_time(stop) / 1e3
        rates[name] = {"tflops": tflops(TC_N, TC_ITERS, seconds), "n": TC_N, "iters": TC_ITERS,
                       "warmup": TC_WARMUP, "seconds": seconds}
        del a, b, c
    torch.cuda.empty_cache()
    out["matmul_tflops"] = rates

def test_tensorflow(out: "Out") -> None:
    step("import tensorflow")
    import tensorflow as tf

    out["version"] = tf.__version__
    out["built_with_cuda"] = tf.test.is_built_with_cuda()
    info = tf.sysconfig.get_build_info()
    out["cuda"] = info.get("cuda_version")
    out["cudnn"] = info.get("cudnn_version")
    step("tf.config.list_physical_devices('GPU')")
    gpus = tf.config.list_physical_devices("GPU")
    out["device_count"] = len(gpus)
    if not gpus:
        raise RuntimeError("TensorFlow lists no GPU (tf.config.list_physical_devices('GPU') == [])")
    tf.config.experimental.enable_tensor_float_32_execution(False)
    step("matrix product on the GPU vs the CPU")
    a, b = inputs()
    with tf.device("/GPU:0"):
        gpu = tf.matmul(a, b).numpy()
    with tf.device("/CPU:0"):
        cpu = tf.matmul(a, b).numpy()
    out["matmul"] = compare(gpu, cpu)
    step("cuDNN convolution on the GPU vs the CPU")
    import numpy as np

    rng = np.random.RandomState(1)
    img, w = rng.rand(8, 32, 32, 16).astype("float32"), rng.rand(3, 3, 16, 32).astype("float32")
    with tf.device("/GPU:0"):
        gpu = tf.nn.conv2d(img, w, 1, "VALID").numpy()
    with tf.device("/CPU:0"):
        cpu = tf.nn.conv2d(img, w, 1, "VALID").numpy()
    out["conv"] = compare(gpu, cpu)


def test_jax(out: "Out") -> None:
    step("import jax")
    import jax
    import jax.numpy as jnp

    out["version"] = jax.__version__
    step("jax.devices('gpu')")
    devices = jax.devices("gpu")  # raises "Unknown backend: 'gpu' requested …" when none
    out["device_count"] = len(devices)
    step("matrix product on the GPU vs the CPU")
    a, b = inputs()
    gpu = jnp.dot(jax.device_put(a, devices[0]), jax.device_put(b, devices[0]), precision=jax.lax.Precision.HIGHEST)
    cpu_dev = jax.devices("cpu")[0]
    cpu = jnp.dot(jax.device_put(a, cpu_dev), jax.device_put(b, cpu_dev), precision=jax.lax.Precision.HIGHEST)
    out["matmul"] = compare(jax.device_get(gpu), jax.device_get(cpu))


def test_cupy(out: "Out") -> None:
    step("import cupy")
    import cupy

    out["version"] = cupy.__version__
    step("cupy.cuda.runtime.getDeviceCount()")
    out["device_count"] = cupy.cuda.runtime.getDeviceCount()
    out["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
    out["cuda_driver"] = cupy.cuda.runtime.driverGetVersion()
    out["cuda"] = str(out["cuda_runtime"])  # 13020: the record decodes it (doctor.model.versions.cuda_version)
    step("cuBLAS matrix product vs NumPy")
    a, b = inputs()
    out["matmul"] = compare(cupy.asnumpy(cupy.asarray(a) @ cupy.asarray(b)), a @ b)


TESTS: "dict[str, Callable[[Out], None]]" = {"torch": test_torch, "tensorflow": test_tensorflow, "jax": test_jax,
                                             "cupy": test_cupy}
MODULES = {"torch": "torch", "tensorflow": "tensorflow", "jax": "jax", "cupy": "cupy"}
STEPS = {"torch": 6, "tensorflow": 4, "jax": 3, "cupy": 3}  # the step() calls of each test above


def main(argv: "list[str]") -> int:
    name = argv[0]
    out: Out = {"framework": name, "python": sys.executable,
                  "python_version": ".".join(str(v) for v in sys.version_info[:3])}
    try:
        import importlib.util

        out["installed"] = importlib.util.find_spec(MODULES[name]) is not None
    except (ImportError, ValueError):
        out["installed"] = False
    if out["installed"]:
        where = ["starting"]
        orig_step = step

        def tracking(text: str) -> None:
            where[0] = text
            orig_step(text)

        globals()["step"] = tracking
        PROGRESS[1] = STEPS[name]
        try:
            TESTS[name](out)
            out["ok"] = True
        except BaseException as exc:  # an AssertionError or SystemExit from a framework is an answer too
            out["ok"] = False
            out["error"] = error_of(exc, where[0])
    emit("framework", **out)
    emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
