"""`check --from-collect-env` on a bug report's paste: nvidia-smi, deviceQuery and JAX output beside (or
instead of) the collect_env block are evidence, each fact crediting the output it came from.

Every paste here is made of real outputs under tests/data/ (their origins are in tests/data/SOURCES.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from doctor import cli
from doctor.collect_env import CollectEnvError, parse

DATA = Path(__file__).parent / "data"
SMI_470 = "nvidia-smi-text/geforce-470.63.01-cuda-11.4.txt"
GKE_11040 = "collect_env/pytorch-112553-gke-cu121-driver-11040.txt"  # driver unknown, torch warning: CUDA 11.4
V100_470 = "collect_env/vllm-5613-indented-4x-v100-torch2.2.1-cu118-driver470.txt"  # driver 470.57.02


def paste(*names: str) -> str:
    return "\n".join((DATA / n).read_text(encoding="utf-8") for n in names)


def check(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any]]:
    path = tmp_path / "issue.txt"
    path.write_text(text, encoding="utf-8")
    code = cli.main(["check", "--from-collect-env", str(path), *extra])
    out = capsys.readouterr().out
    return code, (json.loads(out) if "--json" in extra else {"text": out})


def findings(report: dict[str, Any]) -> set[tuple[str, str]]:
    return {(f["code"], f["severity"]) for f in report["findings"]}


# (files pasted together, exit code, status, driver, driver's CUDA, GPU names, where the driver came from, findings)
CASES = [
    # nvidia-smi alone: a driver and a GPU seen are evidence (report.has_evidence), so a verdict, no framework
    # judged; R470 and R510 are ended branches, so it is a warning (exit 0)
    ([SMI_470], 0, "warn", "470.63.01", "11.4", ["NVIDIA GeForce ..."], "collect_env:nvidia-smi table",
     {("driver.missing", "ok"), ("driver.not_loaded", "ok"), ("driver.branch_eol", "warn")}),
    (["nvidia-smi-q/nvidia-docker-1604-wsl-510.06-gtx1650ti.txt"], 0, "warn", "510.06", "11.6",
     ["NVIDIA GeForce GTX 1650 Ti with Max-Q Design"], "collect_env:nvidia-smi -q",
     {("driver.missing", "ok"), ("driver.branch_eol", "warn")}),
    # deviceQuery: the driver's CUDA and the GPU's compute capability, no driver version
    (["devicequery/scenereco-32-gtx1080-8.0.txt"], 0, "ok", None, "8.0", ["GeForce GTX 1080"], None, set()),
    # jax.print_environment_info() listing a GpuDevice, with the nvidia-smi JAX appends
    (["jax-env-info/jax-12213-colab-gpu-0.3.17-t4.txt"], 0, "warn", "460.32.03", "11.2", ["Tesla T4"],
     "collect_env:nvidia-smi table", {("framework.cuda_unavailable", "ok"), ("driver.branch_eol", "warn")}),
    # JAX on CPU, no nvidia-smi: nothing GPU-related is stated, so no verdict
    (["jax-env-info/jax-12213-colab-cpu-0.3.17.txt"], 4, "unknown", None, None, [], None, set()),
    # collect_env with the driver line 'Could not collect', nvidia-smi pasted after it (or before it): the
    # table's driver fills the unknown one and the torch 2.1.0+cu121 verdict stands
    ([GKE_11040, SMI_470], 1, "fail", "470.63.01", "11.4", None, "collect_env:nvidia-smi table",
     {("framework.cuda_newer_than_driver", "fail")}),
    ([SMI_470, GKE_11040], 1, "fail", "470.63.01", "11.4", None, "collect_env:nvidia-smi table",
     {("framework.cuda_newer_than_driver", "fail")}),
]


@pytest.mark.parametrize(("names", "code", "status", "driver", "driver_cuda", "gpus", "source", "want"), CASES)
def test_pasted_outputs_give_the_driver_gpus_and_verdict(
        names: list[str], code: int, status: str, driver: str | None, driver_cuda: str | None,
        gpus: list[str] | None, source: str | None, want: set[tuple[str, str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    got_code, report = check(tmp_path, paste(*names), capsys, "--json")
    facts = report["facts"]
    assert (got_code, report["status"]) == (code, status)
    assert facts["driver"]["userspace"] == driver
    assert driver_cuda in (facts["driver"]["smi_cuda_version"], facts["driver"]["cuda_driver_api"])
    if gpus is not None:
        assert [g["name"] for g in facts["gpus"]] == gpus
    assert facts["sources"].get("driver.userspace") == source
    assert want <= findings(report)


def test_device_query_gives_compute_capability_and_memory(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    _code, report = check(tmp_path, paste("devicequery/pocl-890-jetson-nano-tegra-x1-10.2.txt"), capsys, "--json")
    gpu = report["facts"]["gpus"][0]
    assert (gpu["name"], gpu["compute_capability"]) == ("NVIDIA Tegra X1", "5.3")
    assert report["facts"]["sources"]["gpus[0].compute_capability"] == "collect_env:deviceQuery"


def test_jax_gpu_devices_are_jax_seeing_the_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _code, report = check(tmp_path, paste("jax-env-info/jax-21295-0.4.33-8x-a10g.txt"), capsys, "--json")
    env = report["facts"]["python_envs"][0]
    jaxlib = next(p for p in env["packages"] if p["name"] == "jaxlib")
    assert jaxlib["version"] == "0.4.33" and jaxlib["deep"]["is_available"] is True
    assert jaxlib["deep"]["device_count"] == 8
    assert env["version"] == "3.10.12"
    # the table row is cut after the bus id: the memory is unknown, not zero
    assert report["facts"]["gpus"][0]["memory_total_mib"] is None


def test_table_alone_names_the_driver_and_gpu_in_the_text_report(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _code, report = check(tmp_path, paste("nvidia-smi-text/wsl-9134-windows-517.48-2x-wddm-indented.txt"), capsys)
    assert "517.48" in report["text"]
    assert "NVIDIA GeForce" in report["text"]


def test_a_fuller_pasted_driver_version_wins_over_a_cut_one() -> None:
    block = paste(V100_470).replace("Nvidia driver version: 470.57.02", "Nvidia driver version: 470.63")
    facts = parse(block + "\n" + paste(SMI_470))
    assert facts.driver.userspace == "470.63.01"
    assert facts.sources["driver.userspace"] == "collect_env:nvidia-smi table"
    # the table's GPU is not the block's V100: the block's list is kept, and the conflict said
    assert facts.gpus[0].name == "Tesla V100-SXM2-32GB"
    assert any("GPU 0" in e.reason and "kept" in e.reason for e in facts.errors)


def test_a_conflicting_pasted_driver_leaves_the_blocks_one_and_says_so() -> None:
    facts = parse(paste(V100_470, SMI_470))
    assert facts.driver.userspace == "470.57.02"
    assert facts.sources["driver.userspace"] == "collect_env:Nvidia driver version"
    assert any("470.63.01" in e.reason and "470.57.02" in e.reason for e in facts.errors)


@pytest.mark.parametrize("names", [[GKE_11040, SMI_470], ["jax-env-info/jax-12213-colab-gpu-0.3.17-t4.txt"],
                                   ["devicequery/scenereco-32-gtx1080-8.0.txt"]])
def test_a_paste_cut_anywhere_never_crashes_nor_invents_a_value(names: list[str]) -> None:
    text = paste(*names)
    full = parse(text)
    for cut in range(0, len(text), 23):
        try:
            facts = parse(text[:cut])
        except CollectEnvError:
            continue
        assert facts.driver.userspace in (None, full.driver.userspace)
        assert facts.driver.smi_cuda_version in (None, full.driver.smi_cuda_version)
        assert {g.compute_capability for g in facts.gpus} <= {None} | {g.compute_capability for g in full.gpus}
