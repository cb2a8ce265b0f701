"""`gpu-doctor check` and `gpu-doctor snapshot`: probe (or load) facts, diagnose, report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from doctor.cli import EXIT_FAIL, EXIT_OK, UsageError, positive_seconds


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    if name == "check":
        p.description = ("Inspect this machine, or a facts snapshot recorded elsewhere, and report one line per "
                         "finding grouped by area. Never changes the system, never uses the network.")
        p.add_argument("checks", nargs="*", metavar="CHECK_ID", help="run only these checks (ids from --list-checks)")
        out = p.add_argument_group("output")
        out.add_argument("--json", action="store_true", help="print the report as JSON (schema gpu-doctor.report/v1)")
        out.add_argument("-v", "--verbose", action="store_true",
                         help="show the evidence and source under each line, checks that did not run, probe errors")
        out.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
        out.add_argument("--list-checks", action="store_true", help="list the checks with their ids and exit")
        p.add_argument("--facts", metavar="FILE", help="diagnose this snapshot (from `gpu-doctor snapshot`; - for "
                       "standard input) instead of this machine; no probe runs")
        p.add_argument("--from-collect-env", metavar="FILE", dest="collect_env",
                       help="diagnose the output of `python -m torch.utils.collect_env` pasted in a bug report "
                       "(- for standard input); no probe runs")
    else:
        p.description = ("Probe this machine and write everything learned, nothing judged, as JSON (schema "
                         "gpu-doctor.facts/v1). `gpu-doctor check --facts FILE` diagnoses it anywhere.")
        p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    add_probe_options(p)


def run(name: str, args: argparse.Namespace) -> int:
    return cmd_check(args) if name == "check" else cmd_snapshot(args)


def add_probe_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what to inspect")
    g.add_argument("--root", metavar="DIR", help="read every file the probes read (/proc, /sys, /usr/local/cuda*, "
                   "/etc/os-release …) under DIR, and run commands from DIR's PATH: for a mounted image or a test "
                   "sysroot. Driver libraries are not called.")
    g.add_argument("--python", metavar="PATH", action="append", default=[],
                   help="a Python interpreter or environment directory whose frameworks are checked (repeatable). "
                   "Default: the active environment ($VIRTUAL_ENV, then $CONDA_PREFIX, then python3 on PATH)")
    g.add_argument("--deep", action="store_true", help="also import each framework in its environment (one "
                   "subprocess each, with a timeout) and record what it says and which CUDA libraries it loaded")
    g.add_argument("--timeout", type=positive_seconds, default=5.0, metavar="SEC",
                   help="timeout for each command and driver-library call (default: 5)")
    g.add_argument("--deep-timeout", type=positive_seconds, default=60.0, metavar="SEC",
                   help="timeout for each framework import with --deep (default: 60)")


def host_from_args(args: argparse.Namespace) -> Any:
    from doctor.host import Host

    root = Path(args.root) if args.root else Path("/")
    if args.root and not root.is_dir():
        raise UsageError(f"--root {args.root}: not a directory")
    host = Host(root=root.resolve() if args.root else root, timeout=args.timeout)
    for p in args.python:
        real = host.path(p)
        if not real.exists():
            raise UsageError(f"--python {p}: no such interpreter or environment")
    return host


def collect_from_args(args: argparse.Namespace) -> Any:
    from doctor.probes import collect

    return collect(host_from_args(args), pythons=args.python, deep=args.deep, deep_timeout=args.deep_timeout)


def load_facts_file(path: str) -> Any:
    from doctor.facts import FactsError, load_facts

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"--facts {path}: {exc.strerror or exc}") from None
    try:
        return load_facts(text)
    except FactsError as exc:
        raise UsageError(f"--facts {path}: not a gpu-doctor facts snapshot: {exc}") from None


def facts_from_collect_env(path: str) -> Any:
    from doctor.collect_env import CollectEnvError, parse

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"--from-collect-env {path}: {exc.strerror or exc}") from None
    try:
        return parse(text)
    except CollectEnvError as exc:
        raise UsageError(f"--from-collect-env {path}: {exc}") from None


def cmd_check(args: argparse.Namespace) -> int:
    from doctor.checks import REGISTRY, by_id

    if args.list_checks:
        for c in REGISTRY:
            print(f"{c.id:<34} {c.area:<20} {c.summary}")
        return EXIT_OK
    selected = None
    if args.checks:
        unknown = [c for c in args.checks if by_id(c) is None]
        if unknown:
            raise UsageError(f"unknown check id {unknown[0]!r} (see `gpu-doctor check --list-checks`)")
        selected = [by_id(c) for c in args.checks]
    if args.facts and args.collect_env:
        raise UsageError("--facts and --from-collect-env each name the machine to diagnose: give one")
    if (args.facts or args.collect_env) and (args.root or args.python or args.deep):
        raise UsageError("--facts and --from-collect-env replay a recorded machine: "
                         "--root, --python and --deep do not apply")
    if args.collect_env:
        facts = facts_from_collect_env(args.collect_env)
    else:
        facts = load_facts_file(args.facts) if args.facts else collect_from_args(args)

    from doctor.engine import diagnose

    report = diagnose(facts, checks=selected)  # type: ignore[arg-type]
    if args.json:
        import json

        sys.stdout.write(json.dumps(report.to_dict(), indent=2) + "\n")
    else:
        from doctor.render.text import render

        sys.stdout.write(render(report, verbose=args.verbose))
    if report.status == "fail" or (args.strict and report.status == "warn"):
        return EXIT_FAIL
    return EXIT_OK


def cmd_snapshot(args: argparse.Namespace) -> int:
    from doctor.facts import facts_schema, validate

    facts = collect_from_args(args)
    problems = validate(facts.to_dict(), facts_schema())
    if problems:  # our own output breaking our own contract is a bug, not user error
        raise RuntimeError(f"snapshot does not match its schema: {problems[0]}")
    text = facts.to_json()
    if args.output:
        try:
            Path(args.output).write_text(text)
        except OSError as exc:
            raise UsageError(f"-o {args.output}: {exc.strerror or exc}") from None
        print(f"gpu-doctor: wrote {args.output} ({len(text)} bytes)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK
