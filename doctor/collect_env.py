"""Read the output of ``python -m torch.utils.collect_env`` pasted in someone's bug report as facts v1.

A maintainer triaging a report has only that text. This module turns it into the same facts snapshot
the probes build, so the same checks judge it (``gpu-doctor check --from-collect-env FILE``).

The format changed over the years and reports arrive edited by their authors, so the reader is
lenient about layout and strict about meaning:

* torch 1.x: ``Is CUDA available: Yes``, ``[pip]``/``[pip3]``/``[conda]`` package lines;
* torch 2.x: ``ROCM used to build PyTorch``, ``Python platform``, ``CUDA_MODULE_LOADING``, ``Is XNNPACK
  available``, ``Is XPU available``, and the ``CPU:`` block (``lscpu`` on Linux, ``wmic`` on Windows);
* vLLM's copy: ``Key   : value`` lines in ``=====``-framed sections, plus vLLM and topology sections;
* pasted forms: markdown block quotes (``> ``), indented code blocks, full-width colons, a warning
  printed by torch before the report.

Tool outputs pasted in the same text (before, after, or instead of the collect_env block) are read
too (:func:`_pasted`): an ``nvidia-smi`` table, ``-q`` or ``-L`` listing, the CUDA samples'
``deviceQuery``, ``jax.print_environment_info()``. Each fact they give names its source
(``collect_env:nvidia-smi table``). The collect_env block wins a conflict, because it describes the
process being judged, and the conflict is noted in ``errors[]`` — except where the pasted value is the
same value stated more fully (driver ``550.54.15`` where the block says ``550.54``, cut short). A section
that is missing, cut or garbled adds nothing: unknown stays unknown.

What the report says is recorded; what it does not say stays ``None``, and ``errors[]`` says why
(``Could not collect``, ``No CUDA``, a line missing because the paste was cut). Two facts come from
torch's own warnings when they precede the report: the driver's CUDA version (``found version
11040``) and the build's architecture list (``supports CUDA capabilities sm_50 …``).

:func:`parse` raises :class:`CollectEnvError` (one line) for text that is not such a report and
nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from doctor.model.facts import (
    ENV_NAMES,
    Cudnn,
    DeepResult,
    DriverInfo,
    Facts,
    Gpu,
    HostInfo,
    LibRef,
    LoaderInfo,
    MigDevice,
    ProbeError,
    PyPackage,
    PythonEnv,
    Toolkit,
)
from doctor.model.versions import cuda_version
from doctor.parsers import (
    parse_device_query,
    parse_jax_environment_info,
    parse_nvidia_smi_text,
    strip_escapes,
)
from doctor.safeio import lazy_compile, small_int

SOURCE = "collect_env"
MAX_TEXT = 1_000_000  # a paste longer than this is cut: a report is a few kB
ENV_EXECUTABLE = "python (collect_env)"  # the report never names the interpreter
NVCC_ROOT = "nvcc on PATH"  # collect_env's "CUDA runtime version" is `nvcc --version`, found on PATH

# Placeholders collect_env prints instead of a value; each means something different.
NOT_COLLECTED = "could not collect"  # the command failed or the value was None
NO_CUDA = "no cuda"  # torch saw no CUDA device and no driver, GPU or nvcc
ABSENT = ("n/a", "none", "", "no relevant packages")

# Keys as they are written, lower-cased and with runs of spaces collapsed.
KEYS = {
    "pytorch version": "torch_version",
    "is debug build": "debug",
    "cuda used to build pytorch": "torch_cuda",
    "rocm used to build pytorch": "torch_rocm",
    "os": "os",
    "gcc version": "gcc",
    "clang version": "clang",
    "cmake version": "cmake",
    "libc version": "libc",
    "python version": "python",
    "python platform": "platform",
    "is cuda available": "cuda_available",
    "cuda runtime version": "nvcc",
    "cuda_module_loading set to": "module_loading",
    "gpu models and configuration": "gpus",
    "nvidia driver version": "driver",
    "cudnn version": "cudnn",
    "hip runtime version": "hip_runtime",
    "miopen runtime version": "miopen",
    "is xnnpack available": "xnnpack",
    "is xpu available": "xpu",
    "caching allocator config": "allocator",
    "versions of relevant libraries": "libraries",
    "version of relevant libraries": "libraries",
    "cpu": "cpu",
}
# Fields whose presence marks a text as a collect_env report about CUDA.
CORE = {"torch_version", "torch_cuda", "cuda_available", "nvcc", "gpus", "driver", "cudnn", "libraries"}
# Blocks whose value may continue on the following lines.
MULTILINE = {"gpus", "cudnn", "cpu", "libraries"}
# How collect_env spells each field (for messages).
LABELS = {
    "torch_version": "PyTorch version", "torch_cuda": "CUDA used to build PyTorch", "gcc": "GCC version",
    "nvcc": "CUDA runtime version", "gpus": "GPU models and configuration", "driver": "Nvidia driver version",
    "cudnn": "cuDNN version", "libraries": "Versions of relevant libraries",
}

_KEY_VALUE = lazy_compile(r"^(?P<key>[A-Za-z][A-Za-z0-9_ ()./-]{0,60}?)\s*[:：](?:\s+|$)(?P<value>.*)$")
_TORCH_NO_COLON = lazy_compile(r"^PyTorch version\s+(?P<value>\d\S*)\s*$", re.IGNORECASE)
_BANNER = lazy_compile(r"^={5,}\s*$")
# "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-…)": the head by a pattern, the name by string operations (a pattern
# with a lazy name between optional spaces and an optional UUID is cubic in a run of inner spaces).
_GPU_HEAD = lazy_compile(r"GPU\s*(?P<index>\d+)\s*[:：]")
# `nvidia-smi -L` under a GPU in MIG mode: "  MIG 3g.20gb     Device  0: (UUID: MIG-…)"; collect_env drops the UUID.
_MIG_LINE = lazy_compile(
    r"^MIG\s+(?P<profile>\d{1,2}g\.\d{1,4}gb(?:\+\w{1,10})?)\s+Device\s+(?P<index>\d{1,3})\s*[:：]")
_PACKAGE_LINE = lazy_compile(r"^\[(?P<tool>pip3?|conda)\]\s*(?P<rest>.*)$")
_DRIVER_TOO_OLD = lazy_compile(r"The NVIDIA driver on your system is too old \(found version (?P<v>\d+)\)")
_ARCH_WARNING = lazy_compile(
    r"(?P<name>[^\n]{0,200}?) with CUDA capability sm_(?P<cc>\d+)\w* is not compatible with the current PyTorch "
    r"installation\.\s*The current PyTorch install supports CUDA capabilities (?P<archs>[a-z_0-9 ]+?)\s*\.")
ARCH_ANCHOR = "is not compatible with the current PyTorch installation"
OLD_GPU_ANCHOR = "which is of cuda capability"
_OLD_GPU_WARNING = lazy_compile(
    r"Found GPU(?P<index>\d+) (?P<name>[^\n]{1,200}?) which is of cuda capability (?P<major>\d+)\.(?P<minor>\d+)\.")


def _warnings(text: str, pattern: re.Pattern[str], anchor: str) -> list[re.Match[str]]:
    """Matches of a warning pattern, tried only around its literal anchor (a long paste stays linear)."""
    out: list[re.Match[str]] = []
    start = 0
    for _ in range(64):  # a report has a handful; a flood of them is not a report
        at = text.find(anchor, start)
        if at < 0:
            break
        m = pattern.search(text, max(0, at - 300), at + 600)
        if m and (not out or m.start() != out[-1].start()):
            out.append(m)
        start = at + len(anchor)
    return out


class CollectEnvError(ValueError):
    """The text is not the output of ``python -m torch.utils.collect_env`` (one-line reason)."""


@dataclass
class _Report:
    """What the text says, before it becomes facts."""

    values: dict[str, str] = field(default_factory=dict)
    blocks: dict[str, list[str]] = field(default_factory=dict)
    packages: list[tuple[str, str]] = field(default_factory=list)  # (tool, rest of line)
    env: dict[str, str] = field(default_factory=dict)  # vLLM's "Environment Variables" section
    text: str = ""  # the whole paste: torch prints its warnings before (or amid) the report


def parse(text: str) -> Facts:
    """The facts a collect_env report states. Raises :class:`CollectEnvError` and nothing else."""
    try:
        return _parse(text)
    except CollectEnvError:
        raise
    except Exception as exc:  # a bug here must still not become a traceback for a pasted report
        reason = " ".join(str(exc).split())[:200]
        raise CollectEnvError(f"could not read the report ({type(exc).__name__}: {reason}); "
                              "please report this to gpu-doctor with the text") from None


def _parse(text: str) -> Facts:
    if not isinstance(text, str):
        raise CollectEnvError("expected the report as text")
    if text.lstrip().startswith("{"):
        raise CollectEnvError("this is JSON, not collect_env output (a gpu-doctor snapshot goes to --facts)")
    report = _read(text)
    core = CORE & set(report.values)
    pasted = _Pasted.read(report.text)
    if "torch_version" not in report.values and len(core) < 2:
        if pasted.any():
            # No collect_env block, but nvidia-smi / deviceQuery / JAX output: judge what those state.
            return _merge(_without_block_notes(_facts(_Report(text=report.text))), pasted)
        raise CollectEnvError("no 'PyTorch version:' line and too few other collect_env fields: this is not the "
                              "output of `python -m torch.utils.collect_env`")
    return _merge(_facts(report), pasted)


# --- reading the text ---------------------------------------------------------------------------


def _clean_line(raw: str) -> str:
    line = raw.replace("\t", "    ").rstrip()
    stripped = line.lstrip()
    while stripped.startswith(">"):  # markdown block quotes, possibly nested
        stripped = stripped[1:].lstrip()
    return stripped.replace("\u00a0", " ")


def _key(raw: str) -> str | None:
    """The field a line names, or None. Accepts vLLM's ``Key   : value`` and full-width colons."""
    return KEYS.get(" ".join(raw.lower().split()))


