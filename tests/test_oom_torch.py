"""`oom --framework torch` and `smoke --nccl` in the target environment: for real on the CPU-only torch 2.13.0
venv (a clean finding, not a crash), and the judging of what a GPU run reports, table-tested."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from doctor.checks.active import torchmem
from doctor.model.facts_active import TorchRun, coerce
from doctor.model.findings import Finding

# The judges read the typed facts a runner records: each case below is given as the child reported it.


def judge(run: dict[str, Any], timeout: float) -> list[Finding]:
    return torchmem.judge(coerce(TorchRun, run), timeout)


GPU_DOCTOR = Path(sys.executable).with_name("gpu-doctor")
GIB = 1 << 30


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_") and k != "LD_LIBRARY_PATH"}
    result = subprocess.run([str(GPU_DOCTOR), *args], capture_output=True, text=True, env=env, timeout=300,
                            check=False)
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.mark.slow
def test_cpu_only_torch_oom_is_cpu_only_build(torch_venv: Path) -> None:
    result = run("oom", "--framework", "torch", "--python", str(torch_venv), "--json", "-q")
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    (f,) = doc["findings"]
    assert (f["code"], f["severity"], f["area"]) == ("framework.cpu_only_build", "fail", "Active tests")
    assert f["title"].startswith("torch 2.13.0+cpu in ")
    assert doc["active"]["summary"].startswith("torch OOM probe: torch 2.13.0+cpu in ")
    assert [(c["id"], c["status"]) for c in doc["checks"]] == [("active.torch", "fail")]


@pytest.mark.slow
def test_cpu_only_torch_nccl_needs_two_gpus(torch_venv: Path) -> None:
    result = run("smoke", "--nccl", "--python", str(torch_venv), "-q")
    assert result.returncode == 0, result.stdout
    assert ": RuntimeError: the NCCL all-reduce needs ≥2 CUDA GPUs; torch 2.13.0+cpu sees 0 (a CPU-only build)" \
        in result.stdout


GOOD: dict[str, Any] = {
    "mode": "oom", "python": "/p", "installed": True, "version": "2.5.1+cu124", "ok": True,
    "alloc": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "backend": "native"},
    "mem_get_info_before": [79 * GIB, 80 * GIB], "oom": {"text": "torch.OutOfMemoryError: CUDA out of memory."},
    "oom_is_OutOfMemoryError": True, "allocated_at_oom": 78 * GIB, "reserved_after_del": 78 * GIB,
    "reserved_after_empty_cache": 0, "mem_get_info_after": [79 * GIB, 80 * GIB], "recovered": True,
    "end": {"event": "exit", "returncode": 0}}


def test_a_clean_oom_and_recovery() -> None:
    assert [(f.code, f.severity, f.title) for f in judge(GOOD, 60)] == [
        ("oom.allocator", "info", "torch 2.5.1+cu124 in /p: allocator "
                                  "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, backend native"),
        ("oom.torch", "ok", "torch 2.5.1+cu124 in /p: torch.cuda.OutOfMemoryError raised cleanly with 78.00 GiB "
                            "allocated of 79.00 GiB free / 80.00 GiB"),
        ("oom.released", "ok", "torch 2.5.1+cu124 in /p: empty_cache() gave every byte back (reserved 78.00 GiB "
                               "after del → 0; free 79.00 GiB)"),
        ("oom.recovery", "ok", "torch 2.5.1+cu124 in /p: the GPU computes correctly after the OOM"),
    ]


def test_memory_kept_after_empty_cache_and_no_recovery() -> None:
    bad = {**GOOD, "reserved_after_empty_cache": 2 * GIB, "mem_get_info_after": [77 * GIB, 80 * GIB],
           "recovered": False, "oom_is_OutOfMemoryError": False, "alloc": {}}
    got = {f.code: (f.severity, f.title) for f in judge(bad, 60)}
    assert got["oom.allocator"][1].endswith("allocator defaults (PYTORCH_CUDA_ALLOC_CONF not set)")
    assert got["oom.torch"][0] == "warn" and got["oom.released"][0] == "warn" and got["oom.recovery"][0] == "fail"


@pytest.mark.parametrize(("text", "code", "severity"), [
    ("RuntimeError: the NCCL all-reduce did not finish within 50 s (a hung collective)", "multigpu.nccl_hang", "fail"),
    ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
     "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3", "multigpu.nccl_failed",
     "fail"),
    ("RuntimeError: NCCL worker 1 exited 1: RuntimeError: CUDA error: no kernel image is available for execution on "
     "the device", "framework.arch_unsupported", "fail"),
])
def test_allreduce_errors_map_to_findings(text: str, code: str, severity: str) -> None:
    run_ = {"mode": "allreduce", "python": "/p", "installed": True, "version": "2.5.1+cu124", "ok": False,
            "error": {"text": text, "step": "NCCL all-reduce: 2 processes, one per GPU"}}
    (f,) = judge(run_, 60)
    assert (f.code, f.severity, f.area) == (code, severity, "Multi-GPU (NCCL)")


def test_allreduce_bus_bandwidth() -> None:
    sizes = [{"bytes": 1 << 20, "us": 30.0, "algbw": 35.0, "busbw": 61.2, "correct": True},
             {"bytes": 256 << 20, "us": 1500.0, "algbw": 179.0, "busbw": 313.2, "correct": True}]
    run_ = {"mode": "allreduce", "python": "/p", "installed": True, "version": "2.5.1+cu124", "ok": True,
            "allreduce": {"world": 8, "sizes": sizes}}
    (f,) = judge(run_, 60)
    assert (f.severity, f.title) == ("ok", "torch 2.5.1+cu124 in /p: NCCL all-reduce across 8 GPUs, bus bandwidth "
                                           "313.2 GB/s at 256 MiB")
    (g,) = judge({**run_, "allreduce": {"world": 8, "sizes": [{**sizes[0], "correct": False}]}}, 60)
    assert g.severity == "fail" and g.title.endswith("; WRONG results at 1 size(s)")


FAKE_TORCH = '''
__version__ = "2.5.1+cu124"


class version:
    cuda = "12.4"


class cuda:
    device_count = staticmethod(lambda: 2)
    get_device_name = staticmethod(lambda i: "Fake GPU")
    set_device = staticmethod(lambda i: None)

    class nccl:
        version = staticmethod(lambda: (2, 21, 5))


def zeros(*args, **kwargs):
    return None
'''
FAKE_DIST = '''
def is_nccl_available():
    return True


def init_process_group(*args, **kwargs):
    raise RuntimeError("CUDA error: no kernel image is available for execution on the device")
'''


def test_a_failed_nccl_worker_is_reported_with_its_own_words(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The real child and its real worker processes, with a torch that sees two GPUs and whose NCCL set-up
    fails: the worker's stderr arrives decoded (text, not a b'…' literal) and is judged like a GPU run's."""
    from doctor.active.events import last_outcome
    from doctor.active.torchmem import torch_events
    from doctor.pipeline import judged

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(FAKE_TORCH)
    (tmp_path / "torch" / "distributed.py").write_text(FAKE_DIST)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    outcome = last_outcome(judged(torch_events([sys.executable], "allreduce", timeout=120, max_mib=1)))
    (run,) = outcome.results["torch"]
    text = run["error"]["text"]
    assert text.startswith("RuntimeError: NCCL worker 0 exited 1: Traceback (most recent call last):\n"), text
    assert text.endswith("\nRuntimeError: CUDA error: no kernel image is available for execution on the device")
    assert "b'" not in text and "\\n" not in text
    (f,) = outcome.findings
    assert (f.code, f.severity) == ("framework.arch_unsupported", "fail")


