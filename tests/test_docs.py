"""Documentation that is generated must be current, and the README must keep its promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_checks_doc_is_generated_from_the_registry() -> None:
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_checks_doc.py"), "--check"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_every_check_code_is_documented_with_an_example() -> None:
    from doctor.checks import REGISTRY

    doc = (REPO / "docs" / "checks.md").read_text()
    for chk in REGISTRY:
        section = doc.split(f"## {chk.id}\n", 1)[1].split("\n## ", 1)[0]
        assert "Example —" in section and "```json" in section, chk.id


def test_ci_runs_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "./scripts/test" in readme
    assert "\n./scripts/test\n" in ci and "exec ./scripts/test --slow" in ci  # the fast set, then the rest


def test_readme_outputs_are_what_the_commands_print_today() -> None:
    """Each output block in the README is regenerated from a real run; a check or wording change that is not
    carried into the README fails here (fix: python scripts/gen_readme.py)."""
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_readme.py"), "--check"],
                            capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:]
    readme = (REPO / "README.md").read_text()
    assert readme.count("<!-- gen: ") == 3 and "$ gpu-doctor check" in readme
