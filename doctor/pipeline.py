"""The application layer: load (or collect) → diagnose → plan → render, and the one renderer registry.

The CLI commands and the TUI call this module and the model; the matrix is passed in by the caller (the
command reads it once). :func:`diagnose` runs the checks (doctor.engine) and then plans once: each finding's fix
is the step the one plan (doctor.fixplan) made of its intents, so `check`, `explain`, the TUI and `fix` say the
same thing. Renderers are imported only when their format is asked for (start-up speed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # the model is imported where it is used: `--help` of a command imports this module
    from doctor.active.events import Event, Outcome
    from doctor.fixplan import Options
    from doctor.host import Host
    from doctor.matrix import Matrix
    from doctor.model.facts import Facts
    from doctor.model.findings import Finding
    from doctor.model.live import GpuSample
    from doctor.model.plan import FixPlan
    from doctor.model.report import Report
    from doctor.registry import Check, Context


# --- collect or load -----------------------------------------------------------------------------


def collect(host: Host, pythons: list[str] | None = None, deep: bool = False, deep_timeout: float = 60.0,
            meanwhile: Callable[[], object] | None = None) -> Facts:
    """The facts of the machine ``host`` reaches, from the probes; ``meanwhile`` runs while their child processes
    answer (see :func:`warm_up`)."""
    from doctor.probes import collect as probe

    return probe(host, pythons=pythons, deep=deep, deep_timeout=deep_timeout, meanwhile=meanwhile)


def warm_up() -> None:
    """Import what diagnosing, planning and rendering a report need, and read the bundled matrix: `check` runs
    this while the probes' child processes (NVML, the Python environments) answer, so that their wait and this
    start-up work overlap instead of adding up. Nothing here depends on the facts; the matrix read is the one
    :func:`doctor.matrix.current` reads afterwards (cached for the process, as it always is)."""
    import importlib

    for module in ("doctor.engine", "doctor.checks", "doctor.fixplan", "doctor.render.fixline", "doctor.render.text"):
        importlib.import_module(module)
    from doctor.matrix import bundled

    bundled()


def sample_gpus(host: Host) -> GpuSample:
    """The live GPU sample behind the TUI's GPUs table, through the probes' own NVML child process (killed on
    timeout), so a wedged driver cannot hang the UI. Called once a second from a worker thread."""
    from doctor.model.live import GpuSample
    from doctor.probes import driver
    from doctor.probes.base import Recorder
    from doctor.probes.native import run_native

    rec = Recorder()
    native = run_native(host, rec)
    if native and native.get("gpus"):
        return GpuSample(driver.probe_gpus(host, rec, native, None))
    reason = (native or {}).get("nvml_error") or (rec.errors[0].reason if rec.errors else "NVML listed no GPU")
    return GpuSample([], str(reason))



def facts_of_report(text: str) -> Facts | None:
    """The facts inside a report (`check --json`), as `diff` and `fleet` read them; None when not a report."""
    from doctor.model.facts import FACTS_SCHEMA, Facts, FactsError
    from doctor.model.report import REPORT_SCHEMA

    if f'"{REPORT_SCHEMA}"' not in text[:200]:
        return None  # the report's schema key comes first: a snapshot is not parsed twice
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None  # load_facts says what is wrong with it
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        return None
    if not isinstance(data.get("facts"), dict):
        raise FactsError(f"a gpu-doctor report without its facts (a {FACTS_SCHEMA} object under \"facts\")")
    return Facts.from_dict(data["facts"])


def load(text: str) -> Facts:
    """The facts of a snapshot or of a report's text; :class:`FactsError` when it is neither."""
    from doctor.model.facts import load_facts

    return facts_of_report(text) or load_facts(text)


# --- diagnose and plan --------------------------------------------------------------------------


def diagnose(facts: Facts, checks: list[Check] | None = None, ctx: Context | None = None,
             matrix: Matrix | None = None, plan_fixes: bool = True) -> Report:
    """The report every surface shows: the checks' findings (doctor.engine) with the plan's fixes.

    The matrix is ``ctx``'s, else ``matrix``, else the current one (doctor.matrix.current). ``plan_fixes``
    False: the checks' own fix text, for a caller that makes its own plan (`fix`) or reads only the status."""
    from doctor.engine import diagnose as run_checks
    from doctor.registry import Context

    if ctx is None:
        if matrix is None:
            from doctor.matrix import current

            matrix = current()
        ctx = Context(matrix=matrix)
    report = run_checks(facts, checks, ctx)
    return planned(report, ctx.matrix) if plan_fixes else report


def planned(report: Report, matrix: Any) -> Report:
    """The report with the fix the one plan gives each finding. A planner failure leaves the checks' own fix
    text: the report still stands."""
    from dataclasses import replace

    return replace(report, findings=planned_fixes(report.facts, report.findings, matrix))


