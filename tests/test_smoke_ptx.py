"""The smoke test's PTX kernels assemble with NVIDIA's ptxas for every GPU architecture the doctor knows.

The driver JIT-compiles them at run time, so a PTX error would only show on a GPU; here ptxas (the same
compiler the JIT uses) checks them for each target: the CUDA 13 toolkit in /usr/local/cuda-13.x (sm_75+),
else pip's nvidia-cuda-nvcc 13.0; pip's nvidia-cuda-nvcc-cu12 12.9 (down to sm_50) and nvidia-cuda-nvcc-cu11
11.8 (sm_35/sm_37). The wheels are installed once under .cache/test-envs/ (~150 MB, a few seconds); a
target no available ptxas supports is skipped with the reason.
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from importlib import resources
from pathlib import Path

import pytest

from doctor.matrix import bundled

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache" / "test-envs"
KERNELS = sorted(p.name for p in resources.files("doctor.kernels").iterdir() if p.name.endswith(".ptx"))
WHEELS = [("nvidia-cuda-nvcc==13.0.88", "ptxas-cu13"), ("nvidia-cuda-nvcc-cu12==12.9.86", "ptxas-cu12"),
          ("nvidia-cuda-nvcc-cu11==11.8.89", "ptxas-cu11")]


def supported_ccs() -> list[str]:
    """Every compute capability of the architectures in compat/gpus.toml."""
    ccs = {cc for arch in bundled().rows("gpus", "architecture") for cc in arch.get("compute_capabilities", [])}
    return sorted(ccs, key=lambda cc: tuple(int(x) for x in cc.split(".")))


def _pip_ptxas(spec: str, folder: str) -> Path | None:
    target = CACHE / folder
    if not (target / ".complete").exists():
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                               "--no-deps", "--target", str(target), spec], capture_output=True, text=True,
                              timeout=900, check=False)
        if done.returncode != 0:
            return None
        (target / ".complete").write_text("ok\n")
    return next(iter(sorted(target.glob("nvidia/**/bin/ptxas"))), None)


@cache
def assemblers() -> tuple[list[tuple[Path, set[str]]], list[str]]:
    """(ptxas, the sm targets it accepts) newest first, and why any wanted one is missing."""
    found: list[Path] = sorted(Path("/usr/local").glob("cuda-13*/bin/ptxas"), reverse=True)
    missing = []
    for spec, folder in WHEELS:
        if "cu13" in folder and found:
            continue  # the local CUDA 13 toolkit covers what the cu13 wheel would
        path = _pip_ptxas(spec, folder)
        if path is None:
            missing.append(f"pip install {spec} failed (no network to PyPI?)")
        else:
            found.append(path)
    out = []
    for ptxas in found:
        helptext = subprocess.run([str(ptxas), "--help"], capture_output=True, text=True, check=False).stdout
        out.append((ptxas, set(re.findall(r"'(sm_\d+)'", helptext))))
    return out, missing


@pytest.fixture(scope="module")
def ptxas_for() -> dict[str, Path]:
    tools, _ = assemblers()
    table: dict[str, Path] = {}
    for ptxas, sms in tools:
        for sm in sms:
            table.setdefault(sm, ptxas)
    return table


@pytest.fixture(scope="module")
def assembled(ptxas_for: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    """ptxas -arch=sm_XY on each kernel for each target, in parallel: (kernel, sm) → '' or the error."""
    out = tmp_path_factory.mktemp("cubin")
    jobs = [(k, sm, tool) for sm, tool in ptxas_for.items() for k in KERNELS
            if sm.replace("sm_", "") in {cc.replace(".", "") for cc in supported_ccs()}]

    def run(job: tuple[str, str, Path]) -> tuple[tuple[str, str], str]:
        kernel, sm, tool = job
        src = resources.files("doctor.kernels").joinpath(kernel)
        done = subprocess.run([str(tool), f"-arch={sm}", str(src), "-o", str(out / f"{kernel}.{sm}.cubin")],
                              capture_output=True, text=True, check=False)
        return (kernel, sm), (done.stderr.strip() or "failed") if done.returncode else ""

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(run, jobs))


@pytest.mark.parametrize("cc", supported_ccs())
def test_kernels_assemble_for_every_supported_target(cc: str, ptxas_for: dict[str, Path],
                                                     assembled: dict[tuple[str, str], str]) -> None:
    sm = "sm_" + cc.replace(".", "")
    if sm not in ptxas_for:
        _, missing = assemblers()
        why = "; ".join(missing) or "no ptxas on PyPI or in /usr/local supports it"
        if cc in ("3.0", "3.2"):
            why = "CUDA 10.2 was the last toolkit to build sm_30/sm_32 and no ptxas that old is on PyPI"
        pytest.skip(f"{sm}: {why}")
    failures = {k: assembled[(k, sm)] for k in KERNELS if assembled[(k, sm)]}
    assert not failures, f"{sm} with {ptxas_for[sm]}: {failures}"


def test_kernels_are_portable_ptx_the_oldest_drivers_jit() -> None:
    for name in KERNELS:
        text = resources.files("doctor.kernels").joinpath(name).read_text()
        assert re.search(r"^\.version 5\.0$", text, re.M), name  # CUDA 8 (driver >= 375) JITs it
        assert re.search(r"^\.target sm_30$", text, re.M), name  # lower than every GPU CUDA 11+ drives


def test_the_fake_driver_knows_every_entry_point_with_the_same_parameters() -> None:
    """tests/fakes/fake_cuda.c runs the kernels in host memory; its KERNELS table must match the PTX."""
    fake = (REPO / "tests" / "fakes" / "fake_cuda.c").read_text()
    table = dict(re.findall(r'\{"(\w+)", "([\w,]+)"\}', fake))
    for name in KERNELS:
        text = resources.files("doctor.kernels").joinpath(name).read_text()
        for entry, params in re.findall(r"\.entry (\w+)\(([^)]*)\)", text):
            assert table.get(entry) == ",".join(re.findall(r"\.param \.(\w+)", params)), entry
