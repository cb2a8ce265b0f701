"""The bundled example hosts of `gpu-doctor demo`: valid facts v1, current, and each diagnosed as intended
when replayed through `gpu-doctor check --facts`."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from doctor.cli import main
from doctor.examples import EXAMPLES, by_name

REPO = Path(__file__).resolve().parent.parent

# name -> the problems (code: severity) a user must see; the healthy node has none at all.
INTENDED: dict[str, dict[str, str]] = {
    "r470-geforce-cu124-torch": {"framework.cuda_newer_than_driver": "fail"},
    "rtx5090-cu124-torch": {"framework.arch_unsupported": "fail"},
    "module-userspace-mismatch": {"driver.module_userspace_mismatch": "fail"},
    "shared-p100-memory-held": {"gpu.memory_in_use": "warn"},
    "healthy-8x-h100": {},
    "debian12-535-no-gpu": {"driver.not_loaded": "fail", "driver.too_old_for_cuda_runtime": "fail",
                            "driver.branch_eol": "warn"},
}


def test_every_example_is_listed_once_with_a_title_and_expectations() -> None:
    names = [e.name for e in EXAMPLES]
    assert len(names) == len(set(names)) >= 4
    assert set(names) == set(INTENDED)
    files = {p.name for p in resources.files("doctor.examples").iterdir() if p.name.endswith(".json")}
    assert files == {f"{n}.json" for n in names}
    for e in EXAMPLES:
        assert e.title and e.description and len(e.title) <= 48, e.name


@pytest.mark.parametrize("name", list(INTENDED))
def test_example_is_valid_facts_v1(name: str) -> None:
    example = by_name(name)
    assert example is not None
    schema = json.loads(resources.files("doctor").joinpath("schemas/facts-v1.json").read_text())
    jsonschema.validate(json.loads(example.text()), schema)


@pytest.mark.parametrize("name", list(INTENDED))
def test_example_through_check_facts_gives_the_intended_findings(name: str, capsys: pytest.CaptureFixture,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the bundled matrix, not one refreshed here
    path = resources.files("doctor.examples").joinpath(f"{name}.json")
    code = main(["check", "--facts", str(path), "--json"])
    report = json.loads(capsys.readouterr().out)
    problems = {(f["code"], f["severity"]) for f in report["findings"] if f["severity"] in ("fail", "warn")}
    for want in INTENDED[name].items():
        assert want in problems, (name, sorted(problems))
    if not INTENDED[name]:
        assert problems == set() and report["status"] == "ok" and code == 0
    else:
        worst = "fail" if "fail" in INTENDED[name].values() else "warn"
        assert report["status"] == worst
        assert code == (1 if worst == "fail" else 0)


def test_example_files_are_what_the_generator_writes() -> None:
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_examples.py"), "--check"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


def test_examples_take_gpus_from_the_real_nvidia_smi_fixtures() -> None:
    p100 = by_name("shared-p100-memory-held").facts()  # type: ignore[union-attr]
    assert [g.uuid for g in p100.gpus] == ["GPU-28604e81-21ec-cc48-6759-bf2648b22e16",
                                           "GPU-46915a82-3fd2-8e11-ae26-a80b607c04f3"]
    geforce = by_name("r470-geforce-cu124-torch").facts()  # type: ignore[union-attr]
    assert geforce.gpus[0].uuid == "GPU-19d6d965-2acc-f646-00f8-4c76979aabb4"
