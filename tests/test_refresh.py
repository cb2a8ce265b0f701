"""The PyPI refresh: rows derived from real recorded metadata, HTTP caching, and every failure kept as a one-line note.

Recorded answers live in tests/data/pypi/ (README there says where each came from). `responses` serves
them; a request nothing was registered for fails the test (responses raises ConnectionError, which the
refresh would report as offline).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
import requests
import responses
import tomllib
from hypothesis import given
from hypothesis import strategies as st
from responses import matchers

from doctor import refresh as rf
from doctor.matrix import bundled

DATA = Path(__file__).parent / "data" / "pypi"
NAMES = ("torch", "tensorflow", "jax-cuda12-plugin", "jax-cuda13-plugin")
FILES_URL = "https://files.pythonhosted.org/packages/"


def _index(name: str) -> dict:
    return json.loads((DATA / "simple" / f"{name}.json").read_text())


def _meta_url(name: str, filename: str) -> str:
    return next(f["url"] for f in _index(name)["files"] if f["filename"] == filename) + ".metadata"


def serve(rsps: responses.RequestsMock, names=NAMES, index_headers: dict | None = None, metadata: bool = True):
    """Register the recorded answers: each index, each wheel's .metadata (404 where PyPI had none), the project JSON."""
    for name in names:
        rsps.get(rf.SIMPLE_URL.format(name=name), body=(DATA / "simple" / f"{name}.json").read_bytes(),
                 content_type=rf.SIMPLE_JSON, headers=index_headers or {})
        if metadata:
            for f in _index(name)["files"]:
                recorded = DATA / "metadata" / (f["filename"] + ".metadata")
                if recorded.exists():
                    rsps.get(f["url"] + ".metadata", body=recorded.read_bytes(),
                             content_type="application/octet-stream")
                else:
                    rsps.get(f["url"] + ".metadata", status=404)
        project = DATA / "project" / f"{name}.json"
        rsps.get(rf.PROJECT_URL.format(name=name), status=200 if project.exists() else 404,
                 body=project.read_bytes() if project.exists() else b"", content_type="application/json")
        # PyPI's per-release JSON API answers 404 from the recording network (see tests/data/pypi/README.md)
        rsps.get(re.compile(re.escape(f"https://pypi.org/pypi/{name}/") + r"[^/]+/json"), status=404)


def requested(rsps: responses.RequestsMock) -> list[str]:
    return [c.request.url for c in rsps.calls]


@pytest.fixture
def rsps():
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


@pytest.fixture
def fetched(rsps, tmp_path):
    serve(rsps)
    with requests.Session() as s:
        return rf.fetch_pypi_rows(s, 5.0, tmp_path)


def by_version(rows: list[dict], plugin: str | None = None) -> dict[str, dict]:
    return {r["version"]: r for r in rows if plugin is None or r.get("plugin") == plugin}


def bundled_note() -> str:
    reviewed = bundled().reviewed
    return "kept the bundled matrix" + (f" (reviewed {reviewed})" if reviewed else "")


# --- rows from real metadata ------------------------------------------------------------------


def test_torch_2_5_1_row_comes_from_its_nvidia_pins(fetched):
    src = _meta_url("torch", "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl")
    assert by_version(fetched["pytorch"]["torch"])["2.5.1"] == {
        "version": "2.5.1", "python": ">=3.8.0", "default_cuda": "12.4",
        "variant": [{"cuda": "12.4", "cudnn": "9.1.0.70", "nccl": "2.21.5", "source": src}],
        "source": src,
    }


def test_torch_2_11_takes_cuda_13_0_from_the_cuda_toolkit_metapackage(fetched):
    row = by_version(fetched["pytorch"]["torch"])["2.11.0"]
    assert row["default_cuda"] == "13.0"
    assert row["variant"] == [{"cuda": "13.0", "cudnn": "9.19.0.56", "nccl": "2.28.9", "source": row["source"]}]


