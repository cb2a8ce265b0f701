"""Rules about the NVIDIA driver: installed, loaded, consistent, built for the kernel that boots."""

from __future__ import annotations

from collections.abc import Iterator

from doctor.checks.common import driver_installed, ev, finding, gpu_present, ok, probed
from doctor.facts import Facts
from doctor.findings import Finding, FixStep
from doctor.intents import BlacklistNouveau, InstallDriverBranch, LoadModule, RebuildDkms, ReloadDriver
from doctor.registry import Context, NotApplicable, Skip, check

AREA = "Driver"


def _pci_list(facts: Facts) -> str:
    ids = [f"{g.pci_bus_id} (device {g.pci_device_id})" for g in facts.gpus if g.pci_bus_id]
    return ", ".join(ids[:4]) + (" …" if len(ids) > 4 else "")


@check("driver.missing", AREA, "An NVIDIA driver is installed (user-space libraries or kernel module).")
def driver_missing(facts: Facts, ctx: Context) -> Iterator[Finding]:
    d = facts.driver
    if driver_installed(facts):
        pkg = next((p for p in d.packages if p.name.startswith(("nvidia-driver", "cuda-drivers"))), None)
        version = d.userspace or d.kernel_module or (f"package {pkg.name} {pkg.version or ''}".strip() if pkg
                                                     else f"(CUDA driver API {d.cuda_driver_api})")
        yield ok("driver.missing", f"NVIDIA driver {version} is installed",
                 ev(facts, "driver.userspace"), ev(facts, "driver.kernel_module"))
        return
    if facts.host.container:
        raise NotApplicable("inside a container the host provides the driver (see container.no_gpu_passthrough)")
    if not probed(facts, "driver") and not facts.gpus:
        raise Skip("the driver was not inspected (a recorded report that does not say)")
    if facts.host.pci_nvidia_gpus == 0:
        yield finding(
            "driver.missing", "fail", "No NVIDIA GPU is on this machine's PCI bus, and no NVIDIA driver is installed",
            "The PCI bus lists no NVIDIA display or 3D controller. On a VM or cloud instance the GPU is not "
            "attached (wrong instance type, or PCI passthrough not configured); on bare metal the card is not "
            "seated or not powered. Installing a driver will not help until the GPU appears in `lspci`.",
            [ev(facts, "host.pci_nvidia_gpus")],
            fix="Attach a GPU to this machine (instance type / passthrough / card seating), then install a driver.",
        )
        return
    if facts.host.pci_nvidia_gpus is None and not facts.gpus:
        yield finding(
            "driver.missing", "fail", "No NVIDIA driver is installed",
            "Neither NVIDIA's user-space libraries nor its kernel module were found. Whether a GPU is attached "
            "is unknown here: the PCI bus could not be read.",
            [ev(facts, "driver.userspace"), ev(facts, "driver.kernel_module"), ev(facts, "host.pci_nvidia_gpus")],
            fix="Check `lspci -nn | grep -i nvidia` for the GPU, then install the NVIDIA driver "
                "(`gpu-doctor fix` writes the commands).",
            intents=[InstallDriverBranch(who="the NVIDIA GPU")],
        )
        return
    where = f" at {_pci_list(facts)}" if facts.gpus else ""
    yield finding(
        "driver.missing", "fail", f"An NVIDIA GPU is present{where} but no NVIDIA driver is installed",
        "Neither NVIDIA's user-space libraries (libcuda, libnvidia-ml) nor its kernel module were found.",
        [ev(facts, "host.pci_nvidia_gpus"), ev(facts, "driver.userspace"), ev(facts, "driver.kernel_module")],
        fix="Install the NVIDIA driver for this distribution (`gpu-doctor fix` writes the commands).",
        intents=[InstallDriverBranch(who="the NVIDIA GPU")],
    )


