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


def _encoded(value: Any) -> tuple[int | None, str | None]:
    """(the integer, None) when ``value`` is an encoded version (an int or a string of ASCII digits), else
    (None, the stripped text) — or (None, None) for what is neither."""
    if isinstance(value, bool):
        return None, None
    if isinstance(value, int):
        return value, None
    if not isinstance(value, str):
        return None, None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return (int(text), None) if len(text) <= 6 else (None, None)
    return None, text


def cuda_version(value: Any) -> str | None:
    """One representation of a CUDA version: dotted ("13.2"), whatever form it was reported in.

    cudaRuntimeGetVersion(), cudaDriverGetVersion(), cuDriverGetVersion() and cuda.h's CUDA_VERSION give an
    integer, 1000 * major + 10 * minor (13020 -> "13.2", 9020 -> "9.2"; CuPy's runtimeGetVersion() is one).
    A dotted version is kept as it is, and so is a bare major ("13", a wheel's cu13 tag); an integer outside
    CUDA's range (1.0 .. 99.x) is None, and so is anything else.
    """
    number, text = _encoded(value)
    if number is not None:
        if 1000 <= number < 100_000:
            return f"{number // 1000}.{number % 1000 // 10}"
        return str(number) if 0 < number < 100 and isinstance(value, str) else None
    return text or None


def nccl_version(value: Any) -> str | None:
    """One representation of an NCCL version: dotted ("2.28.9"), whatever form it was reported in.

    ncclGetVersion() and older torch.cuda.nccl.version() give NCCL_VERSION_CODE: major*1000 + minor*100 + patch
    up to 2.8 (2708 -> "2.7.8"), major*10000 + minor*100 + patch from 2.9 on (22809 -> "2.28.9"), as nccl.h's
    NCCL_VERSION() and torch's c10d getNcclVersion() decode it; newer torch answers a tuple, (2, 28, 9).
    """
    if isinstance(value, (tuple, list)):
        parts = [small_int(str(v)) if not isinstance(v, bool) else None for v in value[:4]]
        return ".".join(str(p) for p in parts) if parts and None not in parts else None
    number, text = _encoded(value)
    if number is not None:
        if not 100 <= number < 1_000_000:  # 0.1.0 .. 99.99.99
            return None
        div = 10000 if number >= 10000 else 1000
        major, rest = divmod(number, div)
        return f"{major}.{rest // 100}.{rest % 100}"
    return text if text and re.fullmatch(r"\d{1,4}(?:\.\d{1,6}){1,3}", text) else None
