"""The typed core type-checks: mypy on model, beliefs, registry, checks, engine, planner and pipeline, as
pyproject.toml's [tool.mypy] lists them (no untyped function there, no stale `type: ignore`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytest.importorskip("mypy", reason="mypy is in the dev extra")


def test_the_core_type_checks() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
