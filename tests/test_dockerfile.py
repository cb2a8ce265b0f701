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
import re
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


def torch_line() -> int:
    """The line of our example Dockerfile that installs torch (the example's comments may grow)."""
    return next(i for i, ln in enumerate(OURS.read_text().splitlines(), 1) if ln.startswith("RUN") and "torch" in ln)


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


def test_transformers_gpu_image_a_version_chosen_by_a_branch_is_unknown_not_one_arm() -> None:
    image = read(DATA / "transformers-pytorch-gpu.Dockerfile")
    (tk,) = image.facts.toolkits
    assert (tk.version, tk.nvcc_version) == ("12.1.0", "12.1.0")  # nvidia/cuda:12.1.0-cudnn8-devel-ubuntu22.04
    assert image.facts.loader.nvcc_on_path is not None  # the base image's ENV PATH has /usr/local/cuda/bin
    assert (image.facts.host.os_id, image.facts.host.os_version) == ("ubuntu", "22.04")
    assert next(c.version for c in image.facts.cudnn) == "8"
    # `[ ${#PYTORCH} -gt 0 ] && VERSION='torch=='$PYTORCH'.*' || VERSION='torch'; pip install -U $VERSION`: which
    # arm sets VERSION is not evaluated, so what pip installs is unknown, and the report says so at line 20
    assert not any(p.name == "torch" for e in image.facts.python_envs for p in e.packages)
    assert any(ln == 20 and "$VERSION" in text and "cannot know" in text for ln, text in image.notes), image.notes


def test_ultralytics_pytorch_base_image_brings_torch_cu124_and_its_cudnn() -> None:
    image = read(DATA / "ultralytics.Dockerfile")
    torch = torch_of(image)
    assert (torch.version, torch.cuda, torch.cpu_only) == ("2.5.0", "12.4", False)
    assert torch.cudnn and torch.cudnn.startswith("9.")  # the cu124 wheel's cuDNN, from the matrix
    assert image.facts.toolkits == []  # a -runtime PyTorch image: no CUDA toolkit
    assert image.lines["pkg.torch"] == 6
    assert image.facts.env["NVIDIA_VISIBLE_DEVICES"] is None


def test_pytorch_multistage_judges_the_final_stage_and_never_takes_a_case_arm() -> None:
    image = read(DATA / "pytorch.Dockerfile")
    assert "FROM ubuntu:20.04" in (image.facts.host.os_pretty or "")  # dev ← official ← ${BASE_IMAGE}
    # conda install … pytorch-cuda=… runs inside `case ${TARGETPLATFORM}`: an arm the reader does not choose
    assert not any(p.name == "torch" and p.cuda for e in image.facts.python_envs for p in e.packages)
    assert any("only on a branch of `case`" in text for _ln, text in image.notes), image.notes
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
    assert image.lines["pkg.torch"] == torch_line()
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
    assert f"examples/docker/Dockerfile:{torch_line()}: This image needs a host driver ≥ 525.60.13" in done.stdout


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


# --- NVIDIA_REQUIRE_CUDA: the container runtime's own gate (issue 21, class 1) --------------------------------


def findings_of(done: subprocess.CompletedProcess[str], code: str) -> list[dict]:  # type: ignore[type-arg]
    return [f for f in json.loads(done.stdout)["findings"] if f["code"] == code]


def test_nvidia_cuda_base_inherits_its_require_cuda_into_the_minimum_driver() -> None:
    # nvidia/cuda:12.4.0-runtime sets NVIDIA_REQUIRE_CUDA=cuda>=12.4 …: below 550.54.14 the runtime refuses the
    # container (except on the 470/525/535 branches it names), whatever minor-version compatibility allows
    image = read(DATA / "llama-cpp-cuda.Dockerfile")
    assert (image.facts.env["NVIDIA_REQUIRE_CUDA"] or "").startswith("cuda>=12.4 brand=tesla,driver>=470")
    done = gpu_doctor("--dockerfile", str(DATA / "llama-cpp-cuda.Dockerfile"), "--json")
    (f,) = findings_of(done, "image.min_host_driver")
    assert "needs a host driver ≥ 550.54.14" in f["title"] and "525.60.13" not in f["title"]


