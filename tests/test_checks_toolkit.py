"""Tier 2: the CUDA toolkit and cuDNN checks (doctor/checks/toolkit.py) judged on facts, no I/O."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import only, outcome
from factories import TF_GPU_ENV, make_facts, torch_env

from doctor.model.facts import LibRef, ProbeError, PyPackage, PythonEnv, Toolkit

NO_TOOLKIT = {"toolkits": [], "loader__nvcc_on_path": None, "loader__libcudart": None}
TF_GPU = PyPackage("tensorflow", "2.15.1", cuda="12.2", cudnn="8", cpu_only=False)


def env_with(*packages: PyPackage) -> list[PythonEnv]:
    return [PythonEnv(executable="/venv/bin/python", version="3.11.9", origin="VIRTUAL_ENV",
                      packages=list(packages))]


# --- toolkit.missing --------------------------------------------------------------------------


def test_toolkit_found_names_version_and_root() -> None:
    f = only(make_facts(), "toolkit.missing")
    assert (f.severity, f.title) == ("ok", "CUDA toolkit found: 12.4.1 at /usr/local/cuda-12.4")


def test_no_toolkit_with_cuda_torch_only_warns() -> None:
    f = only(make_facts(**NO_TOOLKIT), "toolkit.missing")
    assert f.severity == "warn"
    assert f.title == "No CUDA toolkit is installed"
    assert "every framework here brings its own CUDA runtime: torch 2.5.1" in f.detail
    assert "nvcc" in f.detail


def test_no_toolkit_and_no_framework_warns_that_nothing_needs_it_yet() -> None:
    f = only(make_facts(**NO_TOOLKIT, python_envs=[]), "toolkit.missing")
    assert f.severity == "warn"
    assert "nothing here needs one yet" in f.detail


@pytest.mark.parametrize("packages", [
    [TF_GPU],
    [TF_GPU, PyPackage("nvidia-cudnn-cu12", "8.9.7.29")],
])
def test_no_toolkit_with_tensorflow_cuda_build_without_runtime_wheels_fails(packages: list[PyPackage]) -> None:
    f = only(make_facts(**NO_TOOLKIT, python_envs=env_with(*packages)), "toolkit.missing")
    assert f.severity == "fail"
    assert f.title == "No CUDA toolkit is installed, and tensorflow 2.15.1 needs a system CUDA runtime"
    assert f.fix is not None and "`pip install tensorflow[and-cuda]==2.15.1`" in f.fix.summary


def test_no_toolkit_with_tensorflow_and_cuda_wheels_only_warns() -> None:
    envs = env_with(TF_GPU, PyPackage("nvidia-cuda-runtime-cu12", "12.2.140"))
    f = only(make_facts(**NO_TOOLKIT, python_envs=envs), "toolkit.missing")
    assert f.severity == "warn"


@pytest.mark.parametrize(("plugin", "severity"), [(None, "fail"), ("jax-cuda12-plugin", "warn")])
def test_no_toolkit_with_jax_needs_its_cuda_plugin(plugin: str | None, severity: str) -> None:
    packages = [PyPackage("jax", "0.4.30", cpu_only=False), PyPackage("jaxlib", "0.4.30", cpu_only=False)]
    if plugin:
        packages.append(PyPackage(plugin, "0.4.30"))
    f = only(make_facts(**NO_TOOLKIT, python_envs=env_with(*packages)), "toolkit.missing")
    assert f.severity == severity
    if severity == "fail":
        assert "jax 0.4.30, jaxlib 0.4.30 needs a system CUDA runtime" in f.title


def test_no_toolkit_with_cpu_only_tensorflow_only_warns() -> None:
    envs = env_with(PyPackage("tensorflow", "2.15.1", cpu_only=True))
    assert only(make_facts(**NO_TOOLKIT, python_envs=envs), "toolkit.missing").severity == "warn"


def test_pip_cuda_wheels_are_not_a_system_toolkit() -> None:
    pip_nvcc = Toolkit(root="/venv/lib/python3.11/site-packages/nvidia/cuda_nvcc", version="12.4.131",
                       nvcc_version="12.4.131", source="pip")
    f = only(make_facts(**{**NO_TOOLKIT, "toolkits": [pip_nvcc]}), "toolkit.missing")
    assert (f.severity, f.title) == ("warn", "No CUDA toolkit is installed")


# --- toolkit.multiple_conflicting -------------------------------------------------------------


def test_nvcc_and_libcudart_agree_on_major_minor() -> None:
    f = only(make_facts(), "toolkit.multiple_conflicting")
    assert f.severity == "ok"
    assert f.title == "nvcc on PATH and the loader's libcudart agree on CUDA 12.4"


def test_nvcc_11_8_and_libcudart_12_4_warn_with_both_versions() -> None:
    facts = make_facts(loader__nvcc_on_path=LibRef("/usr/bin/nvcc", "11.8.89"))
    f = only(facts, "toolkit.multiple_conflicting")
    assert f.severity == "warn"
    assert f.title == ("Several CUDA versions are mixed: nvcc on PATH is CUDA 11.8.89; "
                       "the loader's libcudart is CUDA 12.4.127")
    assert [e.fact for e in f.evidence] == ["loader.nvcc_on_path", "loader.libcudart"]
    assert f.evidence[0].value == "/usr/bin/nvcc 11.8.89"
    assert f.fix is not None and "CUDA_HOME" in f.fix.summary


@pytest.mark.parametrize("var", ["CUDA_HOME", "CUDA_PATH"])
def test_cuda_home_pointing_at_another_toolkit_is_a_third_claim(var: str) -> None:
    toolkits = [Toolkit(root="/usr/local/cuda-12.4", version="12.4.1", nvcc_version="12.4.131", source="path"),
                Toolkit(root="/usr/local/cuda-12.1", version="12.1.1", nvcc_version="12.1.105", source=f"env:{var}")]
    f = only(make_facts(toolkits=toolkits, **{f"env__{var}": "/usr/local/cuda-12.1"}),
             "toolkit.multiple_conflicting")
    assert f.severity == "warn"
    assert f"; {var} is CUDA 12.1.1;" in f.title
    assert any(e.fact == f"env.{var}" and e.value == "/usr/local/cuda-12.1 → CUDA 12.1.1" for e in f.evidence)


def test_cuda_home_on_the_same_toolkit_agrees() -> None:
    toolkits = [Toolkit(root="/usr/local/cuda-12.4", version="12.4.1", nvcc_version="12.4.131",
                        source="env:CUDA_HOME")]
    f = only(make_facts(toolkits=toolkits, env__CUDA_HOME="/usr/local/cuda-12.4"), "toolkit.multiple_conflicting")
    assert f.severity == "ok"
    assert f.title == "nvcc on PATH and CUDA_HOME and the loader's libcudart agree on CUDA 12.4"


def test_conflict_skips_with_only_one_version_known() -> None:
    result, findings = outcome(make_facts(loader__libcudart=None), "toolkit.multiple_conflicting")
    assert result.status == "skipped"
    assert result.reason and "fewer than two" in result.reason
    assert findings == []


def test_conflict_not_applicable_without_a_system_toolkit() -> None:
    result, _ = outcome(make_facts(**NO_TOOLKIT), "toolkit.multiple_conflicting")
    assert result.status == "not_applicable"


# --- toolkit.path_not_set ---------------------------------------------------------------------


def test_nvcc_on_path_is_ok() -> None:
    f = only(make_facts(), "toolkit.path_not_set")
    assert (f.severity, f.title) == ("ok", "nvcc is on PATH: /usr/local/cuda-12.4/bin/nvcc")


def test_toolkit_off_path_warns_and_gives_the_export_lines() -> None:
    f = only(make_facts(loader__nvcc_on_path=None, env__PATH="/usr/bin:/bin"), "toolkit.path_not_set")
    assert f.severity == "warn"
    assert f.title == "CUDA 12.4.1 is installed at /usr/local/cuda-12.4 but nvcc is not on PATH"
    assert f.fix is not None
    assert 'export PATH="/usr/local/cuda-12.4/bin:$PATH"' in f.fix.summary
    assert 'export LD_LIBRARY_PATH="/usr/local/cuda-12.4/lib64:${LD_LIBRARY_PATH:-}"' in f.fix.summary


def test_toolkit_off_path_suggests_the_newest_toolkit() -> None:
    toolkits = [Toolkit(root="/usr/local/cuda-12.10", version="12.10.0", nvcc_version="12.10.41", source="path"),
                Toolkit(root="/usr/local/cuda-11.8", version="11.8.0", nvcc_version="11.8.89", source="path"),
                Toolkit(root="/usr/local/cuda-12.4", version="12.4.1", nvcc_version="12.4.131", source="path")]
    f = only(make_facts(toolkits=toolkits, loader__nvcc_on_path=None), "toolkit.path_not_set")
    assert "CUDA 12.10.0 is installed at /usr/local/cuda-12.10" in f.title


@pytest.mark.parametrize("toolkits", [
    [],
    [Toolkit(root="/venv/lib/python3.11/site-packages/nvidia/cuda_nvcc", version="12.4.131",
             nvcc_version="12.4.131", source="pip")],
    [Toolkit(root="/usr/local/cuda-12.4", version="12.4.1", nvcc_version=None, source="path")],
])
def test_path_not_applicable_without_a_system_nvcc(toolkits: list[Toolkit]) -> None:
    result, findings = outcome(make_facts(toolkits=toolkits, loader__nvcc_on_path=None), "toolkit.path_not_set")
    assert result.status == "not_applicable"
    assert findings == []


# --- cudnn.missing ----------------------------------------------------------------------------


def test_cudnn_found_names_version_and_where() -> None:
    f = only(make_facts(), "cudnn.missing")
    assert f.severity == "ok"
    assert f.title == "cuDNN found: 9.1.0.70 (pip: /venv/bin/python [nvidia-cudnn-cu12])"


def test_tensorflow_gpu_build_without_any_cudnn_fails_and_installs_the_wheel() -> None:
    f = only(make_facts(cudnn=[], python_envs=env_with(TF_GPU)), "cudnn.missing")
    assert f.severity == "fail"
    assert f.title == "No cuDNN is installed, and tensorflow 2.15.1 needs one"
    assert f.area == "cuDNN"
    assert f.fix is not None
    # The plan's step: the release's CUDA extra, which pins the cuDNN wheel it was built with.
    assert [s.command for s in f.fix.steps] == [["/venv/bin/python", "-m", "pip", "install",
                                                 "tensorflow[and-cuda]==2.15.1"]]
    assert "`pip install tensorflow[and-cuda]==2.15.1`" in f.fix.summary


def test_jax_gpu_build_without_cudnn_fails() -> None:
    envs = env_with(PyPackage("jaxlib", "0.4.30", cuda="12", cpu_only=False))
    f = only(make_facts(cudnn=[], python_envs=envs), "cudnn.missing")
    assert f.severity == "fail"
    assert "jaxlib 0.4.30" in f.title


@pytest.mark.parametrize("envs", [
    [torch_env()],
    env_with(PyPackage("tensorflow", "2.15.1", cpu_only=True)),
    [],
])
def test_cudnn_not_applicable_when_nothing_needs_a_system_cudnn(envs: list[PythonEnv]) -> None:
    result, findings = outcome(make_facts(cudnn=[], python_envs=envs), "cudnn.missing")
    assert result.status == "not_applicable"
    assert result.reason and "torch bring their own" in result.reason
    assert findings == []


def test_cudnn_fix_matches_a_cuda_11_framework_build() -> None:
    tf_cu11 = PyPackage("tensorflow", "2.11.0", cuda="11.2", cudnn="8", cpu_only=False)
    f = only(make_facts(cudnn=[], python_envs=env_with(tf_cu11)), "cudnn.missing")
    assert f.fix is not None
    assert [s.command for s in f.fix.steps] == [["pip", "install", "nvidia-cudnn-cu11"]]
    # TensorFlow 2.11 has no [and-cuda] extra (it came with 2.14): the plan says so instead of inventing one.
    assert "TensorFlow 2.11.0 has no [and-cuda] extra" in f.fix.summary


# The example docs/checks.md shows for each check of doctor/checks/toolkit.py (scripts/gen_checks_doc.py reads it).
DOC_EXAMPLES = {
    "toolkit.missing": ("no toolkit, torch brings its own runtime", make_facts(
        toolkits=[], loader=replace(make_facts().loader, nvcc_on_path=None, libcudart=None))),
    "toolkit.multiple_conflicting": ("nvcc 11.8 first on PATH, libcudart 12.4", make_facts(
        loader__nvcc_on_path=LibRef("/usr/local/cuda-11.8/bin/nvcc", "11.8.89"))),
    "toolkit.path_not_set": ("CUDA installed, PATH not updated", make_facts(loader__nvcc_on_path=None)),
    "cudnn.missing": ("TensorFlow GPU build, no cuDNN anywhere", make_facts(cudnn=[], python_envs=[TF_GPU_ENV])),
    "toolkit.cuda_home_invalid": ("CUDA_HOME left pointing at a removed toolkit", make_facts(
        env__CUDA_HOME="/usr/local/cuda-11.7",
        errors=[ProbeError(
            "toolkits", "CUDA_HOME=/usr/local/cuda-11.7 does not exist")])),
}
