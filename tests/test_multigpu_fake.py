"""The multi-GPU part of the smoke test against the fake libraries with 2-4 GPUs: the real child, ctypes
signatures (cuDeviceCanAccessPeer, cuCtxSetCurrent, cuCtxEnablePeerAccess, cuMemcpyPeer) and the real
pynvml topology / NVLink calls, answers compared with the topology the fakes were configured with
(FAKE_CUDA_PEER*, FAKE_NVML_TOPO*, FAKE_NVML_GPU<i>_NVLINK in tests/fakes/*.c)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_smoke_fake import build_fakes, env_for, gpu_doctor

from doctor.active.events import Outcome, Progress, last_outcome
from doctor.active.gpu import Options, smoke_events
from doctor.checks.active import multigpu
from doctor.model.facts_active import MultiGpu, coerce
from doctor.model.findings import Finding
from doctor.pipeline import judged

# The judges read the typed facts a runner records: each case below is given as the child reported it.


def topology_matrix(mg: dict[str, Any]) -> dict[str, Any]:
    return multigpu.topology_matrix(coerce(MultiGpu, mg))


def expected_gbs(mg: dict[str, Any], a: int, b: int) -> tuple[float | None, str | None]:
    return multigpu.expected_gbs(coerce(MultiGpu, mg), a, b)


def findings(mg: dict[str, Any] | None) -> list[Finding]:
    return multigpu.findings(coerce(MultiGpu, mg))

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fakes(tmp_path_factory)


def gpus(n: int, **knobs: Any) -> dict[str, Any]:
    names = "|".join([H100] * n)
    return {"FAKE_CUDA_DEVICES": "|".join(["9.0"] * n), "FAKE_CUDA_NAMES": names, "FAKE_NVML_GPUS": names,
            "FAKE_CUDA_MEM_MIB": 4096, **{f"FAKE_NVML_GPU{i}_MEM_TOTAL_MIB": 4096 for i in range(n)},
            "FAKE_CUDA_SM_COUNT": 1, **knobs}


def smoke(libs: Path, n: int, **knobs: Any) -> Outcome:
    opts = Options(timeout=20, size_mib=2, fma_ms=5, env=env_for(libs, **gpus(n, **knobs)))
    return last_outcome(judged(smoke_events(opts)))


def multi(out: Outcome) -> dict[str, Any]:
    return out.results["global"]["multi_gpu"]


def area(out: Outcome) -> list[tuple[str, str, str]]:
    return [(f.code, f.severity, f.title) for f in out.findings if f.check == "active.multi_gpu"]


# 4 GPUs as two NVLink pairs (0-1 with 4 links, 2-3 with 2, one of them down), the pairs on different sockets
FOUR = {"FAKE_NVML_GPU0_NVLINK": "1,1,1,1", "FAKE_NVML_GPU1_NVLINK": "0,0,0,0",
        "FAKE_NVML_GPU2_NVLINK": "3,3:down", "FAKE_NVML_GPU3_NVLINK": "2:down,2",
        "FAKE_NVML_TOPO": "SYS", "FAKE_NVML_TOPO_0_1": "PIX", "FAKE_NVML_TOPO_2_3": "PXB",
        "FAKE_CUDA_PEER": "0-1,2-3", "FAKE_CUDA_PEER_GBS_0_1": 90, "FAKE_CUDA_PEER_GBS_2_3": 10}


@pytest.fixture(scope="module")
def four(fake_driver: Path) -> Outcome:
    return smoke(fake_driver, 4, **FOUR)


def test_topology_matrix_reads_like_nvidia_smi_topo(four: Outcome) -> None:
    mg = multi(four)
    assert mg["topology"] == {"0-1": 10, "0-2": 50, "0-3": 50, "1-2": 50, "1-3": 50, "2-3": 20}
    assert topology_matrix(mg)["rows"] == [["X", "NV4", "SYS", "SYS"],
                                           ["NV4", "X", "SYS", "SYS"],
                                           ["SYS", "SYS", "X", "NV1"],
                                           ["SYS", "SYS", "NV1", "X"]]
    (topo,) = [f for f in four.findings if f.code == "multigpu.topology"]
    assert topo.detail.splitlines()[:3] == ["Topology (nvidia-smi topo -m):",
                                            "        GPU0     GPU1     GPU2     GPU3",
                                            "GPU0    X        NV4      SYS      SYS"]


def test_peer_access_matrix_and_copies_each_way(four: Outcome) -> None:
    mg = multi(four)
    assert {k for k, v in mg["can_access_peer"].items() if v} == {"0>1", "1>0", "2>3", "3>2"}
    assert len(mg["copies"]) == 12 and all(c["intact"] for c in mg["copies"].values())
    assert mg["copies"]["0>1"]["gbs"] == pytest.approx(90, rel=1e-4)  # peer access enabled: the pair's rate
    assert mg["copies"]["0>2"]["gbs"] == pytest.approx(25, rel=1e-4)  # staged through the host: PCIe / 2
    assert mg["peer_enable_errors"] == {} and mg["cleanup_problems"] == []
    assert "Peer copy GB/s (cuMemcpyPeer, row → column):\n        GPU0     GPU1     GPU2     GPU3\nGPU0    X        " \
           "90.0     25.0     25.0" in next(f.detail for f in four.findings if f.code == "multigpu.topology")


def test_a_down_link_and_a_slow_pair_are_findings(four: Outcome) -> None:
    assert [x for x in area(four) if x[1] != "info"] == [
        ("multigpu.nvlink_down", "warn", "GPU 2: NVLink link 1 (to GPU 3) is down"),
        ("multigpu.nvlink_down", "warn", "GPU 3: NVLink link 0 (to GPU 2) is down"),
        ("multigpu.peer_bandwidth", "warn", "GPU 2 → GPU 3: peer copy 10.0 GB/s: only 40% of 1 NVLink link(s) "
                                            "(25.0 GB/s)"),
        ("multigpu.peer_bandwidth", "warn", "GPU 3 → GPU 2: peer copy 10.0 GB/s: only 40% of 1 NVLink link(s) "
                                            "(25.0 GB/s)"),
        ("multigpu.peer_bandwidth", "ok", "Peer copies reach their links' rate on 2 GPU pair direction(s) (lowest "
                                          "90%, GPU 0 → GPU 1)"),
    ]
    assert four.status == "warn"


def test_nvlink_without_peer_access_fails(fake_driver: Path) -> None:
    out = smoke(fake_driver, 2, FAKE_NVML_GPU0_NVLINK="1,1", FAKE_NVML_GPU1_NVLINK="0,0", FAKE_CUDA_PEER="none")
    assert ("multigpu.peer_access", "fail", "GPU 0 and GPU 1 are joined by NVLink but cannot access each other's "
            "memory (cuDeviceCanAccessPeer = 0)") in area(out)
    assert out.status == "fail"


def test_enable_peer_access_error_is_named_by_the_driver(fake_driver: Path) -> None:
    out = smoke(fake_driver, 2, FAKE_CUDA_PEER_ENABLE_ERROR=711)
    assert [t for c, _, t in area(out) if c == "multigpu.peer_access"] == [
        f"GPU {a} → GPU {b}: cuCtxEnablePeerAccess failed with CUDA_ERROR_TOO_MANY_PEERS (711): peer mapping "
        "resources exhausted" for a, b in ((0, 1), (1, 0))]


def test_pcie_pair_is_held_against_the_slower_link_and_corruption_fails(fake_driver: Path) -> None:
    out = smoke(fake_driver, 2, FAKE_NVML_TOPO="PXB", FAKE_NVML_GPU1_PCIE_GEN=4, FAKE_CUDA_PEER_GBS=24,
                FAKE_CUDA_PEER_WRONG=7)
    mg = multi(out)
    assert expected_gbs(mg, 0, 1) == (pytest.approx(31.51, rel=1e-3), "the PCIe gen 4 x16 link")
    assert ("multigpu.peer_bandwidth", "ok", "Peer copies reach their links' rate on 2 GPU pair direction(s) "
            "(lowest 76%, GPU 0 → GPU 1)") in area(out)
    assert [t for c, _, t in area(out) if c == "gpu.wrong_results"] == [
        "GPU 0 → GPU 1: a peer copy arrived corrupted", "GPU 1 → GPU 0: a peer copy arrived corrupted"]


def test_one_gpu_or_oom_mode_has_no_multi_gpu_part(fake_driver: Path) -> None:
    events = list(judged(smoke_events(Options(timeout=20, size_mib=2, fma_ms=5, gpus=[1], env=env_for(fake_driver,
                                                                                            **gpus(2))))))
    out = events[-1]
    assert isinstance(out, Outcome) and "multi_gpu" not in out.results["global"] and area(out) == []
    assert findings(None) == [] and findings({"gpus": [0]}) == []
    assert all(e.step and not e.step.startswith("multi-GPU") for e in events if isinstance(e, Progress))


def test_progress_reaches_the_multi_gpu_phase_in_order(fake_driver: Path) -> None:
    events = list(judged(smoke_events(Options(timeout=20, size_mib=2, fma_ms=5, env=env_for(fake_driver, **gpus(2))))))
    steps = [(e.fraction, e.step) for e in events if isinstance(e, Progress) and e.fraction is not None]
    assert [f for f, _ in steps] == sorted(f for f, _ in steps)
    assert steps[-1][1] == "multi-GPU: releasing memory and destroying the contexts"
    assert 2 / 3 <= steps[-1][0] < 1  # two GPUs and the multi-GPU phase: a third each


def test_cli_json_carries_the_matrix(fake_driver: Path) -> None:
    result = gpu_doctor(fake_driver, "smoke", "--json", "-q", "--size-mib", "2",
                        **{k: str(v) for k, v in gpus(2, FAKE_NVML_GPU0_NVLINK="1", FAKE_NVML_GPU1_NVLINK="0").items()})
    doc = json.loads(result.stdout)
    mg = doc["active"]["results"]["global"]["multi_gpu"]
    assert topology_matrix(mg)["rows"] == [["X", "NV1"], ["NV1", "X"]]
    (topo,) = [f for f in doc["findings"] if f["code"] == "multigpu.topology"]
    assert topo["evidence"][0]["value"] == [["X", "NV1"], ["NV1", "X"]]
