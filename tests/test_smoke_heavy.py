"""`smoke --level 3`: gpu-burn's output parsed into findings, on real outputs users pasted in public issues
(copied verbatim below, shortened only where marked), and the delegation with a stand-in gpu_burn on PATH."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from test_smoke_fake import build_fakes, gpu_doctor

from doctor.active.heavy import parse_gpu_burn
from doctor.checks.active import gpuburn
from doctor.model.facts_active import GpuBurn, coerce
from doctor.model.findings import Finding

# The judges read the typed facts a runner records: each case below is given as the child reported it.


def burn_findings(parsed: dict[str, Any], returncode: int | None, seconds: int) -> list[Finding]:
    return gpuburn.burn_findings(coerce(GpuBurn, parsed), returncode, seconds)


# github.com/wilicc/gpu-burn/issues/12 ("gpu_burn always exits 0"): 16 GPUs FAULTY, `echo $?` printed 0.
FAULTY_16 = """100.0%  proc'd: 18000 (6311 Gflop/s) - 12600 (6440 Gflop/s) - 11700 (6490 Gflop/s) - 11700 (6457 Gflop/s) - 11700 (6451 Gflop/s) - 10800 (6454 Gflop/s) - 10800 (6446 Gflop/s) - 10800 (6461 Gflop/s) - 10800 (6480 Gflop/s) - 10800 (6411 Gflop/s) - 10800 (6660 Gflop/s) - 11700 (6532 Gflop/s) - 10800 (6523 Gflop/s) - 10800 (6490 Gflop/s) - 10800 (6432 Gflop/s) - 10800 (6439 Gflop/s)   errors: 0 - -524288000  (WARNING!)- -524288000  (WARNING!)- -524288000  (WARNING!)- -524288000  (WARNING!)- 0 - 0 - 0 - 0 - -524288000  (WARNING!)- 0 - -524288000  (WARNING!)- 0 - 0 - -524288000  (WARNING!)- 0   temps: 51 C - 45 C - 48 C - 50 C - 49 C - 46 C - 46 C - 50 C - 51 C - 47 C - 46 C - 50 C - 50 C - 47 C - 47 C - 52 C 
Killing processes.. done

Tested 16 GPUs:
        GPU 0: FAULTY
        GPU 1: FAULTY
        GPU 2: FAULTY
        GPU 3: FAULTY
        GPU 4: FAULTY
        GPU 5: FAULTY
        GPU 6: FAULTY
        GPU 7: FAULTY
        GPU 8: FAULTY
        GPU 9: FAULTY
        GPU 10: FAULTY
        GPU 11: FAULTY
        GPU 12: FAULTY
        GPU 13: FAULTY
        GPU 14: FAULTY
        GPU 15: FAULTY
"""  # noqa: E501, W291 (verbatim)

# github.com/wilicc/gpu-burn/issues/124: a healthy A500, one GPU OK.
OK_1 = """Run length not specified in the command line. Using compare file: compare.ptx
Burning for 10 seconds.
GPU 0: NVIDIA RTX A500 Embedded GPU (UUID: GPU-6bd3cf32-0057-0f0b-2eb7-3af5ed6da5f2)
Initialized device 0 with 3897 MB of memory (3504 MB available, using 3154 MB of it), using FLOATS
Results are 268435456 bytes each, thus performing 10 iterations
60.0%  proc'd: 10 (2047 Gflop/s)   errors: 0   temps: 46 C
        Summary at:   Tue Nov 19 02:52:36 PM PST 2024

90.0%  proc'd: 20 (3500 Gflop/s)   errors: 0   temps: 46 C
        Summary at:   Tue Nov 19 02:52:39 PM PST 2024

100.0%  proc'd: 30 (3519 Gflop/s)   errors: 0   temps: 53 C

Killing processes with SIGTERM (soft kill)
Freed memory for dev 0
Uninitted cublas
done

Tested 1 GPUs:
        GPU 0: OK
"""

# github.com/wilicc/gpu-burn/issues/123: the test never started on 8 V100s, yet "OK" (the paste ends
# at GPU 4; GPUs 5-7 completed here in the same form).
INIT_FAILED_8 = """GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-e9f1360a-e941-dde5-d54a-9ba14c23644a)
Couldn't init a GPU test: Error: CUDA_ERROR_UNKNOWN
100.0%  proc'd: 0 (0 Gflop/s) - 0 (0 Gflop/s) - 0 (0 Gflop/s) - 0 (0 Gflop/s) - 0 (0 Gflop/s) - 0 (0 Gflop/s) - 0 (0 Gflop/s) - 0 (0 Gflop/s)   errors: 0 - 0 - 0 - 0 - 0 - 0 - 0 - 0   temps: 41 C - 40 C - 45 C - 42 C - 39 C - 39 C - 43 C - 41 C
Killing processes.. done

