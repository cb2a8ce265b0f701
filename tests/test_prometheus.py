"""check/fleet --format prometheus: the report as gpu_doctor_* metrics, read back with prometheus_client's
own parser (what node_exporter's textfile collector and Prometheus accept)."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from dataclasses import replace
from pathlib import Path

import pytest
from factories import make_facts
from prometheus_client.parser import text_string_to_metric_families

from doctor.pipeline import diagnose
from doctor.render.prometheus import active_figures, render

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "doctor" / "examples"


def samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def value(found: dict[str, list], name: str, **labels: str) -> float:
    (s,) = [s for s in found[name] if labels.items() <= s.labels.items()]
    return s.value


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120, check=False)


def test_a_failing_node_reads_back_as_not_ready_with_the_failing_check() -> None:
    report = diagnose(make_facts(driver__kernel_module="470.82.01", driver__userspace="470.82.01",
                                 driver__cuda_driver_api="11.4"))
    found = samples(render(report))
    assert value(found, "gpu_doctor_ready") == 0
    assert value(found, "gpu_doctor_status", status="fail") == 1
    assert value(found, "gpu_doctor_status", status="ok") == 0
    failing = {s.labels["check"] for s in found["gpu_doctor_check_status"] if s.labels["status"] == "fail"}
    assert "framework.cuda_newer_than_driver" in failing
    assert len(found["gpu_doctor_check_status"]) == len(report.checks)  # one series per check
    assert value(found, "gpu_doctor_findings", severity="fail") == sum(f.severity == "fail" for f in report.findings)


def test_versions_are_one_info_series() -> None:
    found = samples(render(diagnose(make_facts())))
    (info,) = found["gpu_doctor_versions_info"]
    assert info.value == 1
    assert info.labels["driver"] == make_facts().driver.kernel_module
    assert info.labels["torch"] == "2.5.1"
    assert value(found, "gpu_doctor_gpus") == len(make_facts().gpus)
    assert value(found, "gpu_doctor_last_run_timestamp_seconds") > 1.7e9


def test_label_values_from_facts_are_escaped_not_interpreted() -> None:
    facts = make_facts(gpu__name='evil"} 1\ngpu_doctor_ready 1\n#')
    found = samples(render(diagnose(facts)))
    assert found["gpu_doctor_versions_info"][0].labels["gpu"].startswith('evil"} 1\ngpu_doctor_ready 1')
    assert len(found["gpu_doctor_ready"]) == 1


def test_active_figures_are_found_by_name_wherever_the_section_keeps_them() -> None:
    active = {"smoke": {"gpus": [{"index": 0, "matmul_tflops": 612.5, "h2d_gbs": 24.1, "ok": True},
                                 {"index": 1, "matmul_tflops": 15.0, "name": "x"}]},
              "oom": {"allocated_gib": 70, "seconds": 3}}
    figures = set(active_figures(active))
    assert ("GPU 0", "matmul_tflops", "TFLOP/s", 612.5) in figures
    assert ("GPU 1", "matmul_tflops", "TFLOP/s", 15.0) in figures
    assert ("GPU 0", "h2d_gbs", "GB/s", 24.1) in figures
    assert len(figures) == 3  # flags, indices, sizes and durations are not rates
    assert active_figures(None) == []


def test_active_figures_use_the_active_sections_own_measurements(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("doctor.model.facts_active")
    fake.MEASURES = {"device_gbs": ("device memory bandwidth", "GB/s")}  # type: ignore[attr-defined]
    fake.measurements = lambda active: {"GPU 3 device_gbs": ("NVIDIA H100", 3012.5)}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "doctor.model.facts_active", fake)
    report = diagnose(make_facts())
    report = replace(report, facts=types.SimpleNamespace(**{f: getattr(report.facts, f) for f in (
        "driver", "gpus", "toolkits", "cudnn", "host", "python_envs")}, active=object()))
    found = samples(render(report))
    (s,) = found["gpu_doctor_active_value"]
    assert (s.labels, s.value) == ({"subject": "GPU 3", "figure": "device_gbs", "unit": "GB/s"}, 3012.5)


def test_check_output_writes_the_textfile_atomically(tmp_path: Path) -> None:
    target = tmp_path / "gpu_doctor.prom"
    done = cli("check", "--facts", str(EXAMPLES / "healthy-8x-h100.json"), "--format", "prometheus",
               "--output", str(target))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert value(samples(target.read_text()), "gpu_doctor_ready") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu_doctor.prom"]  # no temporary file left


def test_fleet_prometheus_has_one_series_per_node(tmp_path: Path) -> None:
    for name in ("healthy-8x-h100", "r470-geforce-cu124-torch"):
        (tmp_path / f"{name}.json").write_text(json.dumps(json.loads((EXAMPLES / f"{name}.json").read_text())))
    done = cli("fleet", str(tmp_path), "--format", "prometheus")
    found = samples(done.stdout)
    assert value(found, "gpu_doctor_node_ready", node="healthy-8x-h100") == 1
    assert value(found, "gpu_doctor_node_ready", node="r470-geforce-cu124-torch") == 0
    assert value(found, "gpu_doctor_fleet_nodes", status="fail") == 1
    info = {s.labels["node"]: s.labels for s in found["gpu_doctor_node_info"]}
    assert info["r470-geforce-cu124-torch"]["driver"].startswith("470.")
    problems = {(s.labels["node"], s.labels["code"], s.labels["severity"]) for s in found["gpu_doctor_node_problem"]}
    assert ("r470-geforce-cu124-torch", "framework.cuda_newer_than_driver", "fail") in problems
    assert not any(node == "healthy-8x-h100" and sev == "fail" for node, _c, sev in problems)
    assert done.returncode == 1  # a failing node, as in every fleet format


def test_prometheus_client_is_not_imported_by_check_in_other_formats() -> None:
    snap = str(EXAMPLES / "healthy-8x-h100.json")
    code = (f"import sys; from doctor.cli import main; main(['check', '--facts', {snap!r}, '--json']); "
            "print('prometheus_client' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          check=False)
    assert done.stderr.strip().endswith("False")


@pytest.mark.parametrize("fmt", ["prometheus", "nfd", "github"])
def test_output_into_a_missing_directory_is_a_usage_error(fmt: str) -> None:
    done = cli("check", "--facts", str(EXAMPLES / "healthy-8x-h100.json"), "--format", fmt,
               "--output", "/nonexistent-dir/out")
    assert done.returncode == 2
    assert "--output" in done.stderr and "Traceback" not in done.stderr


def test_a_report_with_too_little_evidence_is_not_ready() -> None:
    from doctor.model.facts import Facts

    report = diagnose(Facts())
    assert report.status == "unknown"
    found = samples(render(report))
    assert value(found, "gpu_doctor_ready") == 0
    assert value(found, "gpu_doctor_status", status="unknown") == 1


def test_a_recorded_smoke_test_becomes_active_rates() -> None:
    from doctor.model.facts_active import ActiveEnd, ActiveFacts, ActiveGpu, DriverTest, NvmlReading

    name = "NVIDIA A100-SXM4-40GB"
    smoke = DriverTest(mode="smoke", done=True, end=ActiveEnd(event="exit", returncode=0), device_count=1,
                       gpus=[ActiveGpu(0, name=name, nvml_before=NvmlReading(name=name), device_gbs=1480.5,
                                       fp32_tflops=18.9, h2d_gbs=24.6)])
    found = samples(render(diagnose(make_facts(active=ActiveFacts(smoke=smoke)))))
    rates = {(s.labels["subject"], s.labels["figure"]): (s.value, s.labels["unit"])
             for s in found["gpu_doctor_active_value"]}
    assert rates[("GPU 0", "device_gbs")] == (1480.5, "GB/s")
    assert rates[("GPU 0", "fp32_tflops")] == (18.9, "TFLOP/s")
    assert ("GPU 0", "h2d_gbs") in rates
