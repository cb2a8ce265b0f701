"""The whole `doctor` package type-checks, with the settings of pyproject.toml's [tool.mypy]: every function typed
and its body checked, no Any returned where a type is declared, no bare generic, no call into untyped code, no code
that cannot run (the parsers' guards against any input aside), no stale or bare `type: ignore`.

One mypy run: about 20 s cold on two cores, a second or two with its cache in .cache/mypy."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def mypy_errors() -> list[str]:
    """mypy's error lines ("path:line: error: … [code]") over the whole package; a crash of mypy itself fails."""
    pytest.importorskip("mypy", reason="mypy is in the dev extra")
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--no-pretty"],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    errors = [line for line in result.stdout.splitlines() if re.match(r"\S+:\d+: error: ", line)]
    assert result.returncode in (0, 1) and bool(errors) == (result.returncode == 1), \
        (result.stdout + result.stderr)[-6000:]
    return errors


def test_the_package_type_checks(mypy_errors: list[str]) -> None:
    assert not mypy_errors, "\n".join(mypy_errors[:60])


# The scripts that run in the checked environment's own interpreter, which may be as old as Python 3.6.
OLD_PYTHON_SCRIPTS = ["doctor/probes/pyenv_child.py", "doctor/active/framework_child.py",
                      "doctor/active/torch_child.py"]
# What an annotation evaluated at run time may name unquoted there: `list[str]` fails before 3.9, `int | None`
# before 3.10, and typing is not imported at run time.
BUILTIN_NAMES = {"int", "str", "float", "bool", "bytes", "object", "BaseException", "Exception"}


def _evaluated_annotations(tree: ast.Module) -> list[ast.expr]:
    """The annotations Python 3.6 evaluates: every signature's, and the module's and classes' variables' (a local
    variable's never are)."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]
            found += [p.annotation for p in params if p.annotation is not None]
            found += [node.returns] if node.returns is not None else []
        elif isinstance(node, ast.Module | ast.ClassDef):
            found += [s.annotation for s in node.body if isinstance(s, ast.AnnAssign)]
    return found


@pytest.mark.parametrize("path", OLD_PYTHON_SCRIPTS)
def test_the_child_scripts_stay_readable_by_python_3_6(path: str) -> None:
    source = (REPO / path).read_text(encoding="utf-8")
    # 3.6's grammar (no walrus, no positional-only parameters); Python 3.13 parses no older than 3.7
    tree = ast.parse(source, feature_version=(3, 6) if sys.version_info < (3, 13) else (3, 7))
    unquoted = [f"line {a.lineno}: {ast.unparse(a)}" for a in _evaluated_annotations(tree)
                if not (isinstance(a, ast.Constant) and (a.value is None or isinstance(a.value, str)))
                and not (isinstance(a, ast.Name) and a.id in BUILTIN_NAMES)]
    assert not unquoted, f"{path}: quote these annotations (Python 3.6 evaluates them): {unquoted}"
    assert "from __future__ import annotations" not in source  # Python 3.7 and later
    assert len(_evaluated_annotations(tree)) > 5  # the scripts are annotated (mypy checks them)


def test_each_type_ignore_names_its_code_and_says_why() -> None:
    """mypy checks the code (ignore-without-code) and that it is still needed (warn_unused_ignores); the reason is
    for the reader: a comment after it on the same line."""
    bare = []
    for path in sorted((REPO / "doctor").rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "type: ignore" in line and not re.search(r"# type: ignore\[[\w,-]+\]  # \S", line):
                bare.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not bare, "\n".join(bare)


def _python_3_6() -> str | None:
    """A Python 3.6 interpreter where pyenv keeps one (this project's dev machines); CI has none and skips."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = sorted(root.glob("versions/3.6.*/bin/python3"))
    return str(found[-1]) if found else None


@pytest.mark.skipif(_python_3_6() is None, reason="no Python 3.6 installed (pyenv)")
@pytest.mark.parametrize(("path", "argv", "expect"), [
    ("doctor/active/framework_child.py", ["torch"], '"framework": "torch"'),
    ("doctor/active/torch_child.py", ["oom"], '"mode": "oom"'),
    ("doctor/probes/pyenv_child.py", [], '"packages": ['),
])
def test_the_child_scripts_run_under_python_3_6(path: str, argv: list[str], expect: str) -> None:
    """Defining a function evaluates its annotations: the scripts load and report under the oldest Python."""
    python = _python_3_6()
    assert python is not None
    out = subprocess.run([python, "-I", "-c", (REPO / path).read_text(encoding="utf-8"), *argv],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and expect in out.stdout and "@@GPU-DOCTOR@@" in out.stdout, out.stderr[-2000:]
