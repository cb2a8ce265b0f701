#!/usr/bin/env python3
"""Regenerate the example snapshots of `gpu-doctor demo` (doctor/examples/*.json).

Each example is a real-world broken (or healthy) host written as facts v1 with the dataclasses of
doctor.model.facts. GPU data comes from the real `nvidia-smi -q -x` outputs in tests/data/nvidia-smi-xml/
through doctor.parsers where one fits; what no fixture has (an RTX 5090, an H100 node) is written
from the figures NVIDIA publishes. Titles and one-line descriptions live in doctor/examples/__init__.py.

Usage: python scripts/gen_examples.py [--check]   (--check: exit 1 when a shipped file is stale)
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from doctor import parsers  # noqa: E402
from doctor.model.facts import (  # noqa: E402
    ENV_NAMES,
    ContainerToolkit,
    Cudnn,
    DriverInfo,
    Facts,
    Gpu,
    GpuProcess,
    HostInfo,
    LibRef,
    LoaderInfo,
    Package,
    PyPackage,
    PythonEnv,
    Toolkit,
    facts_schema,
    validate,
)
from doctor.probes.driver import _gpu  # noqa: E402  (the probe's own dict -> Gpu conversion)

DATA = REPO / "tests" / "data"
OUT = REPO / "doctor" / "examples"
WHEN = "2026-11-22T09:00:00+00:00"
VENV = "/home/ml/venv/bin/python"


def smi_gpus(fixture: str) -> list[Gpu]:
    parsed = parsers.parse_nvidia_smi_xml((DATA / "nvidia-smi-xml" / fixture).read_text())
    return [_gpu(g) for g in parsed["gpus"]]


def ubuntu(version: str, pretty: str, kernel: str, glibc: str, gcc: str, **kw: object) -> HostInfo:
    return HostInfo(os_id="ubuntu", os_version=version, os_pretty=pretty, kernel=kernel, arch="x86_64",
                    glibc=glibc, gcc=gcc, container=None, wsl=False, **kw)  # type: ignore[arg-type]


def driver_pkgs(branch: str, version: str) -> list[Package]:
    return [Package(f"nvidia-driver-{branch}", f"{version}-0ubuntu1", "dpkg"),
            Package(f"libnvidia-compute-{branch}", f"{version}-0ubuntu1", "dpkg")]


def torch_env(version: str, cuda: str | None, cudnn: str | None = None,
              extra: list[PyPackage] | None = None) -> PythonEnv:
    # No arch_list: the static probe reads torch/version.py only; the checks take the wheel's arch list
    # from the matrix (a --deep snapshot would record torch.cuda.get_arch_list()).
    pkgs = [*(extra or []), PyPackage("torch", version, cuda=cuda, cudnn=cudnn, cpu_only=cuda is None)]
    return PythonEnv(executable=VENV, version="3.11.9", origin="VIRTUAL_ENV", packages=pkgs)


CUDNN_PIP = PyPackage("nvidia-cudnn-cu12", "9.1.0.70", cuda="12", cudnn="9.1.0.70")
# As a live collection records them: every variable gpu-doctor reads, None when unset.
ENV_BASE = {**dict.fromkeys(ENV_NAMES), "PATH": "/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV": "/home/ml/venv"}
NVML_SOURCES = {"driver.userspace": "nvml:nvmlSystemGetDriverVersion",
                "driver.kernel_module": "file:/proc/driver/nvidia/version",
                "driver.cuda_driver_api": "libcuda:cuDriverGetVersion", "gpus": "nvml"}


def live_sources(**sources: str) -> dict[str, str]:
    """The sources a live collection records: these probes ran, so what they did not find is absent."""
    return {"driver": "probes", "toolkits": "probes", "loader": "cmd:ldconfig -p", **sources}


def r470_geforce() -> Facts:
    """A desktop GeForce on the R470 branch (CUDA 11.4) with a `pip install torch` (cu124) on it."""
    # The GPU is the RTX 3080 of the fixture; the driver and the processes are those of the real
    # plain `nvidia-smi` of a GeForce on 470.63.01 (tests/data/nvidia-smi-text/geforce-470.63.01-cuda-11.4.txt).
    gpu = replace(smi_gpus("geforce-rtx-3080-595.58.03.xml")[0], compute_capability="8.6", memory_used_mib=393,
                  source="nvml", processes=[GpuProcess(3279, "/usr/lib/xorg/Xorg", 35),
                                            GpuProcess(8219, "/usr/bin/gnome-shell", 41),
                                            GpuProcess(10010, "/usr/lib/firefox/firefox", 140)])
    return Facts(
        collected_at=WHEN,
        host=ubuntu("20.04", "Ubuntu 20.04.6 LTS", "5.15.0-125-generic", "2.31", "9.4.0", pci_nvidia_gpus=1),
        driver=DriverInfo(kernel_module="470.63.01", module_loaded=True, userspace="470.63.01",
                          cuda_driver_api="11.4", module_flavor="proprietary", nouveau_loaded=False,
                          secure_boot=False, running_kernel="5.15.0-125-generic", module_for_running_kernel=True,
                          next_boot_kernel="5.15.0-125-generic", module_for_next_boot_kernel=True,
                          packages=driver_pkgs("470", "470.63.01"),
                          device_nodes=["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-modeset", "/dev/nvidia-uvm"]),
        gpus=[gpu],
        loader=LoaderInfo(libcuda=LibRef("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "470.63.01", stub=False)),
        cudnn=[Cudnn("9.1.0.70", f"{VENV} [nvidia-cudnn-cu12]", "pip")],
        python_envs=[torch_env("2.5.1", "12.4", "9.1.0.70", [CUDNN_PIP])],
        env=dict(ENV_BASE),
        sources=live_sources(**NVML_SOURCES),
    )


def rtx5090_cu124() -> Facts:
    """An RTX 5090 (Blackwell, sm_120) on R570, with `pip install torch==2.5.1` (cu124: kernels up to sm_90)."""
    # No fixture has a Blackwell card: name, memory and PCI id are those NVML reports for an RTX 5090
    # (device 0x2B85, 32607 MiB). On R550 the card would not even be initialised (Blackwell needs
    # >= 570) and NVML would list no GPU; R570 is what an RTX 50 owner ends up with.
    gpu = Gpu(index=0, name="NVIDIA GeForce RTX 5090", uuid="GPU-7c1f3a52-90de-4b1e-8d2c-5a6b9e0f4c31",
              pci_bus_id="00000000:01:00.0", pci_device_id="0x2B8510DE", compute_capability="12.0",
              memory_total_mib=32607, memory_used_mib=461, mig_mode=None, persistence_mode=False,
              ecc_uncorrected=None, temperature_c=38, power_draw_w=29.6, pcie_gen_current=5, pcie_gen_max=5,
              pcie_width_current=16, pcie_width_max=16, throttle_reasons=[],
              processes=[GpuProcess(2113, "/usr/lib/xorg/Xorg", 206), GpuProcess(2480, "/usr/bin/gnome-shell", 98)],
              source="nvml")
    return Facts(
        collected_at=WHEN,
        host=ubuntu("24.04", "Ubuntu 24.04.2 LTS", "6.8.0-57-generic", "2.39", "13.3.0", pci_nvidia_gpus=1),
        driver=DriverInfo(kernel_module="570.133.07", module_loaded=True, userspace="570.133.07",
                          cuda_driver_api="12.8", module_flavor="open", nouveau_loaded=False, secure_boot=False,
                          running_kernel="6.8.0-57-generic", module_for_running_kernel=True,
                          next_boot_kernel="6.8.0-57-generic", module_for_next_boot_kernel=True,
                          packages=[Package("nvidia-driver-570-open", "570.133.07-0ubuntu0.24.04.1", "dpkg")],
                          device_nodes=["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-modeset", "/dev/nvidia-uvm"]),
        gpus=[gpu],
        loader=LoaderInfo(libcuda=LibRef("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "570.133.07", stub=False)),
        cudnn=[Cudnn("9.1.0.70", f"{VENV} [nvidia-cudnn-cu12]", "pip")],
        python_envs=[torch_env("2.5.1", "12.4", "9.1.0.70", [CUDNN_PIP])],
        env=dict(ENV_BASE),
        sources=live_sources(**NVML_SOURCES),
    )


def mismatch_after_upgrade() -> Facts:
    """unattended-upgrades replaced the 535 user space; the running kernel still has the old module."""
    proc = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    module = parsers.parse_proc_driver_version(proc)["version"]
    a100 = smi_gpus("a100-sxm4-80gb-mig-535.54.03.xml")[0]
    # NVML refuses to answer, so the probe only knows the card from the PCI bus.
    gpu = Gpu(pci_bus_id=a100.pci_bus_id, pci_device_id="0x20B210DE", source="pci")
    return Facts(
        collected_at=WHEN,
        host=ubuntu("22.04", "Ubuntu 22.04.5 LTS", "5.15.0-122-generic", "2.35", "11.4.0",
                    container_toolkit=ContainerToolkit(installed=True, version="1.16.2", engines=["docker"],
                                                       runtime_configured=True), pci_nvidia_gpus=1),
        driver=DriverInfo(kernel_module=module, module_loaded=True, userspace="535.129.03",
                          cuda_driver_api="12.2", cuda_init_error="CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803): system "
                          "has unsupported display driver / cuda driver combination",
                          nvml_error="Driver/library version mismatch", module_flavor="proprietary",
                          nouveau_loaded=False, secure_boot=False, running_kernel="5.15.0-122-generic",
                          module_for_running_kernel=True, next_boot_kernel="5.15.0-122-generic",
                          module_for_next_boot_kernel=True, packages=driver_pkgs("535", "535.129.03"),
                          device_nodes=["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"]),
        gpus=[gpu],
        toolkits=[Toolkit(root="/usr/local/cuda-12.2", version="12.2.2", nvcc_version="12.2.140", source="path")],
        loader=LoaderInfo(nvcc_on_path=LibRef("/usr/local/cuda-12.2/bin/nvcc", "12.2.140"),
                          libcudart=LibRef("/usr/local/cuda-12.2/lib64/libcudart.so.12", "12.2.140"),
                          libcuda=LibRef("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "535.129.03", stub=False)),
        env={**ENV_BASE, "PATH": "/usr/local/cuda-12.2/bin:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV": None},
        sources=live_sources(**{"driver.userspace": "file:/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                                "driver.kernel_module": "file:/proc/driver/nvidia/version",
                                "gpus": "file:/sys/bus/pci/devices"}),
    )


def healthy_h100_node() -> Facts:
    """An 8×H100 SXM training node where everything fits: R550, CUDA 12.4, torch 2.5.1+cu124."""
    gpus = [Gpu(index=i, name="NVIDIA H100 80GB HBM3", uuid=f"GPU-5e1c0a7{i}-3b2d-4f7e-9a61-0c4d8e2f1b{i:02d}",
                pci_bus_id=f"00000000:{bus}:00.0", pci_device_id="0x233010DE", compute_capability="9.0",
                memory_total_mib=81559, memory_used_mib=545 + 3 * i, mig_mode=False, persistence_mode=True,
                ecc_uncorrected=0, retired_pages_pending=False, remapped_rows_pending=False,
                temperature_c=31 + i % 4, power_draw_w=round(68.9 + 1.7 * i, 1), pcie_gen_current=5,
                pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16, throttle_reasons=[], source="nvml")
            for i, bus in enumerate(("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"))]
    return Facts(
        collected_at=WHEN,
        host=ubuntu("22.04", "Ubuntu 22.04.5 LTS", "5.15.0-122-generic", "2.35", "11.4.0",
                    container_toolkit=ContainerToolkit(installed=True, version="1.16.2", engines=["docker"],
                                                       runtime_configured=True), pci_nvidia_gpus=8),
        driver=DriverInfo(kernel_module="550.90.07", module_loaded=True, userspace="550.90.07",
                          cuda_driver_api="12.4", module_flavor="proprietary", nouveau_loaded=False,
                          secure_boot=False, running_kernel="5.15.0-122-generic", module_for_running_kernel=True,
                          next_boot_kernel="5.15.0-122-generic", module_for_next_boot_kernel=True,
                          packages=[*driver_pkgs("550-server", "550.90.07"),
                                    Package("nvidia-fabricmanager-550", "550.90.07-1", "dpkg")],
                          device_nodes=[*(f"/dev/nvidia{i}" for i in range(8)), "/dev/nvidiactl",
                                        "/dev/nvidia-uvm"]),
        gpus=gpus,
        toolkits=[Toolkit(root="/usr/local/cuda-12.4", version="12.4.1", nvcc_version="12.4.131", source="path")],
        loader=LoaderInfo(nvcc_on_path=LibRef("/usr/local/cuda-12.4/bin/nvcc", "12.4.131"),
                          libcudart=LibRef("/usr/local/cuda-12.4/lib64/libcudart.so.12", "12.4.127"),
                          libcuda=LibRef("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "550.90.07", stub=False)),
        cudnn=[Cudnn("9.1.0.70", f"{VENV} [nvidia-cudnn-cu12]", "pip")],
        python_envs=[torch_env("2.5.1", "12.4", "9.1.0.70", [CUDNN_PIP])],
        env={**ENV_BASE, "PATH": "/usr/local/cuda-12.4/bin:/usr/local/bin:/usr/bin:/bin",
             "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
        sources=live_sources(**NVML_SOURCES),
    )


def shared_p100_memory_held() -> Facts:
    """Two Tesla P100s on a shared server whose memory another container's job holds."""
    # Straight from the fixture: both cards report 11400 and 11800 MiB used with no process listed,
    # which is what a user sees when the processes live in another PID namespace.
    node = healthy_h100_node()
    gpus = [replace(g, compute_capability="6.0", source="nvml") for g in smi_gpus("tesla-p100-x2-375.66.xml")]
    return replace(
        node, gpus=gpus, host=replace(node.host, pci_nvidia_gpus=2),
        driver=replace(node.driver, kernel_module="535.183.01", userspace="535.183.01", cuda_driver_api="12.2",
                       packages=driver_pkgs("535-server", "535.183.01"),
                       device_nodes=["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"]),
        toolkits=[Toolkit(root="/usr/local/cuda-12.2", version="12.2.2", nvcc_version="12.2.140", source="path")],
        loader=LoaderInfo(nvcc_on_path=LibRef("/usr/local/cuda-12.2/bin/nvcc", "12.2.140"),
                          libcudart=LibRef("/usr/local/cuda-12.2/lib64/libcudart.so.12", "12.2.140"),
                          libcuda=LibRef("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "535.183.01", stub=False)),
        python_envs=[torch_env("2.3.1", "12.1", "8.9.2.26", [PyPackage("nvidia-cudnn-cu12", "8.9.2.26", cuda="12",
                                                                        cudnn="8.9.2.26")])],
        cudnn=[Cudnn("8.9.2.26", f"{VENV} [nvidia-cudnn-cu12]", "pip")],
        env={**node.env, "PATH": "/usr/local/cuda-12.2/bin:/usr/local/bin:/usr/bin:/bin"},
    )


def debian12_no_gpu() -> Facts:
    """gpu-doctor's own development machine: a Debian 12 VM (built from a Docker image, so it has /.dockerenv,
    but its own kernel and init: not a container) with NVIDIA's 535 user space, no GPU."""
    debs = ["firmware-nvidia-gsp", "libcuda1", "libnvidia-ml1", "libnvidia-ptxjitcompiler1", "nvidia-kernel-dkms",
            "nvidia-smi"]
    return Facts(
        collected_at=WHEN,
        host=HostInfo(os_id="debian", os_version="12", os_pretty="Debian GNU/Linux 12 (bookworm)",
                      kernel="6.1.0-27-amd64", arch="x86_64", glibc="2.36", gcc="12.2.0", container=None,
                      wsl=False, pci_nvidia_gpus=0),
        driver=DriverInfo(userspace="535.309.01", cuda_driver_api="12.2",
                          cuda_init_error="CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected",
                          nvml_error="Driver Not Loaded", secure_boot=False, running_kernel="6.1.0-27-amd64",
                          packages=[Package(n, "535.309.01-0+deb12u1", "dpkg") for n in debs]),
        toolkits=[Toolkit(root="/usr/local/cuda-13.0", version="13.0", nvcc_version="13.0.88", source="path")],
        loader=LoaderInfo(nvcc_on_path=LibRef("/usr/local/bin/nvcc", "13.0.88"),
                          libcudart=LibRef("/usr/local/cuda-13.0/lib/libcudart.so.13", "13", stub=False),
                          libcuda=LibRef("/lib/x86_64-linux-gnu/libcuda.so.1", "535.309.01", stub=False)),
        python_envs=[PythonEnv(executable="/usr/bin/python3", version="3.11.2", origin="PATH")],
        env={**ENV_BASE, "VIRTUAL_ENV": None},
        sources=live_sources(**{"driver.userspace": "file:/lib/x86_64-linux-gnu/libcuda.so.1",
                                "driver.cuda_driver_api": "libcuda:cuDriverGetVersion",
                                "driver.cuda_init_error": "libcuda:cuInit",
                                "host.pci_nvidia_gpus": "file:/sys/bus/pci/devices"}),
    )


BUILDERS = {
    "r470-geforce-cu124-torch": r470_geforce,
    "rtx5090-cu124-torch": rtx5090_cu124,
    "module-userspace-mismatch": mismatch_after_upgrade,
    "shared-p100-memory-held": shared_p100_memory_held,
    "healthy-8x-h100": healthy_h100_node,
    "debian12-535-no-gpu": debian12_no_gpu,
}


def main() -> int:
    check = "--check" in sys.argv
    stale = []
    for name, build in BUILDERS.items():
        facts = build()
        problems = validate(facts.to_dict(), facts_schema())
        if problems:
            print(f"{name}: {problems[0]}", file=sys.stderr)
            return 1
        path = OUT / f"{name}.json"
        text = facts.to_json()
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(REPO)}")
    if stale:
        print(f"stale: {', '.join(stale)} (run scripts/gen_examples.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
