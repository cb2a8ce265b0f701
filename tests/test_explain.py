"""`gpu-doctor explain`: the exact error texts → their signature → each cause judged by its check.

The signatures are reviewed data (compat/errors.toml). Where this machine has the component that
prints a message (libcudart, Debian's NVIDIA 535 user space, nvcc and host_config.h of CUDA 13.0,
the torch 2.13.0 wheel of the test environment), the tests read the message from it.
"""

from __future__ import annotations

import glob
import io
import json
import re
import subprocess
from pathlib import Path

import pytest
from factories import make_facts, torch_env
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor import cli
from doctor.checks import by_id
from doctor.errors import match, signatures
from doctor.explain import (
    APPLIES,
    EXPLAIN_SCHEMA,
    NOT_APPLICABLE,
    NOT_CHECKED,
    RULED_OUT,
    explain,
    render_text,
    to_dict,
)
from doctor.matrix import bundled

REPO = Path(__file__).resolve().parent.parent
COLLECT_ENV = REPO / "tests" / "data" / "collect_env"
ROWS = bundled().rows("errors", "signature")
SIGS = signatures()
BY_ID = {s.id: s for s in SIGS}

# The messages the issue names, exactly as the programs print them (sources in compat/errors.toml).
TEXTS = [
    ("CUDA driver version is insufficient for CUDA runtime version", "cuda.insufficient_driver"),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "cuda.no_kernel_image"),
    ("Failed to initialize NVML: Driver/library version mismatch", "nvml.version_mismatch"),
    ("ImportError: libcudnn.so.8: cannot open shared object file: No such file or directory", "lib.cudnn_not_found"),
    ("Could not load dynamic library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open shared object file: "
     "No such file or directory", "tf.cudart_not_loaded"),
    ("AssertionError: Torch not compiled with CUDA enabled", "torch.not_compiled_with_cuda"),
    ("RuntimeError: CUDA out of memory. Tried to allocate 264.00 MiB (GPU 0; 2.00 GiB total capacity; 788.51 MiB "
     "already allocated; 145.93 MiB free; 1.02 GiB reserved in total by PyTorch)", "torch.out_of_memory"),
    ("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
     "torch.arch_not_compatible"),
    ("Failed to initialize NVML: Unknown Error", "nvml.unknown_error"),
    ('docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
     "docker.no_gpu_driver"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA "
     "driver is installed and running.", "smi.cannot_communicate"),
    ("Loaded runtime CuDNN library: 8.1.0 but source was compiled with: 8.6.0.", "tf.cudnn_version_mismatch"),
    ("The detected CUDA version (11.8) mismatches the version that was used to compile PyTorch (12.1). Please make "
     "sure to use the same CUDA versions.", "torch.extension_cuda_mismatch"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda.illegal_address"),
    ("NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error (run with "
     "NCCL_DEBUG=INFO for details), NCCL version 2.21.5", "nccl.system_error"),
    ("#error -- unsupported GNU version! gcc versions later than 12 are not supported!",
     "nvcc.unsupported_gnu_version"),
    ("failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected", "cuda.no_device"),
    ("forward compatibility was attempted on non supported HW", "cuda.compat_not_supported"),
    ("Error 804: forward compatibility was attempted on non supported HW", "cuda.compat_not_supported"),
    ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
     "driver from http://www.nvidia.com/Download/index.aspx", "torch.no_driver"),
    ("CUDA backend failed to initialize: Found cuDNN version 8700, but JAX was built against version 8904, which is "
     "newer.", "jax.cuda_backend_failed"),
    ("CUDA backend failed to initialize: Found cuDNN version 8700, but JAX was built against version 8904, which is "
     "newer.", "jax.library_older_than_build"),
    ("UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11040).",
     "torch.driver_too_old"),
    ("RuntimeError: No CUDA GPUs are available", "torch.no_cuda_gpus"),
    ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.9, please update your driver to a newer "
     "version, or use an earlier cuda container", "container.cuda_requirement"),
    ("[7874777.555649] NVRM: API mismatch: the client has the version 535.247.01, but", "nvrm.api_mismatch"),
    ("E external/local_xla/xla/stream_executor/cuda/cuda_diagnostics.cc:262] kernel version 550.120.0 does not match "
     "DSO version 560.35.5 -- cannot find working devices in this configuration", "tf.kernel_dso_mismatch"),
    ("W tensorflow/core/common_runtime/gpu/gpu_device.cc:1598] Cannot dlopen some GPU libraries. Please make sure the "
     "missing libraries mentioned above are installed properly if you would like to use GPU.",
     "tf.cannot_dlopen_gpu_libraries"),
    ("RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (8, 5, 0) but found runtime version "
     "(8, 4, 1).", "torch.cudnn_incompatible"),
    ("nvcc fatal   : Unsupported gpu architecture 'compute_120'", "nvcc.unsupported_gpu_architecture"),
]


