#!/usr/bin/env python3
"""The TUI's CPU time up to its first frame, measured inside the process: less sensitive to a shared machine's load
than the wall times of benchmarks/tui_speed.py, which cannot tell apart changes of ~20 ms at a load of 2.

Each start runs `gpu-doctor tui` / `demo` in a 120×40 pseudo-terminal of its own (tests/ptyterm.py), by the
interpreter of the environment scripts/install makes (as benchmarks/peers.py installs it, in .cache/bench) with
PYTHONPATH at the tree measured, through this file as a thin wrapper: it imports the app, notes the process's CPU
time (user + system, all threads) when the imports are done and when Textual hands the first frame with the key bar
to its writer thread, adds up the CPU of Textual's styling (Stylesheet.apply, outermost calls), and ends the
process. Printed per tree and command, median (best) of --runs interleaved starts, in ms:
  imports     CPU at the end of the imports (the interpreter, Textual, the app's modules);
  to frame    CPU from there to the first frame (the CLI, the app's start, styling, layout, drawing);
  styling     of which Textual's styling of the widgets;
  first frame CPU at the first frame.

    .venv/bin/python benchmarks/tui_phases.py [--runs 21] [--before REV]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def child(out: str, command: str) -> None:
    """In the measured process: the app to its first frame, the figures to ``out``."""
    figures: dict[str, float] = {}
    styling = [0.0, 0]  # CPU seconds, depth

    from textual.css.stylesheet import Stylesheet
    from textual.drivers.linux_driver import LinuxDriver

    import doctor.tui.app as app_module

    figures["imports"] = time.process_time()
    apply, write = Stylesheet.apply, LinuxDriver.write

    def timed_apply(self: object, node: object, **kwargs: object) -> None:
        styling[1] += 1
        start = time.process_time()
        try:
            apply(self, node, **kwargs)  # type: ignore[arg-type]
        finally:
            styling[1] -= 1
            if not styling[1]:
                styling[0] += time.process_time() - start

    def noting_write(self: LinuxDriver, data: str) -> None:
        if "Quit" in data and "frame" not in figures:
            figures["frame"] = time.process_time()
            figures["styling"] = styling[0]
        write(self, data)

    def on_ready(self: object) -> None:
        with open(out, "w") as fh:
            fh.write(repr(figures))
        os._exit(0)

    Stylesheet.apply = timed_apply  # type: ignore[method-assign]
    LinuxDriver.write = noting_write  # type: ignore[method-assign]
    app_module.DoctorApp.on_ready = on_ready  # type: ignore[method-assign]
    from doctor.cli import main

    sys.argv = ["gpu-doctor", command]
    main()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--before", help="a git revision to measure beside the working tree")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "tests"))
    sys.path.insert(0, str(REPO / "benchmarks"))
    import ast
    import compileall
    import tempfile

    from peers import OUTSIDE, installed, machine, run_env, source_tree
    from ptyterm import Pty

    print(f"machine: {machine()}")
    python = str(installed(None).parent / "python")
    trees = {"gpu-doctor": REPO}
    if args.before:
        trees[f"before ({args.before})"] = source_tree(args.before)
    for tree in trees.values():
        compileall.compile_dir(str(tree / "doctor"), quiet=1)
    env = {**run_env(), "LANG": os.environ.get("LANG", "C.UTF-8"), "TERM": "xterm-256color"}
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs + 1):  # the first round warms the page cache
            for name, tree in trees.items():
                for command in ("tui", "demo"):
                    out = os.path.join(tmp, "figures")
                    term = Pty([python, __file__, "--child", out, command], {**env, "PYTHONPATH": str(tree)},
                               cwd=OUTSIDE)
                    try:
                        if term.wait_exit(60) is None:
                            term.kill()
                    finally:
                        term.hang_up()
                    if i and os.path.exists(out):
                        with open(out) as fh:
                            results.setdefault((name, command), []).append(ast.literal_eval(fh.read()))
                    if os.path.exists(out):
                        os.unlink(out)
    print(f"\nCPU ms, median (best) of {args.runs}:")
    for (name, command), runs in results.items():
        columns = {"imports": [r["imports"] for r in runs],
                   "to frame": [r["frame"] - r["imports"] for r in runs if "frame" in r],
                   "styling": [r["styling"] for r in runs if "styling" in r],
                   "first frame": [r["frame"] for r in runs if "frame" in r]}
        text = "   ".join(f"{k} {1000 * statistics.median(v):4.0f} ({1000 * min(v):4.0f})" for k, v in columns.items()
                           if v)
        print(f"  {name:<22} {command:<5} {text}")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main())
