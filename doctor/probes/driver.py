"""Driver and GPU facts: kernel module, user-space libraries, NVML, libcuda, nvidia-smi, PCI."""

from __future__ import annotations

import re
from typing import Any

from doctor import parsers
from doctor.host import CmdResult, Host
from doctor.model.facts import DriverInfo, Gpu, GpuProcess, LoaderInfo, MigDevice, Package, XidEvent
from doctor.probes.base import Recorder
from doctor.probes.native import smi_output
from doctor.safeio import lazy_compile

SECURE_BOOT_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
_DRIVER_PREFIXES = (r"nvidia|libnvidia|libcuda|cuda-drivers|cuda-compat|xserver-xorg-video-nvidia|kmod-nvidia|"
                    r"akmod-nvidia|xorg-x11-drv-nvidia|"
                    r"firmware-nvidia|linux-modules-nvidia|linux-objects-nvidia|cudnn|libcudnn|nvidia-container")
DRIVER_PACKAGE = lazy_compile(f"^({_DRIVER_PREFIXES})")


Logs = tuple[list[Package], list[XidEvent], Recorder]


def probe_driver_logs(host: Host) -> Logs:
    """The driver's packages (dpkg's status file, pacman, rpm) and the kernel log's Xid events: what needs
    neither NVML nor nvidia-smi, so it runs beside them (dmesg is a child process). What it learned about its
    sources and errors is in its own recorder, merged where :func:`probe_driver` would have recorded it."""
    sub = Recorder()
    return _packages(host, sub), _xids(host, sub), sub


def probe_driver(host: Host, rec: Recorder, native: dict[str, Any] | None, loader: LoaderInfo,
                 smi: dict[str, Any] | None, kernel: str | None, logs: Logs | None = None) -> DriverInfo:
    native = native or {}
    proc = host.try_read("/proc/driver/nvidia/version")
    parsed = parsers.parse_proc_driver_version(proc) if proc else {}
    kernel_module = parsed.get("version")
    if kernel_module:
        rec.source("driver.kernel_module", "file:/proc/driver/nvidia/version")
    else:
        sysver = host.try_read("/sys/module/nvidia/version")
        if sysver and sysver.strip():
            kernel_module = sysver.strip()
            rec.source("driver.kernel_module", "file:/sys/module/nvidia/version")
    modules = host.try_read("/proc/modules")
    loaded_names = {line.split(" ", 1)[0] for line in modules.splitlines()} if modules is not None else None
    module_loaded = None if loaded_names is None else "nvidia" in loaded_names
    if (module_loaded is None and kernel_module) or native.get("nvml_driver_version"):
        # NVML initialises only through a working kernel driver (on WSL2 that is dxgkrnl, which
        # /proc/modules does not list as nvidia).
        module_loaded = True
    for lost in native.get("gpu_errors") or []:
        rec.error("nvml", lost)
    flavor = parsed.get("flavor")
    if flavor is None and module_loaded:
        lic = host.try_read("/sys/module/nvidia/license")  # not exported by all kernels
        if lic:
            flavor = "open" if "GPL" in lic else "proprietary"

    cuda_int = native.get("cuda_driver_version_int")
    cuinit = None
    if "cuinit_result" in native:
        cuinit = f"{native.get('cuinit_name')} ({native['cuinit_result']})"
        if native.get("cuinit_text"):
            cuinit += f": {native['cuinit_text']}"
        if native["cuinit_result"] == 0:
            cuinit = None
        rec.source("driver.cuda_init_error", "libcuda:cuInit")
    if cuda_int:
        rec.source("driver.cuda_driver_api", "libcuda:cuDriverGetVersion")
    elif native.get("cuda_error"):
        rec.error("libcuda", native["cuda_error"])

    smi_cuda = _smi_cuda_version(smi)
    if smi_cuda:
        rec.source("driver.smi_cuda_version", "cmd:nvidia-smi -q -x (<cuda_version>)")
    running = kernel
    next_boot = _next_boot_kernel(host)
    userspace = _userspace(native, loader, smi, rec)
    secure_boot = _secure_boot(host, rec)
    packages, xids, sub = logs if logs is not None else probe_driver_logs(host)
    rec.merge(sub)  # in the order these facts were always recorded: the packages' and the kernel log's last
    return DriverInfo(
        kernel_module=kernel_module,
        module_loaded=module_loaded,
        userspace=userspace,
        cuda_driver_api=parsers.cuda_version_from_int(cuda_int) if isinstance(cuda_int, int) else None,
        smi_cuda_version=smi_cuda,
        cuda_init_error=cuinit,
        nvml_error=native.get("nvml_error"),
        module_flavor=flavor,
        nouveau_loaded=None if loaded_names is None else "nouveau" in loaded_names,
        secure_boot=secure_boot,
        running_kernel=running,
        module_for_running_kernel=_module_installed(host, running),
        next_boot_kernel=next_boot,
        module_for_next_boot_kernel=_module_installed(host, next_boot),
        packages=packages,
        device_nodes=host.glob("/dev/nvidia*"),
        xid_events=xids,
    )


