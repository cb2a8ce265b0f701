"""Snapshots of the classic failures, each derived from the healthy host in factories.py, for the fix tests."""

from __future__ import annotations

from dataclasses import replace

from factories import H100, make_facts, torch_env

from doctor.model.facts import ContainerToolkit, Cudnn, Facts, LibRef, Package, PyPackage, PythonEnv

A100 = replace(H100, name="NVIDIA A100-SXM4-80GB", compute_capability="8.0", pci_device_id="0x20B210DE")
RTX5090 = replace(H100, name="NVIDIA GeForce RTX 5090", compute_capability="12.0", pci_device_id="0x2B8510DE")
# A module that is not loaded enumerates no GPU: only the PCI scan lists it.
NOT_LOADED = dict(driver__kernel_module=None, driver__module_loaded=False, driver__nvml_error="Driver Not Loaded",
                  driver__cuda_init_error="CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected",
                  gpus=[replace(H100, name=None, uuid=None, memory_total_mib=None, source="pci")])


def tf_env(version: str = "2.21.0", packages: tuple[PyPackage, ...] = ()) -> PythonEnv:
    return PythonEnv(executable="/venv/bin/python", version="3.11.9", origin="VIRTUAL_ENV",
                     packages=[PyPackage("tensorflow", version, cuda="12.5", cudnn="9", cpu_only=False), *packages])


SCENARIOS: dict[str, dict] = {
    # driver 470 under a CUDA 12.4 toolkit (A100: the GPU itself is fine with 470)
    "driver_too_old_for_toolkit": dict(
        gpus=[A100], python_envs=[], driver__kernel_module="470.223.02", driver__userspace="470.223.02",
        driver__cuda_driver_api="11.4",
        driver__packages=[Package("nvidia-driver-470", "470.223.02-0ubuntu0.22.04.1", "dpkg")]),
    "cpu_only_torch": dict(python_envs=[torch_env("2.5.1+cpu", None, cpu_only=True)]),
    "rtx5090_cu124_torch": dict(gpus=[RTX5090], driver__kernel_module="575.57.08", driver__userspace="575.57.08",
                                driver__cuda_driver_api="12.9", driver__module_flavor="open",
                                driver__packages=[Package("nvidia-driver-575-open", "575.57.08-0ubuntu1", "dpkg")]),
    "nouveau_active": dict(driver__nouveau_loaded=True, **NOT_LOADED),
    "module_userspace_mismatch": dict(driver__kernel_module="550.54.15", driver__userspace="550.90.07",
                                      driver__nvml_error="Driver/library version mismatch"),
    "tf_without_cudnn": dict(cudnn=[], python_envs=[tf_env()]),
    "driver_missing": dict(driver__kernel_module=None, driver__userspace=None, driver__module_loaded=None,
                           driver__cuda_driver_api=None, driver__packages=[], loader__libcuda=None),
    "module_missing_for_kernel": dict(driver__module_for_running_kernel=False, **NOT_LOADED),
    "next_boot_kernel_without_module": dict(driver__next_boot_kernel="5.15.0-107-generic",
                                            driver__module_for_next_boot_kernel=False),
    "not_loaded": dict(**NOT_LOADED),
    "secure_boot": dict(driver__secure_boot=True, **NOT_LOADED),
    "container_toolkit_missing": dict(host__container_toolkit=ContainerToolkit(installed=False, engines=["docker"],
                                                                              runtime_configured=False)),
    "podman_not_configured": dict(host__container_toolkit=ContainerToolkit(installed=True, version="1.16.2",
                                                                          engines=["podman"],
                                                                          runtime_configured=False)),
    # no system toolkit: a 12.4 toolkit on 535 would (rightly) ask for a driver that also JITs its PTX
    "forward_compat_cu130_on_535": dict(driver__kernel_module="535.104.05", driver__userspace="535.104.05",
                                        driver__cuda_driver_api="12.2", toolkits=[], loader__nvcc_on_path=None,
                                        python_envs=[torch_env("2.14.1", "13.0")]),
    "nvcc_13_with_torch_cu124": dict(loader__nvcc_on_path=LibRef("/usr/local/cuda-13.0/bin/nvcc", "13.0.88")),
    "system_cudnn_for_cuda11": dict(cudnn=[Cudnn("8.9.5", "/usr/include/cudnn_version.h", "header")]),
    "gpu_hardware_fault": dict(gpu__ecc_uncorrected=3),
    "cuda_visible_devices_empty": dict(env__CUDA_VISIBLE_DEVICES=""),
}


def scenario(name: str, os_id: str = "ubuntu", os_version: str = "22.04", **extra) -> Facts:
    pretty = {"ubuntu": "Ubuntu", "debian": "Debian GNU/Linux", "rhel": "Red Hat Enterprise Linux",
              "rocky": "Rocky Linux", "almalinux": "AlmaLinux"}[os_id]
    return make_facts(host__os_id=os_id, host__os_version=os_version, host__os_pretty=f"{pretty} {os_version}",
                      **{**SCENARIOS[name], **extra})


DISTROS = [("ubuntu", "20.04"), ("ubuntu", "22.04"), ("ubuntu", "24.04"), ("debian", "11"), ("debian", "12"),
           ("debian", "13"), ("rhel", "8.10"), ("rhel", "9.4"), ("rocky", "8.9"), ("rocky", "9.4"),
           ("almalinux", "8.10"), ("almalinux", "9.4")]
