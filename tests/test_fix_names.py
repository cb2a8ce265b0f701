"""Package names the renderers print, each checked against the document it comes from; Debian 12's resolved
for real with `apt-get install -s`; PyPI-hosted requirements resolved for real with `pip install --dry-run`."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fix_scenarios import scenario

from doctor.fixplan import build_plan
from doctor.matrix import current
from doctor.model.plan import FixPlan
from doctor.model.remedy import InstallCudaCompat, InstallCudnn, InstallDriver, InstallToolkit, PipInstall
from doctor.pipeline import diagnose
from doctor.render import apt, dnf, pip


def plan(os_id: str, version: str) -> FixPlan:
    return FixPlan(os_id, version, None, "x86_64", [])


def installs(lines: list[str], verb: str = "apt_install") -> list[str]:
    return [w for line in lines if line.strip().startswith(verb + " ") for w in line.split()[1:]
            if re.match(r"^[a-z0-9][a-z0-9.+:-]+$", w)]


# (distribution, version, action, the names printed, where the name is documented)
NAMES = [
    # Ubuntu's archive: packages.ubuntu.com lists nvidia-driver-NNN[-server][-open] per release (source packages
    # nvidia-graphics-drivers-NNN and -NNN-server); Ubuntu Server docs, "Install NVIDIA drivers".
    ("ubuntu", "22.04", InstallDriver(550, "proprietary"), ["nvidia-driver-550"],
     "https://packages.ubuntu.com/jammy/nvidia-driver-550"),
    ("ubuntu", "24.04", InstallDriver(570, "open"), ["nvidia-driver-570-open"],
     "https://packages.ubuntu.com/noble/nvidia-driver-570-open"),
    ("ubuntu", "20.04", InstallDriver(535, "proprietary", server=True), ["nvidia-driver-535-server"],
     "https://packages.ubuntu.com/focal/nvidia-driver-535-server"),
    ("ubuntu", "22.04", InstallDriver(550, "open", server=True), ["nvidia-driver-550-server-open"],
     "https://packages.ubuntu.com/jammy/nvidia-driver-550-server-open"),
    # Debian's own driver branch (non-free): 12 is resolved for real below; 11 = 470, 13 = 550 per
    # packages.debian.org/{bullseye,trixie}/nvidia-driver.
    ("debian", "12", InstallDriver(535, "proprietary", min_branch=525), ["nvidia-driver", "nvidia-kernel-dkms",
                                                                         "firmware-misc-nonfree"],
     "https://packages.debian.org/bookworm/nvidia-driver"),
    ("debian", "13", InstallDriver(550, "proprietary"),
     ["nvidia-driver", "nvidia-kernel-dkms", "firmware-misc-nonfree"],
     "https://packages.debian.org/trixie/nvidia-driver"),
    # NVIDIA's CUDA repository: cuda-drivers-<branch> (CUDA Installation Guide for Linux, meta packages; a Debian
    # cuda-drivers-580 is discussed on forums.developer.nvidia.com, thread 353805).
    ("debian", "11", InstallDriver(550, "proprietary"), ["cuda-drivers-550"],
     "https://docs.nvidia.com/cuda/cuda-installation-guide-linux/"),
    # cuda-toolkit-X-Y: CUDA Installation Guide for Linux ("cuda-toolkit-12-4").
    ("ubuntu", "22.04", InstallToolkit("12.4"), ["cuda-toolkit-12-4"],
     "https://docs.nvidia.com/cuda/cuda-installation-guide-linux/"),
    ("debian", "12", InstallToolkit("13.0"), ["cuda-toolkit-13-0"],
     "https://docs.nvidia.com/cuda/cuda-installation-guide-linux/"),
    # cudnn9-cuda-12: cuDNN Installation Guide, Linux, "Package manager" ("apt-get -y install cudnn9-cuda-12").
    ("ubuntu", "24.04", InstallCudnn(9, 12), ["cudnn9-cuda-12"],
     "https://docs.nvidia.com/deeplearning/cudnn/installation/latest/linux.html"),
    # cuda-compat-X-Y: the CUDA Compatibility guide, forward compatibility (rows of compat/cuda.toml).
    ("ubuntu", "22.04", InstallCudaCompat("cuda-compat-12-4", "12.4"), ["cuda-compat-12-4"],
     "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html"),
]

DNF_NAMES = [
    # dnf module streams: NVIDIA Driver Installation Guide, "Kernel Modules" (nvidia-driver:580-open) and the
    # CUDA Installation Guide for RHEL (nvidia-driver:latest-dkms; a branch replaces "latest").
    ("rhel", "9.4", InstallDriver(550, "proprietary"), "nvidia-driver:550-dkms",
     "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html"),
    ("rocky", "8.9", InstallDriver(580, "open"), "nvidia-driver:580-open",
     "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html"),
]


@pytest.mark.parametrize(("os_id", "version", "action", "names", "source"), NAMES,
                         ids=[f"{n[0]}{n[1]}-{n[3][0]}" for n in NAMES])
def test_apt_names_are_the_documented_ones(os_id, version, action, names, source):
    assert source.startswith("https://")
    lines = apt.render(action, plan(os_id, version))
    assert [n for n in installs(lines) if not n.startswith("linux-headers")] == names


@pytest.mark.parametrize(("os_id", "version", "action", "stream", "source"), DNF_NAMES)
def test_dnf_module_streams_are_the_documented_ones(os_id, version, action, stream, source):
    lines = dnf.render(action, plan(os_id, version))
    assert f"  run dnf -y module install -- {stream}" in lines


def test_dnf_toolkit_cudnn_compat_versionlock_and_repository():
    p = plan("almalinux", "9.4")
    assert installs(dnf.render(InstallToolkit("12.6"), p), "dnf_install") == ["cuda-toolkit-12-6"]
    assert installs(dnf.render(InstallCudnn(9, 12), p), "dnf_install") == ["cudnn9-cuda-12"]
    # Driver Installation Guide, "Version locking", DNF 4: python3-dnf-plugin-versionlock
    from doctor.model.remedy import HoldPackages

    assert "dnf_install python3-dnf-plugin-versionlock" in dnf.render(HoldPackages(["nvidia-driver"]), p)
    assert "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/cuda-rhel9.repo" in dnf.prelude(p)


def test_nvidia_repository_urls():
    # CUDA Installation Guide for Linux, network repository: repos/<distro>/<arch>/cuda-keyring_1.1-1_all.deb
    assert "repos/ubuntu2204/x86_64" in apt.prelude(plan("ubuntu", "22.04"))
    assert "repos/debian12/x86_64" in apt.prelude(plan("debian", "12"))
    assert "repos/ubuntu2404/sbsa" in apt.prelude(FixPlan("ubuntu", "24.04", None, "aarch64", []))
    assert "cuda-keyring_1.1-1_all.deb" in apt.PRELUDE


def test_debian_open_flavour_is_not_taken_from_debian_12():
    # nvidia-open-kernel-dkms lags nvidia-driver in bookworm (535.261.03 vs 535.309.01): see the apt-get -s test.
    lines = apt.render(InstallDriver(535, "open", min_branch=525), plan("debian", "12"))
    assert "nvidia-open-kernel-dkms" not in " ".join(lines)


# --- Debian 12: the archive itself answers -----------------------------------------------------------------


def _debian12_lists() -> str | None:
    lists = Path("/var/lib/apt/lists")
    if not Path("/etc/debian_version").exists() or shutil.which("apt-get") is None:
        return "not a Debian machine"
    if not any("bookworm" in p.name and "non-free_binary" in p.name for p in lists.glob("*Packages*")):
        return "no apt lists for Debian 12 non-free (run apt-get update with contrib non-free enabled; .ci/run does)"
    return None


@pytest.mark.slow  # a few seconds each: with the slow tests (CI runs both) to keep the fast set in budget
@pytest.mark.skipif(_debian12_lists() is not None, reason=_debian12_lists() or "")
def test_every_debian12_package_of_the_apt_plans_resolves_in_the_archive():
    """apt-get install -s against the real Debian 12 archive (contrib non-free enabled) for every package the apt
    renderer names from Debian itself; the packages from NVIDIA's repositories are checked by NAMES above."""
    kernels = subprocess.run(["apt-cache", "search", "--names-only", r"^linux-headers-[0-9.]+-[0-9]+-amd64$"],
                             capture_output=True, text=True).stdout.split()
    kernel = sorted(k for k in kernels if k.startswith("linux-headers-"))[-1].removeprefix("linux-headers-")
    p = FixPlan("debian", "12", None, "x86_64", [])
    names: set[str] = set()
    for name in ("driver_missing", "driver_too_old_for_toolkit", "module_missing_for_kernel", "not_loaded",
                 "nouveau_active", "container_toolkit_missing"):
        facts = scenario(name, "debian", "12", driver__running_kernel=kernel)
        fp = build_plan(facts, diagnose(facts).findings, current())
        for action in fp.actions():
            lines = apt.render(action, p) or []
            names |= set(installs(lines))
    # The helpers' own installs (cuda_repo, the container repository).
    names |= set(installs(apt.PRELUDE.splitlines())) | {"ca-certificates", "curl", "gnupg"}
    nvidia_repo = {n for n in names if n.startswith(("cuda-", "cudnn", "nvidia-container-toolkit"))}
    debian = sorted(names - nvidia_repo)
    assert {"nvidia-driver", "nvidia-kernel-dkms", f"linux-headers-{kernel}"} <= set(debian)
    proc = subprocess.run(["apt-get", "install", "-s", "-q", *debian], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


# --- PyPI: pip resolves the requirements the pip plans print ----------------------------------------------


def _pypi() -> str | None:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError as exc:
        return f"PyPI is unreachable from here ({exc})"
    return None


@pytest.mark.network
def test_pip_plans_resolve_against_the_real_index(tmp_path):
    why = _pypi()
    if why:
        pytest.skip(why)
    facts = scenario("tf_without_cudnn")
    fp = build_plan(facts, diagnose(facts).findings, current())
    reqs = [r for a in fp.actions() if isinstance(a, PipInstall) for r in a.requirements]
    assert reqs == ["tensorflow[and-cuda]==2.21.0"]
    jax = current().rows("jax", "jax")
    jax12 = next(r for r in jax if r.get("plugin") == "jax-cuda12-plugin" and r.get("python") and
                 _python_ok(r["python"]))
    cudnn = next(re.search(r"nvidia-cudnn-cu12==([\d.]+)", line).group(1)
                 for line in pip.constraints(build_plan(scenario("cpu_only_torch"),
                                                        diagnose(scenario("cpu_only_torch")).findings,
                                                        current())).splitlines()
                 if "nvidia-cudnn-cu12==" in line)
    for req in (*reqs, f"jax[cuda12]=={jax12['version']}", f"nvidia-cudnn-cu12=={cudnn}"):
        report = tmp_path / "report.json"
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                               "--quiet", "--report", str(report), req], capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 and ("NewConnectionError" in proc.stderr or "Network is unreachable" in proc.stderr):
            pytest.skip(f"PyPI became unreachable: {proc.stderr.strip().splitlines()[-1]}")
        assert proc.returncode == 0, (req, proc.stderr[-2000:])
        names = {i["metadata"]["name"].lower() for i in json.loads(report.read_text())["install"]}
        assert req.split("[")[0].split("==")[0] in names


def _python_ok(spec: str) -> bool:
    from packaging.specifiers import SpecifierSet

    return f"{sys.version_info.major}.{sys.version_info.minor}" in SpecifierSet(spec)
