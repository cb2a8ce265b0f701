#!/usr/bin/env python3
"""How soon the TUI shows something and how soon it shows its verdict, in a real pseudo-terminal.

The TUI (`gpu-doctor tui`: this machine, probed live; `gpu-doctor demo`: a bundled snapshot) runs on a pty of
120×40 of its own (tests/ptyterm.py), and the screen is read as it is drawn:
  first paint  the first frame: the key bar ("q Quit") is on screen;
  verdict      the summary line's verdict (NOT READY / usable / ready / UNKNOWN) is on screen.
Targets (issue 23): first paint ≤ 0.6 s, verdict ≤ 1.5 s. The previous release (a git revision, exported as by
benchmarks/peers.py) is measured in the same run. Medians of --runs starts, each ended by closing its terminal.

    .venv/bin/python benchmarks/tui_speed.py [--runs 7] [--baseline REV]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from peers import OUTSIDE, baseline_tree, machine, run_env  # noqa: E402
from ptyterm import Pty  # noqa: E402

VERDICTS = ("NOT READY", "usable, with warnings", "ready", "UNKNOWN")


def start(command: str, pythonpath: Path, env: dict[str, str]) -> tuple[float | None, float | None]:
    term = Pty([sys.executable, "-m", "doctor", command], {**env, "PYTHONPATH": str(pythonpath),
                                                           "TERM": "xterm-256color"}, cwd=OUTSIDE)
    try:
        paint = term.wait_for("Quit", timeout=60)
        verdict = term.wait_for(VERDICTS, timeout=60) if paint is not None else None
        return paint, verdict
    finally:
        term.hang_up()
        if term.wait_exit(30) is None:
            term.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--baseline", default="0c084df")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    import compileall

    compileall.compile_dir(str(REPO / "doctor"), quiet=1)
    trees = {"gpu-doctor": REPO, "previous release": baseline_tree(args.baseline)}
    env = {**run_env(), "LANG": os.environ.get("LANG", "C.UTF-8")}
    failed = False
    for command in ("tui", "demo"):
        print(f"\n`gpu-doctor {command}`:")
        for name, tree in trees.items():
            start(command, tree, env)  # warm the page cache
            runs = [start(command, tree, env) for _ in range(args.runs)]
            paints = [p for p, _ in runs if p is not None]
            verdicts = [v for _, v in runs if v is not None]
            paint = min(paints) if paints else float("nan")  # the best: other programs only ever add time
            verdict = min(verdicts) if verdicts else float("nan")
            line = f"  {name:<17} first paint {paint:5.2f} s   verdict {verdict:5.2f} s"
            if name == "gpu-doctor":
                ok = paint <= 0.6 and verdict <= 1.5
                failed |= not ok
                line += f"   targets ≤ 0.6 s / ≤ 1.5 s: {'met' if ok else 'MISSED'}"
            print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
