"""CUDA toolkits, what the dynamic loader resolves, and every cuDNN on the machine."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from doctor import parsers
from doctor.host import Host
from doctor.model.facts import Cudnn, LibRef, LoaderInfo, PythonEnv, Toolkit
from doctor.model.versions import cudnn_version
from doctor.probes.base import Recorder

MULTIARCH_DIRS = (
    "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
    "/lib64", "/usr/lib64", "/lib", "/usr/lib",
    "/usr/lib/wsl/lib",  # WSL2's driver libraries (libcuda.so) live here
    "/usr/lib64/nvidia", "/usr/lib/x86_64-linux-gnu/nvidia/current",  # RHEL / Debian layouts
)


# --- toolkits ---------------------------------------------------------------------------------


def toolkit_roots(host: Host, envs: list[PythonEnv] | None = None) -> list[tuple[str, str]]:
    """(root, source) for every toolkit candidate, most explicit first."""
    cands: list[tuple[str, str]] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = host.getenv(var)
        if value:
            cands.append((value, f"env:{var}"))
    for pattern in ("/usr/local/cuda*", "/opt/cuda*"):
        cands += [(p, "path") for p in host.glob(pattern) if host.is_dir(p)]
    if host.is_dir("/usr/lib/nvidia-cuda-toolkit"):
        cands.append(("/usr/lib/nvidia-cuda-toolkit", "distro"))
    elif host.exists("/usr/bin/nvcc"):
        cands.append(("/usr", "distro"))
    conda = host.getenv("CONDA_PREFIX")
    if conda and (host.exists(f"{conda}/bin/nvcc") or host.glob(f"{conda}/lib/libcudart.so*")):
        cands.append((conda, "conda"))
    return cands


def probe_toolkits(host: Host, rec: Recorder, nvcc_cache: dict[str, str | None]) -> list[Toolkit]:
    seen: dict[str, Toolkit] = {}
    for root, source in toolkit_roots(host):
        real = host.realpath(root)
        if real in seen and source.startswith("env:"):
            # CUDA_HOME naming a toolkit another candidate found first: record that it is that toolkit
            rec.source(f"toolkits.{source}", f"realpath:{real}")
        if real in seen or not host.is_dir(root):
            if not host.is_dir(root) and source.startswith("env:"):
                rec.error("toolkits", f"{source.split(':')[1]}={root} does not exist")
            continue
        version = toolkit_version(host, root, rec)
        nvcc = f"{root}/bin/nvcc" if source != "distro" or root != "/usr" else "/usr/bin/nvcc"
        nvcc_version = nvcc_version_of(host, nvcc, rec, nvcc_cache) if host.exists(nvcc) else None
        if version is None and nvcc_version is None:
            continue  # a directory called cuda-something with no toolkit in it
        seen[real] = Toolkit(root=real, version=version or _major_minor(nvcc_version), nvcc_version=nvcc_version,
                             source=source)
    return list(seen.values())


def pip_toolkits(envs: list[PythonEnv]) -> list[Toolkit]:
    """CUDA pieces installed as pip wheels (nvidia-cuda-nvcc-cu12, nvidia-cuda-runtime-cu12)."""
    out = []
    for env in envs:
        for pkg in env.packages:
            if re.fullmatch(r"nvidia-cuda-(nvcc|runtime)-cu\d+", pkg.name) and pkg.version:
                is_nvcc = "nvcc" in pkg.name
                out.append(Toolkit(root=f"{env.executable} [{pkg.name}]", version=_major_minor(pkg.version),
                                   nvcc_version=pkg.version if is_nvcc else None, source="pip"))
    return out


def _major_minor(version: str | None) -> str | None:
    if not version:
        return None
    return ".".join(version.split(".")[:2])


def toolkit_version(host: Host, root: str, rec: Recorder) -> str | None:
    """The toolkit's own statement of its version, from the most to the least precise file."""
    text = host.try_read(f"{root}/version.json")
    if text:
        v = parsers.parse_cuda_version_json(text)
        if v:
            rec.source(f"toolkit:{root}", f"file:{root}/version.json")
            return v
    text = host.try_read(f"{root}/version.txt")
    if text:
        v = parsers.parse_cuda_version_txt(text)
        if v:
            rec.source(f"toolkit:{root}", f"file:{root}/version.txt")
            return v
    for header in (f"{root}/include/cuda.h", f"{root}/targets/x86_64-linux/include/cuda.h"):
        v = cuda_h_version(host, header)
        if v:
            rec.source(f"toolkit:{root}", f"file:{header}")
            return v
    return None


