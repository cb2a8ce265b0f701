"""dnf rendering of a fix plan: RHEL, Rocky Linux and AlmaLinux 8 and 9.

Names and commands (tests/test_fix_names.py quotes the sources):

- NVIDIA's CUDA repository file ``cuda-rhel8.repo`` / ``cuda-rhel9.repo`` added with
  ``dnf config-manager --add-repo`` (CUDA Installation Guide for Linux, RHEL/Rocky network repo).
- The driver as a module stream: ``dnf module install nvidia-driver:NNN-dkms`` (proprietary kernel module)
  or ``nvidia-driver:NNN-open`` (open kernel module) — NVIDIA's Driver Installation Guide, "Kernel Modules"
  ("dnf module enable nvidia-driver:580-open") and the CUDA Installation Guide ("nvidia-driver:latest-dkms").
- DKMS needs ``kernel-devel-<uname -r>`` and EPEL (``epel-release``, with CRB/PowerTools on Rocky/Alma).
- ``cuda-toolkit-X-Y``, ``cudnn9-cuda-NN``, ``cuda-compat-X-Y``: the same names as on apt (CUDA, cuDNN and
  CUDA Compatibility guides).
- Version locking: ``python3-dnf-plugin-versionlock`` and ``dnf versionlock add`` (Driver Installation Guide,
  "Version locking", DNF 4).
- Container toolkit: the ``nvidia-container-toolkit.repo`` file from nvidia.github.io/libnvidia-container
  and ``nvidia-container-toolkit`` (Container Toolkit install guide, "With dnf").
"""

from __future__ import annotations

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
    PinDriverBranch,
    RebuildDkms,
)
from doctor.render import apt
from doctor.render.fixscript import q
from doctor.render.values import fits, refused

ROOT = True
FAMILY = ("rhel", "rocky", "almalinux")
VERSIONS = ("8", "9")
CONTAINER_REPO = "/etc/yum.repos.d/nvidia-container-toolkit.repo"


def supports(os_id: str | None, os_version: str | None) -> bool:
    return os_id in FAMILY and (os_version or "").split(".", 1)[0] in VERSIONS


def expected_os(plan: FixPlan) -> tuple[str, str, str]:
    return plan.os_id or "", (plan.os_version or "").split(".", 1)[0], "major"


def repo_distro(plan: FixPlan) -> str:
    return "rhel" + (plan.os_version or "").split(".", 1)[0]


def prelude(plan: FixPlan) -> str:
    distro = repo_distro(plan)
    url = f"{apt.NVIDIA_REPO}/{distro}/{apt.repo_arch(plan)}/cuda-{distro}.repo"
    crb = "crb" if distro == "rhel9" else "powertools"
    return "\n".join([f"NVIDIA_CUDA_REPO_FILE={q(url)}", f"CUDA_REPO_PATH={q(f'/etc/yum.repos.d/cuda-{distro}.repo')}",
                      f"OS_FAMILY_ID={q(plan.os_id or '')}", f"CRB_REPO={q(crb)}", PRELUDE])


PRELUDE = r"""
installed() { command -v rpm >/dev/null 2>&1 && rpm -q -- "$1" >/dev/null 2>&1; }
dnf_install() {
  local missing=() p
  for p in "$@"; do installed "$p" || missing+=("$p"); done
  if [ "${#missing[@]}" -eq 0 ]; then
    say "already installed: $*"
    return 0
  fi
  run dnf -y install -- "${missing[@]}"
}
cuda_repo() {
  if [ -f "$CUDA_REPO_PATH" ]; then
    say "NVIDIA's CUDA repository is configured ($CUDA_REPO_PATH)"
    return 0
  fi
  dnf_install dnf-plugins-core
  run dnf config-manager --add-repo "$NVIDIA_CUDA_REPO_FILE"
  run dnf clean expire-cache
}
# DKMS comes from EPEL (NVIDIA's Driver Installation Guide, RHEL pre-installation actions).
epel() {
  if installed epel-release; then
    say "EPEL is enabled"
    return 0
  fi
  if [ "$OS_FAMILY_ID" = rhel ]; then
    say "On RHEL enable CodeReady Builder first:"
    say "  subscription-manager repos --enable codeready-builder-for-rhel-<8|9>-$(uname -m)-rpms"
    if [ "$DRY_RUN" = 1 ]; then
      say "[dry-run] a real run stops here until EPEL is enabled"
      return 0
    fi
    die "EPEL is needed for DKMS: install epel-release as https://docs.fedoraproject.org/en-US/epel/ says, then rerun"
  fi
  dnf_install dnf-plugins-core
  run dnf config-manager --set-enabled "$CRB_REPO"
  dnf_install epel-release
}
"""


