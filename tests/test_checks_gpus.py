"""Tier 2: the GPU checks (doctor/checks/gpus.py) judged on facts, no I/O."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import commands, only, outcome
from factories import H100, make_facts

from doctor.checks.gpus import ACTION_TEXT, SLOWDOWNS, xid_catalog
from doctor.matrix import Matrix, bundled
from doctor.model.facts import GpuProcess, XidEvent

GPU_CHECKS = ("gpu.memory_in_use", "gpu.hardware_fault", "gpu.throttling", "gpu.pcie_degraded")
H100_1 = replace(H100, index=1, uuid="GPU-99999999-8888-7777-6666-555555555555",
                 pci_bus_id="00000000:3B:00.0")
BUS = "0000:18:00.0"


# The example docs/checks.md shows for each check of this module (scripts/gen_checks_doc.py reads it).
DOC_EXAMPLES = {
    "gpu.memory_in_use": ("another job holds the memory", make_facts(
        gpu__memory_used_mib=74000, gpu__processes=[GpuProcess(4242, "python3", 73500)])),
    "gpu.hardware_fault": ("Xid 79 in the kernel log", make_facts(
        driver__xid_events=[XidEvent(79, "0000:18:00", "GPU has fallen off the bus.")])),
    "gpu.throttling": ("a hot GPU", make_facts(gpu__throttle_reasons=["hw_thermal_slowdown"], gpu__temperature_c=91)),
    "gpu.pcie_degraded": ("a data-center GPU trained at x8 of x16", make_facts(gpu__pcie_width_current=8)),
}


def catalog_row(**match: Any) -> dict[str, Any]:
    """A row of compat/xid.toml matching all of ``match``; skips while the catalog is absent or lacks one."""
    catalog = xid_catalog(bundled())
    if not catalog:
        pytest.skip("compat/xid.toml is not there (yet)")
    row = next((r for r in catalog.values() if all(r.get(k) == v for k, v in match.items())), None)
    if row is None:
        pytest.skip(f"no Xid catalog row with {match}")
    return row


@pytest.mark.parametrize("check_id", GPU_CHECKS)
def test_gpu_checks_are_ok_on_a_healthy_h100(check_id: str) -> None:
    f = only(make_facts(), check_id)
    assert f.severity == "ok"
    assert f.title.startswith("GPU 0 (NVIDIA H100 80GB HBM3): ")


@pytest.mark.parametrize("check_id", GPU_CHECKS)
def test_gpu_checks_not_applicable_without_a_gpu_nvml_sees(check_id: str) -> None:
    pci_only = replace(H100, source="pci")
    for gpus in ([], [pci_only]):
        result, findings = outcome(make_facts(gpus=gpus), check_id)
        assert result.status == "not_applicable"
        assert findings == []


# --- gpu.memory_in_use ------------------------------------------------------------------------


def test_memory_free_title_gives_free_and_total_mib() -> None:
    f = only(make_facts(), "gpu.memory_in_use")
    assert f.title == "GPU 0 (NVIDIA H100 80GB HBM3): 81047 of 81559 MiB free"


def test_memory_in_use_names_processes_largest_first_with_mib() -> None:
    facts = make_facts(gpu__memory_used_mib=70000, gpu__processes=[
        GpuProcess(pid=1800, name="Xorg", used_mib=400),
        GpuProcess(pid=4242, name="python", used_mib=69000),
    ])
    f = only(facts, "gpu.memory_in_use")
    assert f.severity == "warn"
    assert f.title == ("GPU 0 (NVIDIA H100 80GB HBM3): 70000 of 81559 MiB (86%) already in use by "
                       "python (pid 4242, 69000 MiB), Xorg (pid 1800, 400 MiB)")
    assert commands(f) == [
        ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv"],
    ]
    assert f.fix is not None and "CUDA_VISIBLE_DEVICES" in f.fix.summary


def test_memory_in_use_by_processes_this_user_cannot_see() -> None:
    f = only(make_facts(gpu__memory_used_mib=60000, gpu__processes=[]), "gpu.memory_in_use")
    assert f.severity == "warn"
    assert "60000 of 81559 MiB" in f.title
    assert "processes this user cannot see" in f.title


def test_memory_in_use_judges_each_gpu_on_its_own() -> None:
    busy = replace(H100_1, memory_used_mib=80000, processes=[GpuProcess(7, "trainer", 79000)])
    result, findings = outcome(make_facts(gpus=[H100, busy]), "gpu.memory_in_use")
    assert result.status == "warn"
    assert [f.severity for f in findings] == ["ok", "warn"]
    assert findings[1].title.startswith("GPU 1 (NVIDIA H100 80GB HBM3): 80000 of 81559 MiB")
    assert "trainer (pid 7, 79000 MiB)" in findings[1].title


def test_memory_half_used_is_already_a_warning() -> None:
    f = only(make_facts(gpu__memory_total_mib=1000, gpu__memory_used_mib=500), "gpu.memory_in_use")
    assert f.severity == "warn"
    assert "(50%)" in f.title


def test_memory_unknown_on_every_gpu_skips_with_a_reason() -> None:
    result, findings = outcome(make_facts(gpu__memory_used_mib=None), "gpu.memory_in_use")
    assert result.status == "skipped"
    assert result.reason
    assert findings == []


# --- gpu.hardware_fault -----------------------------------------------------------------------


def test_hardware_fault_ok_says_no_ecc_errors() -> None:
    f = only(make_facts(), "gpu.hardware_fault")
    assert f.title == "GPU 0 (NVIDIA H100 80GB HBM3): no uncorrectable ECC errors or pending retirements"


@pytest.mark.parametrize(("overrides", "problem"), [
    ({"gpu__ecc_uncorrected": 3}, "3 uncorrectable ECC error(s)"),
    ({"gpu__retired_pages_pending": True}, "a retired memory page waiting for a GPU reset"),
    ({"gpu__remapped_rows_pending": True}, "a remapped memory row waiting for a GPU reset"),
])
def test_hardware_fault_memory_errors_fail_and_reset_the_gpu(overrides: dict, problem: str) -> None:
    f = only(make_facts(**overrides), "gpu.hardware_fault")
    assert f.severity == "fail"
    assert f.title == f"GPU 0 (NVIDIA H100 80GB HBM3): {problem}"
    assert commands(f) == [["nvidia-smi", "-q", "-d", "ECC,PAGE_RETIREMENT,ROW_REMAPPER", "-i", "0"],
                           ["nvidia-smi", "-r", "-i", "0"]]
    assert f.fix is not None
    assert (f.fix.steps[1].root, f.fix.steps[1].risk) == (True, "restart")


def test_hardware_fault_lists_every_problem_of_a_gpu_in_one_title() -> None:
    f = only(make_facts(gpus=[replace(H100_1, ecc_uncorrected=2, retired_pages_pending=True)]),
             "gpu.hardware_fault")
    assert f.title == ("GPU 1 (NVIDIA H100 80GB HBM3): 2 uncorrectable ECC error(s), "
                       "a retired memory page waiting for a GPU reset")
    assert ["nvidia-smi", "-r", "-i", "1"] in commands(f)


def test_uncatalogued_xid_warns_with_count_and_bus_in_title() -> None:
    events = [XidEvent(99999, BUS, "NVRM: Xid (PCI:0000:18:00): 99999, pid=1"),
              XidEvent(99999, BUS, "NVRM: Xid (PCI:0000:18:00): 99999, pid=2")]
    facts = make_facts(driver__xid_events=events, sources={"driver.xid_events": "cmd:dmesg"})
    result, findings = outcome(facts, "gpu.hardware_fault")
    xid = [f for f in findings if "Xid" in f.title]
    assert len(xid) == 1
    f = xid[0]
    # An Xid the catalog does not know is a warning to look up, never a verdict on the node (issue 11).
    assert (result.status, f.severity) == ("warn", "warn")
    assert f.title.startswith(f"Kernel log: Xid 99999 on GPU {BUS} (not in the reviewed Xid catalog), 2×")
    assert f.title.endswith("look it up")
    assert "not in gpu-doctor's reviewed catalog" in f.detail
    assert f.evidence[0].value == f"Xid 99999 on {BUS} ×2"
    assert f.evidence[0].source == "cmd:dmesg"


def _hardware_fault(facts: Any, matrix: Matrix | None) -> list:
    from doctor.checks import by_id
    from doctor.pipeline import diagnose
    from doctor.registry import Context

    return diagnose(facts, checks=[by_id("gpu.hardware_fault")], ctx=Context(matrix=matrix),  # type: ignore[list-item]
                    plan_fixes=False).findings


def test_the_xid_catalog_is_the_one_in_the_matrix_passed_in() -> None:
    """The check reads no bundled file: the catalog is the matrix's it was given (issue 19)."""
    row = {"xid": 99990, "mnemonic": "TEST_FAULT", "description": "a fault of this test's own catalog",
           "class": "hardware", "action": "drain_and_rma", "source": "https://example.invalid/xid"}
    mine = Matrix(data={**bundled().data, "xid": {"xid": [row]}})
    facts = make_facts(driver__xid_events=[XidEvent(99990, BUS)])
    (f,) = [f for f in _hardware_fault(facts, mine) if "Xid" in f.title]
    assert f.severity == "fail" and "a fault of this test's own catalog" in f.title
    assert f.fix is not None and "RMA" in f.fix.summary
    (f,) = [f for f in _hardware_fault(facts, bundled()) if "Xid" in f.title]
    assert f.severity == "warn" and "look it up" in f.title  # not in the shipped catalog


