"""What the environment probe concludes from installed packages (tier 1: pure mapping)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sysroot import data

from doctor.probes.pyenvs import interpreter_of, packages_from_raw


def pkg(name: str, version: str, files: dict | None = None) -> dict:
    return {"name": name, "version": version, "files": files or {}}


TORCH_CPU = data("torch-version-py/torch-2.13.0+cpu.py.txt")
TORCH_CU130 = data("torch-version-py/torch-2.14.1+cu130.py.txt")
TF_215 = data("tf-build-info/tensorflow-2.15.1-linux.py.txt")
TF_CPU = data("tf-build-info/tensorflow_cpu-2.21.0-linux.py.txt")


@pytest.mark.parametrize(
    ("raw", "name", "cuda", "cpu_only"),
    [
        ([pkg("torch", "2.13.0+cpu", {"torch/version.py": TORCH_CPU})], "torch", None, True),
        ([pkg("torch", "2.14.1+cu130", {"torch/version.py": TORCH_CU130})], "torch", "13.0", False),
        ([pkg("torch", "2.5.1+cpu")], "torch", None, True),  # version.py unreadable: the local tag tells
        ([pkg("torch", "2.5.1")], "torch", None, None),  # nothing readable: unknown, not guessed
        ([pkg("tensorflow", "2.15.1", {"tensorflow/python/platform/build_info.py": TF_215})], "tensorflow", "12.2",
         False),
        ([pkg("tensorflow-cpu", "2.21.0", {"tensorflow/python/platform/build_info.py": TF_CPU})], "tensorflow-cpu",
         None, True),
        ([pkg("jaxlib", "0.4.13+cuda12.cudnn89")], "jaxlib", "12", False),
        ([pkg("jaxlib", "0.4.30"), pkg("jax-cuda12-plugin", "0.4.30")], "jaxlib", "12", False),
        ([pkg("jaxlib", "0.4.30")], "jaxlib", None, True),
        ([pkg("cupy-cuda12x", "13.3.0")], "cupy-cuda12x", "12", False),
        ([pkg("cupy-cuda117", "10.6.0")], "cupy-cuda117", "11.7", False),
        ([pkg("paddlepaddle-gpu", "2.6.1.post120")], "paddlepaddle-gpu", "12.0", False),
        ([pkg("onnxruntime", "1.20.0")], "onnxruntime", None, True),
        ([pkg("torchvision", "0.20.1+cu124")], "torchvision", "12.4", None),
        ([pkg("torchaudio", "2.5.1+cpu")], "torchaudio", None, True),
        ([pkg("nvidia-cuda-runtime-cu12", "12.4.127")], "nvidia-cuda-runtime-cu12", "12.4", None),
    ],
)
def test_build_kind_and_cuda_come_from_the_packages_own_files(raw: list, name: str, cuda: str | None,
                                                               cpu_only: bool | None) -> None:
    got = {p.name: p for p in packages_from_raw(raw)}[name]
    assert (got.cuda, got.cpu_only) == (cuda, cpu_only)


def test_torch_takes_its_cudnn_from_its_own_wheel_metadata_not_the_first_cudnn_wheel() -> None:
    torch = {**pkg("torch", "2.14.1+cu130", {"torch/version.py": TORCH_CU130}),
             "requires": ['nvidia-cublas==13.0.0.19; platform_system == "Linux"',
                          'nvidia-cudnn-cu13==9.13.0.50; platform_system == "Linux"']}
    raw = [torch, pkg("nvidia-cudnn-cu12", "9.1.0.70"), pkg("nvidia-cudnn-cu13", "9.13.0.50")]
    got = {p.name: p for p in packages_from_raw(raw)}
    assert got["torch"].cudnn == "9.13.0.50"
    assert got["nvidia-cudnn-cu13"].cudnn == "9.13.0.50" and got["nvidia-cudnn-cu13"].cuda == "13"


def test_torch_reads_the_older_metadata_pin_form() -> None:
    torch = {**pkg("torch", "2.5.1+cu124"), "requires": [
        'nvidia-cudnn-cu12 (==9.1.0.70) ; platform_system == "Linux" and platform_machine == "x86_64"']}
    (got,) = packages_from_raw([torch])
    assert got.cudnn == "9.1.0.70"


def test_torch_without_a_pin_has_no_built_cudnn_from_a_neighbour_wheel() -> None:
    raw = [pkg("torch", "2.14.1+cu130", {"torch/version.py": TORCH_CU130}), pkg("nvidia-cudnn-cu13", "9.13.0.50")]
    assert {p.name: p for p in packages_from_raw(raw)}["torch"].cudnn is None


@pytest.mark.parametrize(("reported", "version"), [(92400, "9.24.0"), ("92400", "9.24.0"), (8902, "8.9.2"),
                                                   (90100, "9.1.0"), ("9.1.0", "9.1.0"), ("8", "8"), (True, None),
                                                   ("n/a", None), (10**30, None)])
def test_one_representation_of_a_cudnn_version(reported: object, version: str | None) -> None:
    from doctor.model.facts import DeepResult
    from doctor.model.versions import cudnn_version

    assert cudnn_version(reported) == version
    if isinstance(reported, str):
        assert DeepResult(cudnn=reported).cudnn == version


@pytest.mark.parametrize(("reported", "version"), [
    (13020, "13.2"), ("13020", "13.2"), (12040, "12.4"), (9020, "9.2"), (11080, "11.8"),  # cudaRuntimeGetVersion()
    ("13.0", "13.0"), ("12.4.1", "12.4.1"), ("13", "13"),  # dotted, and a bare major (a wheel's cu13 tag)
    (0, None), ("0", None), (999, None), (100_000, None), (True, None), (10**30, None), ("9" * 40, None),
    ("", None), (None, None), (13.2, None)])
def test_one_representation_of_a_cuda_version(reported: object, version: str | None) -> None:
    """CuPy's runtimeGetVersion() answers 13020 where torch.version.cuda says "13.0": both are CUDA versions,
    recorded and shown dotted wherever a framework or --deep field carries one (check --deep showed CUDA 13020)."""
    from doctor.model.facts import DeepResult, PyPackage
    from doctor.model.facts_active import FrameworkRun, TorchRun
    from doctor.model.versions import cuda_version

    assert cuda_version(reported) == version
    if isinstance(reported, str) and reported:
        assert DeepResult(cuda=reported).cuda == version
        assert PyPackage("cupy-cuda13x", "14.2.0", cuda=reported).cuda == version
        assert FrameworkRun("cupy", "/venv/bin/python", cuda=reported).cuda == version
        assert TorchRun("oom", "/venv/bin/python", cuda=reported).cuda == version


@pytest.mark.parametrize(("reported", "version"), [
    ((2, 28, 9), "2.28.9"), ([2, 21, 5], "2.21.5"), (22809, "2.28.9"), ("22809", "2.28.9"), (21003, "2.10.3"),
    (2708, "2.7.8"), ("2708", "2.7.8"), ("2.28.9", "2.28.9"),  # NCCL_VERSION_CODE: x1000 up to 2.8, x10000 after
    (99, None), ((2, "x", 1), None), ((True, 1), None), ("n/a", None), (None, None), (10**30, None)])
def test_one_representation_of_an_nccl_version(reported: object, version: str | None) -> None:
    from doctor.model.facts_active import TorchRun, coerce
    from doctor.model.versions import nccl_version

    assert nccl_version(reported) == version
    if isinstance(reported, str):
        run = coerce(TorchRun, {"mode": "allreduce", "python": "/venv/bin/python", "nccl": reported})
        assert run is not None and run.nccl == version


def test_the_environment_probe_reads_torchs_nvidia_pins(tmp_path) -> None:
    import json
    import subprocess
    import sys

    site = tmp_path / "site"
    meta = site / "torch-2.9.0+cu130.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nRequires-Dist: filelock\n"
                                   "Requires-Dist: nvidia-cudnn-cu13==9.13.0.50; platform_system == \"Linux\"\n\n"
                                   "Requires-Dist: nvidia-fake==1 (in the description, not a header)\n")
    child = Path(__file__).resolve().parent.parent / "doctor" / "probes" / "pyenv_child.py"
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path[:0] = [{str(site)!r}]; "
                          f"sys.argv = ['x']; exec(open({str(child)!r}).read())"],
                         capture_output=True, text=True, timeout=120)
    data = json.loads(out.stdout[out.stdout.index("{"):])
    torch = next(p for p in data["packages"] if p["name"] == "torch")
    assert torch["requires"] == ['nvidia-cudnn-cu13==9.13.0.50; platform_system == "Linux"']


def test_tensorflow_reports_the_cudnn_it_was_built_with() -> None:
    (tf,) = packages_from_raw([pkg("tensorflow", "2.15.1", {"tensorflow/python/platform/build_info.py": TF_215})])
    assert tf.cudnn == "8"


def test_an_environment_directory_names_its_interpreter(tmp_path) -> None:
    from doctor.host import Host

    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python3").write_text("")
    host = Host()
    assert interpreter_of(host, str(tmp_path / "venv")) == str(tmp_path / "venv" / "bin" / "python3")
    assert interpreter_of(host, "/usr/bin/python3") == "/usr/bin/python3"
