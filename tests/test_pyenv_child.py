"""The environment probe's child runs in the user's interpreter on every `check`; it matches names with string
operations instead of importing re, and writes its answer without importing json (together a third of its start).
Each string operation answers exactly what the pattern beside it answers, and the answer is json.dumps's text."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.probes import pyenv_child as child

# Real distribution names and directory names, and their near misses.
NAMES = ["torch", "torchvision", "torchaudio", "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly",
         "tf-keras", "jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda-plugin", "jax-cuda12x-plugin",
         "jax-cuda١٢-plugin", "jax-cuda²-plugin", "cupy", "cupy-cuda12x", "cupy-cuda", "cupy-cuda12-x",
         "paddlepaddle", "paddlepaddle-gpu", "onnxruntime", "onnxruntime-gpu", "tensorrt", "tensorrt-cu12",
         "tensorrt-cu12-libs", "tensorrt_libs", "tensorrt-", "nvidia-", "nvidia-cudnn-cu12", "nvidia-nccl-cu12",
         "nvidia-ml-py", "nvidia_cudnn_cu12", "Torch", "torch\n", "torch\n\n", "torchx", "xtorch", "numpy", "",
         "nvidia-é", "cupy-cudaé", "tensorrt-\u0661"]
DIRS = ["torch-2.5.1+cu124.dist-info", "nvidia_cudnn_cu12-9.1.0.70.dist-info", "foo-1.0-py3.8.egg-info",
        "foo-1.0.egg-info", "foo.bar-1.dist-info", "_foo-1.dist-info", ".foo-1.dist-info", "foo-.dist-info",
        "-1.dist-info", "foo-1.dist-info\n", "foo-1.dist-info\n\n", "foo-1\n.dist-info", "foo-bar-1.dist-info",
        "foo-1.egg-info.dist-info", "foo-1.dist-infox", "Ⅻ-1.dist-info", "K-1.dist-info", "foo-1.DIST-INFO",
        "foo-1.0.dist-info", "foo--1.dist-info", "foo-1-.dist-info"]


def _pattern_interesting(key: str) -> bool:
    return re.match(child.INTERESTING_PATTERN, key) is not None


def _pattern_dist_dir(d: str) -> tuple[str, str] | None:
    m = re.match(child.DIST_DIR_PATTERN, d)
    return (m.group(1), m.group(2)) if m else None


def test_the_string_matching_answers_as_the_patterns_on_real_names_and_near_misses() -> None:
    for name in NAMES:
        for key in (name, child.norm(name)):
            assert child.interesting(key) == _pattern_interesting(key), repr(key)
        assert child.norm(name) == re.sub(r"[-_.]+", "-", name).lower()
    for d in DIRS:
        assert child.dist_dir(d) == _pattern_dist_dir(d), repr(d)


ALPHABET = st.sampled_from([*"-_.abcdejklnoprstuvx0129XKé١²\n ", "cuda", "jax", "cupy", "tensorrt", "nvidia", "plugin",
                            "pjrt", "dist-info", "egg-info"])


@settings(max_examples=400, deadline=None)
@given(st.lists(ALPHABET, max_size=8).map("".join))
def test_the_string_matching_answers_as_the_patterns_on_any_name(text: str) -> None:
    assert child.interesting(text) == _pattern_interesting(text)
    assert child.interesting(child.norm(text)) == _pattern_interesting(child.norm(text))
    assert child.norm(text) == re.sub(r"[-_.]+", "-", text).lower()
    for d in (text, text + ".dist-info", "a" + text + ".egg-info", "x-" + text + ".dist-info"):
        assert child.dist_dir(d) == _pattern_dist_dir(d)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=20))
def test_the_answer_is_the_text_json_writes(value: object) -> None:
    assert child.dumps(value) == json.dumps(value)


def test_the_usual_run_imports_neither_re_nor_json(tmp_path: Path) -> None:
    """Run as the probe runs it (python -c SOURCE) in an environment with torch and an nvidia wheel: the same
    answer as before, and neither module imported."""
    site = tmp_path / "site"
    for d in ("torch-2.5.1+cu124.dist-info", "nvidia_cudnn_cu12-9.1.0.70.dist-info", "numpy-2.0.dist-info"):
        (site / d).mkdir(parents=True)
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text("cuda = '12.4'\n")
    (site / "torch-2.5.1+cu124.dist-info" / "METADATA").write_text(
        "Name: torch\nRequires-Dist: nvidia-cudnn-cu12==9.1.0.70; platform_system == \"Linux\"\n\nbody\n")
    source = Path(child.__file__).read_text() + (
        "\nsys.stderr.write(' '.join(m for m in ('re', 'json') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-S", "-c", source], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(site)})
    assert proc.returncode == 0 and proc.stderr == ""
    answer = json.loads(proc.stdout.split("@@GPU-DOCTOR@@")[1])
    got = {p["name"]: p for p in answer["packages"]}
    assert set(got) == {"torch", "nvidia-cudnn-cu12"}
    assert got["torch"]["version"] == "2.5.1+cu124" and got["torch"]["files"] == {"torch/version.py": "cuda = '12.4'\n"}
    assert got["torch"]["requires"] == ['nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux"']
