"""Pure text parsers for what an NVIDIA GPU machine prints and ships.

Text in, values out: no I/O, no subprocesses, no imports beyond the standard library. Every public
parser accepts any input and never raises; what it cannot read comes back as None (or an empty
list or dict), so a probe can record "unparsable" as a fact instead of crashing. Tests run each
one on real outputs kept in tests/data/ (see SOURCES.md there) and on mutations of them.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from doctor.safeio import lazy_compile

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

__all__ = [
    "cuda_version_from_int",
    "lib_version_from_name",
    "parse_cuda_driver_version_from_smi_text",
    "parse_cuda_h_version",
    "parse_cuda_version_json",
    "parse_cuda_version_txt",
    "parse_cudnn_header",
    "parse_device_query",
    "parse_dpkg_status",
    "parse_gcc_version",
    "parse_jax_environment_info",
    "parse_ldconfig_p",
    "parse_nvcc_version",
    "parse_nvidia_smi_csv",
    "parse_nvidia_smi_text",
    "parse_nvidia_smi_topo",
    "parse_nvidia_smi_xml",
    "parse_os_release",
    "parse_proc_driver_version",
    "parse_tf_build_info",
    "parse_torch_version_py",
    "parse_xid_lines",
    "strip_escapes",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_D = TypeVar("_D")

# Digit runs are bounded everywhere: int() refuses strings longer than 4,300 digits, and no
# version or counter we read is anywhere near that long.
_VERSION = r"\d{1,6}(?:\.\d{1,9}){0,3}"


def _no_pairs() -> list[tuple[str, str]]:
    """The "unparsable" answer of the parsers of (name, value) pairs, typed: a bare ``list`` made mypy infer
    ``list[Never]`` in some incremental runs and not in others."""
    return []


def _never_raise(default: Callable[[], _D]) -> Callable[[Callable[_P, _R]], Callable[_P, _R | _D]]:
    """Last line of defence for the "never raises" contract: a bug in a parser becomes "unparsable".

    The parsers are written not to raise; this catches what they missed (a surrogate that expat
    refuses, a recursion limit in ast), because a probe must record a fact, not crash.
    """

    def wrap(func: Callable[_P, _R]) -> Callable[_P, _R | _D]:
        @functools.wraps(func)
        def safe(*args: _P.args, **kwargs: _P.kwargs) -> _R | _D:
            try:
                return func(*args, **kwargs)
            except Exception:
                return default()

        return safe

    return wrap


def _none() -> None:
    return None


# --- CUDA versions -----------------------------------------------------------------------------


@_never_raise(_none)
def cuda_version_from_int(value: int) -> str | None:
    """CUDA's integer encoding (1000 * major + 10 * minor, as cuDriverGetVersion and cuda.h give it).

    12020 -> "12.2", 11080 -> "11.8", 13000 -> "13.0"; zero, negative or absurd values -> None.
    """
    from doctor.model.versions import cuda_version  # the one decoder (CUDA 1.0 is 1000; majors stay below 100)

    return cuda_version(value) if isinstance(value, int) and not isinstance(value, bool) else None


@_never_raise(_none)
def parse_cuda_version_json(text: str) -> str | None:
    """Toolkit version.json (CUDA >= 11.1) -> the "cuda" entry's version, e.g. "12.4.1".

    Runfile installs write a date as the patch ("11.8.20220929"); it is returned as written.
    A fragment (a pasted excerpt, a file cut short) is still read by pattern.
    """
    if not isinstance(text, str):
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        cuda = data.get("cuda")
        if isinstance(cuda, dict) and isinstance(cuda.get("version"), str):
            return _version_or_none(cuda["version"])
        return None
    match = re.search(r'"cuda"\s*:\s*\{[^{}]*?"version"\s*:\s*"([^"\\]{1,64})"', text)
    return _version_or_none(match.group(1)) if match else None


@_never_raise(_none)
def parse_cuda_version_txt(text: str) -> str | None:
    """Toolkit version.txt (CUDA <= 11.0): "CUDA Version 11.0.207" -> "11.0.207"."""
    if not isinstance(text, str):
        return None
    match = re.search(rf"CUDA Version\s+({_VERSION})(?=\s)", _unframe(text))  # (?=\s): not cut inside
    return match.group(1) if match else None


@_never_raise(_none)
def parse_cuda_h_version(text: str) -> str | None:
    """cuda.h "#define CUDA_VERSION 13000" -> "13.0"."""
    if not isinstance(text, str):
        return None
    match = re.search(r"^[ \t]*#[ \t]*define[ \t]+CUDA_VERSION[ \t]+(\d{1,9})\b", text, re.MULTILINE)
    return cuda_version_from_int(int(match.group(1))) if match else None


@_never_raise(_none)
def parse_nvcc_version(text: str) -> str | None:
    """`nvcc --version` -> the full version ("release 12.2, V12.2.140" -> "12.2.140").

    Falls back to the release ("12.2") when the V field is missing.
    """
    if not isinstance(text, str):
        return None
    text = _unframe(text)
    # Each number must be followed by what follows it in the output: a line cut inside "V12.2.140"
    # is not version 12.2.1.
    match = re.search(rf"release\s+(\d{{1,4}}\.\d{{1,4}})\s*,\s*V({_VERSION})(?=\s)", text)
    if match:
        return match.group(2)
    match = re.search(r"release\s+(\d{1,4}\.\d{1,4})(?=\s*,|\s)", text)
    return match.group(1) if match else None


@_never_raise(_none)
def parse_cudnn_header(text: str) -> str | None:
    """cudnn_version.h (cuDNN >= 8) or cudnn.h (cuDNN <= 7) -> "major.minor.patch", e.g. "9.1.0".

    The CUDNN_MAJOR/MINOR/PATCHLEVEL defines are read, not CUDNN_VERSION: its encoding changed in
    9.0 (major * 10000 instead of * 1000), so the parts are the only stable source.
    """
    if not isinstance(text, str):
        return None
    parts: dict[str, str] = {}
    for name in ("MAJOR", "MINOR", "PATCHLEVEL"):
        match = re.search(rf"^[ \t]*#[ \t]*define[ \t]+CUDNN_{name}[ \t]+(\d{{1,6}})\b", text, re.MULTILINE)
        if match:
            parts[name] = str(int(match.group(1)))
    if "MAJOR" not in parts or "MINOR" not in parts:
        return None
    if "PATCHLEVEL" not in parts:
        return f"{parts['MAJOR']}.{parts['MINOR']}"
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCHLEVEL']}"


def _version_or_none(value: str) -> str | None:
    value = value.strip()
    return value if re.fullmatch(_VERSION, value) else None


# --- driver ------------------------------------------------------------------------------------


def _empty_proc_driver() -> dict[str, Any]:
    return {"version": None, "flavor": None, "gcc": None}


@_never_raise(_empty_proc_driver)
def parse_proc_driver_version(text: str) -> dict[str, Any]:
    """/proc/driver/nvidia/version -> {"version", "flavor": "open" | "proprietary", "gcc"}.

    Proprietary: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  <date>";
    open (R515+): "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build ...".
    """
    result = _empty_proc_driver()
    if not isinstance(text, str):
        return result
    text = _unframe(text)
    nvrm = re.search(r"NVRM version:([^\n]*)", text)
    if nvrm:
        line = nvrm.group(1)
        if nvrm.end() < len(text):
            line += "\n"  # the line is complete; at the very end of the text it may be cut inside the version
        module = re.search(rf"Kernel Module(?:\s+for\s+\S+)?\s+({_VERSION})(?=\s)", line)
        if module:
            result["version"] = module.group(1)
        if re.search(r"\bOpen Kernel Module\b", line):
            result["flavor"] = "open"
        elif re.search(r"\bKernel Module\b", line):
            result["flavor"] = "proprietary"
    # Open modules built without a GCC banner print "GCC version:  Selected multilib: ..." instead.
    gcc = re.search(rf"GCC version:\s+gcc version\s+({_VERSION})(?=\s)", text)
    if gcc:
        result["gcc"] = gcc.group(1)
    return result


@_never_raise(lambda: {"driver_version": None, "cuda_version": None})
def parse_cuda_driver_version_from_smi_text(text: str) -> dict[str, Any]:
    """Plain `nvidia-smi` banner (or `nvidia-smi -q`) -> {"driver_version", "cuda_version"}.

    On WSL the banner's "NVIDIA-SMI" version differs from the Windows driver's; "Driver Version"
    is the one that decides what CUDA can run, so it is the one read. See parse_nvidia_smi_text.
    """
    parsed = parse_nvidia_smi_text(text)
    return {"driver_version": parsed["driver_version"], "cuda_version": parsed["cuda_version"]}


# --- framing noise ------------------------------------------------------------------------------

# What a terminal, a chat window or an issue tracker adds around a tool's bytes: colour escapes
# (CSI and OSC sequences), a byte-order mark, Windows and old-Mac line ends, no-break spaces.
_ANSI = lazy_compile(r"\x1b(?:\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)|[@-Z\\-_])")


def strip_escapes(text: str) -> str:
    """Terminal colour escapes (CSI, OSC) and byte-order marks removed; nothing else changed."""
    return _ANSI.sub("", text.replace("\ufeff", ""))


def _unframe(text: str) -> str:
    """The text as the tool printed it: escapes, BOM, CR line ends and quote/fence framing removed.

    Markdown block quotes ("> ") and code fences (a line starting with three backticks, possibly
    with text glued after them, as in "```Wed May 15 ...") are what pasting into an issue adds.
    """
    text = strip_escapes(text).replace("\r\n", "\n").replace("\r", "\n").replace("\u00a0", " ")
    lines = []
    for line in text.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(">"):
            while stripped.startswith(">"):  # "> " quotes, nested ("> > "): the space after each is framing
                stripped = stripped[2:] if stripped.startswith("> ") else stripped[1:]
            line = stripped
        if line.lstrip().startswith("```"):
            line = line.lstrip()[3:]
            line = "" if re.fullmatch(r"[\w+-]*\s*", line) else line
        lines.append(line)
    return "\n".join(lines)


# --- plain nvidia-smi, nvidia-smi -q, nvidia-smi -L ------------------------------------------------

_PCI_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
# "|   0  NVIDIA GeForce RTX 3060 ...    On  | 00000000:01:00.0  On |                  N/A |"
# "|   0  GeForce GTX 680     Off  | 0000:03:00.0     N/A |" ; WSL/Windows: "... WDDM  |"
_TABLE_GPU = lazy_compile(
    rf"^\s*\|\s*(?P<index>\d{{1,3}})\s+(?P<name>\S.*?)\s+(?P<mode>On|Off|N/A|WDDM|TCC|MCDM)?\s*\|"
    rf"\s*(?P<bus>{_PCI_ID})(?:\s|$)")
# "| N/A   54C    P8              16W /  80W |    816MiB /  6144MiB |      3%      Default |"
_TABLE_STATS = lazy_compile(
    r"^\s*\|\s*(?P<fan>\d{1,3}%|N/A|ERR!)\s+(?P<temp>\d{1,3}C|N/A|ERR!)\s+(?P<perf>P\d{1,2}|N/A|ERR!)\s+"
    r"(?P<power>\d{1,5}(?:\.\d{1,3})?W|N/A|ERR!)\s*/\s*(?P<cap>\d{1,5}(?:\.\d{1,3})?W|N/A|ERR!)\s*\|"
    r"\s*(?:(?P<used>\d{1,9})MiB\s*/\s*(?P<total>\d{1,9})MiB\s*\|"
    r"(?:\s*(?P<util>\d{1,3}%|N/A|ERR!)\s)?)?")
# R450+ third row of a GPU: "|                     |                      |             Disabled |" (the MIG M. column)
_TABLE_MIG_MODE = lazy_compile(r"^\s*\|\s*(?:N/A\s*)?\|\s*(?:N/A\s*)?\|\s*(?P<mig>Enabled|Disabled|N/A)\s*\|\s*$")
# MIG table: "|  1    3   0   0  |  14366MiB / 19968MiB | 28      0 |  2   0    1    0    0 |"
_TABLE_MIG = lazy_compile(
    r"^\s*\|\s*(?P<gpu>\d{1,3})\s+(?P<gi>\d{1,3})\s+(?P<ci>\d{1,3})\s+(?P<mig>\d{1,3})\s+\|"
    r"\s*(?P<used>\d{1,9})MiB\s*/\s*(?P<total>\d{1,9})MiB\s*\|")
# Processes: "|    0   N/A  N/A      1752    C+G   Insufficient Permissions        N/A      |"
_TABLE_PROCESS = lazy_compile(
    r"^\s*\|\s*(?P<gpu>\d{1,3})\s+(?:(?:N/A|\d{1,4})\s+(?:N/A|\d{1,4})\s+)?(?P<pid>\d{1,10})\s+"
    r"(?P<type>C\+G|C|G|M\+C|M)\s+(?P<name>.*?)\s+(?P<used>\d{1,9}MiB|N/A)\s*\|\s*$")
# nvidia-smi -L: "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-…)"
# nvidia-smi -L: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)". Read in two anchored parts, the head and the
# "(UUID: …)" tail, not as one pattern: "GPU 0:\s+(.+?)\s+\(UUID" lets three quantifiers share a run of spaces,
# and a pasted line of a few thousand spaces took minutes (cubic).
_LIST_GPU_HEAD = lazy_compile(r"\s*GPU\s+(?P<index>\d{1,3}):(?P<rest>.*)")
_LIST_GPU_UUID = lazy_compile(r"\(UUID:\s*(?P<uuid>GPU-[0-9a-fA-F-]{8,64})\)\s*")


def _list_gpu(line: str) -> tuple[int, str, str] | None:
    """(index, name, uuid) of an `nvidia-smi -L` line; None for any other line. Linear in the line's length.

    The name is what lies between the blanks after the colon and the blanks before "(UUID:" (both required);
    the tail has no "(UUID:" inside it, so only the last one can end the line."""
    head = _LIST_GPU_HEAD.fullmatch(line)
    if head is None:
        return None
    rest = head.group("rest")
    cut = rest.rfind("(UUID:")
    tail = _LIST_GPU_UUID.fullmatch(rest, cut) if cut >= 0 else None
    if tail is None:
        return None
    middle = rest[:cut]
    name = middle.strip()
    if not (middle[:1].isspace() and middle[-1:].isspace()):
        return None
    if not name:  # only blanks: the pattern this replaces took the last blank but one as the name
        if len(middle) < 3:
            return None
        name = middle[-2]
    return int(head.group("index")), name, tail.group("uuid")
# nvidia-smi -q: "GPU 00000000:01:00.0" opens a GPU; "    Product Name    : X" are its fields.
_Q_GPU = lazy_compile(rf"^GPU\s+(?P<bus>{_PCI_ID})\s*$")
_Q_FIELD = lazy_compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z][^:\n]{0,80}?)\s*:(?:\s(?P<value>.*))?$")
_Q_SECTION = lazy_compile(r"^(?P<indent>\s+)(?P<key>[A-Za-z][^:\n]{0,80}?)\s*$")
_NO_DEVICES = lazy_compile(r"^\s*No devices were found\s*$", re.MULTILINE)
_SMI_FAILURE = lazy_compile(
    r"^\s*(?:No devices were found|NVIDIA-SMI has failed|Failed to initialize NVML|Unable to determine the device"
    r"|NVML library version|Driver/library version mismatch)")


def _empty_smi_text() -> dict[str, Any]:
    return {"driver_version": None, "cuda_version": None, "smi_version": None, "no_devices": False, "gpus": [],
            "mig_devices": [], "processes": []}


def _smi_gpu_text(index: int | None) -> dict[str, Any]:
    return {"index": index, "name": None, "name_truncated": None, "uuid": None, "pci_bus_id": None,
            "memory_used_mib": None, "memory_total_mib": None, "temperature_c": None, "power_draw_w": None,
            "power_limit_w": None, "utilization_pct": None, "persistence_mode": None, "driver_model": None,
            "mig_mode": None}


def _cell(value: str | None, suffix: str = "") -> str | None:
    """A table cell's value without its unit; None for N/A, ERR! and the like."""
    if value is None or value in ("N/A", "ERR!") or value.lower() in _ABSENT:
        return None
    return value[: -len(suffix)] if suffix and value.endswith(suffix) else value