def _major(plan: FixPlan) -> str:
    return (plan.os_version or "").split(".", 1)[0]


def headers(kernel: str | None, packaged: bool | None = None) -> list[str]:
    if kernel and packaged is False:
        return ["# no kernel-devel-… package exists for the running kernel (a custom or cloud kernel): install the",
                "# headers it was built with yourself, or boot a distribution kernel, before the module can build"]
    if kernel and fits("kernel", kernel):
        return [f"dnf_install {q('kernel-devel-' + kernel)} kernel-headers"]
    if kernel:
        return refused("kernel", kernel, "dnf (kernel-devel-…)")
    return ["# the running kernel is unknown: install kernel-devel-$(uname -r) yourself"]


def stream(a: InstallDriver) -> str:
    return f"nvidia-driver:{a.branch}-{'open' if a.flavor == 'open' else 'dkms'}"


def render(action: Action, plan: FixPlan) -> list[str] | None:
    if isinstance(action, InstallDriver):
        s = stream(action)
        return ["cuda_repo", "epel", *headers(action.kernel, action.headers),
                "if installed nvidia-driver && rpm -q --qf '%{VERSION}' nvidia-driver | "
                f"grep -q '^{action.branch}\\.'; then",
                f"  say {q(f'NVIDIA driver branch {action.branch} is installed')}",
                "else",
                f"  run dnf -y module install -- {q(s)}",
                "fi"]
    # The plan names the CUDA of every toolkit and cuDNN it installs; one it did not is no package name (the step is
    # then left to the person, as one no renderer knows).
    if isinstance(action, InstallToolkit) and action.cuda is not None:
        return ["cuda_repo", f"dnf_install {q('cuda-toolkit-' + action.cuda.replace('.', '-'))}"]
    if isinstance(action, InstallCudnn) and action.cuda_major is not None:
        return ["cuda_repo", f"dnf_install {q(f'cudnn{action.version}-cuda-{action.cuda_major}')}"]
    if isinstance(action, InstallCudaCompat):
        return ["cuda_repo", f"dnf_install {q(action.package)}"]
    if isinstance(action, InstallContainerToolkit):
        out: list[str] = []
        if action.install:
            out += [f"if [ ! -f {CONTAINER_REPO} ]; then",
                    "  run sh -c 'curl -fsSL https://nvidia.github.io/libnvidia-container/stable/rpm/"
                    f"nvidia-container-toolkit.repo > {CONTAINER_REPO}'",
                    "fi",
                    "dnf_install nvidia-container-toolkit"]
        return out + apt.configure_engine(action.engine)
    if isinstance(action, BlacklistNouveau):
        return [*apt.blacklist_nouveau(),
                'if [ "$CHANGED" = 1 ] || grep -q "^nouveau " /proc/modules 2>/dev/null; then',
                "  run dracut --force", "fi"]
    if isinstance(action, RebuildDkms):
        return ["epel", *headers(action.kernel, action.headers), *apt.dkms(action.kernel)]
    if isinstance(action, LoadModule):
        return apt.load_module(action)
    if isinstance(action, PinDriverBranch):
        return ["dnf_install python3-dnf-plugin-versionlock",
                f"run dnf versionlock add -- {q(f'*nvidia*{action.branch}*')}"]
    if isinstance(action, HoldPackages):
        lines = apt.hold(action.names, "rpm-package", "run dnf versionlock add --", "dnf versionlock add")
        return ["dnf_install python3-dnf-plugin-versionlock", *lines] if any(
            ln.startswith("run ") for ln in lines) else lines
    return None
