"""The OOM probe against the fake libcuda.so.1: its answers (largest block, total, number of allocation
calls, memory released) compared with the memory the fake was configured with. See test_smoke_fake.py for
how the fakes are built and found."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_smoke_fake import A100, MIB, build_fakes, env_for, gpu_doctor

from doctor.active import gpu_child
from doctor.active.events import Outcome, Progress, last_outcome
from doctor.active.gpu import Options, oom_events
from doctor.pipeline import judged


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fakes(tmp_path_factory)


def oom(libs: Path, force: bool = False, **knobs: Any) -> Outcome:
    return last_outcome(judged(oom_events(Options(force=force, timeout=20, env=env_for(libs, **knobs)))))


def finding(out: Outcome, code: str) -> Any:
    (f,) = [f for f in out.findings if f.code == code]
    return f


@pytest.fixture(scope="module")
def h100(fake_driver: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Outcome, list[str]]:
    """An 80 GiB card: a context costs 500 MiB, the driver keeps 300 MiB that cuMemGetInfo calls free."""
    log = tmp_path_factory.mktemp("oom") / "fake_cuda.log"
    out = oom(fake_driver, FAKE_CUDA_MEM_MIB=81920, FAKE_NVML_GPU0_MEM_TOTAL_MIB=81920,
              FAKE_NVML_GPU0_MEM_USED_MIB=0, FAKE_CUDA_CTX_MIB=500, FAKE_CUDA_NVML_SYNC=1,
              FAKE_CUDA_OOM_AT=(81920 - 500 - 300) * MIB, FAKE_CUDA_LOG=log,
              FAKE_NVML_GPUS="NVIDIA H100 80GB HBM3", FAKE_CUDA_NAMES="NVIDIA H100 80GB HBM3")
    return out, log.read_text().splitlines()


def test_largest_block_and_total_are_the_configured_truth(h100: tuple[Outcome, list[str]]) -> None:
    out, _log = h100
    g = out.results["gpus"][0]
    assert g["cuda_free"] == (81920 - 500) * MIB
    assert g["largest_block"] == 81120 * MIB
    assert g["total_allocatable"] == 81120 * MIB
    assert g["total_blocks"] == 1


def test_the_search_takes_few_calls_on_an_80gb_card(h100: tuple[Outcome, list[str]]) -> None:
    out, log = h100
    g = out.results["gpus"][0]
    assert g["largest_calls"] <= 16  # 300 MiB under the free memory: 9 galloping down, 7 bisecting
    allocs = [line for line in log if line.startswith("alloc ")]
    recovery = 3  # the saxpy kernel's x, y and out after the OOM
    assert len(allocs) == g["largest_calls"] + g["total_calls"] + recovery  # the probe counts what it does
    assert allocs[-recovery - 1].endswith("rc=2")  # the last probing call ran out of memory


def test_every_byte_is_released_and_the_context_recovers(h100: tuple[Outcome, list[str]]) -> None:
    out, log = h100
    assert finding(out, "oom.released").title == "GPU 0 (NVIDIA H100 80GB HBM3): every byte was released " \
                                                 "(81,420 MiB free again)"
    assert finding(out, "oom.recovery").title == ("GPU 0 (NVIDIA H100 80GB HBM3): after running out of memory the "
                                                  "context still works: a new allocation and a kernel (65,536 "
                                                  "elements exact)")
    assert log[-1] == "ctx_destroy dev=0 leaked_allocations=0 leaked_bytes=0"


def test_capacity_explains_the_gap_to_nvml(h100: tuple[Outcome, list[str]]) -> None:
    out, _log = h100
    f = finding(out, "oom.capacity")
    assert (f.severity, f.title) == ("ok", "GPU 0 (NVIDIA H100 80GB HBM3): 81,120 MiB allocatable in total, largest "
                                           "single block 81,120 MiB; NVML reported 81,920 MiB free of 81,920 MiB")
    assert f.detail == ("Where the memory went: this test's own CUDA context takes 500 MiB (every process pays this "
                        "once per GPU); 300 MiB that cuMemGetInfo reports free could not be allocated (the driver's "
                        "page tables and reserve).")
    assert out.status == "ok"


def test_fragmented_memory_warns_that_one_big_tensor_does_not_fit(fake_driver: Path) -> None:
    out = oom(fake_driver, FAKE_CUDA_MEM_MIB=1024, FAKE_CUDA_USED_MIB=100, FAKE_CUDA_CTX_MIB=50,
              FAKE_CUDA_MAX_BLOCK_MIB=300)
    g = out.results["gpus"][0]
    assert (g["largest_block"], g["total_allocatable"]) == (300 * MIB, 874 * MIB)
    f = finding(out, "oom.capacity")
    assert f.severity == "warn"
    assert "free memory is fragmented: the largest single block is 300 MiB, 574 MiB less than the total" in f.detail


def test_granule_rounding_and_odd_free_memory(fake_driver: Path) -> None:
    out = oom(fake_driver, FAKE_CUDA_MEM_MIB=1001)  # 1001 MiB free: 500 pages of 2 MiB fit, not 501
    g = out.results["gpus"][0]
    assert (g["largest_block"], g["total_allocatable"]) == (1000 * MIB, 1000 * MIB)


@pytest.fixture(scope="module")
def trainer() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([shutil.which("sleep") or "/bin/sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()


def test_refuses_when_another_process_computes_and_allocates_nothing(
        fake_driver: Path, trainer: subprocess.Popen[bytes], tmp_path: Path) -> None:
    log = tmp_path / "fake_cuda.log"
    out = oom(fake_driver, FAKE_NVML_GPU0_PROCS=f"{trainer.pid}:1000", FAKE_CUDA_LOG=log)
    f = finding(out, "oom.refused")
    assert (f.severity, f.title) == ("warn", f"GPU 0 ({A100}): the OOM probe did not run: sleep (pid {trainer.pid}, "
                                             "1,000 MiB) uses this GPU")
    assert f.fix is not None and "--force" in f.fix.summary
    assert not log.exists() or "ctx_create" not in log.read_text()


def test_force_runs_it_and_names_the_other_process_in_the_gap(
        fake_driver: Path, trainer: subprocess.Popen[bytes]) -> None:
    out = oom(fake_driver, force=True, FAKE_NVML_GPU0_PROCS=f"{trainer.pid}:1000", FAKE_CUDA_USED_MIB=1000,
              FAKE_NVML_GPU0_MEM_USED_MIB=1000)
    f = finding(out, "oom.capacity")
    assert f.title == (f"GPU 0 ({A100}): 39,960 MiB allocatable in total, largest single block 39,960 MiB; NVML "
                       "reported 39,960 MiB free of 40,960 MiB")
    assert f"other processes hold 1,000 MiB: sleep (pid {trainer.pid}, 1,000 MiB)" in f.detail


def test_out_of_memory_creating_the_context_is_a_finding(fake_driver: Path) -> None:
    out = oom(fake_driver, FAKE_CUDA_MEM_MIB=1024, FAKE_CUDA_USED_MIB=1000, FAKE_CUDA_CTX_MIB=300)
    f = finding(out, "gpu.oom")
    assert f.title == f"GPU 0 ({A100}): cuCtxCreate_v2 failed with CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"


def test_cli_oom_text_and_exit_code(fake_driver: Path) -> None:
    result = gpu_doctor(fake_driver, "oom", "-q", FAKE_CUDA_MEM_MIB=2048, FAKE_CUDA_MAX_BLOCK_MIB=1024)
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    assert "Active tests" in lines
    assert (f"  ! GPU 0 ({A100}): 2,048 MiB allocatable in total, largest single block 1,024 MiB; NVML reported "
            "40,448 MiB free of 40,960 MiB") in lines
    strict = gpu_doctor(fake_driver, "oom", "-q", "--strict", FAKE_CUDA_MEM_MIB=2048, FAKE_CUDA_MAX_BLOCK_MIB=1024)
    assert strict.returncode == 1


def test_the_oom_probes_progress_has_one_share_per_step(fake_driver: Path) -> None:
    events = list(judged(oom_events(Options(timeout=20, env=env_for(fake_driver)))))
    fractions = sorted({e.fraction for e in events if isinstance(e, Progress) and e.fraction is not None})
    n = gpu_child.STEPS["oom"][1]
    assert fractions == [round(k / n, 4) for k in range(n)]  # the last step ("destroying the context") at 6/7, not 75 %


class Pages:
    """A driver whose cuMemAlloc_v2 grants up to ``largest`` bytes: what largest_block searches for."""

    def __init__(self, largest: int) -> None:
        self.largest, self.calls = largest, 0

    def try_alloc(self, size: int) -> tuple[int, int]:
        self.calls += 1
        return (0, 1) if size <= self.largest else (gpu_child.OUT_OF_MEMORY, 0)

    def free(self, ptr: int) -> None:
        pass


@pytest.mark.parametrize("below", [0, 1, 2, 3, 7, 150, 1000, 20_000, 40_959, 40_960])
def test_the_largest_block_is_found_exactly_and_within_the_call_bound(below: int) -> None:
    free_pages = 40_960  # 80 GiB in 2 MiB pages
    drv = Pages((free_pages - below) * gpu_child.GRANULE)
    largest, calls = gpu_child.largest_block(drv, free_pages * gpu_child.GRANULE, lambda *_a, **_k: None)
    assert largest == (free_pages - below) * gpu_child.GRANULE
    assert calls == drv.calls <= 2 * free_pages.bit_length() + 2
    if below <= 1:  # an idle GPU, like the H100 of tests/data/gpu-validate (80,550 of 80,552 MiB): two calls
        assert calls <= 2