@_never_raise(_empty_smi_text)
def parse_nvidia_smi_text(text: str) -> dict[str, Any]:
    """Plain `nvidia-smi`, `nvidia-smi -q` (or -a) and `nvidia-smi -L` as printed or pasted.

    -> {"driver_version", "cuda_version", "smi_version", "no_devices", "gpus", "mig_devices", "processes"}.
    A value the tool could not give (N/A, ERR!, [Not Supported], [Insufficient Permissions]) is None;
    so is one whose line or cell was cut short (a number without its unit, a row without its closing
    bar). Names the table shortened ("NVIDIA GeForce RTX 3060 ...") keep their dots and are flagged
    name_truncated. On WSL the banner's NVIDIA-SMI version is not the Windows driver's: "Driver
    Version" is the one read as driver_version.
    """
    result = _empty_smi_text()
    if not isinstance(text, str):
        return result
    text = _unframe(text[:2_000_000])
    driver = re.search(rf"Driver Version\s*:\s*({_VERSION})(?=[\s|])", text)
    if driver:
        result["driver_version"] = driver.group(1)
    cuda = re.search(r"CUDA Version\s*:\s*(\d{1,4}\.\d{1,4})(?=[\s|])", text)
    if cuda:
        result["cuda_version"] = cuda.group(1)
    smi = re.search(rf"NVIDIA-SMI\s+({_VERSION})(?=[\s|])", text)
    if smi:
        result["smi_version"] = smi.group(1)
    result["no_devices"] = bool(_NO_DEVICES.search(text))
    gpus: list[dict[str, Any]] = result["gpus"]
    lines = text.split("\n")
    _read_table(lines, result)
    if not gpus:
        _read_q(lines, gpus)
    if not gpus:
        for line in lines:
            listed = _list_gpu(line)
            if listed:
                gpu = _smi_gpu_text(listed[0])
                gpu["name"], gpu["uuid"], gpu["name_truncated"] = listed[1], listed[2], False
                gpus.append(gpu)
    return result


