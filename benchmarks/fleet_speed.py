"""How long `gpu-doctor fleet` takes over N node reports (default 10,000; the target is under 2 s).

What it measures, each the best and the median of 5 runs:
  - in-process: reading, aggregating and rendering the N reports in one already-started Python (the
    `fleet` command's own work; --jobs 1 and the default, which spreads the reading over the CPUs);
  - CLI: the whole `gpu-doctor fleet DIR` command, interpreter start and imports included.

The reports are real: this machine's own `gpu-doctor check --json` facts, turned into 8-GPU nodes
(driver 550 loaded, H100s, CUDA 12.4, torch in a venv) with the variations a fleet has — an older driver here, a
GPU with ECC errors or a down-trained PCIe link there, a node that lost a GPU, one whose module is
not loaded — each diagnosed by the real engine and written as `check --json` writes it (~80 KB
each, so ~800 MB of temporary files for 10,000).

Runs against the installed gpu-doctor (README: scripts/install), with that environment's interpreter:

    ~/.local/share/gpu-doctor/bin/python benchmarks/fleet_speed.py [-n 10000] [--keep DIR] [--unhealthy]

Every child process runs outside the repository, so the source tree never shadows the installed package.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

from doctor.model.facts import Facts, Gpu, LibRef, PyPackage, PythonEnv, Toolkit
from doctor.pipeline import diagnose

OUTSIDE = tempfile.gettempdir()  # the children's working directory: not the repository, which would shadow doctor


def gpu_doctor() -> list[str]:
    """The installed command beside this interpreter, else the installed package as a module."""
    exe = Path(sys.executable).with_name("gpu-doctor")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "doctor"]


def real_facts() -> Facts:
    out = subprocess.run([*gpu_doctor(), "check", "--json"], capture_output=True, text=True, check=False,
                         cwd=OUTSIDE)
    return Facts.from_dict(json.loads(out.stdout)["facts"])


def gpu(i: int, **changes: object) -> Gpu:
    g = Gpu(index=i, name="NVIDIA H100 80GB HBM3", uuid=f"GPU-{i:08x}-2222-3333-4444-555555555555",
            pci_bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0", pci_device_id="0x233010DE", compute_capability="9.0",
            memory_total_mib=81559, memory_used_mib=512, mig_mode=False, persistence_mode=True, ecc_uncorrected=0,
            retired_pages_pending=False, remapped_rows_pending=False, temperature_c=34, power_draw_w=71.5,
            pcie_gen_current=5, pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16, throttle_reasons=[],
            source="nvml")
    return replace(g, **changes)  # type: ignore[arg-type]


def node_facts(base: Facts, driver: str = "550.90.07", api: str = "12.4", gpus: list[Gpu] | None = None,
               torch: tuple[str, str] = ("2.5.1", "12.4"), loaded: bool = True, as_recorded: bool = False) -> Facts:
    """This machine's facts as an 8-GPU node; its own CUDA toolkit (13.0 here) only when ``as_recorded``."""
    gpus = gpus if gpus is not None else [gpu(i) for i in range(8)]
    env = PythonEnv(executable="/opt/venv/bin/python", version="3.11.9", origin="VIRTUAL_ENV", packages=[
        PyPackage("nvidia-cudnn-cu12", "9.1.0.70", cuda="12", cudnn="9.1.0.70"),
        PyPackage("torch", torch[0], cuda=torch[1], cudnn="9.1.0.70", cpu_only=False)])
    return replace(
        base,
        host=replace(base.host, container=None, pci_nvidia_gpus=8),
        driver=replace(base.driver, kernel_module=driver if loaded else None, module_loaded=loaded, userspace=driver,
                       cuda_driver_api=api, cuda_init_error=None if loaded else base.driver.cuda_init_error,
                       nvml_error=None if loaded else "Driver Not Loaded", module_for_running_kernel=True,
                       device_nodes=[f"/dev/nvidia{g.index}" for g in gpus] + ["/dev/nvidiactl", "/dev/nvidia-uvm"]),
        gpus=gpus if loaded else [],
        python_envs=[env],
        **({} if as_recorded else {
            "toolkits": [Toolkit("/usr/local/cuda-12.4", version="12.4.1", nvcc_version="12.4.131", source="path")],
            "loader": replace(base.loader, nvcc_on_path=LibRef("/usr/local/cuda-12.4/bin/nvcc", "12.4.131"),
                              libcudart=LibRef("/usr/local/cuda-12.4/lib64/libcudart.so.12", "12.4.127")),
        }),
    )