def _read(text: str) -> _Report:
    report = _Report(text=strip_escapes(text[:MAX_TEXT]))  # a terminal's colours, a BOM: not the report's
    lines = [_clean_line(x) for x in report.text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    if lines and not report.text.endswith(("\n", "\r")) and not _PACKAGE_LINE.match(lines[-1]):
        # A paste that stops mid-line was cut there: "Nvidia driver version: 570.1" of 570.124.04, a
        # GPU name's first letters. What that last field line says is unknown, not a value. (A last
        # package line is kept: lists are often pasted without their final line break.)
        lines[-1] = ""
    current: str | None = None  # the multi-line block being read
    section: str | None = None  # vLLM section title
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("```"):
            continue
        if _BANNER.match(line):
            # vLLM frames section titles with ===== lines: "=====\n   CPU Info\n====="
            if i + 1 < len(lines) and lines[i] and _BANNER.match(lines[i + 1] or ""):
                section = " ".join(lines[i].lower().split())
                i += 2
                current = "cpu" if section == "cpu info" else "libraries" if "relevant libraries" in section else None
                if current:
                    report.blocks.setdefault(current, [])
            continue
        pkg = _PACKAGE_LINE.match(line)
        if pkg:
            report.packages.append((pkg.group("tool"), pkg.group("rest").strip()))
            continue
        if section == "environment variables" and "=" in line and not line.startswith("="):
            name, _, value = line.partition("=")
            if re.fullmatch(r"[A-Z_][A-Z0-9_]*", name.strip()):
                report.env[name.strip()] = value.strip()
            continue
        if not line:
            if current in ("gpus", "cudnn"):
                current = None
            continue
        kv = _KEY_VALUE.match(line)
        field = _key(kv.group("key")) if kv else None
        if kv and field and (current != "cpu" or field == "libraries"):
            if field in report.values:
                current = None
                continue  # a second report pasted below the first: keep the first
            value = kv.group("value").strip()
            report.values[field] = value
            current = field if field in MULTILINE else None
            if current:
                report.blocks.setdefault(current, [])
                if value and current in ("gpus", "cudnn"):
                    report.blocks[current].append(value)
            continue
        nocolon = _TORCH_NO_COLON.match(line)
        if nocolon and "torch_version" not in report.values:
            report.values["torch_version"] = nocolon.group("value")
            current = None
            continue
        if current in ("gpus", "cudnn", "cpu", "libraries"):
            report.blocks[current].append(line)
    return report


# --- values --------------------------------------------------------------------------------------


def _state(value: str | None) -> str:
    """known | not_collected | no_cuda | absent | missing (the line is not in the report)."""
    if value is None:
        return "missing"
    low = value.strip().lower()
    if low == NOT_COLLECTED:
        return "not_collected"
    if low == NO_CUDA:
        return "no_cuda"
    if low in ABSENT:
        return "absent"
    return "known"


def _version_in(value: str | None) -> str | None:
    """The version a value states: '12.4.131' from 'V12.4.131', '550.54.15', '11.4.0' from a gcc line."""
    if not value:
        return None
    found = re.findall(r"(?<![\w.])v?(\d+(?:\.\d+)+)", value)
    return found[-1] if found else None


def _major_minor(version: str | None) -> str | None:
    parts = (version or "").split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 and all(p.isdigit() for p in parts[:2]) else None


OS_IDS = (
    (r"ubuntu", "ubuntu"), (r"debian", "debian"), (r"red hat|rhel", "rhel"), (r"centos", "centos"),
    (r"rocky", "rocky"), (r"almalinux", "almalinux"), (r"fedora", "fedora"), (r"amazon linux", "amzn"),
    (r"opensuse|suse", "sles"), (r"arch linux", "arch"), (r"linux mint", "linuxmint"),
    (r"microsoft windows|^windows", "windows"), (r"mac ?os|mac osx|os x", "macos"),
)


def _host(report: _Report, facts: _Facts) -> HostInfo:
    v = report.values
    os_value = v.get("os") if _state(v.get("os")) == "known" else None
    arch = None
    pretty = os_value
    if os_value:
        m = re.match(r"^(?P<name>.*?)\s*\((?P<arch>x86_64|aarch64|arm64|ppc64le|s390x|i386|AMD64|x86)\)\s*$", os_value)
        if m:
            pretty, arch = m.group("name"), m.group("arch")
        facts.source("host.os_pretty", "OS")
    os_id = None
    if pretty:
        for pattern, ident in OS_IDS:
            if re.search(pattern, pretty, re.IGNORECASE):
                os_id = ident
                break
    os_version = None
    if pretty and os_id:
        found = re.search(r"(?<![\w.])(\d+(?:\.\d+)?)", pretty)
        os_version = found.group(1) if found else None
    platform = v.get("platform") if _state(v.get("platform")) == "known" else None
    kernel = wsl = None
    if platform:
        m = re.match(r"^Linux-(?P<kernel>.+?)-(?P<arch>x86_64|aarch64|ppc64le|s390x)-with", platform)
        if m:
            kernel, arch = m.group("kernel"), arch or m.group("arch")
            facts.source("host.kernel", "Python platform")
        wsl = "microsoft" in platform.lower() or "wsl" in platform.lower()
        facts.source("host.wsl", "Python platform")
    glibc = None
    libc = v.get("libc")
    if libc and libc.lower().startswith("glibc-"):
        glibc = libc.split("-", 1)[1]
        facts.source("host.glibc", "Libc version")
    gcc = _version_in(v.get("gcc")) if _state(v.get("gcc")) == "known" else None
    if gcc:
        facts.source("host.gcc", "GCC version")
    facts.unknown("gcc", v.get("gcc"))
    return HostInfo(os_id=os_id, os_version=os_version, os_pretty=pretty, kernel=kernel, arch=arch, glibc=glibc,
                    gcc=gcc, wsl=wsl)


# --- the facts under construction ---------------------------------------------------------------


@dataclass
class _Facts:
    errors: list[ProbeError] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)

    def source(self, fact: str, line: str) -> None:
        self.sources.setdefault(fact, f"{SOURCE}:{line}")

    def note(self, reason: str, probe: str = SOURCE) -> None:
        if not any(e.probe == probe and e.reason == reason for e in self.errors):
            self.errors.append(ProbeError(probe=probe, reason=reason))

    def unknown(self, name: str, value: str | None) -> None:
        """Record why a field told us nothing."""
        label = LABELS.get(name, name)
        state = _state(value)
        if state == "missing":
            self.note(f"the report has no '{label}' line (cut off, or an older collect_env)", f"{SOURCE}:{label}")
        elif state == "not_collected":
            self.note(f"the report says '{label}: Could not collect'", f"{SOURCE}:{label}")
        elif state == "no_cuda":
            self.note(f"the report says '{label}: No CUDA' (torch found no CUDA driver, GPU or nvcc)",
                      f"{SOURCE}:{label}")


