"""Tier 3: whole-machine scenarios through the CLI with --root, one per real-world case.

Each scenario is a fake sysroot (the files the probes read, recorded command outputs as fake
binaries on the sysroot's PATH) and the findings a user must see.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from sysroot import LIBDIR, Cmd, Link, build, data, dpkg_status, driver_libs, pci_gpu, pci_other

from doctor.cli import main

BASE = {
    "/etc/os-release": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n',
    "/proc/sys/kernel/osrelease": "6.1.0-27-amd64\n",
    "/proc/modules": "ext4 1003520 1 - Live 0x0000000000000000\n",
    "/proc/version": "Linux version 6.1.0-27-amd64 (debian-kernel@lists.debian.org)\n",
    "/sys/firmware/acpi/.keep": "",
    **pci_other(),
}
PROC_535 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
LOADED = "nvidia_uvm 1540096 0 - Live 0x0\nnvidia 56717312 1 nvidia_uvm, Live 0x0\n"
SMI_A100 = data("nvidia-smi-xml/a100-sxm4-80gb-mig-535.54.03.xml")

SCENARIOS: dict[str, tuple[dict, dict[str, str], list[str]]] = {
    # name: (files, {code: severity expected}, [substrings the text report must contain])
    "no-gpu-no-driver": (
        {},
        {"driver.missing": "fail"},
        ["No NVIDIA GPU is on this machine's PCI bus"],
    ),
    "gpu-without-driver": (
        pci_gpu(),
        {"driver.missing": "fail"},
        ["An NVIDIA GPU is present at 0000:3b:00.0 (device 0x233010DE) but no NVIDIA driver is installed"],
    ),
    "nouveau-holds-gpu": (
        {**pci_gpu(), "/proc/modules": "nouveau 2306048 1 - Live 0x0\n"},
        {"driver.missing": "fail", "nouveau.active": "fail"},
        ["The nouveau driver is loaded", "update-initramfs -u"],
    ),
    "userspace-without-module-no-pci-gpu": (
        {**driver_libs("535.309.01"),
         "/var/lib/dpkg/status": dpkg_status(("libcuda1", "535.309.01-0+deb12u1"),
                                             ("nvidia-smi", "535.309.01-0+deb12u1"))},
        {"driver.not_loaded": "fail"},
        ["NVIDIA driver 535.309.01 is installed but its kernel module is not loaded",
         "there is no NVIDIA GPU on the PCI bus"],
    ),
    "mismatch-after-upgrade": (
        {**pci_gpu(), **driver_libs("535.129.03"),
         "/proc/driver/nvidia/version": PROC_535, "/proc/modules": LOADED,
         "/var/lib/dpkg/status": dpkg_status(("nvidia-driver-535", "535.129.03-0ubuntu1"),
                                             ("libnvidia-compute-535", "535.129.03-0ubuntu1")),
         "/usr/bin/nvidia-smi": Cmd("Failed to initialize NVML: Driver/library version mismatch\n"
                                    "NVML library version: 535.129\n", 18)},
        {"driver.module_userspace_mismatch": "fail"},
        ["kernel module 535.104.05 ≠ user-space 535.129.03", "apt-mark hold libnvidia-compute-535 nvidia-driver-535"],
    ),
    "kernel-update-without-dkms-build": (
        {**pci_gpu(), **driver_libs("535.104.05"), "/proc/driver/nvidia/version": PROC_535, "/proc/modules": LOADED,
         "/boot/vmlinuz-6.1.0-27-amd64": "", "/boot/vmlinuz-6.1.0-28-amd64": "",
         "/lib/modules/6.1.0-27-amd64/updates/dkms/nvidia.ko.xz": "",
         "/lib/modules/6.1.0-28-amd64/kernel/fs/ext4/ext4.ko.xz": "",
         "/usr/bin/nvidia-smi": Cmd(SMI_A100)},
        {"driver.module_missing_for_kernel": "warn", "driver.not_loaded": "ok",
         "driver.module_userspace_mismatch": "ok"},
        ["The next boot's kernel 6.1.0-28-amd64 has no nvidia module"],
    ),
    "module-not-built-for-running-kernel": (
        {**pci_gpu(), **driver_libs("550.90.07"),
         "/lib/modules/6.1.0-27-amd64/kernel/fs/ext4/ext4.ko.xz": "",
         "/var/lib/dpkg/status": dpkg_status(("nvidia-driver", "550.90.07-1"))},
        {"driver.module_missing_for_kernel": "fail", "driver.not_loaded": "fail"},
        ["No nvidia kernel module is built for the running kernel 6.1.0-27-amd64", "dkms autoinstall"],
    ),
    "secure-boot-refuses-module": (
        {**pci_gpu(), **driver_libs("550.90.07"),
         "/lib/modules/6.1.0-27-amd64/updates/dkms/nvidia.ko": "",
         "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c": b"\x06\x00\x00\x00\x01"},
        {"secureboot.blocks_module": "fail", "driver.not_loaded": "fail"},
        ["Secure Boot is on and the nvidia module is not loaded", "mokutil --import /var/lib/dkms/mok.pub"],
    ),
    "healthy-a100-host": (
        {**pci_gpu(), **driver_libs("535.54.03"),
         "/proc/driver/nvidia/version": PROC_535.replace("535.104.05", "535.54.03"), "/proc/modules": LOADED,
         "/lib/modules/6.1.0-27-amd64/updates/dkms/nvidia.ko": "",
         "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c": b"\x06\x00\x00\x00\x00",
         "/usr/bin/nvidia-smi": Cmd(SMI_A100),
         "/usr/local/cuda-12.2/version.json": '{"cuda": {"name": "CUDA SDK", "version": "12.2.2"}}',
         "/usr/local/cuda-12.2/include/cudnn_version.h": data("cudnn/cudnn_version-9.24.0-excerpt.h"),
         "/usr/local/cuda": Link("cuda-12.2"),
         f"{LIBDIR}/libcudart.so.12.2.140": b"", f"{LIBDIR}/libcudart.so.12": Link("libcudart.so.12.2.140")},
        {"driver.missing": "ok", "driver.not_loaded": "ok", "driver.module_userspace_mismatch": "ok",
         "nouveau.active": "ok", "secureboot.blocks_module": "ok", "toolkit.missing": "ok", "cudnn.missing": "ok"},
        ["NVIDIA driver 535.54.03 is installed", "CUDA toolkit found: 12.2.2 at /usr/local/cuda-12.2",
         "cuDNN found: 9.24.0"],
    ),
    "docker-container-without-gpus": (
        {"/.dockerenv": ""},
        {"container.no_gpu_passthrough": "fail"},
        ["This docker container has no GPU passed in", "docker run --gpus all"],
    ),
    "wsl-linux-driver-shadows-windows-libcuda": (
        {"/proc/version": "Linux version 5.15.153.1-microsoft-standard-WSL2\n",
         "/usr/lib/wsl/lib/libcuda.so.1": b"", **driver_libs("550.54.14"),
         "/var/lib/dpkg/status": dpkg_status(("nvidia-driver-550", "550.54.14-0ubuntu1"))},
        {"wsl.driver": "fail"},
        ["A Linux NVIDIA driver inside WSL shadows the Windows driver's libcuda"],
    ),
    "xid-79-in-kernel-log": (
        {**pci_gpu(), **driver_libs("535.104.05"), "/proc/driver/nvidia/version": PROC_535, "/proc/modules": LOADED,
         "/var/log/kern.log": data("xid/nvsentinel-155-xid79-and-fallen-off-bus.txt")},
        {"gpu.hardware_fault": "fail"},
        ["Xid 79"],
    ),
}



def fake_python(*packages: dict) -> Cmd:
    """An interpreter on the sysroot's PATH that answers the environment probe with recorded packages."""
    payload = {"executable": "/usr/bin/python3", "version": "3.11.2", "packages": list(packages)}
    return Cmd("\n@@GPU-DOCTOR@@" + json.dumps(payload))


