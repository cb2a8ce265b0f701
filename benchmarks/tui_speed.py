#!/usr/bin/env python3
"""How soon the TUI shows something and how soon it shows its verdict, in a real pseudo-terminal.

The TUI (`gpu-doctor tui`: this machine, probed live; `gpu-doctor demo`: a bundled snapshot) runs on a pty of
120×40 of its own (tests/ptyterm.py), and the screen is read as it is drawn:
  first paint  the first frame: the key bar ("q Quit") is on screen;
  verdict      the summary line's verdict (NOT READY / usable / ready / UNKNOWN) is on screen.
Targets (issue 23): first paint ≤ 0.6 s, verdict ≤ 1.5 s, judged on the median of the runs (a user starts it once,
on a machine as busy as it is). gpu-doctor runs the way the README installs it, as benchmarks/peers.py does:
scripts/install's environment and console script (`bin/gpu-doctor tui`), from a copy of the working tree; so do
the previous release (a git revision) and --before REV (another, e.g. the commit before a change). Measured in the
same run: the floor, benchmarks/tui_floor.py run by the installed environment's Python: a bare Textual app with
one Footer, whose first paint no TUI can beat; and, not judged, the developer's way (`python -m doctor tui` by
the dev venv, PYTHONPATH at the working tree).

Each of --runs rounds starts every program once (interleaved), each ended by closing its terminal. Printed: the
best and the median wall time (a shared machine's other programs only ever add to it), and the median CPU time
the TUI's own process had used by then (user + system, all its threads, from /proc: less sensitive to the load),
and the load average at the start and the end.

    .venv/bin/python benchmarks/tui_speed.py [--runs 7] [--baseline REV] [--before REV] [--no-dev]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from peers import DEV_ROW, OUTSIDE, installed, machine, run_env  # noqa: E402
from ptyterm import Pty  # noqa: E402

VERDICTS = ("NOT READY", "usable, with warnings", "ready", "UNKNOWN")


FLOOR = Path(__file__).with_name("tui_floor.py")
Times = tuple[float | None, float | None, float | None, float | None]  # paint, its CPU, verdict, its CPU


def start(argv: list[str], env: dict[str, str], verdict: bool = True) -> Times:
    term = Pty(argv, {**env, "TERM": "xterm-256color"}, cwd=OUTSIDE)
    try:
        paint = term.wait_for("Quit", timeout=60)
        paint_cpu = term.cpu_seconds() if paint is not None else None
        if not verdict or paint is None:
            return paint, paint_cpu, None, None
        seen = term.wait_for(VERDICTS, timeout=60)
        return paint, paint_cpu, seen, term.cpu_seconds() if seen is not None else None
    finally:
        term.hang_up()
        if term.wait_exit(30) is None:
            term.kill()


def figures(runs: list[Times], i: int) -> tuple[float, float, float]:
    """(best, median) wall seconds and the median CPU seconds of one column of the runs (nan when none)."""
    walls = [r[i] for r in runs if r[i] is not None]
    cpus = [r[i + 1] for r in runs if r[i + 1] is not None]
    if not walls:
        return float("nan"), float("nan"), float("nan")
    return min(walls), statistics.median(walls), statistics.median(cpus) if cpus else float("nan")  # type: ignore[type-var]


def line(name: str, runs: list[Times], verdict: bool = True) -> str:
    best, median, cpu = figures(runs, 0)
    text = f"  {name:<17} first paint {best:5.2f} s (median {median:5.2f} s, CPU {cpu:4.2f} s)"
    if verdict:
        best, median, cpu = figures(runs, 2)
        text += f"   verdict {best:5.2f} s (median {median:5.2f} s, CPU {cpu:4.2f} s)"
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--baseline", default="0c084df", help="the previous release's git revision")
    ap.add_argument("--before", help="another git revision to measure beside (e.g. the commit before a change)")
    ap.add_argument("--no-dev", action="store_true", help="leave out the dev tree's row (python -m doctor)")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    import compileall

    compileall.compile_dir(str(REPO / "doctor"), quiet=1)
    env = {**run_env(), "LANG": os.environ.get("LANG", "C.UTF-8")}
    current = installed(None)
    scripts = {"gpu-doctor": current, "previous release": installed(args.baseline)}
    if args.before:
        scripts[f"before ({args.before})"] = installed(args.before)
    failed = False
    # Interleaved: every round starts each program once, so that a change of the machine's load during the
    # benchmark weighs on all of them alike.
    programs: dict[tuple[str, str], tuple[list[str], dict[str, str], bool]] = {
        ("floor", "bare Textual"): ([str(current.parent / "python"), str(FLOOR)], env, False)}
    for command in ("tui", "demo"):
        for name, script in scripts.items():
            programs[(command, name)] = ([str(script), command], env, True)
        if not args.no_dev:
            programs[(command, DEV_ROW)] = ([sys.executable, "-m", "doctor", command],
                                            {**env, "PYTHONPATH": str(REPO)}, True)
    for argv, run_vars, verdict in programs.values():
        start(argv, run_vars, verdict)  # warm the page cache
    runs: dict[tuple[str, str], list[Times]] = {key: [] for key in programs}
    for _ in range(args.runs):
        for key, (argv, run_vars, verdict) in programs.items():
            runs[key].append(start(argv, run_vars, verdict))
    print("\nthe floor (benchmarks/tui_floor.py: a Textual app with one Footer, by the installed environment):")
    print(line("bare Textual", runs[("floor", "bare Textual")], verdict=False))
    for command in ("tui", "demo"):
        print(f"\n`gpu-doctor {command}`:")
        for name in (*scripts, *(() if args.no_dev else (DEV_ROW,))):
            text = line(name, runs[(command, name)])
            if name == "gpu-doctor":
                paint, verdict_seen = figures(runs[(command, name)], 0)[1], figures(runs[(command, name)], 2)[1]
                ok = paint <= 0.6 and verdict_seen <= 1.5
                failed |= not ok
                text += f"   targets ≤ 0.6 s / ≤ 1.5 s (median): {'met' if ok else 'MISSED'}"
            print(text)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
