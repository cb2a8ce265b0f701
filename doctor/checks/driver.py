"""Rules about the NVIDIA driver: installed, loaded, consistent, built for the kernel that boots."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from doctor import beliefs
from doctor.checks.common import ev, finding, frameworks, gpu_present, label, ok
from doctor.matrix import branch, major_minor
from doctor.model.facts import Facts
from doctor.model.findings import Evidence, Finding, FixStep
from doctor.model.intents import AttachGpu, BlacklistNouveau, InstallDriverBranch, LoadModule, RebuildDkms, ReloadDriver
from doctor.registry import Context, NotApplicable, Skip, check, matrix_of

AREA = "Driver"


def _pci_list(facts: Facts) -> str:
    ids = [f"{g.pci_bus_id} (device {g.pci_device_id})" for g in facts.gpus if g.pci_bus_id]
    return ", ".join(ids[:4]) + (" …" if len(ids) > 4 else "")


def _runs_cuda(b: beliefs.Beliefs, ctx: Context) -> list[Evidence]:
    """The CUDA version this driver runs, as evidence ``driver.runs_cuda`` (what NFD's ``gpu-doctor.cuda``
    label shows): libcuda's or nvidia-smi's own word, else — files only, as with --root — the newest CUDA the
    matrix says this driver version runs natively."""
    if b.driver_cuda.value:
        return [Evidence("driver.runs_cuda", str(b.driver_cuda.value), b.driver_cuda.source)]
    version, m = b.driver_version.value, ctx.matrix
    row = m.newest_cuda_for_driver(version) if version and m is not None else None
    if row and row.get("version"):
        return [Evidence("driver.runs_cuda", major_minor(row["version"]), row.get("source") or "matrix")]
    return []


@check("driver.missing", AREA, "An NVIDIA driver is installed (user-space libraries or kernel module).")
def driver_missing(facts: Facts, ctx: Context) -> Iterator[Finding]:
    b = beliefs.of(facts)
    installed = b.userspace_installed
    if installed.yes:
        pkgs = beliefs.driver_packages(facts)
        version = (b.driver_version.value or (f"package {pkgs[0]}" if pkgs else None)
                   or (f"(CUDA driver API {b.driver_cuda.value})" if b.driver_cuda.value else "(version unknown)"))
        yield ok("driver.missing", f"NVIDIA driver {version} is installed", *installed.evidence,
                 *_runs_cuda(b, ctx), detail=f"Evidence: {installed.why}.")
        return
    if facts.host.container:
        raise NotApplicable("inside a container the host provides the driver (see container.no_gpu_passthrough)")
    if installed.unknown:
        raise Skip(installed.why)
    evidence = list(installed.evidence)
    if b.no_nvidia_gpu.yes and facts.host.pci_nvidia_gpus == 0:
        cpu_stack = [p for _e, p in frameworks(facts) if p.cpu_only]
        if cpu_stack and not b.gpu_expected.yes:
            raise NotApplicable("no NVIDIA GPU on this machine, and it runs CPU builds only "
                                f"({', '.join(label(p) for p in cpu_stack[:3])}): nothing here needs a driver")
        yield finding(
            "driver.missing", "fail", "No NVIDIA GPU is on this machine's PCI bus, and no NVIDIA driver is installed",
            "The PCI bus lists no NVIDIA display or 3D controller"
            + (f", yet {b.gpu_expected.why}" if b.gpu_expected.yes else "") + ". On a VM or cloud "
            "instance the GPU is not attached (wrong instance type, or PCI passthrough not configured); on bare "
            "metal the card is not seated or not powered. Installing a driver will not help until the GPU appears "
            "in `lspci`.",
            [ev(facts, "host.pci_nvidia_gpus"), *evidence],
            fix="Attach a GPU to this machine (instance type / passthrough / card seating), then install a driver.",
        )
        return
    if b.gpu_on_bus.unknown:
        yield finding(
            "driver.missing", "fail", "No NVIDIA driver is installed",
            f"{installed.why[0].upper()}{installed.why[1:]}. Whether a GPU is attached is unknown here: "
            + ("the PCI bus could not be read." if beliefs.live_probed(facts, "driver") else
               "the report does not say."),
            [*evidence, ev(facts, "host.pci_nvidia_gpus")],
            fix="Check `lspci -nn | grep -i nvidia` for the GPU, then install the NVIDIA driver "
                "(`gpu-doctor fix` writes the commands).",
            intents=[InstallDriverBranch(who="the NVIDIA GPU")],
        )
        return
    where = f" at {_pci_list(facts)}" if _pci_list(facts) else ""
    yield finding(
        "driver.missing", "fail", f"An NVIDIA GPU is present{where} but no NVIDIA driver is installed",
        f"{installed.why[0].upper()}{installed.why[1:]}.",
        [ev(facts, "host.pci_nvidia_gpus"), *evidence],
        fix="Install the NVIDIA driver for this distribution (`gpu-doctor fix` writes the commands).",
        intents=[InstallDriverBranch(who="the NVIDIA GPU")],
    )


@check("driver.not_loaded", AREA, "The NVIDIA kernel module is loaded and answers.")
def driver_not_loaded(facts: Facts, ctx: Context) -> Iterator[Finding]:
    d = facts.driver
    b = beliefs.of(facts)
    if b.userspace_installed.no:
        raise NotApplicable("no NVIDIA driver installed (see driver.missing)")
    if d.nvml_error and "mismatch" in d.nvml_error.lower():
        raise NotApplicable("the module is loaded but mismatched (see driver.module_userspace_mismatch)")
    loaded = b.module_loaded
    if loaded.yes:
        yield ok("driver.not_loaded", f"NVIDIA kernel module {d.kernel_module or ''} is loaded".replace("  ", " "),
                 *loaded.evidence, detail=f"Evidence: {loaded.why}.")
        return
    if loaded.unknown:
        raise Skip(loaded.why)
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
    version = b.driver_version.value or "(version unknown)"
    evidence = [*loaded.evidence, ev(facts, "driver.userspace"), ev(facts, "driver.cuda_driver_api"),
                ev(facts, "host.pci_nvidia_gpus")]
    said = [f"NVML answers {d.nvml_error!r}" if d.nvml_error else None,
            f"cuInit answers {d.cuda_init_error!r}" if d.cuda_init_error else None]
    said_text = " and ".join(s for s in said if s) or loaded.why[0].upper() + loaded.why[1:]
    yield finding(
        "driver.not_loaded", "fail",
        f"NVIDIA driver {version} is installed but its kernel module is not loaded",
        f"{said_text}: nothing can use a GPU. " + cause,
        evidence,
        **_not_loaded_fix(facts),
    )


def _not_loaded_fix(facts: Facts) -> dict[str, Any]:
    """The remedy follows the most likely cause: loading a module for a GPU that is not there is futile."""
    if facts.host.pci_nvidia_gpus == 0:
        fix = ("Attach a GPU first (the instance type, PCI passthrough, or the card's seating and power); "
               "the module loads once `lspci -nn | grep -i nvidia` lists it.")
        if facts.host.container:
            fix += " Inside a container, start it on a GPU host with the GPU requested (docker run --gpus all)."
        return {"fix": fix, "intents": [AttachGpu()],
                "steps": [FixStep(["lspci", "-nn"], risk="safe", note="look for an NVIDIA device")]}
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
    versions = (f"kernel module {d.kernel_module} ≠ user-space {d.userspace}" if d.kernel_module and d.userspace
                else f"kernel module {d.kernel_module}, user space of another version" if d.kernel_module
                else f"user space {d.userspace}, a kernel module of another version loaded" if d.userspace
                else f"NVML says {d.nvml_error!r}")
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
    if beliefs.of(facts).userspace_installed.no:
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
    b = beliefs.of(facts)
    # The same belief as driver.not_loaded: a GPU enumerated or a module version proves a loaded module.
    if b.module_loaded.yes or b.userspace_installed.no:
        yield ok("secureboot.blocks_module", "Secure Boot is on and the nvidia module is signed and loaded"
                 if b.module_loaded.yes else "Secure Boot is on (no NVIDIA driver installed yet)",
                 ev(facts, "driver.secure_boot"), *b.module_loaded.evidence)
        return
    if b.module_loaded.unknown:
        raise Skip("Secure Boot is on, but whether the module is loaded is unknown")
    yield finding(
        "secureboot.blocks_module", "fail",
        "Secure Boot is on and the nvidia module is not loaded: an unsigned module is refused",
        "With Secure Boot the kernel loads only modules signed by an enrolled key. DKMS signs the module with "
        "its machine owner key (MOK), which must be enrolled once at the next boot's blue MOK manager screen.",
        [ev(facts, "driver.secure_boot"), *b.module_loaded.evidence],
        fix="Enroll the DKMS signing key, reboot and confirm the enrollment at the console (or sign the module "
            "with your own key, or turn Secure Boot off in the firmware).",
        steps=[FixStep(["mokutil", "--import", "/var/lib/dkms/mok.pub"], root=True,
                       note="asks for a one-time password to type at the MOK manager"),
               FixStep(["reboot"], root=True, risk="reboot")],
    )


@check("loader.libcuda_stub", AREA, "The dynamic loader resolves the driver's libcuda, not the toolkit's stub.")
def libcuda_stub(facts: Facts, ctx: Context) -> Iterator[Finding]:
    b = beliefs.of(facts)
    kind = b.libcuda.value
    if kind is None:
        raise Skip(b.libcuda.why)
    if kind == "absent":
        raise NotApplicable("the loader finds no libcuda at all (see driver.missing)")
    lib = facts.loader.libcuda
    evidence = [ev(facts, "loader.libcuda", lib.path if lib else None), ev(facts, "env.LD_LIBRARY_PATH")]
    if kind != "stub":
        yield ok("loader.libcuda_stub", f"The loader resolves libcuda from {lib.path if lib else '?'}", *evidence)
        return
    yield finding(
        "loader.libcuda_stub", "fail",
        f"The loader resolves the CUDA toolkit's stub libcuda ({lib.path if lib else '?'}), not the driver's",
        "The toolkit ships lib64/stubs/libcuda.so only for linking; at run time every CUDA call through it fails "
        "with CUDA_ERROR_STUB_LIBRARY (34) 'CUDA driver is a stub library', and frameworks see no GPU. The stubs "
        "directory is on LD_LIBRARY_PATH or in the ld.so configuration (often copied from a build Dockerfile).",
        evidence,
        fix="Remove the toolkit's stubs directory from LD_LIBRARY_PATH and from /etc/ld.so.conf.d (then "
            "`sudo ldconfig`); link against it only at build time (-L…/lib64/stubs).",
    )


@check("driver.forward_compat", AREA,
       "A forward-compatibility libcuda (cuda-compat) in use fits the GPU and the kernel driver branch.")
def forward_compat(facts: Facts, ctx: Context) -> Iterator[Finding]:
    b = beliefs.of(facts)
    kind = b.libcuda.value
    if kind is None:
        raise Skip(b.libcuda.why)
    if kind not in ("compat", "newer_than_module"):
        raise NotApplicable("the loader resolves the driver's own libcuda (no forward compatibility in use)")
    m = matrix_of(ctx)
    lib = facts.loader.libcuda
    module = facts.driver.kernel_module
    evidence = [ev(facts, "loader.libcuda", f"{lib.path} {lib.version or ''}".strip() if lib else None),
                ev(facts, "driver.kernel_module")]
    gpus = beliefs.listed_gpus(facts)
    rows = [m.gpu(g.name) for g in gpus]
    policy = m.table("cuda", "forward_compat_policy")
    segments = policy.get("segments", [])
    wrong = [g.name for g, r in zip(gpus, rows, strict=False)
             if g.name and r and r.get("segment") and r["segment"] not in segments]
    user = f"{lib.path}" if lib else "a cuda-compat libcuda"
    if wrong:
        yield finding(
            "driver.forward_compat", "fail",
            f"Forward compatibility ({user}) is in use on {', '.join(sorted(set(wrong)))}, which it does not support",
            "NVIDIA's forward compatibility works only on data-center GPUs (and select NGC-ready RTX SKUs and "
            "Jetson); on GeForce and most workstation GPUs every CUDA program fails with "
            "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804) 'forward compatibility was attempted on non "
            f"supported HW'. {policy.get('source', '')}",
            [*evidence, Evidence("gpus", wrong, gpus[0].source if gpus else None)],
            fix="Remove the cuda-compat directory from LD_LIBRARY_PATH / ld.so.conf (or uninstall the cuda-compat "
                "package) and upgrade the driver itself to one that runs this CUDA natively.",
        )
        return
    if module and lib and lib.version:
        cuda_row = m.newest_cuda_for_driver(lib.version)
        fwd = m.forward_compat_rows(cuda_row["version"]) if cuda_row else []
        branches = sorted({str(x) for r in fwd for x in r.get("driver_branches", [])}, key=int)
        if fwd and str(branch(module)) not in branches:
            yield finding(
                "driver.forward_compat", "fail",
                f"The cuda-compat libcuda {lib.version} does not support the loaded kernel driver {module} "
                f"(branch {branch(module)})",
                "A forward-compatibility libcuda works only on top of the kernel-driver branches NVIDIA lists for it; "
                f"for CUDA {cuda_row['version'] if cuda_row else '?'} those are "
                f"{', '.join('R' + x for x in branches)}. "
                "Otherwise CUDA fails with CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803) and the kernel log says "
                "'kernel version … does not match DSO version'.",
                [*evidence, Evidence("compat:driver_branches", branches, fwd[0].get("source"))],
                fix=f"Use a cuda-compat package made for branch {branch(module)}, or install a driver of a listed "
                    "branch, or drop forward compatibility and upgrade the driver.",
            )
            return
    if not gpus or not all(rows):
        raise Skip("forward compatibility is in use, but the GPUs (or their segment) are unknown")
    yield ok("driver.forward_compat", f"Forward compatibility ({user}) on a supported data-center GPU and driver "
             "branch", *evidence)


CHECKS = [driver_missing, driver_not_loaded, module_userspace_mismatch, module_missing_for_kernel,
          nouveau_active, secureboot_blocks, libcuda_stub, forward_compat]

__all__ = ["CHECKS", "gpu_present"]
