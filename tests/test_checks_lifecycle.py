"""driver.branch_eol: NVIDIA's data-center driver lifecycle (compat/cuda.toml [[driver_branch]], each row sourced)."""

from __future__ import annotations

import pytest
from conftest import run_check
from factories import make_facts

from doctor.model.facts import Gpu


def outcome(facts: object, check_id: str = "driver.branch_eol") -> tuple[str, list]:
    report = run_check(facts, check_id)
    (result,) = report.checks
    return result.status, report.findings


def facts_for(driver: str, collected: str = "2026-11-23T10:00:00+00:00", **kw: object) -> object:
    return make_facts(driver__kernel_module=driver, driver__userspace=driver, collected_at=collected, **kw)


@pytest.mark.parametrize(("driver", "severity", "words"), [
    ("535.261.03", "warn", ["R535", "June 2026", "R580"]),      # LTSB past its end of life; move to R580 (LTSB)
    ("610.43.02", "warn", ["R610", "August 2026", "R620"]),     # NFB past its date; R620 is the LTSB after it
    ("580.95.05", "ok", ["R580", "June 2028"]),
    ("595.58.03", "ok", ["R595", "March 2027"]),
])
def test_branch_lifecycle(driver: str, severity: str, words: list[str]) -> None:
    _status, (f,) = outcome(facts_for(driver))
    assert f.severity == severity, f.title
    text = f.title + " " + (f.fix.summary if f.fix else "")
    for w in words:
        assert w in text, (w, text)
    assert any(str(e.source).startswith("https://docs.nvidia.com/datacenter/") for e in f.evidence)


def test_eol_is_judged_as_of_the_snapshot_date() -> None:
    _status, (f,) = outcome(facts_for("535.261.03", collected="2026-05-01T00:00:00+00:00"))
    assert f.severity == "ok"


def test_move_to_respects_the_gpus_last_branch() -> None:
    # A Pascal GPU's last branch is R580: never suggest R595/R620 for it.
    pascal = Gpu(index=0, name="NVIDIA GeForce GTX 1080 Ti", compute_capability="6.1", source="nvml")
    _status, (f,) = outcome(facts_for("535.261.03", gpus=[pascal]))
    assert f.fix is not None and "R580" in f.fix.summary and "R620" not in f.fix.summary


def test_unknown_driver_skips_and_a_branch_newer_than_the_table_does_not_apply() -> None:
    assert outcome(make_facts(driver__kernel_module=None, driver__userspace=None))[0] == "skipped"
    assert outcome(facts_for("999.1.2"))[0] == "not_applicable"


def test_a_branch_ended_without_a_date_warns() -> None:
    # R550 is only in NVIDIA's undated "previous branches ... are end of life" sentence: still ended.
    _status, (f,) = outcome(facts_for("550.127.05"))
    assert f.severity == "warn" and "R550 reached end of life (NVIDIA lists it as past its end of life)" in f.title
    assert "R580" in f.fix.summary


def test_a_branch_missing_from_the_table_like_r470_warns() -> None:
    # R470 (the former LTSB) is no longer in the table: NVIDIA says every branch it does not list has ended.
    _status, (f,) = outcome(facts_for("470.256.02"))
    assert f.severity == "warn" and "R470" in f.title and "no longer lists it" in f.title


def test_a_jetson_driver_is_outside_the_data_center_lifecycle() -> None:
    orin = make_facts(driver__kernel_module="540.4.0", driver__userspace="540.4.0", host__arch="aarch64",
                      host__kernel="5.15.148-tegra", gpus=[])
    assert outcome(orin)[0] == "not_applicable"


def test_wsl_windows_driver_maps_through_nvidias_pairs() -> None:
    wsl = facts_for("572.83", host__wsl=True)
    wsl = type(wsl).from_dict({**wsl.to_dict(), "driver": {**wsl.to_dict()["driver"], "kernel_module": None}})
    _status, (f,) = outcome(wsl)
    assert "R570" in f.title and f.severity == "warn"  # R570 PB ended February 2026
    unknown = type(wsl).from_dict({**wsl.to_dict(), "driver": {**wsl.to_dict()["driver"], "userspace": "581.57"}})
    assert outcome(unknown)[0] == "skipped"


# The example docs/checks.md shows for each check of doctor/checks/lifecycle.py (scripts/gen_checks_doc.py reads it).
DOC_EXAMPLES = {
    "driver.branch_eol": ("driver R535 on 2026-11-23 (end of life June 2026)", make_facts(
        driver__kernel_module="535.261.03", driver__userspace="535.261.03", collected_at="2026-11-23T10:00:00+00:00")),
}
