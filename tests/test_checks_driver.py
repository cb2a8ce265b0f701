"""Tier 2: the driver checks (doctor/checks/driver.py) judged on facts, no I/O."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import commands, only, outcome
from factories import H100, make_facts

from doctor.model.facts import LibRef, Package

NO_DRIVER = {
    "driver__userspace": None,
    "driver__kernel_module": None,
    "driver__cuda_driver_api": None,
    "driver__module_loaded": False,
    "driver__packages": [],
    "driver__device_nodes": [],
    "loader__libcuda": None,  # a resolvable libcuda.so.1 is the driver's user space
}

# A module that is not loaded enumerates no GPU: only the PCI scan still lists it.
PCI_ONLY = [replace(H100, name=None, uuid=None, memory_total_mib=None, source="pci")]
NOT_LOADED = {"driver__module_loaded": False, "driver__kernel_module": None,
              "driver__nvml_error": "Driver Not Loaded", "gpus": PCI_ONLY}

# The machine this was recorded on (tests/data/nvidia-smi-text/debian12-535.309.01-no-kernel-module.*):
# Debian's 535 user space installed, no GPU on the PCI bus, so the kernel module never loads.
NO_GPU_ON_PCI_WITH_USERSPACE = {
    "driver__userspace": "535.309.01",
    "driver__module_loaded": False,
    "driver__kernel_module": None,
    "driver__cuda_driver_api": None,
    "driver__nvml_error": "Driver Not Loaded",
    "driver__cuda_init_error": "CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected",
    "driver__packages": [Package("nvidia-driver", "535.309.01-1", "dpkg"),
                         Package("libcuda1", "535.309.01-1", "dpkg")],
    "driver__device_nodes": [],
    "host__pci_nvidia_gpus": 0,
    "gpus": [],
}


# --- driver.missing ---------------------------------------------------------------------------


def test_missing_ok_names_the_installed_version() -> None:
    f = only(make_facts(), "driver.missing")
    assert f.severity == "ok"
    assert f.title == "NVIDIA driver 550.90.07 is installed"


def test_missing_without_a_gpu_on_pci_says_no_gpu_is_attached() -> None:
    f = only(make_facts(**NO_DRIVER, gpus=[], host__pci_nvidia_gpus=0), "driver.missing")
    assert f.severity == "fail"
    assert f.title == "No NVIDIA GPU is on this machine's PCI bus, and no NVIDIA driver is installed"
    assert "lspci" in f.detail
    assert f.fix is not None and f.fix.summary.startswith("Attach a GPU")


def test_missing_with_a_gpu_on_pci_names_its_bus_id_and_asks_for_a_driver() -> None:
    pci_only = replace(H100, name=None, uuid=None, memory_total_mib=None, source="pci")
    f = only(make_facts(**NO_DRIVER, gpus=[pci_only], host__pci_nvidia_gpus=1), "driver.missing")
    assert f.severity == "fail"
    assert f.title == ("An NVIDIA GPU is present at 00000000:18:00.0 (device 0x233010DE) "
                       "but no NVIDIA driver is installed")
    assert f.fix is not None and "gpu-doctor fix" in f.fix.summary


def test_missing_gpu_absent_and_gpu_present_read_differently() -> None:
    absent = only(make_facts(**NO_DRIVER, gpus=[], host__pci_nvidia_gpus=0), "driver.missing")
    present = only(make_facts(**NO_DRIVER, gpus=[], host__pci_nvidia_gpus=1), "driver.missing")
    assert absent.title != present.title
    assert "No NVIDIA GPU" in absent.title
    assert "GPU is present" in present.title


def test_missing_counts_the_kernel_module_alone_as_installed() -> None:
    f = only(make_facts(driver__userspace=None, driver__packages=[]), "driver.missing")
    assert f.severity == "ok"
    assert "550.90.07" in f.title


def test_missing_is_not_applicable_inside_a_container() -> None:
    result, findings = outcome(make_facts(**NO_DRIVER, host__container="docker", gpus=[]), "driver.missing")
    assert result.status == "not_applicable"
    assert result.reason and "container" in result.reason
    assert findings == []


def test_missing_with_unknown_pci_bus_does_not_claim_a_gpu_is_present() -> None:
    result, findings = outcome(make_facts(**NO_DRIVER, gpus=[], host__pci_nvidia_gpus=None), "driver.missing")
    assert result.status == "skipped" or "GPU is present" not in findings[0].title


def test_missing_with_only_the_driver_package_known_names_no_none_version() -> None:
    facts = make_facts(driver__userspace=None, driver__kernel_module=None,
                       driver__packages=[Package("nvidia-driver-550", "550.90.07-0ubuntu1", "dpkg")])
    f = only(facts, "driver.missing")
    assert f.severity == "ok"
    assert "None" not in f.title


# --- driver.not_loaded ------------------------------------------------------------------------


def test_not_loaded_ok_names_the_loaded_module() -> None:
    f = only(make_facts(), "driver.not_loaded")
    assert f.severity == "ok"
    assert f.title == "NVIDIA kernel module 550.90.07 is loaded"


def test_not_loaded_without_gpu_on_pci_blames_the_missing_gpu() -> None:
    f = only(make_facts(**NO_GPU_ON_PCI_WITH_USERSPACE), "driver.not_loaded")
    assert f.severity == "fail"
    assert f.title == "NVIDIA driver 535.309.01 is installed but its kernel module is not loaded"
    assert "'Driver Not Loaded'" in f.detail
    assert "CUDA_ERROR_NO_DEVICE (100)" in f.detail
    assert "Likely cause: there is no NVIDIA GPU on the PCI bus" in f.detail
    assert [e.fact for e in f.evidence if e.fact == "host.pci_nvidia_gpus"]


def test_not_loaded_with_a_gpu_on_the_bus_loads_the_module_then_reads_the_kernel_log() -> None:
    f = only(make_facts(**{**NO_GPU_ON_PCI_WITH_USERSPACE, "host__pci_nvidia_gpus": 1}), "driver.not_loaded")
    assert f.fix is not None
    assert [(s.command, s.root) for s in f.fix.steps] == [
        (["modprobe", "nvidia"], True),
        (["dmesg", "--level=err,warn"], True),
    ]


def test_not_loaded_without_a_gpu_says_attach_one_instead_of_modprobe() -> None:
    f = only(make_facts(**NO_GPU_ON_PCI_WITH_USERSPACE), "driver.not_loaded")
    assert f.fix is not None
    assert f.fix.summary.startswith("Attach a GPU first")
    assert [s.command for s in f.fix.steps] == [["lspci", "-nn"]]


def test_not_loaded_in_a_container_points_at_the_host() -> None:
    f = only(make_facts(**{**NO_GPU_ON_PCI_WITH_USERSPACE, "host__pci_nvidia_gpus": 1, "host__container": "docker"}),
             "driver.not_loaded")
    assert f.fix is not None and "on the container's host" in f.fix.summary
    assert f.fix.steps == []


@pytest.mark.parametrize(("overrides", "cause"), [
    ({"driver__nouveau_loaded": True}, "the nouveau driver is loaded and holds the GPU"),
    ({"driver__module_for_running_kernel": False},
     "no nvidia module is built for the running kernel 5.15.0-105-generic"),
    ({"driver__secure_boot": True}, "Secure Boot is on and refuses an unsigned module"),
    ({"host__container": "docker"}, "the host has no loaded nvidia module"),
])
def test_not_loaded_detail_names_the_likely_cause(overrides: dict, cause: str) -> None:
    f = only(make_facts(**{**NOT_LOADED, **overrides}), "driver.not_loaded")
    assert f.severity == "fail"
    assert "Likely cause: " in f.detail
    assert cause in f.detail


def test_not_loaded_without_visible_cause_points_to_modprobe_and_dmesg() -> None:
    f = only(make_facts(**NOT_LOADED), "driver.not_loaded")
    assert "Likely cause" not in f.detail
    assert "`sudo modprobe nvidia`" in f.detail
    assert "dmesg" in f.detail


def test_not_loaded_believes_nvml_over_a_stale_module_list() -> None:
    f = only(make_facts(driver__nvml_error="Driver Not Loaded", gpus=PCI_ONLY), "driver.not_loaded")
    assert f.severity == "fail"


def test_not_loaded_is_not_applicable_without_a_driver() -> None:
    result, _ = outcome(make_facts(**NO_DRIVER, gpus=PCI_ONLY), "driver.not_loaded")
    assert result.status == "not_applicable"
    assert result.reason and "driver.missing" in result.reason


def test_not_loaded_leaves_a_version_mismatch_to_its_own_check() -> None:
    result, _ = outcome(make_facts(driver__nvml_error="Driver/library version mismatch"), "driver.not_loaded")
    assert result.status == "not_applicable"
    assert result.reason and "driver.module_userspace_mismatch" in result.reason


def test_not_loaded_skips_when_nothing_says_whether_the_module_is_loaded() -> None:
    result, findings = outcome(make_facts(driver__module_loaded=None, driver__kernel_module=None,
                                          driver__nvml_error=None, driver__cuda_init_error=None, gpus=PCI_ONLY),
                               "driver.not_loaded")
    assert result.status == "skipped"
    assert result.reason and "unknown" in result.reason
    assert findings == []


# --- driver.module_userspace_mismatch ---------------------------------------------------------

MISMATCH = {
    "driver__kernel_module": "535.104.05",
    "driver__userspace": "550.90.07",
    "driver__nvml_error": "Driver/library version mismatch",
    "driver__packages": [Package("nvidia-driver-550", "550.90.07-0ubuntu1", "dpkg"),
                         Package("libnvidia-compute-550", "550.90.07-0ubuntu1", "dpkg")],
}


def test_mismatch_ok_when_module_and_userspace_agree() -> None:
    f = only(make_facts(), "driver.module_userspace_mismatch")
    assert f.severity == "ok"
    assert f.title == "Kernel module and user-space libraries are both 550.90.07"


def test_mismatch_names_both_versions_and_holds_packages() -> None:
    f = only(make_facts(**MISMATCH), "driver.module_userspace_mismatch")
    assert f.severity == "fail"
    assert "535.104.05" in f.title and "550.90.07" in f.title
    assert f.title == "Driver/library version mismatch: kernel module 535.104.05 ≠ user-space 550.90.07"
    assert commands(f) == [
        ["reboot"],
        ["sh", "-c", "rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia"],
        ["apt-mark", "hold", "libnvidia-compute-550", "nvidia-driver-550"],
    ]
    assert f.fix is not None
    assert [s.risk for s in f.fix.steps] == ["reboot", "restart", "safe"]
    assert all(s.root for s in f.fix.steps)


def test_mismatch_from_versions_alone_without_nvml_error() -> None:
    f = only(make_facts(**{**MISMATCH, "driver__nvml_error": None}), "driver.module_userspace_mismatch")
    assert f.severity == "fail"


def test_mismatch_reported_by_nvml_with_unknown_module_version() -> None:
    f = only(make_facts(**{**MISMATCH, "driver__kernel_module": None}), "driver.module_userspace_mismatch")
    assert f.severity == "fail"
    assert f.title == "Driver/library version mismatch: user space 550.90.07, a kernel module of another version loaded"


def test_mismatch_does_not_apt_mark_rpm_packages() -> None:
    f = only(make_facts(**{**MISMATCH, "driver__packages": [Package("nvidia-driver", "550.90.07", "rpm")]}),
             "driver.module_userspace_mismatch")
    assert all(cmd[0] != "apt-mark" for cmd in commands(f))


def test_mismatch_skips_without_the_module_version() -> None:
    result, findings = outcome(make_facts(driver__kernel_module=None), "driver.module_userspace_mismatch")
    assert result.status == "skipped"
    assert result.reason and "version" in result.reason
    assert findings == []


# --- driver.module_missing_for_kernel ---------------------------------------------------------

NEXT = "5.15.0-107-generic"


def test_module_for_kernel_ok_names_the_running_kernel() -> None:
    f = only(make_facts(), "driver.module_missing_for_kernel")
    assert f.severity == "ok"
    assert "5.15.0-105-generic" in f.title


def test_module_missing_for_running_kernel_fails_and_rebuilds_with_dkms() -> None:
    f = only(make_facts(driver__module_for_running_kernel=False, driver__module_for_next_boot_kernel=False,
                        driver__module_loaded=False), "driver.module_missing_for_kernel")
    assert f.severity == "fail"
    assert f.title == "No nvidia kernel module is built for the running kernel 5.15.0-105-generic"
    assert commands(f) == [["apt-get", "install", "-y", "linux-headers-5.15.0-105-generic"],
                           ["dkms", "autoinstall"]]


def test_module_missing_for_next_boot_kernel_warns_before_the_reboot() -> None:
    f = only(make_facts(driver__next_boot_kernel=NEXT, driver__module_for_next_boot_kernel=False),
             "driver.module_missing_for_kernel")
    assert f.severity == "warn"
    assert NEXT in f.title and "after a reboot" in f.title
    assert commands(f) == [["apt-get", "install", "-y", f"linux-headers-{NEXT}"],
                           ["dkms", "autoinstall", "-k", NEXT]]


def test_module_for_kernel_not_applicable_in_container_or_without_driver() -> None:
    in_container, _ = outcome(make_facts(host__container="docker"), "driver.module_missing_for_kernel")
    no_driver, _ = outcome(make_facts(**NO_DRIVER, gpus=PCI_ONLY), "driver.module_missing_for_kernel")
    assert (in_container.status, no_driver.status) == ("not_applicable", "not_applicable")


def test_module_for_kernel_skips_when_module_trees_are_unreadable() -> None:
    result, findings = outcome(make_facts(driver__module_for_running_kernel=None,
                                          driver__module_for_next_boot_kernel=None),
                               "driver.module_missing_for_kernel")
    assert result.status == "skipped"
    assert result.reason and "/lib/modules" in result.reason
    assert findings == []


def test_module_missing_for_running_kernel_installs_the_running_kernels_headers() -> None:
    f = only(make_facts(driver__module_for_running_kernel=False, driver__module_loaded=False,
                        driver__next_boot_kernel=NEXT, driver__module_for_next_boot_kernel=True),
             "driver.module_missing_for_kernel")
    assert ["apt-get", "install", "-y", "linux-headers-5.15.0-105-generic"] in commands(f)


def test_module_loaded_but_not_installed_for_the_kernel_is_not_ok() -> None:
    f = only(make_facts(driver__module_for_running_kernel=False, driver__module_for_next_boot_kernel=False),
             "driver.module_missing_for_kernel")
    assert f.severity in ("warn", "fail")


# --- nouveau.active ---------------------------------------------------------------------------


def test_nouveau_not_loaded_is_ok() -> None:
    f = only(make_facts(), "nouveau.active")
    assert (f.severity, f.title) == ("ok", "nouveau is not loaded")


def test_nouveau_loaded_fails_and_blacklists_it() -> None:
    f = only(make_facts(driver__nouveau_loaded=True), "nouveau.active")
    assert f.severity == "fail"
    assert "nouveau driver is loaded" in f.title
    assert commands(f) == [
        ["sh", "-c", "printf 'blacklist nouveau\noptions nouveau modeset=0\n' > "
                     "/etc/modprobe.d/blacklist-nouveau.conf"],
        ["update-initramfs", "-u"],
        ["reboot"],
    ]
    assert f.fix is not None and f.fix.steps[-1].risk == "reboot"


def test_nouveau_unknown_modules_skips() -> None:
    result, _ = outcome(make_facts(driver__nouveau_loaded=None), "nouveau.active")
    assert result.status == "skipped"
    assert result.reason and "/proc/modules" in result.reason


# --- secureboot.blocks_module -----------------------------------------------------------------


@pytest.mark.parametrize(("overrides", "title"), [
    ({}, "Secure Boot is off"),
    ({"driver__secure_boot": True}, "Secure Boot is on and the nvidia module is signed and loaded"),
    ({"driver__secure_boot": True, **NO_DRIVER, "gpus": PCI_ONLY},
     "Secure Boot is on (no NVIDIA driver installed yet)"),
])
def test_secureboot_ok_cases(overrides: dict, title: str) -> None:
    f = only(make_facts(**overrides), "secureboot.blocks_module")
    assert (f.severity, f.title) == ("ok", title)


def test_secureboot_on_with_module_not_loaded_enrolls_the_mok() -> None:
    f = only(make_facts(driver__secure_boot=True, **NOT_LOADED), "secureboot.blocks_module")
    assert f.severity == "fail"
    assert "Secure Boot is on" in f.title and "not loaded" in f.title
    assert commands(f) == [["mokutil", "--import", "/var/lib/dkms/mok.pub"], ["reboot"]]


@pytest.mark.parametrize("overrides", [
    {"driver__secure_boot": None},
    {"driver__secure_boot": True, "driver__module_loaded": None, "driver__kernel_module": None, "gpus": PCI_ONLY},
])
def test_secureboot_skips_when_state_is_unknown(overrides: dict) -> None:
    result, findings = outcome(make_facts(**overrides), "secureboot.blocks_module")
    assert result.status == "skipped"
    assert result.reason and "unknown" in result.reason
    assert findings == []


def test_secureboot_not_applicable_inside_a_container() -> None:
    result, _ = outcome(make_facts(host__container="podman", driver__secure_boot=True),
                        "secureboot.blocks_module")
    assert result.status == "not_applicable"


# The example docs/checks.md shows for each check of doctor/checks/driver.py (scripts/gen_checks_doc.py reads it).
DOC_EXAMPLES = {
    "driver.missing": ("a GPU on the PCI bus, no driver", make_facts(
        driver__userspace=None, driver__kernel_module=None, driver__packages=[], driver__cuda_driver_api=None,
        driver__module_loaded=False, loader__libcuda=None,
        gpus=[replace(H100, name=None, uuid=None, source="pci", pci_bus_id="0000:3b:00.0")])),
    "driver.not_loaded": ("Debian's 535 user space, no module, no GPU on the bus", make_facts(
        driver__userspace="535.309.01", driver__kernel_module=None, driver__module_loaded=False,
        driver__nvml_error="Driver Not Loaded",
        driver__cuda_init_error="CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected",
        host__pci_nvidia_gpus=0, gpus=[])),
    "driver.module_userspace_mismatch": ("an upgrade without a reboot", make_facts(
        driver__kernel_module="535.104.05", driver__userspace="535.129.03",
        driver__nvml_error="Driver/library version mismatch",
        driver__packages=[Package("nvidia-driver-535", "535.129.03-0ubuntu1", "dpkg")])),
    "driver.module_missing_for_kernel": ("a kernel update the DKMS build missed", make_facts(
        driver__next_boot_kernel="5.15.0-107-generic", driver__module_for_next_boot_kernel=False)),
    "nouveau.active": ("nouveau bound at boot", make_facts(driver__nouveau_loaded=True)),
    "secureboot.blocks_module": ("Secure Boot refusing the unsigned module", make_facts(
        driver__secure_boot=True, driver__module_loaded=False, driver__kernel_module=None,
        gpus=[replace(H100, name=None, uuid=None, source="pci")])),
    "loader.libcuda_stub": ("the toolkit's stubs directory on LD_LIBRARY_PATH", make_facts(
        loader__libcuda=LibRef("/usr/local/cuda-12.4/lib64/stubs/libcuda.so", None, stub=True),
        env__LD_LIBRARY_PATH="/usr/local/cuda-12.4/lib64/stubs")),
    "driver.forward_compat": ("a cuda-compat libcuda on a GeForce card", make_facts(
        driver__kernel_module="535.104.05",
        loader__libcuda=LibRef("/usr/local/cuda-13.0/compat/libcuda.so.1", "580.65.06", stub=False),
        gpus=[replace(H100, name="NVIDIA GeForce RTX 4090", compute_capability="8.9")])),
}
