"""`gpu-doctor check` and `gpu-doctor snapshot`: probe (or load) facts, diagnose, report."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from doctor.cli import EXIT_FAIL, EXIT_OK, EXIT_UNKNOWN, UsageError, positive_seconds
from doctor.pipeline import FORMATS

if TYPE_CHECKING:  # `--help` imports this module: the model and the registry only when a command runs
    from doctor.model.facts import Facts
    from doctor.registry import Check


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    if name == "check":
        p.description = ("Inspect this machine, or a facts snapshot recorded elsewhere, and report one line per "
                         "finding grouped by area. Never changes the system, never uses the network.")
        p.add_argument("checks", nargs="*", metavar="CHECK_ID", help="run only these checks (ids from --list-checks)")
        out = p.add_argument_group("output")
        out.add_argument("--format", choices=tuple(FORMATS), default=None,
                         help=", ".join(f"{f.name} ({'default; ' if f.name == 'text' else ''}{f.about})"
                                        for f in FORMATS.values()))
        out.add_argument("--output", metavar="PATH", help="write the report to PATH instead of standard output: "
                         "atomically over a regular file (node_exporter's textfile directory for prometheus, NFD's "
                         "features.d for nfd), through a character device or a FIFO with a reader; a symlink is "
                         "followed, a block device, socket or unread FIFO refused")
        out.add_argument("--json", action="store_true", help="the same as --format json")
        out.add_argument("-v", "--verbose", action="store_true",
                         help="show the evidence and source under each line, checks that did not run, probe errors")
        out.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
        out.add_argument("--list-checks", action="store_true", help="list the checks with their ids and exit")
        p.add_argument("--facts", metavar="FILE", help="diagnose this snapshot (from `gpu-doctor snapshot`) or the "
                       "facts of a report (`check --json`); - for standard input. No probe runs")
        gate = p.add_argument_group("images and CI gates")
        gate.add_argument("--static", action="store_true",
                          help="judge an image build, where no GPU or driver is attached: only the image's own "
                          "consistency is checked, the missing driver is not a failure, and the minimum host driver "
                          "the image needs is printed")
        gate.add_argument("--dockerfile", metavar="PATH",
                          help="judge the image a Dockerfile builds, without building it: its base image, pip / "
                          "conda installs and ENV lines become the facts of --static (implied); findings point at "
                          "their line. - reads standard input (the build context is then the current directory)")
        gate.add_argument("--build-arg", metavar="NAME=VALUE", action="append", default=[],
                          help="with --dockerfile: a build argument, as for `docker build` (repeatable)")
        gate.add_argument("--context", metavar="DIR", help="with --dockerfile: the build context requirements files "
                          "and projects are read from, as `docker build DIR` (default: the Dockerfile's directory)")
        gate.add_argument("--cpu", action="store_true",
                          help="with --static/--dockerfile: the image is meant for CPUs: CPU builds of the frameworks "
                          "are right, and it is ready without CUDA (an image can say so itself with "
                          "LABEL gpu-doctor.cpu=true)")
        gate.add_argument("--target-gpu", metavar="NAME", help='with --static: the GPU the image will run on '
                          '(e.g. "H100 80GB HBM3"), for the arch checks')
        gate.add_argument("--target-cc", metavar="X.Y", help="with --static: the compute capability instead of a name")
        gate.add_argument("--host-driver", metavar="VERSION",
                          help="with --static: compare the image against this host driver (e.g. 535.104.05)")
        gate.add_argument("--require", metavar="SPEC", action="append", default=[],
                          help="a gate that becomes a finding (repeatable): torch>=2.4, cuda>=12.1, cudnn>=9, "
                          "driver>=550, gpus>=8, gpu-memory>=79GiB, cc>=8.0, python>=3.10, tensorflow…, jax…")
        p.add_argument("--from-collect-env", metavar="FILE", dest="collect_env",
                       help="diagnose the output of `python -m torch.utils.collect_env` pasted in a bug report "
                       "(- for standard input), with any nvidia-smi, deviceQuery or jax.print_environment_info() "
                       "output pasted beside it or instead of it; no probe runs")
    else:
        p.description = ("Probe this machine and write everything learned, nothing judged, as JSON (schema "
                         "gpu-doctor.facts/v1). `gpu-doctor check --facts FILE` diagnoses it anywhere.")
        p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
        p.add_argument("--smoke", action="store_true", help="also run the driver smoke test on every GPU and record "
                       "what it measured (facts `active`); see `gpu-doctor smoke`")
        p.add_argument("--oom", action="store_true", help="also run the OOM probe on every idle GPU and record it")
    add_probe_options(p)


def run(name: str, args: argparse.Namespace) -> int:
    return cmd_check(args) if name == "check" else cmd_snapshot(args)


# The options after which `check` / `snapshot` still probe this machine: flags, and options that take a value.
# Any other option (--root, --facts, --from-collect-env, --static, --dockerfile, --list-checks, --help, an
# abbreviation …) leaves the probes to start their children themselves, after the arguments are parsed.
_AHEAD_FLAGS = {"check": {"--json", "-v", "--verbose", "--strict", "--deep"},
                "snapshot": {"--deep", "--smoke", "--oom"}}
_AHEAD_VALUES = {"check": {"--format", "--output", "--python", "--timeout", "--deep-timeout"},
                 "snapshot": {"-o", "--output", "--python", "--timeout", "--deep-timeout"}}


def start_ahead(name: str, argv: list[str]) -> Any:
    """Before the arguments are parsed (the CLI's hook): when they surely ask to probe this machine, start the NVML
    child now (:mod:`doctor.ahead`: the slowest answer of every `check`, started before the imports it
    would otherwise wait for). Returns what ends it if the probes did not take it (the CLI calls it in its
    ``finally``), or None."""
    flags, values = _AHEAD_FLAGS.get(name), _AHEAD_VALUES.get(name)
    if flags is None or values is None:
        return None
    tokens = iter(argv)
    for token in tokens:
        if not token.startswith("-") or token == "-":
            continue  # a check id
        option, equals, _ = token.partition("=")
        if option in flags and not equals:
            continue
        if option in values:
            if not equals:
                next(tokens, None)
            continue
        return None
    from doctor import ahead

    return ahead.discard if ahead.start_native() else None


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
                   help="timeout for each command and driver-library call (default: 5); all commands together "
                   "have 3 times this (plus twice --deep-timeout with --deep) as one overall deadline")
    g.add_argument("--deep-timeout", type=positive_seconds, default=60.0, metavar="SEC",
                   help="timeout for each framework import with --deep (default: 60)")


def host_from_args(args: argparse.Namespace) -> Any:
    from doctor.host import Host

    if args.root is not None and not args.root.strip():
        raise UsageError("--root: empty path (leave --root out to inspect this machine)")
    from pathlib import Path  # not at import: `check` starts its first child before pathlib is needed

    root = Path(args.root) if args.root is not None else Path("/")
    if args.root is not None and not root.is_dir():
        raise UsageError(f"--root {args.root}: not a directory")
    # One overall deadline besides each command's timeout (hung commands must not add up); --deep imports
    # have their own, longer timeout.
    budget = 3 * args.timeout + (2 * args.deep_timeout if getattr(args, "deep", False) else 0)
    host = Host(root=root.resolve() if args.root is not None else root, timeout=args.timeout, budget=budget)
    args.python = [checked_python(host, p) for p in args.python]
    return host


def checked_python(host: Any, given: str) -> str:
    """A --python argument as an absolute path to an interpreter or environment, or a one-line usage error.

    Stored absolute because it is written into facts and fix scripts that are read from other directories.
    """
    import os

    from doctor.probes.pyenvs import interpreter_of

    if not given.strip():
        raise UsageError("--python: empty path")
    if not os.path.isabs(given):
        if not host.live:
            raise UsageError(f"--python {given}: with --root, give the absolute path inside the root")
        given = os.path.abspath(given)
    real = host.path(given)
    if not real.exists():
        raise UsageError(f"--python {given}: not found")
    exe = interpreter_of(host, given)
    if real.is_dir() and not host.path(exe).exists():
        raise UsageError(f"--python {given}: a directory but not a Python environment (no bin/python3, bin/python "
                         "or python.exe in it)")
    if not host.path(exe).is_file() or not os.access(host.path(exe), os.X_OK):
        raise UsageError(f"--python {given}: exists but is not a Python interpreter (not an executable file)")
    if host.live:
        # Valid Python 2 too, so that an old interpreter is named as one instead of "not a Python interpreter".
        result = host.run([exe, "-c", "import sys; sys.stdout.write('python %d %d\\n' % sys.version_info[:2])"])
        if not (result.ok and result.stdout.startswith("python ")):
            why = "it does not answer as Python" if result.ok else (result.error or f"exit {result.returncode}")
            raise UsageError(f"--python {given}: exists but is not a Python interpreter ({why})")
        version = tuple(int(x) for x in result.stdout.split()[1:3] if x.isdigit())
        if version < (3, 6):  # the environment probe runs in it: Python 3.6 syntax at least
            raise UsageError(f"--python {given}: Python {'.'.join(map(str, version))}; gpu-doctor reads environments "
                             "of Python 3.6 or later")
    return given


def collect_from_args(args: argparse.Namespace, meanwhile: Any = None) -> Any:
    """This machine's facts; ``meanwhile`` (the caller's start-up work) runs while the probes' children answer."""
    from doctor import children

    children.prepare()  # the probes' commands follow: the reaper starts while they are imported
    from doctor.pipeline import collect

    return collect(host_from_args(args), pythons=args.python, deep=args.deep, deep_timeout=args.deep_timeout,
                   meanwhile=meanwhile)