def test_torch_rows_newest_first_from_the_1_12_floor_without_prereleases(fetched, rsps):
    assert [r["version"] for r in fetched["pytorch"]["torch"]] == ["2.11.0", "2.5.1", "1.13.1", "1.12.0"]
    assert not any("torch-1.11.0" in u for u in requested(rsps)), "below the floor: not fetched"
    assert not any("aarch64" in u or "win_amd64" in u for u in requested(rsps)), "only Linux x86_64 wheels"


def test_torch_1_12_bundles_cuda_so_pypi_tells_only_python(fetched):
    row = by_version(fetched["pytorch"]["torch"])["1.12.0"]
    assert row == {"version": "1.12.0", "python": ">=3.7.0", "source": row["source"]}
    assert row["source"].endswith("torch-1.12.0-cp310-cp310-manylinux1_x86_64.whl.metadata")


def test_cp311_wheel_without_metadata_falls_back_to_the_next_python(fetched):
    row = by_version(fetched["pytorch"]["torch"])["1.13.1"]
    assert row["source"].endswith("torch-1.13.1-cp310-cp310-manylinux1_x86_64.whl.metadata")
    assert row["variant"] == [{"cuda": "11.7", "cudnn": "8.5.0.96", "source": row["source"]}], "no NCCL pin: left out"


def test_tensorflow_and_cuda_pins_exact_then_ranges(fetched):
    rows = by_version(fetched["tensorflow"]["tensorflow"])
    assert list(rows) == ["2.20.0", "2.19.0", "2.4.0"], "2.3.0 below the floor, 2.22.0rc0 a pre-release"
    assert "nvidia-cudnn-cu12==9.3.0.75" in rows["2.19.0"]["and_cuda"]
    assert len(rows["2.19.0"]["and_cuda"]) == 12
    assert "nvidia-cudnn-cu12<10.0,>=9.3.0.75" in rows["2.20.0"]["and_cuda"]
    assert "and_cuda" not in rows["2.4.0"], "no [and-cuda] extra before 2.14: left out, not empty"
    assert "python" not in rows["2.4.0"], "its wheel states no Requires-Python: left out, not guessed"


def test_jax_plugin_rows(fetched):
    rows = fetched["jax"]["jax"]
    assert [(r["plugin"], r["version"]) for r in rows] == [
        ("jax-cuda13-plugin", "0.12.0.1"), ("jax-cuda13-plugin", "0.9.2"), ("jax-cuda12-plugin", "0.9.2")]
    cu12 = by_version(rows, "jax-cuda12-plugin")["0.9.2"]
    assert cu12["cuda_major"] == 12 and cu12["python"] == ">=3.11"
    assert "nvidia-cudnn-cu12<10.0,>=9.8" in cu12["pins"]
    assert not any(p.startswith("jax-") for p in cu12["pins"])
    assert cu12["source"].endswith("jax_cuda12_plugin-0.9.2-cp314-cp314-manylinux_2_27_x86_64.whl.metadata")
    assert "nvidia-nvvm" in by_version(rows, "jax-cuda13-plugin")["0.9.2"]["pins"]


def test_newest_release_without_metadata_is_read_from_the_project_json(fetched):
    row = by_version(fetched["jax"]["jax"], "jax-cuda13-plugin")["0.12.0.1"]
    assert row["source"] == "https://pypi.org/pypi/jax-cuda13-plugin/json"
    assert row["cuda_major"] == 13 and "nvidia-cudnn-cu13<10.0,>=9.12.0.46" in row["pins"]
    assert fetched["skipped"] == []


