"""os-release read exactly as distro reads it, without importing distro: what the host probe reports of it.

distro (``LinuxDistribution(include_lsb=False, include_uname=False, include_oslevel=False)``, 1.x) picks
/etc/os-release unless only /usr/lib/os-release is a file, decodes it as UTF-8 with universal newlines, splits it
with the standard library's shlex (POSIX rules, split on whitespace) and keeps each ``KEY=value`` token under the
key in lower case; ``id()`` is the ID lower-cased with blanks as underscores, through its table of renamed IDs. That
is all `check` needs of it when the file names an ID. Importing distro costs every `check` ~10 ms (it imports
logging, traceback, textwrap, string), so this reads the common case itself and leaves every other case (no ID,
an unreadable, odd or huge file) to distro itself: :func:`read` answers None and the caller asks distro, as it
always did. tests/test_osrelease.py holds the two to the same answers.
"""

from __future__ import annotations

import shlex

from doctor import safeio
from doctor.host import Host

# distro 1.9's NORMALIZED_OS_ID: "Key: Value as defined in the os-release file, translated to lower case, with
# blanks translated to underscores. Value: Normalized value."
NORMALIZED_OS_ID = {"ol": "oracle", "opensuse-leap": "opensuse"}
LIMIT = 1 << 20  # far above any real os-release (~400 bytes); a longer one is distro's to read

ETC, USR_LIB = "/etc/os-release", "/usr/lib/os-release"


def parse(text: str) -> dict[str, str]:
    """Every ``KEY=value`` of an os-release text, keys in lower case, as distro's _parse_os_release_content."""
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    props: dict[str, str] = {}
    for token in lexer:
        if "=" in token:
            key, value = token.split("=", 1)
            props[key.lower()] = value
    return props


def read(host: Host) -> dict[str, str | None] | None:
    """ID (as ``distro.id()`` names it), VERSION_ID and PRETTY_NAME of the inspected system's os-release; None when
    distro itself must answer (no ID in it, or a file that is not a plain, readable, UTF-8 os-release)."""
    try:
        chosen = ETC if host.path(ETC).is_file() or not host.path(USR_LIB).is_file() else USR_LIB
        data, more = safeio.read_file(host.path(chosen), LIMIT)
        if more:
            return None
        # open(..., encoding="utf-8") as distro opens it: universal newlines
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
        props = parse(text)
    except (OSError, UnicodeDecodeError, ValueError):  # distro raises the same: it says what, and the probe records it
        return None
    os_id = props.get("id")
    if not os_id:
        return None  # distro then looks at /etc/*-release files
    os_id = os_id.lower().replace(" ", "_")
    return {"ID": NORMALIZED_OS_ID.get(os_id, os_id), "VERSION_ID": props.get("version_id"),
            "PRETTY_NAME": props.get("pretty_name")}
