# Runs inside the *target* Python environment (maybe an old Python): reports which GPU-relevant
# packages are installed and hands back the raw text of the files that say how they were built.
# It imports no framework: package metadata and a few source files read as text are enough.
# Keep this file compatible with Python 3.6 syntax and free of third-party imports.
#
# With "--deep NAME" it instead imports that one framework and reports what it says at run time,
# plus the CUDA libraries the process really mapped (from /proc/self/maps).
#
# The usual run (no --deep) imports neither re nor json: in a plain environment they were a third of this child's
# start (~11 ms of CPU on every `check`); names are matched with string operations that say exactly what the
# patterns beside them say (the tests hold each to its pattern), and the answer is written as json.dumps writes it.
import os
import sys

# Annotations for mypy only: the generic ones are quoted (never evaluated, so Python 3.6 reads them), and
# typing is not imported at run time (mypy takes this name as true; the interpreter never enters the block).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator

# The distributions worth reporting: exactly those INTERESTING_PATTERN matches (of a name norm() gave).
INTERESTING_PATTERN = (
    r"^(torch|torchvision|torchaudio|tensorflow|tensorflow-cpu|tensorflow-gpu|tf-nightly|tf-keras|"
    r"jax|jaxlib|jax-cuda\d+-plugin|jax-cuda\d+-pjrt|cupy|cupy-cuda\w+|paddlepaddle|paddlepaddle-gpu|"
    r"onnxruntime|onnxruntime-gpu|tensorrt|tensorrt-\w+|tensorrt_\w+|nvidia-[\w-]+)$"
)
_NAMED = {"torch", "torchvision", "torchaudio", "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly",
          "tf-keras", "jax", "jaxlib", "cupy", "paddlepaddle", "paddlepaddle-gpu", "onnxruntime", "onnxruntime-gpu",
          "tensorrt"}


def _word(text: str, dash: bool = False) -> bool:
    """re's \\w+ (or [\\w-]+ with ``dash``) over the whole of ``text``."""
    return bool(text) and all(c.isalnum() or c == "_" or (dash and c == "-") for c in text)


def interesting(key: str) -> bool:
    if key.endswith("\n"):
        key = key[:-1]  # the pattern's $ also matches before a final newline
    if key in _NAMED:
        return True
    if key.startswith("nvidia-"):
        return _word(key[7:], dash=True)
    for prefix in ("cupy-cuda", "tensorrt-", "tensorrt_"):
        if key.startswith(prefix):
            return _word(key[len(prefix):])
    if key.startswith("jax-cuda"):
        for suffix in ("-plugin", "-pjrt"):
            if key.endswith(suffix):
                digits = key[8:len(key) - len(suffix)]
                return bool(digits) and all(c.isdecimal() for c in digits)  # re's \d
    return False


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
    """PEP 503's name: every run of "-", "_" and "." one "-", lowercase (re.sub(r"[-_.]+", "-", name).lower())."""
    out = []
    in_run = False
    for c in name:
        if c in "-_.":
            if not in_run:
                out.append("-")
            in_run = True
        else:
            out.append(c)
            in_run = False
    return "".join(out).lower()


# A .dist-info / .egg-info directory: name and version, exactly as DIST_DIR_PATTERN reads them.
DIST_DIR_PATTERN = r"^([A-Za-z0-9][A-Za-z0-9._]*?)-([^-]+?)\.(dist-info|egg-info)$"
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._")


def dist_dir(d: str) -> "tuple[str, str] | None":
    """(name, version) of a "NAME-VERSION.dist-info" (or .egg-info) directory name, or None."""
    if d.endswith("\n"):
        d = d[:-1]  # the pattern's $ also matches before a final newline
    for suffix in (".dist-info", ".egg-info"):
        if d.endswith(suffix):
            stem = d[:len(d) - len(suffix)]
            break
    else:
        return None
    name, dash, version = stem.partition("-")
    if not dash or not name or not version or "-" in version:
        return None
    if name[0] in "._" or not all(c in _NAME_CHARS for c in name):
        return None
    return name, version


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
            found = dist_dir(d)
            if found is None:
                continue
            key = norm(found[0])
            if key in seen:
                continue  # the first on sys.path wins, as for imports
            seen.add(key)
            yield found[0], found[1], entry, d


def static() -> "dict[str, Any]":
    out: "dict[str, Any]" = {"executable": sys.executable, "version": "%d.%d.%d" % sys.version_info[:3], "packages": []}
    for name, version, base, dist_dir in distributions():
        key = norm(name)
        if not interesting(key):
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


CUDA_LIB = r"/(lib(cudart|cudnn|cublas|cublasLt|nccl|cuda|nvrtc|cufft|cusparse|nvidia-ml)[\w.-]*\.so[\w.]*)$"


def mapped_libs() -> "list[str]":
    import re  # --deep only: the framework's import dwarfs it

    cuda_lib = re.compile(CUDA_LIB)
    libs = []
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 6 and cuda_lib.search(parts[-1]) and parts[-1] not in libs:
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


class _NotPlain(Exception):
    """A value dumps() leaves to the json module."""


def dumps(value: "Any") -> str:
    """json.dumps(value), the same text, for the plain values this child prints (dicts with string keys, lists,
    strings, ints, booleans, None) without importing json where the interpreter has its C quoting function."""
    quote: "Callable[[str], str] | None" = None
    try:
        from _json import encode_basestring_ascii as quote
    except ImportError:
        pass
    if quote is not None:
        try:
            return _plain(value, quote)
        except _NotPlain:
            pass
    import json

    return json.dumps(value)


def _plain(value: "Any", quote: "Any") -> str:
    kind = type(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return int.__repr__(value)
    if kind is str:
        return str(quote(value))
    if kind is list or kind is tuple:
        return "[" + ", ".join(_plain(v, quote) for v in value) + "]"
    if kind is dict and all(type(k) is str for k in value):
        return "{" + ", ".join(quote(k) + ": " + _plain(v, quote) for k, v in value.items()) + "}"
    raise _NotPlain


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--deep":
        result = deep(sys.argv[2])
    else:
        result = static()
    sys.stdout.write("\n@@GPU-DOCTOR@@" + dumps(result))