def test_cuda_12_8_images_have_no_exception_for_geforce() -> None:
    done = gpu_doctor("--dockerfile", str(DATA / "tgi-trtllm.Dockerfile"), "--json")
    (f,) = findings_of(done, "image.min_host_driver")
    assert "≥ 570.26" in f["title"] and "not GeForce or TITAN" in f["title"]
    args = ("--dockerfile", str(DATA / "tgi-trtllm.Dockerfile"), "--json", "--host-driver", "535.104.05")
    geforce = gpu_doctor(*args, "--target-gpu", "RTX 4090")
    (f,) = findings_of(geforce, "image.require_cuda")
    assert f["severity"] == "fail" and "refuses to start" in f["title"] and "570.26" in f["title"]
    assert geforce.returncode == 1
    assert "gpu-doctor fix" not in (f.get("fix") or {}).get("summary", "")
    (f,) = findings_of(gpu_doctor(*args, "--target-gpu", "H100 80GB HBM3"), "image.require_cuda")
    assert f["severity"] == "ok" and "driver>=535,driver<536" in f["title"]  # a data-center brand's exception
    (f,) = findings_of(gpu_doctor(*args), "image.require_cuda")  # GPU not named: it depends on its brand
    assert f["severity"] == "warn" and "only for some GPUs" in f["title"]
    (f,) = findings_of(gpu_doctor(*args[:-2], "--host-driver", "570.86.10"), "image.require_cuda")
    assert f["severity"] == "ok"


def test_an_image_sets_its_own_require_cuda_on_a_python_base() -> None:
    # kohya_ss: FROM python:3.11-slim, ENV NVIDIA_REQUIRE_CUDA=cuda>=12.8 in `base`, the final stage FROM base
    done = gpu_doctor("--dockerfile", str(DATA / "kohya-ss.Dockerfile"), "--json")
    (f,) = findings_of(done, "image.min_host_driver")
    assert f["title"].endswith("This image needs a host driver ≥ 570.26")
    assert any(e["fact"] == "env.NVIDIA_REQUIRE_CUDA" and e["value"] == "cuda>=12.8" for e in f["evidence"])


def test_require_cuda_alternatives_are_or_and_constraints_and() -> None:
    from doctor.checks import require_cuda as rc

    req = rc.parse("cuda>=12.8 brand=tesla,driver>=535,driver<536 brand=quadro,driver>=550,driver<551")
    assert req is not None and req.cuda == "12.8"
    assert [(b, sorted(s)) for b, s in req.exceptions] == [(535, ["tesla"]), (550, ["quadro"])]
    m = current()
    assert rc.satisfied(m, req, "535.104.05", {"tesla"}, None)[0] is True
    assert rc.satisfied(m, req, "535.104.05", {"geforce"}, None)[0] is False
    assert rc.satisfied(m, req, "550.54.14", {"tesla"}, None)[0] is False  # tesla's exception is 535 only
    assert rc.satisfied(m, req, "536.1", {"tesla"}, None)[0] is False  # driver<536
    assert rc.satisfied(m, req, "570.26", None, None)[0] is True
    assert rc.parse("") is None and rc.parse("nonsense") is None