def test_an_older_release_without_metadata_is_skipped_with_a_line(rsps, tmp_path):
    serve(rsps, names=("torch",), metadata=False)
    for f in _index("torch")["files"]:
        recorded = DATA / "metadata" / (f["filename"] + ".metadata")
        if "1.13.1" in f["filename"]:
            rsps.get(f["url"] + ".metadata", status=404)
        elif recorded.exists():
            rsps.get(f["url"] + ".metadata", body=recorded.read_bytes())
        else:
            rsps.get(f["url"] + ".metadata", status=404)
    with requests.Session() as s:
        out = rf.fetch_pypi_rows(s, 5.0, tmp_path, packages=rf.PACKAGES[:1])
    assert [r["version"] for r in out["pytorch"]["torch"]] == ["2.11.0", "2.5.1", "1.12.0"]
    assert out["skipped"] == ["torch 1.13.1: PyPI serves no core metadata for its Linux x86_64 wheels, and its release "
                              "JSON (https://pypi.org/pypi/torch/1.13.1/json) answered 404"]


def test_a_release_without_wheel_metadata_falls_back_to_the_release_json_api(rsps, tmp_path):
    # An index that serves no .metadata files: requires_dist comes from /pypi/<name>/<version>/json, whose
    # "info" has the project JSON's shape (the recorded project JSON of jax-cuda13-plugin 0.12.0.1 stands in).
    name, version = "jax-cuda13-plugin", "0.12.0.1"
    project = (DATA / "project" / f"{name}.json").read_bytes()
    rsps.get(rf.RELEASE_URL.format(name=name, version=version), body=project, content_type="application/json")
    serve(rsps, names=(name,), metadata=False)
    for f in _index(name)["files"]:
        rsps.get(f["url"] + ".metadata", status=404)
    rsps.replace(responses.GET, rf.PROJECT_URL.format(name=name), status=404)
    with requests.Session() as s:
        rows, skipped = rf.package_rows(s, 5.0, None, next(p for p in rf.PACKAGES if p.name == name))
    row = next(r for r in rows if r["version"] == version)
    assert row["source"] == rf.RELEASE_URL.format(name=name, version=version)
    assert row["cuda_major"] == 13
    assert all("answered 404" in line for line in skipped)


def test_newest_bounds_the_traffic(rsps, tmp_path):
    serve(rsps)
    with requests.Session() as s:
        out = rf.fetch_pypi_rows(s, 5.0, tmp_path, newest=1)
    assert rf.counts(out) == {"torch": 1, "tensorflow": 1, "jax": 2}
    torch_calls = [u for u in requested(rsps) if "torch" in u]
    assert torch_calls == [rf.SIMPLE_URL.format(name="torch"),
                           _meta_url("torch", "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl")]


def test_index_request_asks_for_the_pep_691_json(rsps, tmp_path):
    serve(rsps, names=("torch",))
    with requests.Session() as s:
        rf.fetch_pypi_rows(s, 5.0, tmp_path, newest=1, packages=rf.PACKAGES[:1])
    assert rsps.calls[0].request.headers["Accept"] == rf.SIMPLE_JSON


@pytest.mark.parametrize(("files", "chosen"), [
    (["x-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", "x-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"], "cp311-cp311"),
    (["x-1.0-cp313-cp313t-manylinux_2_28_x86_64.whl", "x-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"], "cp312-cp312"),
    (["x-1.0-cp311-cp311-manylinux_2_28_x86_64.whl", "x-1.0-3-cp311-cp311-manylinux_2_28_x86_64.whl"], "1.0-3-cp311"),
    (["x-1.0-cp311-cp311-musllinux_1_2_x86_64.whl", "x-1.0-cp311-cp311-manylinux_2_28_aarch64.whl"], None),
])
def test_wheel_choice_prefers_cp311_then_newest_python_then_latest_build(files, chosen):
    index = {"files": [{"filename": f, "url": FILES_URL + f} for f in files]}
    releases = rf.select_releases(index, None, 5)
    assert (releases[0][1][0].filename if releases else None) == (
        None if chosen is None else next(f for f in files if chosen in f))


