"""Every pattern that reads pasted or recorded text is linear in its input, proven on its own prefix.

A backtracking pattern explodes only where it has begun to match: random adversarial strings never reach the
quantifiers after a signature's literal head ("with CUDA capability sm_…"). So each `explain` signature is
driven with the text it really matches, cut at every place where one kind of character gives way to another,
and continued with a long run of one character (or the cut prefix repeated). Each input is searched at two
sizes, four times apart: a linear pattern takes about four times as long, a quadratic one sixteen times,
a cubic one sixty-four. The verdict is a ratio with generous slack, and only once the larger search takes a
noticeable time, so a loaded machine (a load of 10) does not fail it and an idle one does not hide it.
"""

from __future__ import annotations

import re
import time

import pytest

from doctor.matrix import bundled

ROWS = bundled().rows("errors", "signature")
SMALL, LARGE = 4_000, 16_000  # four times apart
FLOOR = 0.05  # seconds: below this the larger search is too fast to be super-linear on any machine
SLACK = 9.0  # linear ≈ 4×, quadratic ≈ 16×


def _kind(ch: str) -> str:
    return "d" if ch.isdigit() else "w" if ch.isalpha() or ch == "_" else "s" if ch.isspace() else ch


def _cuts(text: str) -> list[int]:
    """Where one kind of character (digits, letters, spaces, one punctuation mark) gives way to another."""
    return sorted({0, len(text), *(i for i in range(1, len(text)) if _kind(text[i]) != _kind(text[i - 1]))})


def _inputs(matched: str, size: int) -> list[str]:
    out = []
    for cut in _cuts(matched):
        head = matched[:cut]
        fillers = {"9", "a", " ", ".", "_", "\n", matched[cut] if cut < len(matched) else "x"}
        for ch in sorted(fillers):
            out.append(head + ch * size)  # a long run where the pattern may backtrack
            if head:
                unit = head + ch
                out.append(unit * max(1, size // len(unit)))  # the head over and over: many starts
    return out


def _cost(pattern: re.Pattern[str], text: str) -> float:
    start = time.perf_counter()
    pattern.search(text)
    return time.perf_counter() - start


def _matched(row: dict) -> str:
    pattern = re.compile(row["pattern"])
    for example in row.get("examples", []):
        m = pattern.search(example)
        if m and m.group(0):
            return m.group(0)
    raise AssertionError(f"{row['id']}: no example matches its own pattern")


def assert_linear(pattern_text: str, matched: str, small: int = SMALL, large: int = LARGE) -> None:
    pattern = re.compile(pattern_text)
    for text_small, text_large in zip(_inputs(matched, small), _inputs(matched, large), strict=True):
        t_large = _cost(pattern, text_large)
        if t_large < FLOOR:
            continue
        # measured again, the faster of two each: one slow run under load is not a verdict
        t_small = min(_cost(pattern, text_small), _cost(pattern, text_small))
        t_large = min(t_large, _cost(pattern, text_large))
        assert t_large < FLOOR or t_large / max(t_small, 1e-6) < SLACK, (
            f"super-linear: {t_small:.3f}s at {small} → {t_large:.3f}s at {large} on {text_small[:60]!r}…")


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_every_signature_is_linear_on_its_own_prefix(row: dict) -> None:
    assert_linear(row["pattern"], _matched(row))


def test_the_harness_catches_a_quadratic_pattern() -> None:
    """The check above can fail: the sm_ pattern of the last release (two repeats over one digit run) is caught."""
    with pytest.raises(AssertionError, match="super-linear"):
        assert_linear(r"with CUDA capability sm_(?P<cc>\d+)\w* is not compatible",
                      "with CUDA capability sm_120 is not compatible", 1_000, 4_000)


def test_collect_env_gpu_line_is_linear_in_inner_spaces() -> None:
    from doctor.collect_env import _gpu_line

    def cost(n: int) -> float:
        line = "GPU 0: a" + " " * n + "b" + " " * n + "(UUID: x" + " " * n
        start = time.perf_counter()
        assert _gpu_line(line) is not None
        return time.perf_counter() - start

    small, large = min(cost(SMALL) for _ in range(3)), min(cost(LARGE) for _ in range(3))
    assert large < FLOOR or large / max(small, 1e-6) < SLACK
    assert _gpu_line("GPU 3: NVIDIA H100 80GB HBM3 (UUID: GPU-5b3c)") == ("3", "NVIDIA H100 80GB HBM3")


def test_nvidia_smi_list_line_is_linear_in_inner_spaces() -> None:
    """`nvidia-smi -L` pasted with thousands of blanks after "GPU 0:" took over a minute at 4,000 (cubic); the name
    and UUID still read as before."""
    from doctor.parsers import _list_gpu, parse_nvidia_smi_text

    def cost(n: int) -> float:
        worst = 0.0
        for line in ("GPU 0:" + " " * n + "a", "GPU 0: a" + " " * n + "b", "GPU 0: a" + " " * n + "(UUID: x",
                     "GPU 0:" + " " * n + "(UUID: GPU-12345678)" + " " * n):
            start = time.perf_counter()
            _list_gpu(line)
            worst = max(worst, time.perf_counter() - start)
        return worst

    small, large = min(cost(SMALL) for _ in range(3)), min(cost(LARGE) for _ in range(3))
    assert large < FLOOR or large / max(small, 1e-6) < SLACK
    listed = parse_nvidia_smi_text("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5b3c9d1e-0f2a-4b6c-8d7e-9f0a1b2c3d4e)\n")
    assert [(g["name"], g["uuid"]) for g in listed["gpus"]] == [
        ("NVIDIA H100 80GB HBM3", "GPU-5b3c9d1e-0f2a-4b6c-8d7e-9f0a1b2c3d4e")]
    assert _list_gpu("GPU 1:  Tesla T4   (UUID: GPU-0123abcd)  ") == (1, "Tesla T4", "GPU-0123abcd")
    assert _list_gpu("GPU 1: Tesla T4(UUID: GPU-0123abcd)") is None  # a blank before "(UUID:" is required
