"""NVIDIA's redistrib manifests and PyPI's nvidia-* wheels as the matrix's second source: parsed from recorded
copies (tests/data/nvidia-redist/, origin in tests/data/SOURCES.md), compared with the bundled matrix, and what a
refresh saw shown by `gpu-doctor matrix`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
import responses

from doctor import redist
from doctor.matrix import Matrix, bundled

DATA = Path(__file__).parent / "data" / "nvidia-redist"
CUDNN_URL = "https://developer.download.nvidia.com/compute/cudnn/redist/redistrib_9.28.1.json"
DRIVER_URL = "https://developer.download.nvidia.com/compute/nvidia-driver/redist/redistrib_620.70.06.json"
CUDA_URL = "https://developer.download.nvidia.com/compute/cuda/redist/redistrib_13.4.2.json"


def _load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def cuda_1342() -> redist.CudaRelease:
    return redist.parse_cuda(_load("cuda-redistrib_13.4.2.json"), CUDA_URL)


def driver_620() -> redist.DriverRelease:
    return redist.parse_driver(_load("driver-redistrib_620.70.06.json"), DRIVER_URL)


def cudnn_9281() -> redist.CudnnRelease:
    return redist.parse_cudnn(_load("cudnn-redistrib_9.28.1.json"), CUDNN_URL)


# --- parsers on the recorded manifests ---------------------------------------------------------------------


def test_cuda_manifest_maps_every_component_version_to_its_release() -> None:
    rel = cuda_1342()
    assert (rel.label, rel.date) == ("13.4.2", "2026-09-16")
    assert rel.components["cuda_cudart"] == "13.4.92" and rel.components["cuda_nvcc"] == "13.4.92"
    assert rel.components["cccl"] == "13.3.4.3.1"
    assert redist.component_release([rel], "cuda_cudart", "13.4.92") is rel
    assert redist.component_release([rel], "cuda_cudart", "13.4.49") is None


def test_driver_manifest_names_its_branch_and_the_cuda_of_its_compat_package() -> None:
    d = driver_620()
    assert (d.label, d.branch, d.compat_cuda) == ("620.70.06", 620, ["13.5"])
    old = redist.parse_driver(_load("driver-redistrib_535.288.01.json"), "x/redistrib_535.288.01.json")
    assert (old.branch, old.compat_cuda) == (535, [])  # no cuda_compat in this release: no CUDA claimed


def test_cudnn_manifest_lists_cuda_majors_per_platform() -> None:
    rel = cudnn_9281()
    assert rel.version == "9.28.1.4" and rel.cuda_majors == [13, 12]
    assert rel.platforms == {"linux-x86_64": [13, 12], "linux-sbsa": [13, 12]}


def test_an_old_manifest_without_release_label_takes_the_file_names() -> None:
    data = _load("driver-redistrib_535.288.01.json")
    del data["release_label"]
    assert redist.parse_driver(data, "https://x/redistrib_535.288.01.json").label == "535.288.01"


@pytest.mark.parametrize("data", [[], "x", {"release_product": "cuda", "release_label": "9.28.1"},
                                  {"release_product": "cudnn"}, {"release_label": "nope"}])
def test_a_manifest_of_another_shape_is_a_clear_error(data: object) -> None:
    with pytest.raises(redist.ManifestError):
        redist.parse_cudnn(data, "https://x/other.json")


def test_index_page_lists_release_labels_oldest_first() -> None:
    labels = redist.parse_index((DATA / "driver-redist-index.txt").read_text())
    assert labels[0] == "418.226.00" and labels[-1] == "470.141.03" and "450.80.02" in labels
    assert labels == sorted(labels, key=lambda s: tuple(int(p) for p in s.split(".")))


# --- the bundled matrix against the manifests ---------------------------------------------------------------


def test_the_bundled_matrix_agrees_with_the_recorded_manifests() -> None:
    # cuDNN 9.28.1 has CUDA 12 and 13 builds (x86_64 and SBSA); CUDA 13.5 pairs with R620; 13.4.2 is known.
    assert redist.propose(bundled(), [cuda_1342()], [driver_620()], [cudnn_9281()]) == []


def test_a_matrix_one_release_behind_gets_sourced_proposals() -> None:
    m = bundled()
    data = {k: dict(v) for k, v in m.data.items()}
    data["cuda"] = {**data["cuda"], "toolkit": [r for r in m.rows("cuda", "toolkit")
                                                if not str(r["version"]).startswith(("13.5", "13.4.2"))]}
    data["cudnn"] = {**data["cudnn"], "cudnn": [({**r, "cuda": ["13.x"]} if r["version"] == "9.28.1" else r)
                                                for r in m.rows("cudnn", "cudnn")]}
    behind = Matrix(data=data)
    got = {(p.kind, p.name): p for p in redist.propose(behind, [cuda_1342()], [driver_620()], [cudnn_9281()])}
    assert set(got) == {("new", "CUDA 13.4.2"), ("new", "CUDA 13.5"), ("changed", "cuDNN 9.28.1")}
    assert got[("new", "CUDA 13.4.2")].row["source"] == CUDA_URL
    assert got[("new", "CUDA 13.5")].row["source"] == DRIVER_URL
    fix = got[("changed", "cuDNN 9.28.1")]
    assert fix.row["cuda"] == ["13.x", "12.x"] and fix.row["source"] == CUDNN_URL and "linux-sbsa" in fix.detail


def test_pypi_wheels_are_a_second_signal_for_newest_releases() -> None:
    seen = redist.newest_seen([], [], [], {"cuda": ("nvidia-cuda-runtime", "13.5.37"),
                                           "cudnn": ("nvidia-cudnn-cu13", "9.28.1.4")})
    assert seen["cuda"]["version"] == "13.5" and seen["cudnn"]["version"] == "9.28.1"
    assert seen["cuda"]["source"] == "https://pypi.org/project/nvidia-cuda-runtime/13.5.37/"


def test_behind_names_each_component_a_refresh_saw_newer() -> None:
    seen = {"cuda": {"version": "13.6", "source": "s1"}, "driver_branch": {"version": "625", "source": "s2"},
            "cudnn": {"version": "9.28.1", "source": "s3"}}
    lines = redist.behind(bundled(), seen)
    assert len(lines) == 2
    assert "CUDA 13.6 is out (seen at s1)" in lines[0] and "knows CUDA 13.5.0 at most" in lines[0]
    assert "driver branch R625" in lines[1]
    assert redist.behind(bundled(), {"cuda": {"version": "13.5", "source": "x"}}) == []


# --- the refresh end to end, on recorded answers ------------------------------------------------------------


def _serve(rsps: responses.RequestsMock, reachable: bool) -> None:
    for product, labels in (("cuda", ["13.4.2"]), ("nvidia-driver", ["535.288.01", "620.70.06"]),
                            ("cudnn", ["9.28.1"])):
        base = redist.BASE.format(product=product)
        if not reachable:
            rsps.get(base, body=requests.ConnectionError("no route"))
            continue
        rsps.get(base, body="".join(f"redistrib_{x}.json\n" for x in labels))
        prefix = {"cuda": "cuda", "nvidia-driver": "driver", "cudnn": "cudnn"}[product]
        for x in labels:
            rsps.get(f"{base}redistrib_{x}.json", body=(DATA / f"{prefix}-redistrib_{x}.json").read_bytes(),
                     content_type="application/json")
    for package in ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu13", "nvidia-cudnn-cu12"):
        rsps.get(f"https://pypi.org/simple/{package}/", body=(DATA / f"pypi-simple-{package}.json").read_bytes(),
                 content_type="application/vnd.pypi.simple.v1+json")


@pytest.fixture
def rsps():
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


def test_refresh_reads_manifests_and_wheels_and_keeps_what_it_saw(rsps, tmp_path) -> None:
    _serve(rsps, reachable=True)
    with requests.Session() as s:
        ok, line = redist.refresh(s, 5.0, tmp_path, bundled())
    assert ok and "has the newest CUDA, driver branch and cuDNN" in line
    cached = redist.load_seen(tmp_path)
    assert cached and cached["seen"]["cuda"]["version"] == "13.5"
    assert cached["seen"]["driver_branch"] == {"version": "620", "source": DRIVER_URL}
    assert cached["seen"]["cudnn"]["version"] == "9.28.1"


def test_nvidia_unreachable_still_counts_pypi_and_says_what_was_unread(rsps, tmp_path) -> None:
    _serve(rsps, reachable=False)
    m = bundled()
    data = {k: dict(v) for k, v in m.data.items()}
    data["cuda"] = {**data["cuda"], "toolkit": [r for r in m.rows("cuda", "toolkit")
                                                if not str(r["version"]).startswith("13.5")]}
    with requests.Session() as s:
        ok, line = redist.refresh(s, 5.0, tmp_path, Matrix(data=data))
    assert ok
    assert "CUDA 13.5 is out (seen at https://pypi.org/project/nvidia-cuda-runtime/13.5.37/)" in line
    assert "knows CUDA 13.4.2 at most" in line and "3 sources unread" in line


def test_nothing_reachable_writes_nothing(rsps, tmp_path) -> None:
    for product in redist.PRODUCTS.values():
        rsps.get(redist.BASE.format(product=product), body=requests.ConnectionError("no route"))
    for package in ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu13", "nvidia-cudnn-cu12"):
        rsps.get(f"https://pypi.org/simple/{package}/", body=requests.ConnectionError("no route"))
    with requests.Session() as s:
        ok, line = redist.refresh(s, 5.0, tmp_path, bundled())
    assert not ok and line.startswith("NVIDIA releases: nothing read (")
    assert redist.load_seen(tmp_path) is None


@pytest.mark.parametrize("content", [b"", b"[]", b'{"schema": 1}', b'{"schema": 1, "seen": {"cuda": 3}}',
                                     b'{"schema": 2, "seen": {}}', b"\xff" * 10])
def test_a_broken_cache_file_is_ignored(tmp_path, content: bytes) -> None:
    (tmp_path / redist.CACHE_FILE).write_bytes(content)
    cached = redist.load_seen(tmp_path)
    assert cached is None or cached["seen"] == {}


# --- what the user sees --------------------------------------------------------------------------------------


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    from doctor import cli

    assert cli.main(argv) == 0
    return capsys.readouterr().out


def test_matrix_alone_states_the_newest_release_per_component(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    out = _cli(["matrix"], capsys)
    assert "newest known: CUDA 13.5.0, driver branch R620, cuDNN 9.28.1" in out
    assert "never refreshed on this machine" in out and "warning" not in out


def test_matrix_warns_when_a_refresh_saw_a_newer_release(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    seen = {"cuda": {"version": "13.6", "source": "https://pypi.org/project/nvidia-cuda-runtime/13.6.20/"}}
    redist.save(tmp_path / "gpu-doctor", seen, [], [])
    out = _cli(["matrix"], capsys)
    assert "warning: CUDA 13.6 is out (seen at https://pypi.org/project/nvidia-cuda-runtime/13.6.20/)" in out
    assert "upgrade gpu-doctor" in out
    answer = json.loads(_cli(["matrix", "driver", "620", "--json"], capsys))
    assert answer["newer_releases_seen"] and "CUDA 13.6" in answer["newer_releases_seen"][0]


def test_matrix_driver_of_the_newest_branch_answers_the_newest_cuda(capsys) -> None:
    out = _cli(["matrix", "driver", "620.70.06"], capsys)
    assert "newest CUDA it runs natively: 13.5.0 (CUDA 13.5 GA, needs ≥ R620)" in out
    out = _cli(["matrix", "cuda", "13.5"], capsys)
    assert "Linux driver ≥ R620" in out


# --- the maintainers' script: --nvidia-from a folder of manifests -------------------------------------------


def _script():
    import importlib.util
    import sys

    path = Path(__file__).parent.parent / "scripts" / "update_matrix.py"
    spec = importlib.util.spec_from_file_location("update_matrix", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_update_matrix_nvidia_agrees_on_the_recorded_manifests(capsys) -> None:
    assert _script().main(["--nvidia-from", str(DATA)]) == 0
    assert "compat/ agrees with every manifest read" in capsys.readouterr().out


def test_update_matrix_nvidia_proposes_a_newer_release_with_its_branch(tmp_path, monkeypatch, capsys) -> None:
    import tomllib

    # A derived variant of the recorded manifests: the same documents one release later.
    cuda = _load("cuda-redistrib_13.4.2.json") | {"release_label": "13.6.0"}
    driver = _load("driver-redistrib_620.70.06.json") | {"release_label": "625.10.01"}
    driver["cuda_compat"] = {**driver["cuda_compat"], "cuda_variant": ["13.6"]}
    (tmp_path / "redistrib_13.6.0.json").write_text(json.dumps(cuda))
    (tmp_path / "redistrib_625.10.01.json").write_text(json.dumps(driver))
    um = _script()
    monkeypatch.setattr(um, "COMPAT", tmp_path)
    assert um.main(["--nvidia-from", str(tmp_path), "--write"]) == 1
    out = capsys.readouterr().out
    assert "+ CUDA 13.6.0: cudart 13.4.92, driver branch R625 (cuda_compat of 625.10.01)" in out
    data = tomllib.loads((tmp_path / um.NVIDIA_PROPOSED).read_text())
    row = data["toolkit"][0]
    assert (row["version"], row["driver_branch"]) == ("13.6.0", "625")
    assert row["source"] == "https://developer.download.nvidia.com/compute/cuda/redist/redistrib_13.6.0.json"
    assert row["source2"].endswith("/nvidia-driver/redist/redistrib_625.10.01.json")


# --- the maintainers' script: Python ranges against PyPI's wheel tags ---------------------------------------


def test_python_ranges_are_judged_by_the_wheel_tags_pypi_has() -> None:
    import importlib.util
    import sys

    path = Path(__file__).parent.parent / "scripts" / "check_python_tags.py"
    spec = importlib.util.spec_from_file_location("check_python_tags", path)
    ct = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = ct
    spec.loader.exec_module(ct)
    files = json.loads((Path(__file__).parent / "data" / "pypi" / "simple" / "torch.json").read_text())["files"]
    wheels = {"torch": ct.wheel_pythons(files)}
    assert wheels["torch"]["1.13.1"] == {"3.10", "3.11"}  # recorded index: cp310 and cp311 Linux x86_64 wheels
    (d,) = ct.compare([("pytorch", "torch", "1.13.1", ">=3.10,<3.11")], wheels)
    assert d["wheels_not_claimed"] == ["3.11"] and d["claims_without_wheel"] == []
    (d,) = ct.compare([("tensorflow", "torch", "1.13.1", "3.10-3.12")], wheels)
    assert d["claims_without_wheel"] == ["3.12"]
    assert ct.compare([("pytorch", "torch", "1.13.1", ">=3.10,<3.12"), ("jax", "torch", "1.13.1", ">=3.10")],
                      wheels) == []
    assert ct.compare([("pytorch", "torch", "9.9.9", ">=3.10")], wheels) == []  # no wheel on PyPI: not judged
