"""image.env_blocks_gpu: ENV lines baked into an image that keep its containers away from the GPU.

Rules from NVIDIA's container toolkit documentation (docker-specialized.html: 'compute' is required for
CUDA; NVIDIA_VISIBLE_DEVICES void/empty behaves like runc, none passes no GPU) and the CUDA runtime API
(cudaErrorStubLibrary: the stub libcuda loaded instead of the driver's).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from factories import H100, make_facts

from doctor.checks import by_id
from doctor.matrix import current
from doctor.model.facts import LibRef
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


# --- image.require_cuda: NVIDIA_REQUIRE_CUDA against the future host ------------------------------------------

REQ_128 = ("cuda>=12.8 brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 "
           "brand=quadro,driver>=550,driver<551")


def judged(check_id: str, **overrides):  # type: ignore[no-untyped-def]
    report = diagnose(make_facts(**overrides), checks=[by_id(check_id)],  # type: ignore[list-item]
                      ctx=Context(matrix=current(), options={"static": True}))
    return report.checks[0].status, report.findings


def gpu(name: str, cc: str):  # type: ignore[no-untyped-def]
    from doctor.model.facts import Gpu

    return [Gpu(index=0, name=name, compute_capability=cc, source="target")]


@pytest.mark.parametrize(("driver", "gpus", "severity", "words"), [
    ("570.86.10", gpu("NVIDIA H100 80GB HBM3", "9.0"), "ok", "meets"),
    ("535.104.05", gpu("NVIDIA H100 80GB HBM3", "9.0"), "ok", "driver>=535,driver<536"),
    ("535.104.05", gpu("NVIDIA GeForce RTX 4090", "8.9"), "fail", "refuses to start this image on driver 535.104.05"),
    ("550.54.14", gpu("NVIDIA H100 80GB HBM3", "9.0"), "fail", "needs driver ≥ 570.26"),  # 550 is quadro's only
    ("535.104.05", [], "warn", "only for some GPUs"),
    ("470.256.02", [], "fail", "refuses to start"),
])
def test_require_cuda_against_the_host(driver: str, gpus, severity: str, words: str) -> None:  # type: ignore[no-untyped-def]
    status, found = judged("image.require_cuda", env__NVIDIA_REQUIRE_CUDA=REQ_128, driver__userspace=driver,
                           driver__kernel_module=driver, gpus=gpus)
    assert status == severity
    assert words in found[0].title
    if severity == "fail":
        assert found[0].fix and "FROM" in found[0].fix.summary


def test_require_cuda_needs_a_host_driver_and_a_requirement() -> None:
    assert judged("image.require_cuda", env__NVIDIA_REQUIRE_CUDA=REQ_128, driver__userspace=None,
                  driver__kernel_module=None)[0] == "not_applicable"
    assert judged("image.require_cuda", driver__userspace="535.104.05")[0] == "not_applicable"
    assert judged("image.require_cuda", env__NVIDIA_REQUIRE_CUDA=REQ_128, env__NVIDIA_DISABLE_REQUIRE="true",
                  driver__userspace="470.256.02", driver__kernel_module="470.256.02")[0] == "not_applicable"


# --- image.forward_compat: the cuda-compat libcuda forced on every host ------------------------------------


def test_forward_compat_forced_through_the_loader_path() -> None:
    from doctor.model.facts import LibRef

    status, found = judged("image.forward_compat", gpus=[],
                           loader__libcuda=LibRef("/usr/local/cuda-12.4/compat/libcuda.so.1"))
    assert status == "warn" and "804" in found[0].title and "803" in found[0].title
    status, found = judged("image.forward_compat", gpus=gpu("NVIDIA GeForce RTX 4090", "8.9"),
                           env__LD_LIBRARY_PATH="/usr/local/cuda/compat:/usr/local/nvidia/lib64")
    assert status == "fail" and "RTX 4090" in found[0].title
    status, _found = judged("image.forward_compat", gpus=gpu("NVIDIA H100 80GB HBM3", "9.0"),
                            env__LD_LIBRARY_PATH="/usr/local/cuda/compat")
    assert status == "warn"  # a data-center GPU runs it, but only on the driver branches it was made for


def test_no_forward_compat_is_not_applicable() -> None:
    assert judged("image.forward_compat", gpus=[], env__LD_LIBRARY_PATH="/usr/local/cuda/lib64")[0] == \
        "not_applicable"


# The example docs/checks.md shows for each check of doctor/checks/image.py (scripts/gen_checks_doc.py reads it).
DOC_EXAMPLES = {
    "image.env_blocks_gpu": ("`check --dockerfile` on an image with ENV NVIDIA_DRIVER_CAPABILITIES=utility (static "
                             "only)", make_facts(gpus=[], env__NVIDIA_DRIVER_CAPABILITIES="utility")),
    "image.require_cuda": ("`check --dockerfile … --host-driver 535.104.05 --target-gpu \"RTX 4090\"` on an "
                           "nvidia/cuda 12.8 image (static only)", make_facts(
        driver__kernel_module="535.104.05", driver__userspace="535.104.05",
        gpus=[replace(H100, name="NVIDIA GeForce RTX 4090", compute_capability="8.9")],
        env__NVIDIA_REQUIRE_CUDA="cuda>=12.8 brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536")),
    "image.forward_compat": ("`check --dockerfile` on an image that runs `ldconfig /usr/local/cuda-12.4/compat` "
                             "(static only)", make_facts(
        gpus=[], loader__libcuda=LibRef("/usr/local/cuda-12.4/compat/libcuda.so.1"))),
}
