"""`check --from-collect-env`: real collect_env reports from public issue threads → facts → findings.

Tier 1 (the facts each report states, table-driven) and tier 3 (the whole CLI on each report, the
finding a maintainer triaging it wants). The reports and their threads: tests/data/collect_env/SOURCES.md.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor import cli
from doctor.collect_env import KEYS, CollectEnvError, _parse, parse
from doctor.model.facts import Facts, facts_schema, validate

DATA = Path(__file__).parent / "data" / "collect_env"
FIXTURES = sorted(p.name for p in DATA.glob("*.txt"))


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def summary(facts: Facts) -> dict[str, Any]:
    """The facts a maintainer reads first, flattened for comparison."""
    env = facts.python_envs[0]
    torch = next((p for p in env.packages if p.name == "torch"), None)
    return {
        "os": (facts.host.os_id, facts.host.os_version),
        "wsl": facts.host.wsl,
        "gcc": facts.host.gcc,
        "driver": facts.driver.userspace,
        "driver_api": facts.driver.cuda_driver_api,
        "gpus": [g.name for g in facts.gpus],
        "cc": [g.compute_capability for g in facts.gpus],
        "nvcc": facts.loader.nvcc_on_path.version if facts.loader.nvcc_on_path else None,
        "cudnn": [(c.version, c.source) for c in facts.cudnn],
        "python": env.version,
        "torch": (torch.version, torch.cuda, torch.cpu_only) if torch else None,
        "torch_cudnn": torch.cudnn if torch else None,
        "arch": torch.arch_list if torch else None,
        "available": torch.deep.is_available if torch and torch.deep else None,
        "packages": {p.name: p.version for p in env.packages if p.name != "torch"},
        "errors": {e.probe for e in facts.errors},
    }


P100 = ["Tesla P100-PCIE-16GB"] * 4
A100 = ["NVIDIA A100-SXM4-80GB"] * 8
ARCH_2_6 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]

# file -> the facts it states (only the keys given are compared; "packages" and "errors" are subsets)
FACTS = {
    "pytorch-150733-rtx5090d-torch2.6-cu126.txt": dict(
        os=("ubuntu", "24.10"), wsl=False, gcc="14.2.0", driver="570.124.04", driver_api=None,
        gpus=["NVIDIA GeForce RTX 5090 D"], cc=["12.0"], nvcc=None, cudnn=[("9.8.0", "library")], python="3.12.9",
        torch=("2.6.0+cu126", "12.6", False), arch=ARCH_2_6, available=True,
        errors={"collect_env:CUDA runtime version"}),
    "pytorch-112553-gke-cu121-driver-11040.txt": dict(
        os=("ubuntu", "20.04"), driver=None, driver_api="11.4", gpus=[], python="3.11.6",
        torch=("2.1.0+cu121", "12.1", False),
        errors={"collect_env:Nvidia driver version", "collect_env:GPU models and configuration"}),
    "pytorch-30071-torch1.3.1-8x-titan-xp-driver410.txt": dict(
        os=("ubuntu", "16.04"), wsl=None, gcc="5.4.0", driver="410.48", gpus=["TITAN Xp"] * 8, nvcc="10.0.130",
        cudnn=[], python="3.6", torch=("1.3.1", "10.1", False), available=False, packages={"numpy": "1.17.4"},
        errors={"collect_env:cuDNN version"}),
    "pytorch-37320-torch1.5.0-4x-p100-driver410-retyped.txt": dict(
        os=("ubuntu", "18.04"), gcc="7.4.0", driver="410.104", gpus=P100, nvcc="10.0.130",
        cudnn=[("7.6.5", "library")], python="3.6", torch=("1.5.0", "10.2", False),
        packages={"numpy": "1.17.4", "torchvision": "0.6.0"}),
    "pytorch-43058-torch1.6.0-2x-v100-rhel7-driver418.txt": dict(
        os=("rhel", "7.6"), gcc="4.8.5", driver="418.67", gpus=["Tesla V100-PCIE-16GB"] * 2, nvcc=None,
        torch=("1.6.0", "10.2", False), available=False, packages={"numpy": "1.19.1"}),
    "pytorch-28321-conda-torch1.3.0-t4-driver410.txt": dict(
        os=("debian", "9.11"), gcc="6.3.0", driver="410.104", gpus=["Tesla T4"], nvcc="10.0.130",
        torch=("1.3.0", "10.1", False), torch_cudnn="7.6.3",
        packages={"torchvision": "0.4.0", "intel-numpy": "1.15.1", "mkl": "2019.4"}),
    "pytorch-40682-windows-server-torch1.5.0-cu101-quoted.txt": dict(
        os=("windows", "2019"), gcc="9.2.0", driver="442.92", gpus=["TITAN RTX", "TITAN RTX"], nvcc="10.1.243",
        cudnn=[("7", "library")], python="3.7", torch=("1.5.0+cu101", "10.1", False), available=True,
        packages={"torchvision": "0.6.0+cu101", "numpy": "1.19.0"}),
    "pytorch-51858-windows11-torch2.0.1-cu117-gtx1050ti.txt": dict(
        os=("windows", "11"), wsl=False, gcc=None, driver="535.98", gpus=["NVIDIA GeForce GTX 1050 Ti"],
        nvcc="11.7.64", cudnn=[("8", "library")], python="3.9.16", torch=("2.0.1+cu117", "11.7", False),
        packages={"torchaudio": "2.0.2+cu117", "torchvision": "0.15.2"}),
    "pytorch-122924-windows11-cpu-wheel-rtx4080-laptop.txt": dict(
        os=("windows", "11"), driver="551.86", gpus=["NVIDIA GeForce RTX 4080 Laptop GPU"], nvcc="12.4.99",
        python="3.10.13", torch=("2.2.2", None, True), available=False, packages={"torchvision": "0.17.2"}),
    "pytorch-91973-source-build-without-cuda-rtx4080.txt": dict(
        os=("ubuntu", "22.04"), wsl=False, driver="525.60.11", gpus=["NVIDIA GeForce RTX 4080"], nvcc=None,
        torch=("2.0.0a0+git7f2b5ea", None, True), packages={"cudatoolkit": "11.3.1", "numpy": "1.24.1"}),
    "pytorch-121067-macos-no-gpu-torch2.2.2.txt": dict(
        os=("macos", "14.5"), wsl=False, driver=None, gpus=[], nvcc=None, cudnn=[], python="3.10.13",
        torch=("2.2.2", None, True), packages={"onnxruntime": "1.19.2"},
        errors={"collect_env:Nvidia driver version", "collect_env:GPU models and configuration"}),
    "pytorch-44106-rocm-build-torch1.7.txt": dict(
        os=("ubuntu", "18.04"), driver=None, gpus=[], torch=("1.7.0a0+9ddd3df", None, None),
        errors={"collect_env:GPU models and configuration"}),
    # ROCm builds: "Is CUDA available: True" means a HIP device, not CUDA; the AMD GPU is no NVIDIA GPU fact
    "pytorch-131901-rocm6.1-mi210-source-build.txt": dict(
        os=("ubuntu", "20.04"), gcc="9.4.0", driver=None, gpus=[], nvcc=None, cudnn=[], python="3.9.19",
        torch=("2.3.0a0+gitae01701", None, None), available=None),
    "pytorch-180500-rocm7.13-mi300x-torch2.9.1.txt": dict(
        os=("ubuntu", "24.04"), gcc="13.3.0", driver=None, gpus=[], nvcc=None, cudnn=[], python="3.12.3",
        torch=("2.9.1+rocm7.13.0a20260401", None, None), available=None),
    "pytorch-137846-windows11-cpu-nightly-no-gpu.txt": dict(
        os=("windows", "11"), driver=None, gpus=[], python="3.10.17", torch=("2.8.0.dev20250528+cpu", None, True)),
    "pytorch-42887-torch-not-importable-macos.txt": dict(
        os=("macos", "10.15"), python="2.7", torch=("1.7.0.dev20200803", None, None),
        packages={"torchvision": "0.8.0.dev20200804"}, errors={"collect_env:PyTorch version"}),
    "vllm-9293-wsl2-torch2.4.0-cu121-rtx4070-laptop.txt": dict(
        os=("ubuntu", "22.04"), wsl=True, driver="551.88", gpus=["NVIDIA GeForce RTX 4070 Laptop GPU"],
        nvcc="12.4.131", python="3.12.3", torch=("2.4.0+cu121", "12.1", False), available=True),
    "vllm-26127-wsl2-vllm-format-torch2.8.0-cu128-rtx4060-laptop.txt": dict(
        os=("ubuntu", "24.04"), wsl=True, gcc="13.3.0", driver="581.29", gpus=["NVIDIA GeForce RTX 4060 Laptop GPU"],
        nvcc="12.0.140", python="3.12.3", torch=("2.8.0+cu128", "12.8", False),
        errors={"collect_env:cuDNN version"}),
    "vllm-18467-vllm-format-4x-rtx2080ti-torch2.5.1-cu124.txt": dict(
        os=("ubuntu", "22.04"), driver="560.35.03", gpus=["NVIDIA GeForce RTX 2080 Ti"] * 4, nvcc="12.6.77",
        python="3.10.12", torch=("2.5.1+cu124", "12.4", False)),
    "vllm-12189-8x-a100-torch2.4.0-cu121.txt": dict(
        os=("ubuntu", "22.04"), driver="535.54.03", gpus=A100, nvcc="12.1.105", cudnn=[("8.9.1", "library")],
        python="3.11.11", torch=("2.4.0+cu121", "12.1", False)),
    "vllm-5613-indented-4x-v100-torch2.2.1-cu118-driver470.txt": dict(
        os=(None, None), gcc="8.2.0", driver="470.57.02", gpus=["Tesla V100-SXM2-32GB"] * 4, nvcc="11.8.89",
        cudnn=[("7.6.5", "library")], python="3.8.18", torch=("2.2.1+cu118", "11.8", False)),
    "pytorch-57922-a100-mig-torch1.8.1-cu102-driver450.txt": dict(
        os=("ubuntu", "20.04"), driver="450.80.02", gpus=["A100-SXM4-40GB"], cudnn=[("8.1.0", "library")],
        torch=("1.8.1+cu102", "10.2", False)),
    "vllm-21028-vllm-format-rtx5090-torch2.7.0-cu128.txt": dict(
        os=("ubuntu", "22.04"), driver="570.124.06", gpus=["NVIDIA GeForce RTX 5090"], nvcc="12.8.93",
        python="3.11.11", torch=("2.7.0+cu128", "12.8", False)),
    "pytorch-74733-centos7-found-no-driver-torch1.7.0-cu110.txt": dict(
        os=("centos", "7"), driver=None, gpus=[], torch=("1.7.0+cu110", "11.0", False), available=False),
}


def test_every_fixture_is_in_the_table_and_has_its_source() -> None:
    assert sorted(FACTS) == FIXTURES
    assert len(FIXTURES) >= 15
    sources = (DATA / "SOURCES.md").read_text()
    for name in FIXTURES:
        row = next((line for line in sources.splitlines() if f"`{name}`" in line), "")
        assert "https://github.com/" in row, name


@pytest.mark.parametrize("name", FIXTURES)
def test_report_states_these_facts(name: str) -> None:
    got = summary(parse(read(name)))
    for key, want in FACTS[name].items():
        if key == "packages":
            assert {k: got["packages"].get(k) for k in want} == want, name
        elif key == "errors":
            assert want <= got["errors"], (name, got["errors"])
        else:
            assert got[key] == want, (name, key, got[key])


@pytest.mark.parametrize("name", FIXTURES)
def test_report_facts_are_a_valid_snapshot(name: str) -> None:
    facts = parse(read(name))
    assert validate(facts.to_dict(), facts_schema()) == []
    assert Facts.from_dict(json.loads(facts.to_json())) == facts  # replays like any snapshot
    assert facts.python_envs[0].origin == "collect_env"
    assert any("collect_env does not report" in e.reason for e in facts.errors)


# --- the findings a maintainer triaging each report wants -----------------------------------------

# file -> (exit code, findings that must be there as (code, severity))
FINDINGS = {
    "pytorch-150733-rtx5090d-torch2.6-cu126.txt": (1, [("framework.arch_unsupported", "fail"),
                                                       ("framework.cuda_newer_than_driver", "ok"),
                                                       ("driver.too_old_for_gpu", "ok")]),
    "pytorch-112553-gke-cu121-driver-11040.txt": (1, [("framework.cuda_newer_than_driver", "fail")]),
    "pytorch-30071-torch1.3.1-8x-titan-xp-driver410.txt": (1, [("framework.cuda_newer_than_driver", "fail"),
                                                               ("framework.cpu_only_build", "ok")]),
    "pytorch-37320-torch1.5.0-4x-p100-driver410-retyped.txt": (1, [("framework.cuda_newer_than_driver", "fail")]),
    "pytorch-43058-torch1.6.0-2x-v100-rhel7-driver418.txt": (1, [("framework.cuda_newer_than_driver", "fail")]),
    "pytorch-28321-conda-torch1.3.0-t4-driver410.txt": (1, [("framework.cuda_newer_than_driver", "fail")]),
    "pytorch-40682-windows-server-torch1.5.0-cu101-quoted.txt": (0, [("framework.cuda_newer_than_driver", "ok"),
                                                                     ("framework.cpu_only_build", "ok")]),
    "pytorch-51858-windows11-torch2.0.1-cu117-gtx1050ti.txt": (0, [("framework.cuda_newer_than_driver", "ok"),
                                                                   ("framework.cpu_only_build", "ok")]),
    "pytorch-122924-windows11-cpu-wheel-rtx4080-laptop.txt": (1, [("framework.cpu_only_build", "fail")]),
    "pytorch-91973-source-build-without-cuda-rtx4080.txt": (1, [("framework.cpu_only_build", "fail")]),
    # A report that does not say which driver is installed (no NVIDIA GPU, or "Could not collect")
    # leaves driver.missing skipped: unknown, not "absent".
    # A CPU build where no GPU was seen judges nothing GPU-related: no verdict (exit 4), never "ready".
    "pytorch-121067-macos-no-gpu-torch2.2.2.txt": (4, [("framework.cpu_only_build", "info")]),
    # A ROCm build is no CUDA build: nothing NVIDIA-related to judge, so no verdict (exit 4)
    "pytorch-44106-rocm-build-torch1.7.txt": (4, []),
    "pytorch-131901-rocm6.1-mi210-source-build.txt": (4, []),
    "pytorch-180500-rocm7.13-mi300x-torch2.9.1.txt": (4, []),
    "pytorch-137846-windows11-cpu-nightly-no-gpu.txt": (4, [("framework.cpu_only_build", "info")]),
    # torch could not be imported and nothing else is said: no verdict (status "unknown", exit 4), never "ready"
    "pytorch-42887-torch-not-importable-macos.txt": (4, []),
    "vllm-9293-wsl2-torch2.4.0-cu121-rtx4070-laptop.txt": (0, [("framework.cuda_newer_than_driver", "ok"),
                                                               ("framework.arch_unsupported", "ok")]),
    "vllm-26127-wsl2-vllm-format-torch2.8.0-cu128-rtx4060-laptop.txt": (0, [
        ("toolkit.host_compiler_unsupported", "warn"), ("framework.cuda_newer_than_driver", "ok")]),
    "vllm-18467-vllm-format-4x-rtx2080ti-torch2.5.1-cu124.txt": (0, [("framework.arch_unsupported", "ok"),
                                                                     ("framework.cuda_newer_than_driver", "ok")]),
    "vllm-12189-8x-a100-torch2.4.0-cu121.txt": (0, [("framework.arch_unsupported", "ok"),
                                                    ("framework.cuda_newer_than_driver", "ok")]),
    # nvcc 11.8 on driver 470 (CUDA 11.4): minor-version compatible, but PTX it compiles will not load
    "vllm-5613-indented-4x-v100-torch2.2.1-cu118-driver470.txt": (0, [("framework.cuda_newer_than_driver", "ok"),
                                                                      ("driver.too_old_for_cuda_runtime", "warn")]),
    "pytorch-57922-a100-mig-torch1.8.1-cu102-driver450.txt": (0, [("framework.cuda_newer_than_driver", "ok")]),
    "vllm-21028-vllm-format-rtx5090-torch2.7.0-cu128.txt": (0, [("driver.too_old_for_gpu", "ok"),
                                                                ("framework.cuda_newer_than_driver", "ok")]),
    # torch's own "Found no NVIDIA driver on your system" is evidence of absence
    "pytorch-74733-centos7-found-no-driver-torch1.7.0-cu110.txt": (1, [("driver.missing", "fail"),
                                                                       ("framework.cuda_unavailable", "warn")]),
}


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("name", FIXTURES)
def test_check_from_collect_env_gives_the_finding_a_maintainer_wants(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["check", "--from-collect-env", str(DATA / name), "--json"], capsys)
    want_code, want = FINDINGS[name]
    assert code == want_code, (name, err)
    report = json.loads(out)
    got = {(f["code"], f["severity"]) for f in report["findings"]}
    assert set(want) <= got, (name, sorted(got))
    assert report["facts"]["python_envs"][0]["origin"] == "collect_env"


def test_every_fixture_has_expected_findings() -> None:
    assert sorted(FINDINGS) == FIXTURES


def test_rtx5090_on_a_cu126_wheel_names_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    _code, out, _err = run_cli(["check", "--from-collect-env", str(DATA / "pytorch-150733-rtx5090d-torch2.6-cu126.txt"),
                                "--json", "framework.arch_unsupported"], capsys)
    finding = json.loads(out)["findings"][0]
    assert "sm_120" in finding["title"]
    assert "sm_90" in finding["detail"]  # the arch list torch printed in its warning
    assert "--index-url https://download.pytorch.org/whl/cu" in finding["fix"]["summary"]


def test_driver_470_report_is_judged_from_torchs_warning(capsys: pytest.CaptureFixture[str]) -> None:
    _code, out, _err = run_cli(["check", "--from-collect-env", str(DATA / "pytorch-112553-gke-cu121-driver-11040.txt"),
                                "--json", "framework.cuda_newer_than_driver"], capsys)
    report = json.loads(out)
    finding = report["findings"][0]
    assert finding["severity"] == "fail" and "torch 2.1.0+cu121" in finding["title"]
    assert "11.4" in finding["detail"]
    assert report["facts"]["sources"]["driver.cuda_driver_api"].startswith("collect_env:torch warning")


def test_minor_version_compatibility_keeps_a_cu118_wheel_on_driver_470(capsys: pytest.CaptureFixture[str]) -> None:
    _code, out, _err = run_cli(["check", "--from-collect-env",
                                str(DATA / "vllm-5613-indented-4x-v100-torch2.2.1-cu118-driver470.txt"),
                                "--json", "framework.cuda_newer_than_driver"], capsys)
    assert "(minor-version)" in json.loads(out)["findings"][0]["title"]


# Facts a report does not carry are unknown, not absent: the checks skip instead of failing.


def test_working_wsl2_report_is_not_failed_for_libcuda(capsys: pytest.CaptureFixture[str]) -> None:
    _code, out, _err = run_cli(["check", "--from-collect-env",
                                str(DATA / "vllm-9293-wsl2-torch2.4.0-cu121-rtx4070-laptop.txt"), "--json"], capsys)
    assert ("wsl.driver", "fail") not in {(f["code"], f["severity"]) for f in json.loads(out)["findings"]}


def test_driver_known_only_from_the_warning_is_not_missing(capsys: pytest.CaptureFixture[str]) -> None:
    _code, out, _err = run_cli(["check", "--from-collect-env", str(DATA / "pytorch-112553-gke-cu121-driver-11040.txt"),
                                "--json", "driver.missing"], capsys)
    assert json.loads(out)["findings"][0]["severity"] != "fail"


# --- the command line ---------------------------------------------------------------------------


def test_report_on_standard_input(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(read("pytorch-122924-windows11-cpu-wheel-rtx4080-laptop.txt")))
    code, out, _err = run_cli(["check", "--from-collect-env", "-"], capsys)
    assert code == 1
    assert "torch 2.2.2 in python (collect_env) is a CPU-only build" in out


@pytest.mark.parametrize("text", [
    "",
    "hello world\n",
    '{"schema": "gpu-doctor.facts/v1"}',
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
    "numpy==1.26.4\ntorch==2.2.2\n",
    "OS: Ubuntu 22.04\n",
])
def test_text_that_is_not_a_report_is_a_usage_error(text: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(CollectEnvError):
        parse(text)
    path = tmp_path / "report.txt"
    path.write_text(text)
    code, out, err = run_cli(["check", "--from-collect-env", str(path)], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"gpu-doctor: error: --from-collect-env {path}: ") and err.count("\n") == 1


def test_missing_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(["check", "--from-collect-env", str(tmp_path / "nope.txt")], capsys)
    assert code == 2 and "No such file" in err


# --- mappings no fixture shows, derived from real reports ----------------------------------------


def test_pip_nvidia_wheels_become_cudnn_and_framework_facts() -> None:
    text = read("vllm-12189-8x-a100-torch2.4.0-cu121.txt") + "\n".join([
        "", "Versions of relevant libraries:", "[pip3] nvidia-cudnn-cu12==9.1.0.70",
        "[pip3] nvidia-cuda-runtime-cu12==12.1.105", "[pip3] jax==0.4.30", "[pip3] jaxlib==0.4.30+cuda12.cudnn89",
        "[pip3] torch==2.4.0", "[conda] Could not collect", ""])
    facts = parse(text)
    pkgs = {p.name: p for p in facts.python_envs[0].packages}
    assert pkgs["torch"].version == "2.4.0+cu121" and pkgs["torch"].cudnn == "9.1.0.70"  # the header wins
    assert pkgs["nvidia-cudnn-cu12"].cudnn == "9.1.0.70"
    assert pkgs["nvidia-cuda-runtime-cu12"].cuda == "12.1"
    assert (pkgs["jaxlib"].cuda, pkgs["jaxlib"].cudnn, pkgs["jaxlib"].cpu_only) == ("12", "8.9", False)
    assert ("9.1.0.70", "pip") in {(c.version, c.source) for c in facts.cudnn}


def test_conda_cpu_build_and_no_header_torch() -> None:
    text = read("pytorch-42887-torch-not-importable-macos.txt").replace(
        "[pip3] torch==1.7.0.dev20200803\n", "").replace(
        "[conda] Could not collect", "[conda] pytorch                   1.6.0               py3.8_cpu_0    pytorch")
    torch = next(p for p in parse(text).python_envs[0].packages if p.name == "torch")
    assert (torch.version, torch.cpu_only) == ("1.6.0+cpu", True)


def test_vllm_environment_section_fills_env() -> None:
    text = read("vllm-21028-vllm-format-rtx5090-torch2.7.0-cu128.txt") + "\n".join([
        "", "==============================", "     Environment Variables", "==============================",
        "CUDA_VISIBLE_DEVICES=0,1", "NCCL_CUMEM_ENABLE=0", ""])
    facts = parse(text)
    assert facts.env == {"CUDA_VISIBLE_DEVICES": "0,1"}


def test_vllm_aligned_layout_reads_like_the_classic_one() -> None:
    base = read("pytorch-30071-torch1.3.1-8x-titan-xp-driver410.txt")

    def align(line: str) -> str:
        key, sep, value = line.partition(":")
        if not sep or re.match(r"^(GPU \d|\[)", line):
            return line
        return f"{key:<28} : {value.strip()}"

    aligned = "\n".join(align(line) for line in base.splitlines())
    assert aligned != base
    assert summary(parse(aligned)) == summary(parse(base))


# --- never anything but CollectEnvError -----------------------------------------------------------

LINES = st.sampled_from([
    *(f"{k.title()}: " for k in KEYS), "GPU 0: NVIDIA GeForce RTX 4090", "GPU 1： Tesla T4 (UUID: GPU-1)",
    "[pip3] torch==2.5.1+cu124", "[pip3] nvidia-cudnn-cu12==", "[conda] pytorch 1.3.0 py3.7_cuda10.1.243_cudnn7.6.3_0",
    "[conda] x", "Probably one of the following:", "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7", "cudnn64_8.dll",
    "==============================", "   CPU Info", "> ", "```", "Could not collect", "No CUDA", "N/A", "None",
    "The NVIDIA driver on your system is too old (found version 99999999999)",
    "X with CUDA capability sm_ is not compatible with the current PyTorch installation.",
    "Found GPU0 X which is of cuda capability 9.9.",
])


@st.composite
def report_like(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.one_of(LINES, st.text(max_size=30)), max_size=40))
    values = draw(st.lists(st.text(max_size=20), min_size=len(parts), max_size=len(parts)))
    return "\n".join(p + v for p, v in zip(parts, values, strict=True))


@st.composite
def cut_fixture(draw: st.DrawFn) -> str:
    text = read(draw(st.sampled_from(FIXTURES)))
    start = draw(st.integers(0, len(text)))
    end = draw(st.integers(start, len(text)))
    junk = draw(st.text(max_size=10))
    return text[:start] + junk + text[end:]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), report_like(), cut_fixture()))
def test_parse_raises_only_collect_env_error(text: str) -> None:
    try:
        facts = _parse(text)  # the unguarded reader: a bug here must show, not turn into CollectEnvError
    except CollectEnvError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert validate(facts.to_dict(), facts_schema()) == []


def test_mig_lines_under_a_gpu_become_its_mig_devices() -> None:
    facts = parse(read("pytorch-57922-a100-mig-torch1.8.1-cu102-driver450.txt"))
    (gpu,) = facts.gpus
    assert gpu.mig_mode is True
    assert [(m.index, m.name) for m in gpu.mig_devices] == [(0, "MIG 3g.20gb")]
    assert "gpus[0].mig_devices" in facts.sources
