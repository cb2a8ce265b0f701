"""The framework smoke test (`gpu-doctor smoke --framework`), judged: each recorded
:class:`~doctor.model.facts_active.FrameworkRun` in, findings out. Pure.

What a framework raised is matched against :data:`SIGNATURES` — the [[smoke]] rows of the one error catalog,
compat/errors.toml, whose patterns are `explain`'s signatures (the texts frameworks really print, each with its
source) — and becomes the finding of the same code the static checks use, with the original text in the
evidence. The mapping is table-tested (tests/test_smoke_frameworks.py).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

from doctor.checks.active.gpu import tensor_core_findings
from doctor.errors import bounded
from doctor.errors import signatures as explain_signatures
from doctor.matrix import bundled
from doctor.model.facts_active import DEFAULT_CHILD_TIMEOUT, ActiveEnd, FrameworkRun, FrameworkTest
from doctor.model.findings import Evidence, Finding, Fix
from doctor.model.severity import Severity, severity_of

AREA = "Framework smoke test"


@dataclass(frozen=True)
class Signature:
    pattern: str  # the catalog patterns, for display; `compiled` is what is searched
    code: str
    explanation: str
    fix: str | None = None
    severity: Severity = "fail"
    compiled: tuple[re.Pattern[str], ...] = ()
    source: str | None = None
    ids: tuple[str, ...] = ()  # the compat/errors.toml signatures this row reads


@cache
def signatures() -> tuple[Signature, ...]:
    """The [[smoke]] rows of the one error catalog (compat/errors.toml), in file order, compiled on first use.

    Order matters: the first match wins, so specific texts come before generic ones ("no kernel image" is also
    a "CUDA error"). The rows and their patterns live in compat/errors.toml, shared with `explain`."""
    by_id = {s.id: s for s in explain_signatures()}
    out = []
    for row in bundled().rows("errors", "smoke"):
        try:
            sigs = [by_id[i] for i in row["signatures"] if i in by_id]
            if not sigs:
                continue
            out.append(Signature(" | ".join(s.pattern.pattern for s in sigs), str(row["finding"]),
                                 str(row["explanation"]), str(row["fix"]) if row.get("fix") else None,
                                 severity_of(row.get("severity"), "fail"), tuple(s.pattern for s in sigs),
                                 str(row.get("source", "")) or None, tuple(s.id for s in sigs)))
        except (KeyError, TypeError):
            continue
    return tuple(out)


def __getattr__(name: str) -> Any:  # ``SIGNATURES``: the catalog, built when first asked for
    if name == "SIGNATURES":
        return signatures()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


FALLBACK = Signature(r".", "framework.gpu_smoke_failed",
                     "The framework failed on the GPU with an error gpu-doctor does not recognise; the text is in "
                     "the evidence.", "Run `gpu-doctor check --deep` and search the error text.")


def classify(*texts: str | None) -> Signature:
    """The signature of the first rule that matches any of the texts (exception, warnings, stderr)."""
    joined = bounded("\n".join(bounded(t) for t in texts if t))
    for sig in signatures():
        if any(p.search(joined) for p in sig.compiled):
            return sig
    return FALLBACK


def record_findings(test: FrameworkTest, matrix: Any = None) -> list[Finding]:
    """The findings of a recorded framework smoke test (facts ``active.frameworks``)."""
    findings = [f for run in test.runs for f in judge_run(run, _silence(run), matrix)]
    if not test.runs:
        findings.append(Finding("framework.not_installed", "warn", "No framework (torch, tensorflow, jax, cupy) is "
                                "installed in " + ", ".join(test.pythons or ["the target environment"]),
                                area=AREA, check="framework.not_installed"))
    return findings


def _silence(run: FrameworkRun) -> float:
    return float((run.end.silent_for if run.end is not None else None) or DEFAULT_CHILD_TIMEOUT)


def judge_run(run: FrameworkRun, timeout: float, matrix: Any = None) -> list[Finding]:
    """The findings of one framework's run. ``matrix`` gives tensor-core peaks (none: figures only)."""
    name, python = run.framework, run.python
    who = f"{name} {run.version}" if run.version else name
    where = f"{who} in {python}"
    end = run.end or ActiveEnd()
    if end.event == "hang":
        return [_f("framework.hang", "fail",
                   f"{where} did not finish within {timeout:g} s (at: {run.last_step})",
                   "The framework hung: importing it or its first CUDA call never returned.",
                   [Evidence("framework.step", run.last_step, "child progress")])]
    if run.installed is None:  # the child never said: it died (or could not start) before importing anything
        tail = (end.stderr or end.error or "").strip().splitlines()
        return [_f("framework.gpu_smoke_failed", "fail", f"{name} in {python}: the test process died "
                   f"(exit {end.returncode}) at: {run.last_step or 'start'}",
                   "The interpreter could not run the test, or the framework crashed the process.",
                   [Evidence("framework.stderr", "\n".join(tail[-5:]) or None, "child stderr")])]
    if not run.installed:
        return [_f("framework.not_installed", "warn", f"{name} is not installed in {python}",
                   "Nothing to test.", [Evidence("framework.installed", False, f"importlib.util.find_spec({name!r})")])]
    out: list[Finding] = []
    for key, res, what in (("matmul", run.matmul, "matrix product"), ("conv", run.conv, "cuDNN convolution")):
        if res is None:
            continue
        detail = (f"max |GPU − CPU| = {res.max_abs_err:.3g}, tolerance {res.tolerance:.3g} "
                  f"({res.rtol:g} × the largest CPU value; TF32 off)")
        ev = [Evidence(f"framework.{key}", asdict(res), f"{name} on the GPU vs the CPU")]
        if res.ok:
            out.append(_f("framework.gpu_smoke", "ok", f"{where}: the GPU {what} matches the CPU", detail, ev))
        else:
            out.append(_f("gpu.wrong_results", "fail", f"{where}: the GPU {what} differs from the CPU", detail +
                          ": the GPU (or its math library) computes wrong results.", ev))
    if run.matmul_tflops:
        who_gpu = f"{where}, {run.gpu_name}" if run.gpu_name else where
        out += tensor_core_findings(who_gpu, run.gpu_name, run.matmul_tflops, matrix, AREA, f"{name}.matmul")
    err = run.error
    if err is not None:
        sig = classify(err.text, *run.warnings, end.stderr)
        ev = [Evidence("framework.error", err.text, f"{name}: {err.step}")]
        ev += [Evidence("framework.warning", w, f"{name}: warnings") for w in run.warnings]
        if sig is FALLBACK or sig.code == "framework.gpu_libs_missing":
            lines = [ln for ln in (end.stderr or "").splitlines() if ln.strip()]
            if lines:
                ev.append(Evidence("framework.log", "\n".join(lines[-8:]), f"{name}: stderr"))
        first = (err.text or "").strip().splitlines()[-1:] or [""]
        out.append(_f(sig.code, sig.severity, f"{where}: {first[0][:200]}",
                      f"{sig.explanation}\nIt failed at: {err.step}.", ev, sig.fix))
    return out


def _f(code: str, severity: Severity, title: str, detail: str = "", evidence: list[Evidence] | None = None,
       fix: str | None = None) -> Finding:
    return Finding(code=code, severity=severity, title=title, detail=detail,
                   evidence=evidence or [], fix=Fix(fix) if fix else None,
                   area=AREA, check=code)