def test_yanked_wheels_and_explicitly_absent_metadata_are_not_used(rsps):
    f = "x-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    index = {"files": [{"filename": f, "url": FILES_URL + f, "yanked": "broken"}]}
    assert rf.select_releases(index, None, 5) == []
    index = {"files": [{"filename": f, "url": FILES_URL + f, "core-metadata": False}]}
    (version, wheels), = rf.select_releases(index, None, 5)
    with requests.Session() as s:
        assert rf._release_metadata(s, 5.0, None, version, wheels) is None
    assert requested(rsps) == [], "the index said there is no .metadata: not asked for"


# --- HTTP caching -----------------------------------------------------------------------------


def test_etag_304_reuses_the_cached_index_and_metadata_is_not_fetched_again(tmp_path):
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        serve(mock, index_headers={"ETag": '"v1"'})
        first = rf.refresh(timeout=5.0, cache_dir=tmp_path)
    assert first.ok, first.message
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        serve(mock, metadata=False)
        for name in NAMES:
            mock.replace("GET", rf.SIMPLE_URL.format(name=name), status=304,
                         match=[matchers.header_matcher({"If-None-Match": '"v1"'})])
            for f in _index(name)["files"]:  # a 404 is not remembered: PyPI may serve the file later
                if not (DATA / "metadata" / (f["filename"] + ".metadata")).exists():
                    mock.get(f["url"] + ".metadata", status=404)
        second = rf.refresh(timeout=5.0, cache_dir=tmp_path)
        answered = [(c.request.url, c.response.status_code) for c in mock.calls]
    assert second.ok, second.message
    assert [u for u, status in answered if "/simple/" in u] == [
        rf.SIMPLE_URL.format(name=n) for n in NAMES]
    assert {status for u, status in answered if "/simple/" in u} == {304}
    assert not [u for u, status in answered if u.endswith(".metadata") and status == 200], \
        "wheel metadata is immutable: served from the cache"
    assert second.counts == first.counts
    cached = rf.load_cached(tmp_path)
    assert cached is not None
    assert by_version(cached["pytorch"]["torch"])["2.5.1"]["variant"][0]["cudnn"] == "9.1.0.70"


def test_last_modified_is_sent_back_as_if_modified_since(rsps, tmp_path):
    stamp = "Tue, 12 Nov 2024 10:00:00 GMT"
    serve(rsps, names=("torch",), index_headers={"Last-Modified": stamp})
    with requests.Session() as s:
        rf.fetch_pypi_rows(s, 5.0, tmp_path, newest=1, packages=rf.PACKAGES[:1])
        rsps.replace("GET", rf.SIMPLE_URL.format(name="torch"), status=304,
                     match=[matchers.header_matcher({"If-Modified-Since": stamp})])
        again = rf.fetch_pypi_rows(s, 5.0, tmp_path, newest=1, packages=rf.PACKAGES[:1])
    assert again["pytorch"]["torch"][0]["version"] == "2.11.0"


def test_index_without_validators_is_not_kept_on_disk(rsps, tmp_path):
    serve(rsps, names=("torch",))
    with requests.Session() as s:
        rf.fetch_pypi_rows(s, 5.0, tmp_path, newest=1, packages=rf.PACKAGES[:1])
    assert rf.HttpCache(tmp_path).load(rf.SIMPLE_URL.format(name="torch")) is None
    assert rf.HttpCache(tmp_path).load(_meta_url("torch", "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl"))


# --- refresh(): success and every failure -----------------------------------------------------


def test_refresh_writes_the_cache_and_load_cached_reads_it_back(rsps, tmp_path):
    serve(rsps)
    result = rf.refresh(timeout=5.0, cache_dir=tmp_path)
    assert result.ok
    assert result.path == tmp_path / "pypi-rows.json" and result.path.exists()
    assert result.counts == {"torch": 4, "tensorflow": 3, "jax": 3}
    assert "\n" not in result.message and result.message.startswith("refreshed from PyPI: 4 torch, 3 tensorflow")
    cached = rf.load_cached(tmp_path)
    assert cached is not None and cached["fetched_at"] == result.fetched_at
    datetime.fromisoformat(cached["fetched_at"])
    assert set(cached) == {"fetched_at", "pytorch", "tensorflow", "jax", "skipped"}
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == [], "written atomically"


