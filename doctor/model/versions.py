"""Version strings as numbers: pure helpers every layer uses (the matrix, the checks, the planner, the renderers)."""

from __future__ import annotations

import re
from typing import Any

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


def cudnn_version(value: Any) -> str | None:
    """One representation of a cuDNN version: dotted ("9.24.0"), whatever form it was reported in.

    cudnnGetVersion() and torch.backends.cudnn.version() give an integer: cuDNN 8.x encodes
    major*1000 + minor*100 + patch (8902 -> "8.9.2"), 9.x major*10000 + minor*100 + patch (92400 -> "9.24.0";
    cudnn_version.h's CUDNN_VERSION). A dotted version, or a bare major ("9", TensorFlow's build info),
    is kept as it is; anything else is None.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        return None
    if not text.isdigit() or not text.isascii():
        return text if re.fullmatch(r"\d{1,4}(?:\.\d{1,6}){1,3}", text) else None
    if len(text) > 6:
        return None
    number = int(text)
    if number >= 90000:
        return f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
    if number >= 1000:
        return f"{number // 1000}.{number % 1000 // 100}.{number % 100}"
    return text if number < 100 else None
