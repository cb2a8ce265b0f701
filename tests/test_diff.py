"""`gpu-doctor diff A B`: drift between two snapshots or reports, through the CLI."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from factories import H100, make_facts, torch_env

from doctor.cli import main
from doctor.diff import Change, diff_facts
from doctor.model.facts import Cudnn, Facts, Package, Toolkit
from doctor.pipeline import diagnose

GPU1 = replace(H100, index=1, uuid="GPU-22222222-2222-3333-4444-555555555555", pci_bus_id="00000000:3B:00.0")
BEFORE = make_facts(gpus=[H100, GPU1], host__pci_nvidia_gpus=2)


def upgraded(f: Facts) -> Facts:
    """The same node after a driver upgrade from 550 to 560."""
    return replace(f, driver=replace(f.driver, userspace="560.35.03", kernel_module="560.35.03", cuda_driver_api="12.6",
                                     packages=[Package("nvidia-driver-560", "560.35.03-0ubuntu1", "dpkg")]))


def write_report(path: Path, facts: Facts) -> str:
    path.write_text(json.dumps(diagnose(facts).to_dict(), indent=2))
    return str(path)


def write_snapshot(path: Path, facts: Facts) -> str:
    path.write_text(facts.to_json())
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["diff", *args])
    out, err = capsys.readouterr()
    assert err == ""
    return code, out


def test_the_same_machine_twice_is_no_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_snapshot(tmp_path / "a.json", BEFORE)
    b = write_report(tmp_path / "b.json", replace(BEFORE, collected_at="2027-01-01T00:00:00+00:00",
                                                  gpus=[replace(H100, temperature_c=80, power_draw_w=690.0), GPU1]))
    code, out = run(capsys, a, b)
    assert code == 0
    assert out == (f"gpu-doctor diff — {a} → {b}\n\nNO DRIFT: same driver, GPUs, toolkits, libraries, packages and "
                   "environment, same findings\n")


def test_a_driver_upgrade_shows_each_changed_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_report(tmp_path / "before.json", BEFORE)
    b = write_report(tmp_path / "after.json", upgraded(BEFORE))
    code, out = run(capsys, a, b)
    assert code == 1
    assert out == f"""gpu-doctor diff — {a} → {b}

Driver
  driver (user space)        550.90.07 → 560.35.03
  driver (kernel module)     550.90.07 → 560.35.03
  CUDA driver API            12.4 → 12.6
  package nvidia-driver-550  550.90.07-0ubuntu1 → (none)
  package nvidia-driver-560  (none) → 560.35.03-0ubuntu1

