"""Tier 2: framework, environment, container and WSL checks (doctor/checks/environment.py), no I/O."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import commands, only, outcome
from factories import H100, make_facts, torch_env

from doctor.model.facts import (
    ContainerToolkit,
    DeepResult,
    Facts,
    LibRef,
    MigDevice,
    Package,
    PyPackage,
    PythonEnv,
)

NO_DRIVER = {
    "driver__userspace": None,
    "driver__kernel_module": None,
    "driver__cuda_driver_api": None,
    "driver__module_loaded": False,
    "driver__packages": [],
    "driver__device_nodes": [],
    "loader__libcuda": None,
}
H100_B = replace(H100, index=1, uuid="GPU-99999999-8888-7777-6666-555555555555", pci_bus_id="00000000:3B:00.0")
A100 = replace(H100, index=1, name="NVIDIA A100-SXM4-80GB", uuid="GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
               pci_bus_id="00000000:3B:00.0", pci_device_id="0x20B210DE", compute_capability="8.0")
TORCH_CPU = torch_env("2.13.0+cpu", cuda=None, cpu_only=True)
WSL_LIBCUDA = LibRef("/usr/lib/wsl/lib/libcuda.so.1", None, stub=False)


def env_with(*packages: PyPackage, error: str | None = None) -> list[PythonEnv]:
    return [PythonEnv(executable="/venv/bin/python", version="3.11.9", origin="VIRTUAL_ENV", error=error,
                      packages=list(packages))]


# --- framework.cpu_only_build -----------------------------------------------------------------


def test_cuda_torch_is_ok_and_names_its_cuda() -> None:
    f = only(make_facts(), "framework.cpu_only_build")
    assert (f.severity, f.title) == ("ok", "torch 2.5.1 is a CUDA build (CUDA 12.4)")


def test_cpu_torch_on_a_gpu_host_fails_and_reinstalls_from_a_cuda_index() -> None:
    f = only(make_facts(python_envs=[TORCH_CPU]), "framework.cpu_only_build")
    assert f.severity == "fail"
    assert f.title == "torch 2.13.0+cpu in /venv/bin/python is a CPU-only build"
    assert "an NVIDIA GPU is attached" in f.detail
    assert f.fix is not None
    # The plan's answer: torch 2.13.0 comes as cu130, cu132 and cu126 (compat/pytorch.toml); driver 550 runs CUDA
    # 12.x only (13.x needs >= 580), and the cu126 build has sm_90 kernels for the H100. The same release is kept.
    assert "`pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126`" in f.fix.summary
    assert "the driver runs it: minor-version" in f.fix.summary
    assert [s.command[3:] for s in f.fix.steps] == [
        ["uninstall", "-y", "torch"], ["install", "torch==2.13.0", "--index-url", "https://download.pytorch.org/whl/cu126"]]


def test_cpu_torch_of_a_release_the_matrix_lacks_gets_the_newest_build_that_fits() -> None:
    f = only(make_facts(python_envs=[torch_env("1.9.0+cpu", cuda=None, cpu_only=True)]), "framework.cpu_only_build")
    # 1.9.0 is not in the matrix: the plan picks the newest build the 550 driver runs with sm_90 kernels.
    assert f.fix is not None and "torch 2.14.1 built for CUDA 12.6" in f.fix.summary


def test_cpu_torch_on_a_machine_without_gpu_or_driver_is_only_info() -> None:
    facts = make_facts(**NO_DRIVER, gpus=[], host__pci_nvidia_gpus=0, python_envs=[TORCH_CPU])
    f = only(facts, "framework.cpu_only_build")
    assert f.severity == "info"
    assert "there is no NVIDIA GPU here either" in f.detail


def test_cpu_torch_with_a_driver_but_no_gpu_on_pci_still_fails() -> None:
    f = only(make_facts(gpus=[], host__pci_nvidia_gpus=0, python_envs=[TORCH_CPU]), "framework.cpu_only_build")
    assert f.severity == "fail"
    assert "the NVIDIA driver is installed" in f.detail


@pytest.mark.parametrize(("pkg", "fix"), [
    (PyPackage("tensorflow-cpu", "2.21.0", cpu_only=True), "`pip install tensorflow[and-cuda]==2.21.0`"),
    (PyPackage("tensorflow", "2.15.1", cpu_only=True), "`pip install tensorflow[and-cuda]==2.15.1`"),
    (PyPackage("jaxlib", "0.4.30", cpu_only=True), "`pip install jax[cuda12]==0.4.30`"),
])
def test_cpu_only_tensorflow_and_jax_fixes(pkg: PyPackage, fix: str) -> None:
    f = only(make_facts(python_envs=env_with(pkg)), "framework.cpu_only_build")
    assert f.severity == "fail"
    assert f.title == f"{pkg.name} {pkg.version} in /venv/bin/python is a CPU-only build"
    assert f.fix is not None and fix in f.fix.summary


def test_cpu_only_build_not_applicable_without_frameworks() -> None:
    result, _ = outcome(make_facts(python_envs=env_with(PyPackage("numpy", "2.1.0"))), "framework.cpu_only_build")
    assert result.status == "not_applicable"


def test_cpu_only_build_skips_when_the_environment_could_not_be_inspected() -> None:
    result, findings = outcome(make_facts(python_envs=env_with(error="timed out after 30 s")),
                               "framework.cpu_only_build")
    assert result.status == "skipped"
    assert result.reason and "/venv/bin/python" in result.reason and "timed out after 30 s" in result.reason
    assert findings == []


def test_cpu_only_build_unknown_for_every_framework_skips() -> None:
    facts = make_facts(python_envs=env_with(PyPackage("torch", "2.5.1", cpu_only=None)))
    result, findings = outcome(facts, "framework.cpu_only_build")
    assert result.status == "skipped"
    assert result.reason
    assert findings == []


# --- env.cuda_visible_devices -----------------------------------------------------------------


def test_cuda_visible_devices_unset_is_ok() -> None:
    f = only(make_facts(), "env.cuda_visible_devices")
    assert (f.severity, f.title) == ("ok", "CUDA_VISIBLE_DEVICES is not set: every GPU is visible")


@pytest.mark.parametrize("value", ["", " ", "-1", "NoDevFiles", "none", "void"])
def test_cuda_visible_devices_that_hides_every_gpu_fails(value: str) -> None:
    f = only(make_facts(env__CUDA_VISIBLE_DEVICES=value), "env.cuda_visible_devices")
    assert f.severity == "fail"
    assert f.title == f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU from CUDA"
    assert "hides every GPU" in f.title
    assert f.fix is not None and "`unset CUDA_VISIBLE_DEVICES`" in f.fix.summary


@pytest.mark.parametrize(("value", "title"), [
    ("0", "CUDA_VISIBLE_DEVICES=0: 1 of 2 GPU(s) visible"),
    ("1,0", "CUDA_VISIBLE_DEVICES=1,0: 2 of 2 GPU(s) visible"),
    ("GPU-99999999", "CUDA_VISIBLE_DEVICES=GPU-99999999: 1 of 2 GPU(s) visible"),
    (H100.uuid, f"CUDA_VISIBLE_DEVICES={H100.uuid}: 1 of 2 GPU(s) visible"),
])
def test_cuda_visible_devices_naming_existing_gpus_is_ok(value: str, title: str) -> None:
    f = only(make_facts(gpus=[H100, H100_B], env__CUDA_VISIBLE_DEVICES=value), "env.cuda_visible_devices")
    assert (f.severity, f.title) == ("ok", title)


def test_cuda_visible_devices_accepts_a_mig_uuid_prefix() -> None:
    mig = replace(H100, mig_mode=True, mig_devices=[
        MigDevice(index=0, uuid="MIG-12345678-90ab-cdef-1234-567890abcdef", name="1g.10gb")])
    f = only(make_facts(gpus=[mig], env__CUDA_VISIBLE_DEVICES="MIG-12345678"), "env.cuda_visible_devices")
    assert f.severity == "ok"


@pytest.mark.parametrize(("value", "bad", "severity", "sees"), [
    ("0,5", "'5'", "warn", "only 0."),
    ("0,1,2", "'2'", "warn", "only 0, 1."),
    ("5,0", "'5'", "fail", "no GPU at all."),
    ("GPU-deadbeef", "'GPU-deadbeef'", "fail", "no GPU at all."),
    ("0,GPU-deadbeef", "'GPU-deadbeef'", "warn", "only 0."),
])
def test_cuda_visible_devices_stops_at_the_first_unknown_entry(value: str, bad: str, severity: str,
                                                                 sees: str) -> None:
    f = only(make_facts(gpus=[H100, H100_B], env__CUDA_VISIBLE_DEVICES=value), "env.cuda_visible_devices")
    assert f.severity == severity
    assert f.title == f"CUDA_VISIBLE_DEVICES={value} names {bad}, which is not one of the 2 GPU(s) here"
    assert f.detail.endswith("programs see " + sees)
    assert f.fix is not None and "Use indices 0–1" in f.fix.summary


@pytest.mark.parametrize("gpus", [[], [replace(H100, source="pci")]])
def test_cuda_visible_devices_skips_when_the_gpu_list_is_unknown(gpus: list) -> None:
    result, findings = outcome(make_facts(gpus=gpus, env__CUDA_VISIBLE_DEVICES="0"), "env.cuda_visible_devices")
    assert result.status == "skipped"
    assert result.reason and "GPU list is unknown" in result.reason
    assert findings == []


# --- env.device_order -------------------------------------------------------------------------


def cuda_column(detail: str) -> dict[str, str]:
    """UUID → CUDA ordinal from the NVML↔PCI↔UUID↔CUDA table in a finding's detail."""
    rows = [line.split() for line in detail.splitlines() if line.strip().split(" ")[0].isdigit()]
    return {row[2]: row[3] for row in rows}


