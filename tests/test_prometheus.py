"""check/fleet --format prometheus: the report as gpu_doctor_* metrics, read back with prometheus_client's
own parser, and held to what node_exporter's textfile collector refuses (collector/textfile.go: a file
that expfmt cannot parse or that carries client timestamps is skipped; the gatherer refuses a series
collected twice and a metric name seen with two types or two help texts — one bad series drops the file)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from factories import make_facts
from prometheus_client.parser import text_string_to_metric_families

from doctor.pipeline import diagnose
from doctor.render.prometheus import render, render_fleet

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "doctor" / "examples"
UUID0 = make_facts().gpus[0].uuid


def textfile_rejects(*texts: str) -> list[str]:
    """Why node_exporter's textfile collector would refuse these files read together (empty: it reads them)."""
    why: list[str] = []
    types: dict[str, tuple[str, str]] = {}
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for text in texts:
        try:
            text.encode("utf-8")
            families = list(text_string_to_metric_families(text))
        except (ValueError, UnicodeError) as exc:
            return [f"unparsable: {exc}"]
        declared = [ln.split()[2] for ln in text.splitlines() if ln.startswith("# TYPE ")]
        why += [f"TYPE twice in one file: {n}" for n in {n for n in declared if declared.count(n) > 1}]
        for fam in families:
            if fam.name in types and types[fam.name] != (fam.type, fam.documentation):
                why.append(f"{fam.name}: {fam.type} here, {types[fam.name][0]} before (or another help text)")
            types.setdefault(fam.name, (fam.type, fam.documentation))
            for s in fam.samples:
                if s.timestamp is not None:
                    why.append(f"{s.name}: a client-side timestamp")
                key = (s.name, tuple(sorted(s.labels.items())))
                if key in seen:
                    why.append(f"{s.name}{dict(key[1])}: collected twice")
                seen.add(key)
    return why


def samples(text: str) -> dict[str, list]:
    assert textfile_rejects(text) == []
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


def test_the_textfile_rules_are_enforced_by_this_test() -> None:
    twice = "# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n"
    mixed = ("# TYPE a gauge\na 1\n", "# TYPE a counter\na_total 1\n")
    assert any("collected twice" in w for w in textfile_rejects(twice))
    assert any("before" in w for w in textfile_rejects(*mixed))
    assert any("timestamp" in w for w in textfile_rejects("# TYPE a gauge\na 1 1700000000000\n"))
    assert textfile_rejects("# TYPE a gauge\na{x=\"1\"} 1\na{x=\"2\"} 2\n") == []


def test_a_failing_node_reads_back_as_not_ready_with_the_failing_check() -> None:
    report = diagnose(make_facts(driver__kernel_module="470.82.01", driver__userspace="470.82.01",
                                 driver__cuda_driver_api="11.4"))
    found = samples(render(report))
    assert value(found, "gpu_doctor_ready") == 0
    assert value(found, "gpu_doctor_status", status="fail") == 1
    assert value(found, "gpu_doctor_status", status="ok") == 0
    check = "framework.cuda_newer_than_driver"
    states = {s.labels["status"]: s.value for s in found["gpu_doctor_check_status"] if s.labels["check"] == check}
    assert states == {"ok": 0, "info": 0, "warn": 0, "fail": 1, "skipped": 0, "not_applicable": 0, "crashed": 0}
    assert len(found["gpu_doctor_check_status"]) == 7 * len({c.id for c in report.checks})
    assert value(found, "gpu_doctor_findings", severity="fail") == sum(f.severity == "fail" for f in report.findings)
    assert value(found, "gpu_doctor_problem", code=check) == 1


def test_area_label_values_are_slugs() -> None:
    found = samples(render(diagnose(make_facts())))
    areas = {s.labels["area"] for s in found["gpu_doctor_check_status"]}
    assert "frameworks" in areas and "driver" in areas
    assert all(a.replace("-", "").isalnum() and a.islower() for a in areas), areas


def test_versions_and_gpus_are_info_series_joinable_with_dcgm_exporter() -> None:
    found = samples(render(diagnose(make_facts())))
    (info,) = found["gpu_doctor_versions_info"]
    assert info.value == 1
    assert info.labels["driver"] == make_facts().driver.kernel_module
    assert info.labels["torch"] == "2.5.1"
    assert value(found, "gpu_doctor_gpus") == len(make_facts().gpus)
    (gpu,) = found["gpu_doctor_gpu_info"]
    assert (gpu.labels["gpu"], gpu.labels["UUID"]) == ("0", UUID0)  # dcgm-exporter's gpu="0", UUID="GPU-…"


def test_a_problem_of_each_gpu_is_one_series_per_gpu_with_its_uuid() -> None:
    base = make_facts()
    second = replace(base.gpus[0], index=1, uuid="GPU-99999999-2222-3333-4444-555555555555", ecc_uncorrected=3)
    facts = replace(base, gpus=[replace(base.gpus[0], ecc_uncorrected=7), second])
    found = samples(render(diagnose(facts)))
    per_gpu = {(s.labels["gpu"], s.labels["UUID"]) for s in found["gpu_doctor_gpu_problem"]
               if s.labels["severity"] == "fail"}
    assert per_gpu == {("0", UUID0), ("1", second.uuid)}
    assert all(s.labels["code"] not in {p.labels["code"] for p in found["gpu_doctor_gpu_problem"]}
               for s in found.get("gpu_doctor_problem", []))  # a GPU's problem is not also a node series