Tested 8 GPUs:
        GPU 0: OK
        GPU 1: OK
        GPU 2: OK
        GPU 3: OK
        GPU 4: OK
        GPU 5: OK
        GPU 6: OK
        GPU 7: OK
"""  # noqa: E501

# github.com/wilicc/gpu-burn/issues/69 (comment of 2023-04-17): every worker DIED, then the abort line.
DIED_8 = """30.0%  proc'd: -1 (0 Gflop/s) - -1 (0 Gflop/s) - -1 (0 Gflop/s) - -1 (0 Gflop/s) - -1 (0 Gflop/s) - -1 (0 Gflop/s) - -1 (0 Gflop/s) - -1 (0 Gflop/s)   errors: -533715488  (DIED!)- -533715488  (DIED!)- -533715488  (DIED!)- -533715488  (DIED!)- -533715488  (DIED!)- -533715488  (DIED!)- -533715488  (DIED!)- 1278531568  (DIED!)  temps: 30 C - 30 C - 30 C - 30 C - 29 C - 31 C - 30 C - 30 C 

No clients are alive!  Aborting
"""  # noqa: E501, W291


def test_faulty_gpus_fail_although_gpu_burn_exited_0() -> None:
    parsed = parse_gpu_burn(FAULTY_16)
    assert parsed["tested"] == 16 and set(parsed["verdicts"].values()) == {"FAULTY"}
    assert parsed["last_errors"][:3] == [0, -524288000, -524288000] and parsed["temps"][-1] == 52
    findings = burn_findings(parsed, 0, 60)
    assert len(findings) == 16 and {f.severity for f in findings} == {"fail"}
    assert findings[0].title == "GPU 0: gpu-burn found wrong results (FAULTY) under load although it exited 0"


def test_healthy_run_is_ok_with_its_hottest_temperature() -> None:
    (f,) = burn_findings(parse_gpu_burn(OK_1), 0, 10)
    assert (f.severity, f.title) == ("ok", "gpu-burn: 1 GPU(s) OK after 10 s under full load, hottest 53 C")


def test_ok_after_an_init_failure_is_not_believed() -> None:
    (f,) = burn_findings(parse_gpu_burn(INIT_FAILED_8), 0, 60)
    assert (f.severity, f.title) == ("fail", "gpu-burn could not start its test: Error: CUDA_ERROR_UNKNOWN")


def test_died_workers_and_the_abort_fail() -> None:
    parsed = parse_gpu_burn(DIED_8)
    assert parsed["died"] == list(range(8)) and parsed["aborted"] and parsed["tested"] is None
    titles = [f.title for f in burn_findings(parsed, 1, 60)]
    assert titles[0] == "GPU 0: gpu-burn's worker for this GPU died (DIED!)"
    assert titles[-1] == "gpu-burn aborted: no worker was alive"


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fakes(tmp_path_factory)


def test_level_3_runs_gpu_burn_from_path_and_reads_its_verdict(fake_driver: Path, tmp_path: Path) -> None:
    burn = tmp_path / "gpu_burn"
    burn.write_text("#!/bin/sh\ncat <<'EOF'\n" + FAULTY_16 + "EOF\nexit 0\n")
    burn.chmod(burn.stat().st_mode | stat.S_IEXEC)
    path = f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}"
    result = gpu_doctor(fake_driver, "smoke", "--level", "3", "--burn-seconds", "1", "--size-mib", "4", "--json", "-q",
                        PATH=path)
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert {f["code"] for f in doc["findings"]} >= {"gpu.smoke", "gpu.burn_faulty"}
    assert doc["active"]["results"]["gpu_burn"]["tested"] == 16


def test_level_3_without_gpu_burn_is_a_skipped_step(fake_driver: Path, tmp_path: Path) -> None:
    result = gpu_doctor(fake_driver, "smoke", "--level", "3", "--size-mib", "4", "-q", PATH="/usr/bin:/bin")
    assert result.returncode == 0, result.stdout
    assert "  · gpu-burn is not installed: the stress test was skipped" in result.stdout.splitlines()