def ids(text: str) -> list[str]:
    return [sig.id for sig, _line in match(text)]


# --- the reviewed data --------------------------------------------------------------------------


def test_at_least_thirty_signatures_all_loaded() -> None:
    assert len(ROWS) >= 30
    assert len(SIGS) == len(ROWS)  # none dropped for a pattern that does not compile
    assert len(BY_ID) == len(SIGS)


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_signature_row_is_complete_and_sourced(row: dict) -> None:
    assert re.fullmatch(r"[a-z]+\.[a-z0-9_]+", row["id"])
    re.compile(row["pattern"])
    assert row["title"] and row["fix"] and row["verified"]
    assert row["source"].startswith("https://")
    assert row["examples"], "every signature needs an exact example text"
    assert row["causes"]
    for cause in row["causes"]:
        assert cause["text"]
        assert cause["code"].startswith("unchecked.") or by_id(cause["code"]) is not None, cause["code"]


@pytest.mark.parametrize(("sig_id", "example"), [(r["id"], e) for r in ROWS for e in r["examples"]])
def test_each_example_matches_its_signature(sig_id: str, example: str) -> None:
    assert sig_id in ids(example)


@pytest.mark.parametrize(("text", "sig_id"), TEXTS)
def test_the_messages_users_paste_are_recognised(text: str, sig_id: str) -> None:
    assert sig_id in ids(text)


def test_unrelated_text_matches_nothing() -> None:
    for text in ("hello world", "Traceback (most recent call last):\n  File \"x.py\", line 1", "pip install torch",
                 "CUDA Version: 12.4", "Driver Version: 550.54.15"):
        assert ids(text) == [], text


def test_matches_come_in_the_order_the_text_shows_them() -> None:
    text = ("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
            "installation.\n...\nRuntimeError: CUDA error: no kernel image is available for execution on the device")
    assert ids(text) == ["torch.arch_not_compatible", "cuda.no_kernel_image"]
    assert match(text)[1][1] == "RuntimeError: CUDA error: no kernel image is available for execution on the device"


# --- the exact texts, read from the components on this machine ----------------------------------

LIBCUDART = sorted(glob.glob("/usr/local/cuda*/lib64/libcudart.so.*"))
RUNTIME_MESSAGES = {
    "cuda.insufficient_driver": "CUDA driver version is insufficient for CUDA runtime version",
    "cuda.no_kernel_image": "no kernel image is available for execution on the device",
    "cuda.illegal_address": "an illegal memory access was encountered",
    "cuda.no_device": "no CUDA-capable device is detected",
    "cuda.compat_not_supported": "forward compatibility was attempted on non supported HW",
    "cuda.stub_library": "CUDA driver is a stub library",
    "cuda.unsupported_ptx": "the provided PTX was compiled with an unsupported toolchain.",
    "cuda.invalid_device_ordinal": "invalid device ordinal",
    "cuda.ecc_uncorrectable": "uncorrectable ECC error encountered",
    "cuda.launch_failure": "unspecified launch failure",
    "cuda.system_driver_mismatch": "system has unsupported display driver / cuda driver combination",
}


@pytest.mark.skipif(not LIBCUDART, reason="no CUDA toolkit libcudart under /usr/local/cuda*")
@pytest.mark.parametrize(("sig_id", "message"), sorted(RUNTIME_MESSAGES.items()))
def test_runtime_message_is_the_one_libcudart_prints(sig_id: str, message: str) -> None:
    data = Path(LIBCUDART[0]).read_bytes()
    assert message.encode() + b"\0" in data  # a whole C string of libcudart
    assert sig_id in ids(message)


SMI = Path("/usr/bin/nvidia-smi")
NVML = Path("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")