def read_input(path: str, option: str) -> str:
    """The text of a file named on the command line (- for standard input); a usage error if unreadable.

    Only a regular file or standard input, never more than 64 MB (a FIFO or /dev/zero cannot hang it)."""
    from doctor.safeio import InputError
    from doctor.safeio import read_input as safe_read

    try:
        return safe_read(path, option)
    except InputError as exc:
        raise UsageError(str(exc)) from None


def load_facts_file(path: str) -> Facts:
    from doctor import pipeline
    from doctor.model.facts import FactsError

    text = read_input(path, "--facts")
    try:
        return pipeline.load(text)
    except FactsError as exc:
        raise UsageError(f"--facts {path}: not a gpu-doctor facts snapshot or report: {exc}") from None


def facts_from_collect_env(path: str) -> Facts:
    from doctor.collect_env import CollectEnvError, parse

    text = read_input(path, "--from-collect-env")
    try:
        return parse(text)
    except CollectEnvError as exc:
        raise UsageError(f"--from-collect-env {path}: {exc}") from None


def cmd_check(args: argparse.Namespace) -> int:
    import time

    started = time.monotonic()  # JUnit's `time`: how long the check took, collection included
    if args.list_checks:
        return list_checks()
    selected = selected_checks(args.checks)
    if args.facts and args.collect_env:
        raise UsageError("--facts and --from-collect-env each name the machine to diagnose: give one")
    if (args.facts or args.collect_env) and (args.root is not None or args.python or args.deep):
        raise UsageError("--facts and --from-collect-env replay a recorded machine: "
                         "--root, --python and --deep do not apply")
    requirements = _requirements(args.require)
    image, facts = facts_to_check(args)

    from doctor import pipeline
    from doctor.matrix import current

    matrix = current()
    cpu = bool(args.static and (getattr(args, "cpu", False) or facts.sources.get("cpu_image")))
    if args.static:
        facts = static_view(facts, matrix, args.host_driver, args.target_gpu, args.target_cc)
        if cpu and not facts.sources.get("cpu_image"):  # the report says why a CPU build is right here
            from dataclasses import replace

            facts = replace(facts, sources={**facts.sources, "cpu_image": "--cpu"})
    report = pipeline.check(facts, matrix, checks=selected, static=args.static,
                            requirements=requirements, image=image, cpu=cpu)
    fmt = "json" if args.json else (args.format or "text")
    elapsed = time.monotonic() - started
    if getattr(args, "output", None):
        write_report(report, fmt, args.output, strict=args.strict, elapsed=elapsed)
    else:
        sys.stdout.write(render_report(report, fmt, verbose=args.verbose, strict=args.strict, elapsed=elapsed))
    if report.status == "fail" or (args.strict and report.status == "warn"):
        return EXIT_FAIL
    if report.status == "unknown":
        return EXIT_UNKNOWN
    return EXIT_OK



