"""image.env_blocks_gpu: ENV lines baked into an image that keep its containers away from the GPU.

Rules from NVIDIA's container toolkit documentation (docker-specialized.html: 'compute' is required for
CUDA; NVIDIA_VISIBLE_DEVICES void/empty behaves like runc, none passes no GPU) and the CUDA runtime API
(cudaErrorStubLibrary: the stub libcuda loaded instead of the driver's).
"""

from __future__ import annotations

import pytest
from factories import make_facts

from doctor.checks import by_id
from doctor.matrix import current
from doctor.pipeline import diagnose
from doctor.registry import Context


def static(facts):  # type: ignore[no-untyped-def]
    report = diagnose(facts, checks=[by_id("image.env_blocks_gpu")],  # type: ignore[list-item]
                      ctx=Context(matrix=current(), options={"static": True}))
    return report.checks[0].status, report.findings


@pytest.mark.parametrize(("env", "severity", "words"), [
    ({"CUDA_VISIBLE_DEVICES": ""}, "fail", "CUDA_VISIBLE_DEVICES=''"),
    ({"CUDA_VISIBLE_DEVICES": "-1"}, "fail", "sees no GPU"),
    ({"NVIDIA_VISIBLE_DEVICES": "void"}, "warn", "passes it no GPU"),
    ({"NVIDIA_DRIVER_CAPABILITIES": "utility"}, "fail", "without 'compute'"),
    ({"NVIDIA_DRIVER_CAPABILITIES": "graphics,display"}, "fail", "CUDA library is not mounted"),
    ({"LD_LIBRARY_PATH": "/usr/local/cuda/lib64/stubs:/usr/local/cuda/lib64"}, "warn", "the toolkit's stub"),
])
def test_image_env_that_hides_the_gpu_is_reported(env: dict, severity: str, words: str) -> None:
    status, findings = static(make_facts(gpus=[], env={**make_facts().env, **env}))
    assert status == severity
    assert words in findings[0].title
    assert findings[0].fix


@pytest.mark.parametrize("env", [
    {"NVIDIA_DRIVER_CAPABILITIES": "compute,utility", "NVIDIA_VISIBLE_DEVICES": "all"},
    {"NVIDIA_DRIVER_CAPABILITIES": "all", "CUDA_VISIBLE_DEVICES": "0"},
    {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib:/usr/local/nvidia/lib64"},
])
def test_image_env_of_nvidia_base_images_is_ok(env: dict) -> None:
    status, findings = static(make_facts(gpus=[], env={**make_facts().env, **env}))
    assert status == "ok", findings


def test_image_env_check_only_runs_for_images() -> None:
    report = diagnose(make_facts(env__CUDA_VISIBLE_DEVICES=""), checks=[by_id("image.env_blocks_gpu")])  # type: ignore[list-item]
    assert report.checks[0].status == "not_applicable"
