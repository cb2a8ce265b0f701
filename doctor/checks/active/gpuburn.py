"""gpu-burn's run (`gpu-doctor smoke --level 3`), judged: the recorded :class:`~doctor.model.facts_active.GpuBurn`
in, findings out. Pure.

gpu-burn (github.com/wilicc/gpu-burn) exits 0 even when it marks a GPU FAULTY (wilicc/gpu-burn#12) and
prints "OK" for a GPU whose test never started ("Couldn't init a GPU test", #14, #123): its exit code says
nothing, so the verdict comes from its output, which the runner (doctor/active/heavy.py) recorded.
"""

from __future__ import annotations

from doctor.model.facts_active import GpuBurn
from doctor.model.findings import Evidence, Finding, Fix, FixStep
from doctor.model.severity import Severity

AREA = "Stress test (gpu-burn)"


def burn_findings(burn: GpuBurn, returncode: int | None, seconds: int) -> list[Finding]:
    """What gpu-burn's output means, whatever its exit code said."""
    out = []
    ev = [Evidence("gpu_burn.exit", returncode, "cmd:gpu_burn"), Evidence("gpu_burn.summary", dict(burn.verdicts),
                                                                         "cmd:gpu_burn (Tested N GPUs)")]
    for gpu, verdict in sorted(burn.verdicts.items()):
        if verdict == "FAULTY":
            out.append(_f("gpu.burn_faulty", "fail", f"GPU {gpu}: gpu-burn found wrong results (FAULTY) under load"
                          + (f" although it exited {returncode}" if returncode == 0 else ""),
                          "gpu-burn compares the results of repeated matrix products; a mismatch under full load is "
                          "a hardware fault (memory, power delivery or cooling) until shown otherwise.", ev,
                          "Check the kernel log for Xid errors and the temperatures; reseat or RMA the GPU.",
                          [FixStep(["sh", "-c", "dmesg | grep -iE 'NVRM|Xid'"], root=True)]))
    for gpu_died in burn.died:
        out.append(_f("gpu.burn_faulty", "fail", f"GPU {gpu_died}: gpu-burn's worker for this GPU died (DIED!)",
                      "The process testing this GPU stopped answering: the GPU may have fallen off the bus.", ev))
    for err in burn.init_errors:
        out.append(_f("gpu.burn_faulty", "fail", f"gpu-burn could not start its test: {err}",
                      "gpu-burn still prints OK for a GPU whose test never ran (wilicc/gpu-burn#14): those OKs mean "
                      "nothing.", ev))
    if burn.aborted:
        out.append(_f("gpu.burn_faulty", "fail", "gpu-burn aborted: no worker was alive", "", ev))
    if not out and burn.verdicts and all(v == "OK" for v in burn.verdicts.values()):
        out.append(_f("gpu.burn", "ok", f"gpu-burn: {len(burn.verdicts)} GPU(s) OK after {seconds} s under full "
                      "load" + (f", hottest {max(burn.temps)} C" if burn.temps else ""), evidence=ev))
    if not out:
        out.append(_f("gpu.burn_faulty", "fail", "gpu-burn gave no verdict (no 'Tested N GPUs' summary)",
                      "It crashed or was killed before its summary.", ev))
    return out


def record_findings(rec: GpuBurn) -> list[Finding]:
    """The findings of a recorded gpu-burn run (facts ``active.gpu_burn``): skipped, did not finish, or its
    parsed output."""
    if rec.skipped:
        return [_f("gpu.burn", "info", f"gpu-burn {rec.skipped}: the stress test was skipped",
                   "Level 3 hands the long stress test to gpu-burn (github.com/wilicc/gpu-burn) when it is on PATH.")]
    if rec.error:
        return [_f("gpu.hang", "fail", f"gpu-burn did not finish: {rec.error}",
                   "gpu-burn ran past its time budget (it hangs in 'Killing processes' when a GPU is wedged, "
                   "wilicc/gpu-burn#1).", [Evidence("gpu_burn.error", rec.error, "cmd:gpu_burn")])]
    return burn_findings(rec, rec.returncode, rec.seconds or 0)


def _f(code: str, severity: Severity, title: str, detail: str = "", evidence: list[Evidence] | None = None,
       fix: str | None = None, steps: list[FixStep] | None = None) -> Finding:
    return Finding(code=code, severity=severity, title=title, detail=detail,
                   evidence=evidence or [], fix=Fix(fix, steps or []) if fix else None, area=AREA, check=code)
