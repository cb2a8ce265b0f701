#!/usr/bin/env python3
"""How fast is `gpu-doctor check --json` next to `python -m torch.utils.collect_env`?

Prints the median wall time and peak RSS of each (measured in the same run, same machine), the
ratio, and whether `check` imported any framework. Targets (issue 2): ratio <= 0.2, <= 60 MB RSS.

Usage, with the installed gpu-doctor's interpreter (README: scripts/install):
    ~/.local/share/gpu-doctor/bin/python benchmarks/check_speed.py [--runs N] [--torch-python PATH]
The torch interpreter defaults to the test suite's cached venv with torch 2.13.0 (CPU). What is timed is the
whole command (interpreter start, imports, every probe); every child runs outside the repository, so the
source tree never shadows the installed package.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TORCH = REPO / ".cache/test-envs/torch2.13.0-cpu-cudnn9.28/bin/python"
OUTSIDE = tempfile.gettempdir()  # the children's working directory: the repository would shadow doctor


def measure(argv: list[str], runs: int, env: dict[str, str]) -> tuple[float, float]:
    """Median wall seconds and peak RSS (MB) of a command, each run in its own child."""
    times, peaks = [], []
    for _ in range(runs):
        # Peak RSS of one child: wait4 reports ru_maxrss of that child alone (KiB on Linux).
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=OUTSIDE)
        _pid, _status, usage = os.wait4(proc.pid, 0)
        times.append(time.perf_counter() - start)
        peaks.append(usage.ru_maxrss / 1024)
    return statistics.median(times), max(peaks)


def imported_frameworks(env: dict[str, str]) -> list[str]:
    code = ("import sys, io, contextlib\nfrom doctor.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    main(['check', '--json'])\n"
            "print(','.join(m for m in ('torch','tensorflow','jax','textual','requests') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         cwd=OUTSIDE)
    return [m for m in out.stdout.strip().split(",") if m]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--torch-python", default=str(DEFAULT_TORCH))
    args = ap.parse_args()
    _ = resource  # ru_maxrss units are documented in resource(2)
    env = dict(os.environ)
    doctor = [str(Path(sys.executable).with_name("gpu-doctor")), "check", "--json"]
    if not Path(doctor[0]).exists():
        doctor = [sys.executable, "-m", "doctor", "check", "--json"]
    measure(doctor, 1, env)  # warm the page cache for both before timing
    d_time, d_rss = measure(doctor, args.runs, env)
    print(f"gpu-doctor check --json           median {d_time * 1000:7.0f} ms   peak RSS {d_rss:6.1f} MB")
    if Path(args.torch_python).exists():
        collect = [args.torch_python, "-m", "torch.utils.collect_env"]
        measure(collect, 1, env)
        c_time, c_rss = measure(collect, args.runs, env)
        print(f"python -m torch.utils.collect_env median {c_time * 1000:7.0f} ms   peak RSS {c_rss:6.1f} MB")
        ratio = d_time / c_time
        print(f"ratio (gpu-doctor / collect_env)  {ratio:.3f}   target <= 0.2: {'met' if ratio <= 0.2 else 'MISSED'}")
    else:
        print(f"collect_env not measured: no torch interpreter at {args.torch_python}")
    print(f"peak RSS target <= 60 MB: {'met' if d_rss <= 60 else 'MISSED'}")
    bad = imported_frameworks(env)
    print("frameworks imported by check: " + (", ".join(bad) if bad else "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