def variants(base: Facts, unhealthy: bool) -> list[tuple[int, str]]:
    """(how many nodes in 1000 look like this, the report text)."""
    healthy = [gpu(i) for i in range(8)]
    node = partial(node_facts, base, as_recorded=unhealthy)
    cases = [
        (955, node()),
        (15, node(driver="535.183.01", api="12.2")),
        (5, node(gpus=[*healthy[:3], gpu(3, ecc_uncorrected=4, retired_pages_pending=True), *healthy[4:]])),
        (5, node(gpus=[*healthy[:5], gpu(5, pcie_width_current=8), *healthy[6:]])),
        (5, node(gpus=healthy[:7])),
        (5, node(loaded=False)),
        (10, node(torch=("2.4.0", "12.1"))),
    ]
    return [(share, json.dumps(diagnose(f).to_dict(), indent=2) + "\n") for share, f in cases]


def write_reports(directory: Path, n: int, unhealthy: bool = False) -> int:
    kinds = variants(real_facts(), unhealthy)
    plan = [text for share, text in kinds for _ in range(share)]  # 1000 entries, spread over the fleet
    size = 0
    for i in range(n):
        text = plan[(i * 7919) % len(plan)]
        (directory / f"gpu{i + 1:05d}.json").write_text(text)
        size += len(text)
    return size


def timed(fn, repeat: int = 5) -> str:  # type: ignore[no-untyped-def]
    """The best and the median of ``repeat`` runs: on a shared machine the best is the least disturbed."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return f"{min(runs):.2f} s (median {statistics.median(runs):.2f} s of {repeat})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=10_000, help="number of node reports (default 10000)")
    ap.add_argument("--keep", metavar="DIR", help="write the reports to DIR and keep them")
    ap.add_argument("--unhealthy", action="store_true", help="keep this machine's own CUDA toolkit, so that every "
                    "node has failing findings (the slowest case: each report's problems are read)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="fleet-speed-") as tmp:
        directory = Path(args.keep or tmp)
        directory.mkdir(parents=True, exist_ok=True)
        size = write_reports(directory, args.n, args.unhealthy)
        print(f"{args.n} reports, {size / args.n / 1024:.0f} KiB each on average, {size / 2**20:.0f} MiB in all, "
              f"in {directory}; {os.cpu_count()} CPU(s)")

        from doctor.commands.fleet import load_fleet, render_text

        def in_process(jobs: int) -> None:
            fleet = load_fleet([str(directory)], jobs=jobs)
            render_text(fleet)
            io.StringIO(json.dumps(fleet.to_dict()))

        fleet = load_fleet([str(directory)])
        c = fleet.counts()
        print(f"  fleet: {c['nodes']} nodes ({c['fail']} fail, {c['warn']} warn), {len(fleet.groups)} problem groups, "
              f"{c['outliers']} outliers, {c['errors']} errors")
        print(f"  in-process, one process (--jobs 1): {timed(lambda: in_process(1))}")
        print(f"  in-process, default               : {timed(lambda: in_process(0))}")
        for fmt in ("text", "json"):
            cmd = [*gpu_doctor(), "fleet", str(directory), "--format", fmt]
            wall = timed(lambda cmd=cmd: subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False, cwd=OUTSIDE))
            print(f"  CLI `gpu-doctor fleet DIR --format {fmt}` (start-up included): {wall}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
