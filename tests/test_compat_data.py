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
    for gpu in data["gpu"]:
        arch = archs[gpu["architecture"]]
        assert gpu["compute_capability"] in arch["compute_capabilities"], gpu["name"]
        assert gpu["segment"] in ("datacenter", "workstation", "consumer", "embedded"), gpu["name"]
    assert len(data["gpu"]) >= 60


def test_gpu_names_are_unique() -> None:
    seen: set[str] = set()
    for gpu in load("gpus")["gpu"]:
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

    real = matrix.hashlib.sha256

    def changed(data: bytes) -> Any:
        return real(data + b"edited")

    monkeypatch.setattr(matrix.hashlib, "sha256", changed)
    matrix.bundled.cache_clear()
    try:
        fresh = matrix.bundled()
        assert fresh.data["cuda"]["toolkit"] == load("cuda")["toolkit"]  # parsed from TOML, not the copy
    finally:
        matrix.bundled.cache_clear()