CUDA_H_HEAD = 64 * 1024  # cuda.h defines CUDA_VERSION in its first ~15 kB (after the licence); the file is ~1.1 MB


def cuda_h_version(host: Host, header: str) -> str | None:
    """CUDA_VERSION of a cuda.h (a toolkit without version.json: pip's wheels, some distributions): its head first,
    whole lines only (a line cut at the end could give "130" for "13000"); the whole file where the head has none."""
    try:
        head = host.read_head(header, CUDA_H_HEAD)
    except (OSError, ValueError):
        return None
    if len(head) < CUDA_H_HEAD:  # the whole file
        return parsers.parse_cuda_h_version(head.decode("utf-8", "replace"))
    v = parsers.parse_cuda_h_version(head[:head.rfind(b"\n") + 1].decode("utf-8", "replace"))
    if v:
        return v
    text = host.try_read(header)
    return parsers.parse_cuda_h_version(text) if text else None


def nvcc_version_of(host: Host, nvcc: str, rec: Recorder, cache: dict[str, str | None]) -> str | None:
    real = host.realpath(nvcc)
    if real not in cache:
        result = host.run([nvcc, "--version"])
        if result.ok:
            cache[real] = parsers.parse_nvcc_version(result.stdout)
        else:
            rec.error("nvcc", result.describe())
            cache[real] = None
    return cache[real]


# --- loader -----------------------------------------------------------------------------------


def ld_conf_dirs(host: Host) -> list[str]:
    dirs: list[str] = []
    todo = ["/etc/ld.so.conf"]
    seen = set()
    while todo:
        conf = todo.pop(0)
        if conf in seen:
            continue
        seen.add(conf)
        for line in (host.try_read(conf) or "").splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("include "):
                pattern = line.split(None, 1)[1]
                if not pattern.startswith("/"):
                    pattern = "/etc/" + pattern
                todo += host.glob(pattern)
            elif line.startswith("/"):
                dirs.append(line)
    return dirs


def library_index(host: Host, rec: Recorder) -> list[tuple[str, str, str]]:
    """(soname, path, origin) in the order the dynamic loader searches."""
    entries: list[tuple[str, str, str]] = []
    for d in (host.getenv("LD_LIBRARY_PATH") or "").split(":"):
        if d:
            entries += [(name, f"{d.rstrip('/')}/{name}", "LD_LIBRARY_PATH") for name in host.listdir(d)]
    cache: list[tuple[str, str]] | None = None
    if host.live:
        exe = host.which("ldconfig") or next((p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig")
                                              if os.access(p, os.X_OK)), None)
        if exe:
            result = host.run([exe, "-p"])
            if result.ok:
                cache = parsers.parse_ldconfig_p(result.stdout)
                rec.source("loader", "cmd:ldconfig -p")
            else:
                rec.error("loader", result.describe())
    if cache is None:  # a sysroot: read the directories ldconfig would have indexed
        cache = [(name, f"{d}/{name}") for d in [*ld_conf_dirs(host), *MULTIARCH_DIRS] for name in host.listdir(d)]
        rec.source("loader", "file:/etc/ld.so.conf")
    entries += [(name, path, "ldconfig") for name, path in cache]
    return entries


def _resolve(host: Host, index: Iterable[tuple[str, str, str]], pattern: str) -> LibRef | None:
    rx = re.compile(pattern)
    head = pattern.split("\\", 1)[0]  # the literal start ("libcudart"): most of ldconfig's ~1,000 names fail it
    for name, path, _origin in index:
        if name.startswith(head) and rx.fullmatch(name):
            real = host.realpath(path)
            version = parsers.lib_version_from_name(os.path.basename(real)) or parsers.lib_version_from_name(name)
            return LibRef(path=path, version=version, stub="/stubs/" in real or "/stubs/" in path)
    return None


