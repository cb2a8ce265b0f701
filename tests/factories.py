"""Build facts for tests: a healthy single-GPU host by default, broken variants by override.

Following conda's health-check tests: derive each broken case from the healthy one, so a test
shows exactly what differs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from doctor.model.facts import (
    ENV_NAMES,
    ContainerToolkit,
    Cudnn,
    DriverInfo,
    Facts,
    Gpu,
    HostInfo,
    LibRef,
    LoaderInfo,
    Package,
    PyPackage,
    PythonEnv,
    Toolkit,
)

H100 = Gpu(
    index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-11111111-2222-3333-4444-555555555555",
    pci_bus_id="00000000:18:00.0", pci_device_id="0x233010DE", compute_capability="9.0",
    memory_total_mib=81559, memory_used_mib=512, mig_mode=False, persistence_mode=True, ecc_uncorrected=0,
    retired_pages_pending=False, remapped_rows_pending=False, temperature_c=34, power_draw_w=71.5,
    pcie_gen_current=5, pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16, throttle_reasons=[],
    source="nvml",
)


def healthy_facts() -> Facts:
    return Facts(
        collected_at="2026-11-22T00:00:00+00:00",
        host=HostInfo(os_id="ubuntu", os_version="22.04", os_pretty="Ubuntu 22.04.4 LTS", kernel="5.15.0-105-generic",
                      arch="x86_64", glibc="2.35", gcc="11.4.0", container=None, wsl=False,
                      container_toolkit=ContainerToolkit(installed=True, version="1.16.2", engines=["docker"],
                                                         runtime_configured=True),
                      pci_nvidia_gpus=1),
        driver=DriverInfo(kernel_module="550.90.07", module_loaded=True, userspace="550.90.07",
                          cuda_driver_api="12.4", module_flavor="proprietary", nouveau_loaded=False,
                          secure_boot=False, running_kernel="5.15.0-105-generic", module_for_running_kernel=True,
                          next_boot_kernel="5.15.0-105-generic", module_for_next_boot_kernel=True,
                          packages=[Package("nvidia-driver-550", "550.90.07-0ubuntu1", "dpkg")],
                          device_nodes=["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"]),
        gpus=[H100],
        toolkits=[Toolkit(root="/usr/local/cuda-12.4", version="12.4.1", nvcc_version="12.4.131", source="path")],
        loader=LoaderInfo(nvcc_on_path=LibRef("/usr/local/cuda-12.4/bin/nvcc", "12.4.131"),
                          libcudart=LibRef("/usr/local/cuda-12.4/lib64/libcudart.so.12", "12.4.127"),
                          libcuda=LibRef("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "550.90.07", stub=False)),
        cudnn=[Cudnn("9.1.0.70", "/venv/bin/python [nvidia-cudnn-cu12]", "pip")],
        python_envs=[PythonEnv(executable="/venv/bin/python", version="3.11.9", origin="VIRTUAL_ENV", packages=[
            PyPackage("nvidia-cudnn-cu12", "9.1.0.70", cuda="12", cudnn="9.1.0.70", cpu_only=None),
            PyPackage("torch", "2.5.1", cuda="12.4", cudnn="9.1.0.70", cpu_only=False),
        ])],
        env={**dict.fromkeys(ENV_NAMES), "PATH": "/usr/local/cuda-12.4/bin:/usr/bin:/bin"},
        # as a live collection records them: these probes ran, so what they did not find is absent
        sources={"driver": "probes", "toolkits": "probes", "loader": "cmd:ldconfig -p"},
    )


def make_facts(**overrides: Any) -> Facts:
    """healthy_facts() with whole sections replaced, or fields of a section via ``section__field=value``."""
    facts = healthy_facts()
    sections: dict[str, dict[str, Any]] = {}
    for key, value in overrides.items():
        if "__" in key:
            section, field = key.split("__", 1)
            sections.setdefault(section, {})[field] = value
        else:
            facts = replace(facts, **{key: value})
    for section, fields in sections.items():
        if section == "env":
            facts = replace(facts, env={**facts.env, **fields})
        elif section == "gpu":
            facts = replace(facts, gpus=[replace(facts.gpus[0], **fields), *facts.gpus[1:]])
        else:
            facts = replace(facts, **{section: replace(getattr(facts, section), **fields)})
    return facts


def torch_env(version: str = "2.5.1", cuda: str | None = "12.4", cpu_only: bool = False,
              executable: str = "/venv/bin/python") -> PythonEnv:
    return PythonEnv(executable=executable, version="3.11.9", origin="VIRTUAL_ENV",
                     packages=[PyPackage("torch", version, cuda=cuda, cpu_only=cpu_only)])


# The healthy host on a driver branch NVIDIA still supports (R580 LTSB, until 2028-06). healthy_facts()'s R550 is in
# NVIDIA's undated list of ended branches, which `check` warns about (checks/lifecycle.py): a test that needs a host
# with nothing to report uses these.
SUPPORTED_DRIVER: dict[str, Any] = dict(
    driver__kernel_module="580.95.05", driver__userspace="580.95.05", driver__cuda_driver_api="13.0",
    driver__packages=[Package("nvidia-driver-580", "580.95.05-0ubuntu1", "dpkg")],
    loader__libcuda=LibRef("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "580.95.05", stub=False))


def supported_facts(**overrides: Any) -> Facts:
    """make_facts() on a supported driver branch (R580): nothing to report."""
    return make_facts(**{**SUPPORTED_DRIVER, **overrides})


# Shapes the examples of docs/checks.md use (each check's DOC_EXAMPLES, in its tests/test_checks_*.py).
RTX5090 = replace(H100, name="NVIDIA GeForce RTX 5090", compute_capability="12.0")
TF_GPU_ENV = PythonEnv(executable="/venv/bin/python", version="3.11.9", origin="VIRTUAL_ENV",
                       packages=[PyPackage("tensorflow", "2.15.1", cuda="12.2", cudnn="8", cpu_only=False)])


def toolkits_of(version: str) -> list[Toolkit]:
    """One toolkit on PATH at /usr/local/cuda-X.Y."""
    return [Toolkit(root=f"/usr/local/cuda-{version[:4]}", version=version, nvcc_version=version, source="path")]


def venv_with(*pkgs: PyPackage) -> list[PythonEnv]:
    """One virtual environment with these packages."""
    return [PythonEnv(executable="/venv/bin/python", version="3.11.9", origin="VIRTUAL_ENV", packages=list(pkgs))]
