#!/usr/bin/env python3
"""How soon the TUI shows something and how soon it shows its verdict, in a real pseudo-terminal.

The TUI (`gpu-doctor tui`: this machine, probed live; `gpu-doctor demo`: a bundled snapshot) runs on a pty of
120×40 of its own (tests/ptyterm.py), and the screen is read as it is drawn:
  first paint  the first frame: the key bar ("q Quit") is on screen;
  verdict      the summary line's verdict (NOT READY / usable / ready / UNKNOWN) is on screen.
Targets (issue 23): first paint ≤ 0.6 s, verdict ≤ 1.5 s. Measured in the same run: the previous release (a git
revision, exported as by benchmarks/peers.py; --before REV adds another, e.g. the commit before a change) and the
floor, benchmarks/tui_floor.py: a bare Textual app with one Footer, whose first paint no TUI can beat.

Each of --runs rounds starts every program once (interleaved), each ended by closing its terminal. Printed: the
best and the median wall time (a shared machine's other programs only ever add to it), and the median CPU time
the TUI's own process had used by then (user + system, all its threads, from /proc: less sensitive to the load).

    .venv/bin/python benchmarks/tui_speed.py [--runs 7] [--baseline REV] [--before REV]
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

from peers import OUTSIDE, baseline_tree, machine, run_env  # noqa: E402
from ptyterm import Pty  # noqa: E402

VERDICTS = ("NOT READY", "usable, with warnings", "ready", "UNKNOWN")


FLOOR = Path(__file__).with_name("tui_floor.py")
Times = tuple[float | None, float | None, float | None, float | None]  # paint, its CPU, verdict, its CPU


def start(argv: list[str], pythonpath: Path, env: dict[str, str], verdict: bool = True) -> Times:
    term = Pty([sys.executable, *argv], {**env, "PYTHONPATH": str(pythonpath), "TERM": "xterm-256color"},
               cwd=OUTSIDE)
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
    args = ap.parse_args()
    print(f"machine: {machine()}")
    import compileall

    compileall.compile_dir(str(REPO / "doctor"), quiet=1)
    trees = {"gpu-doctor": REPO, "previous release": baseline_tree(args.baseline)}
    if args.before:
        trees[f"before ({args.before})"] = baseline_tree(args.before)
    env = {**run_env(), "LANG": os.environ.get("LANG", "C.UTF-8")}
    failed = False
    # Interleaved: every round starts each program once, so that a change of the machine's load during the
    # benchmark weighs on all of them alike.
    programs: dict[tuple[str, str], tuple[list[str], Path, bool]] = {("floor", "bare Textual"): ([str(FLOOR)], REPO,
                                                                                                 False)}
    for command in ("tui", "demo"):
        for name, tree in trees.items():
            programs[(command, name)] = (["-m", "doctor", command], tree, True)
    for argv, tree, verdict in programs.values():
        start(argv, tree, env, verdict)  # warm the page cache
    runs: dict[tuple[str, str], list[Times]] = {key: [] for key in programs}
    for _ in range(args.runs):
        for key, (argv, tree, verdict) in programs.items():
            runs[key].append(start(argv, tree, env, verdict))
    print("\nthe floor (benchmarks/tui_floor.py: a Textual app with one Footer):")
    print(line("bare Textual", runs[("floor", "bare Textual")], verdict=False))
    for command in ("tui", "demo"):
        print(f"\n`gpu-doctor {command}`:")
        for name in trees:
            text = line(name, runs[(command, name)])
            if name == "gpu-doctor":
                ok = figures(runs[(command, name)], 0)[0] <= 0.6 and figures(runs[(command, name)], 2)[0] <= 1.5
                failed |= not ok
                text += f"   targets ≤ 0.6 s / ≤ 1.5 s (best): {'met' if ok else 'MISSED'}"
            print(text)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