def planned_fixes(facts: Facts, findings: list[Finding], matrix: Any) -> list[Finding]:
    if not any(f.intents for f in findings):
        return findings
    from doctor.fixplan import Options, build_plan
    from doctor.matrix import Matrix
    from doctor.render.fixline import with_plan_fixes

    if not isinstance(matrix, Matrix):
        return findings
    try:
        python_plan = build_plan(facts, findings, matrix, Options(python_only=True)) if any(
            any(i.python_only for i in f.intents) and not all(i.python_only for i in f.intents) for f in findings
        ) else None
        return with_plan_fixes(findings, build_plan(facts, findings, matrix), python_plan)
    except Exception:
        return findings


def plan(facts: Facts, findings: list[Finding], matrix: Matrix | None = None, options: Options | None = None,
         python_only: bool = False) -> FixPlan:
    """The one fix plan for these findings (`fix`, `pin`, the TUI's fix view), with the current matrix when none
    is given; ``python_only``: only what the Python environment can do (when no ``options`` say it).
    :class:`PlanError` when the options cannot be met."""
    from doctor.fixplan import Options, build_plan

    if matrix is None:
        from doctor.matrix import current

        matrix = current()
    return build_plan(facts, findings, matrix, options or Options(python_only=python_only))


def pin_plan(facts: Facts, manager: str) -> FixPlan:
    """`pin`'s plan: hold this machine's driver packages (of ``manager``, dpkg or rpm) and keep its branch."""
    from doctor.fixplan import pin_plan as plan_pins

    return plan_pins(facts, manager)


def judge_outcome(outcome: Outcome, matrix: Matrix | None = None) -> Outcome:
    """An active test's outcome as its runner ended it, judged: the findings the active-test checks give for its
    measurements (those `check --facts` gives for a snapshot holding them), its status and its line."""
    from dataclasses import replace

    if outcome.judged or outcome.active is None:
        return outcome
    from doctor.checks.active import CHECKS
    from doctor.model.facts import Facts
    from doctor.model.severity import status

    active = outcome.context.merged(outcome.active) if outcome.context is not None else outcome.active
    checks = [c for c in CHECKS if outcome.checks is None or c.id in outcome.checks]
    findings = diagnose(Facts(active=active), checks=checks, matrix=matrix).findings
    summary = outcome.summary
    if not summary:
        bad = [f for f in findings if f.severity in ("fail", "warn")]
        if outcome.what is not None:
            summary = f"{outcome.what}: " + (bad[0].title + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else "")
                                             if bad else "passed")
        else:
            summary = (bad or findings)[0].title if findings else "nothing to report"
    return replace(outcome, status=status(f.severity for f in findings), summary=summary, findings=findings,
                   judged=True)


def judged(events: Iterable[Event], matrix: Matrix | None = None) -> Iterator[Event]:
    """An active test's events with its outcome judged (:func:`judge_outcome`); progress and log lines as they
    come."""
    from doctor.active.events import Outcome

    for ev in events:
        yield judge_outcome(ev, matrix) if isinstance(ev, Outcome) else ev


def check(facts: Facts, matrix: Matrix, checks: list[Check] | None = None, static: bool = False,
          requirements: list[Any] | None = None, image: Any = None, cpu: bool = False) -> Report:
    """`gpu-doctor check`'s report: the selected checks (with ``static``, only those that judge an image's
    own consistency), planned; then the --require gates; then, for a Dockerfile, each finding's line."""
    from dataclasses import replace

    from doctor.registry import Context

    ctx = Context(matrix=matrix, options={"static": static, "cpu": cpu})  # cpu: an image meant for CPUs
    if static:
        from doctor.checks import REGISTRY

        checks = [c for c in (checks or REGISTRY) if c.static]
    report = diagnose(facts, checks=checks, ctx=ctx)
    if static:
        report = replace(report, mode="static")
    if requirements:
        from doctor.require import evaluate

        report = report.with_findings(evaluate(facts, requirements))
    if image is not None:
        from doctor.dockerfile import locate

        report = locate(report, image)
    return report


# --- fix scripts --------------------------------------------------------------------------------

SCRIPT_FORMATS = ("auto", "apt", "dnf", "conda", "pip")  # `gpu-doctor fix --format …`
PYTHON_FORMATS = ("pip", "conda")  # only what the Python environment can do: the plan takes its Python-only routes


class ScriptFormatError(ValueError):
    """A script format that cannot render this plan (apt for a RHEL host); the message says why."""


