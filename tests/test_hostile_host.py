"""The attack harness, host side: fault sysroots and fake binaries under ``--root``.

A FIFO or a device where a file belongs, a file larger than its cap, a command that prints forever, every
command hanging: the collection ends, quickly, with each problem as an error entry of the snapshot.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile import alive, no_hang_within, report_attack_counts
from sysroot import Cmd, Link, build

from doctor.host import OUTPUT_CAP, Host
from doctor.probes import collect

FAULT_PATHS = ["/proc/driver/nvidia/version", "/proc/modules", "/var/lib/dpkg/status",
               "/usr/local/cuda/version.json", "/etc/os-release", "/sys/module/nvidia/version",
               "/proc/sys/kernel/osrelease", "/var/log/kern.log", "/usr/local/cuda/include/cudnn_version.h"]
COUNTS: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def report_counts() -> Iterator[None]:
    yield
    report_attack_counts({f"host: {family}": n for family, n in COUNTS.items()})


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    with no_hang_within(20, "the probe"):
        yield


def host(root: Path, timeout: float = 2.0, budget: float | None = None) -> Host:
    return Host(root=root, env={"PATH": "/usr/bin:/bin"}, timeout=timeout, budget=budget)


@pytest.mark.parametrize("kind", ["fifo", "urandom", "zero"])
def test_special_files_under_root_never_block(tmp_path: Path, kind: str) -> None:
    files: dict[str, Any] = {"/usr/local/cuda/bin/.keep": ""}
    for logical in FAULT_PATHS:
        if kind != "fifo":
            files[logical] = Link("/dev/urandom" if kind == "urandom" else "/dev/zero")
    build(tmp_path, files)
    if kind == "fifo":
        for logical in FAULT_PATHS:
            real = tmp_path / logical.lstrip("/")
            real.parent.mkdir(parents=True, exist_ok=True)
            os.mkfifo(real)
    start = time.monotonic()
    facts = collect(host(tmp_path))
    COUNTS["fault sysroots"] = COUNTS.get("fault sysroots", 0) + len(FAULT_PATHS)
    assert time.monotonic() - start < 60  # a FIFO or /dev/zero read would never end
    assert facts.driver.kernel_module is None and facts.driver.packages == []
    assert [t for t in facts.toolkits if t.root == "/usr/local/cuda" and t.version] == []


def test_a_dpkg_status_over_4_mb_keeps_the_driver_packages_past_the_cut(tmp_path: Path) -> None:
    filler = "".join(f"Package: filler{i}\nStatus: install ok installed\nVersion: 1.0-{i}\nDescription: "
                     f"{'x' * 200}\n\n" for i in range(25_000))
    assert len(filler) > 5 * 1024 * 1024
    tail = "Package: nvidia-driver-550\nStatus: install ok installed\nVersion: 550.127.05-0ubuntu1\n\n"
    build(tmp_path, {"/var/lib/dpkg/status": filler + tail})
    facts = collect(host(tmp_path))
    assert [(p.name, p.version) for p in facts.driver.packages] == [("nvidia-driver-550", "550.127.05-0ubuntu1")]
    assert not [e for e in facts.errors if "dpkg" in e.reason and "truncated" in e.reason]


def test_dpkg_driver_packages_are_the_names_with_a_driver_prefix_whatever_else_the_file_holds(tmp_path: Path) -> None:
    # The status file is searched for driver names by one pattern: the key in any case, a tab, names that only
    # contain a driver word, an empty name and bytes that are not UTF-8 leave the same packages as a test of each
    # name would.
    status = (b"Package: xnvidia-driver\nStatus: install ok installed\nVersion: 1\n\n"
              b"PACKAGE:\tlibcuda1\nStatus: install ok installed\nVersion: 535.1-1\n\n"
              b"Package:\nnvidia-driver-9\nVersion: 2\n\n"
              b"Package: \xffnvidia-utils\nStatus: install ok installed\nVersion: 3\n\n"
              b"package: nvidia-driver-550\xff\nStatus: install ok installed\nVersion: 550.1-1\n\n"
              b"Package: foo-nvidia\nStatus: install ok installed\nVersion: 4\n\n"
              b"Package: nvidia-kernel-dkms\nStatus: install ok installed\nVersion: 550.2-1\n")
    build(tmp_path, {"/var/lib/dpkg/status": status})
    facts = collect(host(tmp_path))
    assert [(p.name, p.version) for p in facts.driver.packages] == [
        ("libcuda1", "535.1-1"), ("nvidia-driver-550\ufffd", "550.1-1"), ("nvidia-kernel-dkms", "550.2-1")]


def test_a_file_over_its_cap_is_an_error_entry(tmp_path: Path) -> None:
    build(tmp_path, {"/var/log/kern.log": "kernel: hello\n" * 400_000})  # 5.6 MB > 4 MB
    facts = collect(host(tmp_path))
    assert any(e.reason == "/var/log/kern.log: output truncated at 4 MB (the rest was not read)"
               for e in facts.errors), facts.errors


def endless(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexec yes 'GPU 0: NVIDIA H100 (UUID: GPU-x)'\n")
    path.chmod(0o755)


def hanging(path: Path, pids: Path) -> None:
    """A command whose grandchild holds its pipes open and which never exits (the worst case for a runner)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nsleep 1000 &\necho $! >> {pids}\necho $$ >> {pids}\nwait\n")
    path.chmod(0o755)


