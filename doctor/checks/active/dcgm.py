"""DCGM's `dcgmi diag` (`gpu-doctor smoke --level 3`), judged: the recorded
:class:`~doctor.model.facts_active.DcgmDiag` (its result table as the runner, doctor/active/dcgm.py, read it)
in, findings out. Pure.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from doctor.model.facts_active import DcgmDiag, known
from doctor.model.findings import Evidence, Finding, Fix, FixStep
from doctor.model.severity import Severity

AREA = "Diagnostics (DCGM)"


def _gpus_named(text: Any) -> list[int]:
    return sorted({int(g) for g in re.findall(r"\bGPU ?(\d+)\b", text)})


def diag_findings(diag: DcgmDiag, returncode: int | None, level: int) -> list[Finding]:
    """Each failed test → a failure per GPU DCGM names (with DCGM's own message), warnings → warnings,
    skipped tests → one information line, everything passed → ok."""
    ev = [Evidence("dcgmi.exit", returncode, "cmd:dcgmi diag"),
          Evidence("dcgmi.version", diag.version, "cmd:dcgmi diag (Metadata)")]
    out: list[Finding] = []
    if not diag.tests:
        return [_f("gpu.dcgm_failed", "fail", f"dcgmi diag -r {level} gave no result table"
                   + (f" (exit {returncode})" if returncode else ""),
                   "DCGM could not run its diagnostic; its own output is in the evidence.", ev)]
    skipped = []
    for t in diag.tests:
        status = known(t.status, "DCGM test status").lower()
        per_gpu_fail = [g for g, s in t.gpus.items() if s.lower() == "fail"]
        per_gpu_warn = [g for g, s in t.gpus.items() if s.lower() == "warn"]
        if status == "fail" or per_gpu_fail:
            problems = [m for m in t.messages if m.kind in ("Warning", "Error")] or t.messages
            reported = False
            for m in problems:
                named: list[int | None] = [*_gpus_named(m.text)]
                for g in named or [None]:
                    who = f"GPU {g}" if g is not None else f"GPU(s) {t.scope or 'unnamed'}"
                    out.append(_f("gpu.dcgm_failed", "fail", f"{who}: DCGM '{t.name}' failed: {m.text}",
                                  f"dcgmi diag -r {level}, {t.category} test '{t.name}': "
                                  f"{t.status}{' - ' + t.scope if t.scope else ''}.",
                                  [*ev, Evidence("dcgmi.test", {"name": t.name, "status": t.status},
                                                 "cmd:dcgmi diag")],
                                  "Follow DCGM's advice above; for a hardware test that fails again after a GPU "
                                  "reset, check the kernel log for Xid errors and RMA the GPU.",
                                  [FixStep(["sh", "-c", "dmesg | grep -iE 'NVRM|Xid'"], root=True)]))
                    reported = True
            if not reported:
                gpus = ", ".join(map(str, per_gpu_fail)) or t.scope or "unnamed"
                out.append(_f("gpu.dcgm_failed", "fail", f"GPU(s) {gpus}: DCGM '{t.name}' failed",
                              "DCGM gave no message for this failure.", ev))
        elif status == "warn" or per_gpu_warn:
            msgs = [m.text for m in t.messages] or ["(no message)"]
            for text in msgs:
                who = ", ".join(f"GPU {g}" for g in (_gpus_named(text) or per_gpu_warn)) or "GPU(s)"
                out.append(_f("gpu.dcgm_warning", "warn", f"{who}: DCGM '{t.name}' warned: {text}", "", ev))
        elif status == "skip":
            skipped.append(known(t.name, "DCGM test name"))
        else:
            for m in t.messages:
                if m.kind in ("Warning", "Error"):
                    who = ", ".join(f"GPU {g}" for g in _gpus_named(m.text)) or "GPU(s)"
                    out.append(_f("gpu.dcgm_warning", "warn", f"{who}: DCGM '{t.name}': {m.text}", "", ev))
    if skipped:
        out.append(_f("gpu.dcgm", "info", f"DCGM skipped {len(skipped)} test(s): {', '.join(skipped)}",
                      "A skipped test tested nothing: DCGM skips tests the GPU class does not support, tests "
                      "that are not allowed (is_allowed), and, with --fail-early, everything after a failure.", ev))
    if not any(f.severity in ("fail", "warn") for f in out):
        passed = [t for t in diag.tests if known(t.status, "DCGM test status").lower() == "pass"]
        out.insert(0, _f("gpu.dcgm", "ok", f"DCGM diag -r {level}: {len(passed)} test(s) passed"
                         + (f" (DCGM {diag.version})" if diag.version else ""), evidence=ev))
    return out


def record_findings(rec: DcgmDiag) -> list[Finding]:
    """The findings of a recorded DCGM diagnostic (facts ``active.dcgm``): skipped, did not finish, or its
    parsed table."""
    level = rec.level or 0
    if rec.skipped:
        return [_f("gpu.dcgm", "info", f"DCGM diagnostics skipped: {rec.skipped}",
                   "Level 3 hands DCGM's diagnostic (`dcgmi diag`) the GPUs when DCGM is installed and its host engine "
                   "runs (`systemctl start nvidia-dcgm`, or `nv-hostengine`).")]
    if rec.error:
        return [_f("gpu.hang", "fail", f"dcgmi diag -r {level} did not finish: {rec.error}",
                   "DCGM ran past the time budget (--dcgm-seconds); a diagnostic that hangs points at a wedged "
                   "GPU or link (NVIDIA/DCGM#247).", [Evidence("dcgmi.error", rec.error, "cmd:dcgmi diag")])]
    findings = diag_findings(rec, rec.returncode, level)
    if not rec.tests:
        findings = [replace(f, evidence=[*f.evidence, Evidence("dcgmi.output", rec.output, "cmd:dcgmi diag")])
                    for f in findings]
    return findings


def _f(code: str, severity: Severity, title: str, detail: str = "", evidence: list[Evidence] | None = None,
       fix: str | None = None, steps: list[FixStep] | None = None) -> Finding:
    return Finding(code=code, severity=severity, title=title, detail=detail,
                   evidence=evidence or [], fix=Fix(fix, steps or []) if fix else None, area=AREA, check=code)