@pytest.mark.skipif(not (SMI.exists() and NVML.exists()), reason="Debian's nvidia-smi / libnvidia-ml1 not installed")
@pytest.mark.real_driver
def test_nvml_and_smi_messages_are_the_ones_nvidia_prints() -> None:
    smi, nvml = SMI.read_bytes(), NVML.resolve().read_bytes()
    fmt = b"\0Failed to initialize NVML: %s\n\0"  # nvidia-smi's format; the reason is nvmlErrorString's
    assert fmt in smi
    for sig_id, reason in [("nvml.version_mismatch", "Driver/library version mismatch"),
                           ("nvml.unknown_error", "Unknown Error"), ("nvml.driver_not_loaded", "Driver Not Loaded")]:
        assert b"\0" + reason.encode() + b"\0" in nvml
        assert sig_id in ids((fmt[1:-1] % reason.encode()).decode())
    for sig_id in ("smi.cannot_communicate", "smi.no_devices"):
        example = BY_ID[sig_id].examples[0]
        assert example.encode() in smi
        assert sig_id in ids(example)


HOST_CONFIG = sorted(glob.glob("/usr/local/cuda*/include/crt/host_config.h"))
NVCC = sorted(glob.glob("/usr/local/cuda*/bin/nvcc"))


@pytest.mark.skipif(not HOST_CONFIG, reason="no CUDA toolkit headers under /usr/local/cuda*")
def test_gcc_message_is_the_one_host_config_h_prints() -> None:
    lines = [line for line in Path(HOST_CONFIG[0]).read_text().splitlines() if "unsupported GNU version" in line]
    assert lines
    for line in lines:
        assert "nvcc.unsupported_gnu_version" in ids(line)