@check("driver.not_loaded", AREA, "The NVIDIA kernel module is loaded and answers.")
def driver_not_loaded(facts: Facts, ctx: Context) -> Iterator[Finding]:
    d = facts.driver
    if not driver_installed(facts):
        raise NotApplicable("no NVIDIA driver installed (see driver.missing)")
    if d.nvml_error and "mismatch" in d.nvml_error.lower():
        raise NotApplicable("the module is loaded but mismatched (see driver.module_userspace_mismatch)")
    loaded = d.module_loaded if d.module_loaded is not None else (bool(d.kernel_module) or None)
    nvml_not_loaded = bool(d.nvml_error and "not loaded" in d.nvml_error.lower())
    if loaded and not nvml_not_loaded:
        yield ok("driver.not_loaded", f"NVIDIA kernel module {d.kernel_module or ''} is loaded".replace("  ", " "),
                 ev(facts, "driver.kernel_module"), ev(facts, "driver.module_loaded"))
        return
    if loaded is None and not nvml_not_loaded and d.cuda_init_error is None:
        raise Skip("whether the kernel module is loaded is unknown (no /proc/modules and no answer from NVML)")
    reasons = []
    if facts.host.pci_nvidia_gpus == 0:
        reasons.append("there is no NVIDIA GPU on the PCI bus, and the module does not load without one "
                       "(a VM or instance without the GPU attached, or a container build host)")
    if d.nouveau_loaded:
        reasons.append("the nouveau driver is loaded and holds the GPU (see nouveau.active)")
    if d.module_for_running_kernel is False:
        reasons.append(f"no nvidia module is built for the running kernel {d.running_kernel} "
                       "(see driver.module_missing_for_kernel)")
    if d.secure_boot:
        reasons.append("Secure Boot is on and refuses an unsigned module (see secureboot.blocks_module)")
    if facts.host.container:
        reasons.append("inside a container the module is the host's: the host has no loaded nvidia module")
    cause = ("Likely cause: " + "; ".join(reasons) + ".") if reasons else \
        "No cause is visible from here: `sudo modprobe nvidia` and then `sudo dmesg | grep -i nvrm` show why it fails."
    version = d.userspace or d.kernel_module or "(version unknown)"
    evidence = [ev(facts, "driver.userspace"), ev(facts, "driver.module_loaded"), ev(facts, "driver.nvml_error"),
                ev(facts, "driver.cuda_init_error"), ev(facts, "driver.cuda_driver_api"),
                ev(facts, "host.pci_nvidia_gpus")]
    yield finding(
        "driver.not_loaded", "fail",
        f"NVIDIA driver {version} is installed but its kernel module is not loaded",
        f"NVML answers {d.nvml_error!r} and cuInit answers {d.cuda_init_error!r}: nothing can use a GPU. " + cause,
        evidence,
        **_not_loaded_fix(facts),
    )


def _not_loaded_fix(facts: Facts) -> dict:
    """The remedy follows the most likely cause: loading a module for a GPU that is not there is futile."""
    if facts.host.pci_nvidia_gpus == 0:
        fix = ("Attach a GPU first (the instance type, PCI passthrough, or the card's seating and power); "
               "the module loads once `lspci -nn | grep -i nvidia` lists it.")
        if facts.host.container:
            fix += " Inside a container, start it on a GPU host with the GPU requested (docker run --gpus all)."
        return {"fix": fix, "steps": [FixStep(["lspci", "-nn"], risk="safe", note="look for an NVIDIA device")]}
    if facts.host.container:
        return {"fix": "Load the nvidia module on the container's host (there: `sudo modprobe nvidia`, or reboot).",
                "steps": []}
    # Under Secure Boot an unsigned module is refused: loading it is not the remedy (secureboot.blocks_module).
    intents = [] if facts.driver.secure_boot else [LoadModule("nvidia")]
    return {"fix": "Load the module (or reboot); if it refuses, read the kernel log for the reason.",
            "intents": intents,
            "steps": [FixStep(["modprobe", "nvidia"], root=True, risk="safe"),
                      FixStep(["dmesg", "--level=err,warn"], root=True, risk="safe",
                              note="look for NVRM lines if modprobe failed")]}


@check("driver.module_userspace_mismatch", AREA,
       "The loaded kernel module and the user-space libraries are the same driver version.")
