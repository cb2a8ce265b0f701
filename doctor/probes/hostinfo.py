"""Host facts: OS, kernel, libc, compiler, container and WSL, the NVIDIA container toolkit."""

from __future__ import annotations

import os
import re

from doctor import parsers
from doctor.host import Host
from doctor.model.facts import ContainerToolkit, HostInfo
from doctor.probes import osrelease
from doctor.probes.base import Recorder
from doctor.safeio import InputError, load_json

_UNREAD: dict[str, str | None] = {"unread": None}  # probe_host's default: os-release not read yet


def probe_host(host: Host, rec: Recorder, os_release: dict[str, str | None] | None = _UNREAD) -> HostInfo:
    """``os_release``: what :func:`doctor.probes.osrelease.read` answered, when the caller read it already."""
    osr = _os_release(host, rec, osrelease.read(host) if os_release is _UNREAD else os_release)
    container = detect_container(host)
    return HostInfo(
        os_id=osr.get("ID"),
        os_version=osr.get("VERSION_ID"),
        os_pretty=osr.get("PRETTY_NAME"),
        kernel=_kernel(host, rec),
        arch=_arch(host),
        glibc=_glibc(host, rec),
        gcc=_gcc(host, rec),
        container=container,
        wsl=detect_wsl(host),
        container_toolkit=None if container else probe_container_toolkit(host, rec),
    )


def _os_release(host: Host, rec: Recorder, read: dict[str, str | None] | None) -> dict[str, str | None]:
    # os-release is the one file every current distribution ships; distro's other sources
    # (lsb_release, uname) would add subprocesses, so they are off. root_dir is distro's own seam.
    if not (host.exists("/etc/os-release") or host.exists("/usr/lib/os-release")):
        rec.error("host", "no /etc/os-release or /usr/lib/os-release")
        return {}
    if read is not None:  # distro's answer, read without importing it (doctor.probes.osrelease)
        rec.source("host.os_id", "file:/etc/os-release")
        return read
    # Only where distro alone can answer. It imports logging, whose fork hooks (os.register_at_fork) registered
    # while another probe thread forks a child break that child: probes.collect imports it first, in its own
    # thread, before any child starts, whenever osrelease.read answered None.
    import distro

    try:
        info = distro.LinuxDistribution(
            include_lsb=False,
            include_uname=False,
            include_oslevel=False,
            root_dir=None if host.live else str(host.root),
        )
        data = info.os_release_info()
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        rec.error("host", f"os-release unreadable: {exc}")
        return {}
    rec.source("host.os_id", "file:/etc/os-release")
    return {"ID": info.id() or None, "VERSION_ID": data.get("version_id"), "PRETTY_NAME": data.get("pretty_name")}


def _kernel(host: Host, rec: Recorder) -> str | None:
    text = host.try_read("/proc/sys/kernel/osrelease")
    if text and text.strip():
        rec.source("host.kernel", "file:/proc/sys/kernel/osrelease")
        return text.strip()
    if host.live:
        rec.source("host.kernel", "uname")
        return _uname("release")
    return None


def _arch(host: Host) -> str | None:
    # The inspected system's architecture is only certain for the running one.
    return _uname("machine") if host.live else None


def _uname(field: str) -> str | None:
    """A field of the running system's uname(2), as platform.release() / machine() give it: os.uname() itself,
    without importing platform (~4 ms of every `check`)."""
    try:
        return getattr(os.uname(), field) or None
    except (AttributeError, OSError):  # no uname (not a POSIX system)
        return None


def _glibc(host: Host, rec: Recorder) -> str | None:
    if host.live:
        try:
            value = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
        except (ValueError, OSError):
            value = None
        if value and value.startswith("glibc "):
            rec.source("host.glibc", "confstr:CS_GNU_LIBC_VERSION")
            return value.split()[1]
        return None
    for path in host.glob("/lib*/*-linux-gnu/libc.so.6") + host.glob("/usr/lib*/libc-*.so"):
        real = host.realpath(path)
        m = re.search(r"libc-(\d+\.\d+)\.so", real)
        if m:
            return m.group(1)
    return None


def _gcc(host: Host, rec: Recorder) -> str | None:
    result = host.run(["gcc", "-dumpfullversion", "-dumpversion"])
    if result.ok:
        rec.source("host.gcc", "cmd:gcc -dumpfullversion")
        return parsers.parse_gcc_version(result.stdout)
    if result.error != "not found":
        rec.error("host", result.describe())
    return None


