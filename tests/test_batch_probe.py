"""`oom --batch-probe MODULE:FACTORY`: the search is a pure function over try_batch(n) -> fits, tested with
Hypothesis against every monotone threshold; the torch runner around it runs for real on the CPU-only torch
2.13.0 venv (it must give the framework.cpu_only_build finding, not a crash), and its judging is table-tested."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from doctor.active.torch_child import largest_fitting
from doctor.checks.active import torchmem
from doctor.model.facts_active import TorchRun, coerce
from doctor.model.findings import Finding

# The judges read the typed facts a runner records: each case below is given as the child reported it.


def judge(run: dict[str, Any], timeout: float) -> list[Finding]:
    return torchmem.judge(coerce(TorchRun, run), timeout)


GPU_DOCTOR = Path(sys.executable).with_name("gpu-doctor")


def bound(cap: int) -> int:
    return 2 * math.ceil(math.log2(cap)) + 1


@given(cap=st.integers(1, 1 << 20), threshold=st.integers(0, 1 << 21))
def test_the_answer_is_the_largest_size_that_fits(cap: int, threshold: int) -> None:
    tried: list[int] = []

    def try_batch(n: int) -> bool:
        assert 1 <= n <= cap  # never asks for 0 or more than the cap
        tried.append(n)
        return n <= threshold

    n, trials = largest_fitting(try_batch, cap)
    assert n == min(threshold, cap)
    assert len(trials) == len(tried) <= bound(cap)
    assert len(set(tried)) == len(tried)  # no size is tried twice
    assert all(ok == (size <= threshold) for size, ok in trials)


@given(cap=st.integers(1, 1 << 16), threshold=st.integers(0, 1 << 16), fits_again=st.integers(1, 1 << 16))
def test_a_non_monotone_model_still_gets_an_answer_that_was_seen_to_fit(cap: int, threshold: int,
                                                                       fits_again: int) -> None:
    """Memory is not always monotone (allocator rounding, cuDNN picking another algorithm): the answer is then
    some size that really fitted when tried, never an untried one."""
    n, trials = largest_fitting(lambda n: n <= threshold or n == fits_again, cap)
    assert n == 0 or (n, True) in trials
    assert len(trials) <= bound(cap)


def test_doubling_then_bisection_in_order() -> None:
    n, trials = largest_fitting(lambda n: n <= 100, 4096)
    assert n == 100
    assert [s for s, _ in trials] == [1, 2, 4, 8, 16, 32, 64, 128, 96, 112, 104, 100, 102, 101]


def test_edges() -> None:
    assert largest_fitting(lambda n: False, 64) == (0, [(1, False)])
    assert largest_fitting(lambda n: True, 1) == (1, [(1, True)])
    assert largest_fitting(lambda n: True, 100)[0] == 100  # reaches the cap exactly, not the next power of two
    with pytest.raises(ValueError):
        largest_fitting(lambda n: True, 0)


def test_judged_with_the_memory_at_each_try() -> None:
    trials = [{"batch": b, "fits": b <= 48, "peak_allocated": b << 26, "reserved": b << 27} for b in (1, 2, 4, 8, 16,
                                                                                                       32, 64, 48)]
    run = {"mode": "batch", "python": "/p", "installed": True, "version": "2.5.1+cu124", "ok": True,
           "largest_batch": 48, "cap": 4096, "trials": trials, "end": {"event": "exit", "returncode": 0}}
    (f,) = judge(run, 60)
    assert (f.code, f.severity, f.title) == ("oom.batch_size", "ok", "torch 2.5.1+cu124 in /p: the largest batch that "
                                             "fits is 48, 8 tries (forward + backward)")
    assert f.detail.splitlines()[-2:] == ["batch     64: OOM   peak 4.00 GiB  reserved 8.00 GiB",
                                          "batch     48: fits  peak 3.00 GiB  reserved 6.00 GiB"]
    none = judge({**run, "largest_batch": 0, "gpu_name": "Tesla T4"}, 60)
    assert [(x.severity, x.title) for x in none] == [("fail", "torch 2.5.1+cu124 in /p: not even a batch of 1 fits on "
                                                              "Tesla T4")]
    broken = judge({**run, "ok": False, "error": {"text": "ImportError: No module named 'mymodel'",
                                                  "step": "importing mymodel:make"}}, 60)
    assert [x.code for x in broken] == ["oom.batch_probe_failed"]


@pytest.mark.slow
def test_cpu_only_torch_gives_cpu_only_build(torch_venv: Path, tmp_path: Path) -> None:
    (tmp_path / "tiny.py").write_text("import torch\n\ndef make():\n    m = torch.nn.Linear(4, 2)\n"
                                      "    return m, lambda n: torch.ones(n, 4)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_") and k != "LD_LIBRARY_PATH"}
    result = subprocess.run([str(GPU_DOCTOR), "oom", "--batch-probe", "tiny:make", "--python", str(torch_venv),
                             "--json", "-q"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
                            check=False)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    (f,) = doc["findings"]
    assert (f["code"], f["severity"], f["area"]) == ("framework.cpu_only_build", "fail", "Active tests")
    assert f["title"].endswith(": AssertionError: Torch not compiled with CUDA enabled")
    (run,) = doc["active"]["results"]["torch"]
    assert run["error"]["step"] == "a tensor on cuda:0"