def module_userspace_mismatch(facts: Facts, ctx: Context) -> Iterator[Finding]:
    d = facts.driver
    nvml_says = bool(d.nvml_error and "mismatch" in d.nvml_error.lower())
    if not nvml_says and not (d.kernel_module and d.userspace):
        raise Skip("needs both the loaded module's version and the user-space version")
    if not nvml_says and d.kernel_module == d.userspace:
        yield ok("driver.module_userspace_mismatch",
                 f"Kernel module and user-space libraries are both {d.kernel_module}",
                 ev(facts, "driver.kernel_module"), ev(facts, "driver.userspace"))
        return
    held = sorted(p.name for p in d.packages if p.manager == "dpkg")
    steps = [FixStep(["reboot"], root=True, risk="reboot", note="simplest: loads the module that matches")]
    steps.append(FixStep(["sh", "-c", "rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia"],
                         root=True, risk="restart", note="without a reboot: stop every GPU process and the display "
                         "manager first"))
    if held:
        steps.append(FixStep(["apt-mark", "hold", *held], root=True, risk="safe",
                             note="keep unattended upgrades from doing this again"))
    versions = (f"kernel module {d.kernel_module or '?'} ≠ user-space {d.userspace or '?'}"
                if d.kernel_module or d.userspace else f"NVML says {d.nvml_error!r}")
    yield finding(
        "driver.module_userspace_mismatch", "fail",
        f"Driver/library version mismatch: {versions}",
        "The driver packages were upgraded but the old kernel module is still loaded (an upgrade without a "
        "reboot, often by unattended-upgrades). nvidia-smi prints 'Failed to initialize NVML: Driver/library "
        "version mismatch' and CUDA programs fail until the new module is loaded.",
        [ev(facts, "driver.kernel_module"), ev(facts, "driver.userspace"), ev(facts, "driver.nvml_error")],
        fix="Reboot, or unload and reload the nvidia modules; then hold the driver packages.",
        steps=steps, intents=[ReloadDriver(d.kernel_module, d.userspace)],
    )


@check("driver.module_missing_for_kernel", AREA,
       "An nvidia module is built for the running kernel and for the kernel that boots next.")
def module_missing_for_kernel(facts: Facts, ctx: Context) -> Iterator[Finding]:
    d = facts.driver
    if facts.host.container:
        raise NotApplicable("the kernel and its modules belong to the container's host")
    if not driver_installed(facts):
        raise NotApplicable("no NVIDIA driver installed")
    if d.module_for_running_kernel is None and d.module_for_next_boot_kernel is None:
        raise Skip("the module trees under /lib/modules for these kernels are not readable here")
    def headers(kernel: str | None) -> FixStep:
        return FixStep(["apt-get", "install", "-y", f"linux-headers-{kernel}"], root=True, risk="safe",
                       note="Debian/Ubuntu; dnf: kernel-devel-<version>")

    rebuild = [headers(d.running_kernel), FixStep(["dkms", "autoinstall"], root=True, risk="safe")]
    if d.module_for_running_kernel is False and d.module_loaded:
        yield finding(
            "driver.module_missing_for_kernel", "warn",
            f"The nvidia module is loaded but no longer installed for kernel {d.running_kernel}: "
            "the GPU will be gone after a reboot",
            "The module files under /lib/modules were removed (a driver package removed or a failed upgrade) "
            "while the old module stays in memory until the next boot.",
            [ev(facts, "driver.module_loaded"), ev(facts, "driver.module_for_running_kernel")],
            fix="Reinstall the driver package or rebuild the module with DKMS before rebooting.",
            steps=rebuild, intents=[RebuildDkms(d.running_kernel)] if d.running_kernel else [],
        )
    elif d.module_for_running_kernel is False:
        yield finding(
            "driver.module_missing_for_kernel", "fail",
            f"No nvidia kernel module is built for the running kernel {d.running_kernel}",
            "The driver's DKMS build failed or never ran for this kernel (missing kernel headers, or a compiler "
            "error); `dkms status` and /var/lib/dkms/nvidia/*/build/make.log say which.",
            [ev(facts, "driver.running_kernel"), ev(facts, "driver.module_for_running_kernel")],
            fix="Install this kernel's headers and rebuild the module with DKMS.",
            steps=rebuild, intents=[RebuildDkms(d.running_kernel, load=True)] if d.running_kernel else [],
        )
    elif d.module_for_next_boot_kernel is False and d.next_boot_kernel != d.running_kernel:
        yield finding(
            "driver.module_missing_for_kernel", "warn",
            f"The next boot's kernel {d.next_boot_kernel} has no nvidia module: the GPU will be gone after a reboot",
            f"A kernel update installed {d.next_boot_kernel} but the driver's DKMS build did not run or failed for "
            f"it. The running kernel {d.running_kernel} is fine until the next reboot.",
            [ev(facts, "driver.next_boot_kernel"), ev(facts, "driver.module_for_next_boot_kernel"),
             ev(facts, "driver.running_kernel")],
            fix="Build the module for the new kernel before rebooting.",
            intents=[RebuildDkms(d.next_boot_kernel)] if d.next_boot_kernel else [],
            steps=[headers(d.next_boot_kernel), FixStep(["dkms", "autoinstall", "-k", d.next_boot_kernel or ""],
                                                        root=True)],
        )
    else:
        yield ok("driver.module_missing_for_kernel",
                 f"An nvidia module is installed for the running kernel {d.running_kernel}",
                 ev(facts, "driver.module_for_running_kernel"), ev(facts, "driver.module_for_next_boot_kernel"))