def test_timeout_keeps_the_bundled_matrix_with_a_one_line_note(rsps, tmp_path):
    rsps.get(rf.SIMPLE_URL.format(name="torch"), body=requests.exceptions.ReadTimeout("read timed out"))
    result = rf.refresh(timeout=7.0, cache_dir=tmp_path)
    assert not result.ok
    assert result.message == f"offline: {bundled_note()} — pypi.org did not answer within 7s"
    assert (result.path, result.fetched_at, result.counts) == (None, None, {})
    assert not (tmp_path / "pypi-rows.json").exists()


def test_connection_refused_is_offline_too(rsps, tmp_path):
    rsps.get(rf.SIMPLE_URL.format(name="torch"), body=requests.exceptions.ConnectionError("refused"))
    result = rf.refresh(cache_dir=tmp_path)
    assert result.message == f"offline: {bundled_note()} — cannot reach pypi.org"


def test_timeout_on_a_metadata_file_keeps_the_previous_cache(rsps, tmp_path):
    serve(rsps)
    first = rf.refresh(timeout=5.0, cache_dir=tmp_path)
    before = (tmp_path / "pypi-rows.json").read_bytes()
    for p in rf.HttpCache(tmp_path).root.iterdir():  # forget the metadata so that it is asked for again
        p.unlink()
    rsps.replace("GET", _meta_url("torch", "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl"),
                 body=requests.exceptions.ConnectTimeout("timed out"))
    result = rf.refresh(timeout=5.0, cache_dir=tmp_path)
    assert not result.ok
    assert result.message == (f"offline: kept the PyPI rows fetched {first.fetched_at} — "
                              "files.pythonhosted.org did not answer within 5s")
    assert (result.path, result.fetched_at, result.counts) == (tmp_path / "pypi-rows.json", first.fetched_at,
                                                               first.counts)
    assert (tmp_path / "pypi-rows.json").read_bytes() == before


def test_404_for_an_index_keeps_the_bundled_matrix(rsps, tmp_path):
    rsps.get(rf.SIMPLE_URL.format(name="torch"), status=404, body="Not Found")
    result = rf.refresh(cache_dir=tmp_path)
    assert not result.ok
    assert result.message == f"PyPI error: {bundled_note()} — https://pypi.org/simple/torch/ answered 404"


def test_server_error_is_reported_with_its_status(rsps, tmp_path):
    rsps.get(rf.SIMPLE_URL.format(name="torch"), status=503, body="<html>\nbusy\n</html>")
    result = rf.refresh(cache_dir=tmp_path)
    assert result.message.endswith("https://pypi.org/simple/torch/ answered HTTP 503") and "\n" not in result.message


@pytest.mark.parametrize(("body", "why"), [
    (b'{"meta": {"api-version": "1.1"}, "files": [', "is not valid JSON"),
    (b"<!DOCTYPE html><html><body>torch</body></html>", "is not valid JSON"),
    (b'["torch"]', "is JSON but not an object"),
    (b'{"meta": {"api-version": "1.1"}, "name": "torch"}', "has no file list"),
])
def test_malformed_index_is_a_bad_download(rsps, tmp_path, body, why):
    rsps.get(rf.SIMPLE_URL.format(name="torch"), body=body, content_type=rf.SIMPLE_JSON)
    result = rf.refresh(cache_dir=tmp_path)
    assert not result.ok
    assert result.message == f"bad download: {bundled_note()} — https://pypi.org/simple/torch/ {why}"


def test_a_broken_cached_index_is_forgotten_so_the_next_refresh_fetches_it_whole(rsps, tmp_path):
    url = rf.SIMPLE_URL.format(name="torch")
    rsps.get(url, body=b'{"files": [', headers={"ETag": '"broken"'})
    assert not rf.refresh(cache_dir=tmp_path).ok
    assert rf.HttpCache(tmp_path).load(url) is None


