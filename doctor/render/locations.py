"""Where a finding points in a file: the ``dockerfile`` evidence that `check --dockerfile` attaches to each
finding (``path:line``, from the line numbers the Dockerfile reader recorded), read by the renderers that
annotate files (GitHub workflow commands, JUnit ``file``/``line``). Nothing is parsed again here."""

from __future__ import annotations

import os
from typing import Any

from doctor.safeio import small_int


def location(finding: Any) -> tuple[str, int] | None:
    """(file, line) from the finding's ``dockerfile`` evidence, if any."""
    for e in finding.evidence:
        if e.fact == "dockerfile" and isinstance(e.value, str) and ":" in e.value:
            path, _, line = e.value.rpartition(":")
            n = small_int(line)
            if path and n is not None:
                return path, n
    return None


def relative(path: str, workspace: str | None, cwd: str | None = None) -> str:
    """``path`` relative to ``workspace`` (GitHub annotates a file by its path in the repository, that is
    relative to $GITHUB_WORKSPACE); a relative ``path`` is taken from ``cwd``. A path outside the workspace,
    or no workspace, leaves it as it is."""
    if not workspace:
        return path
    try:
        full = os.path.normpath(os.path.join(cwd or os.getcwd(), path))
        inside = os.path.relpath(full, os.path.normpath(workspace))
    except ValueError:
        return path
    return path if inside == os.pardir or inside.startswith(os.pardir + os.sep) else inside