def test_device_order_not_applicable_with_one_gpu() -> None:
    result, _ = outcome(make_facts(), "env.device_order")
    assert result.status == "not_applicable"


def test_device_order_same_models_is_ok_and_numbers_by_bus() -> None:
    f = only(make_facts(gpus=[H100, H100_B]), "env.device_order")
    assert (f.severity, f.title) == ("ok", "nvidia-smi and CUDA number the GPUs the same way")
    assert cuda_column(f.detail) == {H100.uuid: "0", H100_B.uuid: "1"}


def test_device_order_mixed_models_warns_with_the_ordinal_table() -> None:
    f = only(make_facts(gpus=[H100, A100]), "env.device_order")
    assert f.severity == "warn"
    assert f.title == ("Mixed GPU models (NVIDIA A100-SXM4-80GB, NVIDIA H100 80GB HBM3) without "
                       "CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA's GPU 0 is not nvidia-smi's")
    header = next(line for line in f.detail.splitlines() if line.strip().startswith("NVML"))
    assert header.split()[:6] == ["NVML", "PCI", "bus", "id", "UUID", "CUDA"]
    for g in (H100, A100):
        assert g.pci_bus_id in f.detail and g.uuid in f.detail
    assert cuda_column(f.detail) == {H100.uuid: "?", A100.uuid: "?"}
    assert "CUDA_DEVICE_ORDER=FASTEST_FIRST" in f.detail
    assert f.fix is not None and f.fix.summary.startswith("export CUDA_DEVICE_ORDER=PCI_BUS_ID")


