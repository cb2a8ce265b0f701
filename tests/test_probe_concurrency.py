"""The probes run side by side: what a user sees of that is only speed, and the same facts and failures as when they
ran one after another. `check` runs its own start-up work (importing the checks, reading the matrix) while the
probes' child processes answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from doctor.host import Host
from doctor.probes import collect, hostinfo
from tests.sysroot import Cmd, build, dpkg_status


def _root(tmp_path: Path) -> Path:
    return build(tmp_path, {
        "/etc/os-release": 'ID=ubuntu\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n',
        "/var/lib/dpkg/status": dpkg_status(("nvidia-driver-550", "550.54.15-0ubuntu1"), ("vim", "2:9.0")),
        "/usr/bin/dmesg": Cmd("[  12.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"),
    })


def test_the_caller_s_start_up_work_runs_once_while_the_probes_run(tmp_path: Path) -> None:
    calls: list[str] = []
    facts = collect(Host(root=_root(tmp_path)), meanwhile=lambda: calls.append("warm"))
    assert calls == ["warm"]
    assert facts.host.os_id == "ubuntu"


def test_packages_and_xids_read_beside_the_others_keep_their_facts_and_sources(tmp_path: Path) -> None:
    facts = collect(Host(root=_root(tmp_path)))
    assert [(p.name, p.version) for p in facts.driver.packages] == [("nvidia-driver-550", "550.54.15-0ubuntu1")]
    assert [x.xid for x in facts.driver.xid_events] == [79]
    assert facts.sources["driver.packages"] == "file:/var/lib/dpkg/status"
    assert facts.sources["driver.xid_events"] == "cmd:dmesg"


def test_a_probe_that_crashes_still_crashes_the_collection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in one probe is not swallowed by its thread: it reaches the caller (the CLI's internal-error path)."""

    def broken(*_args: object) -> None:
        raise RuntimeError("probe bug")

    monkeypatch.setattr(hostinfo, "probe_host", broken)
    with pytest.raises(RuntimeError, match="probe bug"):
        collect(Host(root=_root(tmp_path)))


def test_the_nvml_child_writes_what_json_would_without_importing_it() -> None:
    """The NVML child prints its answer without importing json (re, enum: ~10 ms of its start on every `check`):
    the same text json.dumps writes, and json's own for anything that is not a plain value."""
    import json
    import math

    from doctor.probes.native_child import dumps

    gpu = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "power_draw_w": 71.25, "ecc_uncorrected": 0,
           "mig_mode": False, "processes": [{"pid": 7, "name": "train\u00e9\n", "used_mib": None}], "mig_devices": []}
    for value in ({"section": "nvml", "gpus": [gpu]}, {}, [], {"a": (1, "x")}, {"e": "\ud800\"\\\x01"},
                  {"big": 10**40, "neg": -0.0, "tiny": 1e-300}, {"nan": math.nan}, {"inf": -math.inf}, {1: "int key"}):
        assert dumps(value) == json.dumps(value)


# --- the NVML child starts first and learns its libcudnn afterwards (issue 23) ----------------------------------

def _fake_libcudnn(directory: Path, version: int) -> Path:
    """A shared library answering cudnnGetVersion() as libcudnn 9 does, compiled here (cc, as the C fakes are)."""
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src = directory / "cudnn.c"
    src.write_text(f"#include <stddef.h>\nsize_t cudnnGetVersion(void) {{ return {version}; }}\n")
    lib = directory / "libcudnn.so.9"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=120)
    return lib


def test_the_nvml_child_starts_before_the_loader_and_still_asks_the_libcudnn_it_finds(tmp_path: Path) -> None:
    """The driver libraries' child starts before `ldconfig -p` runs (it is the slowest answer of every `check`);
    the libcudnn the loader finds afterwards (here on LD_LIBRARY_PATH) reaches it on its standard input, and its
    cudnnGetVersion() is a fact as before."""
    import os

    from doctor.host import subprocess_runner

    lib = _fake_libcudnn(tmp_path, 90100)
    started: list[str] = []

    def recording(argv: Any, timeout: float, env: Any, stdin: Any = None) -> Any:
        started.append(" ".join(argv))
        return subprocess_runner(argv, timeout, env, stdin)

    env = {**os.environ, "LD_LIBRARY_PATH": str(tmp_path)}
    facts = collect(Host(env=env, runner=recording))
    native = next(i for i, a in enumerate(started) if "native_child.py" in a)
    loader = next(i for i, a in enumerate(started) if a.endswith("ldconfig -p"))
    assert native < loader
    assert "--cudnn-stdin" in started[native]
    assert facts.loader.libcudnn is not None and facts.loader.libcudnn.path == str(lib)
    assert [c.version for c in facts.cudnn if c.location == f"{lib} (cudnnGetVersion)"] == ["9.1.0"]


