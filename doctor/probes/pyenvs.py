"""Python environments and the GPU-relevant packages in them (torch, TensorFlow, JAX, nvidia-* …)."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import replace
from typing import Any

from doctor import parsers
from doctor.host import Host
from doctor.model.facts import DeepResult, PyPackage, PythonEnv
from doctor.model.versions import cudnn_version
from doctor.probes.base import Recorder, run_python_child

DEEP_FRAMEWORKS = ("torch", "tensorflow", "tensorflow-cpu", "tf-nightly", "jaxlib", "cupy")


OWN_ENV_PROBE = "python:own-environment"  # the ProbeError that says gpu-doctor skipped its own environment

# What makes an environment worth checking even when gpu-doctor itself is installed in it.
_FRAMEWORK_DISTS = ("torch", "tensorflow", "tensorflow-cpu", "tf-nightly", "jax", "jaxlib", "paddlepaddle-gpu",
                    "onnxruntime-gpu", "mxnet")


def own_prefix() -> str | None:
    """gpu-doctor's own virtual environment (pipx, a venv), or None when it runs in a system interpreter.

    A system interpreter is also the user's, so it is not excluded; a venv holding only gpu-doctor and its
    dependencies is not where the user's code runs, and checking it would pin gpu-doctor's own nvidia-ml-py.
    """
    if sys.prefix == getattr(sys, "base_prefix", sys.prefix):
        return None
    if _holds_frameworks():
        return None  # installed into the user's own project environment: that one is the right one to check
    return os.path.realpath(sys.prefix)


_DIST_DIR = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._]*?)-[^-]+?\.(?:dist-info|egg-info)$")  # as pyenv_child reads them


def _holds_frameworks() -> bool:
    """Whether gpu-doctor's own interpreter has a framework installed, read from the .dist-info / .egg-info
    directory names on sys.path (PEP 427 / 376 put the name in them): importlib.metadata would open every
    distribution's METADATA, tens of milliseconds on the critical path of every `check`."""
    wanted = {n.replace("-", "_") for n in _FRAMEWORK_DISTS}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if not name.endswith("-info"):  # most of sys.path is the standard library's modules
                continue
            m = _DIST_DIR.match(name)
            dist = re.sub(r"[-_.]+", "_", m.group(1)).lower() if m else ""
            if dist in wanted or dist.startswith("cupy"):
                return True
    return False


def target_pythons(host: Host, requested: list[str], rec: Recorder | None = None) -> list[tuple[str, str]]:
    """The interpreters whose frameworks are checked, with why each was chosen.

    Explicit --python first; else the active environment ($VIRTUAL_ENV, then $CONDA_PREFIX), else python3 on
    PATH. gpu-doctor's own environment (pipx, a venv made for it) is never the default: it is skipped, and
    the skip is recorded so the report can say so and how to check it anyway (--python).
    """
    if requested:
        return [(interpreter_of(host, p), "--python") for p in requested]
    own = own_prefix() if host.live else None
    skipped: list[str] = []

    def mine(prefix: str) -> bool:
        if own is not None and os.path.realpath(prefix) == own:
            skipped.append(prefix)
            return True
        return False

    found: tuple[str, str] | None = None
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = host.getenv(var)
        if prefix:
            exe = interpreter_of(host, prefix)
            if host.exists(exe) and not mine(prefix):
                found = (exe, var)
                break
    if found is None:
        found = _python_on_path(host, mine)
    if skipped and rec is not None:
        rec.error(OWN_ENV_PROBE, f"gpu-doctor's own environment {skipped[0]} is not checked: "
                  f"--python {skipped[0]} checks it")
    return [found] if found else []


def _python_on_path(host: Host, mine: Any) -> tuple[str, str] | None:
    """The first python3 (else python) on PATH that is not in gpu-doctor's own environment.

    A pyenv shim is resolved to the interpreter it would run, as pyenv itself decides (see _pyenv_target): a
    shim is a shell script that starts `pyenv exec`, half a second of shell on the probe's critical path."""
    for name in ("python3", "python"):
        for d in (host.getenv("PATH") or "/usr/local/bin:/usr/bin:/bin").split(os.pathsep):
            if not d:
                continue
            exe = host.which(f"{d.rstrip('/')}/{name}")
            if not exe or not host.path(exe).is_file():
                continue
            target = _pyenv_target(host, exe, name)
            if target == _SYSTEM:
                continue  # pyenv's "system" version: the next python3 on PATH, as `pyenv exec` finds it
            exe = target or exe
            if not mine(os.path.dirname(os.path.dirname(exe))):
                return exe, "PATH"
    return None


_SYSTEM = "system"
_SHIM_MAX = 4096  # a pyenv shim is a dozen lines of shell