def test_without_a_matrix_an_xid_is_one_to_look_up_not_a_verdict() -> None:
    facts = make_facts(driver__xid_events=[XidEvent(79, BUS)])
    (f,) = [f for f in _hardware_fault(facts, None) if "Xid" in f.title]
    assert f.severity == "warn" and "look it up" in f.title


def test_xids_on_two_gpus_are_two_findings() -> None:
    events = [XidEvent(99998, BUS), XidEvent(99998, "0000:3b:00.0")]
    _, findings = outcome(make_facts(driver__xid_events=events), "gpu.hardware_fault")
    titles = [f.title for f in findings if "Xid" in f.title]
    assert len(titles) == 2
    assert any(BUS in t for t in titles) and any("0000:3b:00.0" in t for t in titles)


def test_xid_without_bus_id_shows_a_question_mark() -> None:
    _, findings = outcome(make_facts(driver__xid_events=[XidEvent(99997)]), "gpu.hardware_fault")
    assert any("Xid 99997 on GPU ?" in f.title for f in findings)


def test_xid_is_reported_when_the_gpu_fell_off_the_bus() -> None:
    facts = make_facts(gpus=[], driver__xid_events=[XidEvent(79, BUS)])
    result, findings = outcome(facts, "gpu.hardware_fault")
    assert result.status == "fail"
    assert len(findings) == 1
    assert findings[0].title.startswith(f"Kernel log: Xid 79 on GPU {BUS} (")