@check("nouveau.active", AREA, "The open-source nouveau driver is not holding the GPU.")
def nouveau_active(facts: Facts, ctx: Context) -> Iterator[Finding]:
    n = facts.driver.nouveau_loaded
    if n is None:
        raise Skip("the loaded modules are unknown (/proc/modules unreadable)")
    if not n:
        yield ok("nouveau.active", "nouveau is not loaded", ev(facts, "driver.nouveau_loaded"))
        return
    blacklist = "blacklist nouveau\noptions nouveau modeset=0\n"
    yield finding(
        "nouveau.active", "fail", "The nouveau driver is loaded: NVIDIA's driver cannot take the GPU",
        "nouveau (the open-source driver) binds the GPU at boot, so the nvidia module fails to load "
        "('NVRM: GPU is already bound to nouveau'). It has to be blacklisted in the initramfs.",
        [ev(facts, "driver.nouveau_loaded")],
        fix="Blacklist nouveau, rebuild the initramfs and reboot.",
        intents=[BlacklistNouveau()],
        steps=[FixStep(["sh", "-c", f"printf '{blacklist}' > /etc/modprobe.d/blacklist-nouveau.conf"], root=True),
               FixStep(["update-initramfs", "-u"], root=True, note="dnf-based systems: dracut --force"),
               FixStep(["reboot"], root=True, risk="reboot")],
    )


@check("secureboot.blocks_module", AREA, "Secure Boot is not refusing an unsigned nvidia module.")
def secureboot_blocks(facts: Facts, ctx: Context) -> Iterator[Finding]:
    d = facts.driver
    if facts.host.container:
        raise NotApplicable("Secure Boot is the host's concern")
    if d.secure_boot is None:
        raise Skip("the Secure Boot state is unknown (no EFI variables readable, no mokutil)")
    if not d.secure_boot:
        yield ok("secureboot.blocks_module", "Secure Boot is off", ev(facts, "driver.secure_boot"))
        return
    if d.module_loaded or not driver_installed(facts):
        yield ok("secureboot.blocks_module", "Secure Boot is on and the nvidia module is signed and loaded"
                 if d.module_loaded else "Secure Boot is on (no NVIDIA driver installed yet)",
                 ev(facts, "driver.secure_boot"), ev(facts, "driver.module_loaded"))
        return
    if d.module_loaded is None:
        raise Skip("Secure Boot is on, but whether the module is loaded is unknown")
    yield finding(
        "secureboot.blocks_module", "fail",
        "Secure Boot is on and the nvidia module is not loaded: an unsigned module is refused",
        "With Secure Boot the kernel loads only modules signed by an enrolled key. DKMS signs the module with "
        "its machine owner key (MOK), which must be enrolled once at the next boot's blue MOK manager screen.",
        [ev(facts, "driver.secure_boot"), ev(facts, "driver.module_loaded")],
        fix="Enroll the DKMS signing key, reboot and confirm the enrollment at the console (or sign the module "
            "with your own key, or turn Secure Boot off in the firmware).",
        steps=[FixStep(["mokutil", "--import", "/var/lib/dkms/mok.pub"], root=True,
                       note="asks for a one-time password to type at the MOK manager"),
               FixStep(["reboot"], root=True, risk="reboot")],
    )


CHECKS = [driver_missing, driver_not_loaded, module_userspace_mismatch, module_missing_for_kernel,
          nouveau_active, secureboot_blocks]

__all__ = ["CHECKS", "gpu_present"]
