"""The attack harness's shared parts: hostile values, snapshot mutation, and the in-process CLI runner.

A hostile snapshot is a real example snapshot (doctor/examples) with some of its values replaced by
hostile values *of the type the schema allows* — so it passes validation and reaches every check and
renderer — or, for the type-confusion family, by values of the wrong type, which must be refused.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from doctor import cli


def default_signals() -> None:
    """preexec_fn of a child a test signals: SIGINT, SIGTERM and SIGHUP at their defaults, whatever the test run
    inherited (`nohup` ignores SIGHUP, a shell's `&` ignores SIGINT) — a test never depends on its caller."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie, waiting for its parent to reap it, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def survivors(pids: list[int], within: float = 10.0) -> list[int]:
    """The processes of ``pids`` still running after up to ``within`` seconds (a loaded machine schedules a
    reaper late); those are then killed, so that nothing of a failed test runs on into the next one."""
    import time

    end = time.monotonic() + within
    while [p for p in pids if alive(p)] and time.monotonic() < end:
        time.sleep(0.02)
    left = [p for p in pids if alive(p)]
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


def popen_signalled(argv: list[str], **kwargs: Any) -> Any:
    """subprocess.Popen for a child that a test will signal (see default_signals)."""
    import subprocess

    return subprocess.Popen(argv, preexec_fn=default_signals, **kwargs)


EXAMPLES = sorted((Path(__file__).parent.parent / "doctor" / "examples").glob("*.json"))

# Characters that broke renderers or terminals: ESC and CSI, C1 (0x9b is a one-byte CSI), NUL, DEL,
# lone surrogates, bidi overrides, line separators, Rich/Textual markup, shell and option syntax,
# superscript and other non-ASCII digits.
NASTY = ["\x1b[2J", "\x1b]0;pwned\x07", "\x9b31m", "\x00", "\x7f", "\ud800", "\udfff", "\u202e", "\u2028",
         "[/bold]", "[/]", "[@click=app.quit]", "[red]", "$(touch /tmp/x)", "`id`", ";", "-oAPT::x=y", "\\",
         "\n", "\r", "\t", "²", "١٢", "535.\u00b9\u00b2", "%s%n", "{0}", "</testcase>", "]]>", "&#0;", "|", "*",
         "\ufffe", "\uffff", "𝟓", "9" * 5000, "535." + "9" * 5000 + ".1", "cu" + "1" * 4400]

hostile_text = st.one_of(
    st.sampled_from(NASTY),
    st.lists(st.sampled_from(NASTY), min_size=1, max_size=4).map("".join),
    st.text(max_size=30),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x2FF), max_size=30),
    st.builds(lambda a, b: f"{a}{b}", st.sampled_from(["535.104.05", "12.4", "2.5.1+cu124", "9.1.0", "8.0"]),
              st.sampled_from(NASTY)),
)
hostile_int = st.one_of(st.integers(-2**63, 2**63), st.sampled_from([0, -1, 10**39, -10**39, 2**31, 2**64]))
hostile_float = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([1e308, -1e308, 5e-324]))


def load_example(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def leaves(data: Any, at: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """(path, value) of every scalar, and of every dict key that is free text (env, sources)."""
    out: list[tuple[tuple[Any, ...], Any]] = []
    if isinstance(data, dict):
        for k, v in data.items():
            out += leaves(v, (*at, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += leaves(v, (*at, i))
    else:
        out.append((at, data))
    return out


def set_at(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for p in path[:-1]:
        data = data[p]
    data[path[-1]] = value


@st.composite
def hostile_snapshot(draw: st.DrawFn) -> dict[str, Any]:
    """A schema-valid snapshot with hostile strings, numbers and list contents."""
    data = copy.deepcopy(draw(st.sampled_from([load_example(p) for p in EXAMPLES])))
    spots = [(p, v) for p, v in leaves(data) if p and p[0] != "schema"]
    for _ in range(draw(st.integers(1, 12))):
        path, value = draw(st.sampled_from(spots))
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, str):
            set_at(data, path, draw(hostile_text))
        elif isinstance(value, int):
            set_at(data, path, draw(hostile_int))
        elif isinstance(value, float):
            set_at(data, path, draw(hostile_float))
    if draw(st.booleans()):
        data.setdefault("env", {})[draw(hostile_text)] = draw(hostile_text)
    if draw(st.booleans()):
        data["errors"] = [*data.get("errors", []), {"probe": draw(hostile_text), "reason": draw(hostile_text)}]
    if draw(st.booleans()) and data.get("gpus"):
        data["gpus"][0]["name"] = draw(hostile_text)
    if draw(st.booleans()):
        data.setdefault("python_envs", []).append({"executable": draw(hostile_text), "packages": [
            {"name": draw(st.sampled_from(["torch", "tensorflow", "jaxlib", "nvidia-cudnn-cu12", "cupy-cuda12x"])),
             "version": draw(hostile_text), "cuda": draw(st.one_of(st.none(), hostile_text))}]})
    return data


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f"Result(code={self.code}, err={self.err[-300:]!r})"


class _Bytes(io.TextIOWrapper):
    """A stdout like a real one: text over bytes, strict UTF-8, so an unencodable value fails as it would."""


def run_cli(argv: list[str], stdin: bytes = b"") -> Result:
    """gpu-doctor in-process with real byte streams (strict UTF-8 like a UTF-8 locale's)."""
    out_b, err_b = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_b, encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(err_b, encoding="utf-8", errors="strict", write_through=True)
    inp = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8", errors="strict")
    old = sys.stdout, sys.stderr, sys.stdin
    sys.stdout, sys.stderr, sys.stdin = out, err, inp
    try:
        code = cli.main(argv)
    finally:
        with contextlib.suppress(Exception):
            out.flush()
            err.flush()
        sys.stdout, sys.stderr, sys.stdin = old
    return Result(code, out_b.getvalue().decode("utf-8", "replace"), err_b.getvalue().decode("utf-8", "replace"))


def crashed(r: Result) -> bool:
    return r.code not in (0, 1, 2, 4) or "internal error" in r.err or "Traceback" in r.err  # 4: unknown


TERMINAL_UNSAFE = [chr(c) for c in [*range(0, 9), *range(11, 32), *range(0x7f, 0xa0)]] + ["\u202e", "\u2028"]


def terminal_unsafe(text: str) -> list[str]:
    """The control characters in text meant for a terminal (none allowed: colour is off off a terminal)."""
    return sorted({c for c in text if c in TERMINAL_UNSAFE or 0xD800 <= ord(c) <= 0xDFFF})


@contextlib.contextmanager
def no_hang_within(seconds: int, what: str) -> Iterator[None]:
    """A hang is a failure, not a stuck test run: SIGALRM raises after ``seconds``."""
    def hung(signum: int, frame: Any) -> None:
        raise AssertionError(f"hang: {what} did not return within {seconds} s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def report_attack_counts(counts: Any) -> None:
    """Append a module's inputs tried per attack family to $GPU_DOCTOR_ATTACK_COUNTS (the figures a closing note
    gives); nothing when it is unset or nothing was tried."""
    path = os.environ.get("GPU_DOCTOR_ATTACK_COUNTS")
    if path and counts:
        with open(path, "a") as fh:
            fh.write(json.dumps(dict(counts)) + "\n")