DRIFT: 5 change(s), 0 new and 0 vanished finding(s)
"""


def test_new_and_vanished_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_loaded = replace(BEFORE, driver=replace(BEFORE.driver, module_loaded=False, kernel_module=None,
                                                nvml_error="Driver Not Loaded"), gpus=[])
    a = write_report(tmp_path / "a.json", not_loaded)
    b = write_report(tmp_path / "b.json", replace(BEFORE, gpus=[H100, replace(GPU1, pcie_width_current=8)]))
    code, out = run(capsys, "--json", a, b)
    data = json.loads(out)
    assert code == 1 and data["drift"] is True and data["schema"] == "gpu-doctor.diff/v1"
    assert [(p["code"], p["severity"]) for p in data["findings"]["new"]] == [("gpu.pcie_degraded", "warn")]
    assert [(p["code"], p["severity"]) for p in data["findings"]["vanished"]] == [("driver.not_loaded", "fail")]
    main(["diff", a, b])
    text = capsys.readouterr().out
    assert f"Findings (failing and warning; + only in {b}, - only in {a})\n" \
           "  + ! GPU 1 (NVIDIA H100 80GB HBM3): PCIe link runs at x8 of x16  [gpu.pcie_degraded]\n" \
           "  - ✗ NVIDIA driver 550.90.07 is installed but its kernel module is not loaded  [driver.not_loaded]" in text


def changes(a: Facts, b: Facts) -> list[tuple[str, str, str, str | None, str | None]]:
    return [(c.area, c.what, c.kind, c.before, c.after) for c in diff_facts(a, b)]


def test_two_nodes_compare_gpus_by_index() -> None:
    other = replace(BEFORE, gpus=[replace(H100, uuid="GPU-other-0"),
                                  replace(GPU1, uuid="GPU-other-1", ecc_uncorrected=4, memory_total_mib=40960)])
    assert changes(BEFORE, other) == [
        ("GPUs", "GPU 1 (00000000:3B:00.0) memory", "changed", "81559 MiB", "40960 MiB"),
        ("GPUs", "GPU 1 (00000000:3B:00.0) uncorrected ECC errors", "changed", "0", "4"),
    ]


def test_one_node_matches_gpus_by_uuid_so_a_reorder_is_no_drift() -> None:
    reordered = replace(BEFORE, gpus=[replace(GPU1, index=0), replace(H100, index=1)])
    assert changes(BEFORE, reordered) == []


def test_a_gpu_that_fell_off_the_bus() -> None:
    assert changes(BEFORE, replace(BEFORE, gpus=[H100])) == [
        ("GPUs", "GPUs visible", "changed", "2", "1"),
        ("GPUs", "GPU 1 (00000000:3B:00.0)", "removed",
         "NVIDIA H100 80GB HBM3, 81559 MiB, GPU-22222222-2222-3333-4444-555555555555", None),
    ]


def test_a_cpu_wheel_at_the_same_version_is_drift() -> None:
    cpu = replace(BEFORE, python_envs=[torch_env("2.5.1", None, cpu_only=True)])
    assert changes(BEFORE, cpu) == [
        ("Python & frameworks", "nvidia-cudnn-cu12 (/venv/bin/python)", "removed", "9.1.0.70", None),
        ("Python & frameworks", "torch (/venv/bin/python)", "changed", "2.5.1+cu124", "2.5.1+cpu"),
    ]


def test_environments_in_different_places_are_still_compared() -> None:
    moved = replace(BEFORE, python_envs=[replace(BEFORE.python_envs[0], executable="/opt/conda/bin/python")])
    assert changes(BEFORE, moved) == [
        ("Python & frameworks", "Python environment", "changed", "/venv/bin/python", "/opt/conda/bin/python")]


def test_toolkits_cudnn_and_environment_variables() -> None:
    after = replace(BEFORE, toolkits=[*BEFORE.toolkits, Toolkit("/usr/local/cuda-12.6", "12.6.2", source="path")],
                    cudnn=[Cudnn("9.3.0.75", "/venv/bin/python [nvidia-cudnn-cu12]", "pip")],
                    env={**BEFORE.env, "LD_LIBRARY_PATH": "/usr/local/cuda-11.8/lib64"})
    assert changes(BEFORE, after) == [
        ("CUDA toolkit", "toolkit at /usr/local/cuda-12.6", "added", None, "12.6.2"),
        ("cuDNN", "cuDNN (/venv/bin/python [nvidia-cudnn-cu12])", "changed", "9.1.0.70", "9.3.0.75"),
        ("Environment", "LD_LIBRARY_PATH", "added", None, "/usr/local/cuda-11.8/lib64"),
    ]


def test_unknown_is_not_absent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lost = replace(BEFORE, driver=replace(BEFORE.driver, cuda_driver_api=None))
    assert changes(BEFORE, lost) == [("Driver", "CUDA driver API", "changed", "12.4", None)]
    code, out = run(capsys, write_snapshot(tmp_path / "a.json", BEFORE), write_snapshot(tmp_path / "b.json", lost))
    assert code == 1 and "  CUDA driver API  12.4 → unknown\n" in out


def test_standard_input_is_one_side(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(BEFORE.to_json()))
    code, _ = run(capsys, "-", write_snapshot(tmp_path / "b.json", upgraded(BEFORE)))
    assert code == 1


@pytest.mark.parametrize(("content", "message"), [
    (None, "No such file or directory"),
    ("garbage", "not JSON (Expecting value at line 1 column 1)"),
    ('{"schema": "gpu-doctor.fleet/v1"}', "not a gpu-doctor report or facts snapshot (schema: 'gpu-doctor.fleet/v1')"),
    ('{"schema": "gpu-doctor.facts/v1", "gpus": 1}', "its facts do not match gpu-doctor.facts/v1"),
    ('{"schema": "gpu-doctor.report/v1", "findings": []}', "its facts do not match gpu-doctor.facts/v1"),
])
def test_a_file_that_is_neither_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 content: str | None, message: str) -> None:
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    good = write_snapshot(tmp_path / "good.json", BEFORE)
    assert main(["diff", good, str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpu-doctor: error: {bad}: ") and message in err


def test_a_report_with_broken_findings_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = diagnose(BEFORE).to_dict()
    data["findings"] = [{"code": 1}]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert main(["diff", str(bad), str(bad)]) == 2
    assert "a gpu-doctor report whose findings are not findings" in capsys.readouterr().err


def test_both_sides_on_standard_input_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "-", "-"]) == 2
    assert "only one of A and B" in capsys.readouterr().err


def test_change_records_are_json_ready() -> None:
    assert Change("Driver", "CUDA driver API", "changed", "12.4", None).__dict__ == {
        "area": "Driver", "what": "CUDA driver API", "kind": "changed", "before": "12.4", "after": None}
