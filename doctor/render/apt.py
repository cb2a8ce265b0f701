"""apt rendering of a fix plan: Ubuntu 20.04/22.04/24.04 and Debian 11/12/13.

Where each package name comes from (tests/test_fix_names.py quotes these sources row by row):

- Ubuntu's own archive, ``restricted``: ``nvidia-driver-NNN``, ``nvidia-driver-NNN-open``,
  ``nvidia-driver-NNN-server``, ``nvidia-driver-NNN-server-open`` (packages.ubuntu.com, source packages
  ``nvidia-graphics-drivers-NNN[-server]``; Ubuntu Server docs "Install NVIDIA drivers").
- Debian's archive, ``non-free``/``contrib``: ``nvidia-driver``, ``nvidia-kernel-dkms``,
  ``nvidia-open-kernel-dkms``, ``firmware-misc-nonfree``, ``linux-headers-<uname -r>``, ``dkms`` — one
  driver branch per release (11: 470, 12: 535, 13: 550; packages.debian.org, and for 12 resolved with
  ``apt-get install -s`` in tests/test_fix_apt_debian12.py).
- NVIDIA's CUDA repository (``cuda-keyring_1.1-1_all.deb`` from
  developer.download.nvidia.com/compute/cuda/repos/<distro>/<arch>/; CUDA Installation Guide for Linux,
  "Network Repo Installation"): ``cuda-toolkit-X-Y``, ``cuda-drivers-NNN`` (≤ R580: NVIDIA's Driver
  Installation Guide renames its Ubuntu packages from R590 and drops ``cuda-drivers-NNN``), ``cudnn9-cuda-NN``
  (cuDNN Installation Guide, Linux package manager), ``cuda-compat-X-Y`` (CUDA Compatibility guide, the
  package names are rows of compat/cuda.toml).
- NVIDIA's container toolkit repository (nvidia.github.io/libnvidia-container; Container Toolkit
  install guide): ``nvidia-container-toolkit``, configured with ``nvidia-ctk``.

A name that is not in these documents is never printed as a command: the step becomes a MANUAL comment.
"""

from __future__ import annotations

import re

from doctor.model.plan import FixPlan
from doctor.model.remedy import (
    Action,
    BlacklistNouveau,
    HoldPackages,
    InstallContainerToolkit,
    InstallCudaCompat,
    InstallCudnn,
    InstallDriver,
    InstallToolkit,
    LoadModule,
    Manual,
    PinDriverBranch,
    RebuildDkms,
)
from doctor.render.fixscript import manual, q, say
from doctor.render.values import fits, refused

ROOT = True
UBUNTU = ("20.04", "22.04", "24.04")
DEBIAN_BRANCH = {"11": 470, "12": 535, "13": 550}  # nvidia-driver in each release's non-free
NVIDIA_REPO = "https://developer.download.nvidia.com/compute/cuda/repos"
REPO_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "sbsa", "arm64": "sbsa"}
LAST_CUDA_DRIVERS_BRANCH = 580  # cuda-drivers-NNN exists up to R580 (Driver Installation Guide, "590 renames")
CONTAINER_LIST = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
CONTAINER_KEY = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"


def supports(os_id: str | None, os_version: str | None) -> bool:
    return (os_id == "ubuntu" and os_version in UBUNTU) or (os_id == "debian" and _major(os_version) in
                                                             DEBIAN_BRANCH)


def expected_os(plan: FixPlan) -> tuple[str, str, str]:
    if plan.os_id == "ubuntu":
        return "ubuntu", plan.os_version or "", "full"
    return plan.os_id or "", _major(plan.os_version), "major"


def repo_distro(plan: FixPlan) -> str:
    """NVIDIA's repository directory: ubuntu2204, debian12 …"""
    if plan.os_id == "ubuntu":
        return "ubuntu" + (plan.os_version or "").replace(".", "")
    return f"debian{_major(plan.os_version)}"


def repo_arch(plan: FixPlan) -> str:
    return REPO_ARCH.get(plan.arch or "x86_64", "x86_64")


def _major(version: str | None) -> str:
    return (version or "").split(".", 1)[0]


def prelude(plan: FixPlan) -> str:
    return "\n".join([
        "export DEBIAN_FRONTEND=noninteractive",
        f"NVIDIA_CUDA_REPO={q(f'{NVIDIA_REPO}/{repo_distro(plan)}/{repo_arch(plan)}')}",
        PRELUDE,
    ])


