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


def test_entrypoint_fails_closed_when_there_is_too_little_evidence(tmp_path: Path) -> None:
    result = _run_entrypoint(tmp_path, 4, {})  # exit 4: nothing about a driver, GPU or framework was learned
    assert result.returncode == 1 and "workload started" not in result.stdout
    assert "too little evidence" in result.stderr and "not starting" in result.stderr


def test_entrypoint_fails_closed_without_gpu_doctor(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": "/nonexistent"}
    result = subprocess.run(["/bin/bash", str(EXAMPLE / "preflight.sh"), "/bin/echo", "workload started"],
                            capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 1 and "workload started" not in result.stdout
    assert "gpu-doctor is not installed" in result.stderr


def test_entrypoint_checks_the_workloads_python(tmp_path: Path) -> None:
    result = _run_entrypoint(tmp_path, 0, {"GPU_DOCTOR_PYTHON": "/usr/local/bin/python"})
    assert result.returncode == 0
    assert (tmp_path / "called").read_text().split() == ["gpu-doctor", "check", "--require", "gpus>=1", "--python",
                                                         "/usr/local/bin/python"]
    assert "ENV GPU_DOCTOR_PYTHON=/usr/local/bin/python" in (EXAMPLE / "Dockerfile").read_text()


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether a .dockerignore excludes ``path`` (its patterns as Go's filepath.Match reads them, ``**`` any
    number of directories; a pattern matching a directory excludes what is under it)."""
    import fnmatch

    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]  # a directory's pattern covers its tree
    out = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern.lstrip("!").strip("/")
        if pat.startswith("**/"):  # at any depth: the pattern against the last part of some prefix
            hit = any(fnmatch.fnmatchcase(p.rsplit("/", 1)[-1], pat[3:]) for p in prefixes)
        else:
            hit = any(fnmatch.fnmatchcase(p, pat) for p in prefixes)
        if hit:
            out = not negate
    return out


def test_the_build_context_ships_the_source_and_not_git_venvs_or_caches() -> None:
    root = EXAMPLE.parent.parent
    patterns = [ln.strip() for ln in (root / ".dockerignore").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    for junk in (".git/config", ".venv/bin/python", "doctor/__pycache__/cli.cpython-311.pyc",
                 "nvgpu_doctor.egg-info/PKG-INFO", ".pytest_cache/v/cache", ".ruff_cache/x", "dist/x.whl"):
        assert _ignored(junk, patterns), junk
    copied = ["pyproject.toml", "README.md", "doctor/cli.py", "doctor/schemas/report-v1.json", "compat/matrix.json",
              "examples/docker/preflight.sh"]
    for needed in copied:  # what pip install /opt/gpu-doctor builds from, and what the Dockerfile copies
        assert not _ignored(needed, patterns), needed


def test_no_example_installs_a_pypi_name_that_is_not_this_project() -> None:
    import re

    root = EXAMPLE.parent.parent
    # nvgpu-doctor has no PyPI release and `gpu-doctor` on PyPI is an unrelated project: either name after
    # `pip install` installs nothing, or someone else's code.
    by_name = re.compile(r"pip3? install[^\n|;&]*?(?<![\w./@+-])(nvgpu[-_]doctor|gpu[-_]doctor)(?![\w./-])")
    for path in [*root.joinpath("examples").rglob("*"), root / "README.md"]:
        if path.is_file():
            text = path.read_text(errors="replace")
            assert not by_name.search(text), (path, by_name.search(text))
