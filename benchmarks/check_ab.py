#!/usr/bin/env python3
"""`gpu-doctor check` of two revisions side by side, in many interleaved rounds: a difference of 10-20 ms that one
best-of-9 of benchmarks/peers.py cannot show on a shared machine (its best moves by ±30-40 ms from run to run).

Both revisions are installed as benchmarks/peers.py installs them (scripts/install into .cache/bench/: the working
tree afresh, a git revision once) and run as their console script `gpu-doctor check` on the torch-free environment
of peers.py, from a temporary directory; cuda-doctor's `diagnose` (its venv from peers.py) runs in each round too,
for the ratio. Printed for each: the best, first quartile and median wall time and the best and median CPU time
(user + system of the command and its children).

    .venv/bin/python benchmarks/check_ab.py [--rounds 30] [--before REV]   (default: main)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # this directory's module: the same installs and environments


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--before", default="main", help="the git revision to compare the working tree with")
    args = ap.parse_args()
    rev = subprocess.run(["git", "-C", str(peers.REPO), "rev-parse", "--short", args.before], check=True,
                         capture_output=True, text=True).stdout.strip()
    env = {**peers.run_env(), "PATH": f"{peers.venv('plain-python', []) / 'bin'}:/usr/bin:/bin"}
    cuda = peers.venv("cuda-doctor", ["cuda-doctor"])
    jobs = {f"before ({rev})": [str(peers.installed(rev)), "check"],
            "working tree": [str(peers.installed(None)), "check"],
            "cuda-doctor": [str(cuda / "bin" / "cuda-doctor"), "diagnose"]}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env, "cwd": peers.OUTSIDE}
    print(f"machine: {peers.machine()}")
    for argv in jobs.values():  # one warm-up round
        subprocess.run(argv, timeout=600, **quiet)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in jobs}
    for _ in range(args.rounds):
        for name, argv in jobs.items():
            start = time.perf_counter()
            proc = subprocess.Popen(argv, **quiet)
            _pid, _status, usage = os.wait4(proc.pid, 0)
            samples[name].append((time.perf_counter() - start, usage.ru_utime + usage.ru_stime))
    for name, runs in samples.items():
        wall, cpu = sorted(r[0] * 1000 for r in runs), sorted(r[1] * 1000 for r in runs)
        print(f"  {name:<20} wall best {wall[0]:4.0f}  p25 {wall[len(wall) // 4]:4.0f}  "
              f"median {wall[len(wall) // 2]:4.0f} ms   CPU best {cpu[0]:4.0f}  median {cpu[len(cpu) // 2]:4.0f} ms")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