PRELUDE = r"""
APT_UPDATED=0
# shellcheck disable=SC2016  # ${Status} is dpkg-query's format, not a shell expansion
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
apt_update() {
  if [ "$APT_UPDATED" = 0 ]; then
    run apt-get update
    APT_UPDATED=1
  fi
}
# Install what is missing; stop (before changing anything) when a package is not in the repositories.
apt_install() {
  local missing=() p
  for p in "$@"; do installed "$p" || missing+=("$p"); done
  if [ "${#missing[@]}" -eq 0 ]; then
    say "already installed: $*"
    return 0
  fi
  apt_update
  if [ "$DRY_RUN" = 0 ]; then
    for p in "${missing[@]}"; do
      apt-cache show -- "$p" >/dev/null 2>&1 || die "package $p is not in the configured repositories"
    done
  fi
  run apt-get install -y -- "${missing[@]}"
}
# NVIDIA's CUDA repository, through its keyring package (CUDA Installation Guide, network repo).
cuda_repo() {
  if installed cuda-keyring; then
    say "NVIDIA's CUDA repository is configured (cuda-keyring is installed)"
    return 0
  fi
  apt_install ca-certificates curl
  local deb="${TMPDIR:-/tmp}/cuda-keyring_1.1-1_all.deb"
  run curl -fsSL -o "$deb" "$NVIDIA_CUDA_REPO/cuda-keyring_1.1-1_all.deb"
  run dpkg -i "$deb"
  APT_UPDATED=0
}
apt_hold() {
  local p
  for p in "$@"; do
    if apt-mark showhold 2>/dev/null | grep -qxF -- "$p"; then
      say "already held: $p"
    else
      run apt-mark hold -- "$p"
    fi
  done
}
"""


def headers(kernel: str | None, packaged: bool | None = None) -> list[str]:
    if kernel and packaged is False:
        return ["# no linux-headers-… package exists for the running kernel (a custom or cloud kernel): install the",
                "# headers it was built with yourself, or boot a distribution kernel, before the module can build"]
    if kernel and fits("kernel", kernel):
        return [f"apt_install {q('linux-headers-' + kernel)}"]
    if kernel:
        return refused("kernel", kernel, "apt (linux-headers-…)")
    return ["# the running kernel is unknown: install its headers yourself (linux-headers-$(uname -r))"]


def driver_packages(plan: FixPlan, a: InstallDriver) -> tuple[str, list[str]] | None:
    """(source, packages) for a driver branch on this release, or None when no documented name fits."""
    if plan.os_id == "ubuntu":
        name = f"nvidia-driver-{a.branch}" + ("-server" if a.server else "") + ("-open" if a.flavor == "open" else "")
        return "ubuntu", [name]
    native = DEBIAN_BRANCH.get(_major(plan.os_version))
    if native and (a.min_branch or a.branch) <= native and (a.max_branch is None or native <= a.max_branch) \
            and not a.open_required:
        # Debian's open module lags its driver (12: nvidia-open-kernel-dkms 535.261.03 vs nvidia-driver 535.309.01
        # does not resolve), so the distribution path installs the proprietary module, which these GPUs support.
        return "debian", ["nvidia-driver", "nvidia-kernel-dkms", "firmware-misc-nonfree"]
    if a.flavor == "proprietary" and a.branch <= LAST_CUDA_DRIVERS_BRANCH:
        return "nvidia", [f"cuda-drivers-{a.branch}"]
    return None


def render(action: Action, plan: FixPlan) -> list[str] | None:
    if isinstance(action, InstallDriver):
        return _driver(action, plan)
    # The plan names the CUDA of every toolkit and cuDNN it installs; one it did not is no package name (the step is
    # then left to the person, as one no renderer knows).
    if isinstance(action, InstallToolkit) and action.cuda is not None:
        return ["cuda_repo", f"apt_install {q('cuda-toolkit-' + action.cuda.replace('.', '-'))}"]
    if isinstance(action, InstallCudnn) and action.cuda_major is not None:
        return ["cuda_repo", f"apt_install {q(f'cudnn{action.version}-cuda-{action.cuda_major}')}"]
    if isinstance(action, InstallCudaCompat):
        return ["cuda_repo", f"apt_install {q(action.package)}"]
    if isinstance(action, InstallContainerToolkit):
        return _container(action)
    if isinstance(action, BlacklistNouveau):
        return [*blacklist_nouveau(), 'if [ "$CHANGED" = 1 ] || grep -q "^nouveau " /proc/modules 2>/dev/null; then',
                "  run update-initramfs -u", "fi"]
    if isinstance(action, RebuildDkms):
        return [*headers(action.kernel, action.headers), *dkms(action.kernel)]
    if isinstance(action, LoadModule):
        return load_module(action)
    if isinstance(action, PinDriverBranch):
        return pin_branch(action.branch)
    if isinstance(action, HoldPackages):
        return hold(action.names, "debian-package", "apt_hold", "apt-mark hold")
    return None


def hold(names: list[str], kind: str, function: str, where: str) -> list[str]:
    """Hold the names that fit the package grammar; refuse the others (they could be options)."""
    good = [n for n in names if fits(kind, n)]
    out = [line for n in names if not fits(kind, n) for line in refused(kind, n, where)]
    if good:
        out.append(f"{function} {' '.join(q(n) for n in good)}")
    return out


