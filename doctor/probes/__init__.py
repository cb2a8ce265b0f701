"""Probes: the only code that touches the machine. ``collect`` turns a Host into a Facts snapshot.

The slow parts (child processes for NVML/libcuda and for each Python environment, nvidia-smi,
nvcc) run concurrently; each has its own timeout, so the whole collection is bounded.
"""

from __future__ import annotations

import datetime as _dt
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from doctor.host import Host
from doctor.model.facts import ENV_NAMES, Facts
from doctor.probes import cuda, driver, hostinfo, pyenvs
from doctor.probes.base import Recorder


def collect(host: Host, pythons: list[str] | None = None, deep: bool = False, deep_timeout: float = 60.0) -> Facts:
    rec = Recorder()
    nvcc_cache: dict[str, str | None] = {}
    loader = cuda.probe_loader(host, rec, nvcc_cache)
    targets = pyenvs.target_pythons(host, pythons or [], rec)
    with ThreadPoolExecutor(max_workers=4 + len(targets)) as pool:
        cudnn_path = loader.libcudnn.path if loader.libcudnn else None
        native_f = pool.submit(driver.run_native, host, rec, cudnn_path)
        host_f = pool.submit(hostinfo.probe_host, host, rec)
        toolkits_f = pool.submit(cuda.probe_toolkits, host, rec, nvcc_cache)
        env_fs = [pool.submit(pyenvs.probe_env, host, rec, exe, origin, deep, deep_timeout)
                  for exe, origin in targets]
        native = native_f.result()
        # nvidia-smi only adds something when NVML gave no GPU list (it wraps the same library).
        # nvidia-smi adds the GPU list when NVML gave none, and the driver's CUDA version when libcuda could
        # not be asked (an inspected image, a broken libcuda).
        smi = (driver.run_smi(host, rec)
               if not (native and native.get("gpus") and native.get("cuda_driver_version_int")) else None)
        host_info = host_f.result()
        envs = [f.result() for f in env_fs]
        toolkits = toolkits_f.result() + cuda.pip_toolkits(envs)
    # Which probes ran: a fact that is absent after its probe ran is "absent"; without it, "unknown"
    # (a snapshot parsed from a bug report has only what the report said).
    rec.source("driver", "probes: /proc/driver/nvidia/version, /proc/modules, NVML, libcuda, nvidia-smi, dpkg/rpm")
    rec.source("toolkits", "probes: CUDA_HOME, CUDA_PATH, /usr/local/cuda*, /opt/cuda*, distro, conda, pip wheels")
    pci = driver.scan_pci(host, rec)
    host_info = replace(host_info, pci_nvidia_gpus=None if pci is None else len(pci))
    gpus = driver.probe_gpus(host, rec, native, smi)
    drv = driver.probe_driver(host, rec, native, loader, smi, host_info.kernel)
    cudnn_int = (native or {}).get("cudnn_version_int")
    cudnns = cuda.probe_cudnn(host, rec, toolkits, loader, envs, cudnn_int if isinstance(cudnn_int, int) else None)
    if not targets:
        rec.error("python", "no Python interpreter found (no VIRTUAL_ENV, CONDA_PREFIX or python3 on PATH)")
    for note in host.notes:  # files cut at their cap: what was past the cut is unknown, and says so
        rec.error("read", note)
    return Facts(
        collected_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        host=host_info,
        driver=drv,
        gpus=gpus,
        toolkits=toolkits,
        loader=loader,
        cudnn=cudnns,
        python_envs=envs,
        env={name: host.getenv(name) for name in ENV_NAMES},
        errors=rec.errors,
        sources=dict(sorted(rec.sources.items())),
    )