def test_hardware_fault_not_applicable_without_gpu_or_xid() -> None:
    result, _ = outcome(make_facts(gpus=[]), "gpu.hardware_fault")
    assert result.status == "not_applicable"
    assert result.reason and "Xid" in result.reason


@pytest.mark.parametrize(("klass", "severity"), [
    ("application", "warn"), ("info", "warn"), ("driver", "fail"), ("hardware", "fail"),
])
def test_catalogued_xid_severity_follows_its_class(klass: str, severity: str) -> None:
    row = catalog_row(**{"class": klass})
    f = only(make_facts(gpus=[], driver__xid_events=[XidEvent(row["xid"], BUS)]), "gpu.hardware_fault")
    assert f.severity == severity
    kind = {"application": "an application fault", "info": "informational"}.get(klass, f"a {klass} fault")
    assert f.title == f"Kernel log: Xid {row['xid']} on GPU {BUS} ({row['description']}), 1×: {kind}"
    assert f"classes this one as {kind}" in f.detail
    assert any(e.fact == "compat/xid.toml" and e.source == row["source"] for e in f.evidence)


def test_uncatalogued_xid_fix_keeps_its_words() -> None:
    f = only(make_facts(gpus=[], driver__xid_events=[XidEvent(99999, BUS)]), "gpu.hardware_fault")
    assert f.fix is not None
    assert f.fix.summary == "See NVIDIA's Xid catalog for this code."