def test_the_nvml_child_waits_for_no_path_its_parent_never_sends() -> None:
    """A parent that fails between starting the child and sending the path closes the pipe: the child answers
    what NVML and libcuda said, asks no libcudnn, and ends at once instead of at its timeout."""
    import time

    from doctor.host import ChildInput
    from doctor.probes.base import Recorder
    from doctor.probes.native import run_native

    later = ChildInput()
    later.send(None)  # what the parent's `finally` does: the pipe closed with nothing in it
    rec = Recorder()
    began = time.monotonic()
    try:
        answer = run_native(Host(timeout=60.0), rec, later)
    finally:
        later.close()
    assert time.monotonic() - began < 30  # well before its timeout, even on a loaded machine
    assert answer is not None and "cudnn_version_int" not in answer and "cudnn_error" not in answer
    assert [e.probe for e in rec.errors if e.probe == "native"] == []


@pytest.mark.slow  # waits 4 s on purpose
def test_a_child_waiting_for_its_parents_input_gets_its_whole_timeout_after_it() -> None:
    """The NVML child starts before the parent has its libcudnn path; on a loaded machine the parent can take
    longer than the child's timeout to send it. That wait is the parent's, not the child's: the child still gets
    its whole timeout from the moment the input arrives (here 3 s, after a 4 s wait)."""
    import os
    import sys
    import threading

    from doctor.host import ChildInput, subprocess_runner

    later = ChildInput()
    sender = threading.Timer(4.0, later.send, ["/path/to/libcudnn.so.9"])
    sender.start()
    try:
        result = subprocess_runner([sys.executable, "-c", "import sys; print(sys.stdin.read())"], 3.0,
                                   dict(os.environ), later)
    finally:
        sender.cancel()
        later.close()
    assert result.error is None, result.error
    assert result.stdout.strip() == "/path/to/libcudnn.so.9"


def test_on_this_machine_the_xid_events_come_from_the_kernel_log_without_dmesg(monkeypatch: pytest.MonkeyPatch) -> None:
    """The running system's Xid events are read from /dev/kmsg (Host.kernel_log), credited to it, and dmesg is not
    started; where the device cannot be read, dmesg is asked as before."""
    from doctor.probes import driver
    from doctor.probes.base import Recorder

    ran: list[list[str]] = []

    def runner(argv: Any, timeout: float, env: Any, stdin: Any = None) -> Any:
        from doctor.host import CmdResult

        ran.append(list(argv))
        return CmdResult(tuple(argv), 0, "[ 3.1] NVRM: Xid (PCI:0000:01:00): 31, pid=2, name=x, MMU Fault\n")

    line = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"
    monkeypatch.setattr(Host, "kernel_log", lambda self, *a, **k: line)
    rec = Recorder()
    events = driver._xids(Host(runner=runner), rec)
    assert [(e.xid, e.pci_bus_id) for e in events] == [(79, "0000:3b:00")] and ran == []
    assert rec.sources["driver.xid_events"] == "file:/dev/kmsg"
    monkeypatch.setattr(Host, "kernel_log", lambda self, *a, **k: None)
    rec = Recorder()
    host = Host(runner=runner, env={"PATH": "/usr/bin:/bin"})
    if host.which("dmesg") is None:
        pytest.skip("no dmesg on this machine to fall back to")
    assert [e.xid for e in driver._xids(host, rec)] == [31] and ran and ran[0][0].endswith("dmesg")
    assert rec.sources["driver.xid_events"] == "cmd:dmesg"