def _facts(report: _Report) -> Facts:
    f = _Facts()
    host = _host(report, f)
    macos = host.os_id == "macos"
    rocm = _rocm_build(report)
    driver = _driver(report, f, macos, rocm)
    gpus = _gpus(report, f, rocm)
    toolkits, nvcc = _toolkit(report, f)
    cudnn = _cudnn(report, f)
    env = _python_env(report, f, rocm)
    cudnn += [Cudnn(version=p.version, location=f"{env.executable} [{p.name}]", source="pip")
              for p in env.packages if re.fullmatch(r"nvidia-cudnn-cu\d+", p.name) and p.version]
    cudnn += [Cudnn(version=p.version, location=f"{env.executable} [conda {p.name}]", source="conda")
              for p in env.packages if p.name == "cudnn" and p.version]
    from doctor.probes.cuda import pip_toolkits

    wheels = pip_toolkits([env])  # nvidia-cuda-nvcc / -runtime wheels: the ptxas XLA and Triton use
    if wheels:
        toolkits = [*toolkits, *wheels]
        f.source("toolkits", "Versions of relevant libraries (nvidia-cuda-* wheels)")
    f.note("collect_env does not report the kernel module, the libraries the loader finds, LD_LIBRARY_PATH, "
           "CUDA_VISIBLE_DEVICES or whether it ran in a container: checks that need them judge from what is known")
    return Facts(
        host=host,
        driver=driver,
        gpus=gpus,
        toolkits=toolkits,
        loader=LoaderInfo(nvcc_on_path=nvcc),
        cudnn=cudnn,
        python_envs=[env],
        env={k: report.env[k] for k in sorted(report.env) if k in ENV_NAMES},
        errors=f.errors,
        sources=f.sources,
    )