def probe_loader(host: Host, rec: Recorder, nvcc_cache: dict[str, str | None]) -> LoaderInfo:
    index = library_index(host, rec)
    nvcc = host.which("nvcc")
    return LoaderInfo(
        nvcc_on_path=LibRef(path=nvcc, version=nvcc_version_of(host, nvcc, rec, nvcc_cache)) if nvcc else None,
        libcudart=_resolve(host, index, r"libcudart\.so\.\d+(?:\.\d+)*"),
        libcudnn=_resolve(host, index, r"libcudnn\.so\.\d+(?:\.\d+)*"),
        libcuda=_resolve(host, index, r"libcuda\.so\.1") or _resolve(host, index, r"libcuda\.so"),
    )


# --- cuDNN ------------------------------------------------------------------------------------

HEADER_DIRS = ("/usr/include", "/usr/include/x86_64-linux-gnu", "/usr/include/aarch64-linux-gnu",
               "/usr/local/include")


def probe_cudnn(host: Host, rec: Recorder, toolkits: list[Toolkit], loader: LoaderInfo,
                envs: list[PythonEnv], cudnn_int: int | None) -> list[Cudnn]:
    found: list[Cudnn] = []
    seen: set[tuple[str, str]] = set()

    def add(version: str | None, location: str, source: str, file: str | None = None) -> None:
        # One file is one finding, whatever name reached it: /lib is /usr/lib on a merged-/usr system, Ubuntu's
        # cudnn_version.h is an alternatives link to cudnn_version_v9.h, libcudnn.so.9 (what cudnnGetVersion
        # answered through) is libcudnn.so.9.x.y. The same file reporting another version is kept: that is news.
        key = (host.realpath(file) if file else location, version or "")
        if version and key not in seen:
            seen.add(key)
            found.append(Cudnn(version=version, location=location, source=source))

    dirs = [*HEADER_DIRS, *(f"{t.root}/include" for t in toolkits if t.source != "pip")]
    for d in dirs:
        for name in host.listdir(d):  # /usr/include holds thousands of headers: the prefix test first
            if name.startswith("cudnn") and re.fullmatch(r"cudnn_version(_v\d+)?\.h|cudnn(_v\d+)?\.h", name):
                text = host.try_read(f"{d}/{name}")
                add(parsers.parse_cudnn_header(text or ""), f"{d}/{name}", "header", f"{d}/{name}")
    lib_dirs = [*MULTIARCH_DIRS, *(f"{t.root}/lib64" for t in toolkits if t.source != "pip")]
    lib_dirs += [d for d in (host.getenv("LD_LIBRARY_PATH") or "").split(":") if d]
    for d in dict.fromkeys(lib_dirs):
        for name in host.listdir(d):
            m = re.fullmatch(r"libcudnn\.so\.(\d+\.\d+\.\d+)", name) if name.startswith("libcudnn.so.") else None
            if m:
                add(m.group(1), f"{d}/{name}", "library", f"{d}/{name}")
    if cudnn_int and loader.libcudnn:
        add(cudnn_from_int(cudnn_int), loader.libcudnn.path + " (cudnnGetVersion)", "library",
            loader.libcudnn.path)
    for env in envs:
        for pkg in env.packages:
            if re.fullmatch(r"nvidia-cudnn-cu\d+", pkg.name):
                add(pkg.version, f"{env.executable} [{pkg.name}]", "pip")
    conda = host.getenv("CONDA_PREFIX")
    if conda:
        for meta in host.glob(f"{conda}/conda-meta/cudnn-*.json"):
            m = re.match(r"cudnn-(\d+(?:\.\d+)+)-", meta.rsplit("/", 1)[-1])
            if m:
                add(m.group(1), meta, "conda")
    return found


def cudnn_from_int(value: int) -> str | None:
    """cudnnGetVersion's integer, decoded by the one decoder (doctor.model.facts.cudnn_version)."""
    return cudnn_version(value) if value >= 1000 else None
