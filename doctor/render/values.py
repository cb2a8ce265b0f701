"""The grammar of every value a fix script passes to a command as an argument.

Quoting stops the shell from reading a value as code, but not the command from reading it as an *option*: a
package name ``-oAPT::Update::Pre-Invoke::=touch /tmp/x`` reaches ``apt-mark hold`` as one quoted word and apt
runs it. So every value that comes from the facts (package names, kernel releases, interpreter paths) must fit
its grammar — none of them may start with ``-`` — or the renderer refuses it: the script says so and does
nothing with it. Where a tool accepts ``--`` (APT's command-line parser, dnf's and conda's argparse, pip's
optparse, rpm's popt) the scripts also end the options with it.

Grammars:
- Debian package names: Debian Policy 5.6.7 — lowercase letters, digits, ``+ - .``, at least two characters,
  starting with a letter or digit.
- RPM package names: letters, digits and ``_ + . -``, starting with a letter, digit or ``_`` (what Fedora's
  packaging guidelines allow, plus the characters real names use).
- Kernel releases (``uname -r``): starting with a digit, then letters, digits and ``. _ + ~ -``.
- Versions: starting with a digit, then letters, digits and ``. + ~ : _ -``.
- Paths: absolute (``/``…), without NUL (a newline is quoted, so the path survives exactly).
"""

from __future__ import annotations

import re

from doctor.render.fixscript import comment, say
from doctor.safeio import lazy_compile

DEBIAN_PACKAGE = lazy_compile(r"^[a-z0-9][a-z0-9+.\-]+$")
RPM_PACKAGE = lazy_compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+\-]*$")
KERNEL_RELEASE = lazy_compile(r"^[0-9][A-Za-z0-9._+~\-]*$")
VERSION = lazy_compile(r"^[0-9][A-Za-z0-9.+~:_\-]*$")
PATH = lazy_compile(r"^/[^\x00]*$")  # a newline is quoted $'…' (fixscript.q), never split
MAX = 255
PATH_MAX = 4096  # Linux's PATH_MAX

GRAMMARS: dict[str, tuple[re.Pattern[str], str]] = {
    "debian-package": (DEBIAN_PACKAGE, "a Debian package name"),
    "rpm-package": (RPM_PACKAGE, "an RPM package name"),
    "kernel": (KERNEL_RELEASE, "a kernel release (uname -r)"),
    "version": (VERSION, "a version"),
    "path": (PATH, "an absolute path"),
}


def fits(kind: str, value: object) -> bool:
    pattern, _what = GRAMMARS[kind]
    limit = PATH_MAX if kind == "path" else MAX
    return isinstance(value, str) and len(value) <= limit and bool(pattern.fullmatch(value))


def refused(kind: str, value: object, where: str) -> list[str]:
    """Script lines saying a value was refused (a comment and a line in the log); nothing is run with it."""
    _pattern, what = GRAMMARS[kind]
    text = f"refused: {str(value)[:80]!r} is not {what}, so it is not passed to {where}"
    return [f"# REFUSED: {comment(text)}", say(text)]