def _rocm_build(report: _Report) -> bool:
    rocm = report.values.get("torch_rocm")
    hip = report.values.get("hip_runtime")
    return (_state(rocm) == "known" and _version_in(rocm) is not None) or (
        _state(hip) == "known" and _version_in(hip) is not None and _state(report.values.get("torch_cuda")) != "known")


def _driver(report: _Report, f: _Facts, macos: bool, rocm: bool) -> DriverInfo:
    value = report.values.get("driver")
    userspace = None
    if _state(value) == "known":
        version = _version_in(value)
        if macos:
            # On macOS collect_env reports the CUDA kext (com.nvidia.CUDA) version, not a display driver.
            f.note(f"on macOS 'Nvidia driver version: {value}' is the CUDA driver kext version, not an NVIDIA "
                   "display driver version", f"{SOURCE}:Nvidia driver version")
        elif version and re.fullmatch(r"\d{3,}(\.\d+){1,2}", version):
            userspace = version
            f.source("driver.userspace", "Nvidia driver version")
        else:
            f.note(f"'Nvidia driver version: {value}' is not a driver version", f"{SOURCE}:Nvidia driver version")
    elif not rocm:
        f.unknown("driver", value)
    api = None
    m = _DRIVER_TOO_OLD.search(report.text)
    n = small_int(m.group("v")) if m else None  # bounded: int() refuses 4,300+ digits, and pastes are untrusted
    if n is not None and (api := cuda_version(n)) is not None:
        f.source("driver.cuda_driver_api", f"torch warning 'driver on your system is too old (found version {n})'")
    # Statements of absence printed around the report are evidence too (see doctor/beliefs.py).
    init_error = nvml_error = None
    low = report.text.lower()
    if "found no nvidia driver on your system" in low:
        init_error = "torch: Found no NVIDIA driver on your system"
        f.source("driver.cuda_init_error", "torch error 'Found no NVIDIA driver on your system'")
    for needle, value, said in NVML_TEXTS:  # the first that the paste carries
        if needle in low:
            nvml_error = value
            f.source("driver.nvml_error", said)
            break
    for line in _error_lines(report.text):
        f.note(line, f"{SOURCE}:error text")
    return DriverInfo(userspace=userspace, cuda_driver_api=api, cuda_init_error=init_error, nvml_error=nvml_error)


# What nvidia-smi / NVML said, pasted with a report: (text, DriverInfo.nvml_error, where it came from).
NVML_TEXTS = (
    ("couldn't communicate with the nvidia driver", "nvidia-smi: couldn't communicate with the NVIDIA driver",
     "nvidia-smi 'couldn't communicate with the NVIDIA driver'"),
    ("driver/library version mismatch", "Driver/library version mismatch",
     "'Failed to initialize NVML: Driver/library version mismatch' in the paste"),
    ("failed to initialize nvml: unknown error", "Unknown Error",
     "'Failed to initialize NVML: Unknown Error' in the paste"),
)

