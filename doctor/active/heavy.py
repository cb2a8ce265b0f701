"""`gpu-doctor smoke --level 3`: hand over to gpu-burn when it is installed, and read its output ourselves.

gpu-burn (github.com/wilicc/gpu-burn) exits 0 even when it marks a GPU FAULTY (wilicc/gpu-burn#12) and
prints "OK" for a GPU whose test never started ("Couldn't init a GPU test", #14, #123): the exit code says
nothing, so the doctor parses the output and records it (facts ``active.gpu_burn``), which
:mod:`doctor.checks.active.gpuburn` judges. A missing tool is a skipped step with the reason, never a failure.
DCGM's `dcgmi diag` (doctor/active/dcgm.py) and nccl-tests' `all_reduce_perf` (doctor/active/nccltests.py) are
delegated to in the same way, after gpu-burn.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from doctor.active.events import Event, Outcome, Progress

if TYPE_CHECKING:
    from doctor.host import Host

DEFAULT_SECONDS = 60


def parse_gpu_burn(text: str) -> dict[str, Any]:
    """Pure: the verdict per GPU, init failures, GPUs whose worker died, the last error counts and temperatures."""
    verdicts = {int(m[1]): m[2] for m in re.finditer(r"^\s*GPU (\d+): (OK|FAULTY)\s*$", text, re.M)}
    tested = re.search(r"^Tested (\d+) GPUs:", text, re.M)
    init = [m[1].strip() for m in re.finditer(r"Couldn't init a GPU test: (.*)$", text, re.M)]
    last = [line for line in text.splitlines() if "proc'd:" in line][-1:]
    errors: list[int] = []
    died: list[int] = []
    temps: list[int] = []
    if last:
        err_part = re.search(r"errors:(.*?)(?:temps:|$)", last[0])
        if err_part:  # "0 - -524288000  (WARNING!)- 17  (DIED!)": a count per GPU, maybe flagged
            for i, (num, flag) in enumerate(re.findall(r"(-?\d+)\s*(\((?:WARNING|DIED)!\))?", err_part[1])):
                errors.append(int(num))
                if "DIED" in flag:
                    died.append(i)
        temps = [int(t) for t in re.findall(r"(\d+) C", last[0].split("temps:")[-1])] if "temps:" in last[0] else []
    return {"tested": int(tested[1]) if tested else None, "verdicts": verdicts, "init_errors": init,
            "last_errors": errors, "died": died, "temps": temps, "aborted": "No clients are alive!" in text}


def burn_events(host: Host, seconds: int = DEFAULT_SECONDS) -> Iterator[Event]:
    exe = host.which("gpu_burn") or host.which("gpu-burn")
    if exe is None:
        yield _outcome({"skipped": "is not installed"}, "gpu-burn: skipped (not installed)")
        return
    yield Progress(None, f"gpu-burn for {seconds} s (its own progress is not streamed)")
    result = host.run([exe, str(seconds)], timeout=seconds + 120)
    rec: dict[str, Any] = {"command": [exe, str(seconds)], "seconds": seconds, "returncode": result.returncode}
    if result.error:
        yield _outcome({**rec, "error": result.error})
        return
    yield _outcome({**rec, **parse_gpu_burn(result.stdout + "\n" + result.stderr)})


def _outcome(rec: dict[str, Any], summary: str | None = None) -> Outcome:
    from doctor.active.record import outcome
    from doctor.model.facts_active import ActiveFacts, GpuBurn, coerce

    return outcome(ActiveFacts(gpu_burn=coerce(GpuBurn, rec)), {"gpu_burn": rec}, summary)
