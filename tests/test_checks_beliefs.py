"""The knowledge layer (doctor/beliefs.py) and the defect classes it fixes, each on a real-world-shaped snapshot.

Every test here failed before the checks read beliefs: a report that listed a GPU was told it had no
driver, a RHEL driver was "not installed", a libcuda that merely was not probed was "missing", and so on.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import only, outcome
from factories import H100, make_facts, torch_env

from doctor import beliefs
from doctor.collect_env import parse
from doctor.model.facts import Cudnn, Facts, Gpu, LibRef, Package, PyPackage, PythonEnv, Toolkit
from doctor.pipeline import diagnose

DATA = Path(__file__).resolve().parent / "data" / "collect_env"
PCI_ONLY = [replace(H100, name=None, uuid=None, memory_total_mib=None, source="pci")]
RTX4090 = Gpu(index=0, name="NVIDIA GeForce RTX 4090", compute_capability="8.9", source="nvml",
              pci_bus_id="00000000:01:00.0")


def worst(report_findings: list, code: str) -> str | None:
    rank = {"ok": 0, "info": 1, "warn": 2, "fail": 3}
    sev = [f.severity for f in report_findings if f.code == code]
    return max(sev, key=rank.__getitem__) if sev else None


# --- the healthy report that said "Could not collect" ------------------------------------------------------


def test_report_listing_gpus_with_uncollected_driver_is_not_told_it_has_no_driver() -> None:
    text = (DATA / "vllm-12189-8x-a100-torch2.4.0-cu121.txt").read_text()
    healthy = "\n".join("Nvidia driver version: Could not collect" if line.startswith("Nvidia driver version")
                        else line for line in text.splitlines())
    facts = parse(healthy)
    assert facts.driver.userspace is None
    report = diagnose(facts)
    assert worst(report.findings, "driver.missing") == "ok"
    assert report.status in ("ok", "warn")
    b = beliefs.of(facts)
    assert b.userspace_installed.yes and b.module_loaded.yes and b.gpu_enumerated.yes


def test_torch_saying_found_no_driver_is_explicit_evidence_of_no_driver() -> None:
    text = (DATA / "pytorch-137846-windows11-cpu-nightly-no-gpu.txt").read_text()
    report_text = "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU " \
                  "and installed a driver from http://www.nvidia.com/Download/index.aspx\n" + text
    facts = parse(report_text.replace("Is CUDA available: False", "Is CUDA available: False"))
    b = beliefs.of(facts)
    assert b.userspace_installed.no
    assert "Found no NVIDIA driver" in b.userspace_installed.why


# --- "installed" knows every distribution ---------------------------------------------------------------


@pytest.mark.parametrize("package", ["akmod-nvidia", "xorg-x11-drv-nvidia-cuda", "kmod-nvidia-latest-dkms",
                                     "nvidia-compute-G06", "nvidia-driver-G06-kmp-default", "nvidia-open",
                                     "nvidia-utils", "libnvidia-compute-550", "nvidia-dkms-550", "nvidia-installer"])
def test_a_driver_installed_by_any_method_is_installed_and_its_unloaded_module_fails(package: str) -> None:
    facts = make_facts(driver__userspace=None, driver__kernel_module=None, driver__cuda_driver_api=None,
                       driver__module_loaded=False, driver__packages=[Package(package, "1", "rpm")],
                       loader__libcuda=None, gpus=PCI_ONLY)
    assert worst(diagnose(facts).findings, "driver.missing") == "ok"
    f = only(facts, "driver.not_loaded")
    assert f.severity == "fail"


def test_secure_boot_uses_the_same_not_loaded_belief() -> None:
    facts = make_facts(driver__userspace=None, driver__kernel_module=None, driver__cuda_driver_api=None,
                       driver__module_loaded=None, driver__nvml_error="Driver Not Loaded", driver__secure_boot=True,
                       driver__packages=[Package("akmod-nvidia", "550.90.07", "rpm")], gpus=PCI_ONLY)
    assert only(facts, "driver.not_loaded").severity == "fail"
    assert only(facts, "secureboot.blocks_module").severity == "fail"


def test_firmware_and_container_toolkit_packages_are_not_a_driver() -> None:
    facts = make_facts(driver__userspace=None, driver__kernel_module=None, driver__cuda_driver_api=None,
                       driver__module_loaded=False, loader__libcuda=None, gpus=PCI_ONLY,
                       driver__packages=[Package("firmware-nvidia-gsp", "1", "dpkg"),
                                         Package("nvidia-container-toolkit", "1.16", "dpkg")])
    assert only(facts, "driver.missing").severity == "fail"


# --- a machine without a GPU running CPU builds ----------------------------------------------------------


def test_a_cpu_machine_with_cpu_builds_is_healthy() -> None:
    facts = make_facts(driver__userspace=None, driver__kernel_module=None, driver__cuda_driver_api=None,
                       driver__module_loaded=False, driver__packages=[], driver__device_nodes=[],
                       loader__libcuda=None, loader__libcudart=None, loader__nvcc_on_path=None, gpus=[],
                       host__pci_nvidia_gpus=0, toolkits=[], cudnn=[],
                       python_envs=[PythonEnv("/venv/bin/python", "3.11.9", packages=[
                           PyPackage("torch", "2.5.1+cpu", cpu_only=True),
                           PyPackage("tensorflow-cpu", "2.16.1", cpu_only=True)])])
    report = diagnose(facts)
    assert [f.code for f in report.findings if f.severity == "fail"] == []
    assert report.status in ("ok", "warn")


# --- a verdict needs evidence ----------------------------------------------------------------------------


def test_a_snapshot_that_says_nothing_is_not_ready() -> None:
    report = diagnose(Facts())
    assert report.status == "unknown"


def test_unknown_status_exits_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from doctor.cli import main

    snap = tmp_path / "empty.json"
    snap.write_text('{"schema": "gpu-doctor.facts/v1"}')
    assert main(["check", "--facts", str(snap)]) == 4
    assert "UNKNOWN" in capsys.readouterr().out


# --- containers ------------------------------------------------------------------------------------------


def test_container_passthrough_is_not_failed_when_libcuda_was_merely_not_probed() -> None:
    facts = make_facts(host__container="docker", loader__libcuda=None,
                       sources={"driver": "probes", "toolkits": "probes"})  # the loader was not inspected
    assert only(facts, "container.no_gpu_passthrough").severity == "ok"


# --- toolkit newer than the driver, forward compatibility, stubs ------------------------------------------


def test_toolkit_newer_than_the_drivers_cuda_of_the_same_major_warns_about_ptx() -> None:
    facts = make_facts(driver__kernel_module="535.104.05", driver__userspace="535.104.05",
                       driver__cuda_driver_api="12.2")
    found = [f for f in diagnose(facts).findings if f.code == "driver.too_old_for_cuda_runtime"]
    assert [f.severity for f in found] == ["warn"]
    assert "unsupported toolchain" in found[0].detail


def test_torch_wheel_on_an_older_driver_of_the_same_major_stays_ok() -> None:
    facts = make_facts(driver__kernel_module="535.104.05", driver__userspace="535.104.05",
                       driver__cuda_driver_api="12.2", toolkits=[])
    assert only(facts, "framework.cuda_newer_than_driver").severity == "ok"


def test_forward_compat_on_geforce_fails_with_804() -> None:
    compat = LibRef("/usr/local/cuda-13.0/compat/libcuda.so.1", "580.65.06", stub=False)
    facts = make_facts(gpus=[RTX4090], driver__kernel_module="535.104.05", loader__libcuda=compat)
    f = only(facts, "driver.forward_compat")
    assert f.severity == "fail"
    assert "804" in f.detail


def test_forward_compat_on_a_branch_the_compat_package_does_not_list_fails_with_803() -> None:
    compat = LibRef("/usr/local/cuda-13.0/compat/libcuda.so.1", "580.65.06", stub=False)
    facts = make_facts(driver__kernel_module="550.90.07", loader__libcuda=compat)  # H100, R550 not listed
    f = only(facts, "driver.forward_compat")
    assert f.severity == "fail"
    assert "803" in f.detail and "R535" in f.detail


def test_forward_compat_on_a_data_center_gpu_and_listed_branch_is_ok() -> None:
    compat = LibRef("/usr/local/cuda-13.0/compat/libcuda.so.1", "580.65.06", stub=False)
    facts = make_facts(driver__kernel_module="535.104.05", loader__libcuda=compat)
    assert only(facts, "driver.forward_compat").severity == "ok"


def test_a_stub_libcuda_is_reported_on_bare_metal_too() -> None:
    stub = LibRef("/usr/local/cuda-12.4/lib64/stubs/libcuda.so", None, stub=True)
    f = only(make_facts(loader__libcuda=stub), "loader.libcuda_stub")
    assert f.severity == "fail"
    assert "CUDA_ERROR_STUB_LIBRARY" in f.detail


def test_stub_check_skips_when_the_loader_was_not_inspected() -> None:
    result, _ = outcome(make_facts(loader__libcuda=None, sources={"driver": "probes"}), "loader.libcuda_stub")
    assert result.status == "skipped"


# --- cuDNN, every framework -------------------------------------------------------------------------------


def test_torch_built_with_a_newer_cudnn_than_it_loads_fails() -> None:
    deep_env = PythonEnv("/venv/bin/python", "3.11.9", packages=[
        PyPackage("torch", "2.5.1", cuda="12.4", cudnn="9.1.0", cpu_only=False,
                  loaded_libraries=["/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2"])])
    f = only(make_facts(python_envs=[deep_env]), "cudnn.version_mismatch")
    assert f.severity == "fail"
    assert "cuDNN version incompatibility" in f.detail


def test_tensorflow_1_needs_the_exact_cudnn_minor() -> None:
    env = PythonEnv("/venv/bin/python", "3.7.9", packages=[
        PyPackage("tensorflow-gpu", "1.15.5", cuda="10.0", cudnn="7.4", cpu_only=False)])
    facts = make_facts(python_envs=[env], loader__libcudnn=LibRef("/usr/lib/x86_64-linux-gnu/libcudnn.so.7",
                                                                   "7.6.5"))
    f = only(facts, "cudnn.version_mismatch")
    assert f.severity == "fail"
    assert "7.4" in f.title and "only cuDNN 7.4" in f.detail


def test_cudnn_header_and_library_of_different_versions_warn() -> None:
    facts = make_facts(cudnn=[Cudnn("8.9.7", "/usr/include/cudnn_version.h", "header"),
                              Cudnn("9.1.0", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0", "library")],
                       python_envs=[])
    f = only(facts, "cudnn.version_mismatch")
    assert f.severity == "warn"
    assert "8.9.7" in f.title and "9.1.0" in f.title


def test_an_unknown_cudnn_list_is_unknown_not_missing() -> None:
    text = (DATA / "vllm-12189-8x-a100-torch2.4.0-cu121.txt").read_text()
    facts = parse(text)
    tf = PyPackage("tensorflow", "2.15.1", cuda="12.2", cudnn="8", cpu_only=False)
    facts = replace(facts, cudnn=[], python_envs=[replace(facts.python_envs[0], packages=[tf])],
                    sources={k: v for k, v in facts.sources.items() if k != "cudnn"})
    result, _findings = outcome(facts, "cudnn.missing")
    assert result.status == "skipped"


def test_no_cudnn_failure_without_an_nvidia_gpu() -> None:
    tf = PyPackage("tensorflow", "2.15.1", cuda="12.2", cudnn="8", cpu_only=False)
    facts = make_facts(cudnn=[], gpus=[], host__pci_nvidia_gpus=0, python_envs=[PythonEnv("/v/bin/python",
                                                                                            packages=[tf])])
    result, _ = outcome(facts, "cudnn.missing")
    assert result.status == "not_applicable"


# --- the runtime a prebuilt framework loads ---------------------------------------------------------------


def test_tensorflow_for_cuda_11_needs_libcudart_11_0_on_the_loader_path_not_nvcc() -> None:
    tf = PyPackage("tensorflow", "2.12.0", cuda="11.8", cudnn="8.6", cpu_only=False)
    facts = make_facts(python_envs=[PythonEnv("/v/bin/python", packages=[tf])],
                       toolkits=[Toolkit("/usr/local/cuda-11.8", "11.8.0", "11.8.89", "path")],
                       loader__libcudart=LibRef("/usr/local/cuda-12.4/lib64/libcudart.so.12", "12"))
    found = [f for f in diagnose(facts).findings if f.code == "toolkit.missing"]
    assert found and found[0].severity in ("warn", "fail")
    assert "libcudart.so.11.0" in found[0].title


def test_libcudart_soname_of_cuda_11_is_resolved() -> None:
    from doctor.probes.cuda import _resolve

    class FakeHost:
        def realpath(self, p: str) -> str:
            return p

    ref = _resolve(FakeHost(), [("libcudart.so.11.0", "/usr/local/cuda-11.8/lib64/libcudart.so.11.0", "ld")],
                   r"libcudart\.so\.\d+(?:\.\d+)*")
    assert ref is not None and ref.version and ref.version.startswith("11")


def test_cuda_home_pointing_at_nothing_warns() -> None:
    from doctor.model.facts import ProbeError

    facts = make_facts(env__CUDA_HOME="/usr/local/cuda-11.7",
                       errors=[ProbeError("toolkits", "CUDA_HOME=/usr/local/cuda-11.7 does not exist")])
    f = only(facts, "toolkit.cuda_home_invalid")
    assert f.severity == "warn"
    assert f.title == "CUDA_HOME=/usr/local/cuda-11.7 does not exist"


def test_cuda_home_pointing_at_a_toolkit_is_ok() -> None:
    tk = Toolkit("/opt/cuda", "12.4.1", "12.4.131", "env:CUDA_HOME")
    facts = make_facts(env__CUDA_HOME="/opt/cuda", toolkits=[tk])
    assert only(facts, "toolkit.cuda_home_invalid").severity == "ok"


@pytest.mark.parametrize("value", ["0,0", "0, 0", "GPU-11111111,GPU-11111111"])
def test_cuda_visible_devices_naming_a_gpu_twice_shows_none(value: str) -> None:
    f = only(make_facts(env__CUDA_VISIBLE_DEVICES=value), "env.cuda_visible_devices")
    assert f.severity == "fail"
    assert "twice" in f.title


# --- WSL, arch lists --------------------------------------------------------------------------------------


def test_wsl_known_linux_libcuda_is_evidence_without_a_loader_probe() -> None:
    lib = LibRef("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "550.54.14")
    facts = make_facts(host__wsl=True, loader__libcuda=lib, sources={"driver": "probes"})
    assert only(facts, "wsl.driver").severity == "fail"


def test_gpu_below_every_build_warns_when_the_arch_list_is_unknown() -> None:
    k80 = Gpu(index=0, name="Tesla K80", compute_capability="3.7", source="nvml")
    env = torch_env("2.5.1+cu999", cuda="12.4")  # a build the matrix does not know: arch list unknown
    env = replace(env, packages=[replace(env.packages[0], version="2.99.0")])
    f = only(make_facts(gpus=[k80], python_envs=[env]), "framework.arch_unsupported")
    assert f.severity == "warn"
    assert "sm_37" in f.title


def test_no_kernel_image_error_in_the_facts_is_the_failure() -> None:
    env = torch_env("2.99.0", cuda="12.4")
    pkg = replace(env.packages[0], deep=__import__("doctor.model.facts", fromlist=["DeepResult"]).DeepResult(
        is_available=True, device_count=1,
        error="CUDA error: no kernel image is available for execution on the device"))
    f = only(make_facts(python_envs=[replace(env, packages=[pkg])]), "framework.arch_unsupported")
    assert f.severity == "fail"


# --- a CUDA build that sees no GPU ------------------------------------------------------------------------


def _asked(available: bool, error: str | None = None, cuda: str = "12.4") -> list[PythonEnv]:
    from doctor.model.facts import DeepResult

    env = torch_env("2.5.1", cuda=cuda)
    pkg = replace(env.packages[0], deep=DeepResult(is_available=available, device_count=1 if available else 0,
                                                   error=error, cuda=cuda))
    return [replace(env, packages=[pkg])]


def test_cuda_build_that_sees_the_gpu_is_ok() -> None:
    assert only(make_facts(python_envs=_asked(True)), "framework.cuda_unavailable").severity == "ok"


def test_cuda_build_that_sees_no_gpu_names_the_driver_as_the_cause() -> None:
    facts = make_facts(python_envs=_asked(False, cuda="12.4"), driver__kernel_module="470.223.02",
                       driver__userspace="470.223.02", driver__cuda_driver_api="11.4")
    f = only(facts, "framework.cuda_unavailable")
    assert f.severity == "warn"
    assert "driver is too old" in f.title


def test_cuda_build_that_sees_no_gpu_without_a_visible_cause_fails() -> None:
    f = only(make_facts(python_envs=_asked(False, error="CUDA driver initialization failed")),
             "framework.cuda_unavailable")
    assert f.severity == "fail"
    assert "initialization failed" in f.detail


def test_collect_env_is_cuda_available_false_is_judged() -> None:
    # torch 1.3.1 built for CUDA 10.1 on driver 410.48: "Is CUDA available: No"
    text = (DATA / "pytorch-30071-torch1.3.1-8x-titan-xp-driver410.txt").read_text()
    found = [f for f in diagnose(parse(text)).findings if f.code == "framework.cuda_unavailable"]
    assert [f.severity for f in found] == ["warn"]
    assert "driver is too old" in found[0].title


def test_extensions_build_with_cuda_home_before_nvcc_on_path() -> None:
    # torch.utils.cpp_extension reads CUDA_HOME first: a matching nvcc on PATH does not save an 11.8 CUDA_HOME
    tk = Toolkit("/usr/local/cuda-11.8", "11.8.0", "11.8.89", "env:CUDA_HOME")
    facts = make_facts(env__CUDA_HOME="/usr/local/cuda-11.8", toolkits=[*make_facts().toolkits, tk])
    f = only(facts, "framework.nvcc_mismatch_for_extensions")
    assert f.severity == "warn"
    assert f.title.startswith("CUDA_HOME=/usr/local/cuda-11.8 is CUDA 11.8")


def test_an_older_cuda_12_on_ld_library_path_breaks_torchs_nvjitlink() -> None:
    # the classic "undefined symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12"
    env = PythonEnv("/venv/bin/python", "3.11.9", packages=[
        PyPackage("torch", "2.5.1", cuda="12.4", cpu_only=False), PyPackage("nvidia-cublas-cu12", "12.4.5.8"),
        PyPackage("nvidia-nvjitlink-cu12", "12.4.127")])
    facts = make_facts(python_envs=[env], env__LD_LIBRARY_PATH="/usr/local/cuda-12.1/lib64",
                       toolkits=[Toolkit("/usr/local/cuda-12.1", "12.1.1", "12.1.105", "path")])
    f = only(facts, "framework.libs_shadowed")
    assert f.severity == "warn"
    assert "nvJitLink" in f.detail and "/usr/local/cuda-12.1/lib64" in f.title


def test_a_pasted_version_mismatch_line_is_judged_from_a_report() -> None:
    text = (DATA / "vllm-12189-8x-a100-torch2.4.0-cu121.txt").read_text()
    pasted = "Failed to initialize NVML: Driver/library version mismatch\n" + "\n".join(
        "Nvidia driver version: Could not collect" if line.startswith("Nvidia driver version") else line
        for line in text.splitlines())
    report = diagnose(parse(pasted))
    assert worst(report.findings, "driver.module_userspace_mismatch") == "fail"


def test_a_pasted_no_kernel_image_error_is_evidence() -> None:
    text = (DATA / "vllm-12189-8x-a100-torch2.4.0-cu121.txt").read_text()
    facts = parse("RuntimeError: CUDA error: no kernel image is available for execution on the device\n" + text)
    assert any("no kernel image" in t for t in beliefs.of(facts).texts)


def test_jax_release_below_its_minimum_cudnn_fails() -> None:
    # jax 0.12.0.1's CUDA 12 plugin requires nvidia-cudnn-cu12 >= 9.10 (compat/jax.toml, from PyPI metadata)
    env = PythonEnv("/venv/bin/python", "3.12.3", packages=[
        PyPackage("jax", "0.12.0.1", cuda="12", cpu_only=False), PyPackage("jax-cuda12-plugin", "0.12.0.1"),
        PyPackage("nvidia-cudnn-cu12", "9.1.0.70")])
    f = only(make_facts(python_envs=[env]), "cudnn.version_mismatch")
    assert f.severity == "fail"
    assert "≥ 9.10" in f.title


def test_native_windows_reports_are_judged_against_windows_driver_minimums() -> None:
    facts = make_facts(host__os_id="windows", host__wsl=False)
    assert beliefs.windows_driver(facts)
    assert not beliefs.windows_driver(make_facts())


def test_a_runtime_only_toolkit_newer_than_the_driver_is_not_warned_about_ptx() -> None:
    # a runtime image (no nvcc) compiles nothing: minor-version compatibility is all it needs
    facts = make_facts(driver__kernel_module="535.104.05", driver__userspace="535.104.05",
                       driver__cuda_driver_api="12.2",
                       toolkits=[Toolkit("/usr/local/cuda-12.4", "12.4.1", None, "path")])
    found = [f for f in diagnose(facts).findings if f.code == "driver.too_old_for_cuda_runtime"]
    assert [f.severity for f in found] == ["ok"]


def test_an_nvml_function_not_found_answer_proves_the_library_is_there() -> None:
    facts = make_facts(driver__userspace=None, driver__kernel_module=None, driver__cuda_driver_api=None,
                       driver__packages=[], loader__libcuda=None, gpus=[], driver__nvml_error="Function Not Found")
    assert beliefs.of(facts).userspace_installed.yes
