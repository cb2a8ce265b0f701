"""The torch framework smoke test's bf16/fp16 matrix products against the tensor-core peak.

There is no GPU here, so: the judging on hand-built results (with and without a reviewed peak), the child's
TFLOP/s arithmetic and its timing loop on a stand-in torch module, and the real CPU-only torch 2.13.0 venv,
where the step is never reached and the existing `framework.cpu_only_build` finding stays the only one.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from doctor.active import framework_child
from doctor.active.events import Outcome
from doctor.active.frameworks import framework_events
from doctor.checks.active import frameworks, gpu
from doctor.checks.active.gpu import TENSOR_MIN_RATIO, tensor_core_peak
from doctor.model.facts_active import FrameworkRun, TensorRate, coerce
from doctor.model.findings import Finding
from doctor.pipeline import judged

# The judges read the typed facts a runner records: each case below is given as the child reported it.


def judge_run(run: dict[str, Any], timeout: float, matrix: Any = None) -> list[Finding]:
    return frameworks.judge_run(coerce(FrameworkRun, run), timeout, matrix)


def tensor_core_findings(who: str, gpu_name: str | None, rates: dict[str, Any] | None, matrix: Any) -> list[Finding]:
    return gpu.tensor_core_findings(who, gpu_name, coerce(dict[str, TensorRate], rates), matrix)


class StubMatrix:
    """matrix.gpu(name) -> row, as doctor.matrix.Matrix answers it."""

    def __init__(self, rows: dict[str, dict[str, Any]]) -> None:
        self.rows = rows

    def gpu(self, name: str | None) -> dict[str, Any] | None:
        return self.rows.get(name or "")


def rate(tflops: float) -> dict[str, Any]:
    return {"tflops": tflops, "n": 8192, "iters": 10, "warmup": 3, "seconds": 2 * 8192 ** 3 * 10 / tflops / 1e12}


GPU = "NVIDIA Test GPU"
PEAKS = StubMatrix({GPU: {"name": GPU, "bf16_tflops": 300.0, "fp16_tflops": 300.0, "source": "datasheet-url"}})
NO_PEAKS = StubMatrix({GPU: {"name": GPU, "fp32_tflops": 19.5, "source": "datasheet-url"}})

# (id, matrix, rates, expected [(code, severity, title suffix)])
CASES: list[tuple[str, Any, dict[str, Any], list[tuple[str, str, str]]]] = [
    ("no matrix", None, {"bf16": rate(250.0), "fp16": rate(251.0)},
     [("gpu.underperforming", "info", "bf16 matrix product (tensor cores) 250 TFLOP/s"),
      ("gpu.underperforming", "info", "fp16 matrix product (tensor cores) 251 TFLOP/s")]),
    ("row without a peak", NO_PEAKS, {"bf16": rate(95.4), "fp16": rate(96.0)},
     [("gpu.underperforming", "info", "bf16 matrix product (tensor cores) 95.4 TFLOP/s"),
      ("gpu.underperforming", "info", "fp16 matrix product (tensor cores) 96.0 TFLOP/s")]),
    ("near the peak", PEAKS, {"bf16": rate(240.0), "fp16": rate(210.0)},
     [("gpu.underperforming", "ok", "bf16 matrix product (tensor cores) 240 TFLOP/s, 80% of the tensor-core peak "
       "(300 TFLOP/s)"),
      ("gpu.underperforming", "ok", "fp16 matrix product (tensor cores) 210 TFLOP/s, 70% of the tensor-core peak "
       "(300 TFLOP/s)")]),
    ("far below the peak", PEAKS, {"bf16": rate(60.0), "fp16": rate(240.0)},
     [("gpu.underperforming", "warn", "bf16 matrix product (tensor cores) 60.0 TFLOP/s: only 20% of the tensor-core "
       "peak (300 TFLOP/s)"),
      ("gpu.underperforming", "ok", "fp16 matrix product (tensor cores) 240 TFLOP/s, 80% of the tensor-core peak "
       "(300 TFLOP/s)")]),
    ("bf16 skipped before Ampere", PEAKS, {"bf16": {"skipped": "bf16 needs compute capability 8.0 or newer"},
                                           "fp16": rate(30.0)},
     [("gpu.underperforming", "warn", "fp16 matrix product (tensor cores) 30.0 TFLOP/s: only 10% of the tensor-core "
       "peak (300 TFLOP/s)")]),
    ("nothing measured", PEAKS, {}, []),
]


@pytest.mark.parametrize(("matrix", "rates", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_tensor_core_judgement(matrix: Any, rates: dict[str, Any], expected: list[tuple[str, str, str]]) -> None:
    found = tensor_core_findings("torch 2.5.1 in /p", GPU, rates, matrix)
    assert [(f.code, f.severity, f.title) for f in found] == [
        (code, sev, "torch 2.5.1 in /p: " + suffix) for code, sev, suffix in expected]
    for f in found:
        assert f.evidence[0].fact in ("framework.bf16_tflops", "framework.fp16_tflops")
        if f.severity == "info":
            assert "No reviewed tensor-core peak is recorded" in f.detail
            assert len(f.evidence) == 1  # no invented peak
        else:
            assert f.evidence[1].source == "datasheet-url"
        if f.severity == "warn":
            assert "tensor cores" in f.detail and f"{TENSOR_MIN_RATIO:.0%}" in f.detail
            assert f.fix is not None


def test_a_peak_is_only_a_positive_number_in_the_row() -> None:
    assert tensor_core_peak({"bf16_tflops": 312}, "bf16") == 312.0
    assert tensor_core_peak({"bf16_tflops": 312}, "fp16") is None
    assert tensor_core_peak({"fp16_tflops": 0}, "fp16") is None
    assert tensor_core_peak(None, "fp16") is None


def test_the_bundled_matrix_records_no_tensor_core_peak_it_cannot_source() -> None:
    from doctor.matrix import bundled

    rows = bundled().rows("gpus", "gpu")
    peaks = [r for r in rows if "bf16_tflops" in r or "fp16_tflops" in r]
    assert {r["name"] for r in peaks} >= {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S"}
    for r in peaks:  # a dense peak says where it was read and how the sparse figure was halved
        assert str(r.get("spec_source", "")).startswith("https://") and r.get("spec_note"), r["name"]
        assert all(0 < r.get(k, 1) < 10_000 for k in ("bf16_tflops", "fp16_tflops")), r["name"]


def test_judge_run_adds_the_figures_to_a_passing_torch_run() -> None:
    run = {"framework": "torch", "python": "/p", "installed": True, "version": "2.5.1+cu124", "ok": True,
           "gpu_name": GPU, "matmul_tflops": {"bf16": rate(60.0), "fp16": rate(250.0)}}
    plain = judge_run(run, 60)
    assert [(f.code, f.severity, f.area) for f in plain] == [("gpu.underperforming", "info",
                                                              "Framework smoke test")] * 2
    assert plain[0].title == f"torch 2.5.1+cu124 in /p, {GPU}: bf16 matrix product (tensor cores) 60.0 TFLOP/s"
    assert plain[0].evidence[0].source.startswith("torch.matmul: 8192×8192 bf16, 10 iterations")
    judged = judge_run(run, 60, PEAKS)
    assert [f.severity for f in judged] == ["warn", "ok"]


@pytest.mark.parametrize(("n", "iters", "seconds", "want"), [
    (8192, 10, 1.0, 2 * 8192 ** 3 * 10 / 1e12),  # 10.995 TFLOP in one second
    (8192, 10, 0.05, 219.902325555),
    (4096, 1, 1e-3, 137.438953472),
    (1, 1, 2.0, 1e-12),
])
def test_child_tflops_is_two_n_cubed_per_iteration_over_seconds(n: int, iters: int, seconds: float,
                                                                 want: float) -> None:
    assert framework_child.tflops(n, iters, seconds) == pytest.approx(want)


@pytest.mark.parametrize("seconds", [0, 0.0, -1.0, None])
def test_child_tflops_of_no_time_is_none(seconds: Any) -> None:
    assert framework_child.tflops(8192, 10, seconds) is None


class _StubEvent:
    def __init__(self, log: list[str], enable_timing: bool = False) -> None:
        assert enable_timing
        self.log = log

    def record(self) -> None:
        self.log.append("record")

    def synchronize(self) -> None:
        self.log.append("event.synchronize")

    def elapsed_time(self, other: _StubEvent) -> float:
        return 50.0  # milliseconds, as torch.cuda.Event.elapsed_time returns


def _stub_torch(capability: tuple[int, int], log: list[str]) -> Any:
    def matmul(a: Any, b: Any, out: Any) -> None:
        log.append(f"matmul {a.dtype}")

    def rand(*shape: int, device: str, dtype: str) -> Any:
        assert device == "cuda" and shape == (framework_child.TC_N, framework_child.TC_N)
        return SimpleNamespace(dtype=dtype)

    cuda = SimpleNamespace(get_device_capability=lambda i: capability,
                           Event=lambda enable_timing=False: _StubEvent(log, enable_timing),
                           synchronize=lambda: log.append("cuda.synchronize"), empty_cache=lambda: None)
    return SimpleNamespace(bfloat16="bf16", float16="fp16", cuda=cuda, matmul=matmul, rand=rand, empty=rand)


def test_child_times_warmed_up_products_between_synchronised_cuda_events() -> None:
    log: list[str] = []
    out: dict[str, Any] = {}
    framework_child.tensor_core_rates(_stub_torch((9, 0), log), out)
    n, warm, iters = framework_child.TC_N, framework_child.TC_WARMUP, framework_child.TC_ITERS
    one = [*["matmul bf16"] * warm, "cuda.synchronize", "record", *["matmul bf16"] * iters, "record",
           "event.synchronize"]
    assert log == one + [x.replace("bf16", "fp16") for x in one]
    for dtype in ("bf16", "fp16"):
        assert out["matmul_tflops"][dtype] == {"tflops": pytest.approx(2 * n ** 3 * iters / 0.05 / 1e12), "n": n,
                                               "iters": iters, "warmup": warm, "seconds": 0.05}


def test_child_skips_bf16_before_ampere() -> None:
    log: list[str] = []
    out: dict[str, Any] = {}
    framework_child.tensor_core_rates(_stub_torch((7, 5), log), out)
    assert out["matmul_tflops"]["bf16"] == {"skipped": "bf16 needs compute capability 8.0 or newer"}
    assert out["matmul_tflops"]["fp16"]["tflops"] > 0
    assert "matmul bf16" not in log


@pytest.mark.slow
def test_cpu_only_torch_never_reaches_the_tensor_core_step(torch_venv: Path) -> None:
    events = list(judged(framework_events([str(torch_venv / "bin" / "python")], ["torch"], timeout=120)))
    outcome = events[-1]
    assert isinstance(outcome, Outcome)
    assert [(f.code, f.severity) for f in outcome.findings] == [("framework.cpu_only_build", "fail")]
    (run,) = outcome.results["frameworks"]
    assert "matmul_tflops" not in run and run["error"]["step"] == "a tensor on cuda:0"
    assert not [e for e in events if "tensor cores" in str(getattr(e, "step", ""))]
