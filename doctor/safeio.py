"""Reading untrusted input and showing untrusted text, safely. Pure standard library.

Everything gpu-doctor reads may come from another machine (a snapshot, a pasted bug report, a
fleet of reports, a file under ``--root``), so every read here:

- opens only a regular file (or standard input when asked) and never blocks on open: a FIFO, a
  character device such as ``/dev/urandom`` or ``/dev/zero``, a socket or a directory is refused;
- is capped: more than the cap is an error, or, where a prefix is still useful, a truncation the
  caller records ("output truncated at 4 MB");
- decodes bytes itself (UTF-8, invalid bytes replaced), so the locale's strictness never matters;

and :func:`load_json` turns every way JSON can be hostile (numbers that cannot be printed, NaN,
nesting deeper than the stack) into one :class:`InputError`.

:func:`display` makes a value safe to print on a terminal: control characters (ESC, C1, NUL, DEL …)
and lone surrogates become visible escapes, so data can neither drive the terminal nor crash the
encoder. JSON output keeps the exact value instead.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import stat
import sys
from typing import Any, AnyStr, BinaryIO, cast


class _LazyPattern:
    """A regular expression compiled the first time it is used, not when its module is imported."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: Any, flags: int) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[Any] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(*self._args)
        return getattr(self._compiled, name)


def lazy_compile(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """``re.compile``, deferred to the first use: importing a module costs nothing for its patterns (a command
    imports many modules whose patterns it never needs)."""
    return cast("re.Pattern[AnyStr]", _LazyPattern(pattern, flags))

def package_data(package: str, name: str) -> bytes:
    """A file shipped inside ``package`` (``name`` relative to it, "/"-separated), read through the package's own
    loader: a directory or a zip archive alike. importlib.resources does the same, but importing it costs
    zipfile, tempfile and pathlib (~15 ms of every `check`); it remains the way for a package without a loader that
    reads files. Raises OSError (FileNotFoundError for a missing file of an installed directory)."""
    spec = importlib.import_module(package).__spec__
    get_data = getattr(getattr(spec, "loader", None), "get_data", None)
    locations = list(getattr(spec, "submodule_search_locations", None) or [])
    if locations and callable(get_data):
        return cast("bytes", get_data(os.path.join(locations[0], *name.split("/"))))
    from importlib import resources

    return resources.files(package).joinpath(name).read_bytes()


MB = 1024 * 1024
INPUT_CAP = 64 * MB  # a snapshot, report, collect_env paste or pin file; real ones are < 1 MB
MAX_INT_DIGITS = 40  # no fact needs more (a 128-bit counter has 39 digits); Python cannot print > 4300


class InputError(ValueError):
    """Input that cannot be read or is not what it should be; the message is one line for the user."""


def megabytes(n: int) -> str:
    """A size limit as a person reads it: "64 MB", "1.5 MB"; below a megabyte in KiB ("4 KiB", not "0.0039 MB")."""
    if n < MB:
        return f"{n / 1024:g} KiB"
    return f"{n / MB:g} MB"


# --- opening and reading ----------------------------------------------------------------------------


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a regular file for reading without ever blocking; OSError for anything else.

    ``O_NONBLOCK`` makes opening a FIFO return at once instead of waiting for a writer; the file type
    is then checked on the descriptor itself (no race with a rename), and the flag cleared again.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a directory" if stat.S_ISDIR(mode) else "a named pipe" if stat.S_ISFIFO(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "a socket" if stat.S_ISSOCK(mode) else "a special file")
            raise OSError(0, f"{kind}, not a regular file: refused (reading it could block or never end)")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_capped(fh: BinaryIO, cap: int) -> tuple[bytes, bool]:
    """(at most ``cap`` bytes, whether there was more)."""
    data = fh.read(cap + 1)
    return data[:cap], len(data) > cap


def read_file(path: str | os.PathLike[str], cap: int) -> tuple[bytes, bool]:
    """A regular file's first ``cap`` bytes and whether it was longer. OSError when it cannot be read."""
    with open_regular(path) as fh:
        return read_capped(fh, cap)


def read_input(path: str, what: str, cap: int = INPUT_CAP, stdin: BinaryIO | None = None) -> str:
    """The text of a file named on the command line, ``-`` meaning standard input; InputError when unreadable.

    Standard input is read as bytes (``sys.stdin.buffer``): under a strict locale, text mode would raise
    on the first byte that is not UTF-8. Messages start with ``what path`` (``path`` when ``what`` is empty).
    """
    name = f"{what} {path}" if what else path
    try:
        if path == "-":
            src = stdin if stdin is not None else getattr(sys.stdin, "buffer", None)
            if src is None:  # a text stream with no bytes under it (io.StringIO): it cannot hold bad bytes
                if sys.stdin is None:
                    raise InputError(f"{name}: standard input is closed")
                text = sys.stdin.read(cap + 1)
                if len(text) > cap:
                    raise InputError(f"{name}: larger than {megabytes(cap)}")
                return text
            data, more = read_capped(src, cap)
        else:
            data, more = read_file(path, cap)
    except OSError as exc:
        raise InputError(f"{name}: {exc.strerror or exc}") from None
    if more:
        raise InputError(f"{name}: larger than {megabytes(cap)}; not a file gpu-doctor writes or reads")
    return data.decode("utf-8", "replace")


# --- JSON -------------------------------------------------------------------------------------------


def small_int(text: str, digits: int = 18) -> int | None:
    """``text`` as an int when it is ASCII decimal digits only and not too long; else None.

    ``str.isdigit`` accepts superscripts ("²") that ``int`` rejects, ``\\d`` accepts other scripts'
    digits, and ``int`` refuses (ValueError) more than 4,300 digits: a version parser must meet none.
    """
    if not text or len(text) > digits or not text.isascii() or not text.isdigit():
        return None
    return int(text)


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise InputError(f"an integer with {digits} digits (at most {MAX_INT_DIGITS} make sense here)")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InputError(f"a number out of range ({text[:20]}{'…' if len(text) > 20 else ''})")
    return value


def _constant(name: str) -> Any:
    raise InputError(f"{name} is not a JSON number")


def load_json(text: str | bytes) -> Any:
    """``json.loads`` for untrusted text; every failure is an :class:`InputError` with a one-line reason."""
    try:
        return json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise InputError("not JSON that gpu-doctor reads (nested too deeply)") from None
    except InputError as exc:
        raise InputError(f"not JSON that gpu-doctor reads: {exc}") from None
    except (ValueError, TypeError) as exc:  # e.g. bytes that are not UTF-8 / 16 / 32
        raise InputError(f"not JSON ({exc})") from None


JSON_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)