def _driver(a: InstallDriver, plan: FixPlan) -> list[str]:
    picked = driver_packages(plan, a)
    if picked is None:
        return manual(Manual(
            f"Install NVIDIA driver branch {a.branch} ({a.flavor} kernel modules) from NVIDIA's CUDA repository "
            "following NVIDIA's Driver Installation Guide for this release (its package names change by branch, so "
            "gpu-doctor prints none here); lock the branch as its 'Version locking' section says.",
            [f"see https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/ ({repo_distro(plan)})"]))
    source, pkgs = picked
    out = [*headers(a.kernel, a.headers)]
    if source == "debian":
        native = DEBIAN_BRANCH[_major(plan.os_version)]
        out.append(say(f"Debian {_major(plan.os_version)} packages driver branch {native} (non-free), which runs "
                       f"what needs branch {a.min_branch or a.branch} or newer"))
        out.append("# nvidia-driver is in Debian's non-free and contrib components: they must be enabled")
        out.append('if [ "$DRY_RUN" = 0 ] && ! apt-cache show nvidia-driver >/dev/null 2>&1; then apt_update; fi')
        out.append('if [ "$DRY_RUN" = 0 ] && ! apt-cache show nvidia-driver >/dev/null 2>&1; then')
        out.append('  die "enable the contrib non-free non-free-firmware components in /etc/apt/sources.list(.d), '
                   'then rerun"')
        out.append("fi")
    elif source == "nvidia":
        out.append("cuda_repo")
        out += pin_branch(a.branch)
    out.append(f"apt_install {' '.join(q(p) for p in pkgs)}")
    return out


def pin_branch(b: int) -> list[str]:
    """An apt_preferences(5) pin keeping NVIDIA's driver packages on one branch (cuda-drivers-NNN alone does not:
    its dependencies are '>=' and pull in newer branches)."""
    body = (f"# written by gpu-doctor: keep NVIDIA's driver packages on branch {b}\\n"
            "Package: src:nvidia-graphics-drivers* nvidia-* libnvidia-* libcuda1 libnvcuvid1 libnvoptix1 "
            "xserver-xorg-video-nvidia cuda-drivers*\\n"
            f"Pin: version {b}.*\\nPin-Priority: 1000")
    return [f'write_file /etc/apt/preferences.d/gpu-doctor-nvidia-driver "$(printf {q(body)})"']


def blacklist_nouveau() -> list[str]:
    return ["write_file /etc/modprobe.d/blacklist-nouveau.conf \"$(printf 'blacklist nouveau\\noptions nouveau "
            "modeset=0')\""]


def dkms(kernel: str) -> list[str]:
    if not fits("kernel", kernel):
        return refused("kernel", kernel, "dkms -k")
    k = q(kernel)
    return [f"if dkms status -k {k} 2>/dev/null | grep -q 'installed'; then",
            f"  say {q(f'an nvidia module is already built for {kernel}')}",
            "else",
            f"  run dkms autoinstall -k {k}",
            "fi"]


def load_module(a: LoadModule) -> list[str]:
    m = q(a.module)
    return [f'if grep -q "^{a.module} " /proc/modules 2>/dev/null; then' if re.match(r"^\w+$", a.module)
            else "if false; then",
            f"  say {q(f'{a.module} is loaded')}",
            "else",
            f"  run modprobe -- {m}",
            "fi"]


def _container(a: InstallContainerToolkit) -> list[str]:
    out: list[str] = []
    if a.install:
        out += [
            f"if [ ! -f {CONTAINER_LIST} ]; then",
            "  apt_install ca-certificates curl gnupg",
            f"  run sh -c 'curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey | gpg --dearmor --yes -o "
            f"{CONTAINER_KEY}'",
            "  run sh -c \"curl -fsSL https://nvidia.github.io/libnvidia-container/stable/deb/"
            "nvidia-container-toolkit.list | sed 's#deb https://#deb [signed-by="
            f"{CONTAINER_KEY}] https://#g' > {CONTAINER_LIST}\"",
            "  APT_UPDATED=0",
            "fi",
            "apt_install nvidia-container-toolkit",
        ]
    return out + configure_engine(a.engine)


def configure_engine(engine: str) -> list[str]:
    """nvidia-ctk as NVIDIA's container toolkit guide says: a runtime entry for docker/containerd, CDI for podman."""
    if engine in ("podman", "cri-o"):
        return ["run nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"]
    if engine not in ("docker", "containerd"):
        return manual(Manual(f"Configure the container engine '{engine}' for the NVIDIA runtime (nvidia-ctk)."))
    check = ("docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q nvidia" if engine == "docker"
             else "grep -qs nvidia /etc/containerd/config.toml")
    return [f"if {check}; then",
            f"  say '{engine} already has the nvidia runtime'",
            "else",
            f"  run nvidia-ctk runtime configure --runtime={engine}",
            f"  run systemctl restart {engine}",
            "fi"]
