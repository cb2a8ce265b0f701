#!/usr/bin/env python3
"""`gpu-doctor check` next to its peers and to its own previous release, measured in one run on one machine.

Peers (both on PyPI, `pip index versions env-doctor` / `cuda-doctor`): env-doctor (`env-doctor check`) and
cuda-doctor (`cuda-doctor diagnose`), each installed into its own venv under .cache/bench/. Two scenarios:

  no torch    every tool checks an environment without torch (the peers their own venv; gpu-doctor the
              python3 on PATH of a PATH holding only a torch-free venv)
  with torch  every tool checks an environment that has torch 2.13.0 (the test suite's CPU wheel in
              .cache/test-envs): the peers' second venv sees it through a .pth file, gpu-doctor gets VIRTUAL_ENV

The previous release is a git revision (default: 0c084df, the last commit before the round that made `check`
slower), exported to .cache/bench/ and run by the same interpreter with PYTHONPATH pointing at it.
Targets (issue 23): check ≤ 0.5× each peer without torch, ≤ 0.15× with torch, not slower than the previous release
(ratio ≤ 1.0 with a 10% allowance for noise), peak RSS ≤ 40 MB.

Every command runs from a temporary directory with bytecode allowed (installed packages have .pyc files; this
machine's PYTHONDONTWRITEBYTECODE is unset for the children, and the trees are compiled first). Reported: the
best wall time of --runs, the best CPU time (user + system of the command and its children, from wait4), and
the largest peak RSS of the command's own process. Usage, from the repository:

    .venv/bin/python benchmarks/peers.py [--runs 7] [--baseline REV] [--torch-env DIR]
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / ".cache" / "bench"
DEFAULT_TORCH = REPO / ".cache" / "test-envs" / "torch2.13.0-cpu-cudnn9.28"
PEERS = {"env-doctor": ["env-doctor", "check"], "cuda-doctor": ["cuda-doctor", "diagnose"]}
OUTSIDE = tempfile.mkdtemp(prefix="gpu-doctor-bench-")


def run_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "CONDA_PREFIX",
                                                            "PYTHONPATH")}
    env["XDG_CACHE_HOME"] = str(BENCH / "xdg-cache")  # no refreshed matrix of the user's
    return env


def measure(argv: list[str], runs: int, env: dict[str, str]) -> tuple[float, float, float]:
    """(best wall s, best CPU s, max peak RSS MB) of a command over ``runs``, each run in its own child. The best
    of several, not the median: on a shared, loaded machine the other programs only ever add time."""
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=OUTSIDE, timeout=600)
    walls, cpus, peaks = [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=OUTSIDE)
        _pid, _status, usage = os.wait4(proc.pid, 0)
        walls.append(time.perf_counter() - start)
        cpus.append(usage.ru_utime + usage.ru_stime)  # wait4: the child and the children it waited for
        peaks.append(usage.ru_maxrss / 1024)  # KiB on Linux; the largest single process of the tree
    return min(walls), min(cpus), max(peaks)


def venv(name: str, packages: list[str], extra_site: Path | None = None) -> Path:
    """A venv of its own with ``packages`` (pip's ordinary client), made once; ``extra_site`` is added by .pth."""
    root = BENCH / name
    python = root / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    if packages and not (root / "bin" / PEERS.get(packages[0], [""])[0]).exists():
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages],
                       check=True)
    if extra_site is not None:
        site = next((root / "lib").glob("python3*/site-packages"))
        (site / "zz_bench_extra.pth").write_text(f"{extra_site}\n")
    return root


def site_packages(env: Path) -> Path:
    return next((env / "lib").glob("python3*/site-packages"))


def baseline_tree(rev: str) -> Path:
    tree = BENCH / f"baseline-{rev}"
    if not (tree / "doctor").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    compileall.compile_dir(str(tree / "doctor"), quiet=1)
    return tree


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, Python "
            f"{platform.python_version()}, load average {load:.1f} at the start")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--baseline", default="0c084df", help="the previous release's git revision")
    ap.add_argument("--torch-env", default=str(DEFAULT_TORCH), help="a venv with torch (the 'with torch' scenario)")
    args = ap.parse_args()
    torch_env = Path(args.torch_env)
    print(f"machine: {machine()}")
    compileall.compile_dir(str(REPO / "doctor"), quiet=1)
    base = baseline_tree(args.baseline)
    env = run_env()

    # the torch-free environment gpu-doctor checks: python3 on a PATH of its own
    plain = venv("plain-python", [])
    no_torch_env = {**env, "PATH": f"{plain / 'bin'}:/usr/bin:/bin"}
    doctor = [sys.executable, "-m", "doctor", "check"]
    scenarios: dict[str, dict[str, tuple[float, float, float]]] = {"no torch": {}, "with torch": {}}
    scenarios["no torch"]["gpu-doctor"] = measure(doctor, args.runs, {**no_torch_env, "PYTHONPATH": str(REPO)})
    scenarios["no torch"]["previous release"] = measure(doctor, args.runs, {**no_torch_env, "PYTHONPATH": str(base)})
    with_torch = torch_env.is_dir()
    if with_torch:
        torch_vars = {**no_torch_env, "VIRTUAL_ENV": str(torch_env)}
        scenarios["with torch"]["gpu-doctor"] = measure(doctor, args.runs, {**torch_vars, "PYTHONPATH": str(REPO)})
        scenarios["with torch"]["previous release"] = measure(doctor, args.runs,
                                                              {**torch_vars, "PYTHONPATH": str(base)})
    for name, argv in PEERS.items():
        root = venv(name, [name])
        scenarios["no torch"][name] = measure([str(root / "bin" / argv[0]), *argv[1:]], args.runs, env)
        if with_torch:
            troot = venv(f"{name}-torch", [name], extra_site=site_packages(torch_env))
            scenarios["with torch"][name] = measure([str(troot / "bin" / argv[0]), *argv[1:]], args.runs, env)

    targets = {"no torch": 0.5, "with torch": 0.15}
    failed = False
    for scenario, rows in scenarios.items():
        if not rows:
            print(f"\n{scenario}: not measured (no torch environment at {torch_env})")
            continue
        print(f"\n{scenario}:")
        for name, (wall, cpu, rss) in rows.items():
            print(f"  {name:<18} wall {wall * 1000:7.0f} ms   CPU {cpu * 1000:7.0f} ms   peak RSS {rss:6.1f} MB")
        ours = rows["gpu-doctor"]
        for name in (*PEERS, "previous release"):
            if name not in rows:
                continue
            wall_ratio, cpu_ratio = ours[0] / rows[name][0], ours[1] / rows[name][1]
            goal = 1.1 if name == "previous release" else targets[scenario]
            met = wall_ratio <= goal
            failed |= not met
            print(f"  gpu-doctor / {name:<17} wall {wall_ratio:5.2f}×  CPU {cpu_ratio:5.2f}×   target ≤ {goal}× "
                  f"(wall): {'met' if met else 'MISSED'}")
        rss_ok = ours[2] <= 40
        failed |= not rss_ok
        print(f"  gpu-doctor peak RSS {ours[2]:.1f} MB, target ≤ 40 MB: {'met' if rss_ok else 'MISSED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