def test_malformed_project_json_is_a_bad_download(rsps, tmp_path):
    serve(rsps, names=("jax-cuda13-plugin",))
    rsps.replace("GET", rf.PROJECT_URL.format(name="jax-cuda13-plugin"), body=b'{"info": {"version": "0.12.')
    with requests.Session() as s, pytest.raises(rf.FetchError, match="is not valid JSON") as err:
        rf.fetch_pypi_rows(s, 5.0, tmp_path, packages=rf.PACKAGES[3:])
    assert err.value.kind == "bad"


def test_nothing_usable_is_not_written(rsps, tmp_path):
    for name in NAMES:
        rsps.get(rf.SIMPLE_URL.format(name=name), json={"meta": {"api-version": "1.1"}, "files": []})
    result = rf.refresh(cache_dir=tmp_path)
    assert result.message == f"bad download: {bundled_note()} — PyPI gave no usable framework rows"
    assert not (tmp_path / "pypi-rows.json").exists()


# --- the cache file ---------------------------------------------------------------------------


def _good() -> dict:
    src = "https://files.pythonhosted.org/packages/x/torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl.metadata"
    return {"schema": 1, "fetched_at": "2026-11-22T02:00:00+00:00",
            "pytorch": {"torch": [{"version": "2.5.1", "source": src,
                                   "variant": [{"cuda": "12.4", "cudnn": "9.1.0.70", "source": src}]}]},
            "tensorflow": {"tensorflow": []}, "jax": {"jax": []}, "skipped": []}


def _broken(change) -> dict:
    data = _good()
    change(data)
    return data


@pytest.mark.parametrize("content", [
    b"\x00\xffgarbage", b"", b"[]", b'{"schema": 1}',
    json.dumps(_broken(lambda d: d.update(schema=2))).encode(),
    json.dumps(_broken(lambda d: d.update(fetched_at="yesterday"))).encode(),
    json.dumps(_broken(lambda d: d["pytorch"]["torch"][0].pop("source"))).encode(),
    json.dumps(_broken(lambda d: d["pytorch"]["torch"][0].update(source="http://pypi.org/x"))).encode(),
    json.dumps(_broken(lambda d: d["pytorch"]["torch"][0].update(version="two point five"))).encode(),
    json.dumps(_broken(lambda d: d["pytorch"]["torch"][0].update(version=2.5))).encode(),
    json.dumps(_broken(lambda d: d["pytorch"]["torch"][0]["variant"][0].pop("source"))).encode(),
    json.dumps(_broken(lambda d: d.pop("jax"))).encode(),
], ids=["binary", "empty", "list", "no-tables", "schema-2", "bad-date", "no-source", "http-source",
        "bad-version", "number-version", "variant-no-source", "no-jax"])
def test_garbage_cache_file_is_ignored(tmp_path, content):
    (tmp_path / "pypi-rows.json").write_bytes(content)
    assert rf.load_cached(tmp_path) is None


def test_good_cache_file_loads_and_a_missing_one_is_none(tmp_path):
    assert rf.load_cached(tmp_path) is None
    (tmp_path / "pypi-rows.json").write_text(json.dumps(_good()))
    loaded = rf.load_cached(tmp_path)
    assert loaded is not None and loaded["pytorch"]["torch"][0]["variant"][0]["cudnn"] == "9.1.0.70"


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                       max_size=4), max_leaves=20)


@given(json_values)
def test_validate_never_raises_on_any_json(value):
    assert isinstance(rf.validate(value), list)


@pytest.mark.parametrize(("env", "expected"), [
    ({"XDG_CACHE_HOME": "/srv/cache"}, Path("/srv/cache/gpu-doctor")),
    ({"XDG_CACHE_HOME": "relative/cache"}, Path.home() / ".cache" / "gpu-doctor"),
    ({}, Path.home() / ".cache" / "gpu-doctor"),
])
def test_default_cache_dir_follows_xdg(env, expected):
    assert rf.default_cache_dir(env) == expected