def test_device_order_mixed_models_with_pci_bus_id_is_ok() -> None:
    f = only(make_facts(gpus=[H100, A100], env__CUDA_DEVICE_ORDER="PCI_BUS_ID"), "env.device_order")
    assert f.severity == "ok"
    assert cuda_column(f.detail) == {H100.uuid: "0", A100.uuid: "1"}


def test_device_order_table_follows_cuda_visible_devices() -> None:
    facts = make_facts(gpus=[H100, A100], env__CUDA_DEVICE_ORDER="PCI_BUS_ID", env__CUDA_VISIBLE_DEVICES="1")
    f = only(facts, "env.device_order")
    assert cuda_column(f.detail) == {H100.uuid: "-", A100.uuid: "0"}
    assert "CUDA_VISIBLE_DEVICES=1" in f.detail


# --- container.no_gpu_passthrough -------------------------------------------------------------

IN_DOCKER = {"host__container": "docker", "host__container_toolkit": None}


def test_passthrough_not_applicable_outside_containers() -> None:
    result, _ = outcome(make_facts(), "container.no_gpu_passthrough")
    assert result.status == "not_applicable"


def test_passthrough_ok_with_device_node_and_driver_library() -> None:
    f = only(make_facts(**IN_DOCKER), "container.no_gpu_passthrough")
    assert f.severity == "ok"
    assert f.title == "1 GPU device node(s) and the driver library 550.90.07 are inside the container"


def test_docker_without_dev_nvidia0_fails_and_asks_for_gpus_all() -> None:
    facts = make_facts(**IN_DOCKER, driver__device_nodes=["/dev/nvidiactl"], loader__libcuda=None, gpus=[],
                       driver__cuda_driver_api=None, driver__userspace=None)
    f = only(facts, "container.no_gpu_passthrough")
    assert f.severity == "fail"
    assert f.title == ("This docker container has no GPU passed in: no /dev/nvidiaN device node and "
                       "no driver library libcuda.so.1")
    assert f.fix is not None and "docker run --gpus all" in f.fix.summary


def test_docker_with_only_the_toolkit_stub_says_so() -> None:
    stub = LibRef("/usr/local/cuda/lib64/stubs/libcuda.so", None, stub=True)
    f = only(make_facts(**IN_DOCKER, loader__libcuda=stub, gpus=[], driver__cuda_driver_api=None,
                        driver__userspace=None), "container.no_gpu_passthrough")
    assert f.severity == "fail"
    assert f.title.endswith("no driver library libcuda.so.1 (only the toolkit's stub)")