def list_checks() -> int:
    from doctor.checks import REGISTRY

    sys.stdout.write(list_checks_text(REGISTRY))
    return EXIT_OK


def selected_checks(ids: list[str]) -> list[Check] | None:
    """The checks named on the command line (None: all); a usage error, with the closest id, for an unknown one."""
    if not ids:
        return None
    from doctor.checks import REGISTRY, by_id

    unknown = [c for c in ids if by_id(c) is None]
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], [c.id for c in REGISTRY], n=1, cutoff=0.6)
        hint = f": did you mean {close[0]!r}?" if close else ""
        raise UsageError(f"unknown command or check id {unknown[0]!r}{hint} (commands: `gpu-doctor --help`; "
                         "check ids: `gpu-doctor check --list-checks`)")
    return [check for c in ids if (check := by_id(c)) is not None]


def facts_to_check(args: argparse.Namespace) -> tuple[Any, Any]:
    """(the Dockerfile's image or None, the facts to diagnose): a Dockerfile, a collect_env report, a snapshot or
    report file, else this machine's probes; usage errors for options that do not go together."""
    if (getattr(args, "build_arg", None) or getattr(args, "context", None)) and not getattr(args, "dockerfile", None):
        raise UsageError("--build-arg and --context describe a Dockerfile's build: add --dockerfile")
    image = dockerfile_image(args) if getattr(args, "dockerfile", None) else None
    if image is not None:
        args.static = True
    if not args.static and (args.target_gpu or args.target_cc or args.host_driver or getattr(args, "cpu", False)):
        raise UsageError("--target-gpu, --target-cc, --host-driver and --cpu describe an image's future host: add "
                         "--static")
    if image is not None:
        return image, image.facts
    if args.collect_env:
        return None, facts_from_collect_env(args.collect_env)
    if args.facts:
        return None, load_facts_file(args.facts)
    from doctor.pipeline import warm_up

    return None, collect_from_args(args, meanwhile=warm_up)


