"""Command line: the command table, the exit-code contract, and nothing else.

Each command lives in a module of ``doctor.commands`` with ``add_arguments(name, parser)`` and
``run(name, args)``; only the module of the command being run is imported, so ``--help`` and
``--version`` are instant and ``check`` never imports textual, requests or any ML framework.

Exit codes (stable): 0 no failure · 1 at least one failure (with --strict: or a warning) ·
2 usage or input error · 3 internal error (a bug: please report it) · 4 (check) nothing failed, but too little
evidence to call the machine ready.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import sys
import threading

from doctor import __version__

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_UNKNOWN = 4  # check: nothing failed, but too little evidence to call the machine ready

# name -> (module, one-line help). The order is the order of `gpu-doctor --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("doctor.commands.check", "inspect this machine (or a snapshot) and report"),
    "snapshot": ("doctor.commands.check", "write the facts snapshot (JSON) to attach to a bug report"),
    "tui": ("doctor.commands.tui", "the interactive view of this machine (or of a snapshot with --facts)"),
    "demo": ("doctor.commands.tui", "the interactive view on bundled example hosts: no GPU needed"),
    "matrix": ("doctor.commands.matrix", "ask the compatibility matrix (driver, gpu, cuda), or refresh it"),
    "plan": ("doctor.commands.matrix", "the newest compatible combination for a GPU, driver and wishes"),
    "smoke": ("doctor.commands.smoke", "run kernels on each GPU through the driver API: works? how fast?"),
    "oom": ("doctor.commands.smoke", "how much GPU memory a program really gets, and where the rest went"),
    "fleet": ("doctor.commands.fleet", "aggregate many nodes' reports: rows, grouped problems, outliers"),
    "diff": ("doctor.commands.diff", "the drift between two snapshots or reports (two nodes, before/after)"),
    "fix": ("doctor.commands.fix", "print a script that fixes what check found (apt, dnf, conda, pip); runs nothing"),
    "pin": ("doctor.commands.fix", "freeze a healthy state (holds, versionlock, constraints), or --check for drift"),
    "explain": ("doctor.commands.explain", "name a pasted GPU error and say which of its causes applies here"),
}


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit 2."""


