"""The facts snapshot contract: the shipped schemas, loading, validation, round trips."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from factories import make_facts
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.cli import main
from doctor.model.facts import FACTS_SCHEMA, Facts, FactsError, facts_schema, load_facts, validate
from doctor.pipeline import diagnose

REPO = Path(__file__).resolve().parent.parent
SCHEMAS = REPO / "doctor" / "schemas"


def test_shipped_schemas_are_generated_from_the_dataclasses() -> None:
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_schema.py"), "--check"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("name", ["facts-v1.json", "report-v1.json"])
def test_shipped_schema_is_valid_json_schema(name: str) -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads((SCHEMAS / name).read_text()))


def test_healthy_facts_round_trip_through_json() -> None:
    facts = make_facts()
    again = load_facts(facts.to_json())
    assert again == facts
    jsonschema.validate(facts.to_dict(), facts_schema())


def test_report_validates_against_report_schema() -> None:
    report = diagnose(make_facts(driver__kernel_module="535.104.05", env__CUDA_VISIBLE_DEVICES=""))
    schema = json.loads((SCHEMAS / "report-v1.json").read_text())
    jsonschema.validate(report.to_dict(), schema)
    assert report.to_dict()["status"] == "fail"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not JSON"),
        ("[1, 2]", "a facts snapshot is a JSON object"),
        ('{"schema": "gpu-doctor.facts/v2"}', "schema is 'gpu-doctor.facts/v2'"),
        ('{"schema": "gpu-doctor.report/v1", "status": "ok"}', "expected 'gpu-doctor.facts/v1'"),
        ('{"schema": "gpu-doctor.facts/v1", "toolkits": [{"version": "12.4"}]}', "missing 'root'"),
        ("[" * 100000, "not JSON"),
    ],
)
def test_bad_snapshots_are_rejected_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(FactsError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_facts(text)


def test_wrong_type_deep_inside_is_named_by_its_path() -> None:
    data = make_facts().to_dict()
    data["gpus"][0]["memory_total_mib"] = "eighty"
    assert validate(data, facts_schema()) == ["$.gpus[0].memory_total_mib: expected integer or null, got str"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, facts_schema())


def test_our_validator_agrees_with_jsonschema_on_mutations() -> None:
    """Our small validator and the reference implementation accept and reject the same snapshots."""
    base = make_facts().to_dict()
    mutations = [
        ("driver", "kernel_module", 535), ("driver", "secure_boot", "yes"), ("host", "wsl", None),
        ("host", "arch", ["x86_64"]), ("loader", "libcuda", {"path": "/x"}), ("loader", "libcuda", None),
    ]
    for section, key, value in mutations:
        data = json.loads(json.dumps(base))
        data[section][key] = value
        ours = not validate(data, facts_schema())
        theirs = jsonschema.Draft202012Validator(facts_schema()).is_valid(data)
        assert ours == theirs, (section, key, value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), json_values.map(json.dumps)))
def test_loading_any_text_raises_only_facts_error(text: str) -> None:
    with contextlib.suppress(FactsError):
        load_facts(text)


@settings(max_examples=200, deadline=None)
@given(section=st.sampled_from(["host", "driver", "loader", "env"]), value=json_values)
def test_any_value_in_a_valid_snapshot_loads_or_is_rejected_cleanly(section: str, value: object) -> None:
    data = make_facts().to_dict()
    data[section] = value if not isinstance(data[section], dict) or not isinstance(value, dict) else \
        {**data[section], **value}
    try:
        facts = Facts.from_dict(data)
    except FactsError:
        return
    diagnose(facts)  # whatever loads must also diagnose without raising


def test_cli_rejects_a_non_snapshot_with_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "report.json"
    bad.write_text(json.dumps({"schema": "gpu-doctor.report/v1"}))
    assert main(["check", "--facts", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a gpu-doctor facts snapshot" in err and FACTS_SCHEMA in err


def test_cli_missing_facts_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["check", "--facts", str(tmp_path / "nope.json")]) == 2
    assert "No such file or directory" in capsys.readouterr().err


def test_cli_unknown_check_id_is_exit_2(capsys: pytest.CaptureFixture) -> None:
    assert main(["check", "--facts", "-", "driver.nonsense"]) == 2
    assert "unknown command or check id 'driver.nonsense'" in capsys.readouterr().err


def test_cli_runs_only_the_named_checks(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    snap = tmp_path / "facts.json"
    snap.write_text(make_facts(env__CUDA_VISIBLE_DEVICES="").to_json())
    assert main(["check", "--facts", str(snap), "--json", "env.cuda_visible_devices"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert {f["code"] for f in report["findings"]} == {"env.cuda_visible_devices"}


def test_strict_turns_warnings_into_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    snap = tmp_path / "facts.json"
    snap.write_text(make_facts(gpu__throttle_reasons=["hw_thermal_slowdown"]).to_json())
    assert main(["check", "--facts", str(snap)]) == 0
    assert main(["check", "--facts", str(snap), "--strict"]) == 1
    assert "! GPU 0 (NVIDIA H100 80GB HBM3) is throttled" in capsys.readouterr().out


def test_list_checks_names_every_registered_check(capsys: pytest.CaptureFixture) -> None:
    from doctor.checks import REGISTRY

    assert main(["check", "--list-checks"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines() if not line.startswith(" ")] == [c.id for c in REGISTRY]
    assert len(REGISTRY) >= 20
    assert max(len(line) for line in out.splitlines()) <= 100  # wrapped, not 600-character lines
    assert "gpu.cuda_error" in out  # the codes an error catalog maps to are listed (read on first use)


def test_text_report_has_no_colour_when_not_a_terminal(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    snap = tmp_path / "facts.json"
    snap.write_text(make_facts(driver__nvml_error="Driver/library version mismatch").to_json())
    main(["check", "--facts", str(snap)])
    out = capsys.readouterr().out
    assert "\x1b[" not in out
    assert out.splitlines()[-1].startswith("NOT READY: 1 failure(s)")


def test_version_and_help_are_instant_and_import_nothing_heavy() -> None:
    code = "import sys\nfrom doctor.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n" \
           "print([m for m in ('textual','requests','pynvml','doctor.probes','doctor.checks') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


HISTORY = Path(__file__).resolve().parent / "data" / "facts-v1-history"


@pytest.mark.parametrize("path", sorted(HISTORY.glob("*.json")), ids=lambda p: p.name)
def test_v1_snapshot_from_an_earlier_release_loads_with_later_fields_unknown(path: Path) -> None:
    data = json.loads(path.read_text())
    assert data["gpus"] == [] or "utilization_pct" not in data["gpus"][0]  # written before that field existed
    facts = load_facts(path.read_text())
    assert all(g.utilization_pct is None for g in facts.gpus)
    report = diagnose(facts)
    assert report.findings, "an old snapshot is judged like a new one"


@pytest.mark.parametrize("command", [["check", "--facts"], ["fix", "--facts"]])
def test_cli_reads_an_old_v1_snapshot(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    old = HISTORY / "a0c2269-r470-geforce-cu124-torch.json"
    code = main([*command, str(old)])
    out = capsys.readouterr()
    assert code in (0, 1), out.err
    assert "schema" not in out.err


def test_diff_reads_two_old_v1_snapshots(capsys: pytest.CaptureFixture[str]) -> None:
    a, b = HISTORY / "a0c2269-healthy-8x-h100.json", HISTORY / "a0c2269-r470-geforce-cu124-torch.json"
    code = main(["diff", str(a), str(b)])
    out = capsys.readouterr()
    assert code in (0, 1), out.err
    assert out.out.strip()
