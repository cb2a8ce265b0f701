"""The atomic write that file-watching readers (node_exporter's textfile collector, NFD's features.d) need."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class OutputError(Exception):
    """The output file could not be written; the message names the path and why."""


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to a dot-file in the target directory, then rename it over ``path``: a reader sees the
    old file or the new one, never half of one (NFD ignores dot-files, node_exporter only reads *.prom)."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise OutputError(f"{path}: the directory {directory} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OutputError(f"{path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OutputError(f"{path}: {exc.strerror or exc}") from None
