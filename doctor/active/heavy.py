"""`gpu-doctor smoke --level 3`: hand over to gpu-burn when it is installed, and read its output ourselves.

gpu-burn (github.com/wilicc/gpu-burn) exits 0 even when it marks a GPU FAULTY (wilicc/gpu-burn#12) and
prints "OK" for a GPU whose test never started ("Couldn't init a GPU test", #14, #123): the exit code says
nothing, so the doctor parses the output. A missing tool is a skipped step with the reason, never a failure.
DCGM's `dcgmi diag` (doctor/active/dcgm.py) and nccl-tests' `all_reduce_perf` (doctor/active/nccltests.py) are
delegated to in the same way, after gpu-burn.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from doctor.active.events import Event, Outcome, Progress
from doctor.model.findings import Evidence, Finding, Fix, FixStep

if TYPE_CHECKING:
    from doctor.host import Host

AREA = "Stress test (gpu-burn)"
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


def burn_findings(parsed: dict[str, Any], returncode: int | None, seconds: int) -> list[Finding]:
    """Pure: what gpu-burn's output means, whatever its exit code said."""
    out = []
    ev = [Evidence("gpu_burn.exit", returncode, "cmd:gpu_burn"), Evidence("gpu_burn.summary", parsed["verdicts"],
                                                                         "cmd:gpu_burn (Tested N GPUs)")]
    for gpu, verdict in sorted(parsed["verdicts"].items()):
        if verdict == "FAULTY":
            out.append(_f("gpu.burn_faulty", "fail", f"GPU {gpu}: gpu-burn found wrong results (FAULTY) under load"
                          + (f" although it exited {returncode}" if returncode == 0 else ""),
                          "gpu-burn compares the results of repeated matrix products; a mismatch under full load is "
                          "a hardware fault (memory, power delivery or cooling) until shown otherwise.", ev,
                          "Check the kernel log for Xid errors and the temperatures; reseat or RMA the GPU.",
                          [FixStep(["sh", "-c", "dmesg | grep -iE 'NVRM|Xid'"], root=True)]))
    for gpu in parsed["died"]:
        out.append(_f("gpu.burn_faulty", "fail", f"GPU {gpu}: gpu-burn's worker for this GPU died (DIED!)",
                      "The process testing this GPU stopped answering: the GPU may have fallen off the bus.", ev))
    for err in parsed["init_errors"]:
        out.append(_f("gpu.burn_faulty", "fail", f"gpu-burn could not start its test: {err}",
                      "gpu-burn still prints OK for a GPU whose test never ran (wilicc/gpu-burn#14): those OKs mean "
                      "nothing.", ev))
    if parsed["aborted"]:
        out.append(_f("gpu.burn_faulty", "fail", "gpu-burn aborted: no worker was alive", "", ev))
    if not out and parsed["verdicts"] and all(v == "OK" for v in parsed["verdicts"].values()):
        out.append(_f("gpu.burn", "ok", f"gpu-burn: {len(parsed['verdicts'])} GPU(s) OK after {seconds} s under full "
                      "load" + (f", hottest {max(parsed['temps'])} C" if parsed["temps"] else ""), evidence=ev))
    if not out:
        out.append(_f("gpu.burn_faulty", "fail", "gpu-burn gave no verdict (no 'Tested N GPUs' summary)",
                      "It crashed or was killed before its summary.", ev))
    return out


def record_findings(rec: dict[str, Any]) -> list[Finding]:
    """Pure: the findings of a recorded gpu-burn run (facts ``active.gpu_burn``): skipped, did not finish, or
    its parsed output."""
    if rec.get("skipped"):
        return [_f("gpu.burn", "info", f"gpu-burn {rec['skipped']}: the stress test was skipped",
                   "Level 3 hands the long stress test to gpu-burn (github.com/wilicc/gpu-burn) when it is on PATH.")]
    if rec.get("error"):
        return [_f("gpu.hang", "fail", f"gpu-burn did not finish: {rec['error']}",
                   "gpu-burn ran past its time budget (it hangs in 'Killing processes' when a GPU is wedged, "
                   "wilicc/gpu-burn#1).", [Evidence("gpu_burn.error", rec["error"], "cmd:gpu_burn")])]
    parsed = {"verdicts": {}, "died": [], "init_errors": [], "aborted": False, "temps": [], **rec}
    return burn_findings(parsed, rec.get("returncode"), rec.get("seconds") or 0)


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


def _f(code: str, severity: str, title: str, detail: str = "", evidence: list[Evidence] | None = None,
       fix: str | None = None, steps: list[FixStep] | None = None) -> Finding:
    return Finding(code=code, severity=severity, title=title, detail=detail,  # type: ignore[arg-type]
                   evidence=evidence or [], fix=Fix(fix, steps or []) if fix else None, area=AREA, check=code)
