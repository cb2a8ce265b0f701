"""The wheel a user installs with `pip install .` carries every module and data file the code reads."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parent.parent


def test_every_package_directory_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "doctor").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                    str(REPO)], check=True, timeout=300, capture_output=True)
    (path,) = out.glob("nvgpu_doctor-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_has_every_tracked_module_and_data_file(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    tracked = subprocess.run(["git", "ls-files", "doctor", "compat"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    wanted = [("doctor/compat/" + rel[len("compat/"):]) if rel.startswith("compat/") else rel for rel in tracked
              if rel.endswith((".py", ".json", ".toml", ".tcss", ".ptx", ".typed"))]
    missing = sorted(w for w in wanted if w not in names)
    assert not missing, f"not in the wheel: {missing}"


def test_wheel_declares_the_console_script(wheel: zipfile.ZipFile) -> None:
    entry = next(n for n in wheel.namelist() if n.endswith("entry_points.txt"))
    assert "gpu-doctor = doctor.cli:main" in wheel.read(entry).decode()
