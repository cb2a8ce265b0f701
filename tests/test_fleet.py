"""`gpu-doctor fleet`: real reports (the engine over make_facts variants) on disk, through the CLI."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from factories import H100, make_facts, torch_env
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.cli import main
from doctor.commands.fleet import load_fleet, read_files, render_markdown
from doctor.fleet import FleetInputError, Node, aggregate, read_node, summarize
from doctor.model.facts import Facts, Toolkit
from doctor.pipeline import diagnose

GPU1 = replace(H100, index=1, uuid="GPU-22222222-2222-3333-4444-555555555555", pci_bus_id="00000000:3B:00.0")


def two_gpus(**changes: object) -> list:
    return [H100, replace(GPU1, **changes)]  # type: ignore[arg-type]


HEALTHY = make_facts(gpus=two_gpus(), host__pci_nvidia_gpus=2)
NOT_LOADED = replace(HEALTHY, driver=replace(HEALTHY.driver, module_loaded=False, kernel_module=None,
                                             nvml_error="Driver Not Loaded"), gpus=[])
PCIE_X8 = replace(HEALTHY, gpus=two_gpus(pcie_width_current=8))
ECC = replace(HEALTHY, gpus=two_gpus(ecc_uncorrected=4, retired_pages_pending=True))
OLD_DRIVER = replace(HEALTHY, driver=replace(HEALTHY.driver, userspace="535.183.01", kernel_module="535.183.01",
                                             cuda_driver_api="12.2"))
TORCH_24 = replace(HEALTHY, python_envs=[torch_env("2.4.0", "12.1")])
TOOLKIT_121 = replace(HEALTHY, toolkits=[Toolkit(root="/usr/local/cuda-12.1", version="12.1.1", source="path")])
ONE_GPU = replace(HEALTHY, gpus=[H100])


def report_text(facts: Facts) -> str:
    """What `gpu-doctor check --json` writes for these facts."""
    return json.dumps(diagnose(facts).to_dict(), indent=2) + "\n"


def write(directory: Path, nodes: dict[str, Facts | str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in nodes.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else report_text(content))
    return directory


def fleet_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["fleet", "--json", *args])
    out, err = capsys.readouterr()
    assert err == ""
    return code, json.loads(out)


def outliers(data: dict, kind: str) -> list[tuple[str | None, list[str]]]:
    return [(o["value"], o["nodes"]) for o in data["outliers"] if o["kind"] == kind]


# --- rows, groups, exit codes ---------------------------------------------------------------------


def test_healthy_fleet_is_one_row_per_node_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write(tmp_path / "reports", {f"gpu{i}.json": HEALTHY for i in (1, 2, 10)})
    code, data = fleet_json(capsys, str(d))
    assert code == 0
    assert data["schema"] == "gpu-doctor.fleet/v1" and data["status"] == "ok"
    assert [n["name"] for n in data["nodes"]] == ["gpu1", "gpu2", "gpu10"]  # natural order
    first = data["nodes"][0]
    assert (first["status"], first["driver"], first["cuda_driver_api"], first["toolkit"], first["framework"],
            first["gpu_count"], first["gpu_model"]) == (
        "ok", "550.90.07", "12.4", "12.4.1", "torch 2.5.1+cu124", 2, "NVIDIA H100 80GB HBM3")
    assert data["groups"] == [] and data["outliers"] == [] and data["errors"] == []


def test_nodes_with_the_same_problem_form_one_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write(tmp_path, {"node1.json": HEALTHY, "node2.json": NOT_LOADED, "node3.json": PCIE_X8,
                         "node4.json": NOT_LOADED, "node5.json": HEALTHY})
    code, data = fleet_json(capsys, str(d))
    assert code == 1
    assert [(g["severity"], g["codes"], g["nodes"]) for g in data["groups"]] == [
        ("fail", ["driver.not_loaded"], ["node2", "node4"]),
        ("warn", ["gpu.pcie_degraded"], ["node3"]),
    ]
    assert {n["name"]: n["status"] for n in data["nodes"]} == {
        "node1": "ok", "node2": "fail", "node3": "warn", "node4": "fail", "node5": "ok"}
    assert data["counts"] == {"nodes": 5, "ok": 2, "warn": 1, "fail": 2, "errors": 0, "outliers": 2}
    assert outliers(data, "gpu-count") == [("0", ["node2", "node4"])]  # one outlier for the two GPU-less nodes
    assert [o["title"] for o in data["outliers"] if o["kind"] == "gpu-count"] == [
        "0 GPU(s) on 2 nodes, while 3 of 5 nodes have 2 GPU(s)"]
    assert [o["nodes"] for o in data["outliers"] if o["kind"] == "gpu-pcie"] == [["node3"]]


def test_text_shows_rows_groups_and_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write(tmp_path, {"node1.json": HEALTHY, "node2.json": NOT_LOADED, "node3.json": NOT_LOADED})
    assert main(["fleet", str(d)]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[2].split() == ["NODE", "STATUS", "DRIVER", "CUDA", "API", "TOOLKIT", "FRAMEWORK", "GPUS", "PROBLEMS"]
    assert lines[3].split() == ["node1", "✓", "ok", "550.90.07", "12.4", "12.4.1", "torch", "2.5.1+cu124", "2×",
                                "H100", "80GB", "HBM3"]
    assert lines[4].split()[:3] == ["node2", "✗", "fail"] and lines[4].endswith("driver.not_loaded")
    group = out[out.index("Problems"):]
    assert "✗ 2 node(s):\n      node2, node3\n      ✗ NVIDIA driver 550.90.07 is installed but its kernel module is " \
           "not loaded" in group
    assert lines[-1] == "NOT READY: 2 of 3 node(s) failing, 0 with warnings, 1 ok"  # 2 GPUs beat the majority's 0


def test_warnings_pass_unless_strict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write(tmp_path, {"a.json": HEALTHY, "b.json": HEALTHY, "c.json": PCIE_X8})
    assert main(["fleet", str(d)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("READY, with warnings: 0 of 3 node(s) failing, 1 with")
    assert main(["fleet", "--strict", str(d)]) == 1


def test_outliers_alone_fail_only_with_strict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write(tmp_path, {"a.json": HEALTHY, "b.json": HEALTHY, "c.json": OLD_DRIVER})
    assert main(["fleet", str(d)]) == 0
    assert main(["fleet", "--strict", str(d)]) == 1
    capsys.readouterr()


# --- outliers -----------------------------------------------------------------------------------


def test_versions_that_differ_from_the_majority_are_outliers(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    d = write(tmp_path, {"n1.json": HEALTHY, "n2.json": HEALTHY, "n3.json": HEALTHY, "n4.json": OLD_DRIVER,
                         "n5.json": TORCH_24, "n6.json": TOOLKIT_121, "n7.json": ONE_GPU})
    _, data = fleet_json(capsys, str(d))
    assert outliers(data, "driver") == [("535.183.01", ["n4"])]
    assert outliers(data, "framework") == [("torch 2.4.0+cu121", ["n5"])]
    assert outliers(data, "cuda-toolkit") == [("12.1.1", ["n6"])]
    assert outliers(data, "gpu-count") == [("1", ["n7"])]
    driver = next(o for o in data["outliers"] if o["kind"] == "driver")
    assert driver["majority"] == "550.90.07"
    assert driver["title"] == "driver 535.183.01, while 6 of 7 nodes have driver 550.90.07"


def test_more_gpus_than_the_majority_is_not_an_outlier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    three = replace(HEALTHY, gpus=[*two_gpus(), replace(GPU1, index=2, uuid="GPU-3", pci_bus_id="00000000:5E:00.0")])
    d = write(tmp_path, {"a.json": HEALTHY, "b.json": HEALTHY, "c.json": three})
    _, data = fleet_json(capsys, str(d))
    assert outliers(data, "gpu-count") == []


def test_gpu_faults_name_the_node_and_the_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write(tmp_path, {"a.json": HEALTHY, "b.json": ECC, "c.json": PCIE_X8})
    code, data = fleet_json(capsys, str(d))
    assert code == 1
    faults = [(o["kind"], o["severity"], o["nodes"], o["title"]) for o in data["outliers"]]
    assert faults == [
        ("gpu-ecc", "fail", ["b"], "GPU 1 (00000000:3B:00.0): 4 uncorrected ECC error(s); page retirement pending "
                                   "until the GPU is reset"),
        ("gpu-pcie", "warn", ["c"], "GPU 1 (00000000:3B:00.0): PCIe link trained at x8 of x16"),
    ]
    main(["fleet", str(d)])
    assert "  ✗ b: GPU 1 (00000000:3B:00.0): 4 uncorrected ECC error(s)" in capsys.readouterr().out


def test_a_split_without_majority_is_one_line_naming_every_variant(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    d = write(tmp_path, {"before.json": HEALTHY, "after.json": OLD_DRIVER})
    _, data = fleet_json(capsys, str(d))
    (driver,) = [o for o in data["outliers"] if o["kind"] == "driver"]
    assert driver["nodes"] == ["after", "before"] and driver["majority"] is None
    assert "no majority" in driver["title"] and "535.183.01 on after" in driver["title"]
    assert "550.90.07 on before" in driver["title"]


def test_a_fleet_without_majority_does_not_call_every_node_an_outlier(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """7 nodes, each on its own driver: one line for the driver axis, not seven."""
    reports: dict[str, Facts | str] = {
        f"n{i}.json": replace(HEALTHY, driver=replace(HEALTHY.driver, userspace=f"5{50 + i}.90.07",
                                                      kernel_module=f"5{50 + i}.90.07")) for i in range(7)}
    d = write(tmp_path, reports)
    _, data = fleet_json(capsys, str(d))
    drivers = [o for o in data["outliers"] if o["kind"] == "driver"]
    assert len(drivers) == 1 and "7 different values over 7 nodes" in drivers[0]["title"]


# --- inputs: snapshots, names, garbage --------------------------------------------------------------


def test_facts_snapshots_are_diagnosed_like_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write(tmp_path, {"snap.json": NOT_LOADED.to_json(), "report.json": NOT_LOADED})
    _, data = fleet_json(capsys, str(d))
    rows = {n["name"]: n for n in data["nodes"]}
    assert rows["snap"]["input"] == "facts" and rows["report"]["input"] == "report"
    assert {k: v for k, v in rows["snap"].items() if k not in ("name", "file", "input")} == \
           {k: v for k, v in rows["report"].items() if k not in ("name", "file", "input")}
    assert data["groups"][0]["nodes"] == ["report", "snap"]


def test_files_and_directories_mix_and_same_names_fall_back_to_paths(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "reports", {"rack1/gpu7.json": HEALTHY, "rack2/gpu7.json": HEALTHY, "rack2/gpu8.json": HEALTHY,
                                 "notes.txt": "not a report"})
    extra = write(tmp_path / "more", {"gpu9.json": HEALTHY}) / "gpu9.json"
    _, data = fleet_json(capsys, str(tmp_path / "reports"), str(extra))
    root = tmp_path / "reports"
    assert [n["name"] for n in data["nodes"]] == [
        str(root / "rack1" / "gpu7"), str(root / "rack2" / "gpu7"), "gpu8", "gpu9"]


def test_a_host_name_recorded_in_the_facts_wins_over_the_file_name(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    named = replace(HEALTHY, env={**HEALTHY.env, "SLURMD_NODENAME": "gpu-a17"})
    d = write(tmp_path, {"report-1234.json": named})
    _, data = fleet_json(capsys, str(d))
    assert [n["name"] for n in data["nodes"]] == ["gpu-a17"]


GARBAGE = {
    "empty.json": ("", "empty file"),
    "text.json": ("gpu-doctor: error: --python /x: no such interpreter\n",
                  "not JSON (Expecting value at line 1 column 1); it starts with 'gpu-doctor: error: --python /x: "),
    "list.json": ("[1, 2]", "JSON, but not a gpu-doctor report or facts snapshot (a list)"),
    "other.json": ('{"schema": "something/v9"}', "JSON, but not a gpu-doctor report or facts snapshot "
                                                 "(schema: 'something/v9')"),
    "bad-facts.json": ('{"schema": "gpu-doctor.facts/v1", "gpus": 3}',
                       "a facts snapshot that does not match gpu-doctor.facts/v1: "),
    "no-findings.json": ('{"schema": "gpu-doctor.report/v1", "status": "ok"}',
                         "a gpu-doctor report without its findings or facts"),
    "bad-finding.json": ('{"schema": "gpu-doctor.report/v1", "status": "ok", "findings": [7], "facts": {}}',
                         "findings[0] is not a gpu-doctor finding"),
    "binary.json": ("\x00\x01\x02\xff garbage", "not JSON"),
    "deep.json": ("[" * 100_000, "not JSON"),
}


def test_garbage_files_are_listed_as_errors_not_tracebacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write(tmp_path, {"good.json": HEALTHY, **{name: text for name, (text, _) in GARBAGE.items()}})
    (d / "dangling.json").symlink_to(d / "gone.json")  # listed, but cannot be opened
    code, data = fleet_json(capsys, str(d))
    assert code == 1 and data["status"] == "fail"
    assert [n["name"] for n in data["nodes"]] == ["good"]
    errors = {Path(e["file"]).name: e["reason"] for e in data["errors"]}
    assert set(errors) == {*GARBAGE, "dangling.json"}
    for name, (_, reason) in GARBAGE.items():
        assert errors[name].startswith(reason), (name, errors[name])
    assert errors["dangling.json"] == "cannot read: No such file or directory"
    main(["fleet", str(d)])
    out = capsys.readouterr().out
    assert f"  ✗ {d / 'empty.json'}: empty file" in out
    assert out.splitlines()[-1] == "NOT READY: 0 of 1 node(s) failing, 0 with warnings, 1 ok; 10 unreadable file(s)"


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9, 0.999])
def test_a_truncated_report_is_an_error_not_a_node(cut: float) -> None:
    text = report_text(ECC)
    with pytest.raises(FleetInputError, match="not JSON"):
        read_node(text[:int(len(text) * cut)], "n", "n.json")


ECC_REPORT = json.dumps(diagnose(ECC).to_dict(), indent=2)


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=len(ECC_REPORT) - 1))
def test_every_cut_of_a_report_is_an_error(cut: int) -> None:
    """A report cut short anywhere (a killed task, a full disk) never passes for a node."""
    with pytest.raises(FleetInputError):
        read_node(ECC_REPORT[:cut], "n", "n.json")


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=len(ECC_REPORT) - 1), st.characters(codec="ascii"))
def test_one_changed_character_never_crashes_the_reader(at: int, char: str) -> None:
    try:
        node = read_node(ECC_REPORT[:at] + char + ECC_REPORT[at + 1:], "n", "n.json")
    except FleetInputError:
        return
    assert node.status in ("ok", "warn", "fail")


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)
FACT_PATHS = [("host",), ("env",), ("gpus",), ("toolkits",), ("python_envs",), ("driver", "userspace"),
              ("gpus", 0), ("gpus", 0, "ecc_uncorrected"), ("gpus", 0, "pcie_width_current"), ("gpus", 0, "name"),
              ("python_envs", 0, "packages"), ("python_envs", 0, "packages", 1), ("python_envs", 0, "packages", 1,
                                                                                   "name")]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FACT_PATHS), JSON, st.sampled_from(["severity", "code", "title", None]), JSON,
       st.booleans())
def test_any_json_in_any_field_is_a_node_or_an_error(path: tuple, value: object, finding_key: str | None,
                                                     finding_value: object, pretty: bool) -> None:
    data = diagnose(NOT_LOADED).to_dict()
    data["facts"]["gpus"] = [asdict(H100)]
    where = data["facts"]
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    if finding_key:
        data["findings"][1][finding_key] = finding_value
    try:
        node = read_node(json.dumps(data, indent=2 if pretty else None), "n", "n.json")
    except FleetInputError:
        return
    assert node.status in ("ok", "warn", "fail")
    aggregate([node, node])


def test_a_report_missing_only_its_last_brace_is_an_error() -> None:
    text = report_text(HEALTHY).rstrip()
    with pytest.raises(FleetInputError, match="not JSON"):
        read_node(text[:-1], "n", "n.json")


@pytest.mark.parametrize("facts", [HEALTHY, NOT_LOADED, PCIE_X8, ECC, OLD_DRIVER, TORCH_24, ONE_GPU],
                         ids=["healthy", "not-loaded", "pcie", "ecc", "old-driver", "torch24", "one-gpu"])
@pytest.mark.parametrize("layout", ["check --json", "compact", "sorted keys", "facts first"])
def test_the_fast_reader_agrees_with_a_full_parse(facts: Facts, layout: str) -> None:
    data = diagnose(facts).to_dict()
    expected = summarize("n", "n.json", "report", data["findings"], data["facts"], data["status"])
    text = {
        "check --json": lambda: json.dumps(data, indent=2),
        "compact": lambda: json.dumps(data, separators=(",", ":")),
        "sorted keys": lambda: json.dumps(data, sort_keys=True, indent=1),
        "facts first": lambda: json.dumps({"facts": data["facts"], **data}),
    }[layout]()
    assert read_node(text, "n", "n.json") == expected


def test_a_report_whose_status_understates_its_findings_is_read_in_full() -> None:
    data = diagnose(NOT_LOADED).to_dict()
    data["status"] = "warn"
    node = read_node(json.dumps(data, indent=2), "n", "n.json")
    assert node.status == "fail" and [p.code for p in node.problems] == ["driver.not_loaded"]


def test_findings_titles_with_quotes_and_braces_survive(tmp_path: Path) -> None:
    data = diagnose(NOT_LOADED).to_dict()
    data["findings"][1]["title"] = 'a "quoted" {"code": "x", "severity": "fail"} title'
    node = read_node(json.dumps(data, indent=2), "n", "n.json")
    assert [p.title for p in node.problems] == ['a "quoted" {"code": "x", "severity": "fail"} title']


# --- usage errors, formats, the process pool ----------------------------------------------------


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", str(tmp_path / "missing")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["fleet", str(tmp_path / "empty")]) == 2
    assert "no *.json file in this directory" in capsys.readouterr().err
    assert main(["fleet", "--jobs", "-1", str(tmp_path)]) == 2
    capsys.readouterr()


def test_markdown_is_a_table_with_groups_and_outliers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write(tmp_path, {"a.json": HEALTHY, "b.json": HEALTHY, "c.json": NOT_LOADED})
    assert main(["fleet", "--format", "markdown", str(d)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("## gpu-doctor fleet: NOT READY: 1 of 3 node(s) failing")
    assert "| node | status | driver | cuda api | toolkit | framework | gpus | problems |" in out
    assert "| c | ❌ fail | 550.90.07 | 12.4 | 12.4.1 | torch 2.5.1+cu124 | none | `driver.not_loaded` |" in out
    assert "- ❌ **1 node(s)**: c\n  - ❌ NVIDIA driver 550.90.07 is installed but its kernel module is not " \
           "loaded (`driver.not_loaded`)" in out
    assert "### Outliers" in out


def test_markdown_escapes_pipes() -> None:
    node = Node(name="a|b", file="a|b.json", input="report", status="ok", framework="torch 2.5.1+cu124")
    assert "| a\\|b | ✅ ok |" in render_markdown(aggregate([node]))


def test_worker_processes_read_the_same_as_one(tmp_path: Path) -> None:
    d = write(tmp_path, {f"n{i}.json": v for i, v in enumerate([HEALTHY, ECC, NOT_LOADED, PCIE_X8] * 3)})
    (d / "junk.json").write_text("nope")
    files = sorted(str(p) for p in d.iterdir())
    assert read_files(files, jobs=2) == read_files(files, jobs=1)
    assert load_fleet([str(d)], jobs=2) == load_fleet([str(d)], jobs=1)


def test_a_pool_that_cannot_start_falls_back_to_one_process(tmp_path: Path) -> None:
    """Under `python -` with a thread running, forkserver workers cannot re-import the main module."""
    import subprocess
    import sys

    d = write(tmp_path, {f"n{i}.json": v for i, v in enumerate([HEALTHY, ECC, NOT_LOADED])})
    program = f"""
import threading
from doctor.commands.fleet import read_files
stop = threading.Event()
threading.Thread(target=stop.wait).start()
try:
    print(sorted(n.name for n in read_files({sorted(str(p) for p in d.iterdir())!r}, jobs=2)))
finally:
    stop.set()
"""
    done = subprocess.run([sys.executable, "-"], input=program, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['n0', 'n1', 'n2']"


def test_a_split_fleet_reads_as_one_line_per_axis(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports: dict[str, Facts | str] = {
        f"n{i}.json": replace(HEALTHY, driver=replace(HEALTHY.driver, userspace=f"5{50 + i}.90.07",
                                                      kernel_module=f"5{50 + i}.90.07")) for i in range(7)}
    main(["fleet", str(write(tmp_path, reports))])
    out = capsys.readouterr().out
    driver_lines = [line for line in out.split("Outliers", 1)[1].splitlines() if "driver" in line]
    assert len(driver_lines) == 1 and "driver: no majority: 7 different values over 7 nodes" in driver_lines[0]