# Error lines pasted with a report are evidence the checks read (doctor/beliefs.py collects them).
ERROR_ANCHORS = ("no kernel image is available", "found no nvidia driver", "driver/library version mismatch",
                 "failed to initialize nvml", "cuda driver version is insufficient", "cudaerrorinsufficientdriver",
                 "cannot open shared object file", "undefined symbol", "cuda_error_", "forward compatibility was "
                 "attempted", "system not yet initialized")


def _error_lines(text: str) -> list[str]:
    out: list[str] = []
    for raw in text.splitlines()[:5000]:
        line = raw.strip()[:300]
        low = line.lower()
        if any(a in low for a in ERROR_ANCHORS) and line not in out:
            out.append(line)
        if len(out) >= 20:
            break
    return out


def _gpu_line(line: str) -> tuple[str, str] | None:
    """(index, name) of an `nvidia-smi -L` line as collect_env prints it, or None; linear in the line."""
    m = _GPU_HEAD.match(line)
    if not m:
        return None
    name = line[m.end():].strip()
    if name.endswith(")"):
        cut = name.rfind("(UUID:")
        if cut > 0 and ")" not in name[cut:-1]:
            name = name[:cut].rstrip()
    return (m.group("index"), name) if name else None


def _mig_devices(report: _Report) -> dict[int, list[MigDevice]]:
    """The MIG devices listed under each GPU line ({GPU index: devices})."""
    out: dict[int, list[MigDevice]] = {}
    gpu: int | None = None
    for line in report.blocks.get("gpus", []):
        head = _gpu_line(line)
        if head:
            gpu = small_int(head[0], 6)
            continue
        mig = _MIG_LINE.match(line.strip())
        if mig and gpu is not None:
            out.setdefault(gpu, []).append(MigDevice(index=int(mig.group("index")), name=f"MIG {mig.group('profile')}"))
    return out


def _gpu_names(report: _Report) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for line in report.blocks.get("gpus", []):
        head = _gpu_line(line)
        index = small_int(head[0], 6) if head else None
        if head and index is not None:
            out.append((index, head[1]))
    if not out:
        value = report.values.get("gpus")
        if _state(value) == "known" and value and not _gpu_line(value):
            out.append((0, value.strip()))  # macOS and ROCm print one bare name
    return out


def _gpus(report: _Report, f: _Facts, rocm: bool) -> list[Gpu]:
    names = _gpu_names(report)
    if rocm:
        if names:
            f.note(f"a ROCm build of PyTorch: the GPU(s) listed ({', '.join(n for _i, n in names)}) are AMD GPUs, "
                   "outside what gpu-doctor checks", f"{SOURCE}:GPU models and configuration")
        return []
    if not names:
        f.unknown("gpus", report.values.get("gpus"))
        # The GPU list is missing (cut off, or 'Could not collect'), but torch's own warnings name the GPU they
        # found: that is evidence of the GPU and its compute capability.
        return _gpus_from_warnings(report, f)
    ccs: dict[str, str] = {}
    for m in _warnings(report.text, _ARCH_WARNING, ARCH_ANCHOR):
        cc = m.group("cc")
        ccs[_gpu_key(m.group("name"))] = f"{cc[:-1]}.{cc[-1]}"
    for m in _warnings(report.text, _OLD_GPU_WARNING, OLD_GPU_ANCHOR):
        ccs[_gpu_key(m.group("name"))] = f"{m.group('major')}.{m.group('minor')}"
    gpus = []
    migs = _mig_devices(report)
    for index, name in names:
        cc = ccs.get(_gpu_key(name))
        if cc:
            f.source(f"gpus[{index}].compute_capability", "torch warning 'with CUDA capability sm_NN'")
        mig = migs.get(index, [])
        if mig:
            f.source(f"gpus[{index}].mig_devices", "GPU models and configuration ('MIG … Device N:' lines)")
        gpus.append(Gpu(index=index, name=name, compute_capability=cc, source=SOURCE, mig_devices=mig,
                        mig_mode=True if mig else None))
    f.source("gpus", "GPU models and configuration")
    return gpus


def _gpus_from_warnings(report: _Report, f: _Facts) -> list[Gpu]:
    found: dict[str, tuple[int | None, str, str]] = {}
    for m in _warnings(report.text, _OLD_GPU_WARNING, OLD_GPU_ANCHOR):
        found.setdefault(_gpu_key(m.group("name")), (small_int(m.group("index"), 6), m.group("name").strip(),
                                                     f"{m.group('major')}.{m.group('minor')}"))
    for m in _warnings(report.text, _ARCH_WARNING, ARCH_ANCHOR):
        cc = m.group("cc")
        name = re.sub(r"^.*Warning:\s*", "", m.group("name").strip())  # "…: UserWarning: NVIDIA GeForce RTX 5090"
        found.setdefault(_gpu_key(name), (None, name, f"{cc[:-1]}.{cc[-1]}"))
    gpus = []
    for i, (index, name, cc) in enumerate(found.values()):
        n = index if index is not None else i
        if not name:
            continue
        f.source(f"gpus[{n}].compute_capability", "torch warning naming the GPU and its CUDA capability")
        gpus.append(Gpu(index=n, name=name, compute_capability=cc, source=SOURCE))
    if gpus:
        f.source("gpus", "torch warning naming the GPU it found")
    return gpus


