"""Image builds and CI: --static, --host-driver/--target-gpu, --require gates, JUnit and Markdown."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from factories import make_facts, torch_env

from doctor.cli import main
from doctor.model.facts import Cudnn, DriverInfo, LibRef, Package, PyPackage, PythonEnv, Toolkit
from doctor.require import RequireError, evaluate, parse


def write(tmp_path: Path, facts) -> str:
    path = tmp_path / "facts.json"
    path.write_text(facts.to_json())
    return str(path)


# An image build host: no driver, no GPU; the image has CUDA 12.4 torch and a CUDA 12.4 toolkit.
IMAGE = make_facts(driver=DriverInfo(), gpus=[], host__pci_nvidia_gpus=0,
                   toolkits=[Toolkit("/usr/local/cuda-12.4", "12.4.1", "12.4.131", "path")],
                   python_envs=[PythonEnv("/opt/venv/bin/python", "3.11.9", "VIRTUAL_ENV", packages=[
                       PyPackage("torch", "2.5.1", cuda="12.4", cudnn="9.1.0.70", cpu_only=False),
                       PyPackage("nvidia-cudnn-cu12", "9.1.0.70", cuda="12", cudnn="9.1.0.70")])])


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_static_does_not_fail_for_the_missing_driver_and_prints_the_minimum(tmp_path, capsys) -> None:
    code, out, _ = run(["check", "--facts", write(tmp_path, IMAGE), "--static"], capsys)
    assert code == 0, out
    assert "image check (--static): host driver not given" in out
    # torch cu124 and CUDA 12.4: 550.54.14 natively (RN), 525.60.13 by minor-version compatibility (MVC)
    # the toolkit is 12.4.1 (Update 1: 550.54.15); the torch wheel's 12.4 alone would need 550.54.14
    assert "This image needs a host driver ≥ 525.60.13 (≥ 550.54.15 for full support)" in out
    assert "driver.not_loaded" not in out and "kernel module is not loaded" not in out


def test_static_json_runs_only_the_image_checks(tmp_path, capsys) -> None:
    _code, out, _ = run(["check", "--facts", write(tmp_path, IMAGE), "--static", "--json"], capsys)
    ids = {c["id"] for c in json.loads(out)["checks"]}
    assert "driver.not_loaded" not in ids and "gpu.memory_in_use" not in ids
    assert {"image.min_host_driver", "framework.arch_unsupported", "framework.cuda_newer_than_driver"} <= ids


def test_static_with_an_old_host_driver_fails(tmp_path, capsys) -> None:
    code, out, _ = run(["check", "--facts", write(tmp_path, IMAGE), "--static", "--host-driver", "470.223.02"],
                       capsys)
    assert code == 1
    assert "torch 2.5.1 needs a newer driver than 470.223.02" in out


def test_static_with_a_blackwell_target_flags_the_cu124_build(tmp_path, capsys) -> None:
    code, out, _ = run(["check", "--facts", write(tmp_path, IMAGE), "--static", "--target-gpu", "RTX 5090"], capsys)
    assert code == 1
    assert "torch 2.5.1 has no kernels for NVIDIA GeForce RTX 5090 (sm_120)" in out


def test_static_with_target_cc_9_0_is_fine(tmp_path, capsys) -> None:
    code, out, _ = run(["check", "--facts", write(tmp_path, IMAGE), "--static", "--target-cc", "9.0",
                        "--host-driver", "550.54.15"], capsys)
    assert code == 0, out
    assert "torch 2.5.1 has kernels for a compute capability 9.0 GPU (sm_90)" in out


def test_static_cpu_only_torch_in_a_conda_image_mentions_conda_override_cuda(tmp_path, capsys) -> None:
    facts = make_facts(driver=DriverInfo(), gpus=[], env__CONDA_PREFIX="/opt/conda",
                       python_envs=[torch_env("2.5.1+cpu", cuda=None, cpu_only=True)])
    code, out, _ = run(["check", "--facts", write(tmp_path, facts), "--static"], capsys)
    assert code == 1
    assert "CONDA_OVERRIDE_CUDA" in out and "is a CPU-only build" in out


@pytest.mark.parametrize("args", [["--host-driver", "550"], ["--target-gpu", "H100"], ["--target-cc", "9.0"]])
def test_target_options_need_static(args: list[str], tmp_path, capsys) -> None:
    code, _, err = run(["check", "--facts", write(tmp_path, IMAGE), *args], capsys)
    assert code == 2 and "add --static" in err


@pytest.mark.parametrize(("args", "message"), [
    (["--target-gpu", "Quadro K9000"], "unknown GPU"),
    (["--target-cc", "nine"], "a compute capability like 8.0"),
    (["--host-driver", "12"], "not an NVIDIA driver version"),
])
def test_bad_static_targets_are_usage_errors(args, message, tmp_path, capsys) -> None:
    code, _, err = run(["check", "--facts", write(tmp_path, IMAGE), "--static", *args], capsys)
    assert code == 2 and message in err and err.count("\n") == 1


# --- --require -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "severity", "words"), [
    ("torch>=2.4", "ok", "the PyTorch version is 2.5.1"),
    ("torch>=2.6", "fail", "NOT met"),
    ("cuda>=12.1", "ok", "is 12.4"),
    ("cudnn>=9", "ok", "9.1.0.70"),
    ("driver>=550", "ok", "550.90.07"),
    ("driver>=555", "fail", "550.90.07"),
    ("gpus>=8", "fail", "the number of GPUs is 1"),
    ("gpus>=1", "ok", "is 1"),
    ("gpu-memory>=79GiB", "ok", "79.6 GiB"),
    ("gpu-memory>=80GiB", "fail", "79.6 GiB"),
    ("cc>=8.0", "ok", "9.0"),
    ("cc>=10.0", "fail", "9.0"),
    ("python>=3.10", "ok", "3.11.9"),
    ("tensorflow>=2.15", "fail", "cannot be verified"),
])
def test_require_gates_on_the_healthy_host(spec: str, severity: str, words: str) -> None:
    (f,) = evaluate(make_facts(), [parse(spec)])
    assert f.severity == severity, f.title
    assert words in f.title
    assert f.code == f"require.{spec.split('>')[0].split('=')[0]}" and f.area == "Requirements"


@pytest.mark.parametrize("bad", ["torch", "torch>=", "gpu-memory>=lots", "banana>=1", "cuda>=twelve", ">=2"])
def test_bad_require_specs_are_rejected(bad: str) -> None:
    with pytest.raises(RequireError):
        parse(bad)


def test_cli_bad_require_is_exit_2_with_one_line(tmp_path, capsys) -> None:
    code, _, err = run(["check", "--facts", write(tmp_path, make_facts()), "--require", "banana>=1"], capsys)
    assert code == 2 and err.count("\n") == 1 and "unknown name 'banana'" in err


def test_cli_unmet_require_fails_the_run(tmp_path, capsys) -> None:
    code, out, _ = run(["check", "--facts", write(tmp_path, make_facts()), "--require", "gpus>=8",
                        "--require", "torch>=2.4"], capsys)
    assert code == 1
    assert "Requirements" in out and "✗ Requirement gpus>=8 NOT met" in out and "✓ Requirement torch>=2.4 met" in out


# --- JUnit and Markdown --------------------------------------------------------------------------


def test_junit_has_one_testcase_per_check_and_failures_for_fails(tmp_path, capsys) -> None:
    facts = make_facts(env__CUDA_VISIBLE_DEVICES="", gpu__throttle_reasons=["hw_slowdown"])
    code, out, _ = run(["check", "--facts", write(tmp_path, facts), "--format", "junit", "--require", "gpus>=2"],
                       capsys)
    assert code == 1
    suite = ET.fromstring(out)
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["env.cuda_visible_devices"].find("failure") is not None
    assert cases["require.gpus"].find("failure") is not None
    assert cases["gpu.throttling"].find("failure") is None  # a warning, not --strict
    assert "wsl.driver" not in cases  # not applicable here: summarised, not one <skipped> case each
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert int(props["not_applicable"]) >= 1
    assert "wsl.driver: " in suite.find("system-out").text
    assert int(suite.get("failures")) == 2 and int(suite.get("tests")) == len(cases)
    assert float(suite.get("time")) > 0  # how long the check took


def test_junit_cases_about_a_dockerfile_line_carry_file_and_line(tmp_path) -> None:
    import subprocess
    import sys

    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM python:3.11-slim\nENV CUDA_VISIBLE_DEVICES=\"\"\n"
                          "RUN pip install torch==2.5.1 --index-url https://download.pytorch.org/whl/cpu\n")
    done = subprocess.run([sys.executable, "-m", "doctor", "check", "--dockerfile", str(dockerfile), "--format",
                           "junit"], capture_output=True, text=True, timeout=120, check=False)
    suite = ET.fromstring(done.stdout)
    failing = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failing, done.stdout
    located = {c.get("name"): (c.get("file"), c.get("line")) for c in failing}
    assert located["framework.cpu_only_build"] == (str(dockerfile), "3")  # the line the reader recorded
    assert int(suite.get("tests")) < 20  # the checks that do not apply to an image are not dozens of skips


def test_junit_strict_turns_warnings_into_failures(tmp_path, capsys) -> None:
    facts = make_facts(gpu__throttle_reasons=["hw_slowdown"])
    _code, out, _ = run(["check", "--facts", write(tmp_path, facts), "--format", "junit", "--strict"], capsys)
    cases = {c.get("name"): c for c in ET.fromstring(out).iter("testcase")}
    assert cases["gpu.throttling"].find("failure") is not None


def test_markdown_has_tables_fixes_and_collapsed_facts(tmp_path, capsys) -> None:
    facts = make_facts(driver__nouveau_loaded=True)
    _code, out, _ = run(["check", "--facts", write(tmp_path, facts), "--format", "markdown"], capsys)
    assert out.startswith("## gpu-doctor report")
    assert "| ✗ | The nouveau driver is loaded: NVIDIA's driver cannot take the GPU | `nouveau.active` |" in out
    assert "### How to fix" in out and "sudo update-initramfs -u" in out
    assert "<details><summary>Facts (gpu-doctor.facts/v1)</summary>" in out
    facts_json = out.split("```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(facts_json)["schema"] == "gpu-doctor.facts/v1"


# --- containers at start -------------------------------------------------------------------------


def test_container_that_lost_its_gpus_after_daemon_reload(tmp_path, capsys) -> None:
    facts = make_facts(host__container="docker", driver__nvml_error="Unknown Error",
                       loader__libcuda=LibRef("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "550.90.07"))
    code, out, _ = run(["check", "--facts", write(tmp_path, facts), "container.no_gpu_passthrough"], capsys)
    assert code == 1
    assert "lost access to its GPUs: 'Failed to initialize NVML: Unknown Error'" in out
    assert "systemctl daemon-reload" in out and "nvidia-ctk system create-dev-char-symlinks" in out


def test_image_with_cuda_compat_package_mentions_forward_compat(tmp_path, capsys) -> None:
    facts = make_facts(driver=DriverInfo(packages=[Package("cuda-compat-12-4", "550.54.15-1", "dpkg")]), gpus=[],
                       cudnn=[Cudnn("9.1.0", "/usr/include/cudnn_version.h", "header")])
    _code, out, _ = run(["check", "--facts", write(tmp_path, facts), "--static", "-v"], capsys)
    assert "cuda-compat-12-4" in out and "forward compatibility" in out


def test_junit_on_real_dockerfiles_points_every_located_case_at_a_real_line() -> None:
    from pathlib import Path

    from hostile import run_cli

    data = Path(__file__).parent / "data" / "dockerfiles"
    located = 0
    for dockerfile in sorted(data.glob("*.Dockerfile")):
        r = run_cli(["check", "--dockerfile", str(dockerfile), "--format", "junit"])
        assert r.code in (0, 1, 4), r
        suite = ET.fromstring(r.out.split("\n", 1)[1])
        lines = dockerfile.read_text().splitlines()
        for case in suite.iter("testcase"):
            if case.get("file") is not None:
                located += 1
                assert case.get("file") == str(dockerfile)
                assert 1 <= int(case.get("line")) <= len(lines)
        assert not [c for c in suite.iter("testcase") if c.find("skipped") is not None
                    and "not applicable" in (c.find("skipped").get("message") or "")]
    assert located >= 8  # the findings of eight real Dockerfiles carry their lines