def _smi_cuda_version(smi: dict[str, Any] | None) -> str | None:
    """nvidia-smi's CUDA version, only when it reads as one ("N/A", "Not Found" are unknown)."""
    value = (smi or {}).get("cuda_version")
    return value if isinstance(value, str) and re.fullmatch(r"\d{1,3}\.\d{1,3}", value) else None


def _userspace(native: dict[str, Any], loader: LoaderInfo, smi: dict[str, Any] | None, rec: Recorder) -> str | None:
    if native.get("nvml_driver_version"):
        rec.source("driver.userspace", "nvml:nvmlSystemGetDriverVersion")
        return str(native["nvml_driver_version"])
    lib = loader.libcuda
    # libcuda.so.535.104.05: the file name carries the driver version (a branch number >= 100).
    if lib and not lib.stub and lib.version and re.fullmatch(r"[1-9]\d{2,}\.\d+(\.\d+)?", lib.version):
        rec.source("driver.userspace", f"file:{lib.path}")
        return lib.version
    if smi and smi.get("driver_version"):
        rec.source("driver.userspace", "cmd:nvidia-smi -q -x")
        return str(smi["driver_version"])
    return None


def _secure_boot(host: Host, rec: Recorder) -> bool | None:
    try:
        data = host.read_bytes(SECURE_BOOT_VAR, 16)
    except OSError:
        data = b""
    if len(data) >= 5:  # 4 bytes of attributes, then the value
        rec.source("driver.secure_boot", f"file:{SECURE_BOOT_VAR}")
        return data[4] == 1
    if not host.is_dir("/sys/firmware/efi"):
        if host.exists("/sys/firmware"):
            rec.source("driver.secure_boot", "file:/sys/firmware (no EFI: legacy BIOS boot)")
            return False
        return None
    if host.which("mokutil"):
        result = host.run(["mokutil", "--sb-state"])
        if result.returncode is not None and "SecureBoot" in result.stdout:
            rec.source("driver.secure_boot", "cmd:mokutil --sb-state")
            return "enabled" in result.stdout.lower()
        rec.error("secure-boot", result.describe())
    return None


_MODULE_FILE = lazy_compile(r"^nvidia\.ko(\.(xz|zst|gz))?$")


def _module_installed(host: Host, kernel: str | None) -> bool | None:
    """Is an nvidia module built for this kernel? None when that kernel's module tree is absent."""
    if not kernel:
        return None
    base = f"/lib/modules/{kernel}"
    if not host.is_dir(base):
        return None
    return any(_MODULE_FILE.match(path.rsplit("/", 1)[-1]) for path in host.walk_files(base))


def kernel_sort_key(version: str) -> tuple[Any, ...]:
    # isdecimal() and ASCII: "²".isdigit() is True, but int("²") raises
    return tuple(int(p) if p.isascii() and p.isdecimal() else p for p in re.split(r"[.\-+~_]", version))


def _next_boot_kernel(host: Host) -> str | None:
    """The newest installed kernel: what a default GRUB configuration boots next."""
    kernels = [p.rsplit("/", 1)[-1][len("vmlinuz-"):] for p in host.glob("/boot/vmlinuz-*")]
    kernels = [k for k in kernels if host.is_dir(f"/lib/modules/{k}")]
    if not kernels:
        return None
    try:
        return max(kernels, key=kernel_sort_key)
    except TypeError:  # mixed int/str pieces: fall back to plain string order
        return max(kernels)


