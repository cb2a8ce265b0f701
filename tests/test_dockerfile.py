"""check --dockerfile: a Dockerfile read as the image it builds, judged by the static checks.

Tier 1: the reader on real Dockerfiles from public projects (tests/data/dockerfiles/, origins in
tests/data/SOURCES.md) and ours (examples/docker/Dockerfile), then the resolution rules line by line.
Tier 3: the CLI end to end, every format pointing at the Dockerfile line.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.dockerfile import DockerfileError, from_text, read, read_instructions
from doctor.matrix import current
from doctor.model.facts import facts_schema, validate

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "dockerfiles"
OURS = REPO / "examples" / "docker" / "Dockerfile"


def torch_of(image):  # type: ignore[no-untyped-def]
    return next(p for e in image.facts.python_envs for p in e.packages if p.name == "torch")


def image_of(text: str, tmp_path: Path | None = None, **build_args: str):  # type: ignore[no-untyped-def]
    return from_text(text, "Dockerfile", current(), context=tmp_path, build_args=build_args)


def gpu_doctor(*args: str) -> subprocess.CompletedProcess[str]:
    """`gpu-doctor check ARGS` in this process (the CLI's own entry point, its exit code and both streams)."""
    from doctor.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(REPO)  # the example paths are relative to the repository
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["check", *args])
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


# --- real Dockerfiles ---------------------------------------------------------------------------


def test_transformers_gpu_image_args_and_shell_variables_resolve_to_torch_cu121() -> None:
    image = read(DATA / "transformers-pytorch-gpu.Dockerfile")
    (tk,) = image.facts.toolkits
    assert (tk.version, tk.nvcc_version) == ("12.1.0", "12.1.0")  # nvidia/cuda:12.1.0-cudnn8-devel-ubuntu22.04
    assert image.facts.loader.nvcc_on_path is not None  # the base image's ENV PATH has /usr/local/cuda/bin
    assert (image.facts.host.os_id, image.facts.host.os_version) == ("ubuntu", "22.04")
    assert next(c.version for c in image.facts.cudnn) == "8"
    torch = torch_of(image)  # ARG PYTORCH='2.5.1', CUDA='cu121'; VERSION='torch=='$PYTORCH'.*'; --extra-index-url
    assert (torch.version, torch.cuda, torch.cpu_only) == ("2.5.1+cu121", "12.1", False)
    assert image.lines["pkg.torch"] == 20


def test_ultralytics_pytorch_base_image_brings_torch_cu124_and_its_cudnn() -> None:
    image = read(DATA / "ultralytics.Dockerfile")
    torch = torch_of(image)
    assert (torch.version, torch.cuda, torch.cpu_only) == ("2.5.0", "12.4", False)
    assert torch.cudnn and torch.cudnn.startswith("9.")  # the cu124 wheel's cuDNN, from the matrix
    assert image.facts.toolkits == []  # a -runtime PyTorch image: no CUDA toolkit
    assert image.lines["pkg.torch"] == 6
    assert image.facts.env["NVIDIA_VISIBLE_DEVICES"] is None


def test_pytorch_multistage_judges_the_final_stage_and_skips_the_arm64_case_arm() -> None:
    image = read(DATA / "pytorch.Dockerfile")
    assert "FROM ubuntu:20.04" in (image.facts.host.os_pretty or "")  # dev ← official ← ${BASE_IMAGE}
    torch = torch_of(image)  # conda install … pytorch-cuda=$(…) copied --from=conda-installs
    assert torch.cpu_only is not True  # the `linux/arm64` arm installs the CPU wheel; amd64 builds do not run it
    assert image.facts.env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert image.facts.env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib:/usr/local/nvidia/lib64"
    assert image.lines["env.LD_LIBRARY_PATH"] == 101
    assert image.facts.env["CONDA_PREFIX"] == "/opt/conda"


def test_llama_cpp_nested_global_args_name_the_final_stages_base() -> None:
    image = read(DATA / "llama-cpp-cuda.Dockerfile")
    (tk,) = image.facts.toolkits
    assert (tk.version, tk.nvcc_version) == ("12.4.0", None)  # the -runtime image of the final `server` stage
    assert image.lines["base"] == 39


def test_tgi_torch_copied_from_its_install_stage_points_at_the_install_line() -> None:
    image = read(DATA / "tgi.Dockerfile")
    torch = torch_of(image)
    assert (torch.version, torch.cuda) == ("2.7.0", "12.6")  # ARG PYTORCH_VERSION=2.7; PyPI's 2.7.0 is cu126
    assert image.lines["pkg.torch"] == 68


def test_tgi_trtllm_runtime_puts_the_cuda_stubs_on_ld_library_path() -> None:
    done = gpu_doctor("--dockerfile", str(DATA / "tgi-trtllm.Dockerfile"), "--format", "github")
    assert any("line=116,title=image.env_blocks_gpu::" in ln and ln.startswith("::warning")
               for ln in done.stdout.splitlines()), done.stdout


def test_deepspeed_devel_cuda_12_with_torch_1_13_cannot_build_extensions() -> None:
    torch = torch_of(read(DATA / "deepspeed.Dockerfile"))
    assert (torch.version, torch.cuda) == ("1.13.0", "11.7")  # ENV PYTORCH_VERSION=1.13.0; PyPI's 1.13.0 is cu117
    report = json.loads(gpu_doctor("--dockerfile", str(DATA / "deepspeed.Dockerfile"), "--json").stdout)
    (f,) = [f for f in report["findings"] if f["code"] == "framework.nvcc_mismatch_for_extensions"]
    assert f["severity"] == "warn" and f["title"].endswith("building CUDA extensions will fail")
    assert ".Dockerfile:154: " in f["title"]


def test_an_ngc_tag_without_a_matrix_row_is_unknown_not_absent() -> None:
    image = read(DATA / "yolov5.Dockerfile")
    assert "toolkits" not in image.facts.sources  # so toolkit.missing skips instead of claiming none
    assert any(ln == 6 and "nvcr.io/nvidia/pytorch:22.09-py3" in text for ln, text in image.notes)
    assert any(ln == 19 and "requirements.txt" in text for ln, text in image.notes)


def test_our_example_dockerfile_reads_as_torch_cu124_on_python_slim() -> None:
    image = read(OURS)
    torch = torch_of(image)
    assert (torch.version, torch.cuda) == ("2.5.1+cu124", "12.4")
    assert image.lines["pkg.torch"] == 7
    assert image.facts.python_envs[0].version == "3.11"
    names = {p.name for p in image.facts.python_envs[0].packages}
    assert names == {"torch"}  # `pip install /opt/gpu-doctor` is a path, not a package name


@pytest.mark.parametrize("path", [*sorted(DATA.glob("*.Dockerfile")), OURS], ids=lambda p: p.name)
def test_every_real_dockerfile_gives_facts_that_match_the_schema(path: Path) -> None:
    assert validate(read(path).facts.to_dict(), facts_schema()) == []


# --- resolution rules, line by line ------------------------------------------------------------


def test_plain_pip_install_torch_is_the_newest_release_for_the_images_python() -> None:
    releases = current().rows("pytorch", "torch")
    newest_for_39 = max((r for r in releases if r.get("python") in (">=3.8.0", ">=3.9", ">=3.9.0", ">=3.7.0")),
                        key=lambda r: tuple(int(x) for x in r["version"].split(".")))
    torch = torch_of(image_of("FROM python:3.9-slim\nRUN pip install torch\n"))
    assert (torch.version, torch.cuda) == (newest_for_39["version"], newest_for_39["default_cuda"])


def test_plain_pip_install_torch_is_the_newest_release_default_cuda_build() -> None:
    newest = max(current().rows("pytorch", "torch"), key=lambda r: tuple(int(x) for x in r["version"].split(".")))
    torch = torch_of(image_of("FROM python:3.12-slim\nRUN pip install torch\n"))
    assert (torch.version, torch.cuda, torch.cpu_only) == (newest["version"], newest["default_cuda"], False)


@pytest.mark.parametrize(("run", "version", "cuda", "cpu_only"), [
    ("pip install torch==2.4.1 --index-url https://download.pytorch.org/whl/cpu", "2.4.1+cpu", None, True),
    ("uv pip install --system torch==2.5.1+cu118", "2.5.1+cu118", "11.8", False),
    ("python3 -m pip install 'torch>=2.3,<2.5' --index-url https://download.pytorch.org/whl/cu121", "2.4.1+cu121",
     "12.1", False),
    ("pip3 install --no-cache-dir torch==2.5.1 --extra-index-url https://download.pytorch.org/whl/cu118",
     "2.5.1+cu118", "11.8", False),
    ("pip install torch==2.5.1", "2.5.1", "12.4", False),  # PyPI's Linux x86_64 wheel of 2.5.1 is the cu124 build
    ("conda install -y -c pytorch -c nvidia pytorch pytorch-cuda=12.1", None, "12.1", False),
    ("conda install -y -c pytorch pytorch cpuonly", None, None, True),
    ("uv pip install --system --torch-backend=cu126 torch==2.7.1", "2.7.1+cu126", "12.6", False),
    ("uv pip install --system --torch-backend=auto torch", None, None, None),  # decided by the build machine
    ("pip install --pre torch --index-url https://download.pytorch.org/whl/nightly/cu128", None, "12.8", False),
    ("PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cu118 pip install torch==2.5.1", "2.5.1+cu118", "11.8",
     False),
    ("mamba install -y -c conda-forge pytorch-gpu cuda-version=12.4", None, "12.4", False),
    ("sudo -E env PIP_NO_CACHE_DIR=1 pip3 install torch==2.5.1+cu121", "2.5.1+cu121", "12.1", False),
])
def test_install_lines_resolve_to_the_build_they_get_today(run: str, version: str | None, cuda: str | None,
                                                           cpu_only: bool) -> None:
    torch = torch_of(image_of(f"FROM ubuntu:22.04\nRUN {run}\n"))
    assert (torch.version, torch.cuda, torch.cpu_only) == (version, cuda, cpu_only)


def test_pip_index_from_env_lines() -> None:
    image = image_of("FROM python:3.11\nENV PIP_INDEX_URL=https://download.pytorch.org/whl/cpu\n"
                     "RUN pip install torch==2.5.1\n")
    assert torch_of(image).cpu_only is True


def test_plain_tensorflow_in_a_slim_image_needs_a_cuda_runtime_it_does_not_have(tmp_path: Path) -> None:
    p = tmp_path / "Dockerfile"
    p.write_text("FROM python:3.11-slim\nRUN pip install tensorflow==2.16.1\n")
    report = json.loads(gpu_doctor("--dockerfile", str(p), "--json").stdout)
    (f,) = [f for f in report["findings"] if f["code"] == "toolkit.missing"]
    assert f["severity"] == "fail" and f["title"].startswith(f"{p}:2: ") and "tensorflow 2.16.1" in f["title"]
    p.write_text("FROM python:3.11-slim\nRUN pip install 'tensorflow[and-cuda]==2.16.1'\n")
    report = json.loads(gpu_doctor("--dockerfile", str(p), "--json").stdout)
    assert not [f for f in report["findings"] if f["severity"] == "fail"]
    names = {p["name"] for e in report["facts"]["python_envs"] for p in e["packages"]}
    assert {"tensorflow", "nvidia-cudnn-cu12", "nvidia-cuda-runtime-cu12"} <= names  # the extra's pins


def test_jax_cuda_extra_brings_its_plugin() -> None:
    image = image_of("FROM python:3.11-slim\nRUN pip install -U 'jax[cuda12]'\n")
    pkgs = {p.name: p for p in image.facts.python_envs[0].packages}
    assert (pkgs["jax"].cuda, pkgs["jax"].cpu_only) == ("12", False)
    assert "jax-cuda12-plugin" in pkgs  # what tells the checks the CUDA runtime comes as wheels


def test_an_arm64_build_does_not_get_the_x86_64_wheel() -> None:
    image = image_of("FROM --platform=linux/arm64 python:3.11\nRUN pip install torch==2.5.1\n")
    torch = torch_of(image)
    assert (torch.version, torch.cuda, torch.cpu_only) == ("2.5.1", None, None)
    assert image.facts.host.arch == "aarch64" and image.notes


def test_conda_override_cuda_picks_the_cuda_build_in_a_build_without_gpu() -> None:
    torch = torch_of(image_of("FROM ubuntu:22.04\nENV CONDA_OVERRIDE_CUDA=12.4\nRUN conda install -y pytorch\n"))
    assert (torch.cuda, torch.cpu_only) == ("12.4", False)
    assert torch_of(image_of("FROM ubuntu:22.04\nRUN conda install -y pytorch\n")).cpu_only is None  # unknown


def test_arg_in_from_and_build_arg_override() -> None:
    text = "ARG CUDA=12.4.1\nFROM nvidia/cuda:${CUDA}-runtime-ubuntu22.04\n"
    assert image_of(text).facts.toolkits[0].version == "12.4.1"
    assert image_of(text, CUDA="11.8.0").facts.toolkits[0].version == "11.8.0"
    assert image_of(text).facts.toolkits[0].nvcc_version is None  # runtime flavour: no nvcc


def test_system_packages_bring_a_toolkit_cudnn_and_the_compat_package() -> None:
    image = image_of("FROM ubuntu:22.04\nRUN apt-get update && apt-get install -y --no-install-recommends \\\n"
                     "    cuda-toolkit-12-4 libcudnn8=8.9.7.29-1+cuda12.2 cuda-compat-12-4\n"
                     "ENV PATH=/usr/local/cuda-12.4/bin:$PATH\n")
    (tk,) = image.facts.toolkits
    assert (tk.root, tk.version, tk.nvcc_version) == ("/usr/local/cuda-12.4", "12.4", "12.4")
    assert image.facts.loader.nvcc_on_path is not None
    assert [c.version for c in image.facts.cudnn] == ["8.9.7.29"]
    assert [p.name for p in image.facts.driver.packages] == ["cuda-compat-12-4"]
    assert image.lines["toolkit.12.4"] == 2


def test_cuda_compat_in_the_image_is_named_with_the_minimum_host_driver(tmp_path: Path) -> None:
    p = tmp_path / "Dockerfile"
    p.write_text("FROM nvidia/cuda:12.4.1-base-ubuntu22.04\nRUN apt-get install -y cuda-compat-12-4\n")
    done = gpu_doctor("--dockerfile", str(p), "-v")
    assert "The image carries cuda-compat-12-4" in done.stdout


def test_an_installed_torch_that_satisfies_is_kept_unless_upgraded() -> None:
    base = "FROM pytorch/pytorch:2.5.0-cuda12.4-cudnn9-runtime\nRUN pip install {}\n"
    assert torch_of(image_of(base.format("torch"))).version == "2.5.0"  # "Requirement already satisfied"
    assert torch_of(image_of(base.format("'torch>=2.4'"))).version == "2.5.0"
    assert torch_of(image_of(base.format("-U torch"))).version != "2.5.0"
    assert torch_of(image_of(base.format("torch==2.5.1"))).version == "2.5.1"
    assert torch_of(image_of(base.format("torch==2.5.0+cu118 -f https://download.pytorch.org/whl/torch_stable.html"))
                    ).cuda == "11.8"


