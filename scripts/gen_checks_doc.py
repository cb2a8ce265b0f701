#!/usr/bin/env python3
"""Write docs/checks.md from the check registry, with a real example finding for every check.

Each example is the check run on the healthy test host (tests/factories.py) with one thing broken,
so the page shows exactly what a user sees. A check's example lives beside its tests: ``DOC_EXAMPLES`` in its
tests/test_checks_*.py module (check id → (what is broken, the facts)); EXAMPLES below holds the active tests' ones.
So a new check touches its module, its test and this page, nothing else.

Usage: python scripts/gen_checks_doc.py [--check]
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from factories import H100, make_facts  # noqa: E402

from doctor.checks import REGISTRY  # noqa: E402
from doctor.matrix import current  # noqa: E402
from doctor.model.facts_active import (  # noqa: E402
    ActiveEnd,
    ActiveFacts,
    ActiveGpu,
    BatchTrial,
    DcgmDiag,
    DcgmMessage,
    DcgmTest,
    DriverTest,
    FrameworkError,
    FrameworkRun,
    FrameworkTest,
    GpuBurn,
    MultiGpu,
    NcclPlace,
    NcclRow,
    NcclTests,
    NvLink,
    NvmlReading,
    TorchRun,
    Verified,
)
from doctor.pipeline import diagnose  # noqa: E402
from doctor.registry import Context  # noqa: E402
from doctor.render.text import _finding_lines  # noqa: E402

OUT = REPO / "docs" / "checks.md"

# Active tests: what `smoke` / `oom` recorded (facts `active`), one thing wrong in each.
A100 = "NVIDIA A100-SXM4-40GB"
GIB = 1 << 30
_EXITED = ActiveEnd(event="exit", returncode=0)


def _active(**kw: Any) -> Any:
    return make_facts(active=ActiveFacts(**kw))


def _driver_test(mode: str, *gpus: ActiveGpu, multi: MultiGpu | None = None) -> DriverTest:
    return DriverTest(mode=mode, device_count=len(gpus), gpus=list(gpus), multi_gpu=multi, done=True, end=_EXITED,
                      cuda_driver_version=12040)


_NVLINK = {"0": [NvLink(0, True, 4, "00000000:2A:00.0"), NvLink(1, False, 4, "00000000:2A:00.0")],
           "1": [NvLink(0, True, 4, "00000000:18:00.0"), NvLink(1, False, 4, "00000000:18:00.0")]}
ACTIVE_EXAMPLES: dict[str, tuple[str, Any]] = {
    "active.smoke": ("an A100 whose copy kernel reaches 700 GB/s", _active(smoke=_driver_test("smoke", ActiveGpu(
        0, name=A100, nvml_before=NvmlReading(name=A100), context_created=True, saxpy=Verified(1 << 20, 0),
        device_gbs=700.0)))),
    "active.oom": ("half of an A10's memory used by another container NVML cannot see", _active(oom=_driver_test(
        "oom", ActiveGpu(0, name="NVIDIA A10", refused=True, refused_reason="memory_in_use", nvml_before=NvmlReading(
            name="NVIDIA A10", memory_total=24 * GIB, memory_used=12 * GIB, processes=None))))),
    "active.multi_gpu": ("two H100s with one of their NVLink links down", _active(smoke=_driver_test(
        "smoke", ActiveGpu(0, name=H100.name), ActiveGpu(1, name=H100.name), multi=MultiGpu(
            gpus=[0, 1], bus_ids={"0": "00000000:18:00.0", "1": "00000000:2A:00.0"}, topology={"0-1": 40},
            nvlinks=_NVLINK, can_access_peer={"0>1": True, "1>0": True})))),
    "active.frameworks": ("a CPU-only torch build", _active(frameworks=FrameworkTest(
        pythons=["/venv/bin/python"], requested=["torch"], runs=[FrameworkRun(
            "torch", "/venv/bin/python", installed=True, version="2.13.0+cpu", ok=False, end=_EXITED,
            error=FrameworkError("AssertionError", "AssertionError: Torch not compiled with CUDA enabled",
                                 "a tensor on cuda:0"))]))),
    "active.torch": ("a model whose batch of 1 does not fit", _active(torch=[TorchRun(
        "batch", "/venv/bin/python", installed=True, version="2.5.1+cu124", gpu_name="NVIDIA A10", ok=True,
        largest_batch=0, cap=4096, end=_EXITED, trials=[BatchTrial(1, False, 23 * GIB, 23 * GIB)])])),
    "active.gpu_burn": ("gpu-burn marks GPU 1 FAULTY and exits 0", _active(gpu_burn=GpuBurn(
        command=["gpu_burn", "60"], seconds=60, returncode=0, tested=2, verdicts={"0": "OK", "1": "FAULTY"},
        last_errors=[0, 4096], temps=[71, 74], aborted=False))),
    "active.dcgm": ("DCGM's memory test fails on GPU 1", _active(dcgm=DcgmDiag(
        level=1, returncode=226, version="3.3.5", table=True, tests=[DcgmTest(
            "Hardware", "GPU Memory", "Fail", "GPU1", [DcgmMessage(
                "Error", "GPU 1: Memory test failed: 12 miscompares. Drain the GPU and reset it.")])]))),
    "active.nccl_tests": ("an all-reduce that returns wrong sums", _active(nccl_tests=NcclTests(
        argv=["all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-g", "8"], returncode=0, old_format=False,
        rows=[NcclRow(1 << 30, 1 << 28, "float", "sum", -1, NcclPlace(9000.0, 119.3, 208.8, 3),
                      NcclPlace(8990.0, 119.4, 209.0, 0))], out_of_bounds=0, avg_busbw=150.2))),
}
EXAMPLES: dict[str, tuple[str, Any]] = {**ACTIVE_EXAMPLES}  # the others: DOC_EXAMPLES beside each check's tests


def examples() -> dict[str, tuple[str, Any]]:
    """Every check's example: the table above and each test module's DOC_EXAMPLES (a check has one, once)."""
    out = dict(EXAMPLES)
    for path in sorted((REPO / "tests").glob("test_checks_*.py")):
        if not re.search(r"^DOC_EXAMPLES\b", path.read_text(encoding="utf-8"), re.M):
            continue  # imported only where examples are declared
        for check_id, example in getattr(importlib.import_module(path.stem), "DOC_EXAMPLES", {}).items():
            if check_id in out:
                raise SystemExit(f"two examples for {check_id}: {path.name} and another")
            out[check_id] = example
    return out


def render() -> str:
    every = examples()
    lines = [
        "# gpu-doctor checks",
        "",
        "Generated by `scripts/gen_checks_doc.py` from the check registry; do not edit by hand.",
        "Every finding has a stable dotted `code`; `gpu-doctor check CODE…` runs only those checks and",
        "`gpu-doctor check --list-checks` lists them. Severities: `fail` (exit 1), `warn` (exit 1 with",
        "`--strict`), `info`, `ok`. A check whose facts are unknown is *skipped* with its reason; one that",
        "does not concern the machine is *not applicable*; one that crashes yields `doctor.check_crashed`.",
        "",
        "| code | area | what it checks |",
        "| --- | --- | --- |",
    ]
    lines += [f"| [`{c.id}`](#{c.id.replace('.', '')}) | {c.area} | {c.summary} |" for c in REGISTRY]
    lines.append("")
    for chk in REGISTRY:
        what, facts = every[chk.id]
        report = diagnose(facts, checks=[chk], ctx=Context(matrix=current(), options={"static": chk.id.startswith(
            "image.")}))
        shown = [f for f in report.findings if f.severity != "ok"] or report.findings
        if not shown:
            raise SystemExit(f"the example for {chk.id} gives no finding: {report.checks[0].status} "
                             f"({report.checks[0].reason})")
        lines += [f"## {chk.id}", "", f"**Area:** {chk.area}. {chk.summary}", ""]
        if chk.all_codes != (chk.id,):
            lines += ["**Finding codes:** " + ", ".join(f"`{c}`" for c in chk.all_codes), ""]
        lines += [f"Example — {what}:", "", "```"]
        for f in shown:
            lines += _finding_lines(f, verbose=False, colour=False)
        lines += ["```", "", "<details><summary>JSON</summary>", "", "```json",
                  json.dumps(shown[0].to_dict(), indent=2, ensure_ascii=False), "```", "", "</details>", ""]
    lines += ["## doctor.check_crashed", "",
              "A check raised an exception: a bug in gpu-doctor. The other checks still run; the report carries "
              "this `warn` finding with the check's id in its evidence.", ""]
    return "\n".join(lines)


def main() -> int:
    missing = [c.id for c in REGISTRY if c.id not in examples()]
    if missing:
        print("no example for: " + ", ".join(missing))
        return 1
    text = render()
    if "--check" in sys.argv:
        if not OUT.exists() or OUT.read_text() != text:
            print("docs/checks.md is stale: run scripts/gen_checks_doc.py")
            return 1
        return 0
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