DPKG_STATUS_CAP = 512 * 1024 * 1024  # streamed; a desktop with 5,000 packages has ~10 MB


def _dpkg_driver_stanzas(host: Host) -> str | None:
    """The stanzas of dpkg's status file that may be driver packages, read in large blocks: the file is often
    larger than one read's cap, and a package past a cut must not silently vanish. Each block is searched for
    its "Package:" lines with one regular expression; only a driver package's stanza is decoded and kept.
    None when unreadable."""
    kept: list[str] = []
    tail = b""
    try:
        for block in host.iter_blocks("/var/lib/dpkg/status", DPKG_STATUS_CAP):
            buf = tail + block
            cut = buf.rfind(b"\n\n")
            if cut < 0 and len(buf) < _DPKG_STANZA_CAP:
                tail = buf  # one stanza still open: it continues in the next block
                continue
            cut = len(buf) if cut < 0 else cut
            kept += _driver_stanzas(buf[:cut])
            tail = buf[cut + 2:]
    except (OSError, ValueError):
        return None
    kept += _driver_stanzas(tail)
    return "\n".join(kept)


_DPKG_STANZA_CAP = 16 * 1024 * 1024  # no real stanza comes near this; a file without blank lines stays bounded
# A literal first character lets the regex engine skip ahead in C; "^" with MULTILINE would try every byte. Only
# the "Package:" lines whose name starts as a driver package's does (DRIVER_PACKAGE's prefixes, all ASCII): the
# other ~700 of a typical system are passed over in C, not decoded and tested one by one in Python.
_DPKG_PACKAGE = lazy_compile(rb"\n(?i:package):[ \t]*(?=" + _DRIVER_PREFIXES.encode() + rb")(\S+)")


def _driver_stanzas(chunk: bytes) -> list[str]:
    """The whole stanzas of ``chunk`` whose package is a driver package (the pattern finds only those; the test
    here is the one every package source's names pass)."""
    chunk = b"\n" + chunk  # the first stanza's "Package:" line starts the chunk
    out = []
    for m in _DPKG_PACKAGE.finditer(chunk):
        if not DRIVER_PACKAGE.match(m.group(1).decode("utf-8", "replace")):
            continue
        start = chunk.rfind(b"\n\n", 0, m.start() + 1) + 2
        end = chunk.find(b"\n\n", m.end())
        stanza = chunk[max(start, 1): len(chunk) if end < 0 else end]
        out.append(stanza.decode("utf-8", "replace").strip("\n") + "\n")
    return out


def _packages(host: Host, rec: Recorder) -> list[Package]:
    return [*_managed_packages(host, rec), *_run_installer(host, rec)]


def _managed_packages(host: Host, rec: Recorder) -> list[Package]:
    status = _dpkg_driver_stanzas(host)
    if status is not None:
        rec.source("driver.packages", "file:/var/lib/dpkg/status")
        return [Package(n, v, "dpkg") for n, v in parsers.parse_dpkg_status(status) if DRIVER_PACKAGE.match(n)]
    if host.is_dir("/var/lib/pacman/local"):
        # Arch: one directory per installed package, "<name>-<pkgver>-<pkgrel>"; names may contain dashes.
        rec.source("driver.packages", "file:/var/lib/pacman/local")
        pkgs = []
        for entry in host.listdir("/var/lib/pacman/local"):
            m = re.fullmatch(r"(?P<name>.+)-(?P<ver>[^-]+-[^-]+)", entry)
            if m and DRIVER_PACKAGE.match(m.group("name")):
                pkgs.append(Package(m.group("name"), m.group("ver"), "pacman"))
        return sorted(pkgs, key=lambda p: p.name)
    if host.which("rpm"):
        result = host.run(["rpm", "-qa", "--queryformat", "%{NAME}\t%{VERSION}-%{RELEASE}\n"])
        if result.ok:
            rec.source("driver.packages", "cmd:rpm -qa")
            pkgs = []
            for line in result.stdout.splitlines():
                name, _, version = line.partition("\t")
                if DRIVER_PACKAGE.match(name):
                    pkgs.append(Package(name, version or None, "rpm"))
            return sorted(pkgs, key=lambda p: p.name)
        rec.error("packages", result.describe())
    return []