def test_a_command_that_prints_forever_is_cut_at_the_cap(tmp_path: Path) -> None:
    endless(tmp_path / "usr/bin/nvidia-smi")
    start = time.monotonic()
    facts = collect(host(tmp_path, timeout=120))
    assert time.monotonic() - start < 100  # cut at the cap, not waited out to the timeout
    COUNTS["fake binaries"] = COUNTS.get("fake binaries", 0) + 1
    assert any(f"output truncated at {OUTPUT_CAP // (1024 * 1024)} MB" in e.reason for e in facts.errors), facts.errors



@pytest.mark.slow  # a few seconds each: with the slow tests (CI runs both) to keep the fast set in budget
def test_every_command_hanging_ends_at_the_overall_deadline_and_leaves_nothing(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    for cmd in ("nvidia-smi", "dmesg", "rpm", "mokutil", "gcc", "ldconfig", "nvcc", "python3", "ldd", "uname",
                "lsmod", "dkms", "docker", "nvidia-container-cli"):
        hanging(tmp_path / "usr/bin" / cmd, pids)
    (tmp_path / "sys/firmware/efi").mkdir(parents=True)
    start = time.monotonic()
    facts = collect(host(tmp_path, timeout=1.0, budget=2.5))
    took = time.monotonic() - start
    COUNTS["fake binaries"] = COUNTS.get("fake binaries", 0) + 14
    # 2.5 s on an idle machine; the hung commands would hold it 14 × 1000 s
    assert took < 30, f"the overall deadline did not hold: {took:.1f}s"
    assert any("timed out" in e.reason or "overall deadline" in e.reason for e in facts.errors)
    time.sleep(0.1)
    started = [int(x) for x in pids.read_text().split()] if pids.exists() else []
    assert started and not [p for p in started if alive(p)], "a hung command's process group outlived it"


def test_the_overall_deadline_refuses_new_commands(tmp_path: Path) -> None:
    build(tmp_path, {"/usr/bin/true-ish": Cmd("ok\n")})
    h = Host(root=tmp_path, env={"PATH": "/usr/bin"}, timeout=5, budget=0.0)
    result = h.run(["true-ish"])
    assert result.returncode is None and result.error == "not run: the overall deadline (0s) had passed"


HOSTILE_CONTENTS = {
    "deep nesting": b"[" * 100_000,
    "long digits": b'{"cuda": {"version": "' + b"9" * 5000 + b'"}, "runtimes": ' + b"9" * 5000 + b"}\n",
    "binary": bytes(range(256)) * 64,
    "control and markup": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.\x1b[2J²³ [/bold]\n"
                          "Package: nvidia-driver-535\nStatus: install ok installed\nVersion: \ud800\n".encode(
                              "utf-8", "surrogatepass"),
}


@pytest.mark.parametrize("content", list(HOSTILE_CONTENTS), ids=list(HOSTILE_CONTENTS))
def test_hostile_file_contents_under_root_are_facts_or_errors(tmp_path: Path, content: str) -> None:
    files: dict[str, Any] = {p: HOSTILE_CONTENTS[content] for p in FAULT_PATHS}
    files["/etc/docker/daemon.json"] = HOSTILE_CONTENTS[content]
    files["/usr/bin/docker"] = Cmd("")
    build(tmp_path, files)
    COUNTS["fault sysroots"] = COUNTS.get("fault sysroots", 0) + len(files)
    facts = collect(host(tmp_path))
    assert facts.host.container_toolkit is None or facts.host.container_toolkit.runtime_configured is not True
    from doctor.pipeline import diagnose
    from doctor.render.text import render

    assert "\x1b" not in render(diagnose(facts), verbose=True, colour=False)


# --- the NVML child's standard input (the libcudnn path, sent after the child started) ---------------------


@pytest.mark.parametrize("name", ["-x --cudnn=..etc", "line\nbreak", "not-utf8-\udcff", "$(touch pwned)"],
                         ids=["option-like", "newline", "not-utf8", "shell"])
def test_a_hostile_libcudnn_directory_reaches_the_nvml_child_as_one_path(tmp_path: Path, name: str) -> None:
    """The path travels on the child's standard input, never its command line or a shell: a directory named like
    an option, with a newline, with bytes that are not UTF-8 or with shell syntax is the path the child opens,
    whole, and cudnnGetVersion() answers through it."""
    from test_probe_concurrency import _fake_libcudnn

    directory = tmp_path / name
    directory.mkdir()
    lib = _fake_libcudnn(directory, 90100)
    env = {**os.environ, "LD_LIBRARY_PATH": str(directory)}
    facts = collect(Host(env=env))
    assert facts.loader.libcudnn is not None and facts.loader.libcudnn.path == str(lib)
    assert [c.version for c in facts.cudnn if c.location == f"{lib} (cudnnGetVersion)"] == ["9.1.0"]
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


# --- the kernel log read from /dev/kmsg (the Xid events), without dmesg -------------------------------------

def _kmsg(tmp_path: Path, records: list[bytes]) -> str:
    path = tmp_path / "kmsg"
    path.write_bytes(b"".join(records))
    return str(path)


@pytest.mark.parametrize("family", ["escapes", "no-separator", "not-utf8", "flood", "fifo", "directory"])
def test_hostile_kernel_log_records_are_read_whole_and_bounded(tmp_path: Path, family: str) -> None:
    """Whatever the kernel log holds (a message is partly user text: a process name, a path), the reader returns
    lines of text (escapes undone as dmesg undoes them, bytes that are no UTF-8 replaced), never hangs (a FIFO
    without a writer, a device that never ends), stops at its cap with a note, and leaves the parsing to the
    parsers, which never interpret it."""
    from doctor import parsers

    xid = b"4,812,55000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=\\x1b[2Jx, GPU has fallen off the bus.\n"
    live = Host()
    if family == "escapes":
        device = _kmsg(tmp_path, [xid, b" SUBSYSTEM=pci\n", b"6,813,56000,-;tab\\x09and\\x0anewline \\x5c [red]x[/]\n"])
        text = live.kernel_log(device)
        assert text is not None
        assert text.splitlines() == ["NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=\x1b[2Jx, GPU has fallen off the "
                                     "bus.", "tab\tand", "newline \\ [red]x[/]"]
        assert [e["xid"] for e in parsers.parse_xid_lines(text)] == [79]
    elif family == "no-separator":
        assert live.kernel_log(_kmsg(tmp_path, [b"garbage without a separator\n", xid])) == (
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=\x1b[2Jx, GPU has fallen off the bus.\n")
    elif family == "not-utf8":
        text = live.kernel_log(_kmsg(tmp_path, [b"6,1,1,-;\xff\xfe\x00 NVRM \xc3\n"]))
        assert text == "\ufffd\ufffd\x00 NVRM \ufffd\n"
    elif family == "flood":
        device = _kmsg(tmp_path, [xid] * (5 * 1024 * 1024 // len(xid) + 1))
        t0 = time.monotonic()
        text = live.kernel_log(device, limit=1024 * 1024)
        assert text is not None and time.monotonic() - t0 < 15
        assert len(text.encode()) <= 1024 * 1024 and any("truncated" in n for n in live.notes)
    elif family == "fifo":
        os.mkfifo(tmp_path / "kmsg")
        assert live.kernel_log(str(tmp_path / "kmsg")) == ""  # no writer: nothing, at once
    else:
        assert live.kernel_log(str(tmp_path)) is None  # a directory: no log, dmesg is asked instead
    COUNTS["kernel-log"] = COUNTS.get("kernel-log", 0) + 1


def test_the_kernel_log_is_read_only_on_this_machine(tmp_path: Path) -> None:
    assert host(tmp_path).kernel_log() is None  # an inspected root: its /dev is not its kernel's log
    assert Host().kernel_log(str(tmp_path / "none")) is None


@pytest.mark.skipif(not os.access("/dev/kmsg", os.R_OK), reason="no readable /dev/kmsg here")
def test_the_kernel_log_reads_what_dmesg_prints() -> None:
    """On this machine: the same messages, in the same order, as dmesg prints after its timestamps."""
    import re
    import shutil
    import subprocess

    dmesg = shutil.which("dmesg")
    if dmesg is None:
        pytest.skip("no dmesg to compare with")
    ours = Host().kernel_log()
    theirs = subprocess.run([dmesg], capture_output=True, text=True, timeout=60)
    if theirs.returncode != 0:
        pytest.skip(f"dmesg cannot read the log here: {theirs.stderr.strip()}")
    assert ours is not None
    printed = [re.sub(r"^\[[ 0-9.]+\] ", "", line) for line in theirs.stdout.splitlines()]
    # The log may have grown between the two reads: the first one's lines are a prefix of the second's.
    assert printed[:len(ours.splitlines())] == ours.splitlines()[:len(printed)] and len(printed) > 10


# --- an inspected root whose links point out of it ----------------------------------------------------------

def test_links_of_an_inspected_root_never_reach_this_machine(tmp_path: Path) -> None:
    """An image's absolute links name paths of the image: /usr/local/cuda -> /usr/local/cuda-13.0 is the image's
    toolkit or none, a /proc file linked to one of this machine's files is not read, and a command linked to one
    of this machine's programs is not run (before, each reached this machine: its toolkit was reported as the
    image's, its nvcc run)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  999.99.99\n")
    tool = outside / "nvidia-smi"
    ran = outside / "ran"
    tool.write_text(f"#!/bin/sh\ntouch {ran}\n")
    tool.chmod(0o755)
    host_cuda = "/usr/local/cuda-13.0" if Path("/usr/local/cuda-13.0/include/cuda.h").exists() else str(outside)
    root = build(tmp_path / "root", {
        "/etc/os-release": 'ID=ubuntu\nVERSION_ID="22.04"\n',
        "/usr/local/cuda": Link(host_cuda),  # dangling inside the image
        "/proc/driver/nvidia/version": Link(str(outside / "secret")),
        "/usr/bin/nvidia-smi": Link(str(tool)),
        "/usr/bin/nvcc": Link(f"{host_cuda}/bin/nvcc"),
        "/opt/loop": Link("/opt/loop"),  # a link to itself
    })
    h = host(root)
    facts = collect(h)
    assert facts.toolkits == [] and facts.driver.kernel_module is None
    assert not ran.exists()
    assert h.realpath("/usr/local/cuda/include/cuda.h") == f"{host_cuda}/include/cuda.h"
    assert h.path("/usr/local/cuda/include/cuda.h") == root / host_cuda.lstrip("/") / "include/cuda.h"
    assert not h.exists("/opt/loop/x") and h.read_head("/etc/os-release", 5) == b"ID=ub"
    COUNTS["links-out-of-root"] = COUNTS.get("links-out-of-root", 0) + 1