@pytest.mark.skipif(not NVCC, reason="no nvcc under /usr/local/cuda*")
def test_nvcc_message_is_the_one_nvcc_prints(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k() {}\n")
    result = subprocess.run([NVCC[0], "-arch=sm_35", "-c", str(source), "-o", str(tmp_path / "k.o")],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode != 0
    assert "nvcc.unsupported_gpu_architecture" in ids(result.stderr), result.stderr


def test_torch_messages_are_the_ones_torch_prints(torch_venv: Path) -> None:
    torch = next(torch_venv.glob("lib/python*/site-packages/torch"))
    cuda_init = (torch / "cuda/__init__.py").read_text()
    assert "Torch not compiled with CUDA enabled" in cuda_init
    warn = re.search(r'incompatible_device_warn = """\n(.*?)"""', cuda_init, re.S)
    assert warn
    text = warn.group(1).format("NVIDIA GeForce RTX 5090", "120", "sm_75 sm_80 sm_86 sm_90", "NVIDIA GeForce RTX 5090")
    assert "torch.arch_not_compatible" in ids(text)
    ext = (torch / "utils/cpp_extension.py").read_text()
    mismatch = re.search(r"CUDA_MISMATCH_MESSAGE = \(\n\s*(\".*?\")\n\s*(\".*?\")\n\)", ext)
    assert mismatch
    template = "".join(json.loads(part) for part in mismatch.groups())
    assert "torch.extension_cuda_mismatch" in ids(template % ("11.8", "12.1"))
    cudnn = (torch / "backends/cudnn/__init__.py").read_text()
    assert 'f"cuDNN version incompatibility: "' in cudnn and 'f"PyTorch was compiled  against {compile_version} "' \
        in cudnn
    assert "torch.cudnn_incompatible" in ids(
        "cuDNN version incompatibility: PyTorch was compiled  against (9, 1, 0) but found runtime version (8, 9, 2). ")
    assert b"No CUDA GPUs are available\0" in (torch / "lib/libtorch_cpu.so").read_bytes()


# --- the causes, judged on facts ----------------------------------------------------------------


def verdicts(text: str, facts: object) -> dict[str, str]:
    [result, *_] = explain(text, facts)  # type: ignore[arg-type]
    return {c.code: c.status for c in result.causes}


def test_cpu_only_torch_is_the_cause_of_not_compiled_with_cuda() -> None:
    facts = make_facts(python_envs=[torch_env("2.5.1+cpu", cuda=None, cpu_only=True)])
    assert verdicts("AssertionError: Torch not compiled with CUDA enabled", facts) == {
        "framework.cpu_only_build": APPLIES}


def test_cuda_torch_rules_the_cpu_only_cause_out() -> None:
    [result] = explain("AssertionError: Torch not compiled with CUDA enabled", make_facts())
    [cause] = result.causes
    assert cause.status == RULED_OUT
    assert cause.finding and "is a CUDA build" in cause.finding["title"]


def test_driver_470_is_the_cause_of_driver_too_old() -> None:
    facts = make_facts(driver__kernel_module="470.223.02", driver__userspace="470.223.02")
    text = "The NVIDIA driver on your system is too old (found version 11040)."
    assert verdicts(text, facts) == {"framework.cuda_newer_than_driver": APPLIES}


def test_module_and_userspace_versions_explain_the_nvml_mismatch() -> None:
    facts = make_facts(driver__kernel_module="535.104.05", driver__userspace="550.90.07")
    assert verdicts("Failed to initialize NVML: Driver/library version mismatch", facts) == {
        "driver.module_userspace_mismatch": APPLIES}


def test_container_without_gpu_explains_no_driver_and_other_causes_are_told_apart() -> None:
    # NVML answered (the user space is there) but no GPU was passed in: no device node, nothing enumerated
    facts = make_facts(host__container="docker", driver__device_nodes=[], gpus=[], loader__libcuda=None)
    got = verdicts("RuntimeError: Found no NVIDIA driver on your system.", facts)
    assert got["container.no_gpu_passthrough"] == APPLIES
    assert got["driver.missing"] == RULED_OUT
    assert got["wsl.driver"] == NOT_APPLICABLE


def test_without_facts_every_cause_is_a_candidate() -> None:
    [result] = explain("Failed to initialize NVML: Unknown Error", None)
    assert {c.status for c in result.causes} == {NOT_CHECKED}
    assert result.applies == []


def test_unchecked_causes_stay_unchecked_on_a_machine() -> None:
    [result] = explain("RuntimeError: CUDA error: an illegal memory access was encountered", make_facts())
    statuses = {c.code: c.status for c in result.causes}
    assert statuses["unchecked.kernel_bug"] == NOT_CHECKED
    assert statuses["gpu.hardware_fault"] == RULED_OUT


def test_only_the_checks_of_the_matched_causes_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import doctor.pipeline

    ran: list[list[str]] = []
    real = doctor.pipeline.diagnose

    def spy(facts, checks=None, ctx=None):  # type: ignore[no-untyped-def]
        ran.append([c.id for c in checks])
        return real(facts, checks=checks, ctx=ctx)

    monkeypatch.setattr(doctor.pipeline, "diagnose", spy)
    explain("Failed to initialize NVML: Driver/library version mismatch\nNo CUDA GPUs are available", make_facts())
    assert ran == [["driver.not_loaded", "driver.module_userspace_mismatch", "env.cuda_visible_devices",
                    "container.no_gpu_passthrough"]]


def test_out_of_memory_message_says_whose_memory_it_is() -> None:
    new = BY_ID["torch.out_of_memory"].examples[0]
    [result] = explain(new, None)
    assert "This process holds 23.60 GiB; other processes hold about 40 MiB" in result.notes[0]
    assert "workload is too large" in result.notes[0]
    [old] = explain(TEXTS[6][0], None)
    assert "PyTorch reserved 1.02 GiB (789 MiB allocated)" in old.notes[0]


def test_driver_version_in_torchs_message_is_decoded() -> None:
    [result] = explain("The NVIDIA driver on your system is too old (found version 11040).", None)
    assert "driver's CUDA version: 11.4" in result.notes[0]


# --- renderings and the command line ------------------------------------------------------------


def test_json_rendering_is_stable() -> None:
    facts = make_facts(python_envs=[torch_env("2.5.1+cpu", cuda=None, cpu_only=True)])
    data = to_dict(explain("Torch not compiled with CUDA enabled", facts), "this machine")
    assert data["schema"] == EXPLAIN_SCHEMA and data["matched"] is True
    [m] = data["matches"]
    assert set(m) == {"id", "title", "matched_text", "applies", "causes", "notes", "fix", "source"}
    assert m["applies"] == ["framework.cpu_only_build"]
    assert m["causes"][0]["finding"]["severity"] == "fail"
    assert to_dict([], None) == {"schema": EXPLAIN_SCHEMA, "matched": False, "facts_from": None, "matches": []}


def test_text_rendering_names_the_cause_that_applies() -> None:
    facts = make_facts(python_envs=[torch_env("2.5.1+cpu", cuda=None, cpu_only=True)])
    text = render_text(explain("Torch not compiled with CUDA enabled", facts), "this machine")
    assert "The installed torch is a CPU-only build  [torch.not_compiled_with_cuda]" in text
    assert "✗ applies here: pip installed the CPU wheel" in text
    assert "torch 2.5.1+cpu in /venv/bin/python is a CPU-only build" in text
    assert "source: https://github.com/pytorch/pytorch/blob/main/torch/cuda/__init__.py" in text


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_exit_0_when_matched_1_when_not(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["explain", "--no-probe", "Failed to initialize NVML: Unknown Error"], capsys)[0] == 0
    code, out, _err = run_cli(["explain", "--no-probe", "all good"], capsys)
    assert code == 1 and out.startswith("No known error signature matches")
    code, out, _err = run_cli(["explain", "--no-probe", "--json", "all good"], capsys)
    assert code == 1 and json.loads(out)["matched"] is False


def test_cli_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_cli(["explain", "--list"], capsys)
    assert code == 0 and len(out.splitlines()) == len(SIGS)
    assert out.splitlines()[0].startswith("cuda.insufficient_driver")


def test_cli_reads_a_log_on_standard_input(capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    log = "Loading model...\nTraceback (most recent call last):\nAssertionError: Torch not compiled with CUDA enabled\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(log))
    code, out, _err = run_cli(["explain", "--no-probe", "--json", "-"], capsys)
    assert code == 0
    assert json.loads(out)["matches"][0]["matched_text"] == "AssertionError: Torch not compiled with CUDA enabled"


def test_cli_with_a_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = tmp_path / "facts.json"
    snapshot.write_text(make_facts(driver__kernel_module="535.104.05", driver__userspace="550.90.07").to_json())
    code, out, _err = run_cli(["explain", "--facts", str(snapshot), "--json",
                               "Failed to initialize NVML: Driver/library version mismatch"], capsys)
    data = json.loads(out)
    assert code == 0 and data["facts_from"] == f"the snapshot {snapshot}"
    assert data["matches"][0]["applies"] == ["driver.module_userspace_mismatch"]


def test_cli_with_a_collect_env_report(capsys: pytest.CaptureFixture[str]) -> None:
    report = COLLECT_ENV / "pytorch-150733-rtx5090d-torch2.6-cu126.txt"
    code, out, _err = run_cli(["explain", "--from-collect-env", str(report),
                               "RuntimeError: CUDA error: no kernel image is available for execution on the device"],
                              capsys)
    assert code == 0
    assert "✗ applies here: The framework build does not include this GPU's compute capability" in out
    assert "torch 2.6.0+cu126 has no kernels for NVIDIA GeForce RTX 5090 D (sm_120)" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["explain"], "give the error text"),
    (["explain", "  "], "give the error text"),
    (["explain", "-", "more"], "cannot be mixed"),
    (["explain", "--no-probe", "--facts", "x.json", "CUDA error"], "give one"),
    (["explain", "--no-probe", "--python", "/usr/bin/python3", "CUDA error"], "do not apply"),
    (["explain", "--facts", "/nonexistent/facts.json", "CUDA error"], "--facts /nonexistent/facts.json"),
])
def test_cli_usage_errors_are_one_line_exit_2(argv: list[str], message: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1


LIBCUDA = Path("/usr/lib/x86_64-linux-gnu/libcuda.so.1")


@pytest.mark.skipif(not LIBCUDA.exists(), reason="Debian's libcuda1 is not installed (.ci/run installs it)")
@pytest.mark.real_driver
def test_on_this_machine_smi_failure_is_the_unloaded_module(capsys: pytest.CaptureFixture[str]) -> None:
    text = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
            "NVIDIA driver is installed and running.")
    code, out, _err = run_cli(["explain", "--json", text], capsys)
    data = json.loads(out)
    assert code == 0 and data["facts_from"] == "this machine"
    [m] = data["matches"]
    assert "driver.not_loaded" in m["applies"]
    assert {c["code"]: c["status"] for c in m["causes"]}["driver.missing"] == RULED_OUT


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000))
def test_explain_never_raises(text: str) -> None:
    results = explain(text, None)
    json.dumps(to_dict(results, None))
    render_text(results, None)


