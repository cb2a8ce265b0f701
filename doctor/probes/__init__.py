"""Probes: the only code that touches the machine. ``collect`` turns a Host into a Facts snapshot.

The slow parts (child processes for NVML/libcuda and for each Python environment, nvidia-smi,
nvcc) run concurrently; each has its own timeout, so the whole collection is bounded.
"""

from __future__ import annotations

import datetime as _dt
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from doctor.host import ChildInput, Host
from doctor.probes import native as _native
from doctor.probes import osrelease
from doctor.probes.base import Recorder

if TYPE_CHECKING:
    from doctor.model.facts import Facts

T = TypeVar("T")


class _Task(Generic[T]):
    """One probe running in a thread of its own; :meth:`result` waits for it and re-raises what it raised.

    concurrent.futures would do the same, but importing it (logging, queue, traceback) costs ~10 ms of every
    `check`'s start-up, for a handful of threads that each run one probe."""

    def __init__(self, fn: Callable[..., T], *args: Any) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, *args), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., T], *args: Any) -> None:
        try:
            self._value = fn(*args)
        except BaseException as exc:  # handed to whoever waits for the result, as a future does
            self._error = exc

    def wait(self) -> None:
        self._thread.join()

    def result(self) -> T:
        self.wait()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # no error: _run stored what fn returned, a T


def _quick_probes(host: Host, rec: Recorder, nvcc_cache: dict[str, str | None],
                  os_release: dict[str, str | None] | None) -> tuple[Any, Any, Any]:
    from doctor.probes import cuda, driver, hostinfo  # imported by collect(), in the main thread

    return (hostinfo.probe_host(host, rec, os_release), cuda.probe_toolkits(host, rec, nvcc_cache),
            driver.probe_driver_logs(host))


def collect(host: Host, pythons: list[str] | None = None, deep: bool = False, deep_timeout: float = 60.0,
            meanwhile: Callable[[], object] | None = None) -> Facts:
    """The facts ``host`` reaches. ``meanwhile`` runs in this thread while the child processes answer (the caller's
    own start-up work, e.g. importing the checks: otherwise this thread would only wait)."""
    rec = Recorder()
    tasks: list[_Task[Any]] = []

    def start(fn: Callable[..., T], *args: Any) -> _Task[T]:
        tasks.append(_Task(fn, *args))
        return tasks[-1]

    os_release = osrelease.read(host)
    if os_release is None:
        # Only distro can read it here. distro imports logging, whose fork hooks (os.register_at_fork) registered
        # while a probe thread forks a child break that child: it is imported now, before the first child starts.
        import distro  # noqa: F401  (imported for that order; the host probe uses it)
    started = _native.started_ahead(host)  # `check` may have started the NVML child before its imports
    # the libcudnn the NVML child is to ask, once the loader has found it
    cudnn_later = started.stdin if started is not None else ChildInput()
    try:
        # The slowest first: NVML and libcuda (a child interpreter) before anything else, even the imports of the
        # other probes and of the facts model; and nvidia-smi, where NVML cannot list GPUs (no kernel module:
        # nvidia-smi then adds the GPU list, and the driver's CUDA version when libcuda could not be asked).
        native_t = start(_native.run_native, host, rec, cudnn_later, started)
        smi_t = start(_native.smi_output, host) if _native.nvml_cannot_list(host) else None
        # Imported while they start (in this thread: see hostinfo's distro above).
        from doctor.model.facts import ENV_NAMES, Facts
        from doctor.probes import cuda, driver, hostinfo, pyenvs  # noqa: F401  (hostinfo: for _quick_probes)

        nvcc_cache: dict[str, str | None] = {}
        loader = cuda.probe_loader(host, rec, nvcc_cache)
        cudnn_later.send(loader.libcudnn.path if loader.libcudnn else None)
        targets = pyenvs.target_pythons(host, pythons or [], rec)
        # Then the other interpreters: the Python environments.
        env_ts = [start(pyenvs.probe_env, host, rec, exe, origin, deep, deep_timeout) for exe, origin in targets]
        # The quick probes, one after another in one thread: each thread started costs this one a wait for the
        # interpreter's lock while the others run, and these end long before NVML's child does.
        quick_t = start(_quick_probes, host, rec, nvcc_cache, os_release)
        if meanwhile is not None:
            meanwhile()
        native = native_t.result()
        smi_early = smi_t.result() if smi_t is not None else None
        smi = (driver.run_smi(host, rec, smi_early)
               if not (native and native.get("gpus") and native.get("cuda_driver_version_int")) else None)
        host_info, found_toolkits, logs = quick_t.result()
        envs = [t.result() for t in env_ts]
        toolkits = found_toolkits + cuda.pip_toolkits(envs)
    finally:  # as a pool would: no probe thread outlives the collection, even when one of them failed
        cudnn_later.close()  # the NVML child never waits for a path this thread will not send
        for task in tasks:
            task.wait()
    # Which probes ran: a fact that is absent after its probe ran is "absent"; without it, "unknown"
    # (a snapshot parsed from a bug report has only what the report said).
    rec.source("driver", "probes: /proc/driver/nvidia/version, /proc/modules, NVML, libcuda, nvidia-smi, dpkg/rpm")
    rec.source("toolkits", "probes: CUDA_HOME, CUDA_PATH, /usr/local/cuda*, /opt/cuda*, distro, conda, pip wheels")
    pci = driver.scan_pci(host, rec)
    host_info = replace(host_info, pci_nvidia_gpus=None if pci is None else len(pci))
    if pci is not None:
        rec.source("host.pci_nvidia_gpus", driver.PCI_SOURCE)
    gpus = driver.probe_gpus(host, rec, native, smi)
    drv = driver.probe_driver(host, rec, native, loader, smi, host_info.kernel, logs)
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