def test_catalogued_xid_fix_quotes_the_reset_command_exactly() -> None:
    row = catalog_row(action="reset_gpu")
    f = only(make_facts(gpus=[], driver__xid_events=[XidEvent(row["xid"], BUS)]), "gpu.hardware_fault")
    assert f.fix is not None
    assert "`nvidia-smi -r -i N`" in f.fix.summary
    assert f.fix.summary == ACTION_TEXT["reset_gpu"][0].upper() + ACTION_TEXT["reset_gpu"][1:] + "."


def test_hardware_fault_with_unknown_memory_error_state_skips() -> None:
    facts = make_facts(gpu__ecc_uncorrected=None, gpu__retired_pages_pending=None,
                       gpu__remapped_rows_pending=None)
    result, findings = outcome(facts, "gpu.hardware_fault")
    assert result.status == "skipped"
    assert result.reason
    assert findings == []


# --- gpu.throttling ---------------------------------------------------------------------------


@pytest.mark.parametrize("reason", sorted(SLOWDOWNS))
def test_throttling_slowdown_warns_with_its_cause(reason: str) -> None:
    f = only(make_facts(gpu__throttle_reasons=[reason]), "gpu.throttling")
    assert f.severity == "warn"
    assert f.title == f"GPU 0 (NVIDIA H100 80GB HBM3) is throttled: {SLOWDOWNS[reason]}"
    assert "34 °C" in f.detail and "71.5 W" in f.detail
    assert commands(f) == [["nvidia-smi", "-q", "-d", "PERFORMANCE,TEMPERATURE,POWER", "-i", "0"]]


def test_hw_thermal_slowdown_says_the_gpu_is_too_hot() -> None:
    f = only(make_facts(gpu__throttle_reasons=["hw_thermal_slowdown"], gpu__temperature_c=92),
             "gpu.throttling")
    assert f.severity == "warn"
    assert "too hot" in f.title
    assert "92 °C" in f.detail


@pytest.mark.parametrize("reasons", [["sw_power_cap"], ["gpu_idle"], ["sw_power_cap", "gpu_idle"], []])
def test_power_cap_or_idle_is_not_throttling(reasons: list[str]) -> None:
    f = only(make_facts(gpu__throttle_reasons=reasons), "gpu.throttling")
    assert f.severity == "ok"
    assert f.title == "GPU 0 (NVIDIA H100 80GB HBM3): not throttled"


def test_throttling_with_several_causes_lists_them_all() -> None:
    f = only(make_facts(gpu__throttle_reasons=["sw_power_cap", "hw_slowdown", "hw_power_brake_slowdown"]),
             "gpu.throttling")
    assert f.title.endswith(f"{SLOWDOWNS['hw_slowdown']}; {SLOWDOWNS['hw_power_brake_slowdown']}")


def test_throttling_with_unknown_temperature_and_power_shows_question_marks() -> None:
    facts = make_facts(gpu__throttle_reasons=["hw_slowdown"], gpu__temperature_c=None, gpu__power_draw_w=None)
    f = only(facts, "gpu.throttling")
    assert "At ? °C and ? W" in f.detail


# --- gpu.pcie_degraded ------------------------------------------------------------------------


