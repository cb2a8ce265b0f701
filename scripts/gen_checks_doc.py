#!/usr/bin/env python3
"""Write docs/checks.md from the check registry, with a real example finding for every check.

Each example is the check run on the healthy test host (tests/factories.py) with one thing broken,
so the page shows exactly what a user sees. A check's example lives beside its tests: ``DOC_EXAMPLES`` in its
tests/test_checks_*.py module (check id → (what is broken, the facts)); EXAMPLES below holds the older ones. So a new
check touches its module, its test and this page, nothing else. Usage: python scripts/gen_checks_doc.py [--check]
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from factories import H100, make_facts, torch_env  # noqa: E402

from doctor.checks import REGISTRY  # noqa: E402
from doctor.matrix import current  # noqa: E402
from doctor.model.facts import (  # noqa: E402
    ContainerToolkit,
    Cudnn,
    LibRef,
    Package,
    PyPackage,
    PythonEnv,
    Toolkit,
)
from doctor.model.facts_active import (  # noqa: E402
    ActiveEnd,
    ActiveFacts,
    ActiveGpu,
    BatchTrial,
    DcgmDiag,
    DcgmMessage,
    DcgmTest,
    DriverTest,
    FrameworkError,
    FrameworkRun,
    FrameworkTest,
    GpuBurn,
    MultiGpu,
    NcclPlace,
    NcclRow,
    NcclTests,
    NvLink,
    NvmlReading,
    TorchRun,
    Verified,
)
from doctor.pipeline import diagnose  # noqa: E402
from doctor.registry import Context  # noqa: E402
from doctor.render.text import _finding_lines  # noqa: E402

OUT = REPO / "docs" / "checks.md"

TF_GPU = PythonEnv(executable="/venv/bin/python", version="3.11.9", origin="VIRTUAL_ENV",
                   packages=[PyPackage("tensorflow", "2.15.1", cuda="12.2", cudnn="8", cpu_only=False)])

def _env(*pkgs: PyPackage) -> list[PythonEnv]:
    return [PythonEnv(executable="/venv/bin/python", version="3.11.9", origin="VIRTUAL_ENV", packages=list(pkgs))]


def _tk(version: str) -> list[Toolkit]:
    return [Toolkit(root=f"/usr/local/cuda-{version[:4]}", version=version, nvcc_version=version, source="path")]


RTX5090 = replace(H100, name="NVIDIA GeForce RTX 5090", compute_capability="12.0")

# Active tests: what `smoke` / `oom` recorded (facts `active`), one thing wrong in each.
A100 = "NVIDIA A100-SXM4-40GB"
GIB = 1 << 30
_EXITED = ActiveEnd(event="exit", returncode=0)


def _active(**kw: Any) -> Any:
    return make_facts(active=ActiveFacts(**kw))


def _driver_test(mode: str, *gpus: ActiveGpu, multi: MultiGpu | None = None) -> DriverTest:
    return DriverTest(mode=mode, device_count=len(gpus), gpus=list(gpus), multi_gpu=multi, done=True, end=_EXITED,
                      cuda_driver_version=12040)


_NVLINK = {"0": [NvLink(0, True, 4, "00000000:2A:00.0"), NvLink(1, False, 4, "00000000:2A:00.0")],
           "1": [NvLink(0, True, 4, "00000000:18:00.0"), NvLink(1, False, 4, "00000000:18:00.0")]}
ACTIVE_EXAMPLES: dict[str, tuple[str, Any]] = {
    "active.smoke": ("an A100 whose copy kernel reaches 700 GB/s", _active(smoke=_driver_test("smoke", ActiveGpu(
        0, name=A100, nvml_before=NvmlReading(name=A100), context_created=True, saxpy=Verified(1 << 20, 0),
        device_gbs=700.0)))),
    "active.oom": ("half of an A10's memory used by another container NVML cannot see", _active(oom=_driver_test(
        "oom", ActiveGpu(0, name="NVIDIA A10", refused=True, refused_reason="memory_in_use", nvml_before=NvmlReading(
            name="NVIDIA A10", memory_total=24 * GIB, memory_used=12 * GIB, processes=None))))),
    "active.multi_gpu": ("two H100s with one of their NVLink links down", _active(smoke=_driver_test(
        "smoke", ActiveGpu(0, name=H100.name), ActiveGpu(1, name=H100.name), multi=MultiGpu(
            gpus=[0, 1], bus_ids={"0": "00000000:18:00.0", "1": "00000000:2A:00.0"}, topology={"0-1": 40},
            nvlinks=_NVLINK, can_access_peer={"0>1": True, "1>0": True})))),
    "active.frameworks": ("a CPU-only torch build", _active(frameworks=FrameworkTest(
        pythons=["/venv/bin/python"], requested=["torch"], runs=[FrameworkRun(
            "torch", "/venv/bin/python", installed=True, version="2.13.0+cpu", ok=False, end=_EXITED,
            error=FrameworkError("AssertionError", "AssertionError: Torch not compiled with CUDA enabled",
                                 "a tensor on cuda:0"))]))),
    "active.torch": ("a model whose batch of 1 does not fit", _active(torch=[TorchRun(
        "batch", "/venv/bin/python", installed=True, version="2.5.1+cu124", gpu_name="NVIDIA A10", ok=True,
        largest_batch=0, cap=4096, end=_EXITED, trials=[BatchTrial(1, False, 23 * GIB, 23 * GIB)])])),
    "active.gpu_burn": ("gpu-burn marks GPU 1 FAULTY and exits 0", _active(gpu_burn=GpuBurn(
        command=["gpu_burn", "60"], seconds=60, returncode=0, tested=2, verdicts={"0": "OK", "1": "FAULTY"},
        last_errors=[0, 4096], temps=[71, 74], aborted=False))),
    "active.dcgm": ("DCGM's memory test fails on GPU 1", _active(dcgm=DcgmDiag(
        level=1, returncode=226, version="3.3.5", table=True, tests=[DcgmTest(
            "Hardware", "GPU Memory", "Fail", "GPU1", [DcgmMessage(
                "Error", "GPU 1: Memory test failed: 12 miscompares. Drain the GPU and reset it.")])]))),
    "active.nccl_tests": ("an all-reduce that returns wrong sums", _active(nccl_tests=NcclTests(
        argv=["all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-g", "8"], returncode=0, old_format=False,
        rows=[NcclRow(1 << 30, 1 << 28, "float", "sum", -1, NcclPlace(9000.0, 119.3, 208.8, 3),
                      NcclPlace(8990.0, 119.4, 209.0, 0))], out_of_bounds=0, avg_busbw=150.2))),
}
EXAMPLES: dict[str, tuple[str, Any]] = {
    "driver.too_old_for_cuda_runtime": ("a CUDA 13.0 toolkit on driver 535", make_facts(
        driver__kernel_module="535.104.05", driver__userspace="535.104.05", toolkits=_tk("13.0.0"),
        gpus=[RTX5090.__class__(**{**H100.__dict__, "name": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9"})])),
    "driver.too_old_for_gpu": ("an RTX 5090 on R550", make_facts(
        driver__kernel_module="550.120", driver__userspace="550.120", gpus=[RTX5090])),
    "driver.gpu_unsupported_by_driver": ("a Tesla K80 on R535", make_facts(
        gpus=[replace(H100, name="Tesla K80", compute_capability="3.7")], driver__kernel_module="535.104.05",
        driver__userspace="535.104.05")),
    "framework.arch_unsupported": ("torch 2.5.1 (cu124) on an RTX 5090", make_facts(
        driver__kernel_module="570.133.07", driver__userspace="570.133.07", gpus=[RTX5090],
        python_envs=_env(PyPackage("torch", "2.5.1", cuda="12.4", cpu_only=False)))),
    "framework.cuda_newer_than_driver": ("torch cu121 on driver 470 with a GeForce card", make_facts(
        driver__kernel_module="470.223.02", driver__userspace="470.223.02",
        gpus=[replace(H100, name="NVIDIA GeForce RTX 3090", compute_capability="8.6")],
        python_envs=_env(PyPackage("torch", "2.5.1+cu121", cuda="12.1", cpu_only=False)))),
    "framework.nvcc_mismatch_for_extensions": ("nvcc 11.8 and torch cu121", make_facts(
        loader__nvcc_on_path=LibRef("/usr/local/cuda-11.8/bin/nvcc", "11.8.89"),
        python_envs=_env(PyPackage("torch", "2.3.1", cuda="12.1", cpu_only=False)))),
    "framework.libs_shadowed": ("a CUDA 11.8 cuDNN first on LD_LIBRARY_PATH", make_facts(
        env__LD_LIBRARY_PATH="/usr/local/cuda-11.8/lib64",
        loader__libcudnn=LibRef("/usr/local/cuda-11.8/lib64/libcudnn.so.8", "8.9.7"))),
    "cudnn.cuda_mismatch": ("a cuDNN 8.2 header beside CUDA 12.4", make_facts(
        cudnn=[Cudnn("8.2.1", "/usr/include/cudnn_version.h", "header")])),
    "cudnn.version_mismatch": ("TensorFlow 2.15 (cuDNN 8) with the cuDNN 9 wheel", make_facts(
        python_envs=_env(PyPackage("tensorflow", "2.15.1", cuda="12.2", cudnn="8", cpu_only=False),
                         PyPackage("nvidia-cudnn-cu12", "9.1.0.70", cudnn="9.1.0.70")))),
    "toolkit.gpu_arch_unsupported": ("CUDA 13.0 for a GeForce GTX 1080", make_facts(
        toolkits=_tk("13.0.0"), gpus=[replace(H100, name="NVIDIA GeForce GTX 1080", compute_capability="6.1")])),
    "toolkit.host_compiler_unsupported": ("gcc 14 with CUDA 12.4", make_facts(host__gcc="14.2.0")),
    "image.min_host_driver": ("`check --static` on an image with torch cu124 and CUDA 12.4 (static only)", make_facts(
        gpus=[], toolkits=_tk("12.4.1"))),
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
    "driver.missing": ("a GPU on the PCI bus, no driver", make_facts(
        driver__userspace=None, driver__kernel_module=None, driver__packages=[], driver__cuda_driver_api=None,
        driver__module_loaded=False, loader__libcuda=None,
        gpus=[replace(H100, name=None, uuid=None, source="pci", pci_bus_id="0000:3b:00.0")])),
    "driver.not_loaded": ("Debian's 535 user space, no module, no GPU on the bus", make_facts(
        driver__userspace="535.309.01", driver__kernel_module=None, driver__module_loaded=False,
        driver__nvml_error="Driver Not Loaded",
        driver__cuda_init_error="CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected",
        host__pci_nvidia_gpus=0, gpus=[])),
    "driver.module_userspace_mismatch": ("an upgrade without a reboot", make_facts(
        driver__kernel_module="535.104.05", driver__userspace="535.129.03",
        driver__nvml_error="Driver/library version mismatch",
        driver__packages=[Package("nvidia-driver-535", "535.129.03-0ubuntu1", "dpkg")])),
    "driver.module_missing_for_kernel": ("a kernel update the DKMS build missed", make_facts(
        driver__next_boot_kernel="5.15.0-107-generic", driver__module_for_next_boot_kernel=False)),
    "nouveau.active": ("nouveau bound at boot", make_facts(driver__nouveau_loaded=True)),
    "secureboot.blocks_module": ("Secure Boot refusing the unsigned module", make_facts(
        driver__secure_boot=True, driver__module_loaded=False, driver__kernel_module=None,
        gpus=[replace(H100, name=None, uuid=None, source="pci")])),
    "driver.branch_eol": ("driver R535 on 2026-11-23 (end of life June 2026)", make_facts(
        driver__kernel_module="535.261.03", driver__userspace="535.261.03", collected_at="2026-11-23T10:00:00+00:00")),
    "toolkit.missing": ("no toolkit, torch brings its own runtime", make_facts(
        toolkits=[], loader=replace(make_facts().loader, nvcc_on_path=None, libcudart=None))),
    "toolkit.multiple_conflicting": ("nvcc 11.8 first on PATH, libcudart 12.4", make_facts(
        loader__nvcc_on_path=LibRef("/usr/local/cuda-11.8/bin/nvcc", "11.8.89"))),
    "toolkit.path_not_set": ("CUDA installed, PATH not updated", make_facts(loader__nvcc_on_path=None)),
    "cudnn.missing": ("TensorFlow GPU build, no cuDNN anywhere", make_facts(cudnn=[], python_envs=[TF_GPU])),
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
            torch_env("2.5.1", cuda="12.4").packages[0], deep=__import__("doctor.model.facts", fromlist=["DeepResult"])
            .DeepResult(is_available=False, device_count=0, cuda="12.4"))])])),
    "loader.libcuda_stub": ("the toolkit's stubs directory on LD_LIBRARY_PATH", make_facts(
        loader__libcuda=LibRef("/usr/local/cuda-12.4/lib64/stubs/libcuda.so", None, stub=True),
        env__LD_LIBRARY_PATH="/usr/local/cuda-12.4/lib64/stubs")),
    "driver.forward_compat": ("a cuda-compat libcuda on a GeForce card", make_facts(
        driver__kernel_module="535.104.05",
        loader__libcuda=LibRef("/usr/local/cuda-13.0/compat/libcuda.so.1", "580.65.06", stub=False),
        gpus=[replace(H100, name="NVIDIA GeForce RTX 4090", compute_capability="8.9")])),
    "toolkit.cuda_home_invalid": ("CUDA_HOME left pointing at a removed toolkit", make_facts(
        env__CUDA_HOME="/usr/local/cuda-11.7",
        errors=[__import__("doctor.model.facts", fromlist=["ProbeError"]).ProbeError(
            "toolkits", "CUDA_HOME=/usr/local/cuda-11.7 does not exist")])),
    "wsl.driver": ("a Linux driver installed inside WSL2", make_facts(
        host__wsl=True, loader__libcuda=LibRef("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "550.54.14"))),
    **ACTIVE_EXAMPLES,
}


def examples() -> dict[str, tuple[str, Any]]:
    """Every check's example: the table above and each test module's DOC_EXAMPLES (a check has one, once)."""
    out = dict(EXAMPLES)
    for path in sorted((REPO / "tests").glob("test_checks_*.py")):
        if not re.search(r"^DOC_EXAMPLES\b", path.read_text(encoding="utf-8"), re.M):
            continue  # imported only where examples are declared
        for check_id, example in getattr(importlib.import_module(path.stem), "DOC_EXAMPLES", {}).items():
            if check_id in out:
                raise SystemExit(f"two examples for {check_id}: {path.name} and another")
            out[check_id] = example
    return out


def render() -> str:
    every = examples()
    lines = [
        "# gpu-doctor checks",
        "",
        "Generated by `scripts/gen_checks_doc.py` from the check registry; do not edit by hand.",
        "Every finding has a stable dotted `code`; `gpu-doctor check CODE…` runs only those checks and",
        "`gpu-doctor check --list-checks` lists them. Severities: `fail` (exit 1), `warn` (exit 1 with",
        "`--strict`), `info`, `ok`. A check whose facts are unknown is *skipped* with its reason; one that",
        "does not concern the machine is *not applicable*; one that crashes yields `doctor.check_crashed`.",
        "",
        "| code | area | what it checks |",
        "| --- | --- | --- |",
    ]
    lines += [f"| [`{c.id}`](#{c.id.replace('.', '')}) | {c.area} | {c.summary} |" for c in REGISTRY]
    lines.append("")
    for chk in REGISTRY:
        what, facts = every[chk.id]
        report = diagnose(facts, checks=[chk], ctx=Context(matrix=current(), options={"static": chk.id.startswith(
            "image.")}))
        shown = [f for f in report.findings if f.severity != "ok"] or report.findings
        if not shown:
            raise SystemExit(f"the example for {chk.id} gives no finding: {report.checks[0].status} "
                             f"({report.checks[0].reason})")
        lines += [f"## {chk.id}", "", f"**Area:** {chk.area}. {chk.summary}", ""]
        if chk.all_codes != (chk.id,):
            lines += ["**Finding codes:** " + ", ".join(f"`{c}`" for c in chk.all_codes), ""]
        lines += [f"Example — {what}:", "", "```"]
        for f in shown:
            lines += _finding_lines(f, verbose=False, colour=False)
        lines += ["```", "", "<details><summary>JSON</summary>", "", "```json",
                  json.dumps(shown[0].to_dict(), indent=2, ensure_ascii=False), "```", "", "</details>", ""]
    lines += ["## doctor.check_crashed", "",
              "A check raised an exception: a bug in gpu-doctor. The other checks still run; the report carries "
              "this `warn` finding with the check's id in its evidence.", ""]
    return "\n".join(lines)


def main() -> int:
    missing = [c.id for c in REGISTRY if c.id not in examples()]
    if missing:
        print("no example for: " + ", ".join(missing))
        return 1
    text = render()
    if "--check" in sys.argv:
        if not OUT.exists() or OUT.read_text() != text:
            print("docs/checks.md is stale: run scripts/gen_checks_doc.py")
            return 1
        return 0
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
