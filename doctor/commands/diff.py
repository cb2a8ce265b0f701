"""`gpu-doctor diff A.json B.json`: what changed between two snapshots or reports."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from doctor.cli import EXIT_FAIL, EXIT_OK, UsageError
from doctor.model.severity import MARKS
from doctor.safeio import display

AREAS = ("Host", "Driver", "GPUs", "CUDA toolkit", "cuDNN", "Python & frameworks", "Environment", "Active tests")


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    p.description = ("Show the drift between two facts snapshots or reports — two nodes, or one node before and "
                     "after an upgrade: changed versions (driver, CUDA driver API, toolkits, cuDNN, Python packages, "
                     "GPU list, memory and ECC state) and the failing/warning findings that are new or gone. A "
                     "report's findings are taken as recorded; a snapshot is diagnosed here.")
    p.epilog = "Exit codes: 0 no drift, 1 drift, 2 usage or input error (a file that is neither)."
    p.add_argument("a", metavar="A.json", help="the first (before) snapshot or report; - for standard input")
    p.add_argument("b", metavar="B.json", help="the second (after) snapshot or report")
    p.add_argument("--json", action="store_true", help="print the drift as JSON")


def run(name: str, args: argparse.Namespace) -> int:
    from doctor.diff import drift

    if args.a == "-" and args.b == "-":
        raise UsageError("only one of A and B can be standard input")
    a_facts, a_findings = load_side(args.a)
    b_facts, b_findings = load_side(args.b)
    result = drift(a_facts, b_facts, a_findings, b_findings)
    if args.json:
        sys.stdout.write(json.dumps({"a": args.a, "b": args.b, **result.to_dict()}, indent=2) + "\n")
    else:
        sys.stdout.write(render_text(result, args.a, args.b))
    return EXIT_FAIL if result.drifted else EXIT_OK


def load_side(path: str) -> tuple[Any, list[Any]]:
    """(facts, problem findings) of a report or snapshot file; UsageError when it is neither."""
    from doctor.fleet import Problem
    from doctor.model.facts import FACTS_SCHEMA, Facts, FactsError
    from doctor.model.report import REPORT_SCHEMA
    from doctor.pipeline import diagnose
    from doctor.safeio import InputError, load_json, read_input

    try:
        text = read_input(path, "")
    except InputError as exc:
        raise UsageError(str(exc)) from None
    try:
        data = load_json(text)
    except InputError as exc:
        raise UsageError(f"{path}: {exc}") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    try:
        if schema == FACTS_SCHEMA:
            facts = Facts.from_dict(data)
            return facts, [Problem(f.code, f.severity, f.title) for f in diagnose(facts).findings]
        if schema == REPORT_SCHEMA:
            facts = Facts.from_dict(data.get("facts"))
            findings = data.get("findings")
            if not isinstance(findings, list) or not all(
                    isinstance(f, dict) and isinstance(f.get("code"), str) and isinstance(f.get("severity"), str)
                    and isinstance(f.get("title"), str) for f in findings):
                raise UsageError(f"{path}: a gpu-doctor report whose findings are not findings")
            return facts, [Problem(f["code"], f["severity"], f["title"]) for f in findings]
    except FactsError as exc:
        raise UsageError(f"{path}: its facts do not match {FACTS_SCHEMA}: {exc}") from None
    raise UsageError(f"{path}: not a gpu-doctor report or facts snapshot (schema: {schema!r})")


def _value(v: str | None, kind: str, side: str) -> str:
    if v is not None:
        return v
    return "(none)" if (kind, side) in (("added", "before"), ("removed", "after")) else "unknown"


def render_text(result: Any, a: str, b: str) -> str:
    """The drift for a terminal; every value from the two files passes :func:`display` (no raw control
    characters reach the terminal)."""
    lines = [f"gpu-doctor diff — {a} → {b}", ""]
    areas = [x for x in AREAS if any(c.area == x for c in result.changes)]
    for area in areas:
        changes = [c for c in result.changes if c.area == area]
        width = min(44, max(len(display(c.what, line=True)) for c in changes))
        lines.append(area)
        for c in changes:
            before = display(_value(c.before, c.kind, "before"), line=True)
            after = display(_value(c.after, c.kind, "after"), line=True)
            lines.append(f"  {display(c.what, line=True).ljust(width)}  {before} → {after}")
        lines.append("")
    if result.new or result.vanished:
        lines.append(f"Findings (failing and warning; + only in {b}, - only in {a})")
        lines += [display(f"  + {MARKS[p.severity]} {p.title}  [{p.code}]", line=True) for p in result.new]
        lines += [display(f"  - {MARKS[p.severity]} {p.title}  [{p.code}]", line=True) for p in result.vanished]
        lines.append("")
    if result.drifted:
        lines.append(f"DRIFT: {len(result.changes)} change(s), {len(result.new)} new and {len(result.vanished)} "
                     "vanished finding(s)")
    else:
        lines.append("NO DRIFT: same driver, GPUs, toolkits, libraries, packages and environment, same findings")
    lines[0] = display(lines[0], line=True)
    return "\n".join(lines) + "\n"