def test_disable_require_and_a_minimal_image() -> None:
    image = image_of("FROM ubuntu:22.04\nENV NVIDIA_REQUIRE_CUDA=cuda>=13.0\nRUN pip install 'jax[cuda13]'\n")
    assert image.facts.env["NVIDIA_REQUIRE_CUDA"] == "cuda>=13.0"
    from doctor.checks.compat import min_host_driver
    from doctor.registry import Context

    ctx = Context(matrix=current(), options={"static": True})
    (f,) = min_host_driver.run(image.facts, ctx)[2]
    assert f.title.startswith("This image needs a host driver ≥ 580")
    off = image_of("FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04\nENV NVIDIA_DISABLE_REQUIRE=1\n")
    (f,) = min_host_driver.run(off.facts, ctx)[2]
    assert "NVIDIA_REQUIRE_CUDA" not in f.detail and "525.60.13" in f.title  # minor-version compatibility again


# --- shell logic is read, never run (class 2) -------------------------------------------------------------


@pytest.mark.parametrize("run", [
    "if [ \"$X\" = 1 ]; then pip install torch==2.5.1; fi",
    "for f in a b; do pip install torch==2.5.1; done",
    "case $T in amd64) pip install torch==2.5.1 ;; esac",
    "pip install torch==2.5.1 || pip install torch==2.4.1",
    "while true; do pip install torch==2.5.1; break; done",
    "[ -n \"$CUDA\" ] && pip install torch==2.5.1",
    "test -f requirements.txt && pip install torch==2.5.1 && echo done",
])
def test_an_install_on_a_branch_is_unknown_never_one_arm(run: str) -> None:
    image = image_of(f"FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN {run}\n")
    assert not any(p.name == "torch" for e in image.facts.python_envs for p in e.packages)
    assert any(ln == 2 and "which gpu-doctor does not evaluate" in t for ln, t in image.notes), image.notes
    assert "toolkits" not in image.facts.sources  # what the branch installs may be anything


@pytest.mark.parametrize("run,said", [
    ("uv sync --frozen", "`uv sync` installs what the project's lock file says"),
    ("poetry install --no-root", "`poetry install` installs"),
    ("pipenv install --system --deploy", "`pipenv install` installs"),
    ("./install.sh --cuda", "runs the script ./install.sh"),
    ("/opt/setup.sh", "runs the script /opt/setup.sh"),
    ("bash scripts/install_deps.sh", "runs the script scripts/install_deps.sh"),
    (". /clone.sh repo url", "runs the script /clone.sh"),
    ("python setup.py install", "`python setup.py install`"),
    ("curl -fsSL https://x/install.sh | sh", "runs a fetched script"),
])
def test_scripts_and_lock_file_syncs_are_unknown_and_said(tmp_path: Path, run: str, said: str) -> None:
    image = image_of(f"FROM ubuntu:22.04\nRUN {run}\n")
    assert any(said in t and "is unknown" in t for _ln, t in image.notes), image.notes
    (tmp_path / "Dockerfile").write_text(f"FROM ubuntu:22.04\nRUN {run}\n")
    done = gpu_doctor("--dockerfile", str(tmp_path / "Dockerfile"), "--json", "-v")
    assert json.loads(done.stdout)["status"] == "unknown" and done.returncode == 4  # nothing learned: not "ready"


@pytest.mark.parametrize("run", ["pip download torch==2.5.1 -d /wheels", "pip install --dry-run torch==2.5.1",
                                 "pip index versions torch", "pip wheel torch==2.5.1", "pip install --report r.json "
                                 "--dry-run torch", "pip install --target /opt/x torch==2.5.1"])
def test_pip_commands_that_install_nothing_here(run: str) -> None:
    image = image_of(f"FROM ubuntu:22.04\nRUN {run}\n")
    assert not any(p.name == "torch" for e in image.facts.python_envs for p in e.packages)


def test_real_conditionals_nemo_for_loop_and_llama_factory_if() -> None:
    nemo = read(DATA / "nemo-speech.Dockerfile")
    assert any("branch of `for`" in t and "-r $f" in t for _ln, t in nemo.notes)
    factory = read(DATA / "llama-factory.Dockerfile")
    assert any("flash-attn" in t and "branch of `if`" in t for _ln, t in factory.notes)
    assert not any(p.name == "flash-attn" for e in factory.facts.python_envs for p in e.packages)
    invoke = read(DATA / "invokeai.Dockerfile")
    assert any(t.startswith("`uv sync` installs") for _ln, t in invoke.notes)