def list_checks_text(registry: list[Any], width: int | None = None) -> str:
    """One entry per check: its id (first on its line, for scripts), area and summary, then the finding codes,
    wrapped to the terminal (100 columns when not a terminal) under the summary's column."""
    import shutil
    import textwrap

    width = width or (shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100)
    width = max(width, 60)
    indent = " " * (34 + 1 + 20 + 1) if width >= 100 else " " * 4
    out = []
    for c in registry:
        head = f"{c.id:<34} {c.area:<20} "
        if width < 100:
            out.append(f"{c.id}  ({c.area})")
            head = indent
        out += textwrap.wrap(c.summary, width, initial_indent=head, subsequent_indent=indent) or [head.rstrip()]
        if c.all_codes != (c.id,):
            out += textwrap.wrap(f"Codes: {', '.join(c.all_codes)}.", width, initial_indent=indent,
                                 subsequent_indent=indent, break_on_hyphens=False)
    return "\n".join(out) + "\n"


def dockerfile_image(args: argparse.Namespace) -> Any:
    """The Dockerfile named by --dockerfile, read as the facts of the image it builds."""
    if args.facts or args.collect_env or args.root or args.python or args.deep:
        raise UsageError("--dockerfile describes the image to judge: --facts, --from-collect-env, --root, "
                         "--python and --deep do not apply")
    build_args = {}
    for item in args.build_arg:
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise UsageError(f"--build-arg {item!r}: NAME=VALUE")
        build_args[name] = value
    from pathlib import Path

    from doctor.dockerfile import DockerfileError, read

    context = Path(args.context) if getattr(args, "context", None) else None
    if context is not None and not context.is_dir():
        raise UsageError(f"--context {args.context}: not a directory")
    try:
        return read(args.dockerfile, build_args=build_args, context=context)
    except DockerfileError as exc:
        raise UsageError(f"--dockerfile {exc}") from None


