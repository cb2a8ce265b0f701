"""`gpu-doctor smoke --framework`: each framework's GPU smoke test in the target Python environment.

One child process per (interpreter, framework) runs :mod:`doctor.active.framework_child` with a timeout.
What a framework raises is matched against :data:`SIGNATURES` — the [[smoke]] rows of the one error catalog,
compat/errors.toml, whose patterns are `explain`'s signatures (the texts frameworks really print, each with its
source) — and becomes the finding of the same code the static checks use, with the
original text in the evidence. The mapping is pure and table-tested (tests/test_smoke_frameworks.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from doctor.active.events import Event, Log, Progress
from doctor.model.findings import Evidence, Finding, Fix

DEFAULT_TIMEOUT = 120.0
AREA = "Framework smoke test"


@dataclass(frozen=True)
class Signature:
    pattern: str  # the catalog patterns, for display; `compiled` is what is searched
    code: str
    explanation: str
    fix: str | None = None
    severity: str = "fail"
    compiled: tuple[re.Pattern[str], ...] = ()
    source: str | None = None
    ids: tuple[str, ...] = ()  # the compat/errors.toml signatures this row reads


@cache
def signatures() -> tuple[Signature, ...]:
    """The [[smoke]] rows of the one error catalog (compat/errors.toml), in file order, compiled on first use.

    Order matters: the first match wins, so specific texts come before generic ones ("no kernel image" is also
    a "CUDA error"). The rows and their patterns live in compat/errors.toml, shared with `explain`."""
    from doctor.errors import signatures as explain_signatures
    from doctor.matrix import bundled

    by_id = {s.id: s for s in explain_signatures()}
    out = []
    for row in bundled().rows("errors", "smoke"):
        try:
            sigs = [by_id[i] for i in row["signatures"] if i in by_id]
            if not sigs:
                continue
            out.append(Signature(" | ".join(s.pattern.pattern for s in sigs), str(row["finding"]),
                                 str(row["explanation"]), str(row["fix"]) if row.get("fix") else None,
                                 str(row.get("severity", "fail")), tuple(s.pattern for s in sigs),
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
    from doctor.errors import bounded

    joined = bounded("\n".join(bounded(t) for t in texts if t))
    for sig in signatures():
        if any(p.search(joined) for p in sig.compiled):
            return sig
    return FALLBACK


def framework_events(pythons: Sequence[str], frameworks: Sequence[str], timeout: float = DEFAULT_TIMEOUT,
                     only_installed: bool = False) -> Iterator[Event]:
    from doctor.active.runner import child_events

    script = resources.files("doctor.active").joinpath("framework_child.py").read_text()
    runs: list[dict[str, Any]] = []
    total = len(pythons) * len(frameworks)
    done = 0
    for python in pythons:
        for name in frameworks:
            yield Progress(done / total, f"{name} in {python}")
            run: dict[str, Any] = {"framework": name, "python": python}
            for ev in child_events([python, "-c", script, name], _env(), timeout):
                kind = ev.get("event")
                if kind == "step":
                    run["last_step"] = ev.get("step")
                    yield Progress(done / total, f"{name}: {ev.get('step')}")
                elif kind == "framework":
                    run.update({k: v for k, v in ev.items() if k != "event"})
                elif kind in ("exit", "hang"):
                    run["end"] = ev
            done += 1
            if run.get("installed") is False and only_installed:
                continue
            runs.append(run)
            if run.get("ok"):
                yield Log(f"{name}: GPU matrix product matches the CPU")
    from doctor.active.record import outcome
    from doctor.model.facts_active import ActiveFacts, FrameworkTest, coerce

    test = coerce(FrameworkTest, {"pythons": list(pythons), "requested": list(frameworks), "runs": runs})
    out = outcome(ActiveFacts(frameworks=test), {"frameworks": runs}, what="framework smoke test")
    yield out


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")  # TensorFlow says why it has no GPU only in its log
    return env


def record_findings(test: dict[str, Any], matrix: Any = None) -> list[Finding]:
    """Pure: the findings of a recorded framework smoke test (facts ``active.frameworks``, as plain dicts)."""
    findings = [f for run in test.get("runs") or [] for f in judge_run(run, _silence(run), matrix)]
    if not test.get("runs"):
        findings.append(Finding("framework.not_installed", "warn", "No framework (torch, tensorflow, jax, cupy) is "
                                "installed in " + ", ".join(test.get("pythons") or ["the target environment"]),
                                area=AREA, check="framework.not_installed"))
    return findings


def _silence(run: dict[str, Any]) -> float:
    return float((run.get("end") or {}).get("silent_for") or DEFAULT_TIMEOUT)


def judge_run(run: dict[str, Any], timeout: float, matrix: Any = None) -> list[Finding]:
    """The findings of one framework's run. Pure. ``matrix`` gives tensor-core peaks (none: figures only)."""
    name, python = run["framework"], run["python"]
    who = f"{name} {run['version']}" if run.get("version") else name
    where = f"{who} in {python}"
    end = run.get("end") or {}
    if end.get("event") == "hang":
        return [_f("framework.hang", "fail",
                   f"{where} did not finish within {timeout:g} s (at: {run.get('last_step')})",
                   "The framework hung: importing it or its first CUDA call never returned.",
                   [Evidence("framework.step", run.get("last_step"), "child progress")])]
    if "installed" not in run:
        tail = (end.get("stderr") or end.get("error") or "").strip().splitlines()
        return [_f("framework.gpu_smoke_failed", "fail", f"{name} in {python}: the test process died "
                   f"(exit {end.get('returncode')}) at: {run.get('last_step') or 'start'}",
                   "The interpreter could not run the test, or the framework crashed the process.",
                   [Evidence("framework.stderr", "\n".join(tail[-5:]) or None, "child stderr")])]
    if not run["installed"]:
        return [_f("framework.not_installed", "warn", f"{name} is not installed in {python}",
                   "Nothing to test.", [Evidence("framework.installed", False, f"importlib.util.find_spec({name!r})")])]
    out: list[Finding] = []
    for key, what in (("matmul", "matrix product"), ("conv", "cuDNN convolution")):
        res = run.get(key)
        if not res:
            continue
        detail = (f"max |GPU − CPU| = {res['max_abs_err']:.3g}, tolerance {res['tolerance']:.3g} "
                  f"({res['rtol']:g} × the largest CPU value; TF32 off)")
        ev = [Evidence(f"framework.{key}", res, f"{name} on the GPU vs the CPU")]
        if res["ok"]:
            out.append(_f("framework.gpu_smoke", "ok", f"{where}: the GPU {what} matches the CPU", detail, ev))
        else:
            out.append(_f("gpu.wrong_results", "fail", f"{where}: the GPU {what} differs from the CPU", detail +
                          ": the GPU (or its math library) computes wrong results.", ev))
    if run.get("matmul_tflops"):
        from doctor.active.judge import tensor_core_findings

        who_gpu = f"{where}, {run['gpu_name']}" if run.get("gpu_name") else where
        out += tensor_core_findings(who_gpu, run.get("gpu_name"), run["matmul_tflops"], matrix, AREA,
                                    f"{name}.matmul")
    err = run.get("error")
    if err:
        sig = classify(err.get("text"), *run.get("warnings") or [], end.get("stderr"))
        ev = [Evidence("framework.error", err.get("text"), f"{name}: {err.get('step')}")]
        ev += [Evidence("framework.warning", w, f"{name}: warnings") for w in run.get("warnings") or []]
        if sig is FALLBACK or sig.code == "framework.gpu_libs_missing":
            lines = [ln for ln in (end.get("stderr") or "").splitlines() if ln.strip()]
            if lines:
                ev.append(Evidence("framework.log", "\n".join(lines[-8:]), f"{name}: stderr"))
        first = (err.get("text") or "").strip().splitlines()[-1:] or [""]
        out.append(_f(sig.code, sig.severity, f"{where}: {first[0][:200]}",
                      f"{sig.explanation}\nIt failed at: {err.get('step')}.", ev, sig.fix))
    return out


def _f(code: str, severity: str, title: str, detail: str = "", evidence: list[Evidence] | None = None,
       fix: str | None = None) -> Finding:
    return Finding(code=code, severity=severity, title=title, detail=detail,  # type: ignore[arg-type]
                   evidence=evidence or [], fix=Fix(fix) if fix else None,
                   area=AREA, check=code)