@pytest.mark.parametrize("value", ["void", "none", ""])
def test_nvidia_visible_devices_void_fails(value: str) -> None:
    f = only(make_facts(**IN_DOCKER, env__NVIDIA_VISIBLE_DEVICES=value), "container.no_gpu_passthrough")
    assert f.severity == "fail"
    assert f.title == f"NVIDIA_VISIBLE_DEVICES={value!r}: the container was told to get no GPU"
    assert f.fix is not None and "--gpus all" in f.fix.summary


@pytest.mark.parametrize(("kind", "flag"), [
    ("podman", "podman run --device nvidia.com/gpu=all"),
    ("kubernetes", "nvidia.com/gpu: 1"),
])
def test_passthrough_fix_speaks_the_engines_language(kind: str, flag: str) -> None:
    facts = make_facts(host__container=kind, host__container_toolkit=None, driver__device_nodes=[], gpus=[])
    f = only(facts, "container.no_gpu_passthrough")
    assert f.title.startswith(f"This {kind} container has no GPU passed in")
    assert f.fix is not None and flag in f.fix.summary


# --- container.toolkit_missing ----------------------------------------------------------------


def with_toolkit(**fields: object) -> Facts:
    ct = ContainerToolkit(installed=True, version="1.16.2", engines=["docker"], runtime_configured=True)
    return make_facts(host__container_toolkit=replace(ct, **fields))


def test_container_toolkit_installed_and_configured_is_ok() -> None:
    f = only(make_facts(), "container.toolkit_missing")
    assert (f.severity, f.title) == ("ok", "NVIDIA container toolkit 1.16.2 is installed for docker")


def test_docker_without_the_container_toolkit_warns() -> None:
    f = only(with_toolkit(installed=False, version=None, runtime_configured=False), "container.toolkit_missing")
    assert f.severity == "warn"
    assert f.title == "docker is installed but the NVIDIA container toolkit is not: containers cannot get the GPU"
    assert "could not select device driver" in f.detail
    assert commands(f)[-2:] == [["nvidia-ctk", "runtime", "configure", "--runtime=docker"],
                                ["systemctl", "restart", "docker"]]


def test_container_toolkit_installed_but_not_configured_warns() -> None:
    f = only(with_toolkit(runtime_configured=False), "container.toolkit_missing")
    assert f.severity == "warn"
    assert f.title == "The NVIDIA container toolkit 1.16.2 is installed but docker is not configured to use it"
    assert commands(f) == [["nvidia-ctk", "runtime", "configure", "--runtime=docker"],
                           ["systemctl", "restart", "docker"]]
    assert f.fix is not None and f.fix.steps[1].risk == "restart"


@pytest.mark.parametrize(("facts", "why"), [
    (with_toolkit(engines=[]), "no container engine"),
    (make_facts(host__container="docker", host__container_toolkit=None), "inside a container"),
    (replace(with_toolkit(installed=False), gpus=[], host=replace(with_toolkit().host, pci_nvidia_gpus=0)),
     "no NVIDIA GPU"),
])
def test_container_toolkit_not_applicable(facts: Facts, why: str) -> None:
    result, findings = outcome(facts, "container.toolkit_missing")
    assert result.status == "not_applicable"
    assert result.reason and why in result.reason
    assert findings == []


def test_docker_host_with_containerd_configures_docker() -> None:
    f = only(with_toolkit(engines=["containerd", "docker"], runtime_configured=False), "container.toolkit_missing")
    assert ["nvidia-ctk", "runtime", "configure", "--runtime=docker"] in commands(f)
    assert ["systemctl", "restart", "docker"] in commands(f)


@pytest.mark.parametrize("installed", [False, True])
def test_podman_host_fix_generates_a_cdi_spec(installed: bool) -> None:
    f = only(with_toolkit(engines=["podman"], installed=installed, runtime_configured=False),
             "container.toolkit_missing")
    assert ["nvidia-ctk", "cdi", "generate", "--output=/etc/cdi/nvidia.yaml"] in commands(f)
    assert not any("docker" in " ".join(cmd) for cmd in commands(f))


def test_missing_container_toolkit_is_installed_before_nvidia_ctk_runs() -> None:
    f = only(with_toolkit(installed=False, version=None, runtime_configured=False), "container.toolkit_missing")
    cmds = [" ".join(c) for c in commands(f)]
    install = next((i for i, c in enumerate(cmds) if "install" in c and "nvidia-container-toolkit" in c), None)
    first_ctk = next((i for i, c in enumerate(cmds) if c.startswith("nvidia-ctk")), len(cmds))
    assert install is not None, cmds
    assert install < first_ctk