def test_pcie_x8_of_x16_warns() -> None:
    f = only(make_facts(gpu__pcie_width_current=8), "gpu.pcie_degraded")
    assert f.severity == "warn"
    assert f.title == "GPU 0 (NVIDIA H100 80GB HBM3): PCIe link runs at x8 of x16"
    assert f.fix is not None and "Reseat" in f.fix.summary


def test_pcie_low_generation_at_idle_with_full_width_is_ok() -> None:
    f = only(make_facts(gpu__pcie_gen_current=1, gpu__pcie_gen_max=4), "gpu.pcie_degraded")
    assert f.severity == "ok"
    assert f.title == "GPU 0 (NVIDIA H100 80GB HBM3): PCIe x16, gen 1 (max 4)"


def test_pcie_unknown_generation_shows_question_marks() -> None:
    f = only(make_facts(gpu__pcie_gen_current=None, gpu__pcie_gen_max=None), "gpu.pcie_degraded")
    assert f.title.endswith("PCIe x16, gen ? (max ?)")


def test_pcie_unknown_width_skips_with_a_reason() -> None:
    result, findings = outcome(make_facts(gpu__pcie_width_current=None, gpu__pcie_width_max=None),
                               "gpu.pcie_degraded")
    assert result.status == "skipped"
    assert result.reason
    assert findings == []


# The platform decides whether x8 is a fault (issue 11): real nvidia-smi files from telegraf's test data
# show consumer boards at x8 of x16; a data-center GPU below its slot, or x1/x4 anywhere, is the finding.


@pytest.mark.parametrize("name", ["NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 4060 Laptop GPU",
                                  "NVIDIA RTX A5000", "Tesla T4"])
def test_pcie_x8_is_normal_on_consumer_laptop_workstation_and_t4(name: str) -> None:
    f = only(make_facts(gpu__name=name, gpu__pcie_width_current=8), "gpu.pcie_degraded")
    assert f.severity == "ok"
    assert "x8 of x16" in f.title and "normal for this platform" in f.title


@pytest.mark.parametrize("width", [1, 4])
def test_pcie_x1_or_x4_warns_even_on_a_consumer_gpu(width: int) -> None:
    f = only(make_facts(gpu__name="NVIDIA GeForce RTX 3090", gpu__pcie_width_current=width), "gpu.pcie_degraded")
    assert f.severity == "warn"
    assert f"x{width} of x16" in f.title


# --- NVLink5 Xids 144-150 and the kernel line's own "Nonfatal" (issue 11) -----------------------------

XID_DATA = Path(__file__).parent / "data" / "xid"


@pytest.mark.parametrize("xid", range(144, 151))
def test_nvlink5_xids_are_in_the_catalog_with_nvidias_bucket(xid: int) -> None:
    row = xid_catalog(bundled())[xid]
    assert row["mnemonic"].startswith("NVLINK_") and row["nvidia_action"] == "WORKFLOW_NVLINK5_ERR"
    assert row["source"] == "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"


def test_nonfatal_nvlink_line_warns_and_fatal_one_fails() -> None:
    from doctor.parsers import parse_xid_lines

    events = [XidEvent(e["xid"], e["pci_bus_id"], e["message"])
              for e in parse_xid_lines((XID_DATA / "gpud-nvlink5-xid144-nonfatal-xid149-fatal.txt").read_text())]
    assert [e.xid for e in events] == [144, 149]
    findings = [f for f in outcome(make_facts(gpus=[], driver__xid_events=events), "gpu.hardware_fault")[1]]
    by_xid = {int(f.title.split("Xid ")[1].split()[0]): f for f in findings}
    assert by_xid[144].severity == "warn" and "non-fatal" in by_xid[144].title
    assert by_xid[149].severity == "fail" and "NETIR" in by_xid[149].title


def test_a_nonfatal_line_never_fails_even_for_a_hardware_xid() -> None:
    row = catalog_row(**{"class": "hardware"})
    event = XidEvent(row["xid"], BUS, "SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008)")
    f = only(make_facts(gpus=[], driver__xid_events=[event]), "gpu.hardware_fault")
    assert f.severity == "warn"