# --- showing ----------------------------------------------------------------------------------------

# C0 controls except TAB and LF, DEL, C1 controls, lone surrogates; the line and paragraph separators
# (some terminals and editors break lines on them); bidi overrides and isolates that reorder what is shown.
_UNSAFE = lazy_compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_LINE = lazy_compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def display(value: object, line: bool = False) -> str:
    """``value`` as text that is safe on a terminal: control characters and lone surrogates escaped.

    With ``line`` a newline and a tab are escaped too (a table cell, a one-line message).
    """
    text = value if isinstance(value, str) else _str(value)
    return (_UNSAFE_LINE if line else _UNSAFE).sub(_escape, text)


def _str(value: object) -> str:
    try:
        return str(value)
    except ValueError:  # an int too long for str(): only reachable from data built in code, not from JSON
        return f"<{type(value).__name__} too large to show>"


def safe_repr(value: object) -> str:
    """``repr`` that cannot raise (a huge int) and is safe to show."""
    try:
        return display(repr(value), line=True)
    except ValueError:
        return f"<{type(value).__name__} too large to show>"


# XML 1.0 allows TAB, LF, CR and everything from U+0020 except surrogates and U+FFFE/U+FFFF.
_XML_BAD = lazy_compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def xml_text(value: object) -> str:
    """Text that is valid in an XML 1.0 document (and safe to show): the rest becomes visible escapes."""
    return _XML_BAD.sub(_escape, value if isinstance(value, str) else _str(value))


def _picture(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    if c < 0x20:
        return chr(0x2400 + c)  # ␛ for ESC, ␀ for NUL …: the Unicode control pictures
    return "\u2421" if c == 0x7F else "\ufffd"


def visible(text: str, line: bool = False) -> str:
    """Like :func:`display`, but one character for one: each unsafe character becomes a visible stand-in
    (ESC → ␛, NUL → ␀, DEL → ␡, C1, surrogates and bidi controls → �). The length is kept, so styled
    spans over the text (a TUI's Rich ``Text``) stay where they were."""
    return (_UNSAFE_LINE if line else _UNSAFE).sub(_picture, text)
