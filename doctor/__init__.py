import _signal  # first: the builtin module, already loaded, so the handler below is in place within microseconds
import sys as _sys

__version__ = "0.1.0"


def _interrupted_while_starting(signum: int, frame: object) -> None:
    _sys.stderr.write("gpu-doctor: interrupted\n")
    raise SystemExit(130)


# Ctrl-C while the `gpu-doctor` command is still importing (before cli.main installs its own handling) is one
# line, not a traceback through argparse's imports. Only for the command itself: importing the package
# elsewhere (tests, a library user) leaves the process's SIGINT handling alone.
if (_sys.argv[0] if _sys.argv else "").rsplit("/", 1)[-1] == "gpu-doctor" and \
        _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _interrupted_while_starting)