# --- issue 11: the messages that were unknown, one catalog, linear patterns ---------------------------

ISSUE_11 = [
    ("RuntimeError: CUDA error: system not yet initialized", "cuda.system_not_ready"),
    ("RuntimeError: CUDA error: out of memory", "cuda.out_of_memory"),
    ("ImportError: /usr/local/lib/python3.10/dist-packages/torch/lib/../../nvidia/cusparse/lib/libcusparse.so.12: "
     "undefined symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12", "lib.cuda_undefined_symbol"),
    ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
     "driver from http://www.nvidia.com/Download/index.aspx", "torch.no_driver"),
]


@pytest.mark.parametrize(("text", "sig_id"), ISSUE_11)
def test_issue_11_messages_are_recognised(text: str, sig_id: str) -> None:
    assert sig_id in ids(text)


def test_error_802_names_the_fabric_manager() -> None:
    (e,) = explain("RuntimeError: CUDA error: system not yet initialized")
    assert "Fabric Manager" in e.signature.title
    assert "nvidia-fabricmanager" in e.signature.fix
    assert any("version" in c.text and "fabricmanager" in c.text for c in e.causes)


def test_undefined_nvjitlink_symbol_blames_ld_library_path() -> None:
    (e,) = explain(ISSUE_11[2][0])
    assert e.causes[0].code == "framework.libs_shadowed"
    assert "LD_LIBRARY_PATH" in e.signature.fix


