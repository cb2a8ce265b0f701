"""The matrix data itself: every row sourced, versions that parse, tables that agree with each other."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import tomllib

from doctor.matrix import FILES, bundled, vtuple

COMPAT = Path(__file__).resolve().parent.parent / "compat"
TABLES: dict[str, list[str]] = {
    "cuda": ["toolkit", "minor_version_compat", "forward_compat", "sm_support", "host_compiler"],
    "gpus": ["architecture", "gpu"],
    "cudnn": ["cudnn"],
    "pytorch": ["torch"],
    "tensorflow": ["tensorflow"],
    "jax": ["jax"],
    "cupy": ["cupy"],
    "xid": ["xid"],
    "errors": ["signature"],
    "images": ["tag_scheme", "ngc_pytorch", "base_env"],
}


def load(name: str) -> dict[str, Any]:
    return tomllib.loads((COMPAT / f"{name}.toml").read_text())


def rows(name: str) -> list[tuple[str, dict[str, Any]]]:
    data = load(name)
    out = []
    for table in TABLES[name]:
        for row in data.get(table, []):
            out.append((table, row))
            out += [(f"{table}.variant", v) for v in row.get("variant", [])]
    for key, value in data.items():
        if isinstance(value, dict):
            out.append((key, value))
    return out


@pytest.mark.parametrize("name", FILES)
def test_every_file_is_present_reviewed_and_loads(name: str) -> None:
    data = load(name)
    assert data.get("schema") == 1
    assert all(data.get(t) for t in TABLES[name]), f"{name}.toml lacks one of {TABLES[name]}"
    assert not bundled().problems


@pytest.mark.parametrize("name", FILES)
def test_every_row_has_a_source_url(name: str) -> None:
    for table, row in rows(name):
        if table.endswith(".variant") and "source" not in row:
            continue  # a variant may rely on its release row's source
        assert str(row.get("source", "")).startswith("https://"), (name, table, row)


VERSION_KEYS = ("version", "linux_min_driver", "windows_min_driver", "cuda", "last", "first_driver", "cudnn",
                "gcc_max", "default_cuda", "compute_capability", "min_cudnn", "min_driver", "nccl")


@pytest.mark.parametrize("name", FILES)
def test_versions_parse(name: str) -> None:
    for table, row in rows(name):
        for key in VERSION_KEYS:
            value = row.get(key)
            if isinstance(value, str) and value:
                assert vtuple(value), (name, table, key, value)


def test_no_toolkit_needs_a_lower_driver_than_its_predecessor() -> None:
    toolkit = sorted((r for r in load("cuda")["toolkit"] if r.get("linux_min_driver")),
                     key=lambda r: vtuple(r["version"]))
    for older, newer in itertools.pairwise(toolkit):
        assert vtuple(newer["linux_min_driver"]) >= vtuple(older["linux_min_driver"]), (older, newer)


def test_cuda_toolkit_table_covers_10_0_to_13() -> None:
    versions = {tuple(vtuple(r["version"])[:2]) for r in load("cuda")["toolkit"]}
    for want in [(10, 0), (10, 2), (11, 0), (11, 8), (12, 0), (12, 4), (12, 8), (12, 9), (13, 0)]:
        assert want in versions


def test_gpus_agree_with_their_architectures() -> None:
    data = load("gpus")
    archs = {a["name"]: a for a in data["architecture"]}
    for gpu in bundled().gpu_rows:
        arch = archs[gpu["architecture"]]
        assert gpu["compute_capability"] in arch["compute_capabilities"], gpu["name"]
        assert gpu["segment"] in ("datacenter", "workstation", "consumer", "embedded"), gpu["name"]
    assert len(data["gpu"]) >= 60


def test_gpu_names_are_unique() -> None:
    seen: set[str] = set()
    for gpu in bundled().gpu_rows:
        for name in [gpu["name"], *gpu.get("aliases", [])]:
            assert name.lower() not in seen, name
            seen.add(name.lower())


def test_each_framework_variants_cuda_exists_in_the_toolkit_table() -> None:
    toolkit = {tuple(vtuple(r["version"])[:2]) for r in load("cuda")["toolkit"]}
    for row in load("pytorch")["torch"]:
        for var in row.get("variant", []):
            assert tuple(vtuple(var["cuda"])[:2]) in toolkit, (row["version"], var["cuda"])
    for row in load("tensorflow")["tensorflow"]:
        if row.get("cuda"):
            assert tuple(vtuple(row["cuda"])[:2]) in toolkit, (row["version"], row["cuda"])


def test_torch_arch_lists_name_real_compute_capabilities() -> None:
    ccs = {cc for a in load("gpus")["architecture"] for cc in a["compute_capabilities"]}
    sm = {s for r in load("cuda")["sm_support"] for s in r["sm"]}
    for row in load("pytorch")["torch"]:
        for var in row.get("variant", []):
            for cc in var.get("arch_list", []):
                assert cc in ccs | sm, (row["version"], var["cuda"], cc)


def test_forward_compat_policy_excludes_geforce() -> None:
    policy = load("cuda")["forward_compat_policy"]
    assert "consumer" not in policy["segments"]
    assert "datacenter" in policy["segments"]


def test_compiled_matrix_copy_is_current() -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parent.parent / "scripts" / "compile_matrix.py"
    result = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_an_edited_toml_file_is_never_shadowed_by_the_compiled_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    from doctor import matrix

    real = matrix._sha256

    def changed(data: bytes) -> str:
        return real(data + b"edited")

    monkeypatch.setattr(matrix, "_sha256", changed)
    matrix.bundled.cache_clear()
    try:
        fresh = matrix.bundled()
        assert fresh.data["cuda"]["toolkit"] == load("cuda")["toolkit"]  # parsed from TOML, not the copy
    finally:
        matrix.bundled.cache_clear()


# --- issue 11: driver branches of CUDA 13.x, bare branch numbers, the data's age -----------------------


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    from doctor import cli

    assert cli.main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(("driver", "newest"), [
    ("615.71.09", "13.4.2"), ("610.10", "13.3.1"), ("595.58.03", "13.2.1"), ("580.95.05", "13.0.2"),
])
def test_13x_drivers_answer_the_cuda_of_their_branch(driver: str, newest: str) -> None:
    # NVIDIA's 13.4 Update 1 notes pair 13.3 with R610 and 13.4 with R615 (branch only, no per-release minimum).
    row = bundled().newest_cuda_for_driver(driver)
    assert row is not None and row["version"] == newest


def test_matrix_driver_615_no_longer_answers_13_2(capsys: pytest.CaptureFixture[str]) -> None:
    out = _cli(["matrix", "driver", "615.71.09"], capsys)
    assert "newest CUDA it runs natively: 13.4.2" in out and "needs ≥ R615" in out


@pytest.mark.parametrize(("branch", "cuda"), [("535", "12.2"), ("470", "11.4"), ("580", "13.0")])
def test_a_bare_branch_means_its_newest_release(branch: str, cuda: str, capsys: pytest.CaptureFixture[str]) -> None:
    row = bundled().newest_cuda_for_driver(branch)
    assert row is not None and row["version"].startswith(cuda + ".")
    out = _cli(["matrix", "driver", branch], capsys)
    assert out.startswith(f"Driver branch R{branch} (its newest release)")
    assert f"newest CUDA it runs natively: {cuda}." in out


def test_bare_branch_runs_its_own_cuda_natively() -> None:
    from doctor.matrix import driver_runs_cuda

    m = bundled()
    assert driver_runs_cuda(m, "535", "12.2").rule == "native"
    assert driver_runs_cuda(m, "470", "11.4").rule == "native"
    assert not driver_runs_cuda(m, "470", "12.4").ok or driver_runs_cuda(m, "470", "12.4").rule != "native"
    assert driver_runs_cuda(m, "610.43.02", "13.3").rule == "native"
    assert driver_runs_cuda(m, "595.58.03", "13.3").rule == "minor-version"


def test_matrix_states_its_review_date_and_warns_when_old() -> None:
    import datetime as dt

    from doctor.matrix import Matrix

    m = bundled()
    assert m.oldest_review and m.reviewed and m.oldest_review <= m.reviewed
    assert m.staleness(dt.date.fromisoformat(m.oldest_review) + dt.timedelta(days=90)) is None
    old = Matrix(data={"cuda": {"reviewed": "2026-01-02"}, "gpus": {"reviewed": "2026-11-22"}})
    warning = old.staleness(dt.date(2026, 11, 23))
    assert warning and "2026-01-02" in warning and "325 days ago" in warning


def test_matrix_command_shows_the_review_date(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    out = _cli(["matrix", "cuda", "12.4"], capsys)
    assert f"reviewed {bundled().reviewed}" in out.splitlines()[0]
    assert f"data reviewed: {bundled().oldest_review} (oldest file)" in out
    data = json.loads(_cli(["matrix", "cuda", "12.4", "--json"], capsys))
    assert data["reviewed"] == bundled().oldest_review and "stale_warning" in data


@pytest.mark.parametrize(("typed", "name", "cc"), [
    ("RTX 5070 Ti", "NVIDIA GeForce RTX 5070 Ti", "12.0"),
    ("NVIDIA GeForce RTX 5070 Ti", "NVIDIA GeForce RTX 5070 Ti", "12.0"),
    ("RTX 5090 D", "NVIDIA GeForce RTX 5090 D", "12.0"),
    ("NVIDIA GeForce RTX 5090 D", "NVIDIA GeForce RTX 5090 D", "12.0"),
    ("Jetson Nano", "NVIDIA Jetson Nano", "5.3"),
    ("Jetson Orin Nano", "Orin (nvgpu)", "8.7"),
    ("Jetson AGX Xavier", "NVIDIA Jetson AGX Xavier", "7.2"),
    ("Jetson TX2", "NVIDIA Jetson TX2", "6.2"),
    ("DGX Spark", "NVIDIA GB10", "12.1"),
    ("RTX PRO 4000 Blackwell", "NVIDIA RTX PRO 4000 Blackwell", "12.0"),
    ("RTX 5050", "NVIDIA GeForce RTX 5050", "12.0"),
    ("A100", "NVIDIA A100-SXM4-80GB", "8.0"),
    ("NVIDIA GeForce RTX 4060 Laptop GPU", "NVIDIA GeForce RTX 4060", "8.9"),
])
def test_gpu_names_as_users_type_them(typed: str, name: str, cc: str) -> None:
    row = bundled().gpu(typed)
    assert row is not None and (row["name"], row["compute_capability"]) == (name, cc)


@pytest.mark.parametrize("typed", ["GeForce RTX 5080 SUPER", "RTX 4090 D", "Jetson", "RTX"])
def test_a_name_that_is_not_a_known_gpu_matches_nothing(typed: str) -> None:
    assert bundled().gpu(typed) is None


# --- issue 22: every GPU on NVIDIA's CUDA GPU pages, in the spellings NVML prints -------------------------------

NVIDIA_LISTS = Path(__file__).resolve().parent / "data" / "nvidia-cuda-gpus"


def _nvidia_list() -> list[tuple[str, str, str]]:
    out = []
    for page in ("cuda-gpus.tsv", "cuda-legacy-gpus.tsv"):
        for line in (NVIDIA_LISTS / page).read_text().splitlines():
            if line and not line.startswith("#"):
                cc, name = line.split("\t")
                out.append((page, cc, name))
    return out


def test_every_gpu_on_nvidias_cuda_gpu_pages_resolves_to_its_compute_capability() -> None:
    listed = _nvidia_list()
    assert len(listed) >= 150
    wrong = []
    for page, cc, name in listed:
        for spelled in {name, name if name.startswith("NVIDIA ") else f"NVIDIA {name}"}:
            row = bundled().gpu(spelled)
            if row is None or row["compute_capability"] != cc:
                wrong.append(f"{page}: {spelled!r} (CC {cc}) -> {row and (row['name'], row['compute_capability'])}")
    assert not wrong, "\n".join(wrong)


def test_every_kepler_gpu_on_the_2024_revision_resolves() -> None:
    """Today's legacy page copy ends before Kepler; NVIDIA's March 2024 page (a machine-readable scrape) lists it.
    Every Kepler name there resolves to its CC, except the one the page gives two CCs ("3.0/5.0")."""
    import json

    doc = json.loads((NVIDIA_LISTS / "cuda-gpus-2024.json").read_text())
    kepler = {(e["name"].rstrip("*"), e["compute_capability"]) for group in doc["list"] for sub in group["list"]
              for e in sub["list"] if e["compute_capability"].startswith("3.") and "/" not in e["compute_capability"]}
    assert len(kepler) >= 60
    wrong = [(n, cc, (bundled().gpu(n) or {}).get("compute_capability")) for n, cc in sorted(kepler)
             if (bundled().gpu(n) or {}).get("compute_capability") != cc]
    assert not wrong, wrong
    assert bundled().gpu("NVIDIA GeForce GTX 780 Ti")["name"] == "GeForce GTX 780 Ti"
    assert bundled().gpu("GeForce GTX 680M")["name"] == "GeForce GTX 680M"


def test_a_ti_on_nvidias_list_is_never_read_as_its_base_gpu() -> None:
    for _page, _cc, name in _nvidia_list():
        if name.endswith(" Ti"):
            row = bundled().gpu(name)
            assert row is not None and row["name"].lower().endswith(" ti"), (name, row and row["name"])


@pytest.mark.parametrize(("printed", "name", "cc"), [
    ("NVIDIA GeForce RTX 3050 Ti Laptop GPU", "NVIDIA GeForce RTX 3050 Ti", "8.6"),
    ("NVIDIA GeForce RTX 4070 Ti", "NVIDIA GeForce RTX 4070 Ti", "8.9"),
    ("NVIDIA GeForce RTX 3060Ti", "NVIDIA GeForce RTX 3060 Ti", "8.6"),
    ("NVIDIA GeForce GTX 1650 Ti with Max-Q Design", "NVIDIA GeForce GTX 1650 Ti", "7.5"),
    ("Quadro RTX 5000 with Max-Q Design", "Quadro RTX 5000", "7.5"),
    ("NVIDIA RTX 2000 Ada Generation Laptop GPU", "NVIDIA RTX 2000 Ada Generation", "8.9"),
    ("NVIDIA RTX 4000 SFF Ada Generation", "NVIDIA RTX 4000 SFF Ada Generation", "8.9"),
    ("NVIDIA RTX 4000 Ada Generation", "NVIDIA RTX 4000 Ada Generation", "8.9"),
    ("NVIDIA RTX PRO 4000 Blackwell SFF Edition", "NVIDIA RTX PRO 4000 Blackwell SFF Edition", "12.0"),
    ("NVIDIA RTX PRO 4500 Blackwell Server Edition", "NVIDIA RTX PRO 4500 Blackwell Server Edition", "12.0"),
    ("NVIDIA TITAN X (Pascal)", "NVIDIA TITAN X", "6.1"),
    ("GeForce GTX TITAN X", "GeForce GTX TITAN X", "5.2"),
    ("NVIDIA GeForce GTX 980 Ti", "GeForce GTX 980 Ti", "5.2"),
    ("NVIDIA GeForce GTX 750 Ti", "GeForce GTX 750 Ti", "5.0"),
    ("Quadro P4000", "Quadro P4000", "6.1"),
    ("Quadro T2000", "Quadro T2000", "7.5"),
    ("NVIDIA T1000 8GB", "NVIDIA T1000", "7.5"),
    ("NVIDIA GB10 (DGX Spark)", "NVIDIA GB10", "12.1"),
])
def test_nvml_spellings_of_nvidias_gpus(printed: str, name: str, cc: str) -> None:
    row = bundled().gpu(printed)
    assert row is not None and (row["name"], row["compute_capability"]) == (name, cc)


@pytest.mark.parametrize(("printed", "variant"), [
    ("NVIDIA RTX 4000 SFF Ada Generation", "sff"),   # its own row, never the RTX 4000 Ada Generation
    ("NVIDIA GeForce RTX 4070 SUPER", "super"),      # not on NVIDIA's pages: unknown, never the RTX 4070
    ("NVIDIA GeForce RTX 4070 Ti SUPER", "super"),
    ("NVIDIA GeForce GTX 1660 Ti", "ti"),
    ("NVIDIA GeForce RTX 3050 Ti Laptop GPU", "ti"),
])
def test_a_variant_never_borrows_its_base_gpus_row(printed: str, variant: str) -> None:
    row = bundled().gpu(printed)
    assert row is None or variant in row["name"].lower().split(), (printed, row and row["name"])


def test_first_driver_of_every_compute_capability_follows_its_first_toolkit() -> None:
    """The project's rule for every CC, not only sm_86: a GPU needs at least the Linux minimum of the first toolkit
    whose nvcc builds for its CC (where both are in the matrix); Jetson-only CCs take their driver from JetPack."""
    m = bundled()
    targets = sorted(m.rows("cuda", "sm_support"), key=lambda r: vtuple(r["cuda"]))
    oldest_listed = vtuple(targets[0]["cuda"])
    embedded_only = {cc for cc in {g["compute_capability"] for g in m.gpu_rows}
                     if all(g["segment"] == "embedded" for g in m.gpu_rows if g["compute_capability"] == cc)}
    checked = []
    for arch in m.rows("gpus", "architecture"):
        for cc in arch["compute_capabilities"]:
            first = next((r["cuda"] for r in targets if cc in r["sm"]), None)
            if first is None or vtuple(first) == oldest_listed or cc in embedded_only:
                continue  # first toolkit older than the sm table, or a Jetson-only CC
            need = m.min_driver(first)
            if need is None:
                continue  # NVIDIA names only a branch (13.3+): first_driver_branch covers it
            got = m.first_driver(arch, cc)
            assert got and vtuple(got) >= vtuple(need["linux_min_driver"]), (cc, first, got, need["linux_min_driver"])
            checked.append(cc)
    assert {"10.3", "12.1", "10.0", "12.0", "9.0", "8.9"} <= set(checked)
    blackwell = m.architecture("Blackwell")
    assert m.first_driver(blackwell, "10.3") == "575.51.03" and m.first_driver(blackwell, "10.0") == "570.26"


def test_jax_cuda11_wheels_without_pip_cuda_need_the_local_toolkits_driver() -> None:
    from doctor.matrix import Matrix
    from doctor.queries import _newest_frameworks

    rows = [r for r in load("jax")["jax"] if r.get("cuda_major") == 11]
    local = [r for r in rows if not r.get("pins")]
    assert local and all(r.get("local_cuda") and "min_driver" not in r for r in local)
    assert all(r.get("min_driver") == "450.80.02" for r in rows if r.get("pins"))  # the cuda11_pip era
    cudnn86 = next(r for r in local if r["plugin"] == "jaxlib+cuda11.cudnn86")
    only = Matrix(data={**bundled().data, "jax": {"jax": [cudnn86]}})
    assert "jax" not in _newest_frameworks(only, "470.82.01")  # 450.80.02 would have said yes
    assert _newest_frameworks(only, "520.61.05")["jax"]["version"] == "0.4.1"  # CUDA 11.8's own minimum


@pytest.mark.parametrize(("windows", "branch"), [("453.94", 450), ("452.39", 450), ("454.00", None)])
def test_wsl_windows_drivers_of_r450_map_to_their_branch(windows: str, branch: int | None) -> None:
    # R450's data-center notes pair 450.51.05/451.48 and 450.216.04/453.94: 452.39 (CUDA 11's Windows MVC floor)
    # lies between them; a number past the last known R450 release stays unknown.
    assert bundled().windows_branch(windows) == branch


@pytest.mark.parametrize(("driver", "cuda", "package"), [
    ("418.226.00", "11.0", "cuda-compat-11-0"), ("418.226.00", "10.2", "cuda-compat-10-2"),
    ("440.33.01", "11.1", "cuda-compat-11-1"), ("450.51.06", "11.2", "cuda-compat-11-2"),
])
def test_older_data_center_branches_run_newer_cuda_with_the_compat_package_nvidia_names(
        driver: str, cuda: str, package: str) -> None:
    from doctor.matrix import driver_runs_cuda

    v = driver_runs_cuda(bundled(), driver, cuda, gpu_segment="datacenter")
    assert v.rule == "forward-compat-needs-package" and package in v.explanation
    assert driver_runs_cuda(bundled(), driver, cuda, gpu_segment="consumer").rule == "too-old"


def test_r440_is_not_given_cuda_11_2_forward_compatibility() -> None:
    from doctor.matrix import driver_runs_cuda

    assert driver_runs_cuda(bundled(), "440.33.01", "11.2", gpu_segment="datacenter").rule == "too-old"


def test_the_matrix_hash_is_sha256_without_hashlib() -> None:
    """The compiled copy is trusted by its SHA-256; the built-in module gives hashlib's digest, byte for byte."""
    import hashlib

    from doctor import matrix

    for data in (b"", b"abc", bytes(range(256)) * 999):
        assert matrix._sha256(data) == hashlib.sha256(data).hexdigest()
