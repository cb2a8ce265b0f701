#!/usr/bin/env python3
"""`gpu-doctor check` next to its peers and to its own previous release, measured in one run on one machine.

Peers (both on PyPI, `pip index versions env-doctor` / `cuda-doctor`): env-doctor (`env-doctor check`) and
cuda-doctor (`cuda-doctor diagnose`), each installed into its own venv under .cache/bench/. Two scenarios:

  no torch    every tool checks an environment without torch (the peers their own venv; gpu-doctor the
              python3 on PATH of a PATH holding only a torch-free venv)
  with torch  every tool checks an environment that has torch 2.13.0 (the test suite's CPU wheel in
              .cache/test-envs): the peers' second venv sees it through a .pth file, gpu-doctor gets VIRTUAL_ENV

gpu-doctor is measured the way the README installs it: scripts/install (GPU_DOCTOR_HOME=.cache/bench/gpu-doctor,
GPU_DOCTOR_BIN=.cache/bench/gpu-doctor-bin), i.e. an environment of its own with a regular, non-editable
`pip install .` of a copy of the current working tree (tracked and untracked files git does not ignore, so
uncommitted changes count), run through its console script `bin/gpu-doctor`; reinstalled on every run of this
script. The previous release is a git revision (default: 0c084df, the last commit before the round that made
`check` slower) and each --also REV one more; each is exported with `git archive` to .cache/bench/src-REV and
installed the same way into .cache/bench/gpu-doctor-REV (its own scripts/install where it has one, else the same
steps: `python -m venv`, `pip install .`), once. One extra row, "gpu-doctor (dev tree)", is the developer's way:
`python -m doctor check` by the interpreter running this script (the dev .venv, with the editable install's finder
hook in its site) and PYTHONPATH at the working tree; it shows what the dev set-up adds, and is not judged.
Targets (issue 23): check ≤ 0.5× each peer without torch, ≤ 0.15× with torch, not slower than the previous release
(ratio ≤ 1.0 with a 10% allowance for noise), peak RSS ≤ 40 MB.

Every command runs from a temporary directory with bytecode allowed (installed packages have .pyc files; this
machine's PYTHONDONTWRITEBYTECODE is unset for the children, and the trees are compiled first). Reported: the
best wall time of --runs, the best CPU time (user + system of the command and its children, from wait4), and
the largest peak RSS of the command's own process; the runs of all the commands are interleaved, round by round.
Usage, from the repository:

    .venv/bin/python benchmarks/peers.py [--runs 7] [--baseline REV] [--also REV] [--torch-env DIR]
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / ".cache" / "bench"
DEFAULT_TORCH = REPO / ".cache" / "test-envs" / "torch2.13.0-cpu-cudnn9.28"
PEERS = {"env-doctor": ["env-doctor", "check"], "cuda-doctor": ["cuda-doctor", "diagnose"]}
DEV_ROW = "gpu-doctor (dev tree)"  # python -m doctor from the working tree, by the dev venv: not judged
OUTSIDE = tempfile.mkdtemp(prefix="gpu-doctor-bench-")


def run_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "CONDA_PREFIX",
                                                            "PYTHONPATH")}
    env["XDG_CACHE_HOME"] = str(BENCH / "xdg-cache")  # no refreshed matrix of the user's
    return env


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one run of a command in its own child."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=OUTSIDE)
    _pid, _status, usage = os.wait4(proc.pid, 0)
    # wait4: user + system time of the child and the children it waited for; ru_maxrss in KiB on Linux, of the
    # largest single process of the tree
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure_all(jobs: dict[tuple[str, str], tuple[list[str], dict[str, str]]],
                runs: int) -> dict[tuple[str, str], tuple[float, float, float]]:
    """(best wall s, best CPU s, max peak RSS MB) of each job over ``runs``. The runs are interleaved (one of each
    job per round, after one warm-up round): on a shared machine a burst of load then falls on every command alike
    instead of on whichever was being measured. The best of several, not the median: other programs only ever add
    time."""
    for argv, env in jobs.values():
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=OUTSIDE, timeout=600)
    samples: dict[tuple[str, str], list[tuple[float, float, float]]] = {key: [] for key in jobs}
    for _ in range(runs):
        for key, (argv, env) in jobs.items():
            samples[key].append(run_once(argv, env))
    return {key: (min(s[0] for s in runs_), min(s[1] for s in runs_), max(s[2] for s in runs_))
            for key, runs_ in samples.items()}


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


def source_tree(rev: str | None) -> Path:
    """A copy of gpu-doctor's source to install: the working tree as it is (``rev`` None, copied afresh) or a git
    revision (exported once)."""
    tree = BENCH / ("src-current" if rev is None else f"src-{rev}")
    if rev is None:
        shutil.rmtree(tree, ignore_errors=True)
        files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                               check=True, capture_output=True).stdout.decode().split("\0")
        for name in filter(None, files):
            source = REPO / name
            if source.is_file():
                (tree / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, tree / name)
    elif not (tree / "doctor").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def installed(rev: str | None) -> Path:
    """gpu-doctor's console script, installed as the README says (scripts/install: its own venv, a regular
    `pip install .`) from ``source_tree(rev)``; the working tree every time, a revision once."""
    home = BENCH / ("gpu-doctor" if rev is None else f"gpu-doctor-{rev}")
    script = home / "bin" / "gpu-doctor"
    if rev is not None and script.exists():
        return script
    tree = source_tree(rev)
    if (tree / "scripts" / "install").is_file():
        env = {**run_env(), "GPU_DOCTOR_HOME": str(home), "GPU_DOCTOR_BIN": str(BENCH / f"{home.name}-bin"),
               "PYTHON": sys.executable}
        subprocess.run(["sh", str(tree / "scripts" / "install")], check=True, env=env, stdout=subprocess.DEVNULL)
    else:  # an older revision without scripts/install: the same steps
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(home)], check=True)
        subprocess.run([str(home / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        str(tree)], check=True)
    return script


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
    ap.add_argument("--also", action="append", default=[], metavar="REV",
                    help="also measure gpu-doctor at this git revision (e.g. the state before a change), not judged")
    args = ap.parse_args()
    torch_env = Path(args.torch_env)
    print(f"machine: {machine()}")
    compileall.compile_dir(str(REPO / "doctor"), quiet=1)
    env = run_env()
    # the torch-free environment gpu-doctor checks: python3 on a PATH of its own
    plain = venv("plain-python", [])
    no_torch_env = {**env, "PATH": f"{plain / 'bin'}:/usr/bin:/bin"}
    torch_vars = {**no_torch_env, "VIRTUAL_ENV": str(torch_env)}
    with_torch = torch_env.is_dir()
    check = ["check"]
    dev = [sys.executable, "-m", "doctor", *check]
    jobs: dict[tuple[str, str], tuple[list[str], dict[str, str]]] = {}
    for label, rev in (("gpu-doctor", None), ("previous release", args.baseline),
                       *((f"gpu-doctor@{rev}", rev) for rev in args.also)):
        argv = [str(installed(rev)), *check]
        jobs["no torch", label] = (argv, no_torch_env)
        if with_torch:
            jobs["with torch", label] = (argv, torch_vars)
    jobs["no torch", DEV_ROW] = (dev, {**no_torch_env, "PYTHONPATH": str(REPO)})
    if with_torch:
        jobs["with torch", DEV_ROW] = (dev, {**torch_vars, "PYTHONPATH": str(REPO)})
    for name, argv in PEERS.items():
        root = venv(name, [name])
        jobs["no torch", name] = ([str(root / "bin" / argv[0]), *argv[1:]], env)
        if with_torch:
            troot = venv(f"{name}-torch", [name], extra_site=site_packages(torch_env))
            jobs["with torch", name] = ([str(troot / "bin" / argv[0]), *argv[1:]], env)
    scenarios: dict[str, dict[str, tuple[float, float, float]]] = {"no torch": {}, "with torch": {}}
    for (scenario, name), figures in measure_all(jobs, args.runs).items():
        scenarios[scenario][name] = figures

    targets = {"no torch": 0.5, "with torch": 0.15}
    failed = False
    for scenario, rows in scenarios.items():
        if not rows:
            print(f"\n{scenario}: not measured (no torch environment at {torch_env})")
            continue
        print(f"\n{scenario}:")
        for name, (wall, cpu, rss) in rows.items():
            print(f"  {name:<26} wall {wall * 1000:7.0f} ms   CPU {cpu * 1000:7.0f} ms   peak RSS {rss:6.1f} MB")
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
    if hasattr(os, "getloadavg"):
        print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