def script_renderers(plan: FixPlan, fmt: str) -> tuple[Any, Any]:
    """(system renderer, Python renderer) of a fix script format for this plan."""
    from doctor.render import apt, conda, dnf, pip

    python = conda if plan.python_origin == "CONDA_PREFIX" else pip
    if fmt == "pip":
        return None, pip
    if fmt == "conda":
        return None, conda
    if fmt in ("apt", "dnf"):
        mod = apt if fmt == "apt" else dnf
        if not mod.supports(plan.os_id, plan.os_version):
            raise ScriptFormatError(
                f"--format {fmt}: the plan is for {plan.os_id or '?'} {plan.os_version or '?'}; {fmt} renders "
                "Ubuntu 20.04/22.04/24.04 and Debian 11/12/13 (apt), RHEL/Rocky/Alma 8/9 (dnf)")
        return mod, python
    system = next((m for m in (apt, dnf) if m.supports(plan.os_id, plan.os_version)), None)
    return system, python


def fix_script(plan: FixPlan, fmt: str) -> str:
    """The fix script of this plan in one format (`gpu-doctor fix --format FMT`, the TUI's fix view)."""
    from doctor import __version__
    from doctor.render.fixscript import render_script

    system, python = script_renderers(plan, fmt)
    label = fmt if fmt != "auto" else "+".join(
        m.__name__.rsplit(".", 1)[-1] for m in (system, python) if m is not None)
    return render_script(plan, system, python, label, __version__, python_only=fmt in PYTHON_FORMATS)


# --- render -------------------------------------------------------------------------------------


class Format(NamedTuple):
    """One output format of a report: ``render(report, verbose, strict, **options)`` gives its text; ``write``,
    when set, writes it to a path itself (else the text is written by :func:`doctor.render.files.write_output`).
    ``options`` are what a renderer cannot read from the report: ``elapsed`` (seconds the check took, JUnit's
    ``time``), ``workspace`` (the GitHub Actions checkout, for annotation paths), ``title`` (Markdown: the report's
    name), ``colour`` (text: None decides by standard output, False in a file); a renderer ignores the rest."""

    name: str
    about: str
    render: Callable[..., str]
    write: Callable[[Report, str], None] | None = None
    file_name: str = ""  # what an export saves it as (the TUI); empty: report.NAME

    @property
    def default_file(self) -> str:
        return self.file_name or f"report.{self.name}"


def _text(report: Report, verbose: bool, strict: bool, colour: bool | None = None, **_: Any) -> str:
    from doctor.render.text import render

    return render(report, verbose=verbose, colour=colour)


def _json(report: Report, verbose: bool, strict: bool, **_: Any) -> str:
    return json.dumps(report.to_dict(), indent=2) + "\n"


def _junit(report: Report, verbose: bool, strict: bool, elapsed: float | None = None, **_: Any) -> str:
    from doctor.render.junit import render

    return render(report, strict=strict, elapsed=elapsed)


def _markdown(report: Report, verbose: bool, strict: bool, title: str = "", **_: Any) -> str:
    from doctor.render.markdown import render

    return render(report, title)


def _github(report: Report, verbose: bool, strict: bool, workspace: str | None = None, **_: Any) -> str:
    from doctor.render.github import render

    return render(report, strict=strict, workspace=workspace)


def _prometheus(report: Report, verbose: bool, strict: bool, **_: Any) -> str:
    from doctor.render.prometheus import render

    return render(report)


def _prometheus_write(report: Report, path: str) -> None:
    from doctor.render.prometheus import write_textfile

    write_textfile(report, path)


def _nfd(report: Report, verbose: bool, strict: bool, **_: Any) -> str:
    from doctor.render.nfd import render

    return render(report)


# The one renderer registry, in the order `--format` lists them. A new format is one renderer and one line here:
# `check --format` offers it, and so does the TUI's export (tests/test_formats.py proves both).
FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("text", "for people", _text, file_name="report.txt"),
    Format("json", "schema gpu-doctor.report/v1", _json),
    Format("junit", "each check a test case, for CI", _junit, file_name="report.junit.xml"),
    Format("markdown", "for an issue or a ticket; facts in a collapsible block", _markdown, file_name="report.md"),
    Format("github", "GitHub Actions annotations", _github, file_name="report.github.txt"),
    Format("prometheus", "metrics gpu_doctor_*", _prometheus, _prometheus_write, file_name="report.prom"),
    Format("nfd", "Node Feature Discovery labels", _nfd),
)}


def render(report: Report, fmt: str, verbose: bool = False, strict: bool = False, **options: Any) -> str:
    """The report in a registered format (``options``: see :class:`Format`)."""
    return FORMATS[fmt].render(report, verbose, strict, **options)


def write(report: Report, fmt: str, path: str, strict: bool = False, **options: Any) -> None:
    """The report written to ``path`` by :func:`doctor.render.files.write_output`: atomically over a regular file
    (a temporary dot-file renamed over it, as the node_exporter textfile collector and NFD's features.d readers
    need), through a character device or a FIFO, never renamed over one; :class:`~doctor.render.files.OutputError`
    if not."""
    from doctor.render.files import write_output

    writer = FORMATS[fmt].write
    if writer is not None:
        writer(report, path)
    else:
        write_output(path, render(report, fmt, strict=strict, **{"colour": False, **options}))  # never escapes
