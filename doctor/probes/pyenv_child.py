# Runs inside the *target* Python environment (maybe an old Python): reports which GPU-relevant
# packages are installed and hands back the raw text of the files that say how they were built.
# It imports no framework: package metadata and a few source files read as text are enough.
# Keep this file compatible with Python 3.6 syntax and free of third-party imports.
#
# With "--deep NAME" it instead imports that one framework and reports what it says at run time,
# plus the CUDA libraries the process really mapped (from /proc/self/maps).
import json
import os
import re
import sys

# Annotations for mypy only: the generic ones are quoted (never evaluated, so Python 3.6 reads them), and
# typing is not imported at run time (mypy takes this name as true; the interpreter never enters the block).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator

INTERESTING = re.compile(
    r"^(torch|torchvision|torchaudio|tensorflow|tensorflow-cpu|tensorflow-gpu|tf-nightly|tf-keras|"
    r"jax|jaxlib|jax-cuda\d+-plugin|jax-cuda\d+-pjrt|cupy|cupy-cuda\w+|paddlepaddle|paddlepaddle-gpu|"
    r"onnxruntime|onnxruntime-gpu|tensorrt|tensorrt-\w+|tensorrt_\w+|nvidia-[\w-]+)$"
)
FILES = {
    "torch": ["torch/version.py"],
    "tensorflow": ["tensorflow/python/platform/build_info.py"],
    "tensorflow-cpu": ["tensorflow/python/platform/build_info.py"],
    "tf-nightly": ["tensorflow/python/platform/build_info.py"],
    "jaxlib": ["jaxlib/version.py"],
}


# The frameworks whose wheel metadata pins the NVIDIA wheels they were built with (torch: nvidia-cudnn-cu12==…).
PINS_OF = ("torch",)


def nvidia_requirements(path: str) -> "list[str]":
    """The Requires-Dist lines of a wheel's METADATA that name an nvidia-* wheel (its build's pins)."""
    try:
        with open(path, "rb") as fh:
            text = fh.read(500000).decode("utf-8", "replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line; the description follows
        if line.lower().startswith("requires-dist:") and "nvidia-" in line.lower():
            out.append(line.split(":", 1)[1].strip()[:300])
    return out[:64]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


DIST_DIR = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._]*?)-([^-]+?)\.(dist-info|egg-info)$")


def distributions() -> "Iterator[tuple[str, str, str, str]]":
    """(name, version, location) of installed distributions, read from the .dist-info directory
    names alone: reading every METADATA file through importlib.metadata costs ~100 ms in a big
    environment, and the directory name already carries both (PEP 427 / PEP 376)."""
    seen = set()
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        try:
            names = os.listdir(entry)
        except OSError:
            continue
        for d in names:
            m = DIST_DIR.match(d)
            if not m:
                continue
            key = norm(m.group(1))
            if key in seen:
                continue  # the first on sys.path wins, as for imports
            seen.add(key)
            yield m.group(1), m.group(2), entry, d


def static() -> "dict[str, Any]":
    out: "dict[str, Any]" = {"executable": sys.executable, "version": "%d.%d.%d" % sys.version_info[:3], "packages": []}
    for name, version, base, dist_dir in distributions():
        key = norm(name)
        if not INTERESTING.match(key):
            continue
        files: "dict[str, str]" = {}
        pkg: "dict[str, Any]" = {"name": key, "version": version, "files": files}
        if key in PINS_OF:
            pkg["requires"] = nvidia_requirements(os.path.join(base, dist_dir, "METADATA"))
        for rel in FILES.get(key, []):
            path = os.path.join(base, rel)
            try:
                with open(path, "rb") as fh:
                    files[rel] = fh.read(200000).decode("utf-8", "replace")
            except OSError:
                pass
        out["packages"].append(pkg)
    return out


CUDA_LIB = re.compile(r"/(lib(cudart|cudnn|cublas|cublasLt|nccl|cuda|nvrtc|cufft|cusparse|nvidia-ml)[\w.-]*\.so[\w.]*)$")


def mapped_libs() -> "list[str]":
    libs = []
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 6 and CUDA_LIB.search(parts[-1]) and parts[-1] not in libs:
                    libs.append(parts[-1])
    except OSError:
        pass
    return libs


def deep(name: str) -> "dict[str, Any]":
    res: "dict[str, Any]" = {"name": name}
    try:
        if name == "torch":
            import torch

            res["cuda"] = torch.version.cuda
            res["is_available"] = bool(torch.cuda.is_available())
            res["device_count"] = torch.cuda.device_count()
            try:
                res["arch_list"] = list(torch.cuda.get_arch_list())
            except Exception:
                res["arch_list"] = None
            v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
            res["cudnn"] = str(v) if v else None
            if res["is_available"]:
                torch.zeros(1).cuda()
        elif name in ("tensorflow", "tensorflow-cpu", "tf-nightly"):
            import tensorflow as tf

            info = tf.sysconfig.get_build_info()
            res["cuda"] = info.get("cuda_version")
            res["cudnn"] = info.get("cudnn_version")
            gpus = tf.config.list_physical_devices("GPU")
            res["device_count"] = len(gpus)
            res["is_available"] = bool(gpus)
        elif name in ("jax", "jaxlib"):
            import jax

            devs = [d for d in jax.devices() if d.platform == "gpu"]
            res["device_count"] = len(devs)
            res["is_available"] = bool(devs)
        elif name.startswith("cupy"):
            import cupy

            res["cuda"] = str(cupy.cuda.runtime.runtimeGetVersion())
            res["device_count"] = cupy.cuda.runtime.getDeviceCount()
            res["is_available"] = res["device_count"] > 0
        else:
            res["error"] = "no deep probe for %s" % name
    except BaseException as exc:  # the error text is the finding
        res["error"] = "%s: %s" % (type(exc).__name__, str(exc).strip()[:2000])
    res["loaded_libraries"] = mapped_libs()
    return res


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--deep":
        result = deep(sys.argv[2])
    else:
        result = static()
    sys.stdout.write("\n@@GPU-DOCTOR@@" + json.dumps(result))