def _read_table(lines: list[str], result: dict[str, Any]) -> None:
    gpus: list[dict[str, Any]] = result["gpus"]
    last: dict[str, Any] | None = None
    mig_of: dict[str, Any] | None = None  # the GPU whose MIG M. row may come next
    section = "gpus"
    for line in lines:
        low = line.lower()
        if "mig devices:" in low:
            section = "mig"
        elif "processes:" in low:
            section = "processes"
        m = _TABLE_GPU.match(line) if section == "gpus" else None
        if m:
            last = _smi_gpu_text(int(m.group("index")))
            name = m.group("name").strip()
            mode = m.group("mode")
            last["name"] = name
            last["name_truncated"] = name.endswith("...")
            last["pci_bus_id"] = m.group("bus")
            if mode in ("WDDM", "TCC", "MCDM"):
                last["driver_model"] = mode
            elif mode in ("On", "Off"):
                last["persistence_mode"] = mode == "On"
            gpus.append(last)
            continue
        mm = _TABLE_MIG_MODE.match(line) if mig_of is not None else None
        if mm and mig_of is not None:
            mig_of["mig_mode"] = _flag(mm.group("mig"))
        mig_of = None
        s = _TABLE_STATS.match(line) if section == "gpus" and last is not None else None
        if s and last is not None:
            mig_of = last
            temp, power, cap = _cell(s.group("temp"), "C"), _cell(s.group("power"), "W"), _cell(s.group("cap"), "W")
            last["temperature_c"] = int(temp) if temp else None
            last["power_draw_w"] = float(power) if power else None
            last["power_limit_w"] = float(cap) if cap else None
            if s.group("total"):
                last["memory_used_mib"], last["memory_total_mib"] = int(s.group("used")), int(s.group("total"))
            util = _cell(s.group("util"), "%")
            last["utilization_pct"] = int(util) if util else None
            last = None
            continue
        mig = _TABLE_MIG.match(line) if section == "mig" else None
        if mig:
            result["mig_devices"].append({
                "gpu": int(mig.group("gpu")), "gi": int(mig.group("gi")), "ci": int(mig.group("ci")),
                "index": int(mig.group("mig")), "memory_used_mib": int(mig.group("used")),
                "memory_total_mib": int(mig.group("total"))})
            continue
        p = _TABLE_PROCESS.match(line) if section == "processes" else None
        if p:
            name = p.group("name").strip()
            used = _cell(p.group("used"), "MiB")
            result["processes"].append({
                "gpu": int(p.group("gpu")), "pid": int(p.group("pid")), "type": p.group("type"),
                "name": None if not name or name.lower() in _ABSENT else name,
                "used_mib": int(used) if used else None})