def _pyenv_target(host: Host, exe: str, name: str) -> str | None:
    """The interpreter a pyenv shim runs; _SYSTEM for pyenv's "system" version; None when ``exe`` is not a
    shim or its version cannot be resolved without pyenv itself (then the shim runs, slowly but rightly).

    pyenv's order (pyenv-version-name, pyenv-version-file): $PYENV_VERSION, else the nearest .python-version
    from the current directory ($PYENV_DIR) upwards, else $PYENV_ROOT/version; each names one or more versions
    (the first installed one wins), installed under $PYENV_ROOT/versions/<version>."""
    try:
        head = host.read_head(exe, _SHIM_MAX).decode("utf-8", "replace")  # an interpreter is MBs: only its head
    except (OSError, ValueError):
        return None
    if not head.startswith("#!") or "pyenv" not in head or " exec " not in head:
        return None
    m = re.search(r'^export PYENV_ROOT="([^"\n]+)"', head, re.MULTILINE)
    root = m.group(1) if m else (host.getenv("PYENV_ROOT") or os.path.dirname(os.path.dirname(exe)))
    names = _pyenv_version_names(host, root)
    for version in names:
        if version == _SYSTEM:
            return _SYSTEM
        if "/" in version or version in (".", ".."):
            return None  # a path or an odd name: pyenv decides those itself
        candidate = f"{root.rstrip('/')}/versions/{version}/bin/{name}"
        if host.path(candidate).is_file():
            return candidate
    return None


def _pyenv_version_names(host: Host, root: str) -> list[str]:
    chosen = host.getenv("PYENV_VERSION")
    if chosen:
        return [v for v in chosen.split(":") if v]
    directory = host.getenv("PYENV_DIR") or (os.getcwd() if host.live else "/")
    for _ in range(64):  # the directory's ancestors, up to the root
        names = _version_file(host, f"{directory.rstrip('/')}/.python-version")
        if names:
            return names
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return _version_file(host, f"{root.rstrip('/')}/version") or [_SYSTEM]


def _version_file(host: Host, path: str) -> list[str]:
    """The versions a pyenv version file names (words; '#' comments ignored), [] when absent or empty."""
    text = host.try_read(path, _SHIM_MAX)
    if not text:
        return []
    return [w for line in text.splitlines() if not line.lstrip().startswith("#") for w in line.split()]


def interpreter_of(host: Host, path: str) -> str:
    """An environment directory names its interpreter; an interpreter names itself."""
    if host.is_dir(path):
        for name in ("bin/python3", "bin/python", "python.exe"):
            if host.exists(f"{path.rstrip('/')}/{name}"):
                return f"{path.rstrip('/')}/{name}"
        return f"{path.rstrip('/')}/bin/python"
    return path


def probe_env(host: Host, rec: Recorder, exe: str, origin: str, deep: bool, deep_timeout: float) -> PythonEnv:
    raw = run_python_child(host, exe, "pyenv_child.py", [], max(host.timeout, 10.0), "python", rec)
    if raw is None:
        reason = rec.errors[-1].reason if rec.errors else "no answer"
        return PythonEnv(executable=exe, origin=origin, error=reason)
    packages = packages_from_raw(_package_records(raw.get("packages")))
    if deep:
        packages = [_deepen(host, rec, exe, p, deep_timeout) for p in packages]
    return PythonEnv(executable=exe, version=_str(raw.get("version")), origin=origin, packages=packages)


# The child's reply is JSON from someone's interpreter (a sitecustomize, a patched importlib.metadata, a
# hostile environment): every value is checked for the type the facts need, anything else reads as unknown.
def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _strs(value: Any) -> list[str] | None:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else None


def _package_records(value: Any) -> list[dict[str, Any]]:
    """The package records of a reply: dicts with a string name; their ``files`` a dict of strings."""
    out = []
    for p in value if isinstance(value, list) else []:
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            continue
        files = p.get("files")
        files = {k: v for k, v in files.items() if isinstance(v, str)} if isinstance(files, dict) else {}
        out.append({**p, "version": _str(p.get("version")), "files": files})
    return out


def _deepen(host: Host, rec: Recorder, exe: str, pkg: PyPackage, timeout: float) -> PyPackage:
    if not (pkg.name in DEEP_FRAMEWORKS or pkg.name.startswith("cupy")):
        return pkg
    raw = run_python_child(host, exe, "pyenv_child.py", ["--deep", pkg.name], timeout, f"deep:{pkg.name}", rec)
    if raw is None:
        reason = rec.errors[-1].reason if rec.errors else "no answer"
        return replace(pkg, deep=DeepResult(error=reason))
    result = DeepResult(
        is_available=_bool(raw.get("is_available")),
        device_count=_int(raw.get("device_count")),
        error=_str(raw.get("error")),
        cuda=_s(raw.get("cuda")),
        cudnn=cudnn_version(raw.get("cudnn")),  # torch answers 92400 for cuDNN 9.24.0
        arch_list=_strs(raw.get("arch_list")),
    )
    return replace(pkg, deep=result, arch_list=_strs(raw.get("arch_list")) or pkg.arch_list,
                   loaded_libraries=_strs(raw.get("loaded_libraries")))


