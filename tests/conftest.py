from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from factories import make_facts

from doctor.model.facts import Facts
from doctor.model.findings import Finding
from doctor.model.report import CheckResult, Report
from doctor.pipeline import diagnose

DATA = Path(__file__).parent / "data"

# Fixtures that build or download something big: a test using one is `slow` (./scripts/test leaves it out;
# ./scripts/test --slow and CI's .ci/run run it). What each costs the first time is in README.md (Tests).
SLOW_FIXTURES = {
    "torch_venv": "builds a venv with the real torch 2.13.0 CPU wheel (~3 min, ~1.9 GB under .cache/)",
    "ptxas_for": "installs the nvidia-cuda-nvcc wheels for their ptxas (~150 MB under .cache/)",
    "wheel": "builds gpu-doctor's wheel with pip (fetches setuptools)",
}


def _signal_ignored_here(signum: int, frame: object) -> None:
    """Stands in for SIG_IGN: this run still survives the signal, and the processes it starts do not inherit an
    ignored disposition (exec resets a caught signal to its default; an ignored one stays ignored)."""


def pytest_configure(config: pytest.Config) -> None:
    # Under `nohup` SIGHUP is ignored, and a shell's background job (`cmd &`, some CI runners) ignores SIGINT: every
    # gpu-doctor a test starts would inherit that and, as it should, keep ignoring it, so the tests that send it
    # a signal would wait in vain. The tests set their own dispositions instead of relying on the caller's.
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, _signal_ignored_here)


@pytest.hookimpl(tryfirst=True)  # before -m deselects, so `-m "not slow"` sees these marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES.keys() & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def findings_for(facts: Facts, code: str) -> list:
    """The findings a single check produces for these facts."""
    from doctor.checks import REGISTRY

    report = diagnose(facts, checks=[c for c in REGISTRY if c.id == code or code in c.all_codes])
    return [f for f in report.findings if f.code == code or f.check == code]


def run_check(facts: Facts, check_id: str) -> Report:
    from doctor.checks import by_id

    chk = by_id(check_id)
    assert chk is not None, check_id
    return diagnose(facts, checks=[chk])


def outcome(facts: Facts, check_id: str) -> tuple[CheckResult, list[Finding]]:
    """Run one check: its result (status, reason) and its findings."""
    report = run_check(facts, check_id)
    (result,) = report.checks
    return result, report.findings


def only(facts: Facts, check_id: str) -> Finding:
    """The single finding one check gives; its severity is the check's status."""
    result, findings = outcome(facts, check_id)
    assert len(findings) == 1, findings
    assert result.status == findings[0].severity
    return findings[0]


def commands(f: Finding) -> list[list[str]]:
    """The argv of each step of a finding's fix."""
    assert f.fix is not None
    return [s.command for s in f.fix.steps]


@pytest.fixture
def healthy() -> Facts:
    return make_facts()


REPO = Path(__file__).resolve().parent.parent
TORCH = "torch==2.13.0"
CUDNN = "nvidia-cudnn-cu12==9.28.0.42"


@pytest.fixture(scope="session")
def torch_venv() -> Path:
    """A venv with the real torch 2.13.0 CPU wheel and the real cuDNN 9 wheel, built once and cached."""
    venv = REPO / ".cache" / "test-envs" / "torch2.13.0-cpu-cudnn9.28"
    python = venv / "bin" / "python"
    marker = venv / ".complete"
    if not marker.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, TORCH], check=True, timeout=1800)
        subprocess.run([*pip, "--no-deps", CUDNN], check=True, timeout=1800)
        marker.write_text("ok\n")
    return venv