def detect_container(host: Host) -> str | None:
    """docker / podman / kubernetes, or None on a host (or a container we cannot recognise).

    Decided from several signals, because one file proves little: a VM or bare-metal machine whose root
    file system was built from a Docker image keeps ``/.dockerenv``, yet runs its own kernel with its own
    init as PID 1 on a block device. Strong signals (any one decides): the Kubernetes service account or
    environment, podman's ``/run/.containerenv``, a ``container=`` variable in PID 1's environment (systemd's
    convention, set by podman, LXC, systemd-nspawn), PID 1 in a docker/containerd/kubepods/libpod cgroup,
    a root file system on an overlay of a container engine. ``/.dockerenv`` alone counts only when the
    root file system is not a plain block device (or cannot be read).
    """
    if host.getenv("KUBERNETES_SERVICE_HOST") or host.exists("/var/run/secrets/kubernetes.io"):
        return "kubernetes"
    if host.exists("/run/.containerenv"):
        return "podman"
    cgroup = host.try_read("/proc/1/cgroup") or ""
    if "kubepods" in cgroup:
        return "kubernetes"
    if "libpod" in cgroup:
        return "podman"
    if re.search(r"\b(docker|containerd)\b", cgroup):
        return "docker"
    declared = _pid1_container_variable(host)
    if declared:
        return {"oci": "docker", "libpod": "podman"}.get(declared, declared)
    root_fs = _root_filesystem(host)
    if root_fs and root_fs[0] in ("overlay", "aufs", "fuse-overlayfs") and \
            re.search(r"docker|containerd|containers/storage", " ".join(root_fs)):
        return "docker" if "containers/storage" not in " ".join(root_fs) else "podman"
    if host.exists("/.dockerenv"):
        if root_fs and root_fs[1].startswith("/dev/") and "docker" not in root_fs[1]:
            return None  # the image's marker file, on a machine with its own disk and kernel
        return "docker"
    return None


def _pid1_container_variable(host: Host) -> str | None:
    """PID 1's ``container=`` variable (readable as root only); None when absent or unreadable."""
    try:
        raw = host.read_bytes("/proc/1/environ", 65536)
    except (OSError, ValueError):
        return None
    for item in raw.split(b"\0"):
        if item.startswith(b"container="):
            value = item[len(b"container="):].decode("ascii", "replace").strip()
            return value if re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", value) else None
    return None


def _root_filesystem(host: Host) -> tuple[str, str, str] | None:
    """(file system type, source, super options) of the mount at / as this process sees it, or None."""
    text = host.try_read("/proc/self/mountinfo")
    if not text:
        return None
    found = None
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if sep and len(fields) >= 5 and fields[4] == "/" and len(tail) >= 2:
            found = (tail[0], tail[1], tail[2] if len(tail) > 2 else "")  # the last mount on / is the one seen
    return found


def detect_wsl(host: Host) -> bool:
    version = host.try_read("/proc/version") or ""
    return "microsoft" in version.lower() or host.is_dir("/usr/lib/wsl/lib")


ENGINES = ("docker", "containerd", "podman", "cri-o", "crio")


def probe_container_toolkit(host: Host, rec: Recorder) -> ContainerToolkit:
    engines = [e for e in ENGINES if host.which(e) or host.which(f"{e}d")]
    engines = sorted({"cri-o" if e == "crio" else e for e in engines})
    version = None
    installed = False
    for cmd in (["nvidia-ctk", "--version"], ["nvidia-container-cli", "--version"]):
        if host.which(cmd[0]) is None:
            continue
        installed = True
        result = host.run(cmd)
        if result.ok:
            m = re.search(r"version\s+v?(\d+\.\d+\.\d+)", result.stdout, re.I)
            version = m.group(1) if m else None
            rec.source("host.container_toolkit.version", "cmd:" + " ".join(cmd))
            break
        rec.error("container-toolkit", result.describe())
    if not installed and host.which("nvidia-container-runtime"):
        installed = True
    return ContainerToolkit(
        installed=installed,
        version=version,
        engines=engines,
        runtime_configured=_runtime_configured(host, engines) if engines else None,
    )


def _runtime_configured(host: Host, engines: list[str]) -> bool | None:
    """Is some engine set up with the nvidia runtime or CDI? None when its config is unreadable."""
    answers: list[bool] = []
    if "docker" in engines:
        text = host.try_read("/etc/docker/daemon.json")
        if text is None:
            answers.append(False)
        else:
            try:  # load_json: a hostile file under --root (deep nesting, 5,000-digit numbers) is just unreadable
                cfg = load_json(text)
                runtimes = cfg.get("runtimes", {}) if isinstance(cfg, dict) else {}
                answers.append("nvidia" in runtimes or bool(cfg.get("features", {}).get("cdi")))
            except (InputError, AttributeError, TypeError):
                answers.append(False)
    if "containerd" in engines:
        text = host.try_read("/etc/containerd/config.toml")
        answers.append(text is not None and "nvidia" in text)
    if "podman" in engines or "cri-o" in engines:
        # podman and CRI-O use CDI specs generated by `nvidia-ctk cdi generate`.
        answers.append(bool(host.glob("/etc/cdi/nvidia*.yaml") + host.glob("/var/run/cdi/nvidia*.yaml")))
    return any(answers) if answers else None
