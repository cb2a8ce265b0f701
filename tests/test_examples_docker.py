"""examples/docker: the build-time gate parses as a real gpu-doctor command; the entrypoint behaves.

There is no Docker engine here, so the image is not built; what can run, runs: the entrypoint script
with a fake gpu-doctor on PATH, and the Dockerfile's gpu-doctor line through the real argument parser.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from doctor.cli import build_parser

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "docker"


def dockerfile_runs() -> list[str]:
    text = (EXAMPLE / "Dockerfile").read_text().replace("\\\n", " ")
    return [line.split("RUN", 1)[1].strip() for line in text.splitlines() if line.startswith("RUN ")]


def test_dockerfile_gate_is_a_valid_static_check() -> None:
    (gate,) = [r for r in dockerfile_runs() if r.startswith("gpu-doctor")]
    argv = shlex.split(gate)[1:]
    args = build_parser(only="check").parse_args(argv)
    assert args.static and args.target_gpu == "H100 80GB HBM3" and args.host_driver == "535.104.05"
    assert args.require == ["torch>=2.4", "cuda>=12.1"]


def test_dockerfile_copies_the_entrypoint_it_uses() -> None:
    text = (EXAMPLE / "Dockerfile").read_text()
    assert "COPY examples/docker/preflight.sh /usr/local/bin/preflight" in text
    assert 'ENTRYPOINT ["/usr/local/bin/preflight"]' in text


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (.ci/run installs it)")
def test_entrypoint_passes_shellcheck() -> None:
    result = subprocess.run(["shellcheck", str(EXAMPLE / "preflight.sh")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def _run_entrypoint(tmp_path: Path, doctor_exit: int, env: dict[str, str]) -> subprocess.CompletedProcess:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "gpu-doctor").write_text(f'#!/bin/sh\necho "gpu-doctor $*" > "{tmp_path}/called"\nexit {doctor_exit}\n')
    (fake / "gpu-doctor").chmod(0o755)
    full = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", **env}
    return subprocess.run([str(EXAMPLE / "preflight.sh"), "echo", "workload started"], capture_output=True,
                          text=True, env=full, timeout=30)


def test_entrypoint_starts_the_workload_when_the_check_passes(tmp_path: Path) -> None:
    result = _run_entrypoint(tmp_path, 0, {"GPU_DOCTOR_MIN_GPUS": "8"})
    assert result.returncode == 0 and result.stdout.strip() == "workload started"
    assert (tmp_path / "called").read_text().strip() == "gpu-doctor check --require gpus>=8"


def test_entrypoint_refuses_when_the_check_fails(tmp_path: Path) -> None:
    result = _run_entrypoint(tmp_path, 1, {})
    assert result.returncode == 1 and "workload started" not in result.stdout
    assert "not starting" in result.stderr


def test_entrypoint_can_be_told_to_start_anyway(tmp_path: Path) -> None:
    result = _run_entrypoint(tmp_path, 1, {"GPU_DOCTOR_SKIP": "1"})
    assert result.returncode == 0 and result.stdout.strip() == "workload started"