# -q keys (lower-cased, joined with "/" under their section) -> (gpu field, how to read the value)
_Q_KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "product name": ("name", lambda v: v),
    "gpu uuid": ("uuid", lambda v: v),
    "persistence mode": ("persistence_mode", lambda v: _flag(v)),
    "mig mode/current": ("mig_mode", lambda v: _flag(v)),
    "driver model/current": ("driver_model", lambda v: v),
    "fb memory usage/total": ("memory_total_mib", lambda v: _unit_int(v, "MiB")),
    "fb memory usage/used": ("memory_used_mib", lambda v: _unit_int(v, "MiB")),
    "temperature/gpu current temp": ("temperature_c", lambda v: _unit_int(v, "C")),
    "power readings/power draw": ("power_draw_w", lambda v: _unit_float(v, "W")),
    "gpu power readings/power draw": ("power_draw_w", lambda v: _unit_float(v, "W")),
    "gpu power readings/instant power draw": ("power_draw_w", lambda v: _unit_float(v, "W")),
    "power readings/power limit": ("power_limit_w", lambda v: _unit_float(v, "W")),
    "gpu power readings/current power limit": ("power_limit_w", lambda v: _unit_float(v, "W")),
    "utilization/gpu": ("utilization_pct", lambda v: _unit_int(v, "%")),
}


def _unit_int(value: str, unit: str) -> int | None:
    m = re.fullmatch(rf"(\d{{1,12}})\s*{re.escape(unit)}", value.strip())
    return int(m.group(1)) if m else None


def _unit_float(value: str, unit: str) -> float | None:
    m = re.fullmatch(rf"(\d{{1,9}}(?:[.,]\d{{1,6}})?)\s*{re.escape(unit)}", value.strip())
    return float(m.group(1).replace(",", ".")) if m else None


def _read_q(lines: list[str], gpus: list[dict[str, Any]]) -> None:
    """`nvidia-smi -q`: each "GPU <bus id>" block, its fields read by section path.

    A line is taken only when the next line exists: the last line of a cut-short paste may be cut
    inside its value ("Total : 40" of "40960 MiB"), and what is not known stays None.
    """
    gpu: dict[str, Any] | None = None
    sections: list[tuple[int, str]] = []
    base = 0  # the GPU line's own indentation (a paste may indent everything)
    for at, line in enumerate(lines):
        line = line.replace("\t", "    ")
        indent = len(line) - len(line.lstrip())
        m = _Q_GPU.match(line.strip())
        if m:
            gpu = _smi_gpu_text(len(gpus))
            gpu["pci_bus_id"], gpu["name_truncated"] = m.group("bus"), False
            gpus.append(gpu)
            sections, base = [], indent
            continue
        if gpu is None or not line.strip():
            continue
        if indent <= base:
            gpu = None
            continue
        while sections and sections[-1][0] >= indent:
            sections.pop()
        f = _Q_FIELD.match(line)
        if f and f.group("value") is not None and at + 1 < len(lines):
            key = "/".join([s for _i, s in sections] + [f.group("key").strip().lower()])
            known = _Q_KEYS.get(key)
            value = _clean(f.group("value"))
            if known and value is not None and gpu[known[0]] is None:
                gpu[known[0]] = known[1](value)
            continue
        s = _Q_SECTION.match(line)
        if s:
            sections.append((indent, s.group("key").strip().lower()))


# --- nvidia-smi --query-gpu=... --format=csv -----------------------------------------------------

_CSV_UNIT = lazy_compile(r"^(?P<name>[^\[\]]+?)\s*\[(?P<unit>[^\]]{1,16})\]\s*$")


@_never_raise(list)
def parse_nvidia_smi_csv(text: str, fields: list[str] | None = None) -> list[dict[str, str | None]]:
    """`nvidia-smi --query-gpu=A,B --format=csv[,noheader][,nounits]` -> one dict per complete row.

    Keys are the query's field names (from the header, without its " [unit]"; or `fields` for
    noheader output); values are strings with the unit dropped ("83.92 W" -> "83.92"), a decimal
    comma read as a point, and None for N/A, [N/A], [Not Supported], [Insufficient Permissions].
    A row with fewer cells than the header (cut short) is left out.
    """
    if not isinstance(text, str):
        return []
    lines = [line.strip() for line in _unframe(text).split("\n")]
    lines = [line for line in lines if line]
    header = list(fields) if fields else None
    units: list[str | None] = [None] * len(header) if header else []
    rows: list[dict[str, str | None]] = []
    for line in lines:
        if _SMI_FAILURE.match(line):
            continue  # "No devices were found", "Failed to initialize NVML: …": no row, whatever the columns
        cells = [c.strip() for c in re.split(r",\s+", line)]
        if len(cells) == 1 and header and len(header) > 1:
            cells = [c.strip() for c in line.split(",")]
        if header is None:
            if not all(re.fullmatch(r"[a-z_][a-z0-9_.]{0,63}(?:\s*\[[^\]]{1,16}\])?", c) for c in cells):
                continue  # a prompt or the command line before the header
            header, units = [], []
            for c in cells:
                m = _CSV_UNIT.match(c)
                header.append(m.group("name") if m else c)
                units.append(m.group("unit") if m else None)
            continue
        if len(cells) != len(header) or any(
                u and c.lower() not in _ABSENT and not c.endswith(u) for u, c in zip(units, cells, strict=True)):
            continue  # cut short: a cell missing, or a number without the unit the header declares
        row: dict[str, str | None] = {}
        for name, unit, cell in zip(header, units, cells, strict=True):
            row[name] = _csv_value(cell, unit)
        rows.append(row)
    return rows


def _csv_value(cell: str, unit: str | None) -> str | None:
    cell = cell.strip()
    if not cell or cell.lower() in _ABSENT:
        return None
    if unit and cell.endswith(unit):
        cell = cell[: -len(unit)].strip()
    if re.fullmatch(r"\d{1,9},\d{1,6}", cell):
        cell = cell.replace(",", ".")
    return cell


# --- deviceQuery (CUDA samples) and jax.print_environment_info() -----------------------------------

_DQ_DEVICE = lazy_compile(r'^\s*Device\s+(?P<index>\d{1,3}):\s+"(?P<name>[^"\n]{1,200})"\s*$')
_DQ_VERSIONS = lazy_compile(
    r"CUDA Driver Version\s*/\s*Runtime Version\s+(?P<driver>\d{1,3}\.\d{1,2})\s*/\s*(?P<runtime>\d{1,3}\.\d{1,2})\s*$")