def _gpu_key(name: str) -> str:
    name = name.strip().split("\n")[-1]
    return " ".join(name.lower().replace("nvidia", "").split())


def _toolkit(report: _Report, f: _Facts) -> tuple[list[Toolkit], LibRef | None]:
    value = report.values.get("nvcc")
    version = _version_in(value) if _state(value) == "known" else None
    if not version:
        f.unknown("nvcc", value)
        return [], None
    f.source("toolkits", "CUDA runtime version")
    f.source("loader.nvcc_on_path", "CUDA runtime version")
    return ([Toolkit(root=NVCC_ROOT, version=_major_minor(version), nvcc_version=version, source=SOURCE)],
            LibRef(path="nvcc", version=version))


_CUDNN_FILE = lazy_compile(
    r"(?:^|[\\/])(?:lib)?cudnn(?P<sub>_[a-z_]+)?"
    r"(?:64_(?P<win>\d+)\.dll|\.so\.(?P<so>\d+(?:\.\d+)*)|(?:\.(?P<dy>\d+(?:\.\d+)*))?\.dylib)\s*$", re.IGNORECASE)


def _cudnn(report: _Report, f: _Facts) -> list[Cudnn]:
    value = report.values.get("cudnn")
    if _state(value) != "known":
        f.unknown("cudnn", value)
        return []
    found: dict[str | None, Cudnn] = {}
    for line in report.blocks.get("cudnn", []):
        path = line.strip()
        m = _CUDNN_FILE.search(path)
        if not m:
            continue
        version = m.group("so") or m.group("win") or m.group("dy")
        if version not in found or not m.group("sub"):  # name the main library where it is listed
            found[version] = Cudnn(version=version, location=path, source="library")
    if found:
        f.source("cudnn", "cuDNN version")
    return list(found.values())


# --- the Python environment ---------------------------------------------------------------------


def _python_env(report: _Report, f: _Facts, rocm: bool) -> PythonEnv:
    from doctor.probes.pyenvs import packages_from_raw

    raw = _raw_packages(report)
    torch = _torch(report, f, rocm)
    if torch is not None:
        raw = [p for p in raw if p.get("name") != "torch"]
    packages = packages_from_raw(raw)
    if torch is not None:
        cudnn_wheel = next((p.version for p in packages if re.fullmatch(r"nvidia-cudnn-cu\d+", p.name)), None)
        conda = next((p for p in _conda_rows(report) if p["name"] == "pytorch"), None)
        torch_cudnn = cudnn_wheel or (conda or {}).get("cudnn")
        if torch_cudnn:
            torch = replace(torch, cudnn=torch_cudnn)
        packages = sorted([*packages, torch], key=lambda p: p.name)
    elif any(p.name == "torch" for p in packages):
        f.source("python_envs.packages", "Versions of relevant libraries")
    if report.packages:
        f.source("python_envs.packages", "Versions of relevant libraries")
    else:
        f.unknown("libraries", report.values.get("libraries"))
    python = report.values.get("python")
    # "3.12.9 | packaged by Anaconda, Inc. | (main, …) [GCC 11.2.0]": the first version is Python's
    m = re.match(r"^(\d+\.\d+(?:\.\d+)?\w*)", (python or "").strip()) if _state(python) == "known" else None
    version = m.group(1) if m else None
    if version:
        f.source("python_envs.version", "Python version")
    return PythonEnv(executable=ENV_EXECUTABLE, version=version, origin=SOURCE, packages=packages)


def _torch(report: _Report, f: _Facts, rocm: bool) -> PyPackage | None:
    value = report.values.get("torch_version")
    if _state(value) != "known" or not value or not re.match(r"^\d", value.strip()):
        f.unknown("torch_version", value)
        if _state(value) == "absent":
            f.note("the report says 'PyTorch version: N/A': torch could not be imported", f"{SOURCE}:PyTorch version")
        return None
    version = value.split()[0]
    local = version.split("+", 1)[1] if "+" in version else ""
    built = report.values.get("torch_cuda")
    # torch.version.cuda is "12.1"; old conda builds said "10.1.243": the matrix keys builds by major.minor
    cuda = _major_minor(_version_in(built)) if _state(built) == "known" else None
    tag = re.fullmatch(r"cu(\d{2,3})(\d)", local)
    if cuda is None and tag and _state(built) == "missing":
        # The 'CUDA used to build PyTorch' line is cut off, but the wheel's local tag names its CUDA (+cu121)
        cuda = f"{int(tag.group(1))}.{tag.group(2)}"
        f.source("python_envs.packages.torch.cuda", "PyTorch version (the wheel's local tag)")
    cpu_only: bool | None
    if rocm:
        # A GPU build, but not a CUDA one: nothing an NVIDIA check can judge (never "a CUDA build", never ready)
        cpu_only, cuda = None, None
        f.note("a ROCm build of PyTorch: not a CUDA build, outside what gpu-doctor checks", f"{SOURCE}:PyTorch version")
    elif local == "cpu":
        cpu_only = True
    elif cuda:
        cpu_only = False
    elif _state(built) in ("not_collected", "absent") and (built or "").strip().lower() != "n/a":
        cpu_only = True  # collect_env prints torch.version.cuda; None ("None"/"Could not collect") = no CUDA
    elif local == "xpu":
        cpu_only = True
    else:
        cpu_only = None
        f.unknown("torch_cuda", built)
    available = {"true": True, "yes": True, "false": False, "no": False}.get(
        (report.values.get("cuda_available") or "").strip().lower())
    arch = None
    m = next(iter(_warnings(report.text, _ARCH_WARNING, ARCH_ANCHOR)), None)
    if m:
        arch = m.group("archs").split()
        f.source("python_envs.packages.torch.arch_list", "torch warning 'The current PyTorch install supports "
                 "CUDA capabilities'")
    f.source("python_envs.packages", "PyTorch version / CUDA used to build PyTorch")
    if rocm and available is not None:
        # A ROCm build answers torch.cuda.is_available() about AMD GPUs: no evidence about an NVIDIA driver.
        f.note(f"a ROCm build of PyTorch: 'Is CUDA available: {report.values.get('cuda_available')}' is about AMD "
               "GPUs, not about an NVIDIA driver", f"{SOURCE}:Is CUDA available")
        available = None
    # collect_env imported torch: what it answered is what --deep records
    deep = DeepResult(is_available=available, cuda=cuda, arch_list=arch) if available is not None or arch else None
    return PyPackage(name="torch", version=version, cuda=cuda, cpu_only=cpu_only, arch_list=arch, deep=deep)