def test_importing_refresh_does_not_import_requests():
    code = "import sys, doctor.refresh; assert 'requests' not in sys.modules, 'requests imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent.parent)


# --- the maintainers' script ------------------------------------------------------------------


def _script():
    path = Path(__file__).parent.parent / "scripts" / "update_matrix.py"
    spec = importlib.util.spec_from_file_location("update_matrix", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_update_matrix_diff_new_changed_and_agreeing_rows(fetched):
    um = _script()
    src = "https://pypi.org/project/torch/2.5.1/"
    reviewed = {"pytorch": {"torch": [
        {"version": "2.5.1", "python": ">=3.8.0", "default_cuda": "12.4", "torchvision": "0.20.1", "source": src,
         "variant": [{"cuda": "12.4", "cudnn": "9.1.0", "nccl": "2.21.5", "arch_list": ["9.0"], "source": src}]},
        {"version": "1.12.0", "python": ">=3.7.0", "default_cuda": "10.2", "source": src},
    ]}, "tensorflow": {"tensorflow": [{"version": "2.19.0", "python": "3.9-3.12", "cuda": "12.5", "source": src}]}}
    changes, same = um.diff(reviewed, fetched)
    changed = {c.name: c.detail for c in changes if c.kind == "changed"}
    assert changed == {"torch 2.5.1": "cudnn (CUDA 12.4): 9.1.0 → 9.1.0.70"}
    assert same == 2, "torch 1.12.0 (PyPI cannot tell its CUDA) and tensorflow 2.19.0 (python formats differ)"
    new = [c.name for c in changes if c.kind == "new"]
    assert new[:3] == ["torch 2.11.0", "torch 1.13.1", "tensorflow 2.20.0"]
    assert "jax-cuda13-plugin 0.12.0.1" in new
    text = um.render(changes, same, ["torch 9.9: none"], [])
    assert "~ torch 2.5.1: cudnn (CUDA 12.4): 9.1.0 → 9.1.0.70" in text and "- torch 9.9: none" in text


def test_update_matrix_proposal_is_valid_toml_with_sources(fetched):
    um = _script()
    changes, _ = um.diff({}, fetched)
    data = tomllib.loads(um.proposal(changes, "2026-11-22"))
    assert data["schema"] == 1 and len(data["torch"]) == 4 and len(data["jax"]) == 3
    torch = {r["version"]: r for r in data["torch"]}
    assert torch["2.5.1"]["variant"][0]["cudnn"] == "9.1.0.70"
    assert all(r["source"].startswith("https://") and "not reviewed" in r["note"]
               for t in ("torch", "tensorflow", "jax") for r in data[t])


# --- the real PyPI ----------------------------------------------------------------------------


@pytest.mark.network
def test_real_pypi_refresh(tmp_path):
    try:
        requests.get(rf.SIMPLE_URL.format(name="torch"), headers={"Accept": rf.SIMPLE_JSON}, timeout=10).close()
    except requests.RequestException as exc:
        pytest.skip(f"PyPI unreachable from this machine ({type(exc).__name__}): the recorded tests cover the code")
    result = rf.refresh(timeout=30.0, cache_dir=tmp_path, newest=2)
    assert result.ok, result.message
    cached = rf.load_cached(tmp_path)
    assert cached is not None and cached["pytorch"]["torch"], result.message
    assert all(r["source"].startswith("https://") for r in cached["pytorch"]["torch"])


def test_refresh_message_names_what_it_could_not_read(rsps, tmp_path):
    serve(rsps)
    for f in _index("torch")["files"]:
        if "1.13.1" in f["filename"]:
            rsps.replace(responses.GET, f["url"] + ".metadata", status=404)
    with requests.Session() as s:
        result = rf.refresh(timeout=5.0, cache_dir=tmp_path, session=s)
    assert result.ok
    assert "torch 1.13.1" in result.message and "answered 404" in result.message