def _run_installer(host: Host, rec: Recorder) -> list[Package]:
    """NVIDIA's .run installer leaves nvidia-uninstall and its log behind; no package manager knows it."""
    if host.exists("/usr/bin/nvidia-uninstall") or host.exists("/var/log/nvidia-installer.log"):
        rec.source("driver.packages.run", "file:/usr/bin/nvidia-uninstall, /var/log/nvidia-installer.log")
        return [Package("nvidia-installer", None, "run")]
    return []


def _xids(host: Host, rec: Recorder) -> list[XidEvent]:
    text = host.kernel_log()  # /dev/kmsg, as dmesg reads it, without a child process
    if text is not None:
        rec.source("driver.xid_events", "file:/dev/kmsg")
    elif host.which("dmesg"):
        result = host.run(["dmesg"])
        if result.ok:
            text = result.stdout
            rec.source("driver.xid_events", "cmd:dmesg")
        else:
            rec.error("kernel-log", result.describe() + " (reading the kernel log needs root or CAP_SYSLOG)")
    if text is None:
        for path in ("/var/log/kern.log", "/var/log/messages"):
            text = host.try_read(path)
            if text is not None:
                rec.source("driver.xid_events", f"file:{path}")
                break
    if text is None:
        return []
    return [XidEvent(e["xid"], e.get("pci_bus_id"), e.get("message")) for e in parsers.parse_xid_lines(text)]


# --- GPUs -------------------------------------------------------------------------------------


def run_smi(host: Host, rec: Recorder, result: CmdResult | None = None) -> dict[str, Any] | None:
    """nvidia-smi's facts: from ``result`` when it already ran (started early beside NVML), else run now."""
    result = result or smi_output(host)
    if result is None:
        return None
    if not result.ok:
        rec.error("nvidia-smi", result.describe())
        return None
    parsed = parsers.parse_nvidia_smi_xml(result.stdout)
    if not parsed.get("gpus") and not parsed.get("driver_version"):
        rec.error("nvidia-smi", "nvidia-smi -q -x: unparsable output")
        return None
    return parsed


def probe_gpus(host: Host, rec: Recorder, native: dict[str, Any] | None, smi: dict[str, Any] | None) -> list[Gpu]:
    if native and native.get("gpus"):
        rec.source("gpus", "nvml")
        return [_gpu(g) for g in native["gpus"]]
    if smi and smi.get("gpus"):
        rec.source("gpus", "cmd:nvidia-smi -q -x")
        return [_gpu(g) for g in smi["gpus"]]
    pci = scan_pci(host, rec)
    if pci:
        rec.source("gpus", PCI_SOURCE)
    return pci or []


def _gpu(raw: dict[str, Any]) -> Gpu:
    fields = {k: v for k, v in raw.items() if k in Gpu.__dataclass_fields__}
    fields["processes"] = [GpuProcess(**p) for p in raw.get("processes") or []]
    fields["mig_devices"] = [MigDevice(**m) for m in raw.get("mig_devices") or []]
    reasons = raw.get("throttle_reasons")
    fields["throttle_reasons"] = list(reasons) if isinstance(reasons, list) else None
    return Gpu(**fields)


PCI_SOURCE = "file:/sys/bus/pci/devices"


def scan_pci(host: Host, rec: Recorder) -> list[Gpu] | None:
    """GPUs on the PCI bus, found even when no driver works (vendor 0x10de, display class).

    None when the PCI bus cannot be read at all (no sysfs), so "no GPU" is never guessed.
    """
    if not host.is_dir("/sys/bus/pci/devices"):
        return None
    gpus = []
    for dev in host.glob("/sys/bus/pci/devices/*"):
        vendor = (host.try_read(f"{dev}/vendor") or "").strip().lower()
        klass = (host.try_read(f"{dev}/class") or "").strip().lower()
        if vendor != "0x10de" or not klass.startswith(("0x0300", "0x0302")):
            continue
        device = (host.try_read(f"{dev}/device") or "").strip().lower()
        dev_id = f"0x{device[2:].upper()}10DE" if device.startswith("0x") else None
        gpus.append(Gpu(pci_bus_id=dev.rsplit("/", 1)[-1], pci_device_id=dev_id, source="pci"))
    # No source recorded here: the scan also runs to count the GPUs on the bus, and the GPU list's source is
    # whichever probe gave the list (NVML first): probe_gpus records it.
    return gpus