def test_the_last_run_is_a_timestamp_in_seconds() -> None:
    found = samples(render(diagnose(make_facts()), now=1_760_000_000.5))
    assert value(found, "gpu_doctor_last_run_timestamp_seconds") == 1_760_000_000.5
    assert value(samples(render(diagnose(make_facts()))), "gpu_doctor_last_run_timestamp_seconds") > 1.7e9


def test_label_values_from_facts_are_escaped_not_interpreted() -> None:
    facts = make_facts(gpu__name='evil"} 1\ngpu_doctor_ready 1\n#')
    found = samples(render(diagnose(facts)))
    assert found["gpu_doctor_versions_info"][0].labels["gpu"].startswith('evil"} 1\ngpu_doctor_ready 1')
    assert len(found["gpu_doctor_ready"]) == 1


def test_a_lone_surrogate_in_a_label_value_is_written_escaped() -> None:
    facts = make_facts(gpu__name="A100 \udcff", gpu__uuid="GPU-\ud800")
    found = samples(render(diagnose(facts)))
    assert found["gpu_doctor_versions_info"][0].labels["gpu"] == "A100 \\udcff"
    assert found["gpu_doctor_gpu_info"][0].labels["UUID"] == "GPU-\\ud800"


def test_a_repeated_check_id_is_one_series_per_state() -> None:
    report = diagnose(make_facts())
    report = replace(report, checks=[*report.checks, replace(report.checks[0], status="fail")])
    found = samples(render(report))
    assert value(found, "gpu_doctor_check_status", check=report.checks[0].id, status="fail") == 1


def test_a_recorded_smoke_test_becomes_rates_in_base_units_per_gpu() -> None:
    from doctor.model.facts_active import ActiveEnd, ActiveFacts, ActiveGpu, DriverTest, NvmlReading

    name = "NVIDIA A100-SXM4-40GB"
    smoke = DriverTest(mode="smoke", done=True, end=ActiveEnd(event="exit", returncode=0), device_count=1,
                       gpus=[ActiveGpu(0, name=name, nvml_before=NvmlReading(name=name), device_gbs=1480.5,
                                       fp32_tflops=18.9, h2d_gbs=24.6)])
    found = samples(render(diagnose(make_facts(active=ActiveFacts(smoke=smoke)))))
    bw = {s.labels["measure"]: s for s in found["gpu_doctor_active_bandwidth_bytes_per_second"]}
    assert bw["device_gbs"].value == pytest.approx(1480.5e9)
    assert (bw["device_gbs"].labels["gpu"], bw["device_gbs"].labels["UUID"]) == ("0", UUID0)
    assert "h2d_gbs" in bw
    (fp32,) = found["gpu_doctor_active_flop_per_second"]
    assert fp32.value == pytest.approx(18.9e12)
    assert not any("unit" in s.labels for rows in found.values() for s in rows)  # the unit is in the name


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.json")))
def test_every_example_and_the_fleet_of_them_scrape_clean_together(tmp_path: Path, example: str) -> None:
    from doctor.model.facts import Facts

    facts = Facts.from_dict(json.loads((EXAMPLES / example).read_text()))
    check = render(diagnose(facts))
    for p in EXAMPLES.glob("*.json"):
        (tmp_path / p.name).write_text(p.read_text())
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / example).write_text((EXAMPLES / example).read_text())  # the same node name twice
    from doctor.commands.fleet import load_fleet

    fleet = render_fleet(load_fleet([str(tmp_path)]))
    assert textfile_rejects(check, fleet) == []  # both files in one textfile directory


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
    assert value(found, "gpu_doctor_fleet_last_run_timestamp_seconds") > 1.7e9
    assert done.returncode == 1  # a failing node, as in every fleet format


def test_a_gpu_fault_in_a_fleet_is_one_series_per_gpu_with_its_uuid(tmp_path: Path) -> None:
    snap = json.loads((EXAMPLES / "healthy-8x-h100.json").read_text())
    for i in (2, 5):
        snap["gpus"][i]["ecc_uncorrected"] = 4
    (tmp_path / "gpu-017.json").write_text(json.dumps(snap))
    found = samples(cli("fleet", str(tmp_path), "--format", "prometheus").stdout)
    faults = {(s.labels["gpu"], s.labels["UUID"]) for s in found["gpu_doctor_node_gpu_problem"]
              if s.labels["kind"] == "gpu-ecc"}
    assert faults == {(str(snap["gpus"][i]["index"]), snap["gpus"][i]["uuid"]) for i in (2, 5)}


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


@pytest.mark.parametrize("dockerfile", sorted(p.name for p in (REPO / "tests" / "data" / "dockerfiles").glob("*")
                                              if p.suffix == ".Dockerfile"))
def test_a_real_dockerfiles_report_scrapes_clean(dockerfile: str) -> None:
    from hostile import run_cli

    done = run_cli(["check", "--dockerfile", str(REPO / "tests" / "data" / "dockerfiles" / dockerfile), "--format",
                    "prometheus"])
    assert done.code in (0, 1, 4), done.err
    found = samples(done.out)
    assert len(found["gpu_doctor_ready"]) == 1 and found["gpu_doctor_last_run_timestamp_seconds"]
