"""Matrix-driven checks on real (driver, GPU, toolkit, cuDNN, framework) combinations.

Each row's right answer is stated by the source named beside it: NVIDIA's release-notes table
"CUDA Toolkit and Corresponding Driver Versions" (RN), the CUDA Compatibility guide's minor-version
(MVC) and forward-compatibility (FWD) sections, NVIDIA's driver branch support for GPU
architectures (ARCH), the toolkits' own GPU target lists and host_config.h (SM, GCC), cuDNN's
support matrix (CUDNN), PyTorch's build arch lists (TORCH) and TensorFlow's tested configurations (TF).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from conftest import run_check
from factories import H100, make_facts, toolkits_of, venv_with

from doctor.matrix import bundled, driver_runs_cuda
from doctor.model.facts import Cudnn, DeepResult, Gpu, LibRef, Package, PyPackage, PythonEnv, Toolkit


def gpu(name: str, cc: str | None = None, **kw: Any) -> Gpu:
    return replace(H100, name=name, compute_capability=cc, **kw)


def toolkit(version: str, root: str | None = None) -> Toolkit:
    return Toolkit(root=root or f"/usr/local/cuda-{version[:4].rstrip('.')}", version=version,
                   nvcc_version=version, source="path")


def env(*pkgs: PyPackage) -> list[PythonEnv]:
    return [PythonEnv(executable="/venv/bin/python", version="3.11.9", origin="VIRTUAL_ENV", packages=list(pkgs))]


def torch(version: str, cuda: str | None, **kw: Any) -> PyPackage:
    return PyPackage("torch", version, cuda=cuda, cpu_only=cuda is None, **kw)


def driver(version: str, **kw: Any) -> dict[str, Any]:
    return {"driver__kernel_module": version, "driver__userspace": version, **kw}


def outcome(facts: Any, check_id: str) -> tuple[str, list]:
    report = run_check(facts, check_id)
    (result,) = report.checks
    return result.status, report.findings


A100 = gpu("NVIDIA A100-SXM4-80GB", "8.0")
RTX4090 = gpu("NVIDIA GeForce RTX 4090", "8.9")
RTX5090 = gpu("NVIDIA GeForce RTX 5090", "12.0")
GTX1080 = gpu("NVIDIA GeForce GTX 1080", "6.1")
P100 = gpu("Tesla P100-PCIE-16GB", "6.0")
K80 = gpu("Tesla K80", "3.7")
T4 = gpu("Tesla T4", "7.5")
B200 = gpu("NVIDIA B200", "10.0")


# --- driver vs CUDA runtime: the rule engine on NVIDIA's own examples --------------------------

VERDICTS = [
    # (driver, CUDA runtime, GPU segment, compat packages, ok, rule)          source
    ("530.30.02", "12.1", "consumer", (), True, "native"),                    # RN: 12.1 GA needs 530.30.02
    ("530.30.02", "12.4", "consumer", (), True, "minor-version"),             # MVC: 12.x on >= 525.60.13
    ("525.60.13", "12.8", "consumer", (), True, "minor-version"),             # MVC floor exactly
    ("525.60.12", "12.0", "consumer", (), False, "too-old"),                  # RN: 12.0 GA needs 525.60.13
    ("520.61.05", "11.8", "datacenter", (), True, "native"),                  # RN: 11.8 GA
    ("470.82.01", "11.8", "consumer", (), True, "minor-version"),             # MVC: 11.x on >= 450.80.02
    ("450.80.02", "11.4", "consumer", (), True, "minor-version"),             # MVC floor for 11
    ("440.33", "11.0", "consumer", (), False, "too-old"),                     # RN: 11.0 needs 450.x
    ("470.82.01", "12.1", "consumer", (), False, "too-old"),                  # CUDA 12 on R470 GeForce
    ("535.104.05", "12.2", "datacenter", (), True, "native"),                 # RN: 12.2 U2 needs 535.104.05
    ("535.104.05", "12.4", "datacenter", (), True, "minor-version"),          # MVC
    ("535.104.05", "13.0", "datacenter", (), False, "forward-compat-needs-package"),  # FWD: cuda-compat-13-0 on R535
    ("535.104.05", "13.0", "datacenter", ("cuda-compat-13-0",), True, "forward-compat"),
    ("535.104.05", "13.0", "consumer", (), False, "too-old"),                 # FWD: not for GeForce
    ("535.104.05", "13.0", None, (), False, "too-old"),                       # segment unknown: no claim
    ("580.65.06", "13.0", "consumer", (), True, "native"),                    # RN: 13.0 GA
    ("580.65.06", "12.8", "consumer", (), True, "native"),                    # RN: 12.8 needs 570.26
    ("570.26", "12.8", "consumer", (), True, "native"),                       # RN: 12.8 GA
    ("570.26", "12.9", "consumer", (), True, "minor-version"),                # RN 12.9 needs 575.51.03; MVC
    ("550.54.14", "12.4", "consumer", (), True, "native"),                    # RN: 12.4 GA
    ("550.54.14", "13.0", "datacenter", (), False, "too-old"),                # FWD: 13-0 lists R535, R570 only
    ("410.48", "10.0", "consumer", (), True, "native"),                       # RN: 10.0.130
    ("418.39", "10.2", "consumer", (), False, "too-old"),                     # RN: 10.2 needs 440.33; no MVC for 10
]


@pytest.mark.parametrize(("drv", "cuda", "segment", "compat", "ok", "rule"), VERDICTS)
def test_driver_runs_cuda_follows_nvidia_rules(drv: str, cuda: str, segment: str | None, compat: tuple,
                                               ok: bool, rule: str) -> None:
    v = driver_runs_cuda(bundled(), drv, cuda, segment, compat)
    assert (v.ok, v.rule) == (ok, rule), v.explanation
    assert all(r.get("source", "").startswith("https://") for r in v.rows if r)


def test_unknown_driver_version_falls_back_to_the_driver_api() -> None:
    # nvidia-smi's "CUDA Version" / cuDriverGetVersion is the driver's maximum, not a toolkit.
    m = bundled()
    assert driver_runs_cuda(m, None, "12.2", driver_api="12.2").rule == "native"
    assert driver_runs_cuda(m, None, "12.4", driver_api="12.2").rule == "minor-version"
    assert not driver_runs_cuda(m, None, "13.0", driver_api="12.2").ok


def test_wsl_compares_against_the_windows_driver_column() -> None:
    # Under WSL2 NVML reports the Windows driver (551.61 = CUDA 12.4 GA's Windows minimum, RN).
    m = bundled()
    assert driver_runs_cuda(m, "551.61", "12.4", windows=True).rule == "native"
    # 551.00 is past the Linux minimum (550.54.14) but short of the Windows one (551.61).
    assert driver_runs_cuda(m, "551.00", "12.4", windows=False).rule == "native"
    assert driver_runs_cuda(m, "551.00", "12.4", windows=True).rule == "minor-version"
    assert not driver_runs_cuda(m, "527.40", "12.0", windows=True).ok  # RN: 12.0 Windows needs 527.41


# --- the checks on whole machines ---------------------------------------------------------------

CASES = [
    # (id, facts overrides, check, severity, words in the title)
    ("cuda13-toolkit-on-535", {**driver("535.309.01"), "toolkits": [toolkit("13.0.0")], "gpus": [RTX4090]},
     "driver.too_old_for_cuda_runtime", "fail", ["CUDA toolkit 13.0.0", "535.309.01"]),
    ("cuda13-toolkit-on-535-h100-needs-compat", {**driver("535.104.05"), "toolkits": [toolkit("13.0.0")],
                                                 "gpus": [H100]},
     "driver.too_old_for_cuda_runtime", "fail", ["needs a newer driver"]),
    ("cuda13-toolkit-on-535-h100-with-compat", {**driver("535.104.05", driver__packages=[
        Package("cuda-compat-13-0", "580.65.06-1", "dpkg")]), "toolkits": [toolkit("13.0.0")], "gpus": [H100]},
     "driver.too_old_for_cuda_runtime", "ok", ["forward-compat"]),
    ("cuda124-toolkit-on-550", {**driver("550.90.07"), "toolkits": [toolkit("12.4.1")]},
     "driver.too_old_for_cuda_runtime", "ok", ["native"]),
    # a toolkit newer than the driver (same major): its SASS runs, but the PTX it emits does not load
    ("cuda124-toolkit-on-535-mvc", {**driver("535.104.05"), "toolkits": [toolkit("12.4.1")]},
     "driver.too_old_for_cuda_runtime", "warn", ["minor-version", "unsupported toolchain"]),
    ("torch-cu121-on-530", {**driver("530.30.02"), "python_envs": env(torch("2.1.2", "12.1"))},
     "framework.cuda_newer_than_driver", "ok", ["torch 2.1.2", "native"]),
    ("torch-cu124-on-535", {**driver("535.104.05"), "python_envs": env(torch("2.5.1", "12.4"))},
     "framework.cuda_newer_than_driver", "ok", ["minor-version"]),
    ("torch-cu121-on-470-geforce", {**driver("470.223.02"), "gpus": [RTX4090.__class__(**{
        **RTX4090.__dict__, "name": "NVIDIA GeForce RTX 3090", "compute_capability": "8.6"})],
        "python_envs": env(torch("2.5.1", "12.1"))},
     "framework.cuda_newer_than_driver", "fail", ["torch 2.5.1 needs a newer driver than 470.223.02"]),
    ("torch-cu118-on-470-mvc", {**driver("470.223.02"), "python_envs": env(torch("2.1.2", "11.8"))},
     "framework.cuda_newer_than_driver", "ok", ["minor-version"]),
    ("tf-cuda-12.3-on-535", {**driver("535.104.05"), "python_envs": env(
        PyPackage("tensorflow", "2.16.1", cuda="12.3", cudnn="8", cpu_only=False))},
     "framework.cuda_newer_than_driver", "ok", ["tensorflow 2.16.1"]),
    ("cupy-cuda12x-on-470", {**driver("470.82.01"), "python_envs": env(
        PyPackage("cupy-cuda12x", "13.3.0", cuda="12", cpu_only=False))},
     "framework.cuda_newer_than_driver", "fail", ["cupy-cuda12x 13.3.0"]),
    ("rtx5090-on-550", {**driver("550.120"), "gpus": [RTX5090]},
     "driver.too_old_for_gpu", "fail", ["NVIDIA GeForce RTX 5090 (Blackwell) needs driver ≥ 570.26; found 550.120"]),
    ("rtx5090-on-570", {**driver("570.133.07"), "gpus": [RTX5090]},
     "driver.too_old_for_gpu", "ok", ["new enough for NVIDIA GeForce RTX 5090"]),
    ("rtx4090-on-520", {**driver("520.61.05"), "gpus": [RTX4090]}, "driver.too_old_for_gpu", "ok", ["Ada"]),
    ("rtx4090-on-515", {**driver("515.105.01"), "gpus": [RTX4090]}, "driver.too_old_for_gpu", "fail",
     ["needs driver ≥ 520.61.05"]),
    ("h100-on-515", {**driver("515.65.01"), "gpus": [H100]}, "driver.too_old_for_gpu", "fail", ["Hopper"]),
    ("k80-on-535", {**driver("535.104.05"), "gpus": [K80]}, "driver.gpu_unsupported_by_driver", "fail",
     ["Driver branch 535 no longer supports Tesla K80 (Kepler)", "R470"]),
    ("k80-on-470", {**driver("470.256.02"), "gpus": [K80]}, "driver.gpu_unsupported_by_driver", "ok", ["Kepler"]),
    ("p100-on-590", {**driver("590.44.01"), "gpus": [P100]}, "driver.gpu_unsupported_by_driver", "fail",
     ["R580"]),
    ("p100-on-580", {**driver("580.95.05"), "gpus": [P100]}, "driver.gpu_unsupported_by_driver", "ok", ["Pascal"]),
    ("gtx1080-open-module", {**driver("560.35.03", driver__module_flavor="open"), "gpus": [GTX1080]},
     "driver.gpu_unsupported_by_driver", "fail", ["open NVIDIA kernel module does not support"]),
    ("t4-open-module", {**driver("560.35.03", driver__module_flavor="open"), "gpus": [T4]},
     "driver.gpu_unsupported_by_driver", "ok", ["Turing"]),
    ("rtx5090-proprietary-module", {**driver("570.133.07", driver__module_flavor="proprietary"), "gpus": [RTX5090]},
     "driver.gpu_unsupported_by_driver", "fail", ["requires the open NVIDIA kernel module"]),
    ("cuda13-for-gtx1080", {"toolkits": [toolkit("13.0.0")], "gpus": [GTX1080]},
     "toolkit.gpu_arch_unsupported", "fail", ["CUDA 13.0 cannot compile for NVIDIA GeForce GTX 1080 (sm_61)",
                                              "sm_75"]),
    ("cuda124-for-rtx5090", {"toolkits": [toolkit("12.4.1")], "gpus": [RTX5090]},
     "toolkit.gpu_arch_unsupported", "warn", ["only run PTX"]),
    ("cuda128-for-rtx5090", {"toolkits": [toolkit("12.8.1")], "gpus": [RTX5090]},
     "toolkit.gpu_arch_unsupported", "ok", ["sm_120"]),
    ("cuda118-for-h100", {"toolkits": [toolkit("11.8.0")], "gpus": [H100]},
     "toolkit.gpu_arch_unsupported", "ok", ["sm_90"]),
    ("cuda118-for-k80", {"toolkits": [toolkit("11.8.0")], "gpus": [K80]},
     "toolkit.gpu_arch_unsupported", "ok", ["sm_37"]),
    ("cuda120-for-k80", {"toolkits": [toolkit("12.0.1")], "gpus": [K80]},
     "toolkit.gpu_arch_unsupported", "fail", ["cannot compile for Tesla K80 (sm_37)"]),
    ("gcc14-cuda124", {"host__gcc": "14.2.0", "toolkits": [toolkit("12.4.1")]},
     "toolkit.host_compiler_unsupported", "warn", ["gcc 14.2.0 is newer than CUDA 12.4's nvcc accepts (≤ 13)"]),
    ("gcc13-cuda124", {"host__gcc": "13.3.0", "toolkits": [toolkit("12.4.1")]},
     "toolkit.host_compiler_unsupported", "ok", ["supported"]),
    ("gcc12-cuda130", {"host__gcc": "12.2.0", "toolkits": [toolkit("13.0.0")]},
     "toolkit.host_compiler_unsupported", "ok", ["supported"]),
    ("gcc15-cuda128", {"host__gcc": "15.1.1", "toolkits": [toolkit("12.8.1")]},
     "toolkit.host_compiler_unsupported", "warn", ["≤ 14"]),
    ("nvcc118-torch-cu121", {"loader__nvcc_on_path": LibRef("/usr/local/cuda-11.8/bin/nvcc", "11.8.89"),
                             "python_envs": env(torch("2.3.1", "12.1"))},
     "framework.nvcc_mismatch_for_extensions", "warn", ["nvcc is CUDA 11.8 but torch 2.3.1 was built with CUDA 12.1"]),
    ("nvcc124-torch-cu121", {"loader__nvcc_on_path": LibRef("/usr/local/cuda-12.4/bin/nvcc", "12.4.131"),
                             "python_envs": env(torch("2.3.1", "12.1"))},
     "framework.nvcc_mismatch_for_extensions", "ok", ["matches"]),
    ("ld-library-path-shadows-cudnn-wheel", {
        "env__LD_LIBRARY_PATH": "/usr/local/cuda-11.8/lib64",
        "loader__libcudnn": LibRef("/usr/local/cuda-11.8/lib64/libcudnn.so.8", "8.9.7"),
        "python_envs": env(PyPackage("tensorflow", "2.16.1", cuda="12.3", cudnn="8", cpu_only=False),
                           PyPackage("nvidia-cudnn-cu12", "9.1.0.70", cudnn="9.1.0.70"))},
     "framework.libs_shadowed", "warn", ["/usr/local/cuda-11.8/lib64/libcudnn.so.8", "nvidia-cudnn-cu12 9.1.0.70"]),
    # torch's wheels reach their nvidia-* wheels through DT_RPATH, searched before LD_LIBRARY_PATH
    ("torch-rpath-wins-over-ld-library-path", {
        "env__LD_LIBRARY_PATH": "/usr/local/cuda-11.8/lib64",
        "loader__libcudnn": LibRef("/usr/local/cuda-11.8/lib64/libcudnn.so.8", "8.9.7"),
        "python_envs": env(torch("2.5.1", "12.4"), PyPackage("nvidia-cudnn-cu12", "9.1.0.70", cudnn="9.1.0.70"))},
     "framework.libs_shadowed", "ok", ["Nothing on LD_LIBRARY_PATH shadows"]),
    # the CUDA 13 wheels drop the -cuNN suffix for cuBLAS
    ("cuda13-wheel-names-are-recognised", {"python_envs": env(
        torch("2.9.0", "13.0", loaded_libraries=["/usr/lib/x86_64-linux-gnu/libcublas.so.13"]),
        PyPackage("nvidia-cublas", "13.0.0.19"))},
     "framework.libs_shadowed", "warn", ["/usr/lib/x86_64-linux-gnu/libcublas.so.13", "nvidia-cublas 13.0.0.19"]),
    ("deep-shows-system-cudnn-loaded", {"python_envs": env(
        torch("2.5.1", "12.4", loaded_libraries=["/usr/lib/x86_64-linux-gnu/libcudnn.so.9.0.0"]),
        PyPackage("nvidia-cudnn-cu12", "9.1.0.70", cudnn="9.1.0.70"))},
     "framework.libs_shadowed", "warn", ["/usr/lib/x86_64-linux-gnu/libcudnn.so.9.0.0"]),
    ("wheel-cudnn-loaded", {"python_envs": env(
        torch("2.5.1", "12.4", loaded_libraries=[
            "/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9"]),
        PyPackage("nvidia-cudnn-cu12", "9.1.0.70", cudnn="9.1.0.70"))},
     "framework.libs_shadowed", "ok", ["Nothing on LD_LIBRARY_PATH shadows"]),
    ("tf215-cudnn8-with-cudnn9-wheel", {"python_envs": env(
        PyPackage("tensorflow", "2.15.1", cuda="12.2", cudnn="8", cpu_only=False),
        PyPackage("nvidia-cudnn-cu12", "9.1.0.70", cudnn="9.1.0.70"))},
     "cudnn.version_mismatch", "fail", ["built with cuDNN 8 but will load cuDNN 9.1.0.70"]),
    ("tf215-cudnn8-with-cudnn897-wheel", {"python_envs": env(
        PyPackage("tensorflow", "2.15.1", cuda="12.2", cudnn="8", cpu_only=False),
        PyPackage("nvidia-cudnn-cu12", "8.9.7.29", cudnn="8.9.7.29"))},
     "cudnn.version_mismatch", "ok", ["gets cuDNN 8.9.7.29"]),
    # issue 23: torch reports its loaded cuDNN as an integer (92400 for 9.24.0); one representation everywhere
    ("torch-cu13-deep-integer-cudnn-is-decoded", {"python_envs": env(
        torch("2.9.0", "13.0", cudnn="9.13.0.50", deep=DeepResult(is_available=True, cudnn="92400")),
        PyPackage("nvidia-cudnn-cu13", "9.24.0.10", cudnn="9.24.0.10"))},
     "cudnn.version_mismatch", "ok", ["gets cuDNN 9.24.0"]),
    ("torch-cu12-deep-integer-cudnn-8", {"python_envs": env(
        torch("2.1.2", "12.1", cudnn="8.9.2.26", deep=DeepResult(is_available=True, cudnn="8902")),
        PyPackage("nvidia-cudnn-cu12", "8.9.2.26", cudnn="8.9.2.26"))},
     "cudnn.version_mismatch", "ok", ["(cuDNN ≥ 8.9.2) gets cuDNN 8.9.2"]),
    # a second cuDNN wheel of the same major overwrote the one torch pins
    ("second-cudnn-wheel-overwrote-the-pinned-one", {"python_envs": env(
        torch("2.5.1", "12.4", cudnn="9.1.0.70"),
        PyPackage("nvidia-cudnn-cu11", "9.0.0.312", cudnn="9.0.0.312"),
        PyPackage("nvidia-cudnn-cu12", "9.1.0.70", cudnn="9.1.0.70"))},
     "cudnn.version_mismatch", "warn", ["built with cuDNN 9.1.0.70", "nvidia-cudnn-cu11 9.0.0.312",
                                        "installed last"]),
    ("torch-deep-error-names-the-overwriting-cudnn", {"python_envs": env(
        torch("2.5.1", "12.4", cudnn="9.1.0.70", deep=DeepResult(error=(
            "RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (9, 1, 0) but found runtime "
            "version (9, 0, 0). PyTorch already comes bundled with cuDNN."))),
        PyPackage("nvidia-cudnn-cu11", "9.0.0.312", cudnn="9.0.0.312"),
        PyPackage("nvidia-cudnn-cu12", "9.1.0.70", cudnn="9.1.0.70"))},
     "cudnn.version_mismatch", "fail", ["built with cuDNN 9.1.0 but will load cuDNN 9.0.0", "own error"]),
    ("tf-cudnn86-built-loads-81", {"loader__libcudnn": LibRef("/usr/lib/x86_64-linux-gnu/libcudnn.so.8", "8.1.0"),
                                   "python_envs": env(PyPackage("tensorflow", "2.11.0", cuda="11.2", cudnn="8.6",
                                                                cpu_only=False))},
     "cudnn.version_mismatch", "fail", ["built with cuDNN 8.6 but will load cuDNN 8.1.0"]),
]


def test_the_overwritten_cudnn_is_fixed_by_reinstalling_the_wheel_torch_pins() -> None:
    overrides = next(c[1] for c in CASES if c[0] == "second-cudnn-wheel-overwrote-the-pinned-one")
    _status, findings = outcome(make_facts(**overrides), "cudnn.version_mismatch")
    (found,) = findings
    assert "--force-reinstall --no-deps nvidia-cudnn-cu12==9.1.0.70" in (found.fix.summary if found.fix else "")


@pytest.mark.parametrize(("overrides", "check_id", "severity", "words"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_matrix_check_on_a_real_combination(overrides: dict, check_id: str, severity: str, words: list[str]) -> None:
    status, findings = outcome(make_facts(**overrides), check_id)
    shown = [(f.severity, f.title) for f in findings]
    assert findings, (status, shown)
    worst = max(findings, key=lambda f: {"ok": 0, "info": 1, "warn": 2, "fail": 3}[f.severity])
    assert worst.severity == severity, shown
    text = worst.title + " " + worst.detail + " " + " ".join(str(e.value) for e in worst.evidence)
    for w in words:
        assert w in text, (w, shown)


@pytest.mark.parametrize(("overrides", "check_id", "severity", "words"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_matrix_findings_cite_their_sources(overrides: dict, check_id: str, severity: str, words: list[str]) -> None:
    _status, findings = outcome(make_facts(**overrides), check_id)
    if check_id in ("framework.nvcc_mismatch_for_extensions", "framework.libs_shadowed", "cudnn.version_mismatch"):
        return  # rules of the tools themselves, not matrix rows
    cited = [e.source for f in findings for e in f.evidence if str(e.fact).startswith(("compat:", "sm_support",
                                                                                         "host_compiler", "cudnn:"))]
    assert cited and all(str(s).startswith("https://") for s in cited), [f.evidence for f in findings]


@pytest.mark.parametrize("check_id", ["driver.too_old_for_cuda_runtime", "framework.cuda_newer_than_driver",
                                      "driver.too_old_for_gpu", "driver.gpu_unsupported_by_driver"])
def test_unknown_driver_version_skips(check_id: str) -> None:
    facts = make_facts(driver__kernel_module=None, driver__userspace=None, driver__cuda_driver_api=None)
    status, findings = outcome(facts, check_id)
    assert status in ("skipped", "not_applicable") and findings == []


def test_pip_toolkits_do_not_count_as_system_runtimes() -> None:
    facts = make_facts(**driver("470.82.01"), toolkits=[Toolkit("/venv [nvidia-cuda-runtime-cu12]", "12.4", None,
                                                                "pip")], python_envs=[])
    status, _ = outcome(facts, "driver.too_old_for_cuda_runtime")
    assert status == "not_applicable"


@pytest.mark.parametrize(("cudnn", "cuda", "severity"), [
    ("8.2.1", "12.4.1", "warn"),   # CUDNN 8.2.0-8.2.1: 11.0-11.3, 10.2
    ("8.2.1", "11.3.1", "ok"),
    ("8.9.5", "12.2.2", "ok"),     # CUDNN 8.9.5: 12.0-12.2, 11.0-11.8
    ("8.9.5", "12.4.1", "warn"),
    ("9.1.0", "12.4.1", "ok"),     # CUDNN 9.1.0: 12.0-12.4, 11.8, 11.0-11.7
    ("9.0.0", "12.4.1", "warn"),   # CUDNN 9.0.0: 12.0-12.3
    ("9.17.0", "13.0.0", "ok"),    # CUDNN 9.17.0: 13.0-13.1, 12.0-12.9
    ("9.17.0", "11.8.0", "warn"),
])
def test_system_cudnn_against_the_system_toolkit(cudnn: str, cuda: str, severity: str) -> None:
    facts = make_facts(cudnn=[Cudnn(cudnn, "/usr/include/cudnn_version.h", "header")], toolkits=[toolkit(cuda)])
    _status, (f,) = outcome(facts, "cudnn.cuda_mismatch")
    assert f.severity == severity, f.title
    assert any(str(e.source).startswith("https://") for e in f.evidence if e.fact.startswith("cudnn:"))


# --- framework.arch_unsupported: torch builds vs GPUs (TORCH: arch lists read from the wheels) ---

ARCH = [
    ("torch-2.5.1-cu124-on-rtx5090", RTX5090, torch("2.5.1", "12.4"), "fail", ["has no kernels for NVIDIA GeForce "
                                                                               "RTX 5090 (sm_120)"]),
    ("torch-2.7.1-cu126-on-rtx5090", RTX5090, torch("2.7.1+cu126", "12.6"), "fail", ["sm_120"]),
    ("torch-2.8.0-cu128-on-rtx5090", RTX5090, torch("2.8.0", "12.8"), "ok", ["has kernels"]),
    ("torch-2.11-cu130-on-gtx1080", GTX1080, torch("2.11.0", "13.0"), "fail", ["sm_61"]),
    ("torch-2.11-cu126-on-gtx1080", GTX1080, torch("2.11.0+cu126", "12.6"), "ok", ["sm_61"]),
    ("torch-1.13.1-cu117-on-h100", H100, torch("1.13.1", "11.7"), "fail", ["sm_90"]),
    ("torch-2.0.1-cu118-on-h100", H100, torch("2.0.1+cu118", "11.8"), "ok", ["sm_90"]),
    ("torch-2.5.1-cu124-on-rtx4090", RTX4090, torch("2.5.1", "12.4"), "ok", ["sm_89"]),  # 8.6 cubin runs on 8.9
    ("torch-1.12.1-cu102-on-a100", A100, torch("1.12.1", "10.2"), "fail", ["sm_80"]),
    ("deep-arch-list-on-rtx5090", RTX5090, torch("2.5.1", "12.4", arch_list=[
        "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]), "fail", ["sm_120"]),
    ("deep-ptx-covers-rtx5090", RTX5090, torch("2.5.1", "12.4", arch_list=["sm_80", "sm_90", "compute_90"]),
     "ok", ["has kernels"]),
]


@pytest.mark.parametrize(("gpu_", "pkg", "severity", "words"), [a[1:] for a in ARCH], ids=[a[0] for a in ARCH])
def test_arch_unsupported_on_real_builds(gpu_: Gpu, pkg: PyPackage, severity: str, words: list[str]) -> None:
    _status, findings = outcome(make_facts(gpus=[gpu_], python_envs=env(pkg)), "framework.arch_unsupported")
    (f,) = findings
    assert f.severity == severity, f.title
    for w in words:
        assert w in f.title
    if severity == "fail":
        assert f.fix is not None and "download.pytorch.org/whl/cu" in f.fix.summary


def test_arch_fix_names_a_build_with_blackwell_kernels() -> None:
    _status, (f,) = outcome(make_facts(gpus=[RTX5090], python_envs=env(torch("2.5.1", "12.4"))),
                            "framework.arch_unsupported")
    assert f.fix is not None
    version = f.fix.summary.split("torch==", 1)[1].split()[0]
    from doctor.matrix import vtuple
    assert vtuple(version) >= (2, 8)


def test_arch_list_unknown_for_a_variant_skips() -> None:
    # torch 2.15.0's cu130 variant: its arch list was not read (download.pytorch.org unreachable), so unknown.
    status, findings = outcome(make_facts(gpus=[RTX5090], python_envs=env(torch("2.15.0+cu130", "13.0"))),
                               "framework.arch_unsupported")
    assert status == "skipped" and findings == []


# --- the queries and the planner ----------------------------------------------------------------

from doctor import queries  # noqa: E402


def test_query_driver_535_runs_12_2_natively_and_12x_by_mvc() -> None:
    a = queries.query_driver(bundled(), "535.104.05")
    assert a["newest_native_cuda"]["version"] == "12.2.2"
    assert {r["cuda_major"] for r in a["minor_version_compat"]} == {11, 12}
    assert a["newest_frameworks"]["torch"]["rule"] == "minor-version"


def test_query_gpu_rtx4090() -> None:
    a = queries.query_gpu(bundled(), "RTX 4090")
    assert (a["gpu"], a["compute_capability"], a["architecture"]) == ("NVIDIA GeForce RTX 4090", "8.9", "Ada Lovelace")
    assert "11.8" in a["toolkits_that_compile_for_it"] and a["forward_compat_eligible"] is False


def test_query_cuda_12_4() -> None:
    a = queries.query_cuda(bundled(), "12.4")
    assert a["min_driver"] == "550.54.14" and a["minor_version_compat_floor"] == "525.60.13"
    assert any(t["version"] == "2.5.1" for t in a["torch"])


@pytest.mark.parametrize("bad", ["foo", "12"])
def test_query_driver_rejects_non_versions(bad: str) -> None:
    with pytest.raises(queries.QueryError):
        queries.query_driver(bundled(), bad)


def test_plan_h100_on_535_with_torch_2_4_or_newer() -> None:
    p = queries.plan(bundled(), "H100 80GB HBM3", "535", "torch>=2.4", "3.11")
    assert p["possible"] is True
    assert p["cuda"].startswith("12.")  # CUDA 13 builds need driver >= 580 (or cuda-compat)
    assert p["rule"] == "minor-version"
    assert p["install"] == f"pip install torch=={p['torch']} --index-url https://download.pytorch.org/whl/cu" \
                           f"{p['cuda'].replace('.', '')}"
    # the base image's CUDA is the newest release of the same minor in NVIDIA's table (RN)
    assert p["base_image"]["tag"].startswith(f"nvidia/cuda:{p['cuda']}.") and p["base_image"]["tag"].endswith(
        "-base-ubuntu22.04")


def test_plan_rtx5090_on_550_is_impossible_and_says_why() -> None:
    p = queries.plan(bundled(), "RTX 5090", "550.120", "torch>=2.4", None)
    assert p["possible"] is False
    assert "needs driver ≥ 570.26" in p["why"] and "upgrade the driver" in p["why"]


def test_plan_rtx5090_on_570_takes_a_blackwell_build() -> None:
    p = queries.plan(bundled(), "RTX 5090", "570.133.07", None, "3.11")
    assert p["possible"] is True
    from doctor.matrix import vtuple
    assert vtuple(p["torch"]) >= (2, 8) and p["cuda"].startswith("12.")  # CUDA 13 wheels need >= 580


def test_plan_old_torch_on_rtx5090_explains_the_arch() -> None:
    p = queries.plan(bundled(), "RTX 5090", "570.133.07", "torch<2.7", None)
    assert p["possible"] is False
    assert "sm_120" in p["why"] and "newer torch" in p["why"]


def test_plan_k80_with_modern_torch_is_impossible() -> None:
    p = queries.plan(bundled(), "Tesla K80", "470.256.02", "torch>=2.6", None)
    assert p["possible"] is False and "sm_37" in p["why"]


def test_plan_k80_finds_the_last_cu118_build_whose_cudnn_runs_on_sm_37() -> None:
    # pytorch/builder release/2.5: CUDA 11.8 builds add 3.7; R470 runs CUDA 11.8 by minor-version compatibility.
    # But 2.4/2.5 cu118 bundle cuDNN 9.1, which needs CC >= 5.0 (cudnn.toml): 2.3.1 (cuDNN 8.7) is the newest.
    p = queries.plan(bundled(), "Tesla K80", "470.256.02", "torch>=2.1", None)
    assert (p["possible"], p["torch"], p["cuda"], p["cudnn"]) == (True, "2.3.1", "11.8", "8.7.0.84")


def test_plan_respects_the_python_version() -> None:
    p = queries.plan(bundled(), None, None, "torch>=2.15", "3.10")
    assert p["possible"] is False and "Requires-Python" in p["why"]


def test_plan_rejects_a_bad_spec() -> None:
    with pytest.raises(queries.QueryError):
        queries.plan(bundled(), None, None, "torch>>2", None)


# --- image.min_host_driver (check --static) -------------------------------------------------------


def _static(facts: Any) -> list:
    from doctor.checks import by_id
    from doctor.pipeline import diagnose
    from doctor.registry import Context

    return diagnose(facts, checks=[by_id("image.min_host_driver")],
                    ctx=Context(matrix=bundled(), options={"static": True})).findings


@pytest.mark.parametrize(("toolkits", "pkgs", "floor", "full"), [
    ([], [torch("2.5.1", "12.4")], "525.60.13", "550.54.14"),                 # RN 12.4 GA; MVC 12.x
    ([toolkit("12.4.1")], [torch("2.5.1", "12.4")], "525.60.13", "550.54.15"),  # RN 12.4 Update 1
    ([], [torch("2.14.1", "13.0")], "580", "580.65.06"),                       # RN 13.0 GA; MVC 13.x floor
    ([toolkit("11.8.0")], [], "450.80.02", "520.61.05"),                        # RN 11.8; MVC 11.x
    ([toolkit("11.8.0")], [torch("2.5.1", "12.4")], "525.60.13", "550.54.14"),  # the newest runtime decides
])
def test_min_host_driver_of_an_image(toolkits: list, pkgs: list, floor: str, full: str) -> None:
    (f,) = _static(make_facts(toolkits=toolkits, python_envs=env(*pkgs), gpus=[]))
    assert f.severity == "info"
    assert f.title == f"This image needs a host driver ≥ {floor} (≥ {full} for full support)"


def test_min_host_driver_only_runs_with_static() -> None:
    status, findings = outcome(make_facts(), "image.min_host_driver")
    assert status == "not_applicable" and findings == []


# --- end to end: the tricky cases as snapshots through `check --facts -v` -------------------------

TRICKY = [
    # nvidia-smi's "CUDA Version" 12.2 is the driver's maximum; the 12.4 toolkit runs by minor-version compat.
    ("smi-cuda-version-is-the-driver-maximum", {**driver("535.104.05", driver__cuda_driver_api="12.2"),
                                                "toolkits": [toolkit("12.4.1")]},
     "driver.too_old_for_cuda_runtime", "warn", "https://docs.nvidia.com/"),
    # a wheel brings its own runtime: no system toolkit, yet the driver decides torch cu124's fate
    ("wheels-bring-their-own-runtime", {**driver("470.223.02"), "toolkits": [],
                                        "python_envs": env(torch("2.5.1", "12.4"))},
     "framework.cuda_newer_than_driver", "fail", "https://docs.nvidia.com/"),
    # forward compatibility is not for GeForce
    ("forward-compat-not-for-geforce", {**driver("535.104.05", driver__packages=[
        Package("cuda-compat-13-0", "580.65.06-1", "dpkg")]), "toolkits": [toolkit("13.0.0")], "gpus": [RTX4090]},
     "driver.too_old_for_cuda_runtime", "fail", "https://docs.nvidia.com/"),
    # WSL: the driver NVML reports is the Windows one (12.4 GA Windows minimum 551.61)
    ("wsl-windows-driver-numbering", {**driver("551.61"), "host__wsl": True, "toolkits": [toolkit("12.4.0")],
                                      "loader__libcuda": LibRef("/usr/lib/wsl/lib/libcuda.so.1", None)},
     "driver.too_old_for_cuda_runtime", "ok", "https://docs.nvidia.com/"),
]


@pytest.mark.parametrize(("overrides", "check_id", "severity", "source"), [t[1:] for t in TRICKY],
                         ids=[t[0] for t in TRICKY])
def test_tricky_case_snapshot_gives_the_verdict_with_its_source(overrides: dict, check_id: str, severity: str,
                                                               source: str, tmp_path, capsys) -> None:
    import json

    from doctor.cli import main

    snap = tmp_path / "facts.json"
    snap.write_text(make_facts(**overrides).to_json())
    main(["check", "--facts", str(snap), "--json", check_id])
    report = json.loads(capsys.readouterr().out)
    (f,) = [f for f in report["findings"] if f["code"] == check_id]
    assert f["severity"] == severity, f["title"]
    assert any(str(e.get("source") or "").startswith(source) for e in f["evidence"]), f["evidence"]
    main(["check", "--facts", str(snap), "-v", check_id])
    assert source in capsys.readouterr().out


def test_driver_too_old_for_torch_proposes_the_same_release_for_an_older_cuda() -> None:
    facts = make_facts(**driver("550.120"), gpus=[RTX4090], python_envs=env(torch("2.14.1", "13.0")))
    _status, (f,) = outcome(facts, "framework.cuda_newer_than_driver")
    assert f.severity == "fail" and f.fix is not None
    # The plan upgrades the driver; the Python-only route is offered too: 2.14.1 also comes as cu126, whose arch
    # list (sm_50…sm_90) covers the RTX 4090 (8.9), and 550 runs 12.6 by minor-version compatibility.
    assert f.fix.summary.startswith("Install NVIDIA driver branch 580")
    assert "torch 2.14.1 needs ≥ 580 (580.65.06 for full support)" in f.fix.summary
    assert ("Or, inside the Python environment alone: Replace the cu130 build of torch 2.14.1 in /venv/bin/python "
            "with torch 2.14.1 built for CUDA 12.6 (the driver runs it: minor-version)") in f.fix.summary
    assert "--index-url https://download.pytorch.org/whl/cu126" in f.fix.summary


def test_the_python_only_route_keeps_the_release_for_an_older_cuda() -> None:
    rtx3090 = replace(RTX4090, name="NVIDIA GeForce RTX 3090", compute_capability="8.6")
    facts = make_facts(**driver("470.223.02"), gpus=[rtx3090], python_envs=env(torch("2.5.1", "12.4")))
    _status, (f,) = outcome(facts, "framework.cuda_newer_than_driver")
    # 2.5.1 also comes as cu118 (sm_86 SASS; pytorch/builder release/2.5), which 470 runs by minor-version compat.
    assert f.fix is not None and "with torch 2.5.1 built for CUDA 11.8" in f.fix.summary


def test_the_python_only_route_never_takes_a_build_whose_arch_list_is_unknown() -> None:
    # torch 2.7.1's cu118 wheel: its arch list is not in the matrix, so it is not chosen; the newest confirmed build
    # that driver 470 runs is.
    rtx3090 = replace(RTX4090, name="NVIDIA GeForce RTX 3090", compute_capability="8.6")
    facts = make_facts(**driver("470.223.02"), gpus=[rtx3090], python_envs=env(torch("2.7.1", "12.6")))
    _status, (f,) = outcome(facts, "framework.cuda_newer_than_driver")
    assert f.fix is not None and "torch 2.7.1 built for CUDA 11.8" not in f.fix.summary
    assert "with torch 2.5.1 built for CUDA 11.8" in f.fix.summary


def test_no_torch_alternative_when_the_gpu_itself_needs_a_newer_driver() -> None:
    facts = make_facts(**driver("470.223.02"), gpus=[RTX4090], python_envs=env(torch("2.5.1", "12.4")))
    _status, (f,) = outcome(facts, "framework.cuda_newer_than_driver")
    assert f.fix is not None and f.fix.summary.startswith("Install NVIDIA driver branch 580")
    assert "Python environment alone" not in f.fix.summary


def test_plan_on_a_driver_no_torch_build_runs_on_explains_without_looping() -> None:
    p = queries.plan(bundled(), None, "410.48", None, None)
    assert p["possible"] is False and "driver 410.48 is too old" in p["why"]


def test_plan_never_picks_a_build_it_cannot_confirm_but_names_it() -> None:
    # torch 2.7.1's cu118 wheel: 470 runs CUDA 11.8 by minor-version compatibility; its arch list is not recorded
    p = queries.plan(bundled(), "NVIDIA GeForce RTX 3090", "470.223.02", "torch==2.7.1", None)
    assert p["possible"] is False
    assert "2.7.1 cu118" in p["why"] and "confirm with `gpu-doctor check --deep`" in p["why"]


# --- issue 11: per-GPU first driver, cuDNN rows, torch 2.15 cu130 ------------------------------------


@pytest.mark.parametrize(("name", "cc", "drv", "severity"), [
    ("NVIDIA GeForce RTX 3090", "8.6", "450.80.02", "fail"),   # sm_86 needs CUDA 11.1 -> driver >= 455.23
    ("NVIDIA GeForce RTX 3090", "8.6", "455.23.04", "ok"),
    ("NVIDIA A40", None, "450.80.02", "fail"),                 # cc from the matrix row
    ("NVIDIA A100-SXM4-80GB", "8.0", "450.80.02", "ok"),       # the A100 came with 450.36.06
])
def test_first_driver_is_per_compute_capability(name: str, cc: str | None, drv: str, severity: str) -> None:
    _status, (f,) = outcome(make_facts(**driver(drv), gpus=[gpu(name, cc)]), "driver.too_old_for_gpu")
    assert f.severity == severity, f.title
    if severity == "fail":
        assert "needs driver ≥ 455.23" in f.title


def test_cudnn_897_has_a_cuda_11_build() -> None:
    facts = make_facts(cudnn=[Cudnn("8.9.7", "/usr/include/cudnn_version.h", "header")], toolkits=[toolkit("11.8.0")])
    _status, (f,) = outcome(facts, "cudnn.cuda_mismatch")
    assert f.severity == "ok", f.title


def test_matrix_cuda_12_8_does_not_claim_cudnn_8() -> None:
    a = queries.query_cuda(bundled(), "12.8")
    assert not any(v.startswith("8.") for v in a["cudnn"])
    assert "9.10.2" in a["cudnn"]


def test_cudnn_9_28_1_has_cuda_12_and_13_builds_and_torch_2_15_has_cu130() -> None:
    # NVIDIA's redistrib manifest lists cuda12 and cuda13 archives (x86_64, SBSA); PyPI lacks only the cu12 wheel.
    row = bundled().cudnn("9.28.1")
    assert row is not None and row["cuda"] == ["13.x", "12.x"]
    assert "9.28.1" in queries.query_cuda(bundled(), "12.8")["cudnn_same_major_unverified_minor"]
    assert bundled().torch_variant("2.15.0", "13.0") is not None
    assert any(t["version"] == "2.15.0" for t in queries.query_cuda(bundled(), "13.0")["torch"])


@pytest.mark.parametrize(("windows", "status"), [("581.57", "skipped"), ("573.48", "ok")])
def test_wsl_windows_driver_is_judged_by_its_branch(windows: str, status: str) -> None:
    # WSL2 reports the Windows driver: 581.57 is no Linux branch 581 (which would be past Pascal's R580); with no
    # NVIDIA pair around it its branch is unknown, while 573.48 is R570's Windows number.
    pascal = gpu("NVIDIA GeForce GTX 1080 Ti", "6.1")
    facts = make_facts(driver__kernel_module=None, driver__userspace=windows, host__wsl=True, gpus=[pascal])
    for check_id in ("driver.gpu_unsupported_by_driver", "driver.too_old_for_gpu"):
        got, findings = outcome(facts, check_id)
        assert got == status, (check_id, got, [f.title for f in findings])


def test_gh200_with_the_proprietary_module_fails_but_an_h100_does_not() -> None:
    for name, severity in (("NVIDIA GH200 480GB", "fail"), ("NVIDIA H100 80GB HBM3", "ok")):
        facts = make_facts(**driver("580.95.05"), driver__module_flavor="proprietary", gpus=[gpu(name, "9.0")])
        _status, (f,) = outcome(facts, "driver.gpu_unsupported_by_driver")
        assert f.severity == severity, (name, f.title)
        if severity == "fail":
            assert "requires the open NVIDIA kernel module" in f.title


@pytest.mark.parametrize(("drv", "severity"), [("610.43.02", "fail"), ("615.71.09", "ok")])
def test_rubin_needs_an_r615_driver(drv: str, severity: str) -> None:
    arch = bundled().architecture("10.7")
    assert arch is not None and arch["name"] == "Rubin"
    _status, (f,) = outcome(make_facts(**driver(drv), gpus=[gpu("NVIDIA Rubin (name not verified)", "10.7")]),
                            "driver.too_old_for_gpu")
    assert f.severity == severity, f.title


def test_jax_on_cuda_11_needs_driver_450_80_02() -> None:
    # The cuda11_pip wheels (with nvidia-*-cu11 pins); the older local-toolkit wheels need that toolkit's driver.
    assert "jax" not in queries.query_driver(bundled(), "450.36.06")["newest_frameworks"]
    newest = queries.query_driver(bundled(), "450.80.02")["newest_frameworks"]["jax"]
    assert newest["cuda_major"] == 11
    assert all(r.get("min_driver") == "450.80.02" for r in bundled().rows("jax", "jax")
               if r.get("cuda_major") == 11 and r.get("pins"))


# aarch64 wheels carry other targets than x86_64 ones (PyPI aarch64 wheels, binary-read: sm_80 90 100 110 120).
THOR = gpu("NVIDIA Thor", "11.0")


@pytest.mark.parametrize(("host_arch", "gpu_", "severity"), [
    ("aarch64", THOR, "ok"),                       # Jetson Thor: sm_110 is in the aarch64 wheel
    (None, THOR, "ok"),                            # host arch unknown, but a Thor only comes with an Arm CPU
    ("aarch64", gpu("Tesla T4", "7.5"), "fail"),   # no sm_75 in the aarch64 wheel
    ("x86_64", gpu("Tesla T4", "7.5"), "ok"),      # ... while the x86_64 wheel has it
])
def test_aarch64_hosts_use_the_aarch64_arch_list(host_arch: str | None, gpu_: Gpu, severity: str) -> None:
    facts = make_facts(**driver("580.95.05"), host__arch=host_arch, gpus=[gpu_],
                       python_envs=env(torch("2.11.0+cu130", "13.0")))
    _status, findings = outcome(facts, "framework.arch_unsupported")
    assert [f.severity for f in findings] == [severity], [f.title for f in findings]


def test_aarch64_without_a_measured_list_is_unknown_not_the_x86_list() -> None:
    facts = make_facts(**driver("580.95.05"), host__arch="aarch64", gpus=[gpu("Tesla T4", "7.5")],
                       python_envs=env(torch("2.10.0", "12.8")))
    status, _ = outcome(facts, "framework.arch_unsupported")
    assert status == "skipped"


@pytest.mark.parametrize(("version", "cuda", "arch"), [
    ("1.12.1", "11.6", "3.7"), ("2.3.1", "11.8", "3.7"), ("2.4.1", "12.4", "9.0"), ("2.5.1", "12.1", "5.0"),
])
def test_non_default_variants_have_their_build_script_arch_lists(version: str, cuda: str, arch: str) -> None:
    var = bundled().torch_variant(version, cuda)
    assert var is not None and arch in var["arch_list"]
    assert "pytorch/builder/blob/release/" in var["arch_list_source"]


# The example docs/checks.md shows for each check of doctor/checks/compat.py (scripts/gen_checks_doc.py reads it).
DOC_EXAMPLES = {
    "driver.too_old_for_cuda_runtime": ("a CUDA 13.0 toolkit on driver 535", make_facts(
        driver__kernel_module="535.104.05", driver__userspace="535.104.05", toolkits=toolkits_of("13.0.0"),
        gpus=[Gpu(**{**H100.__dict__, "name": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9"})])),
    "driver.too_old_for_gpu": ("an RTX 5090 on R550", make_facts(
        driver__kernel_module="550.120", driver__userspace="550.120", gpus=[RTX5090])),
    "driver.gpu_unsupported_by_driver": ("a Tesla K80 on R535", make_facts(
        gpus=[replace(H100, name="Tesla K80", compute_capability="3.7")], driver__kernel_module="535.104.05",
        driver__userspace="535.104.05")),
    "framework.arch_unsupported": ("torch 2.5.1 (cu124) on an RTX 5090", make_facts(
        driver__kernel_module="570.133.07", driver__userspace="570.133.07", gpus=[RTX5090],
        python_envs=venv_with(PyPackage("torch", "2.5.1", cuda="12.4", cpu_only=False)))),
    "framework.cuda_newer_than_driver": ("torch cu121 on driver 470 with a GeForce card", make_facts(
        driver__kernel_module="470.223.02", driver__userspace="470.223.02",
        gpus=[replace(H100, name="NVIDIA GeForce RTX 3090", compute_capability="8.6")],
        python_envs=venv_with(PyPackage("torch", "2.5.1+cu121", cuda="12.1", cpu_only=False)))),
    "framework.nvcc_mismatch_for_extensions": ("nvcc 11.8 and torch cu121", make_facts(
        loader__nvcc_on_path=LibRef("/usr/local/cuda-11.8/bin/nvcc", "11.8.89"),
        python_envs=venv_with(PyPackage("torch", "2.3.1", cuda="12.1", cpu_only=False)))),
    "framework.libs_shadowed": ("a CUDA 11.8 cuDNN first on LD_LIBRARY_PATH", make_facts(
        env__LD_LIBRARY_PATH="/usr/local/cuda-11.8/lib64",
        loader__libcudnn=LibRef("/usr/local/cuda-11.8/lib64/libcudnn.so.8", "8.9.7"))),
    "cudnn.cuda_mismatch": ("a cuDNN 8.2 header beside CUDA 12.4", make_facts(
        cudnn=[Cudnn("8.2.1", "/usr/include/cudnn_version.h", "header")])),
    "cudnn.version_mismatch": ("TensorFlow 2.15 (cuDNN 8) with the cuDNN 9 wheel", make_facts(
        python_envs=venv_with(PyPackage("tensorflow", "2.15.1", cuda="12.2", cudnn="8", cpu_only=False),
                         PyPackage("nvidia-cudnn-cu12", "9.1.0.70", cudnn="9.1.0.70")))),
    "toolkit.gpu_arch_unsupported": ("CUDA 13.0 for a GeForce GTX 1080", make_facts(
        toolkits=toolkits_of("13.0.0"),
        gpus=[replace(H100, name="NVIDIA GeForce GTX 1080", compute_capability="6.1")])),
    "toolkit.host_compiler_unsupported": ("gcc 14 with CUDA 12.4", make_facts(host__gcc="14.2.0")),
    "image.min_host_driver": ("`check --static` on an image with torch cu124 and CUDA 12.4 (static only)", make_facts(
        gpus=[], toolkits=toolkits_of("12.4.1"))),
}


@pytest.mark.parametrize(("severity", "cuda"), [("ok", "13.0.0"), ("warn", "11.8.0")])
def test_one_cudnn_in_many_places_is_one_verdict_per_toolkit_version(severity: str, cuda: str) -> None:
    """As on the lent H100 (Ubuntu's cuDNN package): two headers and three library names, and the same CUDA
    found at two roots: one verdict naming every place, not 5 x 2."""
    places = [Cudnn("9.17.0", "/usr/include/x86_64-linux-gnu/cudnn_version.h", "header"),
              Cudnn("9.17.0", "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h", "header"),
              Cudnn("9.17.0", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.17.0", "library"),
              Cudnn("9.17.0", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9 (cudnnGetVersion)", "library"),
              Cudnn("8.9.5", "/opt/cudnn8/include/cudnn_version.h", "header"),
              Cudnn("9.17.0", "/venv/bin/python [nvidia-cudnn-cu12]", "pip")]
    facts = make_facts(cudnn=places, toolkits=[toolkit(cuda), toolkit(cuda, "/opt/cuda")])
    _status, findings = outcome(facts, "cudnn.cuda_mismatch")
    by_version = {f.title.split()[1]: f for f in findings}
    assert sorted(by_version) == ["8.9.5", "9.17.0"] and len(findings) == 2
    f = by_version["9.17.0"]
    assert f.severity == severity
    assert [e.value for e in f.evidence if e.fact == "cudnn"] == [f"9.17.0 ({c.location})" for c in places[:4]]
    assert [e.value for e in f.evidence if e.fact == "toolkits"] == [f"{cuda} /usr/local/cuda-{cuda[:4]}",
                                                                     f"{cuda} /opt/cuda"]
    (found,) = run_check(facts, "cudnn.missing").findings
    assert found.title == ("cuDNN found: 9.17.0 (header: /usr/include/x86_64-linux-gnu/cudnn_version.h and 4 more), "
                           "8.9.5 (header: /opt/cudnn8/include/cudnn_version.h)")


@pytest.mark.parametrize(("report", "gpus"), [("vllm-12189-8x-a100-torch2.4.0-cu121.txt", 8),
                                              ("vllm-18467-vllm-format-4x-rtx2080ti-torch2.5.1-cu124.txt", 4),
                                              ("pytorch-30071-torch1.3.1-8x-titan-xp-driver410.txt", 8)])
def test_a_node_of_identical_gpus_gets_one_verdict_per_model(report: str, gpus: int) -> None:
    """Real collect_env reports of 8x A100, 4x RTX 2080 Ti, 8x TITAN Xp: what a driver, a toolkit or a torch build
    supports is the model's, so each rule says it once, naming every GPU (it said it 8 times on an 8-GPU node)."""
    from conftest import DATA

    from doctor import collect_env
    from doctor.pipeline import diagnose

    facts = collect_env.parse((DATA / "collect_env" / report).read_text())
    assert len(facts.gpus) == gpus and len({g.name for g in facts.gpus}) == 1
    findings = diagnose(facts).findings
    said = [(f.code, f.severity, f.title) for f in findings]
    assert [s for s in said if said.count(s) > 1] == []
    per_model = [f for f in findings if f.code in ("driver.too_old_for_gpu", "driver.gpu_unsupported_by_driver",
                                                   "toolkit.gpu_arch_unsupported", "framework.arch_unsupported")]
    assert per_model
    for f in per_model:
        named = {e.fact.split(".")[0] for e in f.evidence if e.fact.startswith("gpus[")}
        assert named == {f"gpus[{i}]" for i in range(gpus)}, (f.code, named)
