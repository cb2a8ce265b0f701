"""Where a framework wheel must run: the platform as a constraint of every plan. Pure: facts + matrix in.

One answer for ``check``, ``fix``, ``plan`` and ``matrix gpu``: a GPU that only ever comes with an Arm host
(Grace Hopper/Blackwell, DGX Spark, Jetson Thor) decides by itself (its ``gpus.toml`` row's ``platform``); an
embedded GPU without one is a JetPack 4–6 board (``jetson``: no CUDA wheels on PyPI, the driver and CUDA come
with JetPack); otherwise a Tegra kernel, then the host's architecture, then the operating system decide.
"""

from __future__ import annotations

import re
from typing import Any

PLATFORMS = ("linux-x86_64", "linux-aarch64", "jetson", "windows", "macos")
ARM = ("aarch64", "arm64", "sbsa")


def gpu_platform(row: dict[str, Any] | None) -> str | None:
    """The platform a GPU row implies on its own, or None (a PCIe card goes into any host)."""
    if not row:
        return None
    if row.get("platform") in PLATFORMS:
        return str(row["platform"])
    return "jetson" if row.get("segment") == "embedded" else None


def infer(facts: Any, m: Any) -> str:
    """The wheel platform of the machine the facts describe."""
    os_id = (facts.host.os_id or "").lower()
    if os_id in ("macos", "darwin"):
        return "macos"
    if os_id == "windows":
        return "windows"
    implied = [p for g in facts.gpus if g.name for p in [gpu_platform(m.gpu(g.name))] if p]
    if implied:
        # A Jetson Thor is also a Tegra board, but its JetPack 7 is SBSA: the row's platform wins over "jetson".
        return "linux-aarch64" if "linux-aarch64" in implied else implied[0]
    if is_tegra(facts):
        return "jetson"
    if (facts.host.arch or "").lower() in ARM:
        return "linux-aarch64"
    return "linux-x86_64"


def is_tegra(facts: Any) -> bool:
    """A Jetson (Tegra) board: its kernel is L4T's ("5.15.148-tegra") or its GPU is an embedded one."""
    kernel = (facts.host.kernel or facts.driver.running_kernel or "").lower()
    return "tegra" in kernel


def tegra_board(facts: Any, m: Any) -> bool:
    """The driver of this machine comes with JetPack/L4T, never from a desktop driver branch."""
    return is_tegra(facts) or any((m.gpu(g.name) or {}).get("segment") == "embedded" for g in facts.gpus if g.name)


def for_gpus(m: Any, names: list[str], asked: str | None) -> str:
    """The platform of a `plan` question: what the GPUs imply, else what was asked, else linux-x86_64.

    A platform that contradicts a GPU (``--platform linux-x86_64`` for a GH200) is an error, raised as ValueError.
    """
    implied = [(n, p) for n in names for p in [gpu_platform(m.gpu(n))] if p]
    if not implied:
        return asked or "linux-x86_64"
    plat = "linux-aarch64" if any(p == "linux-aarch64" for _n, p in implied) else implied[0][1]
    if asked and asked != plat and not (asked == "jetson" and plat == "linux-aarch64") and not (
            asked == "linux-aarch64" and plat == "jetson"):
        name = next(n for n, p in implied if p == plat)
        raise ValueError(f"{name} runs only on {plat}, not {asked}")
    return plat


# How each distribution family names its own kernels' header packages: a running kernel outside these names (a
# custom build, a cloud vendor's or WSL's kernel, an Amazon Linux kernel on Debian) has no headers package there.
_PACKAGED_KERNEL = {
    # Ubuntu: ABI-numbered flavours (5.15.0-105-generic, 6.8.0-1015-aws, 6.5.0-1024-oem)
    "ubuntu": r"\d+\.\d+\.\d+-\d+-[a-z][a-z0-9-]*",
    # Debian: 6.1.0-27-amd64, 6.1.0-27-cloud-amd64, 6.12.12+bpo-amd64, 6.1.0-27-rt-arm64
    "debian": r"\d+\.\d+\.\d+(-\d+|\+bpo)(\+deb\d+)?-(cloud-|rt-)?(amd64|arm64|686(-pae)?|armmp(-lpae)?|ppc64el|s390x)",
    # RHEL and rebuilds: 5.14.0-427.13.1.el9_4.x86_64
    "rhel": r"\d+\.\d+\.\d+-[\d.]+\.el\d+(_\d+)?\.(x86_64|aarch64|ppc64le|s390x)",
}
_FAMILY = {"ubuntu": "ubuntu", "debian": "debian", "rhel": "rhel", "rocky": "rhel", "almalinux": "rhel",
           "centos": "rhel", "ol": "rhel"}


def kernel_headers_packaged(os_id: str | None, kernel: str | None) -> bool | None:
    """Can the distribution's package manager have headers for this running kernel? None when unknown."""
    family = _FAMILY.get((os_id or "").lower())
    if not family or not kernel:
        return None
    return re.fullmatch(_PACKAGED_KERNEL[family], kernel) is not None
