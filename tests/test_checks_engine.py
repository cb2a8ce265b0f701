"""Tier 2: the engine running the registry over facts — coverage of every check, crashes as results,
and the report's JSON contract (doctor/schemas/report-v1.json)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from factories import H100, make_facts, supported_facts, torch_env

from doctor.checks import REGISTRY
from doctor.model.facts import Facts, LibRef, Package, validate
from doctor.model.findings import AREAS, Finding
from doctor.model.report import REPORT_SCHEMA
from doctor.pipeline import diagnose
from doctor.registry import Check, Context, NotApplicable, Skip

TESTS = Path(__file__).parent

# Most things wrong at once: every area has something to say, most findings carry a fix.
BROKEN = make_facts(
    driver__kernel_module="535.104.05", driver__nvml_error="Driver/library version mismatch",
    driver__nouveau_loaded=True, driver__secure_boot=True, driver__module_loaded=False,
    driver__packages=[Package("nvidia-driver-550", "550.90.07-0ubuntu1", "dpkg")],
    gpu__ecc_uncorrected=3, gpu__throttle_reasons=["hw_thermal_slowdown"], gpu__pcie_width_current=8,
    gpu__memory_used_mib=80000,
    loader__nvcc_on_path=LibRef("/usr/bin/nvcc", "11.8.89"),
    cudnn=[], python_envs=[torch_env("2.13.0+cpu", cuda=None, cpu_only=True)],
    env__CUDA_VISIBLE_DEVICES="", host__wsl=True,
)


def report_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(resources.files("doctor").joinpath("schemas/report-v1.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


# --- the registry -----------------------------------------------------------------------------


def test_registry_has_every_check_once_and_docs_checks_md_lists_them() -> None:
    """No check is lost unseen: docs/checks.md (generated, reviewed in every diff) lists exactly the registry, in
    order. A new check touches its module, its test (with its DOC_EXAMPLES) and that page — no list here."""
    ids = [c.id for c in REGISTRY]
    assert len(set(ids)) == len(ids)
    documented = re.findall(r"^## (\S+)$", (TESTS.parent / "docs" / "checks.md").read_text(encoding="utf-8"), re.M)
    assert documented == [*ids, "doctor.check_crashed"]
    assert {c.area for c in REGISTRY} == set(AREAS) - {"Requirements"}  # --require findings have no check


@pytest.mark.parametrize("check_id", [c.id for c in REGISTRY])
def test_every_registered_check_has_tier2_tests(check_id: str) -> None:
    texts = [p.read_text() for p in TESTS.glob("test_checks_*.py") if p.name != Path(__file__).name]
    assert any(f'"{check_id}"' in t for t in texts), f"no tests/test_checks_*.py mentions {check_id}"


@pytest.mark.parametrize("check_id", [c.id for c in REGISTRY])
@pytest.mark.parametrize("facts", [Facts(), BROKEN], ids=["all-unknown", "broken"])
def test_no_check_crashes_on_unknown_or_broken_facts(check_id: str, facts: Facts) -> None:
    chk = next(c for c in REGISTRY if c.id == check_id)
    (result,) = diagnose(facts, checks=[chk]).checks
    assert result.status != "crashed", result.reason
    if result.status in ("skipped", "not_applicable"):
        assert result.reason


# --- the engine -------------------------------------------------------------------------------


def test_healthy_host_is_ok_in_every_area() -> None:
    report = diagnose(supported_facts())
    assert report.status == "ok"
    assert {c.status for c in report.checks} <= {"ok", "not_applicable"}
    for area in AREAS:
        if area in ("Requirements", "Active tests"):
            continue  # only with --require / with smoke or oom results recorded in the facts
        assert any(f.area == area and f.severity == "ok" for f in report.findings), area
    assert all(f.check for f in report.findings)


def test_not_applicable_checks_on_a_healthy_host_are_the_situational_ones() -> None:
    report = diagnose(supported_facts())
    assert {c.id for c in report.checks if c.status == "not_applicable" and c.area != "Active tests"} == {
        "env.device_order", "container.no_gpu_passthrough", "wsl.driver",
        # no system cuDNN on the healthy host: the cuDNN/toolkit pairing rule has nothing to compare
        "cudnn.cuda_mismatch",
        "driver.forward_compat",  # the driver's own libcuda is in use
        "toolkit.cuda_home_invalid",  # CUDA_HOME is not set
        "framework.cuda_unavailable",  # only with --deep
        "image.min_host_driver", "image.env_blocks_gpu", "image.require_cuda", "image.forward_compat"}  # --static


def test_the_factory_hosts_r550_is_an_ended_branch_and_warns() -> None:
    (f,) = [f for f in diagnose(make_facts()).findings if f.code == "driver.branch_eol"]
    assert f.severity == "warn" and "R550" in f.title


def test_report_status_is_the_worst_finding() -> None:
    assert diagnose(BROKEN).status == "fail"
    warn_only = make_facts(gpu__throttle_reasons=["hw_slowdown"])
    assert diagnose(warn_only).status == "warn"


def test_findings_come_in_registry_order() -> None:
    report = diagnose(BROKEN)
    order = [c.id for c in REGISTRY]
    positions = [order.index(f.check) for f in report.findings]
    assert positions == sorted(positions)


def _boom(facts: Facts, ctx: Context) -> Iterator[Finding]:
    raise ZeroDivisionError("division by zero in a test check")
    yield  # pragma: no cover - makes this a generator like the real checks


def test_crashing_check_becomes_a_finding_not_a_traceback() -> None:
    crashing = Check(id="test.crashes", area="GPUs", summary="Always raises.", func=_boom)
    after = next(c for c in REGISTRY if c.id == "nouveau.active")
    report = diagnose(make_facts(), checks=[crashing, after])
    crash = [f for f in report.findings if f.code == "doctor.check_crashed"]
    assert len(crash) == 1
    f = crash[0]
    assert (f.severity, f.area, f.check) == ("warn", "GPUs", "test.crashes")
    assert f.title == "The check test.crashes crashed: ZeroDivisionError: division by zero in a test check"
    assert "gpu-doctor snapshot" in f.detail
    assert [(c.id, c.status) for c in report.checks] == [("test.crashes", "crashed"), ("nouveau.active", "ok")]
    assert report.checks[0].reason == "division by zero in a test check"
    assert report.status == "warn"


def test_crash_in_a_plain_function_is_caught_too() -> None:
    def raises_at_call(facts: Facts, ctx: Context) -> list[Finding]:
        return [facts.gpus[5]]  # type: ignore[list-item]  # IndexError on one GPU

    report = diagnose(make_facts(), checks=[Check("test.index", "Driver", "Raises IndexError.", raises_at_call)])
    assert report.checks[0].status == "crashed"
    assert report.findings[0].code == "doctor.check_crashed"
    assert "IndexError" in report.findings[0].title


@pytest.mark.parametrize(("exc", "status"), [(Skip("facts unknown"), "skipped"),
                                             (NotApplicable("not here"), "not_applicable")])
def test_skip_and_not_applicable_are_statuses_with_reasons(exc: Exception, status: str) -> None:
    def func(facts: Facts, ctx: Context) -> list[Finding]:
        raise exc

    report = diagnose(make_facts(), checks=[Check("test.signal", "Driver", "Signals.", func)])
    assert [(c.status, c.reason) for c in report.checks] == [(status, str(exc))]
    assert report.findings == []
    assert report.status == "unknown"  # nothing concluded about the driver, GPUs or frameworks: no verdict


# --- the report's JSON contract ---------------------------------------------------------------


def _facts_variants() -> list[tuple[str, Facts]]:
    mixed = make_facts(gpus=[H100, replace(H100, index=1, name="NVIDIA A100-SXM4-80GB",
                                           uuid="GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
                                           pci_bus_id="00000000:3B:00.0")])
    return [("healthy", make_facts()), ("broken", BROKEN), ("all-unknown", Facts()), ("mixed-gpus", mixed)]


@pytest.mark.parametrize(("name", "facts"), _facts_variants(), ids=[n for n, _f in _facts_variants()])
def test_report_validates_against_report_v1_schema(name: str, facts: Facts) -> None:
    report = diagnose(facts)
    data: Any = json.loads(json.dumps(report.to_dict()))  # what the CLI writes: must be plain JSON
    assert data["schema"] == REPORT_SCHEMA
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in report_validator().iter_errors(data)]
    assert errors == []
    schema = json.loads(resources.files("doctor").joinpath("schemas/report-v1.json").read_text())
    assert validate(data, schema) == []  # the built-in validator agrees with jsonschema


def test_report_schema_rejects_a_wrong_status() -> None:
    data = json.loads(json.dumps(diagnose(make_facts()).to_dict()))
    data["status"] = "mostly fine"
    assert not report_validator().is_valid(data)
