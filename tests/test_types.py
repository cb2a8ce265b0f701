"""The whole `doctor` package type-checks, with the settings of pyproject.toml's [tool.mypy]: every function typed
and its body checked, no Any returned where a type is declared, no bare generic, no call into untyped code, no code
that cannot run (the parsers' guards against any input aside), no stale or bare `type: ignore`.

One mypy run (about 20 s cold on two cores, a second or two with its cache in .cache/mypy) serves both tests."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ACTIVE = "doctor/active/"

pytest.importorskip("mypy", reason="mypy is in the dev extra")


@pytest.fixture(scope="module")
def mypy_errors() -> list[str]:
    """mypy's error lines ("path:line: error: … [code]") over the whole package; a crash of mypy itself fails."""
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--no-pretty"],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    errors = [line for line in result.stdout.splitlines() if re.match(r"\S+:\d+: error: ", line)]
    assert result.returncode in (0, 1) and bool(errors) == (result.returncode == 1), \
        (result.stdout + result.stderr)[-6000:]
    return errors


def test_the_package_type_checks(mypy_errors: list[str]) -> None:
    outside = [e for e in mypy_errors if not e.startswith(ACTIVE)]
    assert not outside, "\n".join(outside[:60])


@pytest.mark.xfail(strict=True, reason="doctor/active/ is being rewritten (issue 19: active judges read typed facts); "
                   "its rewrite brings it to no error, and strict xfail then fails here until this mark goes")
def test_the_active_tests_type_check(mypy_errors: list[str]) -> None:
    inside = [e for e in mypy_errors if e.startswith(ACTIVE)]
    assert not inside, "\n".join(inside[:60])