def test_report_that_cannot_tell_about_containers_does_not_rule_them_out(
        capsys: pytest.CaptureFixture[str]) -> None:
    report = COLLECT_ENV / "pytorch-121067-macos-no-gpu-torch2.2.2.txt"
    code, out, _err = run_cli(["explain", "--from-collect-env", str(report), ISSUE_11[3][0]], capsys)
    assert code == 0
    line = next(ln for ln in out.splitlines() if "started without a GPU" in ln)
    assert "unknown" in line and "ruled out" not in line and "does not apply" not in line
    assert "not in a container" not in out


# Inputs that make a backtracking regex explode when a pattern nests or chains overlapping repeats.
_ADVERSARIAL = ["a" * 50_000, " " * 50_000, "0." * 25_000, "lib" + "a" * 50_000 + ".so", "\n" * 50_000,
                "Found " + "x" * 50_000, "(" * 50_000, "sm_" + "9" * 50_000, "NVRM: " * 10_000]


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_every_pattern_is_linear_on_adversarial_input(row: dict) -> None:
    import time

    pattern = re.compile(row["pattern"])
    for text in _ADVERSARIAL:
        start = time.perf_counter()
        pattern.search(text)
        # a catastrophic pattern takes minutes here; tests/test_regex_linearity.py proves each one linear
        assert time.perf_counter() - start < 5, (row["id"], text[:20])


def test_a_huge_paste_is_bounded_and_still_finds_the_error_at_its_end() -> None:
    import time

    text = "noise line\n" * 1_000_000 + "RuntimeError: CUDA error: out of memory\n"
    start = time.perf_counter()
    assert "cuda.out_of_memory" in ids(text)
    assert time.perf_counter() - start < 60  # bounded to MAX_TEXT: seconds even on a loaded machine


def test_smoke_and_cuda_error_tables_are_the_same_catalog() -> None:
    from doctor.checks.active import cuerrors, frameworks

    data = bundled()
    assert {r["name"] for r in data.rows("errors", "cuda_error")} == set(cuerrors.MEANINGS)
    assert cuerrors.meaning("CUDA_ERROR_SYSTEM_NOT_READY").code == "driver.fabric_manager_not_running"
    smoke = data.rows("errors", "smoke")
    assert len(frameworks.SIGNATURES) == len(smoke)
    for row in [*smoke, *data.rows("errors", "cuda_error")]:
        assert str(row["source"]).startswith("https://"), row
    for sig in frameworks.SIGNATURES:
        assert sig.ids and all(i in BY_ID for i in sig.ids)
    assert frameworks.classify("RuntimeError: CUDA error: system not yet initialized").code == \
        "driver.fabric_manager_not_running"
    assert frameworks.classify("RuntimeError: CUDA error: out of memory").code == "gpu.oom"
