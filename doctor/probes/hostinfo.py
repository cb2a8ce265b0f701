"""Host facts: OS, kernel, libc, compiler, container and WSL, the NVIDIA container toolkit."""

from __future__ import annotations

import os
import platform
import re

from doctor import parsers
from doctor.facts import ContainerToolkit, HostInfo
from doctor.host import Host
from doctor.probes.base import Recorder
from doctor.safeio import InputError, load_json


def probe_host(host: Host, rec: Recorder) -> HostInfo:
    osr = _os_release(host, rec)
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


def _os_release(host: Host, rec: Recorder) -> dict[str, str]:
    # os-release is the one file every current distribution ships; distro's other sources
    # (lsb_release, uname) would add subprocesses, so they are off. root_dir is distro's own seam.
    import distro

    if not (host.exists("/etc/os-release") or host.exists("/usr/lib/os-release")):
        rec.error("host", "no /etc/os-release or /usr/lib/os-release")
        return {}
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
        return platform.release() or None
    return None


def _arch(host: Host) -> str | None:
    # The inspected system's architecture is only certain for the running one.
    return platform.machine() or None if host.live else None


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
    """docker / podman / kubernetes, or None on a host (or a container we cannot recognise)."""
    if host.getenv("KUBERNETES_SERVICE_HOST") or host.exists("/var/run/secrets/kubernetes.io"):
        return "kubernetes"
    if host.exists("/run/.containerenv"):
        return "podman"
    if host.exists("/.dockerenv"):
        return "docker"
    cgroup = host.try_read("/proc/1/cgroup") or ""
    if "kubepods" in cgroup:
        return "kubernetes"
    if "docker" in cgroup or "containerd" in cgroup:
        return "docker"
    if "libpod" in cgroup:
        return "podman"
    return None


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
        answers.append(bool(text) and "nvidia" in text)
    if "podman" in engines or "cri-o" in engines:
        # podman and CRI-O use CDI specs generated by `nvidia-ctk cdi generate`.
        answers.append(bool(host.glob("/etc/cdi/nvidia*.yaml") + host.glob("/var/run/cdi/nvidia*.yaml")))
    return any(answers) if answers else None