# --- image-appropriate verdicts and fixes (class 7) -------------------------------------------------------


def test_a_runtime_image_whose_torch_brings_its_cuda_needs_no_toolkit() -> None:
    done = gpu_doctor("--dockerfile", str(DATA / "ultralytics.Dockerfile"), "--json")
    (f,) = findings_of(done, "toolkit.missing")
    assert f["severity"] == "ok" and "none is needed" in f["title"]
    assert json.loads(done.stdout)["status"] == "ok" and done.returncode == 0


@pytest.mark.parametrize("name", ["text-generation-webui.Dockerfile", "functionary-vllm.Dockerfile",
                                  "llama-factory.Dockerfile", "yolov5.Dockerfile"])
def test_nothing_learned_is_unknown_not_ready(name: str) -> None:
    done = gpu_doctor("--dockerfile", str(DATA / name), "--json")
    assert json.loads(done.stdout)["status"] == "unknown" and done.returncode == 4


def test_an_image_meant_for_cpus_says_so(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM python:3.12-slim\nRUN pip install torch==2.5.1 --index-url "
                                         "https://download.pytorch.org/whl/cpu\n")
    plain = gpu_doctor("--dockerfile", str(tmp_path / "Dockerfile"), "--json")
    assert plain.returncode == 1  # a GPU image with a CPU torch
    cpu = gpu_doctor("--dockerfile", str(tmp_path / "Dockerfile"), "--json", "--cpu")
    assert cpu.returncode == 0 and json.loads(cpu.stdout)["status"] == "ok"
    (tmp_path / "Dockerfile").write_text("FROM python:3.12-slim\nLABEL gpu-doctor.cpu=true\nRUN echo hi\n")
    labelled = gpu_doctor("--dockerfile", str(tmp_path / "Dockerfile"), "--json")
    assert labelled.returncode == 0
    (tmp_path / "Dockerfile").write_text("FROM python:3.12-slim\nRUN echo hi\n")
    assert gpu_doctor("--dockerfile", str(tmp_path / "Dockerfile")).returncode == 4


def test_fixes_in_a_dockerfile_report_are_dockerfile_lines() -> None:
    done = gpu_doctor("--dockerfile", str(DATA / "deepspeed.Dockerfile"), "--json")
    (f,) = [f for f in findings_of(done, "framework.nvcc_mismatch_for_extensions") if f["severity"] == "warn"]
    assert "FROM an nvidia/cuda:11.7" in f["fix"]["summary"] and not f.get("intents")
    for name in sorted(p.name for p in DATA.glob("*.Dockerfile")):
        for args in ((), ("--host-driver", "470.256.02", "--target-gpu", "RTX 3090")):
            out = gpu_doctor("--dockerfile", str(DATA / name), "--json", *args)
            for f in json.loads(out.stdout)["findings"]:
                fix = (f.get("fix") or {}).get("summary") or ""
                assert not re.search(r"gpu-doctor fix|bashrc|shell profile|apt(-get)? install -y nvidia-driver",
                                     fix), (name, f["title"], fix)


def test_a_path_export_fix_becomes_an_env_line() -> None:
    image = image_of("FROM ubuntu:22.04\nRUN apt-get install -y cuda-toolkit-12-4\nENV PATH=/usr/bin\n")
    from doctor.dockerfile import locate
    from doctor.engine import diagnose
    from doctor.registry import Context

    report = locate(diagnose(image.facts, None, Context(matrix=current(), options={"static": True})), image)
    (f,) = [f for f in report.findings if f.code == "toolkit.path_not_set"]
    assert f.fix and 'ENV PATH="/usr/local/cuda-12.4/bin:$PATH"' in f.fix.summary and "bashrc" not in f.fix.summary