def _conda_rows(report: _Report) -> list[dict[str, Any]]:
    out = []
    for tool, rest in report.packages:
        if tool != "conda":
            continue
        parts = rest.split()
        if len(parts) < 2 or not re.match(r"^\d", parts[1]):
            continue
        name = "torch" if parts[0] == "pytorch" else parts[0]
        row: dict[str, Any] = {"name": parts[0] if parts[0] == "pytorch" else name, "version": parts[1]}
        build = parts[2] if len(parts) > 2 else ""
        m = re.search(r"cuda(\d+(?:\.\d+)*)", build)
        row["cuda"] = m.group(1) if m else None
        m = re.search(r"cudnn(\d+(?:\.\d+)*)", build)
        row["cudnn"] = m.group(1) if m else None
        row["cpu"] = bool(re.search(r"(^|_)cpu(_|$)", build))
        out.append(row)
    return out


def _raw_packages(report: _Report) -> list[dict[str, Any]]:
    """[pip]/[conda] lines as the raw rows packages_from_raw takes; pip wins over conda for a name."""
    rows: dict[str, dict[str, Any]] = {}
    for tool, rest in report.packages:
        if tool == "conda":
            continue
        m = re.match(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==\s*(?P<version>\S+)|@\s*\S+|\s*$)", rest)
        if m:
            name = m.group("name").lower().replace("_", "-")
            rows.setdefault(name, {"name": name, "version": m.group("version")})
    for row in _conda_rows(report):
        name = "torch" if row["name"] == "pytorch" else row["name"].lower().replace("_", "-")
        if name not in rows:
            version = row["version"]
            if name == "torch" and row["cpu"]:
                version = f"{version}+cpu"  # conda's CPU build, spelled as the wheel's local tag
            rows[name] = {"name": name, "version": version}
    return list(rows.values())


# --- other tool outputs pasted with (or instead of) the report -----------------------------------


@dataclass
class _Pasted:
    """What nvidia-smi, deviceQuery and jax.print_environment_info() state in the same paste."""

    smi: dict[str, Any]
    smi_label: str
    device_query: dict[str, Any]
    jax: dict[str, Any]

    @classmethod
    def read(cls, text: str) -> _Pasted:
        smi = parse_nvidia_smi_text(text)  # the parsers never raise; a cut section gives None/[]
        if re.search(r"NVSMI LOG|^\s*Product Name\s*:", text, re.MULTILINE):
            label = "nvidia-smi -q"
        elif re.search(r"NVIDIA-SMI\s+\d", text):
            label = "nvidia-smi table"
        else:
            label = "nvidia-smi -L"
        return cls(smi=smi, smi_label=label, device_query=parse_device_query(text),
                   jax=parse_jax_environment_info(text))

    def any(self) -> bool:
        return bool(self.smi["driver_version"] or self.smi["gpus"] or self.device_query["devices"]
                    or self.jax["jax"] or self.jax["jaxlib"])


def _without_block_notes(facts: Facts) -> Facts:
    """Facts of a paste with no collect_env block: its missing lines are not 'cut off', they were never there."""
    errors = [e for e in facts.errors if not e.reason.startswith(("the report has no '", "collect_env does not"))]
    errors.append(ProbeError(probe=SOURCE, reason="no collect_env block in the paste: the facts come from the "
                                                  "nvidia-smi / deviceQuery / JAX output pasted instead"))
    return replace(facts, errors=errors)


def _more_specific(block: str, pasted: str) -> bool:
    """The pasted version is the block's one stated more fully (a cut '550.54' of '550.54.15')."""
    return pasted.startswith(block + ".")