# --- progress: the percentage a user watches advances with the child's steps ----------------------------------

FAKE_TORCH_OOM = '''
__version__ = "2.11.0+cu130"
uint8 = "uint8"
GIB = 1 << 30


class version:
    cuda = "13.0"


class _Tensor:
    def __matmul__(self, other):
        return self

    def __eq__(self, other):
        return self

    def all(self):
        return self

    def item(self):
        return True


class cuda:
    class OutOfMemoryError(RuntimeError):
        pass

    held = [0]
    get_device_name = staticmethod(lambda i: "Fake GPU")
    mem_get_info = staticmethod(lambda: (8 * GIB - cuda.held[0], 8 * GIB))
    memory_allocated = staticmethod(lambda: cuda.held[0])
    memory_reserved = staticmethod(lambda: cuda.held[0])
    empty_cache = staticmethod(lambda: cuda.held.__setitem__(0, 0))
    get_allocator_backend = staticmethod(lambda: "native")


def zeros(*args, **kwargs):
    return _Tensor()


def ones(*args, **kwargs):
    return _Tensor()


def empty(n, dtype=None, device=None):
    if cuda.held[0] + n > 6 * GIB:
        raise cuda.OutOfMemoryError("CUDA out of memory")
    cuda.held[0] += n
    return _Tensor()
'''


