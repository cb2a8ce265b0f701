"""Judgement on partial evidence (issue 25): reason from what a report does say, never from what it leaves out.

Each test is a defect class, on real public texts (tests/data/reports/, tests/data/collect_env/; their origin is in
tests/data/SOURCES.md and tests/data/collect_env/SOURCES.md) or on facts shaped like them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import only
from factories import make_facts

from doctor import explain
from doctor.collect_env import parse
from doctor.matrix import bundled
from doctor.model.facts import LibRef, PyPackage, PythonEnv, Toolkit
from doctor.pipeline import diagnose

DATA = Path(__file__).resolve().parent / "data"
REPORTS = DATA / "reports"
COLLECT_ENV = DATA / "collect_env"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# --- 8: CUDA component versions resolve to their release ---------------------------------------------------


@pytest.mark.parametrize(("version", "release"), [
    ("12.4.131", "12.4"),      # nvcc's own V number (CUDA 12.4 Update 1)
    ("12.4.127", "12.4"),      # nvidia-cuda-runtime-cu12's wheel version
    ("11.0.207", "11.0"),      # version.txt of CUDA 11.0 (cupy/cupy#3827)
    ("11.8.20220929", "11.8"),  # a runfile's date patch
    ("12.4.1", "12.4.1"),      # a release is itself
    ("12.4", "12.4"),
])
def test_a_component_version_resolves_to_its_cuda_release(version: str, release: str) -> None:
    m = bundled()
    assert m.cuda_release(version) == release
    assert m.min_driver(version) is not None


def test_an_unknown_cuda_resolves_to_nothing() -> None:
    assert bundled().cuda_release("99.1.0") is None


@pytest.mark.parametrize("version", ["12.4.131", "12.4.127"])
def test_a_toolkit_named_by_its_component_version_runs_natively_without_a_placeholder(version: str) -> None:
    # Before: no matrix row for "12.4.131", so a driver that runs CUDA 12.4 natively got "is newer than driver …
    # supports natively" by the minor-version rule, and "≥ ?" in the text.
    facts = make_facts(driver__kernel_module="550.54.15", driver__userspace="550.54.15", driver__cuda_driver_api=None,
                       toolkits=[Toolkit(root="/usr/local/cuda", version=version, nvcc_version="12.4.131",
                                         source="path")])
    f = only(facts, "driver.too_old_for_cuda_runtime")
    assert f.severity == "ok"
    assert "?" not in f.title + (f.detail or "")


# --- 11 / 12: error texts by family, with their causes ------------------------------------------------------

EXPECTED = {
    "cuda-memtest-31-ptx-unsupported-toolchain.txt": {"cuda.unsupported_ptx"},
    "jaxsim-50-cuinit-unknown-after-suspend.txt": {"cuda.unknown_error", "jax.falling_back_to_cpu"},
    "mineru-2664-libcudnn-graph-undefined-symbol.txt": {"lib.cuda_undefined_symbol"},
    "mumax-167-cuda-error-unknown-after-wake.txt": {"cuda.unknown_error"},
    "pycuda-255-undefined-cuDevicePrimaryCtxRelease_v2.txt": {"lib.driver_api_undefined_symbol"},
    "pytorch-119989-system-cudnn-undefined-symbol.txt": {"lib.cuda_undefined_symbol"},
    "pytorch-88639-cuda-unknown-after-suspend.txt": {"torch.cuda_unknown_error"},
    "tf-112-grid-k520-minimum-capability-wrapped.txt": {"tf.gpu_below_minimum_capability"},
    "tf-23385-minimum-cuda-capability.txt": {"tf.gpu_below_minimum_capability"},
    "tf-23925-undefined-cuDevicePrimaryCtxGetState.txt": {"lib.driver_api_undefined_symbol"},
    "tf-60854-dso-loader-libcudnn8.txt": {"lib.cudnn_not_found"},
    "tilelang-182-undefined-cuTensorMapEncodeIm2col.txt": {"lib.driver_api_undefined_symbol"},
    "xla-nvptx-compiler-ptxas-12.3.107-driver-12.0.txt": {"xla.ptxas_newer_than_driver"},
    "vllm-1157-bfloat16-tesla-t4.txt": {"vllm.dtype_needs_capability"},
    "jax-15742-dnn-library-initialization-failed.txt": {"xla.dnn_init_failed"},
    "triton-2971-device-kernel-image-invalid.txt": {"triton.kernel_image_invalid"},
}


def test_every_collected_report_is_listed() -> None:
    assert sorted(p.name for p in REPORTS.glob("*.txt")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_real_report_is_recognised_by_its_family(name: str) -> None:
    found = {e.signature.id for e in explain.explain(read(REPORTS / name))}
    assert found == EXPECTED[name]


@pytest.mark.parametrize("name", ["jaxsim-50-cuinit-unknown-after-suspend.txt",
                                  "mumax-167-cuda-error-unknown-after-wake.txt",
                                  "pytorch-88639-cuda-unknown-after-suspend.txt"])
def test_an_unknown_cuda_error_names_suspend_and_the_uvm_reload(name: str) -> None:
    out = explain.render_text(explain.explain(read(REPORTS / name)), None)
    assert "suspend" in out
    assert "nvidia_uvm" in out


def test_tensorflow_minimum_capability_notice_states_both_capabilities() -> None:
    [e] = explain.explain(read(REPORTS / "tf-112-grid-k520-minimum-capability-wrapped.txt"))
    assert e.notes == ["GRID K520 is compute capability 3.0; this TensorFlow build supports compute capability 3.5 "
                       "and newer, so it runs on the CPU."]
    assert [c.code for c in e.causes] == ["unchecked.tf_build_minimum_capability"]  # torch's arch rule cannot judge


def test_an_undefined_driver_api_symbol_is_about_libcuda_not_a_sibling_library() -> None:
    [e] = explain.explain(read(REPORTS / "tilelang-182-undefined-cuTensorMapEncodeIm2col.txt"))
    assert "cuTensorMapEncodeIm2col is a CUDA driver API function" in e.notes[0]
    assert "framework.cuda_newer_than_driver" in [c.code for c in e.causes]


def test_tensorflow_failing_to_load_any_cuda_library_is_recognised_on_windows_too() -> None:
    text = ("W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic library "
            "'cusolver64_11.dll'; dlerror: cusolver64_11.dll not found")
    assert [e.signature.id for e in explain.explain(text)] == ["tf.cuda_library_not_loaded"]


# --- 14: "ready" needs evidence -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pytorch-121067-macos-no-gpu-torch2.2.2.txt",
                                  "pytorch-137846-windows11-cpu-nightly-no-gpu.txt"])
def test_a_cpu_build_with_no_gpu_seen_is_unknown_not_ready(name: str) -> None:
    report = diagnose(parse(read(COLLECT_ENV / name)))
    assert report.status == "unknown"
    assert not [f for f in report.findings if f.severity == "fail"]


def test_a_rocm_report_saying_cuda_is_available_is_no_nvidia_evidence() -> None:
    report = diagnose(parse(read(COLLECT_ENV / "pytorch-44106-rocm-build-torch1.7.txt")))
    codes = {f.code for f in report.findings}
    assert "driver.missing" not in codes and "framework.cuda_unavailable" not in codes
    assert "framework.cpu_only_build" not in codes  # not "a CUDA build" either
    assert report.status == "unknown"


def _cpu_torch_facts(**extra: object):  # type: ignore[no-untyped-def]
    return make_facts(driver__userspace=None, driver__kernel_module=None, driver__cuda_driver_api=None,
                      driver__module_loaded=None, driver__packages=[], driver__device_nodes=[],
                      driver__module_for_running_kernel=None, driver__module_for_next_boot_kernel=None,
                      driver__nouveau_loaded=None, driver__secure_boot=None,
                      loader__libcuda=None, loader__libcudart=None, gpus=[], host__pci_nvidia_gpus=None,
                      cudnn=[], sources={}, python_envs=[PythonEnv("/venv/bin/python", "3.11.9", packages=[
                          PyPackage("torch", "2.5.1+cpu", cpu_only=True)])], **extra)


def test_a_cpu_build_beside_an_installed_toolkit_is_a_warning() -> None:
    facts = _cpu_torch_facts(toolkits=[Toolkit(root="/usr/local/cuda-12.4", version="12.4.1",
                                               nvcc_version="12.4.131", source="path")],
                             loader__nvcc_on_path=LibRef("/usr/local/cuda-12.4/bin/nvcc", "12.4.131"))
    f = only(facts, "framework.cpu_only_build")
    assert f.severity == "warn"
    assert "a CUDA toolkit (12.4.1) is installed" in f.detail


def test_a_cpu_build_with_no_gpu_intent_stays_information() -> None:
    facts = _cpu_torch_facts(toolkits=[], loader__nvcc_on_path=None)
    assert only(facts, "framework.cpu_only_build").severity == "info"
    assert diagnose(facts).status == "unknown"


# --- 17: no placeholders ----------------------------------------------------------------------------------

PLACEHOLDER = re.compile(r"(?<![\w'])\?(?![\w'])")  # a lone "?" standing for a value


@pytest.mark.parametrize("name", sorted(p.name for p in COLLECT_ENV.glob("*.txt")))
def test_no_placeholder_in_a_title_or_a_fix(name: str) -> None:
    for f in diagnose(parse(read(COLLECT_ENV / name))).findings:
        fix = f.fix.summary if f.fix else ""
        assert not PLACEHOLDER.search(f.title), f.title
        assert not PLACEHOLDER.search(fix or ""), fix


# --- 10: a cut-short report is unknown, not absent; what the error itself states is evidence -----------------


def _cuts(name: str) -> list[str]:
    lines = read(COLLECT_ENV / name).splitlines()
    return ["\n".join(lines[:n]) for n in range(3, len(lines), 2)]


@pytest.mark.parametrize("name", sorted(p.name for p in COLLECT_ENV.glob("*.txt")))
def test_a_report_cut_short_gains_no_failure_the_whole_report_does_not_have(name: str) -> None:
    from doctor.collect_env import CollectEnvError

    full = {f.code for f in diagnose(parse(read(COLLECT_ENV / name))).findings if f.severity == "fail"}
    for text in _cuts(name):
        try:
            facts = parse(text)
        except CollectEnvError:
            continue
        extra = {f.code for f in diagnose(facts).findings if f.severity == "fail"} - full
        assert not extra, (name, text.count("\n") + 1, extra)


def test_is_cuda_available_no_with_the_driver_line_cut_off_is_a_warning_not_an_unexplained_failure() -> None:
    lines = read(COLLECT_ENV / "pytorch-30071-torch1.3.1-8x-titan-xp-driver410.txt").splitlines()
    cut = "\n".join(lines[:13])  # ends inside the GPU list, before "Nvidia driver version: 410.48"
    f = only(parse(cut), "framework.cuda_unavailable")
    assert f.severity == "warn"
    assert "driver version is unknown" in f.title


def test_the_gpu_torch_names_in_its_warning_is_evidence_when_the_gpu_list_is_missing() -> None:
    text = re.sub(r"GPU models and configuration:.*\n", "",
                  read(COLLECT_ENV / "pytorch-150733-rtx5090d-torch2.6-cu126.txt"))
    facts = parse(text)
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [("NVIDIA GeForce RTX 5090 D", "12.0")]
    assert only(facts, "framework.arch_unsupported").severity == "fail"


# --- 7: JIT compilers — the pip ptxas of XLA and Triton ---------------------------------------------------


def test_a_pip_ptxas_newer_than_the_drivers_cuda_warns_without_nvcc_on_path() -> None:
    from doctor.probes.cuda import pip_toolkits

    env = PythonEnv("/venv/bin/python", "3.11.9", packages=[
        PyPackage("jax", "0.4.35"), PyPackage("jaxlib", "0.4.35", cpu_only=False),
        PyPackage("jax-cuda12-plugin", "0.4.35"), PyPackage("nvidia-cuda-nvcc-cu12", "12.6.77", cuda="12")])
    facts = make_facts(driver__kernel_module="550.54.15", driver__userspace="550.54.15", driver__cuda_driver_api="12.4",
                       toolkits=pip_toolkits([env]), loader__nvcc_on_path=None, python_envs=[env])
    f = only(facts, "driver.too_old_for_cuda_runtime")
    assert f.severity == "warn"
    assert "nvidia-cuda-nvcc-cu12" in f.title and "PTX" in f.title


def test_xlas_ptxas_warning_reads_ptxas_component_version_as_its_cuda_release() -> None:
    [e] = explain.explain(read(REPORTS / "xla-nvptx-compiler-ptxas-12.3.107-driver-12.0.txt"))
    assert e.signature.id == "xla.ptxas_newer_than_driver"
    assert e.notes == ["ptxas is CUDA 12.3 (12.3.107); the driver supports CUDA 12.0."]


def test_a_report_listing_the_nvcc_wheel_carries_it_as_a_compiler() -> None:
    text = read(COLLECT_ENV / "pytorch-40682-windows-server-torch1.5.0-cu101-quoted.txt")
    text = text.replace("> [pip] numpy==", "> [pip] nvidia-cuda-nvcc-cu12==12.6.77\n> [pip] numpy==", 1)
    facts = parse(text)
    assert [(t.version, t.nvcc_version) for t in facts.toolkits if t.source == "pip"] == [("12.6", "12.6.77")]


# --- 1 / 3: the framework's range and its cuDNN, for every framework ----------------------------------------


def test_tensorflow_needing_cudnn_8_beside_only_cudnn_7_is_missing_its_cudnn() -> None:
    from doctor.model.facts import Cudnn

    env = PythonEnv("/venv/bin/python", "3.8", packages=[
        PyPackage("tensorflow", "2.4.1", cuda="11.0", cudnn="8", cpu_only=False)])
    facts = make_facts(python_envs=[env], cudnn=[Cudnn("7.6.5", "/usr/local/cuda/lib64/libcudnn.so.7.6.5", "library")])
    f = only(facts, "cudnn.missing")
    assert f.severity == "fail"
    assert f.title.startswith("tensorflow 2.4.1 needs cuDNN 8, but only cuDNN 7.6.5")


def test_a_tensorflow_cuda_build_without_build_info_takes_its_cudnn_from_its_release() -> None:
    from doctor.checks.compat import built_cudnn

    tf = PyPackage("tensorflow", "2.15.0", cpu_only=False)
    assert built_cudnn(bundled(), tf) == ("8.9", "tf")
    assert built_cudnn(bundled(), PyPackage("tensorflow", "2.15.0"))[0] is None  # CPU or GPU build: unknown


# --- 9: facts matched by what they are, not how they were found ---------------------------------------------

TK = Toolkit(root="/usr/local/cuda-12.4", version="12.4.1", nvcc_version="12.4.131", source="path")


@pytest.mark.parametrize(("env", "sources"), [
    ({"CUDA_HOME": "/usr/local/cuda-12.4/"}, {}),                     # the same path, written with a slash
    ({"CUDA_HOME": "/usr/local//cuda-12.4"}, {}),
    ({"CUDA_HOME": "/usr/local/cuda"}, {"toolkits.env:CUDA_HOME": "realpath:/usr/local/cuda-12.4"}),  # a symlink
])
def test_cuda_home_naming_a_toolkit_another_probe_found_is_that_toolkit(env: dict, sources: dict) -> None:
    from doctor import beliefs

    facts = make_facts(toolkits=[TK], env={**env, "PATH": "/usr/bin"})
    facts = type(facts)(**{**facts.__dict__, "sources": {**facts.sources, "toolkits": "probes", **sources}})
    assert beliefs.of(facts).build_toolkit.value == ("/usr/local/cuda-12.4", "12.4.1", "CUDA_HOME")
    f = only(facts, "toolkit.cuda_home_invalid")
    assert f.severity == "ok"
    assert "no toolkit" not in f.title


# --- 4: a dlopen error for a library that exists is the loader path -----------------------------------------


def _with_toolkit_and_cudnn(cudnn_dir: str):  # type: ignore[no-untyped-def]
    from doctor.model.facts import Cudnn

    return make_facts(toolkits=[Toolkit(root="/usr/local/cuda-11.8", version="11.8.0", nvcc_version="11.8.89",
                                        source="path")],
                      cudnn=[Cudnn("8.9.7", f"{cudnn_dir}/libcudnn.so.8.9.7", "library")],
                      loader__libcudnn=None, loader__libcudart=None, env={"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"})


def test_a_cuda_library_the_toolkit_has_names_the_directory_to_add() -> None:
    text = ("Could not load dynamic library 'libcublas.so.11'; dlerror: libcublas.so.11: cannot open shared object "
            "file: No such file or directory")
    notes = [n for e in explain.explain(text, _with_toolkit_and_cudnn("/opt/cudnn/lib")) for n in e.notes]
    assert notes and all("export LD_LIBRARY_PATH=/usr/local/cuda-11.8/lib64:$LD_LIBRARY_PATH" in n for n in notes)


def test_a_cudnn_found_outside_the_loader_path_names_its_directory() -> None:
    facts = _with_toolkit_and_cudnn("/opt/cudnn/lib")
    [e] = explain.explain(read(REPORTS / "tf-60854-dso-loader-libcudnn8.txt"), facts)
    assert e.notes == ["cuDNN 8.9.7 has libcudnn (major 8), but the loader does not look in /opt/cudnn/lib: add it — "
                       "`export LD_LIBRARY_PATH=/opt/cudnn/lib:$LD_LIBRARY_PATH`, or list it in /etc/ld.so.conf.d/ "
                       "and run `sudo ldconfig`."]


def test_a_library_of_another_major_or_in_a_default_directory_is_not_a_loader_path_problem() -> None:
    [e] = explain.explain(read(REPORTS / "tf-60854-dso-loader-libcudnn8.txt"),
                          _with_toolkit_and_cudnn("/usr/lib/x86_64-linux-gnu"))
    assert e.notes == []
    text = "libcublas.so.12: cannot open shared object file: No such file or directory"
    assert [n for e in explain.explain(text, _with_toolkit_and_cudnn("/opt/cudnn/lib")) for n in e.notes] == []


# --- 5: sub-library mixing — the loader path wins for what cuDNN opens by name --------------------------------


def _torch_with_cudnn_wheel_and_system_cudnn(ld_path: str):  # type: ignore[no-untyped-def]
    from doctor.model.facts import Cudnn

    env = PythonEnv("/venv/bin/python", "3.10", packages=[
        PyPackage("torch", "2.2.0", cuda="12.1", cudnn="8.9.2.26", cpu_only=False),
        PyPackage("nvidia-cudnn-cu12", "8.9.2.26", cuda="12", cudnn="8.9.2.26")])
    return make_facts(python_envs=[env], env={"LD_LIBRARY_PATH": ld_path},
                      cudnn=[Cudnn("8.9.7", "/usr/local/cuda/lib64/libcudnn.so.8.9.7", "library"),
                             Cudnn("8.9.2.26", "/venv/bin/python [nvidia-cudnn-cu12]", "pip")],
                      loader__libcudnn=LibRef("/usr/local/cuda/lib64/libcudnn.so.8", "8.9.7"))


def test_a_system_cudnn_on_ld_library_path_beside_torchs_cudnn_wheel_mixes_its_sub_libraries() -> None:
    # pytorch/pytorch#119989: torch 2.2's wheel, a cuDNN 8 in /usr/local/cuda/lib64 on LD_LIBRARY_PATH
    f = only(_torch_with_cudnn_wheel_and_system_cudnn("/usr/local/cuda/lib64"), "framework.libs_shadowed")
    assert f.severity == "warn"
    assert "/usr/local/cuda/lib64/libcudnn.so.8.9.7" in f.title
    assert "sub-libraries" in f.detail


def test_a_system_cudnn_off_ld_library_path_is_not_mixed() -> None:
    f = only(_torch_with_cudnn_wheel_and_system_cudnn("/usr/local/nvidia/lib64"), "framework.libs_shadowed")
    assert f.severity == "ok"


# --- 17: the header names the interpreter actually tested ------------------------------------------------------


def test_smoke_names_the_python_it_tested_in_its_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from doctor.cli import main

    (tmp_path / "tv" / "bin").mkdir(parents=True)
    (tmp_path / "tv" / "bin" / "python3").symlink_to(sys.executable)
    main(["smoke", "--framework", "jax", "--python", str(tmp_path / "tv"), "--quiet"])
    header = [line for line in capsys.readouterr().out.splitlines() if line.startswith("python: ")]
    assert header == [f"python: {tmp_path}/tv/bin/python3 (given with --python)"]


def test_a_reports_interpreter_label_is_never_a_program_and_its_stated_driver_cuda_picks_the_build() -> None:
    # pytorch/pytorch#112553: torch 2.1.0+cu121; torch's warning says the driver supports CUDA 11.4 (found 11040)
    f = only(parse(read(COLLECT_ENV / "pytorch-112553-gke-cu121-driver-11040.txt")), "framework.cuda_newer_than_driver")
    assert f.severity == "fail"
    assert f.title == "torch 2.1.0+cu121 needs a newer driver than the one installed (it supports CUDA 11.4)"
    steps = [" ".join(s.command) for s in (f.fix.steps if f.fix else [])]
    assert steps == ["python -m pip install torch==2.1.0 --index-url https://download.pytorch.org/whl/cu118"]


# --- 15: one fact, every consumer -----------------------------------------------------------------------------


def test_nvidia_smis_cuda_version_reaches_fleet_prometheus_the_tui_and_diff() -> None:
    import json

    from doctor import diff, fleet
    from doctor.render import prometheus
    from doctor.tui import model

    facts = make_facts(driver__cuda_driver_api=None, driver__smi_cuda_version="12.4")
    report = diagnose(facts)
    assert prometheus.versions(report)["cuda_driver_api"] == "12.4"
    assert fleet.read_node(json.dumps(report.to_dict()), "n1", "n1.json").cuda_driver_api == "12.4"
    assert "CUDA 12.4 (nvidia-smi)" in model.host_line(report)
    older = make_facts(driver__cuda_driver_api=None, driver__smi_cuda_version="12.2")
    changes = [str(c) for c in diff.diff_facts(older, facts)]
    assert any("12.2" in c and "12.4" in c for c in changes), changes


# --- 16: derived is not observed ------------------------------------------------------------------------------


def test_a_compute_capability_looked_up_by_name_is_credited_to_the_matrix_not_to_the_report() -> None:
    facts = parse(read(COLLECT_ENV / "vllm-18467-vllm-format-4x-rtx2080ti-torch2.5.1-cu124.txt"))
    assert facts.gpus[0].compute_capability is None  # collect_env names the GPU, never its capability
    f = next(x for x in diagnose(facts).findings if x.code == "framework.arch_unsupported")
    ccs = [e for e in f.evidence if e.fact.endswith(".compute_capability")]
    assert [e.fact for e in ccs] == [f"gpus[{i}].compute_capability" for i in range(4)]  # one verdict, 4 GPUs
    for cc in ccs:
        assert cc.value == "7.5"
        assert cc.source is not None and cc.source.startswith("derived: compat/gpus.toml")


# --- 6: when the host driver cannot go higher for the GPU, the build must come down ---------------------------


def test_a_cuda_12_build_on_a_kepler_gpu_says_no_driver_can_help() -> None:
    from doctor.model.facts import Gpu

    k80 = Gpu(index=0, name="Tesla K80", compute_capability="3.7", source="nvml")
    env = PythonEnv("/venv/bin/python", "3.10", packages=[PyPackage("torch", "2.1.0+cu121", cuda="12.1",
                                                                      cpu_only=False)])
    facts = make_facts(gpus=[k80], driver__kernel_module="470.182.03", driver__userspace="470.182.03",
                       driver__cuda_driver_api="11.4", python_envs=[env], toolkits=[], loader__nvcc_on_path=None,
                       loader__libcuda=LibRef("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "470.182.03"))
    f = only(facts, "framework.cuda_newer_than_driver")
    assert f.severity == "fail"
    assert "its last driver branch is R470, which runs CUDA 11.4 at most" in f.detail
    assert not any(type(i).__name__ == "InstallDriverBranch" for i in f.intents)


# --- 10 (continued): what the error text itself states is evidence for the causes ----------------------------


def test_the_driver_cuda_an_error_states_judges_its_causes_when_the_facts_do_not_know_it() -> None:
    facts = make_facts(driver__cuda_driver_api=None, driver__smi_cuda_version=None, driver__kernel_module=None,
                       driver__userspace=None, toolkits=[], loader__nvcc_on_path=None)
    text = ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU "
            "driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx")
    [e] = [x for x in explain.explain(text, facts) if x.signature.id == "torch.driver_too_old"]
    assert "framework.cuda_newer_than_driver" in [c.code for c in e.applies]


def test_tensorflows_device_notice_gives_the_gpu_its_compute_capability() -> None:
    from doctor.model.facts import Gpu

    facts = make_facts(gpus=[Gpu(index=0, name="GRID K520", source="collect_env")])
    stated = explain.with_stated_facts(facts, read(REPORTS / "tf-112-grid-k520-minimum-capability-wrapped.txt"))
    assert stated.gpus[0].compute_capability == "3.0"
    assert explain.with_stated_facts(make_facts(), "no statement here") == make_facts()


def test_a_cut_build_line_leaves_the_wheels_local_tag_as_evidence_of_its_cuda() -> None:
    name = "pytorch-112553-gke-cu121-driver-11040.txt"
    text = re.sub(r"CUDA used to build PyTorch:.*\n", "", read(COLLECT_ENV / name))
    facts = parse(text)
    [torch] = [p for p in facts.python_envs[0].packages if p.name == "torch"]
    assert (torch.cuda, torch.cpu_only) == ("12.1", False)
    assert only(facts, "framework.cuda_newer_than_driver").severity == "fail"


# --- 2: a GPU below every build gets the arch finding even when the framework's version is unknown ------------


def test_a_gpu_below_every_torch_build_warns_though_the_torch_version_is_unknown() -> None:
    from doctor.model.facts import Gpu

    gtx680 = Gpu(index=0, name="GeForce GTX 680", compute_capability="3.0", source="nvml")
    env = PythonEnv("/venv/bin/python", "3.10", packages=[PyPackage("torch", None, cpu_only=False)])
    f = only(make_facts(gpus=[gtx680], python_envs=[env]), "framework.arch_unsupported")
    assert f.severity == "warn"
    assert f.title == "torch most likely has no kernels for GeForce GTX 680 (sm_30)"


def test_jaxlibs_local_tag_names_the_cudnn_it_needs_when_the_matrix_has_no_row() -> None:
    from doctor.model.facts import Cudnn

    # jax-ml/jax#16901: 'Loaded runtime CuDNN library: 8.5.0 but source was compiled with: 8.6.0'
    env = PythonEnv("/venv/bin/python", "3.10", packages=[PyPackage("jax", "0.4.8"), PyPackage(
        "jaxlib", "0.4.7+cuda11.cudnn86", cuda="11", cudnn="8.6", cpu_only=False)])
    facts = make_facts(python_envs=[env], cudnn=[Cudnn("8.5.0", "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.5.0",
                                                       "library")],
                       loader__libcudnn=LibRef("/usr/lib/x86_64-linux-gnu/libcudnn.so.8", "8.5.0"))
    f = only(facts, "cudnn.version_mismatch")
    assert f.severity == "fail"
    assert "needs cuDNN ≥ 8.6 but will load cuDNN 8.5.0" in f.title


# --- 14 (continued): `smoke --nccl` where CUDA sees no GPU is no evidence of readiness ----------------------


@pytest.mark.parametrize(("seen", "severity"), [(0, "warn"), (1, "info")])
def test_an_all_reduce_with_no_gpu_is_a_warning_not_information(seen: int, severity: str) -> None:
    from doctor.checks.active.torchmem import error_finding
    from doctor.model.facts_active import ActiveEnd, FrameworkError

    text = f"RuntimeError: the NCCL all-reduce needs ≥2 CUDA GPUs; torch 2.5.1+cu124 sees {seen}"
    f = error_finding("allreduce", "torch 2.5.1+cu124 in /venv/bin/python",
                      FrameworkError(text=text, step="torch.cuda.device_count()"), ActiveEnd())
    assert (f.code, f.severity) == ("multigpu.nccl", severity)


def test_the_probe_records_which_toolkit_a_second_variable_names(tmp_path: Path) -> None:
    from doctor import beliefs
    from doctor.host import Host
    from doctor.model.facts import Facts
    from doctor.probes.base import Recorder
    from doctor.probes.cuda import probe_toolkits

    tk = tmp_path / "usr/local/cuda-12.4"
    tk.mkdir(parents=True)
    (tk / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}')
    (tmp_path / "usr/local/cuda").symlink_to("/usr/local/cuda-12.4")
    env = {"CUDA_HOME": "/usr/local/cuda-12.4", "CUDA_PATH": "/usr/local/cuda", "PATH": "/usr/bin"}
    rec = Recorder()
    toolkits = probe_toolkits(Host(root=tmp_path, env=env), rec, {})
    assert [(t.root, t.version, t.source) for t in toolkits] == [("/usr/local/cuda-12.4", "12.4.1", "env:CUDA_HOME")]
    facts = Facts(toolkits=toolkits, env={"CUDA_PATH": "/usr/local/cuda"},
                  sources={**rec.sources, "toolkits": "probes"})
    assert beliefs.toolkit_named_by(facts, "CUDA_PATH") == toolkits[0]
