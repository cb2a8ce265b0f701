"""Version strings as numbers: pure helpers every layer uses (the matrix, the checks, the planner, the renderers)."""

from __future__ import annotations

import re

from doctor.safeio import small_int


def vtuple(version: str | None) -> tuple[int, ...]:
    """'535.104.05' -> (535, 104, 5); non-numeric pieces end the tuple. () for None."""
    out: list[int] = []
    for piece in re.split(r"[.\-+]", version or ""):
        n = small_int(piece)  # ASCII digits only: "²".isdigit() is True but int("²") raises
        if n is None:
            break
        out.append(n)
    return tuple(out)


def major_minor(version: str | None) -> str | None:
    t = vtuple(version)
    return f"{t[0]}.{t[1]}" if len(t) >= 2 else (str(t[0]) if t else None)


def branch(driver: str | None) -> int | None:
    t = vtuple(driver)
    return t[0] if t else None