_DQ_CC = lazy_compile(r"CUDA Capability Major/Minor version number:\s+(?P<cc>\d{1,2}\.\d{1,2})\s*$")
_DQ_MEMORY = lazy_compile(r"Total amount of global memory:\s+(?P<mib>\d{1,9})\s+MBytes\b")


def _empty_device_query() -> dict[str, Any]:
    return {"device_count": None, "devices": [], "result": None}


@_never_raise(_empty_device_query)
def parse_device_query(text: str) -> dict[str, Any]:
    """The CUDA samples' `deviceQuery` -> {"device_count", "devices", "result"}.

    Each device: {"index", "name", "driver_cuda" (the newest CUDA the driver supports), "runtime_cuda"
    (the CUDA runtime deviceQuery was built with), "compute_capability", "memory_total_mib"}. "result"
    is "PASS" or "FAIL" from the closing "Result = …" line, None when the output stops before it. A
    line is read only once it is complete (followed by a line break).
    """
    result = _empty_device_query()
    if not isinstance(text, str):
        return result
    lines = _unframe(text).split("\n")
    lines = lines[:-1]  # the text after the last line break may be a line cut short
    device: dict[str, Any] | None = None
    for line in lines:
        m = re.search(r"Detected\s+(\d{1,3})\s+CUDA Capable device", line)
        if m:
            result["device_count"] = int(m.group(1))
        if re.search(r"no CUDA-capable device is detected|cudaGetDeviceCount returned", line):
            result["device_count"] = 0
        m = re.search(r"Result\s*=\s*(PASS|FAIL)\b", line)
        if m:
            result["result"] = m.group(1)
        d = _DQ_DEVICE.match(line)
        if d:
            device = {"index": int(d.group("index")), "name": d.group("name").strip(), "driver_cuda": None,
                      "runtime_cuda": None, "compute_capability": None, "memory_total_mib": None}
            result["devices"].append(device)
            continue
        if device is None:
            continue
        v = _DQ_VERSIONS.search(line)
        if v:
            device["driver_cuda"], device["runtime_cuda"] = v.group("driver"), v.group("runtime")
        c = _DQ_CC.search(line)
        if c:
            device["compute_capability"] = c.group("cc")
        mem = _DQ_MEMORY.search(line)
        if mem:
            device["memory_total_mib"] = int(mem.group("mib"))
    return result


_JAX_FIELD = lazy_compile(r"^(?P<key>jax\.devices|jaxlib|jax|numpy|python|process_count)\b(?P<rest>[^\n]*)$")
_JAX_DEVICES = lazy_compile(r"^\s*\((?P<total>\d{1,6}) total, (?P<local>\d{1,6}) local\):\s*\[(?P<list>.*)\]\s*$")


def _empty_jax_info() -> dict[str, Any]:
    return {"jax": None, "jaxlib": None, "numpy": None, "python": None, "device_count": None,
            "local_device_count": None, "device_kinds": [], "process_count": None, "nvidia_smi": None}


@_never_raise(_empty_jax_info)
def parse_jax_environment_info(text: str) -> dict[str, Any]:
    """`jax.print_environment_info()` -> versions, devices and the `nvidia-smi` it appends.

    "device_kinds" are the device classes listed ("CpuDevice", "GpuDevice", "CudaDevice", "RocmDevice"),
    deduplicated in order; "nvidia_smi" is parse_nvidia_smi_text of what follows "$ nvidia-smi" (None
    when JAX printed none, as on CPU). Lines cut short (no line break after them) are not read.
    """
    result = _empty_jax_info()
    if not isinstance(text, str):
        return result
    text = _unframe(text)
    head, smi_mark, smi = text.partition("$ nvidia-smi")
    complete = head.split("\n")
    if not smi_mark:
        complete = complete[:-1]
    for line in complete:
        line = re.sub(r"^(?:>>>|\.\.\.)\s+", "", line.strip())
        m = _JAX_FIELD.match(line)
        if not m:
            continue
        key, rest = m.group("key"), m.group("rest")
        if key == "jax.devices":
            d = _JAX_DEVICES.match(rest)
            if d:
                result["device_count"], result["local_device_count"] = int(d.group("total")), int(d.group("local"))
                kinds = re.findall(r"\b([A-Z][A-Za-z]{0,30}Device)\(", d.group("list"))
                result["device_kinds"] = list(dict.fromkeys(kinds))
            continue
        value = rest.lstrip(":").strip() if rest.startswith(":") else None
        if not value:
            continue
        if key == "process_count":
            result["process_count"] = int(value) if re.fullmatch(r"\d{1,6}", value) else None
        elif key == "python":
            found = re.match(r"(\d{1,2}\.\d{1,3}\.\d{1,3})\b", value)
            result["python"] = found.group(1) if found else None
        elif re.fullmatch(r"\d{1,4}(?:\.\d{1,6}){1,3}(?:[.+\-]?\w{1,40})?", value):
            result[key] = value
    if smi_mark:
        result["nvidia_smi"] = parse_nvidia_smi_text(smi)
    return result


# --- nvidia-smi topo -m --------------------------------------------------------------------------

_TOPO_ROW_NAME = lazy_compile(r"^(?:GPU\d{1,3}|NIC\d{1,3}|mlx\d_\d{1,3}|[a-z][a-z0-9_]{0,31})$")


def _empty_topo() -> dict[str, Any]:
    return {"columns": [], "links": {}, "cpu_affinity": {}, "numa_affinity": {}}


@_never_raise(_empty_topo)
def parse_nvidia_smi_topo(text: str) -> dict[str, Any]:
    """`nvidia-smi topo -m` -> {"columns", "links", "cpu_affinity", "numa_affinity"}.

    "links" maps each row device to {column device: link} ("NV12", "PIX", "SYS", …; "X" for itself);
    the affinity columns give the CPU list and NUMA node as printed, None for N/A. Cells are separated
    by tabs (newer drivers, with an empty cell before "GPU NUMA ID") or runs of spaces (older ones).
    A row with fewer cells than the header, or the last line when it has no line break, is cut short
    and left out.
    """
    result = _empty_topo()
    if not isinstance(text, str):
        return result
    lines = _unframe(text).split("\n")[:-1]  # after the last line break: possibly cut
    header: list[str] | None = None
    for line in lines:
        cells = [c.strip() for c in re.split(r"\t+| {2,}", line.strip()) if c.strip()]
        if not cells:
            if header:
                break  # the blank line before "Legend:"
            continue
        if header is None:
            if cells[0].startswith("GPU0") or (cells[0] == "GPU0" and len(cells) > 1):
                header = cells
                result["columns"] = [c for c in cells if not c.endswith(("Affinity", "NUMA ID"))]
            continue
        name, values = cells[0], cells[1:]
        if not _TOPO_ROW_NAME.match(name) or len(values) != len(header):
            continue
        links: dict[str, str] = {}
        for column, value in zip(header, values, strict=True):
            if column == "CPU Affinity":
                result["cpu_affinity"][name] = None if value.lower() in _ABSENT else value
            elif column == "NUMA Affinity":
                result["numa_affinity"][name] = None if value.lower() in _ABSENT else value
            elif column in result["columns"]:
                links[column] = value
        result["links"][name] = links
    return result


# --- nvidia-smi -q -x ---------------------------------------------------------------------------

# How nvidia-smi says "no value", across driver generations.
_ABSENT = frozenset(
    {
        "n/a",
        "[n/a]",
        "not supported",
        "[not supported]",
        "unknown error",
        "[unknown error]",
        "not available",
        "none",
        "insufficient permissions",
        "[insufficient permissions]",
        "requested functionality has been deprecated",
        "not found",
        "[not found]",
        "unknown",
        "[unknown]",
        "gpu is lost",
        "[gpu is lost]",
        "[gpu requires reset]",
    }
)
_THROTTLE_BLOCKS = (
    ("clocks_event_reasons", "clocks_event_reason_"),
    ("clocks_throttle_reasons", "clocks_throttle_reason_"),
)


def _empty_smi() -> dict[str, Any]:
    return {"driver_version": None, "cuda_version": None, "gpus": []}


@_never_raise(_empty_smi)
def parse_nvidia_smi_xml(text: str) -> dict[str, Any]:
    """`nvidia-smi -q -x` -> {"driver_version", "cuda_version", "gpus": [gpu dict, ...]}.

    Reads the layouts of drivers from the 375 era (single_bit/double_bit ECC, power_readings,
    clocks_throttle_reasons) to R570+ (clocks_event_reasons, gpu_power_readings with
    instant_power_draw). Output cut short (a timeout, a full pipe) still yields the <gpu>
    elements that were complete. Input declaring entities is refused: nvidia-smi never
    writes them, and an entity bomb must not hang the doctor.
    """
    result = _empty_smi()
    if not isinstance(text, str) or re.search(r"<!ENTITY", text, re.IGNORECASE):
        return result
    # ElementTree does not fetch DTDs, but the DOCTYPE line is useless here, so drop it; anything
    # DOCTYPE-like that is left (an internal subset) is not what nvidia-smi writes.
    text = re.sub(r"<!DOCTYPE[^>\[]*>", "", _xml_start(_unframe(text)), count=1)
    if "<!DOCTYPE" in text.upper():
        return result
    children = _root_children(text)
    if children is None:
        return result
    gpus: list[dict[str, Any]] = []
    for child in children:
        if child.tag == "driver_version":
            result["driver_version"] = _version_or_none(_clean(child.text) or "")
        elif child.tag == "cuda_version":
            # "Not Found" (no libcuda next to nvidia-smi), "N/A": unknown, never a version.
            cuda = _clean(child.text) or ""
            result["cuda_version"] = cuda if re.fullmatch(r"\d{1,3}\.\d{1,3}", cuda) else None
        elif child.tag == "gpu":
            gpus.append(_smi_gpu(child, len(gpus)))
    result["gpus"] = gpus
    return result


def _xml_start(text: str) -> str:
    """The document from its first "<?xml" or "<nvidia_smi_log": what precedes it (whitespace, a BOM,
    the command line or a markdown fence of a paste) is framing, and expat refuses an XML
    declaration that is not the first thing in the input."""
    starts = [at for at in (text.find("<?xml"), text.find("<nvidia_smi_log")) if at >= 0]
    return text[min(starts):] if starts else text


def _root_children(text: str) -> list[ET.Element] | None:
    """The complete children of <nvidia_smi_log>, in order; None if the text is not such a log."""
    import xml.etree.ElementTree as ET  # only when nvidia-smi's XML is read (no NVML answer)

    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    try:
        parser.feed(text)
        parser.close()
    except (ET.ParseError, ValueError, UnicodeError):
        pass  # the events read before the error are still queued
    children: list[ET.Element] = []
    depth = 0
    try:
        for item in parser.read_events():
            # Only "start" and "end" were asked for: each event is (name, element); the namespace
            # events' other shapes never come.
            if len(item) != 2 or not isinstance(item[1], ET.Element):
                continue
            event, elem = item
            if event == "start":
                depth += 1
                if depth == 1 and elem.tag != "nvidia_smi_log":
                    return None
            else:
                if depth == 2:
                    children.append(elem)
                depth -= 1
    except ET.ParseError:
        pass  # cut short or corrupt: keep what was complete before the damage
    return children if children or "<nvidia_smi_log" in text else None


def _smi_gpu(gpu: ET.Element, index: int) -> dict[str, Any]:
    pci = gpu.find("pci")
    link = pci.find("pci_gpu_link_info") if pci is not None else None
    return {
        "index": index,
        "name": _text(gpu, "product_name"),
        "uuid": _text(gpu, "uuid"),
        "pci_bus_id": _text(gpu, "pci/pci_bus_id") or _clean(gpu.get("id")),
        "pci_device_id": _text(gpu, "pci/pci_device_id"),
        # nvidia-smi -q -x has no compute capability; only say one when the XML does.
        "compute_capability": _text(gpu, "compute_cap") or _text(gpu, "compute_capability"),
        "memory_total_mib": _leading_int(_text(gpu, "fb_memory_usage/total")),
        "memory_used_mib": _leading_int(_text(gpu, "fb_memory_usage/used")),
        "mig_mode": _flag(_text(gpu, "mig_mode/current_mig")),
        "persistence_mode": _flag(_text(gpu, "persistence_mode")),
        "ecc_uncorrected": _ecc_uncorrected(gpu.find("ecc_errors/volatile")),
        # Drivers before R450 or so name the flag <pending_blacklist>; later ones write both.
        "retired_pages_pending": _first(_flag(_text(gpu, "retired_pages/pending_retirement")),
                                        _flag(_text(gpu, "retired_pages/pending_blacklist"))),
        "remapped_rows_pending": _remapped_pending(gpu.find("remapped_rows")),
        "temperature_c": _leading_int(_text(gpu, "temperature/gpu_temp")),
        "power_draw_w": _power_draw(gpu),
        "utilization_pct": _leading_int(_text(gpu, "utilization/gpu_util")),
        "pcie_gen_current": _leading_int(_text(link, "pcie_gen/current_link_gen")),
        "pcie_gen_max": _leading_int(_text(link, "pcie_gen/max_link_gen")),
        "pcie_width_current": _leading_int(_text(link, "link_widths/current_link_width")),
        "pcie_width_max": _leading_int(_text(link, "link_widths/max_link_width")),
        "throttle_reasons": _throttle_reasons(gpu),
        "processes": [_smi_process(p) for p in gpu.findall("processes/process_info")],
        "mig_devices": [_smi_mig_device(m) for m in gpu.findall("mig_devices/mig_device")],
        "source": "nvidia-smi",
    }


def _first(*values: bool | None) -> bool | None:
    """True if any says so, False if one says no and none yes, None when none knows."""
    known = [v for v in values if v is not None]
    return any(known) if known else None


def _clean(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not value or value.lower() in _ABSENT:
        return None
    return value


def _text(elem: ET.Element | None, path: str) -> str | None:
    if elem is None:
        return None
    found = elem.find(path)
    return None if found is None else _clean(found.text)


def _leading_int(value: str | None) -> int | None:
    """ "81920 MiB" -> 81920, "16x" -> 16, "45 C" -> 45."""
    if value is None:
        return None
    match = re.match(r"\s*(\d{1,15})", value)
    return int(match.group(1)) if match else None


def _leading_float(value: str | None) -> float | None:
    if value is None:
        return None
    match = re.match(r"\s*(\d{1,12}(?:\.\d{1,9})?)", value)
    return float(match.group(1)) if match else None


def _flag(value: str | None) -> bool | None:
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered in ("enabled", "yes", "active", "on", "true"):
        return True
    if lowered in ("disabled", "no", "not active", "off", "false"):
        return False
    return None


def _ecc_uncorrected(volatile: ET.Element | None) -> int | None:
    """Volatile uncorrectable ECC errors, summed over the locations the driver reports.

    Pre-Volta drivers count by bit width: <double_bit><total> is the uncorrectable count. Later
    ones count by location (sram_uncorrectable, dram_uncorrectable, and in R570+ the SRAM split
    into _parity and _secded); every leaf named *uncorrectable* is summed.
    """
    if volatile is None:
        return None
    double_bit = volatile.find("double_bit")
    if double_bit is not None:
        return _leading_int(_text(double_bit, "total"))
    values = [
        _leading_int(_clean(leaf.text)) for leaf in volatile.iter() if "uncorrectable" in leaf.tag and len(leaf) == 0
    ]
    counted = [v for v in values if v is not None]
    return sum(counted) if counted else None


def _remapped_pending(remapped: ET.Element | None) -> bool | None:
    if remapped is None:
        return None
    value = _text(remapped, "remapped_row_pending")
    if value is None:
        return None
    count = _leading_int(value)
    return count > 0 if count is not None else _flag(value)


def _power_draw(gpu: ET.Element) -> float | None:
    # R535+ moved the block to gpu_power_readings; R570+ dropped power_draw for instant_power_draw.
    for path in (
        "power_readings/power_draw",
        "gpu_power_readings/power_draw",
        "gpu_power_readings/instant_power_draw",
        "gpu_power_readings/average_power_draw",
    ):
        value = _leading_float(_text(gpu, path))
        if value is not None:
            return value
    return None


def _throttle_reasons(gpu: ET.Element) -> list[str]:
    """Names of the Active clock-event reasons, minus gpu_idle (an idle GPU is not a problem)."""
    for block_tag, prefix in _THROTTLE_BLOCKS:
        block = gpu.find(block_tag)
        if block is None:
            continue
        reasons = []
        for reason in block:
            if (reason.text or "").strip().lower() != "active":
                continue
            name = reason.tag.removeprefix(prefix)
            if name != "gpu_idle":
                reasons.append(name)
        return reasons
    return []


def _smi_process(proc: ET.Element) -> dict[str, Any]:
    return {
        "pid": _leading_int(_text(proc, "pid")),
        "name": (proc.findtext("process_name") or "").strip() or None,
        "used_mib": _leading_int(_text(proc, "used_memory")),
    }


def _smi_mig_device(mig: ET.Element) -> dict[str, Any]:
    return {
        "index": _leading_int(_text(mig, "index")),
        "uuid": _text(mig, "uuid"),
        "name": _text(mig, "name"),
        "memory_total_mib": _leading_int(_text(mig, "fb_memory_usage/total")),
    }


# --- frameworks --------------------------------------------------------------------------------

_ASSIGNMENT = lazy_compile(r"^([A-Za-z_]\w{0,63})[ \t]*(?::[^=\n]*)?=([^\n]*)$", re.MULTILINE)


def _assignments(text: str) -> dict[str, str | None]:
    """Module-level `name = 'literal'` / `name: T = None` lines -> {name: value}; first one wins."""
    found: dict[str, str | None] = {}
    for name, raw in _ASSIGNMENT.findall(text):
        raw = raw.strip()
        if name in found:
            continue
        literal = re.fullmatch(r"""(['"])(.*)\1""", raw)
        if literal:
            found[name] = literal.group(2)
        elif raw == "None":
            found[name] = None
        elif raw in ("True", "False"):
            found[name] = raw
    return found


def _empty_torch() -> dict[str, Any]:
    return {"version": None, "cuda": None, "hip": None, "git_version": None}


@_never_raise(_empty_torch)
def parse_torch_version_py(text: str) -> dict[str, Any]:
    """torch/version.py -> {"version": "2.13.0+cpu", "cuda": "12.1" | None, "hip", "git_version"}.

    cuda is None in CPU and ROCm builds: that None is the fact "this wheel cannot use CUDA".
    """
    result = _empty_torch()
    if not isinstance(text, str):
        return result
    values = _assignments(text)
    result["version"] = values.get("__version__")
    result["cuda"] = values.get("cuda")
    result["hip"] = values.get("hip")
    result["git_version"] = values.get("git_version")
    return result


def _empty_tf() -> dict[str, Any]:
    return {"cuda": None, "cudnn": None, "is_cuda_build": None}


@_never_raise(_empty_tf)
def parse_tf_build_info(text: str) -> dict[str, Any]:
    """tensorflow/python/platform/build_info.py -> {"cuda", "cudnn", "is_cuda_build"}.

    TF >= 2.3 writes `build_info = collections.OrderedDict([('cuda_version', '12.2'), ...])`;
    earlier Windows builds wrote module-level `cuda_version_number = '10.0'` lines.
    """
    result = _empty_tf()
    if not isinstance(text, str):
        return result
    info = _tf_build_info_dict(text)
    if info is not None:
        result["cuda"] = _str_or_none(info.get("cuda_version"))
        result["cudnn"] = _str_or_none(info.get("cudnn_version"))
        is_cuda = info.get("is_cuda_build")
        result["is_cuda_build"] = is_cuda if isinstance(is_cuda, bool) else None
        return result
    values = _assignments(text)
    result["cuda"] = values.get("cuda_version_number") or None
    result["cudnn"] = values.get("cudnn_version_number") or None
    is_cuda = values.get("is_cuda_build")
    result["is_cuda_build"] = {"True": True, "False": False}.get(is_cuda) if is_cuda else None
    return result


def _tf_build_info_dict(text: str) -> dict[str, Any] | None:
    match = re.search(r"^build_info[ \t]*=([^\n]*)", text, re.MULTILINE)
    if not match:
        # What `print(tf.sysconfig.get_build_info())` shows (a dict or OrderedDict repr, pprint-wrapped
        # over lines) rather than the module's source: the same pairs, read one by one.
        return _tf_build_info_pairs(_unframe(text)) or None
    rhs = match.group(1).strip()
    for wrapper in ("collections.OrderedDict(", "OrderedDict(", "dict("):
        if rhs.startswith(wrapper) and rhs.endswith(")"):
            rhs = rhs[len(wrapper) : -1]
            break
    literal: Any = None
    if len(rhs) <= 100_000:
        try:
            literal = ast.literal_eval(rhs)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            literal = None
    if isinstance(literal, dict):
        return literal
    if isinstance(literal, list):
        return dict(p for p in literal if isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str))
    # Cut short or reformatted: pick the pairs we need one by one.
    return _tf_build_info_pairs(text[match.start() : match.start() + 100_000])