def positive_seconds(text: str) -> float:
    """argparse type for a timeout: a number of seconds in (0, 3600]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 3600:  # 0 would time every command out at once; NaN fails both comparisons
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most 3600 seconds, got {text}")
    return value


def _columns() -> int:
    """The terminal's width as shutil.get_terminal_size() gives it ($COLUMNS, else standard output's terminal, else
    80), without importing shutil: argparse imports it for every parser it builds (zlib, bz2, lzma: ~4 ms)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            stream = sys.__stdout__  # None when the interpreter started without one
            columns = os.get_terminal_size(stream.fileno()).columns if stream is not None else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, told the width argparse would ask shutil for (see :func:`_columns`)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; the arguments of ``only`` (or of every command when None) are filled in.

    ``only`` a command's name: that command's sub-parser is the only one made (it parses that command's arguments
    and prints its --help; the others would only be choices it is never asked for: each costs ~0.5 ms, most of it
    gettext looking for translations of argparse's words, ~6 ms of every `check` for the twelve). ``only`` "" (no
    command named: `--help`, `--version`): every command's sub-parser, without their arguments."""
    parser = argparse.ArgumentParser(
        formatter_class=_Formatter,
        prog="gpu-doctor",
        description="Checks whether this machine's NVIDIA driver, CUDA toolkit, cuDNN and ML frameworks fit "
        "together and work, and says how to fix what does not. `check` is read-only and offline.",
        epilog="Exit codes: 0 no failure, 1 at least one failure (--strict: or warning), 2 usage or input "
        "error, 3 internal error, 4 (check) nothing failed but too little evidence to call the machine ready. "
        "`gpu-doctor` alone opens the interactive view (`tui`) when standard input and "
        "output are a terminal, and runs `check` otherwise (piped, redirected, cron, CI). Run `gpu-doctor COMMAND "
        "--help` for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"gpu-doctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, summary) in COMMANDS.items():
        if only and only in COMMANDS and name != only:
            continue
        p = sub.add_parser(name, help=summary, description=summary, formatter_class=_Formatter)
        if only in (None, name):
            importlib.import_module(module).add_arguments(name, p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The `gpu-doctor` command (``argv`` None: the process's arguments, and the process ends here for a one-shot
    command, see :func:`_exit_now`), or one command run in-process with ``argv``; returns the exit code."""
    try:  # everything, the parser's imports included: Ctrl-C at any moment is one line, never a traceback
        import signal

        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler and sys.argv and \
                os.path.basename(sys.argv[0]) == "gpu-doctor":
            signal.signal(signal.SIGINT, signal.default_int_handler)  # from here on, KeyboardInterrupt below
        code = _main(argv)
    except KeyboardInterrupt:
        print("gpu-doctor: interrupted", file=sys.stderr)
        code = 130
    if argv is None and _one_shot:
        _exit_now(code)
    return code


_one_shot = False  # the command that ran is a one-shot one (not in _COLLECTED)


def _exit_now(code: int) -> None:
    """End the process at once, as the interpreter's own exit would end it for a one-shot command: the output
    flushed, every ``atexit`` handler run (the children's groups killed, the reaper told), then ``os._exit``. What
    is skipped is the interpreter's teardown: a full garbage collection and the unloading of ~180 modules, ~10-15
    ms of every `check` that nothing of ours needs (every file we write is closed before the command returns)."""
    import atexit

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: what Python's exit would have met too
            code = code or EXIT_USAGE
    atexit._run_exitfuncs()  # what the interpreter runs first at exit
    os._exit(code)


# The commands that live long or read without bound (the interactive view, a fleet of reports) keep Python's
# cycle collector; the others end within a second or two, and their cycles (a few hundred objects) go with the
# process: the collector's ~40 passes over the objects of their imports cost ~5-10 ms of `check`'s start-up.
_COLLECTED = ("tui", "demo", "fleet")


def _main(argv: list[str] | None) -> int:
    import gc

    collecting = gc.isenabled()
    gc.disable()  # until the command is known (see _COLLECTED); as it was on return (tests call main in-process)
    try:
        return _run(argv)
    finally:
        (gc.enable if collecting else gc.disable)()


def _run(argv: list[str] | None) -> int:
    import gc
    import signal

    from doctor import children, safeio

    _tolerant_streams()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv and sys.stdin.isatty() and sys.stdout.isatty():
        argv = ["tui"]  # `gpu-doctor` alone on a terminal opens the TUI; piped or redirected, it runs check
    if argv and argv[0] not in COMMANDS and not argv[0].startswith("-"):
        guess = _misspelt_command(argv[0])
        if guess:
            print(f"gpu-doctor: error: unknown command {argv[0]!r}: did you mean `gpu-doctor {guess}`? "
                  "(`gpu-doctor --help` lists the commands)", file=sys.stderr)
            return EXIT_USAGE
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv = ["check", *argv]  # `gpu-doctor` alone, or with check's options, means `check`
    name = argv[0] if argv[0] in COMMANDS else None
    global _one_shot
    _one_shot = name not in _COLLECTED
    if name in _COLLECTED:
        gc.enable()
    handlers = children.install_signal_handlers() if threading.current_thread() is threading.main_thread() else {}
    end_ahead = None
    try:
        if name is not None:  # a command may start its slowest work before its arguments are parsed (check's probes)
            start_ahead = getattr(importlib.import_module(COMMANDS[name][0]), "start_ahead", None)
            end_ahead = start_ahead(name, argv[1:]) if start_ahead is not None else None
        args = build_parser(only=name or "").parse_args(argv)
        code: int = importlib.import_module(COMMANDS[args.command][0]).run(args.command, args)
        children.raise_if_signalled()  # a signal whose exception Python dropped still ends as a signal
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not at exit
        return code
    except (UsageError, safeio.InputError) as exc:
        print(f"gpu-doctor: error: {safeio.display(str(exc), line=True)}", file=sys.stderr)
        return EXIT_USAGE
    except children.Terminated as exc:
        with contextlib.suppress(OSError):
            print(f"gpu-doctor: stopped by signal {exc.signum}", file=sys.stderr)
        if exc.signum == getattr(signal, "SIGHUP", None):
            detach_from_terminal()
        return 128 + exc.signum
    except BrokenPipeError:
        _silence_stdout()  # the reader went away (`| head`): nothing more to say, and nothing at exit either
        return EXIT_OK
    except OSError as exc:
        if getattr(exc, "filename", None) is None and exc.errno in _OUTPUT_ERRNOS:  # writing our output failed
            _silence_stdout()
            print(f"gpu-doctor: error: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        return _internal(exc)
    except Exception as exc:
        return _internal(exc)
    finally:
        if end_ahead is not None:
            end_ahead()
        children.kill_all()
        children.restore(handlers)


_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EBADF, errno.EROFS, errno.EPIPE}


def _internal(exc: Exception) -> int:
    if os.environ.get("GPU_DOCTOR_DEBUG"):
        raise exc
    print(f"gpu-doctor: internal error: {type(exc).__name__}: {exc} (set GPU_DOCTOR_DEBUG=1 for the "
          "traceback, and please report it)", file=sys.stderr)
    return EXIT_INTERNAL


def _tolerant_streams() -> None:
    """Output never fails on a character the stream cannot encode (a lone surrogate from a snapshot, a
    Latin-1 terminal): it is written as a backslash escape. Renderers escape control characters."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(Exception):
                reconfigure(errors="backslashreplace")


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail a second time."""
    with contextlib.suppress(Exception):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    with contextlib.suppress(Exception):
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives until exit


def detach_from_terminal() -> None:
    """The terminal hung up: standard output and error go to /dev/null, so that nothing left to flush at exit
    fails (the interpreter would turn that into exit 120) and the exit status stays 128 + SIGHUP."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if stream is None:  # started without that stream (sys.__stdout__ is None then)
            continue
        with contextlib.suppress(Exception):
            fd = stream.fileno()  # before the open: a stream without a descriptor leaks no /dev/null one
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
    with contextlib.suppress(Exception):
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives until exit


def _misspelt_command(word: str) -> str | None:
    """The command a word that is neither a command nor a check id was probably meant to be."""
    import difflib

    guess = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.75)
    if not guess:
        return None
    from doctor.checks import by_id

    return None if by_id(word) is not None else guess[0]


if __name__ == "__main__":
    sys.exit(main())