def test_a_project_installed_from_the_context_brings_its_dependencies(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\ndependencies = ["torch>=2.3; '
                                             'sys_platform == \'linux\'", "numpy", "pywin32; sys_platform == '
                                             '\'win32\'"]\n[project.optional-dependencies]\nexport = ["onnx"]\n')
    image = image_of("FROM python:3.11\nWORKDIR /app\nCOPY . .\nRUN pip install -e \".[export]\"\n", tmp_path)
    names = {p.name for p in image.facts.python_envs[0].packages}
    assert {"torch", "numpy", "onnx"} <= names and "pywin32" not in names
    assert torch_of(image).cpu_only is False and image.lines["pkg.torch"] == 4


def test_our_example_with_the_repository_as_context_installs_gpu_doctor_dependencies() -> None:
    image = read(OURS, context=REPO)
    names = {p.name for p in image.facts.python_envs[0].packages}
    assert {"torch", "prometheus-client", "nvidia-ml-py"} <= names
    assert image.notes == []


def test_conda_environment_file_from_the_context(tmp_path: Path) -> None:
    (tmp_path / "environment.yml").write_text("name: ml\nchannels:\n  - pytorch\n  - nvidia\ndependencies:\n"
                                              "  - python=3.10\n  - pytorch=2.1.0\n  - pytorch-cuda=12.1  # CUDA\n"
                                              "  - pip\n  - pip:\n      - transformers==4.40.0\n")
    image = image_of("FROM continuumio/miniconda3\nCOPY environment.yml /tmp/env.yml\n"
                     "RUN conda env create -f /tmp/env.yml\n", tmp_path)
    torch = torch_of(image)
    assert (torch.version, torch.cuda, torch.cpu_only) == ("2.1.0", "12.1", False)
    assert "transformers" in {p.name for p in image.facts.python_envs[0].packages}
    assert image.lines["pkg.torch"] == 3 and image.facts.env["CONDA_PREFIX"] == "/opt/conda"


@pytest.mark.parametrize("run", ["./install.sh", "bash scripts/setup_cuda.sh --yes", "curl -fsSL https://x/i | sh",
                                 'sh -c "$(curl -fsSL https://x/i)"'])
def test_a_script_makes_the_toolkits_unknown_not_absent(run: str) -> None:
    image = image_of(f"FROM ubuntu:22.04\nRUN apt-get update && {run}\n")
    assert "toolkits" not in image.facts.sources
    assert image.notes and image.notes[0][0] == 2
    assert "toolkits" in image_of("FROM ubuntu:22.04\nRUN apt-get update && make install\n").facts.sources


def test_requirements_file_is_read_from_the_build_context(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("--extra-index-url https://download.pytorch.org/whl/cu118\n"
                                               "numpy<2  # pinned\ntorch==2.3.1\n")
    image = image_of("FROM python:3.11\nCOPY requirements.txt .\nRUN pip install -r requirements.txt\n", tmp_path)
    assert torch_of(image).version == "2.3.1+cu118"
    assert image.lines["pkg.torch"] == 3


def test_files_outside_the_build_context_are_never_read(tmp_path: Path) -> None:
    context = tmp_path / "ctx"
    context.mkdir()
    (tmp_path / "secret.txt").write_text("torch==2.5.1\n")
    (context / "requirements.txt").write_text("-r ../secret.txt\n")
    for run in ("pip install -r ../secret.txt", "pip install -r requirements.txt", "pip install ..",
                "conda env create -f ../secret.txt"):
        image = image_of(f"FROM python:3.11\nRUN {run}\n", context)
        assert image.facts.python_envs == [], run


def test_heredoc_exec_form_and_uninstall() -> None:
    text = ('FROM python:3.11\nRUN <<EOF\npip install torch==2.5.1 --index-url https://download.pytorch.org/whl/cu121'
            '\nEOF\nRUN ["pip", "install", "jax[cuda12]==0.4.30"]\nRUN pip uninstall -y jax\n')
    image = image_of(text)
    assert torch_of(image).cuda == "12.1"
    assert "jax" not in {p.name for p in image.facts.python_envs[0].packages}


def test_env_legacy_form_and_substitution() -> None:
    image = image_of("FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nENV CUDA_HOME /usr/local/cuda\n"
                     "ENV LD_LIBRARY_PATH=${CUDA_HOME}/lib64/stubs:$LD_LIBRARY_PATH\n")
    assert image.facts.env["CUDA_HOME"] == "/usr/local/cuda"
    assert image.facts.env["LD_LIBRARY_PATH"] == \
        "/usr/local/cuda/lib64/stubs:/usr/local/nvidia/lib:/usr/local/nvidia/lib64"
    assert image.lines["env.LD_LIBRARY_PATH"] == 3


def test_continuation_lines_and_comments_keep_the_first_line_number() -> None:
    ins = read_instructions("FROM a\n# c\nRUN pip install \\\n  # inner comment\n  torch\nENV A=1\n")
    assert [(i.line, i.keyword) for i in ins] == [(1, "FROM"), (3, "RUN"), (6, "ENV")]
    assert ins[1].args == "pip install  torch"


@pytest.mark.parametrize(("content", "words"), [
    (b"\x00\x01binary", "binary"),
    (b"RUN pip install torch\n", "no FROM"),
])
def test_not_a_dockerfile_is_a_clear_error(tmp_path: Path, content: bytes, words: str) -> None:
    p = tmp_path / "Dockerfile"
    p.write_bytes(content)
    with pytest.raises(DockerfileError, match=words):
        read(p)


WORDS = st.sampled_from(["pip", "install", "torch", "torch==2.5.1", "--index-url", "--extra-index-url",
                          "https://download.pytorch.org/whl/cu121", "-r", "requirements.txt", "conda", "pytorch",
                          "pytorch-cuda=12.1", "$X", "${X:-1}", "&&", "||", ";", ";;", "case", "\\", "'", '"', "#",
                          "<<EOF", "EOF", "--from=0", "X=1", "[", "]", "python3", "-m", "uv", "nvidia/cuda:12.4.1-"
                          "devel-ubuntu22.04", "AS", "a"])
LINE = st.builds(lambda k, ws: " ".join([k, *ws]), st.sampled_from(["FROM", "RUN", "ENV", "ARG", "COPY", "run", "#"]),
                 st.lists(WORDS, max_size=8))


@settings(max_examples=200, deadline=None)
@given(st.lists(LINE, max_size=10).map("\n".join))
def test_any_text_is_facts_or_a_clear_error(text: str) -> None:
    try:
        image = from_text("FROM python:3.11\n" + text, "Dockerfile", current())
    except DockerfileError:
        return
    assert validate(image.facts.to_dict(), facts_schema()) == []


def test_dockerfile_from_standard_input(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "doctor", "check", "--dockerfile", "-", "--json"],
                          input="FROM python:3.11\nRUN pip install torch==2.5.1 --index-url "
                                "https://download.pytorch.org/whl/cpu\n",
                          capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert any(f["code"] == "framework.cpu_only_build" and f["title"].startswith("Dockerfile:2: ")
               for f in report["findings"])


def test_copy_from_a_stage_index_and_a_wheel_url() -> None:
    image = image_of("FROM python:3.11\nRUN pip install https://download.pytorch.org/whl/cu121/"
                     "torch-2.1.0%2Bcu121-cp311-cp311-linux_x86_64.whl\nFROM python:3.11-slim\n"
                     "COPY --from=0 /usr/local/lib/python3.11 /usr/local/lib/python3.11\n")
    assert (torch_of(image).version, torch_of(image).cuda) == ("2.1.0+cu121", "12.1")
    assert image.lines["pkg.torch"] == 2  # the line that installed it, where a fix goes


def test_copy_from_a_stage_carries_its_packages_only_with_a_python_tree() -> None:
    text = ("FROM python:3.11 AS build\nRUN pip install torch==2.5.1\nFROM python:3.11-slim\n"
            "COPY --from=build /app/bin /app/bin\n")
    assert image_of(text).facts.python_envs == []
    text += "COPY --from=build /usr/local/lib/python3.11/site-packages /usr/local/lib/python3.11/site-packages\n"
    assert torch_of(image_of(text)).version == "2.5.1"


def test_torch_pinned_to_major_minor_is_the_x_0_release() -> None:
    torch = torch_of(image_of("FROM python:3.11\nRUN uv pip install torch==2.7\n"))
    assert (torch.version, torch.cuda) == ("2.7.0", "12.6")  # PyPI's 2.7.0 Linux wheel is the cu126 build


def test_a_base_from_a_build_argument_without_value_says_so() -> None:
    image = image_of("ARG BASE\nFROM ${BASE}\n")
    assert image.notes == [(2, "base image ${BASE}: a build argument without a value (give it with --build-arg); "
                               "what the base holds is unknown")]
    assert "toolkits" not in image.facts.sources


# --- the CLI, every format ----------------------------------------------------------------------

BROKEN = """FROM python:3.11-slim
ENV NVIDIA_DRIVER_CAPABILITIES=utility
RUN pip install --no-cache-dir torch==2.5.1 --index-url https://download.pytorch.org/whl/cpu
"""


@pytest.fixture()
def broken(tmp_path: Path) -> Path:
    p = tmp_path / "Dockerfile"
    p.write_text(BROKEN)
    return p


def test_cli_text_points_each_failure_at_its_line(broken: Path) -> None:
    done = gpu_doctor("--dockerfile", str(broken))
    assert done.returncode == 1, done.stderr
    assert f"{broken}:3: torch 2.5.1+cpu in python3 is a CPU-only build" in done.stdout
    assert f"{broken}:2: The image sets NVIDIA_DRIVER_CAPABILITIES=utility" in done.stdout


def test_cli_github_annotations_carry_file_and_line(broken: Path) -> None:
    done = gpu_doctor("--dockerfile", str(broken), "--format", "github")
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("::error")]
    assert any(f"file={broken},line=3,title=framework.cpu_only_build::torch 2.5.1+cpu" in ln for ln in lines)
    assert any("line=2,title=image.env_blocks_gpu::" in ln for ln in lines)


def test_cli_json_junit_markdown_carry_the_location(broken: Path) -> None:
    report = json.loads(gpu_doctor("--dockerfile", str(broken), "--json").stdout)
    cpu = next(f for f in report["findings"] if f["code"] == "framework.cpu_only_build")
    assert cpu["evidence"][0] == {"fact": "dockerfile", "value": f"{broken}:3", "source": "dockerfile"}
    suite = ET.fromstring(gpu_doctor("--dockerfile", str(broken), "--format", "junit").stdout)
    failure = suite.find("testcase[@name='framework.cpu_only_build']/failure")
    assert failure is not None and failure.get("message", "").startswith(f"{broken}:3: ")
    assert f"{broken}:2: The image sets" in gpu_doctor("--dockerfile", str(broken), "--format", "markdown").stdout


def test_cli_devel_image_with_a_torch_of_another_cuda_major_warns_at_the_torch_line(tmp_path: Path) -> None:
    p = tmp_path / "Dockerfile"
    p.write_text("FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nENV CUDA_HOME=/usr/local/cuda\n"
                 "RUN pip install torch==2.5.1 --index-url https://download.pytorch.org/whl/cu118\n")
    report = json.loads(gpu_doctor("--dockerfile", str(p), "--json").stdout)
    (f,) = [f for f in report["findings"] if f["code"] == "framework.nvcc_mismatch_for_extensions"]
    assert f["severity"] == "warn" and f["title"].startswith(f"{p}:3: ")


def test_cli_our_example_gate_passes_with_the_host_driver_it_names() -> None:
    done = gpu_doctor("--dockerfile", str(OURS), "--target-gpu", "H100 80GB HBM3", "--host-driver", "535.104.05",
                      "--require", "torch>=2.4", "--require", "cuda>=12.1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "examples/docker/Dockerfile:7: This image needs a host driver ≥ 525.60.13" in done.stdout


@pytest.mark.parametrize(("args", "words"), [
    (["--dockerfile", "/nonexistent/Dockerfile"], "No such file"),
    (["--dockerfile", "examples/docker/Dockerfile", "--facts", "x.json"], "do not apply"),
    (["--dockerfile", "examples/docker/Dockerfile", "--build-arg", "NOVALUE"], "NAME=VALUE"),
    (["--build-arg", "A=1"], "add --dockerfile"),
    (["--dockerfile", "examples/docker/Dockerfile", "--context", "nope"], "not a directory"),
    (["--dockerfile", "tests/data"], "not a file"),
])
def test_cli_bad_input_is_one_line_and_exit_2(args: list[str], words: str) -> None:
    done = gpu_doctor(*args)
    assert done.returncode == 2
    assert words in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