# --- forward-compatibility traps (class 6) ----------------------------------------------------------------


def test_ldconfig_of_the_compat_directory_warns_of_804_and_803() -> None:
    done = gpu_doctor("--dockerfile", str(DATA / "videolingo.Dockerfile"), "--json")
    (f,) = findings_of(done, "image.forward_compat")
    assert f["severity"] == "warn" and "804" in f["title"] and "803" in f["title"]
    assert f["title"].startswith(f"{DATA / 'videolingo.Dockerfile'}:26:") or ":26:" in f["title"]
    on_geforce = gpu_doctor("--dockerfile", str(DATA / "videolingo.Dockerfile"), "--json", "--target-gpu", "RTX 4090")
    (f,) = findings_of(on_geforce, "image.forward_compat")
    assert f["severity"] == "fail" and "ldconfig" in f["fix"]["summary"]


@pytest.mark.parametrize("line,severity", [
    ("ENV LD_LIBRARY_PATH=/usr/local/cuda/compat:$LD_LIBRARY_PATH", "warn"),
    ("RUN echo /usr/local/cuda-12.4/compat > /etc/ld.so.conf.d/z.conf && ldconfig", "warn"),
    ("RUN apt-get update && apt-get install -y cuda-compat-12-4", "info"),
])
def test_forward_compat_forms(line: str, severity: str) -> None:
    from doctor.checks.image import forward_compat_forced
    from doctor.registry import Context

    image = image_of(f"FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n{line}\n")
    (f,) = forward_compat_forced.run(image.facts, Context(matrix=current(), options={"static": True}))[2]
    assert f.severity == severity


def test_a_plain_nvidia_cuda_image_forces_no_compat() -> None:
    from doctor.checks.image import forward_compat_forced
    from doctor.registry import Context

    image = image_of("FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN ldconfig\n")
    status, _why, found = forward_compat_forced.run(image.facts, Context(matrix=current(), options={"static": True}))
    assert status == "not_applicable" and not found


# --- what a RUN fetches, and what COPY puts where (class 5) ----------------------------------------------


def test_requirements_cloned_in_the_same_run_are_fetched_at_build_time() -> None:
    image = read(DATA / "sd-webui-a1111.Dockerfile")
    assert any("requirements_versions.txt: fetched at build time" in t for _ln, t in image.notes), image.notes
    assert not any("not found next to the Dockerfile" in t for _ln, t in image.notes)


def test_a_file_copied_into_a_directory_keeps_its_name() -> None:
    image = read(DATA / "videolingo.Dockerfile")  # COPY requirements.txt . then pip install -e .
    assert not any("pip install requirements.txt" in t for _ln, t in image.notes)
    assert any("pip install .:" in t for _ln, t in image.notes)


@pytest.mark.parametrize("run", ['pip install -e "python[all]"', "uv pip install dist/*.whl", "pip install -e ./sub",
                                 "pip install src/pkg/", "pip install -e .[dev]"])
def test_a_local_path_is_the_project_never_a_pypi_package(run: str) -> None:
    image = image_of(f"FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN {run}\n")
    names = {p.name for e in image.facts.python_envs for p in e.packages}
    assert not names & {"python", "dist", "sub", "src", "pkg"}, names
    assert any("the project being built" in t for _ln, t in image.notes), image.notes


def test_find_links_torch_stable_gives_its_cuda_build() -> None:
    image = read(DATA / "detectron2.Dockerfile")  # torch==1.10 -f …/cu111/torch_stable.html (older than the matrix)
    torch = torch_of(image)
    assert (torch.version, torch.cuda, torch.cpu_only) == ("1.10+cu111", "11.1", False)
    assert any("not in the matrix" in t and "cu111" in t for _ln, t in image.notes)


def test_a_cudnn_tag_without_its_version_says_so() -> None:
    done = gpu_doctor("--dockerfile", str(DATA / "tgi-trtllm.Dockerfile"), "--json")
    (f,) = findings_of(done, "cudnn.missing")
    assert "cuDNN (version not in the tag)" in f["title"] and "None" not in f["title"]