def _merge(facts: Facts, pasted: _Pasted) -> Facts:
    """Facts plus what the pasted tool outputs state; the collect_env block wins a conflict (noted)."""
    sources = dict(facts.sources)
    errors = list(facts.errors)

    def src(key: str, label: str, override: bool = False) -> None:
        if override or key not in sources:
            sources[key] = f"{SOURCE}:{label}"

    def conflict(what: str, block: str, other: str, label: str) -> None:
        errors.append(ProbeError(probe=f"{SOURCE}:{label}", reason=f"the pasted {label} says {what} {other}, the "
                                 f"collect_env block {block}: the block's value is kept"))

    smi, label, dq = pasted.smi, pasted.smi_label, pasted.device_query
    driver = facts.driver
    version = smi["driver_version"]
    if version and not re.fullmatch(r"\d{3,}(\.\d+){1,2}", version):
        version = None
    block_driver = driver.userspace
    if version and block_driver is None:
        driver = replace(driver, userspace=version)
        src("driver.userspace", label, override=True)
    elif version and block_driver and version != block_driver:
        if _more_specific(block_driver, version):
            driver = replace(driver, userspace=version)
            src("driver.userspace", label, override=True)
        else:
            conflict("driver", block_driver, version, label)
    if smi["cuda_version"] and driver.smi_cuda_version is None:
        driver = replace(driver, smi_cuda_version=smi["cuda_version"])
        src("driver.smi_cuda_version", label)
    dq_driver = next((d["driver_cuda"] for d in dq["devices"] if d["driver_cuda"]), None)
    if dq_driver and driver.cuda_driver_api is None:
        driver = replace(driver, cuda_driver_api=dq_driver)
        src("driver.cuda_driver_api", "deviceQuery")
    gpus = _merge_gpus(list(facts.gpus), smi, label, dq, src, conflict)
    envs = list(facts.python_envs)
    if envs and (pasted.jax["jax"] or pasted.jax["jaxlib"]):
        envs[0] = _merge_jax(envs[0], pasted.jax, src)
    return replace(facts, driver=driver, gpus=gpus, python_envs=envs, sources=sources, errors=errors)


def _merge_gpus(gpus: list[Gpu], smi: dict[str, Any], label: str, dq: dict[str, Any], src: Any,
                conflict: Any) -> list[Gpu]:
    listed = [g for g in smi["gpus"] if g.get("name") or g.get("pci_bus_id")]
    if not gpus and listed:
        gpus = [Gpu(index=g["index"] if g["index"] is not None else i, name=g["name"], source="nvidia-smi")
                for i, g in enumerate(listed)]
        src("gpus", label, override=True)
    elif not gpus and dq["devices"]:
        gpus = [Gpu(index=d["index"], name=d["name"], source="deviceQuery") for d in dq["devices"]]
        src("gpus", "deviceQuery", override=True)
    out = []
    for gpu in gpus:
        s = next((g for g in listed if g["index"] == gpu.index), None)
        if s and gpu.name and s["name"] and not _same_gpu(gpu.name, s["name"]):
            conflict(f"GPU {gpu.index} is", gpu.name, s["name"], label)
            s = None
        if s:
            fields = {"uuid": s["uuid"], "pci_bus_id": s["pci_bus_id"], "memory_total_mib": s["memory_total_mib"],
                      "memory_used_mib": s["memory_used_mib"], "mig_mode": s["mig_mode"],
                      "persistence_mode": s["persistence_mode"]}
            new = {k: v for k, v in fields.items() if v is not None and getattr(gpu, k) is None}
            if new:
                gpu = replace(gpu, **new)
                for k in new:
                    src(f"gpus[{gpu.index}].{k}", label)
        d = next((d for d in dq["devices"] if d["index"] == gpu.index and _same_gpu(gpu.name or "", d["name"])), None)
        if d and d["compute_capability"] and gpu.compute_capability is None:
            gpu = replace(gpu, compute_capability=d["compute_capability"])
            src(f"gpus[{gpu.index}].compute_capability", "deviceQuery")
        if d and d["memory_total_mib"] and gpu.memory_total_mib is None:
            gpu = replace(gpu, memory_total_mib=d["memory_total_mib"])
            src(f"gpus[{gpu.index}].memory_total_mib", "deviceQuery")
        out.append(gpu)
    return out


def _same_gpu(a: str, b: str) -> bool:
    """Two names of one GPU; the table shortens long ones ('NVIDIA GeForce ...')."""
    x, y = _gpu_key(a), _gpu_key(b)
    if x.endswith("...") or y.endswith("..."):
        x, y = x.removesuffix("...").strip(), y.removesuffix("...").strip()
        return x.startswith(y) or y.startswith(x)
    return x == y


def _merge_jax(env: PythonEnv, jax: dict[str, Any], src: Any) -> PythonEnv:
    """jax/jaxlib from print_environment_info(): versions, and whether JAX listed GPU devices.

    The printed jaxlib version has no local tag, so whether it is a CUDA build stays unknown. A device
    list of GPUs is JAX seeing the GPU; a CPU-only list may be a CPU build or a GPU build that failed to
    start, so it states nothing about the GPU.
    """
    packages = {p.name: p for p in env.packages}
    kinds = jax["device_kinds"]
    sees_gpu = any(k in ("GpuDevice", "CudaDevice") for k in kinds)
    for name in ("jax", "jaxlib"):
        if jax[name] and name not in packages:
            packages[name] = PyPackage(name=name, version=jax[name])
            src("python_envs.packages", "jax.print_environment_info()")
    lib = packages.get("jaxlib")
    if lib is not None and sees_gpu and lib.deep is None:
        packages["jaxlib"] = replace(lib, cpu_only=False,  # JAX listed CUDA devices: a GPU build
                                     deep=DeepResult(is_available=True, device_count=jax["device_count"]))
        src("python_envs.packages.jaxlib.deep", "jax.print_environment_info() (jax.devices)")
    version = env.version
    if version is None and jax["python"]:
        version = jax["python"]
        src("python_envs.version", "jax.print_environment_info()")
    return replace(env, version=version, packages=sorted(packages.values(), key=lambda p: p.name))
