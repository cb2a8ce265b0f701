"""`gpu-doctor explain "ERROR TEXT"`: which known error this is, and which of its causes applies here."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from doctor.cli import EXIT_FAIL, EXIT_OK, UsageError

if TYPE_CHECKING:
    from doctor.model.facts import Facts


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    from doctor.commands.check import add_probe_options

    p.description = ("Recognise a GPU error message (CUDA, PyTorch, TensorFlow, JAX, NCCL, NVML, nvidia-smi, the "
                     "driver, containers, nvcc), and run the checks that tell its causes apart on this machine — or "
                     "on a snapshot or a collect_env report. Exit 0 when the text matched a known error, 1 when "
                     "none did.")
    p.add_argument("text", nargs="*", metavar="ERROR TEXT",
                   help="the error message (quote it); - reads it from standard input, e.g. a whole log")
    p.add_argument("--json", action="store_true", help="print the result as JSON (schema gpu-doctor.explain/v1)")
    p.add_argument("--list", action="store_true", help="list the known error signatures and exit")
    src = p.add_argument_group("which machine the causes are checked on (default: this one)")
    src.add_argument("--facts", metavar="FILE", help="a snapshot from `gpu-doctor snapshot` (- for standard input)")
    src.add_argument("--from-collect-env", metavar="FILE", dest="collect_env",
                     help="the output of `python -m torch.utils.collect_env` from a bug report")
    src.add_argument("--no-probe", action="store_true",
                     help="inspect nothing: only name the error and list its possible causes")
    add_probe_options(p)


def run(name: str, args: argparse.Namespace) -> int:
    from doctor import explain
    from doctor.errors import signatures

    if args.list:
        for sig in signatures():
            print(f"{sig.id:<38} {sig.title}")
        return EXIT_OK
    text = _text(args)
    facts, facts_from = _facts(args)
    results = explain.explain(text, facts)
    if args.json:
        import json

        sys.stdout.write(json.dumps(explain.to_dict(results, facts_from), indent=2) + "\n")
    else:
        from doctor.safeio import display

        sys.stdout.write(display(explain.render_text(results, facts_from)))
    return EXIT_OK if results else EXIT_FAIL


def _text(args: argparse.Namespace) -> str:
    if args.text == ["-"]:
        from doctor.safeio import InputError, read_input

        try:  # bytes, decoded here: a log with stray non-UTF-8 bytes is still a log
            text = read_input("-", "explain")
        except InputError as exc:
            raise UsageError(str(exc)) from None
    else:
        if "-" in args.text:
            raise UsageError("- (read standard input) cannot be mixed with text arguments")
        text = " ".join(args.text)
    if not text.strip():
        raise UsageError('give the error text: gpu-doctor explain "ERROR TEXT" (or - to read standard input)')
    if args.text == ["-"] and "-" in (args.facts, args.collect_env):
        raise UsageError("standard input can hold the error text or the facts, not both")
    return text


def _facts(args: argparse.Namespace) -> tuple[Facts | None, str | None]:
    from doctor.commands.check import collect_from_args, facts_from_collect_env, load_facts_file

    given = [x for x in (args.facts and "--facts", args.collect_env and "--from-collect-env",
                         args.no_probe and "--no-probe") if x]
    if len(given) > 1:
        raise UsageError(f"{given[0]} and {given[1]} each say which machine to check: give one")
    if (args.facts or args.collect_env or args.no_probe) and (args.root is not None or args.python or args.deep):
        raise UsageError(f"{given[0]} inspects no machine: --root, --python and --deep do not apply")
    if args.no_probe:
        return None, None
    if args.facts:
        return load_facts_file(args.facts), f"the snapshot {args.facts}"
    if args.collect_env:
        return facts_from_collect_env(args.collect_env), f"the collect_env report {args.collect_env}"
    return collect_from_args(args), "this machine"