@pytest.mark.parametrize("env,expected", [
    ("ENV LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH}:}/usr/local/nvidia/lib64", "/usr/local/nvidia/lib64"),
    ("ENV LD_LIBRARY_PATH=/opt/x${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}", "/opt/x"),
    ("ENV LD_LIBRARY_PATH=${MISSING:-${ALSO:-/fallback}}/lib", "/fallback/lib"),
    ("ENV LD_LIBRARY_PATH=${V:-x}", "/set"),
])
def test_shell_expansion_forms_in_env(env: str, expected: str) -> None:
    image = image_of(f"FROM ubuntu:22.04\nARG V=/set\n{env}\n")
    assert image.facts.env["LD_LIBRARY_PATH"] == expected


def test_expansion_of_a_set_variable_in_the_nested_form() -> None:
    image = image_of("FROM ubuntu:22.04\nENV LD_LIBRARY_PATH=/a\n"
                     "ENV LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH}:}/b\n")
    assert image.facts.env["LD_LIBRARY_PATH"] == "/a:/b"


# --- an unknown base image is unknown, not empty (class 3) ------------------------------------------------


def test_on_an_unknown_base_no_failure_rests_on_what_pip_would_install(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM myorg/ml-base:latest\nRUN pip install torch==2.5.1 --index-url "
                                         "https://download.pytorch.org/whl/cpu\n")
    done = gpu_doctor("--dockerfile", str(tmp_path / "Dockerfile"), "--json")
    (f,) = findings_of(done, "framework.cpu_only_build")
    assert f["severity"] == "warn" and "base image having no torch of its own" in f["detail"]
    assert done.returncode == 0
    notes = [f["title"] for f in findings_of(done, "dockerfile.unresolved")]
    assert any("if the base image myorg/ml-base:latest has no torch" in t for t in notes), notes
    (tmp_path / "Dockerfile").write_text("FROM ubuntu:22.04\nRUN pip install torch==2.5.1 --index-url "
                                         "https://download.pytorch.org/whl/cpu\n")
    assert gpu_doctor("--dockerfile", str(tmp_path / "Dockerfile")).returncode == 1  # a known, empty base: a fact


def test_an_ngc_tag_without_a_row_is_unknown_not_ready() -> None:
    done = gpu_doctor("--dockerfile", str(DATA / "yolov5.Dockerfile"), "--json")
    assert json.loads(done.stdout)["status"] == "unknown" and done.returncode == 4
    notes = [f["title"] for f in findings_of(done, "dockerfile.unresolved")]
    assert any("nvcr.io/nvidia/pytorch:22.09-py3: what it holds is not in the matrix" in t for t in notes)


def test_an_ngc_tag_with_a_row_brings_its_cuda_and_torch() -> None:
    image = read(DATA / "nemo-speech.Dockerfile")  # nvcr.io/nvidia/pytorch:24.07-py3
    assert image.facts.toolkits[0].version == "12.5.1"
    assert torch_of(image).version == "2.4.0a0+3bcc3cddb5" and image.facts.python_envs[0].version == "3.10"


def test_a_cuda_patch_release_missing_from_the_table_falls_back_to_its_floor() -> None:
    image = image_of("FROM nvidia/cuda:12.9.2-runtime-ubuntu24.04\n")
    assert image.facts.toolkits[0].version == "12.9.2"
    assert current().min_driver("12.9.2")["version"] == "12.9.0"  # 12.9's first release sets the floor
    done_text = image_of("FROM nvidia/cuda:12.9.2-cudnn-devel-ubuntu24.04\n")
    assert done_text.facts.toolkits[0].nvcc_version == "12.9.2"  # -devel images have nvcc


@pytest.mark.parametrize("install,python,torch", [
    ("apt-get update && apt-get install -y python3.8 python3-pip", "3.8", "2.5.1"),  # 2.6 needs Python ≥ 3.9
    ("apt-get install -y python3.12", "3.12", None),
    ("conda install -y python=3.8", "3.8", "2.5.1"),
])
def test_pip_resolves_for_the_python_the_image_installs(install: str, python: str, torch: str | None) -> None:
    image = image_of(f"FROM nvidia/cuda:12.4.1-runtime-ubuntu20.04\nRUN {install}\nRUN pip install torch\n")
    (env,) = image.facts.python_envs
    assert env.version == python
    newest = torch_of(image).version
    if torch:
        assert newest == torch  # pip skips releases whose Requires-Python excludes it
    else:
        assert newest == torch_of(image_of("FROM python:3.12\nRUN pip install torch\n")).version


@pytest.mark.parametrize("run", ['["/bin/bash", "-c", "pip install torch==2.5.1"]', 'sh -c "pip install torch==2.5.1"',
                                 "conda run -n app --no-capture-output pip install torch==2.5.1"])
def test_a_command_handed_to_a_shell_or_conda_run_is_read(run: str) -> None:
    image = image_of(f"FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN {run}\n")
    assert torch_of(image).version == "2.5.1"


def test_a_build_tool_installer_piped_to_sh_installs_that_tool_only() -> None:
    base = "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
    image = image_of(base + "RUN curl -LsSf https://astral.sh/uv/install.sh | sh\n")
    assert not image.notes and image.facts.sources.get("toolkits")
    other = image_of(base + "RUN curl -fsSL https://example.com/setup.sh | bash\n")
    assert any("runs a fetched script" in t for _ln, t in other.notes) and not other.facts.sources.get("toolkits")


@pytest.mark.parametrize("tag,python", [("ubuntu20.04", "3.8"), ("ubuntu22.04", "3.10"), ("ubuntu24.04", "3.12")])
def test_apt_python3_is_the_releases_own(tag: str, python: str) -> None:
    image = image_of(f"FROM nvidia/cuda:12.4.1-runtime-{tag}\nRUN apt-get update && apt-get install -y python3-pip\n"
                     "RUN pip3 install torch\n")
    assert image.facts.python_envs[0].version == python
    from packaging.specifiers import SpecifierSet

    row = current().torch(torch_of(image).version)
    assert python in SpecifierSet(str(row["python"]))  # pip picks a release with wheels for that Python


def test_requirements_of_a_repository_an_earlier_run_cloned_are_fetched_at_build_time() -> None:
    image = image_of("FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN git clone https://example.com/app.git /app\n"
                     "WORKDIR /app\nRUN pip install -r requirements.txt\n")
    assert any(ln == 4 and "fetched at build time (line 2 clones" in t for ln, t in image.notes), image.notes


@pytest.mark.parametrize("pip", ["/opt/venv/bin/pip", "/app/.venv/bin/python -m pip", "/opt/conda/envs/x/bin/pip3"])
def test_pip_by_its_path_in_a_venv_is_pip_not_a_script(pip: str) -> None:
    image = image_of(f"FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN {pip} install torch==2.5.1\n")
    assert torch_of(image).version == "2.5.1" and not image.notes


@pytest.mark.parametrize("run,cuda", [
    ("conda install -y -c pytorch -c nvidia pytorch pytorch-cuda=12.1", "12.1"),
    ("mamba install -y pytorch pytorch-cuda=11.8 -c pytorch -c nvidia", "11.8"),
    ("micromamba install -y -n base -c conda-forge pytorch cuda-version=12.4", "12.4"),
    ("/opt/conda/bin/conda install -y pytorch cudatoolkit=11.3 -c pytorch", "11.3"),
])
def test_conda_forms_give_their_cuda(run: str, cuda: str) -> None:
    image = image_of(f"FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN {run}\n")
    assert torch_of(image).cuda == cuda and torch_of(image).cpu_only is False