def write_report(report: Any, fmt: str, path: str, strict: bool = False, elapsed: float | None = None) -> None:
    """--output: the report written as :func:`doctor.render.files.write_output` writes (atomically over a
    regular file, as node_exporter's textfile collector and NFD's features.d need; through a device or
    FIFO, never renamed over it)."""
    from doctor import pipeline
    from doctor.render.files import OutputError

    try:
        pipeline.write(report, fmt, path, strict=strict, **_render_options(elapsed))
    except OutputError as exc:
        raise UsageError(f"--output {exc}") from None
    if path != "-":
        print(f"gpu-doctor: wrote {path}", file=sys.stderr)


def render_report(report: Any, fmt: str, verbose: bool = False, strict: bool = False,
                  elapsed: float | None = None) -> str:
    from doctor import pipeline

    return pipeline.render(report, fmt, verbose=verbose, strict=strict, **_render_options(elapsed))


def _render_options(elapsed: float | None) -> dict[str, Any]:
    """What a renderer cannot know from the report: how long the check took (JUnit's time), and the GitHub
    Actions checkout the annotated paths are relative to."""
    import os

    return {"elapsed": elapsed, "workspace": os.environ.get("GITHUB_WORKSPACE") or None}


def _requirements(specs: list[str]) -> list[Any]:
    if not specs:
        return []
    from doctor.require import RequireError, parse

    try:
        return [parse(s) for s in specs]
    except RequireError as exc:
        raise UsageError(str(exc)) from None


def static_view(facts: Any, matrix: Any, host_driver: str | None, target_gpu: str | None,
                target_cc: str | None) -> Any:
    """The facts of an image build as the static checks should see them: the build host's driver and GPUs
    are not the image's future host, so they are replaced by what the user says of that host (or nothing)."""
    from dataclasses import replace

    from doctor.matrix import vtuple
    from doctor.model.facts import DriverInfo, Gpu

    if host_driver and (not vtuple(host_driver) or vtuple(host_driver)[0] < 100):
        raise UsageError(f"--host-driver {host_driver!r}: not an NVIDIA driver version (e.g. 535.104.05)")
    driver = DriverInfo(kernel_module=host_driver, userspace=host_driver, module_loaded=bool(host_driver) or None,
                        packages=facts.driver.packages)
    gpus = []
    if target_gpu:
        row = matrix.gpu(target_gpu)
        if row is None:
            raise UsageError(f"--target-gpu {target_gpu!r}: unknown GPU (see `gpu-doctor matrix gpu NAME`)")
        gpus = [Gpu(index=0, name=row["name"], compute_capability=target_cc or row["compute_capability"],
                    source="target")]
    elif target_cc:
        if not vtuple(target_cc) or len(vtuple(target_cc)) != 2:
            raise UsageError(f"--target-cc {target_cc!r}: a compute capability like 8.0 or 12.0")
        gpus = [Gpu(index=0, name=f"a compute capability {target_cc} GPU", compute_capability=target_cc,
                    source="target")]
    return replace(facts, driver=driver, gpus=gpus)


def cmd_snapshot(args: argparse.Namespace) -> int:
    from doctor.model.facts import facts_schema, validate

    facts = collect_from_args(args)
    if args.smoke or args.oom:
        if args.root:
            raise UsageError("--smoke / --oom run on this machine's GPUs: not with --root")
        from doctor.commands.smoke import record

        facts = record(facts, args.smoke, args.oom)
    problems = validate(facts.to_dict(), facts_schema())
    if problems:  # our own output breaking our own contract is a bug, not user error
        raise RuntimeError(f"snapshot does not match its schema: {problems[0]}")
    text = facts.to_json()
    if args.output:
        from doctor.render.files import OutputError, write_output

        try:
            write_output(args.output, text)
        except OutputError as exc:
            raise UsageError(f"-o {exc}") from None
        print(f"gpu-doctor: wrote {args.output} ({len(text)} bytes)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK
