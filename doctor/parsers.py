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
    "parse_dpkg_status",
    "parse_gcc_version",
    "parse_ldconfig_p",
    "parse_nvcc_version",
    "parse_nvidia_smi_xml",
    "parse_os_release",
    "parse_proc_driver_version",
    "parse_tf_build_info",
    "parse_torch_version_py",
    "parse_xid_lines",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")

# Digit runs are bounded everywhere: int() refuses strings longer than 4,300 digits, and no
# version or counter we read is anywhere near that long.
_VERSION = r"\d{1,6}(?:\.\d{1,9}){0,3}"


def _never_raise(default: Callable[[], _R]) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Last line of defence for the "never raises" contract: a bug in a parser becomes "unparsable".

    The parsers are written not to raise; this catches what they missed (a surrogate that expat
    refuses, a recursion limit in ast), because a probe must record a fact, not crash.
    """

    def wrap(func: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(func)
        def safe(*args: _P.args, **kwargs: _P.kwargs) -> _R:
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
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    # CUDA 1.0 is 1000; two-digit majors stay below 100000. Outside that it is not a CUDA version.
    if not 1000 <= value < 100_000:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


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
    match = re.search(rf"CUDA Version\s+({_VERSION})", text)
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
    match = re.search(rf"release\s+(\d{{1,4}}\.\d{{1,4}})\s*,\s*V({_VERSION})", text)
    if match:
        return match.group(2)
    match = re.search(r"release\s+(\d{1,4}\.\d{1,4})", text)
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
    nvrm = re.search(r"NVRM version:([^\n]*)", text)
    if nvrm:
        line = nvrm.group(1)
        module = re.search(rf"Kernel Module(?:\s+for\s+\S+)?\s+({_VERSION})", line)
        if module:
            result["version"] = module.group(1)
        if re.search(r"\bOpen Kernel Module\b", line):
            result["flavor"] = "open"
        elif re.search(r"\bKernel Module\b", line):
            result["flavor"] = "proprietary"
    # Open modules built without a GCC banner print "GCC version:  Selected multilib: ..." instead.
    gcc = re.search(rf"GCC version:\s+gcc version\s+({_VERSION})", text)
    if gcc:
        result["gcc"] = gcc.group(1)
    return result


@_never_raise(lambda: {"driver_version": None, "cuda_version": None})
def parse_cuda_driver_version_from_smi_text(text: str) -> dict[str, Any]:
    """Plain `nvidia-smi` banner (or `nvidia-smi -q`) -> {"driver_version", "cuda_version"}.

    On WSL the banner's "NVIDIA-SMI" version differs from the Windows driver's; "Driver Version"
    is the one that decides what CUDA can run, so it is the one read.
    """
    result: dict[str, Any] = {"driver_version": None, "cuda_version": None}
    if not isinstance(text, str):
        return result
    driver = re.search(rf"Driver Version\s*:\s*({_VERSION})", text)
    if driver:
        result["driver_version"] = driver.group(1)
    cuda = re.search(r"CUDA Version\s*:\s*(\d{1,4}\.\d{1,4})", text)
    if cuda:
        result["cuda_version"] = cuda.group(1)
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
    # A paste or a captured stream may carry framing before the document: blank lines, a BOM, the command
    # line, a shell prompt. The XML declaration must be the very first thing, so the document starts there.
    start = next((i for i in (text.find("<?xml"), text.find("<nvidia_smi_log")) if i >= 0), -1)
    if start > 0:
        text = text[start:]
    text = re.sub(r"<!DOCTYPE[^>\[]*>", "", text, count=1)
    if "<!DOCTYPE" in text.upper():
        return result
    children = _root_children(text)
    if children is None:
        return result
    gpus = []
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


def _root_children(text: str) -> list[ET.Element] | None:
    """The complete children of <nvidia_smi_log>, in order; None if the text is not such a log."""
    import xml.etree.ElementTree as ET  # only when nvidia-smi's XML is read (no NVML answer)

    parser = ET.XMLPullParser(events=("start", "end"))
    try:
        parser.feed(text)
        parser.close()
    except (ET.ParseError, ValueError, UnicodeError):
        pass  # the events read before the error are still queued
    children: list[ET.Element] = []
    depth = 0
    try:
        for event, elem in parser.read_events():
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
        return None
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
    pairs: dict[str, Any] = {}
    for key, raw in re.findall(
        r"""['"](cuda_version|cudnn_version|is_cuda_build)['"]\s*[,:]\s*('[^'\n]*'|"[^"\n]*"|True|False|None)""",
        text[match.start() : match.start() + 100_000],
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
    r"[ \t]*(\d{1,5})[ \t]*,?[ \t]*([^\r\n]*)"
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
    for match in _XID.finditer(text):
        message = _XID_PID.sub("", match.group(3).strip(), count=1)
        message = _XID_NAME.sub("", message, count=1).strip()
        events.append({"xid": int(match.group(2)), "pci_bus_id": match.group(1), "message": message or None})
    return events


_LDCONFIG_LINE = lazy_compile(r"^[ \t]*(\S+)[ \t]+\(([^)\n]*)\)[ \t]*=>([^\n]*)$", re.MULTILINE)


@_never_raise(list)
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


@_never_raise(list)
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
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if re.fullmatch(r"\d{1,4}(?:\.\d{1,6}){0,2}", first):
        return first
    outside = re.sub(r"\([^()]*\)", " ", first)
    match = re.search(r"(?<![\w.])(\d{1,4}\.\d{1,6}(?:\.\d{1,6})?)(?![\w.])", outside)
    return match.group(1) if match else None
