"""Build fake sysroots for ``--root`` tests: files, symlinks and fake commands on the sysroot's PATH.

A scenario is a dict of logical path -> content. Content is text, bytes, a ``Link(target)``, or a
``Cmd(stdout, exit_code)`` which becomes an executable that prints a recorded output.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Link:
    target: str


@dataclass(frozen=True)
class Cmd:
    stdout: str = ""
    exit_code: int = 0
    stderr: str = ""


def build(root: Path, files: dict[str, str | bytes | Link | Cmd]) -> Path:
    for logical, content in files.items():
        path = root / logical.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Link):
            path.symlink_to(content.target)
        elif isinstance(content, Cmd):
            out = path.with_name(path.name + ".stdout")
            out.write_text(content.stdout)
            err = path.with_name(path.name + ".stderr")
            err.write_text(content.stderr)
            path.write_text(
                "#!/bin/sh\n"
                f"cat {shlex.quote(str(out))}\n"
                f"cat {shlex.quote(str(err))} >&2\n"
                f"exit {content.exit_code}\n"
            )
            path.chmod(0o755)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


def data(rel: str) -> str:
    return (DATA / rel).read_text()


LIBDIR = "/usr/lib/x86_64-linux-gnu"


def driver_libs(version: str) -> dict[str, str | bytes | Link | Cmd]:
    """The user-space files a driver package installs: versioned libraries and their soname links."""
    return {
        f"{LIBDIR}/libcuda.so.{version}": b"\x7fELF fake",
        f"{LIBDIR}/libcuda.so.1": Link(f"libcuda.so.{version}"),
        f"{LIBDIR}/libnvidia-ml.so.{version}": b"\x7fELF fake",
        f"{LIBDIR}/libnvidia-ml.so.1": Link(f"libnvidia-ml.so.{version}"),
    }


def dpkg_status(*packages: tuple[str, str]) -> str:
    return "\n".join(
        f"Package: {name}\nStatus: install ok installed\nArchitecture: amd64\nVersion: {version}\n"
        for name, version in packages
    )


def pci_gpu(bus: str = "0000:3b:00.0", device: str = "0x2330") -> dict[str, str | bytes | Link | Cmd]:
    base = f"/sys/bus/pci/devices/{bus}"
    return {f"{base}/vendor": "0x10de\n", f"{base}/device": f"{device}\n", f"{base}/class": "0x030200\n"}


def pci_other(bus: str = "0000:00:01.0") -> dict[str, str | bytes | Link | Cmd]:
    base = f"/sys/bus/pci/devices/{bus}"
    return {f"{base}/vendor": "0x8086\n", f"{base}/device": "0x1237\n", f"{base}/class": "0x060000\n"}