def _s(value: Any) -> str | None:
    """A version the child may report as a number (torch.backends.cudnn.version() is an int)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    return str(value)


def packages_from_raw(raw: list[dict[str, Any]]) -> list[PyPackage]:
    """Turn what the child found into facts: the build's CUDA, its cuDNN, CPU-only or not."""
    names = {p.get("name") for p in raw}
    out = []
    for p in raw:
        name = str(p.get("name"))
        version = _s(p.get("version"))
        files = p.get("files") or {}
        cuda = cudnn = None
        cpu_only: bool | None = None
        local = version.split("+", 1)[1] if version and "+" in version else ""
        if name == "torch":
            info = parsers.parse_torch_version_py(files.get("torch/version.py", ""))
            cuda = info.get("cuda")
            if files.get("torch/version.py"):
                cpu_only = info.get("cuda") is None and info.get("hip") is None
            elif local == "cpu":
                cpu_only = True
            # The cuDNN torch was built with is the one its wheel metadata pins, not whichever cuDNN wheel the
            # environment holds (a second one may have overwritten it: that is what the checks must see).
            cudnn = _pinned(p.get("requires"), "nvidia-cudnn-cu")
        elif name in ("tensorflow", "tensorflow-gpu", "tf-nightly", "tensorflow-cpu"):
            info = parsers.parse_tf_build_info(files.get("tensorflow/python/platform/build_info.py", ""))
            cuda, cudnn = info.get("cuda"), info.get("cudnn")
            cpu_only = True if name == "tensorflow-cpu" else (
                None if info.get("is_cuda_build") is None else not info["is_cuda_build"])
        elif name == "jaxlib" or name == "jax":
            m = re.match(r"cuda(\d+)(?:\.cudnn(\d)(\d+))?", local)
            plugin = next((hit for n in names if (hit := re.fullmatch(r"jax-cuda(\d+)-plugin", str(n)))), None)
            if m:
                cuda = m.group(1)
                cudnn = f"{m.group(2)}.{m.group(3)}" if m.group(2) else None
                cpu_only = False
            elif plugin:
                cuda = plugin.group(1)
                cpu_only = False
            else:
                cpu_only = True
        elif name in ("torchvision", "torchaudio"):
            m = re.fullmatch(r"cu(\d+)(\d)", local)
            cuda = f"{m.group(1)}.{m.group(2)}" if m else None
            cpu_only = True if local == "cpu" else None
        elif name.startswith("cupy-cuda"):
            m = re.fullmatch(r"cupy-cuda(\d\d)(\d|x)", name)
            if m:
                cuda = m.group(1) if m.group(2) == "x" else f"{m.group(1)}.{m.group(2)}"
            cpu_only = False
        elif name == "paddlepaddle-gpu":
            m = re.search(r"post(\d+)(\d)$", version or "")
            cuda = f"{m.group(1)}.{m.group(2)}" if m else None
            cpu_only = False
        elif name in ("paddlepaddle", "onnxruntime"):
            cpu_only = True
        elif name.startswith("nvidia-"):
            m = re.search(r"-cu(\d+)$", name)
            cuda = m.group(1) if m else None
            if re.fullmatch(r"nvidia-cudnn-cu\d+", name):
                cudnn = version
            if re.fullmatch(r"nvidia-cuda-runtime-cu\d+", name) and version:
                cuda = ".".join(version.split(".")[:2])
        out.append(PyPackage(name=name, version=version, cuda=cuda, cudnn=cudnn, cpu_only=cpu_only))
    return sorted(out, key=lambda x: x.name)


_PIN = re.compile(r"(?i)(nvidia-[a-z0-9-]{1,40}?)\s*(?:\[[^\]]{0,80}\])?\s*\(?\s*===?\s*([0-9][0-9.]{0,40})")


def _pinned(requires: Any, prefix: str) -> str | None:
    """The version a wheel's Requires-Dist pins for the nvidia-* wheel whose name starts with ``prefix``
    ("nvidia-cudnn-cu12 (==9.1.0.70) ; platform_system == 'Linux'" or "nvidia-cudnn-cu13==9.13.0.50; …")."""
    if not isinstance(requires, list):
        return None
    for line in requires:
        m = _PIN.match(line) if isinstance(line, str) else None
        if m and m.group(1).lower().startswith(prefix):
            return m.group(2).rstrip(".")
    return None