TORCH_CPU = {"name": "torch", "version": "2.13.0+cpu", "requires": [],
             "files": {"torch/version.py": data("torch-version-py/torch-2.13.0+cpu.py.txt")}}
TF_215 = {"name": "tensorflow", "version": "2.15.1", "requires": [],
          "files": {"tensorflow/python/platform/build_info.py": data("tf-build-info/tensorflow-2.15.1-linux.py.txt")}}
A100_HOT = SMI_A100.replace(
    "<clocks_event_reason_hw_thermal_slowdown>Not Active</clocks_event_reason_hw_thermal_slowdown>",
    "<clocks_event_reason_hw_thermal_slowdown>Active</clocks_event_reason_hw_thermal_slowdown>")
LOADED_HOST = {**pci_gpu(), **driver_libs("535.104.05"), "/proc/driver/nvidia/version": PROC_535,
               "/proc/modules": LOADED}

MORE: dict[str, tuple[dict, dict[str, str], list[str], dict[str, str]]] = {
    # name: (files, expected severities, text snippets, environment variables)
    "cpu-torch-on-a-gpu-host": (
        {**LOADED_HOST, "/usr/bin/nvidia-smi": Cmd(SMI_A100), "/usr/bin/python3": fake_python(TORCH_CPU)},
        {"framework.cpu_only_build": "fail", "toolkit.missing": "warn"},
        ["torch 2.13.0+cpu in /usr/bin/python3 is a CPU-only build", "--index-url https://download.pytorch.org/whl/"],
        {},
    ),
    "tensorflow-gpu-build-without-cuda-or-cudnn": (
        {**LOADED_HOST, "/usr/bin/nvidia-smi": Cmd(SMI_A100), "/usr/bin/python3": fake_python(TF_215)},
        {"cudnn.missing": "fail", "toolkit.missing": "fail", "framework.cpu_only_build": "ok"},
        ["No cuDNN is installed, and tensorflow 2.15.1 needs one", "tensorflow 2.15.1 is a CUDA build (CUDA 12.2)"],
        {},
    ),
    "a10g-link-trained-at-x8": (
        {**LOADED_HOST, "/usr/bin/nvidia-smi": Cmd(data("nvidia-smi-xml/a10g-515.105.01.xml"))},
        {"gpu.pcie_degraded": "warn"},
        ["GPU 0 (NVIDIA A10G): PCIe link runs at x8 of x16"],
        {},
    ),
    "rtx3080-memory-held-by-someone-else": (
        {**LOADED_HOST, "/usr/bin/nvidia-smi": Cmd(data("nvidia-smi-xml/geforce-rtx-3080-595.58.03.xml"))},
        {"gpu.memory_in_use": "warn"},
        ["GPU 0 (NVIDIA GeForce RTX 3080): 9184 of 10240 MiB (90%) already in use"],
        {},
    ),
    "a100-thermal-slowdown": (
        {**LOADED_HOST, "/usr/bin/nvidia-smi": Cmd(A100_HOT)},
        {"gpu.throttling": "warn", "gpu.hardware_fault": "ok", "gpu.pcie_degraded": "ok"},
        ["GPU 0 (NVIDIA A100-SXM4-80GB) is throttled: hardware thermal slowdown"],
        {},
    ),
    "two-p100s-numbered-differently": (
        {**LOADED_HOST, "/usr/bin/nvidia-smi": Cmd(data("nvidia-smi-xml/tesla-p100-x2-375.66.xml"))},
        {"env.device_order": "warn", "env.cuda_visible_devices": "fail"},
        ["without CUDA_DEVICE_ORDER=PCI_BUS_ID", "0000:04:00.0", "GPU-46915a82-3fd2-8e11-ae26-a80b607c04f3",
         "CUDA_VISIBLE_DEVICES=2 names '2', which is not one of the 2 GPU(s) here"],
        {"CUDA_VISIBLE_DEVICES": "2"},
    ),
    "empty-cuda-visible-devices": (
        {**LOADED_HOST, "/usr/bin/nvidia-smi": Cmd(SMI_A100)},
        {"env.cuda_visible_devices": "fail"},
        ["CUDA_VISIBLE_DEVICES='' hides every GPU from CUDA"],
        {"CUDA_VISIBLE_DEVICES": ""},
    ),
    "cuda-home-and-nvcc-disagree": (
        {**LOADED_HOST,
         "/usr/local/cuda-11.8/version.txt": data("cuda-version-txt/cuda-11.0.207.txt").replace("11.0.207", "11.8.89"),
         "/usr/local/cuda-12.4/version.json": '{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}',
         "/usr/local/cuda-12.4/bin/nvcc": Cmd(data("nvcc/debian12-nvidia-cuda-toolkit-11.8.89.txt")
                                              .replace("11.8", "12.4")),
         "/usr/local/cuda-11.8/bin/nvcc": Cmd(data("nvcc/debian12-nvidia-cuda-toolkit-11.8.89.txt"))},
        {"toolkit.multiple_conflicting": "warn", "toolkit.path_not_set": "ok"},
        ["Several CUDA versions are mixed: nvcc on PATH is CUDA 12.4", "CUDA_HOME is CUDA 11.8"],
        {"CUDA_HOME": "/usr/local/cuda-11.8", "PATH": "/usr/local/cuda-12.4/bin:/usr/bin:/bin"},
    ),
    "toolkit-installed-but-not-on-path": (
        {**LOADED_HOST, "/usr/local/cuda-12.4/version.json": '{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}',
         "/usr/local/cuda-12.4/bin/nvcc": Cmd(data("nvcc/debian12-nvidia-cuda-toolkit-11.8.89.txt")
                                              .replace("11.8", "12.4"))},
        {"toolkit.path_not_set": "warn"},
        ["CUDA 12.4.1 is installed at /usr/local/cuda-12.4 but nvcc is not on PATH",
         'export PATH="/usr/local/cuda-12.4/bin:$PATH"'],
        {"PATH": "/usr/bin:/bin"},
    ),
    "docker-host-without-container-toolkit": (
        {**LOADED_HOST, "/usr/bin/docker": Cmd("Docker version 28.2.2\n"), "/usr/bin/nvidia-smi": Cmd(SMI_A100)},
        {"container.toolkit_missing": "warn"},
        ["docker is installed but the NVIDIA container toolkit is not",
         "nvidia-ctk runtime configure --runtime=docker"],
        {},
    ),
    "docker-host-with-configured-toolkit": (
        {**LOADED_HOST, "/usr/bin/docker": Cmd("Docker version 28.2.2\n"), "/usr/bin/nvidia-smi": Cmd(SMI_A100),
         "/usr/bin/nvidia-ctk": Cmd("NVIDIA Container Toolkit CLI version 1.17.8\ncommit: f202b80\n"),
         "/etc/docker/daemon.json": '{"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}'},
        {"container.toolkit_missing": "ok"},
        ["NVIDIA container toolkit 1.17.8 is installed for docker"],
        {},
    ),
    "wsl-with-windows-driver-only": (
        {"/proc/version": "Linux version 5.15.153.1-microsoft-standard-WSL2\n",
         "/usr/lib/wsl/lib/libcuda.so.1": b"", "/etc/ld.so.conf.d/ld.wsl.conf": "/usr/lib/wsl/lib\n",
         "/etc/ld.so.conf": "include /etc/ld.so.conf.d/*.conf\n"},
        {"wsl.driver": "ok"},
        ["WSL2 uses the Windows driver's libcuda from /usr/lib/wsl/lib"],
        {},
    ),
}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
                "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "KUBERNETES_SERVICE_HOST", "NO_COLOR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", "/usr/local/cuda/bin:/usr/bin:/bin")


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().out


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_gives_expected_findings(name: str, tmp_path: Path, clean_env: None,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    files, expected, texts = SCENARIOS[name]
    root = build(tmp_path / "root", {**BASE, **files})
    code, out = run_cli(["check", "--root", str(root), "--json"], capsys)
    report = json.loads(out)
    worst: dict[str, str] = {}
    rank = {"ok": 0, "info": 1, "warn": 2, "fail": 3}
    for f in report["findings"]:
        if rank[f["severity"]] >= rank.get(worst.get(f["code"], "ok"), 0) or f["code"] not in worst:
            worst[f["code"]] = f["severity"]
    for code_, severity in expected.items():
        assert worst.get(code_) == severity, (code_, worst.get(code_), [f["title"] for f in report["findings"]])
    assert code == (1 if report["status"] == "fail" else 0)
    _, text = run_cli(["check", "--root", str(root), "-v"], capsys)
    for snippet in texts:
        assert snippet in text, f"{snippet!r} not in:\n{text}"


@pytest.mark.parametrize("name", list(MORE))
def test_more_scenarios(name: str, tmp_path: Path, clean_env: None, monkeypatch: pytest.MonkeyPatch,
                        capsys: pytest.CaptureFixture[str]) -> None:
    files, expected, texts, env = MORE[name]
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    SCENARIOS[name] = (files, expected, texts)
    try:
        test_scenario_gives_expected_findings(name, tmp_path, clean_env, capsys)
    finally:
        del SCENARIOS[name]


def test_snapshot_replays_to_the_same_findings(tmp_path: Path, clean_env: None,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    files = SCENARIOS["mismatch-after-upgrade"][0]
    root = build(tmp_path / "root", {**BASE, **files})
    snap = tmp_path / "facts.json"
    assert main(["snapshot", "--root", str(root), "-o", str(snap)]) == 0
    capsys.readouterr()
    live_code, live = run_cli(["check", "--root", str(root), "--json"], capsys)
    replay_code, replayed = run_cli(["check", "--facts", str(snap), "--json"], capsys)
    strip = [(f["code"], f["severity"], f["title"]) for f in json.loads(live)["findings"]]
    assert strip == [(f["code"], f["severity"], f["title"]) for f in json.loads(replayed)["findings"]]
    assert live_code == replay_code == 1


def test_root_that_is_not_a_directory_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--root", str(tmp_path / "missing")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().count("\n") == 0 and "not a directory" in err


def test_garbage_files_become_unknowns_not_crashes(tmp_path: Path, clean_env: None,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    garbage = "\x00\xff\ufffd<gpu><<<>>> 12.a.b NVRM version: ??"
    files = {
        "/proc/driver/nvidia/version": garbage, "/proc/modules": garbage, "/etc/os-release": garbage,
        "/usr/local/cuda-12.4/version.json": garbage, "/usr/local/cuda-12.4/include/cudnn_version.h": garbage,
        "/var/lib/dpkg/status": garbage, "/usr/bin/nvidia-smi": Cmd(garbage), "/usr/bin/nvcc": Cmd(garbage),
        "/usr/bin/gcc": Cmd(garbage), "/sys/bus/pci/devices/0000:3b:00.0/vendor": garbage,
    }
    root = build(tmp_path / "root", {**BASE, **files})
    code, out = run_cli(["check", "--root", str(root), "--json"], capsys)
    report = json.loads(out)
    assert code in (0, 1)
    assert not [f for f in report["findings"] if f["code"] == "doctor.check_crashed"]
    assert report["facts"]["driver"]["kernel_module"] is None


def test_hanging_nvidia_smi_is_reported_as_a_timeout(tmp_path: Path, clean_env: None,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    root = build(tmp_path / "root", {**BASE, **pci_gpu()})
    smi = root / "usr/bin/nvidia-smi"
    smi.parent.mkdir(parents=True, exist_ok=True)
    smi.write_text("#!/bin/sh\nsleep 30\necho never\n")  # a wrapper whose child hangs
    smi.chmod(0o755)
    started = time.monotonic()
    _code, out = run_cli(["check", "--root", str(root), "--json", "--timeout", "0.5"], capsys)
    assert time.monotonic() - started < 25  # the wrapper sleeps 30 s; the timeout is 0.5 s
    errors = json.loads(out)["facts"]["errors"]
    assert any("nvidia-smi" in e["reason"] and "timed out after 0.5s" in e["reason"] for e in errors), errors


def test_snapshot_root_records_nvidia_smis_cuda_version(tmp_path: Path, clean_env: None,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # An inspected image: libcuda is never called, but the real A100 file says <cuda_version>12.2.
    root = build(tmp_path / "root", {**BASE, **SCENARIOS["healthy-a100-host"][0]})
    snap = tmp_path / "facts.json"
    assert main(["snapshot", "--root", str(root), "-o", str(snap)]) == 0
    facts = json.loads(snap.read_text())
    assert facts["driver"]["cuda_driver_api"] is None
    assert facts["driver"]["smi_cuda_version"] == "12.2"
    assert "nvidia-smi" in facts["sources"]["driver.smi_cuda_version"]
    capsys.readouterr()
    _, text = run_cli(["check", "--facts", str(snap)], capsys)
    assert "CUDA driver API 12.2 (nvidia-smi)" in text and "CUDA driver API unknown" not in text


def test_one_cudnn_reached_by_several_names_is_found_once(tmp_path: Path, clean_env: None,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Ubuntu 24.04 as the lent H100 had it: /lib is a link to usr/lib (merged /usr), cudnn_version.h an
    alternatives link to cudnn_version_v9.h. Each file is found once; a real second copy would still count."""
    header = data("cudnn/cudnn_version-9.24.0-excerpt.h")
    root = build(tmp_path / "root", {
        **BASE, "/lib": Link("usr/lib"),
        "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h": header,
        # relative targets: in a sysroot an absolute one would leave it when the file is read
        "/etc/alternatives/cudnn_version_h": Link("../../usr/include/x86_64-linux-gnu/cudnn_version_v9.h"),
        "/usr/include/x86_64-linux-gnu/cudnn_version.h": Link("../../../etc/alternatives/cudnn_version_h"),
        f"{LIBDIR}/libcudnn.so.9.24.0": b"", f"{LIBDIR}/libcudnn.so.9": Link("libcudnn.so.9.24.0"),
        "/usr/local/cuda-12.2/version.json": '{"cuda": {"name": "CUDA SDK", "version": "12.2.2"}}',
        "/usr/local/cuda-12.2/include/cudnn.h": header})  # a second file (not a link) with the same version
    snap = tmp_path / "facts.json"
    assert main(["snapshot", "--root", str(root), "-o", str(snap)]) == 0
    found = [(c["location"], c["version"]) for c in json.loads(snap.read_text())["cudnn"]]
    assert found == [("/usr/include/x86_64-linux-gnu/cudnn_version.h", "9.24.0"),
                     ("/usr/local/cuda-12.2/include/cudnn.h", "9.24.0"),
                     ("/lib/x86_64-linux-gnu/libcudnn.so.9.24.0", "9.24.0")]
    capsys.readouterr()
    _code, out = run_cli(["check", "--facts", str(snap), "--json"], capsys)
    verdicts = [f["title"] for f in json.loads(out)["findings"] if f["code"] == "cudnn.cuda_mismatch"]
    assert verdicts == ["cuDNN 9.24.0 supports CUDA 12.2"]


@pytest.mark.parametrize(("name", "source"), [("healthy-a100-host", "cmd:nvidia-smi -q -x"),
                                              ("gpu-without-driver", "file:/sys/bus/pci/devices")])
def test_the_gpu_list_is_credited_to_the_probe_that_gave_it(name: str, source: str, tmp_path: Path,
                                                            clean_env: None) -> None:
    """The PCI bus is scanned on every run (to count the GPUs on it); on the H100 that scan's source replaced the
    GPU list's ("gpus": "file:/sys/bus/pci/devices" while every GPU came from NVML)."""
    files = SCENARIOS[name][0]
    root = build(tmp_path / "root", {**BASE, **files})
    snap = tmp_path / "facts.json"
    assert main(["snapshot", "--root", str(root), "-o", str(snap)]) == 0
    facts = json.loads(snap.read_text())
    kind = "nvidia-smi" if source.startswith("cmd") else "pci"
    assert facts["gpus"] and {g["source"] for g in facts["gpus"]} == {kind}
    assert facts["sources"]["gpus"] == source
    assert facts["sources"]["host.pci_nvidia_gpus"] == "file:/sys/bus/pci/devices"