def test_the_torch_oom_progress_advances_with_each_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lent H100's `oom --framework torch` printed "[  0%]" from its first line to its last: each step of the
    child now says how far it is (step k of 5), and the line on stderr follows it."""
    import io

    from doctor.active.events import StderrProgress, last_outcome
    from doctor.active.torchmem import torch_events

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(FAKE_TORCH_OOM)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    stream = io.StringIO()
    outcome = last_outcome(torch_events([sys.executable], "oom", timeout=120), StderrProgress(stream))
    (run_,) = outcome.results["torch"]
    assert run_["ok"] is True and run_["recovered"] is True, run_
    lines = stream.getvalue().splitlines()
    assert [line[:6] for line in lines] == ["[  0%]", "[  0%]", "[ 20%]", "[ 40%]", "[ 60%]", "[ 80%]"], lines
    assert lines[-1] == "[ 80%] torch: after the OOM: a matrix product on the GPU"


def test_a_batch_search_plans_at_most_its_longest_search() -> None:
    from doctor.active import torch_child

    for cap in (1, 2, 1024, 4096, 5000):
        tries = max(len(torch_child.largest_fitting(lambda n, fit=fit: n <= fit, cap)[1])
                    for fit in range(0, cap + 1, max(1, cap // 97)))
        assert 3 + tries <= torch_child.planned_steps("batch", cap), cap


def test_each_child_plans_as_many_steps_as_its_tests_take() -> None:
    """framework_child's STEPS is the number of step() calls each framework's test makes (torch's includes the
    tensor-core step): a percentage that stops short of the end, or runs past it, is a miscount."""
    import ast
    import inspect

    from doctor.active import framework_child

    def calls(fn: Any) -> int:
        tree = ast.parse(inspect.getsource(fn))
        return sum(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "step" for n in ast.walk(tree))

    counted = {name: calls(test) for name, test in framework_child.TESTS.items()}
    counted["torch"] += calls(framework_child.tensor_core_rates)
    assert counted == framework_child.STEPS


@pytest.mark.parametrize(("fraction", "shown"), [(0.25, 0.25), (0, 0.0), (1, 1.0), (7, 1.0), (-3, 0.0),
                                                 (float("nan"), 0.0), (float("inf"), 1.0), (True, 0.0),
                                                 ("0.5", 0.0), (None, 0.0), ([0.5], 0.0)])
def test_a_childs_fraction_is_a_number_in_0_1_whatever_it_sent(fraction: Any, shown: float) -> None:
    from doctor.active.events import child_fraction

    assert child_fraction({"event": "step", "fraction": fraction}) == shown
