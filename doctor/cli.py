"""Command line: argument parsing, the exit-code contract, and nothing else.

Subcommands import their machinery lazily so that ``--help`` and ``--version`` are instant and
``check`` never imports textual, requests or any ML framework.

Exit codes (stable): 0 no failure · 1 at least one failure (with --strict: or a warning) ·
2 usage or input error · 3 internal error (a bug: please report it).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from doctor import __version__

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3


COMMANDS = ("check", "snapshot", "matrix", "plan")


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit 2."""


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be between 0 and 3600 seconds, got {text}")
    return value


def _add_probe_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what to inspect")
    g.add_argument("--root", metavar="DIR", help="read every file the probes read (/proc, /sys, /usr/local/cuda*, "
                   "/etc/os-release …) under DIR, and run commands from DIR's PATH: for a mounted image or a test "
                   "sysroot. Driver libraries are not called.")
    g.add_argument("--python", metavar="PATH", action="append", default=[],
                   help="a Python interpreter or environment directory whose frameworks are checked (repeatable). "
                   "Default: the active environment ($VIRTUAL_ENV, then $CONDA_PREFIX, then python3 on PATH)")
    g.add_argument("--deep", action="store_true", help="also import each framework in its environment (one "
                   "subprocess each, with a timeout) and record what it says and which CUDA libraries it loaded")
    g.add_argument("--timeout", type=_positive, default=5.0, metavar="SEC",
                   help="timeout for each command and driver-library call (default: 5)")
    g.add_argument("--deep-timeout", type=_positive, default=60.0, metavar="SEC",
                   help="timeout for each framework import with --deep (default: 60)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpu-doctor",
        description="Checks whether this machine's NVIDIA driver, CUDA toolkit, cuDNN and ML frameworks fit "
        "together and work, and says how to fix what does not. Read-only and offline.",
        epilog="Exit codes: 0 no failure, 1 at least one failure (--strict: or warning), 2 usage or input "
        "error, 3 internal error. Run `gpu-doctor COMMAND --help` for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"gpu-doctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = sub.add_parser("check", help="inspect this machine (or a snapshot) and report",
                           description="Inspect this machine, or a facts snapshot recorded elsewhere, and report "
                           "one line per finding grouped by area. Never changes the system, never uses the "
                           "network.")
    check.add_argument("checks", nargs="*", metavar="CHECK_ID",
                       help="run only these checks (ids from --list-checks)")
    out = check.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print the report as JSON (schema gpu-doctor.report/v1)")
    out.add_argument("-v", "--verbose", action="store_true",
                     help="show the evidence and source under each line, checks that did not run, probe errors")
    out.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    out.add_argument("--list-checks", action="store_true", help="list the checks with their ids and exit")
    check.add_argument("--facts", metavar="FILE", help="diagnose this snapshot (from `gpu-doctor snapshot`; - for "
                       "standard input) instead of this machine; no probe runs")
    _add_probe_options(check)

    snap = sub.add_parser("snapshot", help="write the facts snapshot (JSON) to attach to a bug report",
                          description="Probe this machine and write everything learned, nothing judged, as JSON "
                          "(schema gpu-doctor.facts/v1). `gpu-doctor check --facts FILE` diagnoses it anywhere.")
    snap.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    _add_probe_options(snap)

    mat = sub.add_parser("matrix", help="ask the compatibility matrix (driver, gpu, cuda), or refresh it",
                         description="Answer from the bundled compatibility matrix (compat/), offline: what a "
                         "driver runs, what a GPU needs, what a CUDA version brings. `matrix refresh` is the one "
                         "command that downloads (framework rows from PyPI, into your cache).")
    msub = mat.add_subparsers(dest="what", metavar="QUESTION", required=True)
    for name, arg, text in (("driver", "VERSION", "the CUDA runtimes and newest framework builds a driver runs"),
                            ("gpu", "NAME", "compute capability, drivers, toolkits and builds for a GPU"),
                            ("cuda", "VERSION", "minimum driver, cuDNN versions and framework builds for a CUDA")):
        q = msub.add_parser(name, help=text, description=text)
        q.add_argument("value", metavar=arg)
        q.add_argument("--json", action="store_true", help="print the answer as JSON")
    ref = msub.add_parser("refresh", help="download the PyPI-derived framework rows into the user cache",
                          description="Fetch framework rows (torch, tensorflow[and-cuda], jax plugins) from PyPI "
                          "with timeouts and ETag caching into the user cache; on failure keep the bundled matrix.")
    ref.add_argument("--json", action="store_true", help="print the outcome as JSON")
    ref.add_argument("--timeout", type=_positive, default=10.0, metavar="SEC", help="network timeout (default 10)")

    pl = sub.add_parser("plan", help="the newest compatible combination for a GPU, driver and wishes",
                        description="Pick the newest PyTorch build (version, CUDA variant, index URL, cuDNN) that "
                        "runs on this GPU and driver and satisfies --want, or explain which constraint makes it "
                        "impossible and what to relax. Offline.")
    pl.add_argument("--gpu", metavar="NAME", help='GPU name as nvidia-smi prints it (e.g. "H100 80GB HBM3")')
    pl.add_argument("--driver", metavar="VERSION", help="installed driver (535 or 535.104.05)")
    pl.add_argument("--want", metavar="SPEC", help="e.g. 'torch>=2.4'")
    pl.add_argument("--python", metavar="X.Y", help="the Python version the environment uses")
    pl.add_argument("--json", action="store_true", help="print the plan as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv = ["check", *argv]  # `gpu-doctor` alone, or with check's options, means `check`
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            return cmd_check(args)
        if args.command == "snapshot":
            return cmd_snapshot(args)
        if args.command == "matrix":
            from doctor.cli_matrix import cmd_matrix

            return cmd_matrix(args)
        if args.command == "plan":
            from doctor.cli_matrix import cmd_plan

            return cmd_plan(args)
        parser.error(f"unknown command {args.command}")
    except UsageError as exc:
        print(f"gpu-doctor: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("gpu-doctor: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:
        if os.environ.get("GPU_DOCTOR_DEBUG"):
            raise
        print(f"gpu-doctor: internal error: {type(exc).__name__}: {exc} (set GPU_DOCTOR_DEBUG=1 for the "
              "traceback, and please report it)", file=sys.stderr)
        return EXIT_INTERNAL
    return EXIT_USAGE


def _host(args: argparse.Namespace) -> Any:
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


def _collect(args: argparse.Namespace) -> Any:
    from doctor.probes import collect

    return collect(_host(args), pythons=args.python, deep=args.deep, deep_timeout=args.deep_timeout)


def _load_facts(path: str) -> Any:
    from doctor.facts import FactsError, load_facts

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"--facts {path}: {exc.strerror or exc}") from None
    try:
        return load_facts(text)
    except FactsError as exc:
        raise UsageError(f"--facts {path}: not a gpu-doctor facts snapshot: {exc}") from None


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
    if args.facts and (args.root or args.python or args.deep):
        raise UsageError("--facts replays a snapshot: --root, --python and --deep do not apply")
    facts = _load_facts(args.facts) if args.facts else _collect(args)

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

    facts = _collect(args)
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


if __name__ == "__main__":
    sys.exit(main())