def _tf_build_info_pairs(text: str) -> dict[str, Any]:
    pairs: dict[str, Any] = {}
    for key, raw in re.findall(
        r"""['"](cuda_version|cudnn_version|is_cuda_build)['"]\s*[,:]\s*('[^'\n]*'|"[^"\n]*"|True|False|None)"""
        r"""(?=\s*[,)}\]])""",  # the value's closing delimiter: a pair cut inside "True" is no pair
        text[:100_000],
    ):
        pairs.setdefault(key, {"True": True, "False": False, "None": None}.get(raw, raw[1:-1]))
    return pairs


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# --- system ------------------------------------------------------------------------------------

_OS_RELEASE_KEY = lazy_compile(r"[A-Za-z_][A-Za-z0-9_]*")


@_never_raise(dict)
def parse_os_release(text: str) -> dict[str, str]:
    """/etc/os-release -> {KEY: value}, undoing the shell quoting os-release(5) allows."""
    result: dict[str, str] = {}
    if not isinstance(text, str):
        return result
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, raw = line.partition("=")
        key = key.strip()
        if not _OS_RELEASE_KEY.fullmatch(key):
            continue
        result[key] = _shell_value(raw.strip())
    return result


def _shell_value(raw: str) -> str:
    try:
        return " ".join(shlex.split(raw))
    except ValueError:
        # An unbalanced quote: keep the text, minus the quote characters at its ends.
        return raw.strip("\"'")


_XID = lazy_compile(
    r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{1,2}:[0-9A-Fa-f]{1,2}(?:\.[0-9A-Fa-f])?)\):?"
    r"[ \t]*(\d{1,5})[ \t]*,[ \t]*([^\r\n]*)"  # the comma: a line cut inside the code is no event
)
# R470+ insert "pid=1234, name=python, " (or "pid='<unknown>', name=<unknown>, ") before the text.
_XID_PID = lazy_compile(r"^pid=(?:'[^']*'|[^,\s]*)\s*,\s*")
_XID_NAME = lazy_compile(r"^name=[^,]*,\s*")


@_never_raise(list)
def parse_xid_lines(text: str) -> list[dict[str, Any]]:
    """Kernel log text -> [{"xid": 79, "pci_bus_id": "0000:3b:00", "message": "..."}], in order.

    Reads dmesg, journalctl and syslog lines, with or without timestamps, in the old
    "NVRM: Xid (PCI:0000:01:00): 31, Ch 00000013, ..." and new
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus." forms.
    """
    if not isinstance(text, str):
        return []
    events = []
    for match in _XID.finditer(_unframe(text)):
        message = _XID_PID.sub("", match.group(3).strip(), count=1)
        message = _XID_NAME.sub("", message, count=1).strip()
        events.append({"xid": int(match.group(2)), "pci_bus_id": match.group(1), "message": message or None})
    return events


_LDCONFIG_LINE = lazy_compile(r"^[ \t]*(\S+)[ \t]+\(([^)\n]*)\)[ \t]*=>([^\n]*)$", re.MULTILINE)


@_never_raise(_no_pairs)
def parse_ldconfig_p(text: str) -> list[tuple[str, str]]:
    """`ldconfig -p` -> [(soname, path)], cache order; the header and "(libc6,x86-64)" flags dropped."""
    if not isinstance(text, str):
        return []
    entries = ((name, path.strip()) for name, _flags, path in _LDCONFIG_LINE.findall(text))
    return [(name, path) for name, path in entries if path]


@_never_raise(_none)
def lib_version_from_name(name: str) -> str | None:
    """The version a shared library's file name carries after ".so.".

    "libcudart.so.12.2.140" -> "12.2.140", "libcudnn.so.9" -> "9", "libcudart.so" -> None.
    """
    if not isinstance(name, str):
        return None
    base = name.strip().rsplit("/", 1)[-1]
    match = re.search(r"\.so\.(\d{1,9}(?:\.\d{1,9}){0,4})$", base)
    return match.group(1) if match else None


@_never_raise(_no_pairs)
def parse_dpkg_status(text: str) -> list[tuple[str, str]]:
    """/var/lib/dpkg/status -> [(package, version)] for packages that are "install ok installed".

    Removed-but-not-purged packages ("deinstall ok config-files") and half-installed ones keep a
    stanza with a Version; they are not what the machine runs, so they are skipped.
    """
    if not isinstance(text, str):
        return []
    packages = []
    for stanza in re.split(r"\n[ \t]*\n", text.replace("\r\n", "\n")):
        fields: dict[str, str] = {}
        for line in stanza.split("\n"):
            if not line or line[0] in " \t":
                continue  # continuation lines belong to Description and the like
            key, sep, value = line.partition(":")
            if sep:
                fields.setdefault(key.strip().lower(), value.strip())
        status = " ".join(fields.get("status", "").split())
        if status == "install ok installed" and fields.get("package") and fields.get("version"):
            packages.append((fields["package"], fields["version"]))
    return packages


@_never_raise(_none)
def parse_gcc_version(text: str) -> str | None:
    """`gcc -dumpfullversion` ("12.2.0") or the first line of `gcc --version` -> "12.2.0".

    Parenthesised parts are dropped first: "gcc (Debian 12.2.0-14+deb12u1) 12.2.0" and
    "gcc (GCC) 4.8.5 20150623 (Red Hat 4.8.5-44)" both carry the packager's version there.
    """
    if not isinstance(text, str):
        return None
    # The first line that is not blank and not a shell prompt ("$ gcc --version", "~$ gcc -v").
    first = next((line.strip() for line in _unframe(text).splitlines()
                  if line.strip() and not re.match(r"^\S{0,80}[$#%]\s+\S", line.strip())), "")
    if re.fullmatch(r"\d{1,4}(?:\.\d{1,6}){0,2}", first):
        return first
    outside = re.sub(r"\([^()]*\)", " ", first)
    match = re.search(r"(?<![\w.])(\d{1,4}\.\d{1,6}(?:\.\d{1,6})?)(?![\w.])", outside)
    return match.group(1) if match else None