def test_unknown_container_toolkit_on_a_host_skips() -> None:
    result, _ = outcome(make_facts(host__container_toolkit=None), "container.toolkit_missing")
    assert result.status == "skipped"
    assert result.reason and "inside a container" not in result.reason


# --- wsl.driver -------------------------------------------------------------------------------

WSL = {"host__wsl": True, "driver__packages": [], "loader__libcuda": WSL_LIBCUDA}


def test_wsl_driver_not_applicable_outside_wsl() -> None:
    result, _ = outcome(make_facts(), "wsl.driver")
    assert result.status == "not_applicable"


def test_wsl_with_libcuda_from_usr_lib_wsl_is_ok() -> None:
    f = only(make_facts(**WSL), "wsl.driver")
    assert (f.severity, f.title) == ("ok", "WSL2 uses the Windows driver's libcuda from /usr/lib/wsl/lib")


def test_linux_driver_inside_wsl_fails_and_names_the_packages_to_remove() -> None:
    facts = make_facts(**{**WSL, "driver__packages": [Package("nvidia-driver-550", "550.90.07", "dpkg"),
                                                      Package("libnvidia-compute-550", "550.90.07", "dpkg")],
                          "loader__libcuda": LibRef("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "550.90.07")})
    f = only(facts, "wsl.driver")
    assert f.severity == "fail"
    assert f.title == ("A Linux NVIDIA driver inside WSL shadows the Windows driver's libcuda "
                       "(/usr/lib/x86_64-linux-gnu/libcuda.so.1)")
    assert f.fix is not None
    assert "(nvidia-driver-550, libnvidia-compute-550)" in f.fix.summary


def test_linux_driver_package_inside_wsl_fails_even_if_libcuda_is_still_windows() -> None:
    facts = make_facts(**{**WSL, "driver__packages": [Package("cuda-drivers", "550.90.07-1", "dpkg")]})
    assert only(facts, "wsl.driver").severity == "fail"


def test_cuda_toolkit_package_inside_wsl_is_fine() -> None:
    facts = make_facts(**{**WSL, "driver__packages": [Package("cuda-toolkit-12-4", "12.4.1-1", "dpkg")]})
    assert only(facts, "wsl.driver").severity == "ok"


def test_wsl_without_libcuda_fails_and_points_to_windows() -> None:
    f = only(make_facts(**{**WSL, "loader__libcuda": None}), "wsl.driver")
    assert f.severity == "fail"
    assert f.title.startswith("WSL2 without /usr/lib/wsl/lib/libcuda.so")
    assert f.fix is not None and "`wsl --update`" in f.fix.summary


# The example docs/checks.md shows for each check of doctor/checks/environment.py (scripts/gen_checks_doc.py reads it).
DOC_EXAMPLES = {
    "framework.cpu_only_build": ("torch from the CPU index on a GPU host", make_facts(
        python_envs=[torch_env("2.13.0+cpu", cuda=None, cpu_only=True)])),
    "env.cuda_visible_devices": ("an empty CUDA_VISIBLE_DEVICES", make_facts(env__CUDA_VISIBLE_DEVICES="")),
    "env.device_order": ("an H100 and an A100 in one box", make_facts(gpus=[
        H100, replace(H100, index=1, name="NVIDIA A100-SXM4-80GB", uuid="GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
                      pci_bus_id="00000000:3B:00.0")])),
    "container.toolkit_missing": ("Docker on a GPU host without the toolkit", make_facts(
        host__container_toolkit=ContainerToolkit(installed=False, engines=["docker"], runtime_configured=False))),
    "container.no_gpu_passthrough": ("docker run without --gpus", make_facts(
        host__container="docker", driver__device_nodes=[], loader__libcuda=None, gpus=[],
        driver__cuda_driver_api=None)),
    "framework.cuda_unavailable": ("--deep: torch cu124 on driver 470 answers is_available() False", make_facts(
        driver__kernel_module="470.223.02", driver__userspace="470.223.02", driver__cuda_driver_api="11.4",
        python_envs=[replace(torch_env("2.5.1", cuda="12.4"), packages=[replace(
            torch_env("2.5.1", cuda="12.4").packages[0],
            deep=DeepResult(is_available=False, device_count=0, cuda="12.4"))])])),
    "wsl.driver": ("a Linux driver installed inside WSL2", make_facts(
        host__wsl=True, loader__libcuda=LibRef("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "550.54.14"))),
}
