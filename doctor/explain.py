"""`explain`: recognise a pasted error message and say which of its causes applies on a machine.

The signatures are reviewed data (``compat/errors.toml``, loaded with the matrix): a pattern, the
problem, its causes — each named by the gpu-doctor check that can tell whether it applies — the fix
and the source that defines the message. Given facts (this machine, a snapshot, a collect_env
report), the checks of the matched causes run through :func:`doctor.pipeline.diagnose`, and each
cause is judged by its check: a problem found means the cause applies, a clean result rules it out.

Pure: no probing, no printing. :func:`render_text` and :func:`to_dict` are the two renderings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from doctor.errors import Cause, Signature, bounded, match
from doctor.model.facts import Facts
from doctor.model.severity import SEVERITY_RANK
from doctor.model.versions import cuda_version
from doctor.safeio import lazy_compile, small_int

EXPLAIN_SCHEMA = "gpu-doctor.explain/v1"
UNCHECKED = "unchecked."

# How a cause stands on the machine, from its check's result.
APPLIES, RULED_OUT, NOT_APPLICABLE, UNKNOWN, NOT_CHECKED = (
    "applies", "ruled_out", "not_applicable", "unknown", "not_checked")


@dataclass(frozen=True)
class CauseVerdict:
    code: str
    text: str
    status: str
    reason: str | None = None
    finding: dict[str, Any] | None = None  # the check's worst finding, when it ran


@dataclass(frozen=True)
class Explanation:
    signature: Signature
    matched: str  # the line of the pasted text that matched
    causes: list[CauseVerdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the message itself says, decoded

    @property
    def applies(self) -> list[CauseVerdict]:
        return [c for c in self.causes if c.status == APPLIES]


def explain(text: str, facts: Facts | None = None, sigs: list[Signature] | None = None,
            ctx: Any = None) -> list[Explanation]:
    """The signatures in the text, each cause judged on ``facts`` (None: listed, not judged)."""
    matched = match(text, sigs)
    results: dict[str, tuple[str, str | None, list[Any]]] = {}
    if facts is not None and matched:
        facts = with_stated_facts(facts, bounded(text))
        results = _run_checks(facts, {c.code for sig, _line in matched for c in sig.causes}, ctx)
    out = []
    for sig, line in matched:
        verdicts = [_unknowable(_verdict(c, results, facts is not None), facts) for c in sig.causes]
        notes = _notes(sig, text) + (_loader_path_notes(line, facts) if facts is not None else [])
        out.append(Explanation(signature=sig, matched=line, causes=verdicts, notes=notes))
    return out


# What an error message itself states about the machine is evidence (a report cut short is not):
# torch's "driver on your system is too old (found version 11040)", XLA's "The NVIDIA driver's CUDA version is
# 12.0", TensorFlow's "Ignoring visible gpu device (… name: X …) with Cuda compute capability 3.0".
_TORCH_FOUND = lazy_compile(r"The NVIDIA driver on your system is too old \(found version (?P<v>\d{4,6})\)")
_XLA_DRIVER_CUDA = lazy_compile(r"The NVIDIA driver's CUDA version is (?P<v>\d{1,3}\.\d{1,3}) which is older")
_TF_GPU_CC = lazy_compile(r"Ignoring (?:visible )?gpu device \((?:device: \d+, )?name: (?P<name>[^,\n]{1,80}),"
                        r"[^)]{0,120}\)\s{0,20}with Cuda compute capability (?P<cc>\d{1,2}\.\d)")


def with_stated_facts(facts: Facts, text: str) -> Facts:
    """The facts plus what the error text states and the facts leave unknown (never replacing a known value)."""
    from dataclasses import replace

    d = facts.driver
    sources = dict(facts.sources)
    if not d.cuda_driver_api and not d.smi_cuda_version:
        m = _TORCH_FOUND.search(text)
        n = small_int(m.group("v")) if m else None
        api = cuda_version(n)
        if not api:
            x = _XLA_DRIVER_CUDA.search(text)
            api = x.group("v") if x else None
        if api:
            d = replace(d, cuda_driver_api=api)
            sources.setdefault("driver.cuda_driver_api", "error text (the driver's CUDA version it states)")
    gpus = list(facts.gpus)
    for m in _TF_GPU_CC.finditer(text):
        name, cc = m.group("name").strip(), m.group("cc")
        key = " ".join(name.lower().replace("nvidia", "").split())
        for i, g in enumerate(gpus):
            if not g.compute_capability and " ".join((g.name or "").lower().replace("nvidia", "").split()) == key:
                gpus[i] = replace(g, compute_capability=cc)
                sources.setdefault(f"gpus[{g.index}].compute_capability", "error text (TensorFlow's device notice)")
    if d is facts.driver and gpus == list(facts.gpus):
        return facts
    return replace(facts, driver=d, gpus=gpus, sources=sources)


# A library the loader could not open by its soname: libcudart.so.11.0, libcublas.so.12, cublas64_11.dll,
# cudart64_110.dll (CUDA 11.0), cudnn64_8.dll. cuDNN's soname major is cuDNN's; the runtime's and cuBLAS's are the
# CUDA major (libcublas.so.10 since CUDA 10.1).
_SONAME = lazy_compile(r"\b(?P<lib>(?:lib)?(?P<name>cudart|cublasLt|cublas|cudnn)(?:_\w{1,30})?)"
                     r"(?:\.so\.(?P<so>\d{1,3})(?:\.\d{1,3})*|64_(?P<dll>1\d|[2-9])\d?\.dll)")
# Directories the loader searches without LD_LIBRARY_PATH (ld.so's defaults and the multiarch ld.so.conf entries).
_DEFAULT_DIRS = frozenset({"/lib", "/usr/lib", "/lib64", "/usr/lib64", "/lib/x86_64-linux-gnu",
                           "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu"})


def _loader_path_notes(line: str, facts: Facts) -> list[str]:
    """For a library the loader could not open by its soname: which found toolkit or cuDNN has that soname, and
    the directory to add — a dlopen error for a library that exists is the loader path, not a missing install."""
    from doctor.matrix import vtuple

    m = _SONAME.search(line)
    if not m or ("cannot open shared object file" not in line and "not found" not in line):
        return []
    major = small_int(m.group("so") or m.group("dll") or "")
    if major is None:
        return []
    windows = m.group("dll") is not None
    path = (facts.env.get("LD_LIBRARY_PATH") or "").split(":")
    dirs: list[tuple[str, str]] = []
    if m.group("name") == "cudnn":
        for c in facts.cudnn:
            if c.source == "library" and c.location and c.location.startswith("/") and \
                    (vtuple(c.version) or (0,))[0] == major:
                dirs.append((c.location.rsplit("/", 1)[0], f"cuDNN {c.version}"))
    else:
        for t in facts.toolkits:
            if t.source != "pip" and t.root.startswith("/") and (vtuple(t.version) or (0,))[0] == major:
                dirs.append((f"{t.root}/bin" if windows else f"{t.root}/lib64", f"CUDA {t.version} at {t.root}"))
    loaded = {r.path.rsplit("/", 1)[0] for r in (facts.loader.libcudart, facts.loader.libcudnn) if r and r.path}
    out = []
    for d, what in dict(dirs).items():
        if d in path or d in loaded or d in _DEFAULT_DIRS:
            continue  # the loader searches it already: the path is not the cause
        how = (f"add {d} to PATH" if windows else f"add it — `export LD_LIBRARY_PATH={d}:$LD_LIBRARY_PATH`, or "
               "list it in /etc/ld.so.conf.d/ and run `sudo ldconfig`")
        out.append(f"{what} has {m.group('lib')} (major {major}), but the loader does not look in {d}: {how}.")
    return out


def _run_checks(facts: Facts, codes: set[str], ctx: Any) -> dict[str, tuple[str, str | None, list[Any]]]:
    from doctor.checks import REGISTRY
    from doctor.pipeline import diagnose

    checks = [c for c in REGISTRY if c.id in codes]  # registry order, each check once
    report = diagnose(facts, checks=checks, ctx=ctx)
    out = {}
    for res in report.checks:
        out[res.id] = (res.status, res.reason, [f for f in report.findings if f.check == res.id])
    return out




def _verdict(cause: Cause, results: dict[str, tuple[str, str | None, list[Any]]], judged: bool) -> CauseVerdict:
    if cause.code.startswith(UNCHECKED):
        return CauseVerdict(cause.code, cause.text, NOT_CHECKED, "no fact gpu-doctor collects shows this")
    if not judged:
        return CauseVerdict(cause.code, cause.text, NOT_CHECKED, "no machine was inspected")
    if cause.code not in results:
        return CauseVerdict(cause.code, cause.text, UNKNOWN, f"no check named {cause.code}")
    status, reason, findings = results[cause.code]
    worst = max(findings, key=lambda f: SEVERITY_RANK.get(f.severity, 0), default=None)
    finding = worst.to_dict() if worst is not None else None
    if status in ("fail", "warn"):
        return CauseVerdict(cause.code, cause.text, APPLIES, None, finding)
    if status in ("ok", "info"):
        return CauseVerdict(cause.code, cause.text, RULED_OUT, None, finding)
    if status == "not_applicable":
        return CauseVerdict(cause.code, cause.text, NOT_APPLICABLE, reason)
    if status == "crashed":
        return CauseVerdict(cause.code, cause.text, UNKNOWN, f"the check crashed: {reason}", finding)
    return CauseVerdict(cause.code, cause.text, UNKNOWN, reason)


# Causes whose check answers "does not apply" from a fact that a bug report cannot state: a collect_env
# report never says whether it ran in a container, so "not in a container" would be a guess there.
_NEEDS_PROBE = {
    "container.no_gpu_passthrough": ("host.container", "whether it ran in a container"),
    "container.toolkit_missing": ("host.container", "whether it ran in a container"),
}


def _unknowable(v: CauseVerdict, facts: Facts | None) -> CauseVerdict:
    need = _NEEDS_PROBE.get(v.code)
    if facts is None or need is None or v.status not in (NOT_APPLICABLE, RULED_OUT):
        return v
    fact, what = need
    # A live collection ran the host probes ("driver" is its marker); a report states only what it says.
    if facts.host.container or fact in facts.sources or "driver" in facts.sources:
        return v
    return CauseVerdict(v.code, v.text, UNKNOWN, f"the facts do not say {what}")


# --- what the message itself says ---------------------------------------------------------------

_SIZE = r"([\d.]+) (B|bytes|KiB|MiB|GiB|TiB)"
_OOM_NEW = lazy_compile(rf"Tried to allocate {_SIZE}\. GPU (\d+) has a total capac\w* of {_SIZE} of which {_SIZE} is "
                      rf"free\.(?: Including non-PyTorch memory, this process has {_SIZE} memory in use\.)?")
_OOM_OLD = lazy_compile(rf"Tried to allocate {_SIZE} \(GPU (\d+); {_SIZE} total capacity; {_SIZE} already allocated; "
                      rf"{_SIZE} free; {_SIZE} reserved in total by PyTorch\)")
_UNITS = {"B": 1, "bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def _gib(number: str, unit: str) -> float:
    try:
        return float(number) * _UNITS[unit] / 2**30
    except ValueError:
        return 0.0


def _size(gib: float) -> str:
    return f"{gib:.2f} GiB" if gib >= 1 else f"{gib * 1024:.0f} MiB"


def _notes(sig: Signature, text: str) -> list[str]:
    text = bounded(text)
    notes = []
    if sig.id == "torch.out_of_memory":
        notes += _oom_notes(text)
    m = sig.pattern.search(text)
    groups = m.groupdict() if m else {}
    found = small_int(groups.get("found") or "")  # a pasted text may hold 5,000 digits here: not a version
    if sig.id == "torch.driver_too_old" and found is not None:
        n = found
        notes.append(f"'found version {n}' is the driver's CUDA version: {cuda_version(n) or 'unreadable'}; the torch "
                     "build needs a newer one.")
    if sig.id == "torch.arch_not_compatible" and groups.get("cc"):
        cc = groups["cc"]
        notes.append(f"The GPU is compute capability {cc[:-1]}.{cc[-1]} (sm_{cc}).")
    if sig.id == "jax.library_older_than_build" and groups.get("lib"):
        notes.append(f"JAX needs {groups['lib']} ≥ {groups['built']}; the one it loaded is {groups['found']}.")
    if sig.id == "tf.gpu_below_minimum_capability" and groups.get("cc"):
        notes.append(f"{groups['name'].strip()} is compute capability {groups['cc']}; this TensorFlow build supports "
                     f"compute capability {groups['min']} and newer, so it runs on the CPU.")
    if sig.id == "lib.driver_api_undefined_symbol" and groups.get("symbol"):
        notes.append(f"{groups['symbol']} is a CUDA driver API function, exported by the driver's libcuda.so.1: the "
                     "libcuda loaded does not have it.")
    if sig.id == "vllm.dtype_needs_capability" and groups.get("cc"):
        notes.append(f"{groups['name'].strip()} is compute capability {groups['cc']}; bfloat16 needs "
                     f"{groups['min']}: run the model in float16.")
    if sig.id == "xla.ptxas_newer_than_driver" and groups.get("ptxas"):
        ptxas = ".".join(groups["ptxas"].split(".")[:2])  # 12.5.40 is ptxas's component number: CUDA 12.5
        notes.append(f"ptxas is CUDA {ptxas} ({groups['ptxas']}); the driver supports CUDA {groups['driver']}.")
    if sig.id == "container.cuda_requirement" and groups.get("cuda"):
        notes.append(f"The image requires a driver that supports CUDA {groups['cuda']} (nvidia-smi's 'CUDA Version' "
                     "on the host must be at least that).")
    return notes


def _oom_notes(text: str) -> list[str]:
    m = _OOM_NEW.search(text)
    if m:
        want, gpu, total, free = _gib(*m.group(1, 2)), m.group(3), _gib(*m.group(4, 5)), _gib(*m.group(6, 7))
        note = f"GPU {gpu}: {_size(total)} in total, {_size(free)} free, {_size(want)} requested."
        if m.group(8):
            mine = _gib(*m.group(8, 9))
            others = max(total - free - mine, 0.0)
            note += f" This process holds {_size(mine)}; other processes hold about {_size(others)}"
            note += (": they take a large share — free them first." if others > max(1.0, 0.1 * total)
                     else ": the memory is this program's own — the workload is too large for the GPU.")
        return [note]
    m = _OOM_OLD.search(text)
    if m:
        want, gpu, total = _gib(*m.group(1, 2)), m.group(3), _gib(*m.group(4, 5))
        allocated, free, reserved = _gib(*m.group(6, 7)), _gib(*m.group(8, 9)), _gib(*m.group(10, 11))
        others = max(total - free - reserved, 0.0)
        note = (f"GPU {gpu}: {_size(total)} in total, {_size(free)} free, {_size(want)} requested; PyTorch "
                f"reserved {_size(reserved)} ({_size(allocated)} allocated); about {_size(others)} is held "
                "outside PyTorch (other processes, the CUDA context).")
        return [note]
    return []


# --- renderings ---------------------------------------------------------------------------------


def to_dict(explanations: list[Explanation], facts_from: str | None) -> dict[str, Any]:
    return {
        "schema": EXPLAIN_SCHEMA,
        "matched": bool(explanations),
        "facts_from": facts_from,
        "matches": [
            {
                "id": e.signature.id,
                "title": e.signature.title,
                "matched_text": e.matched,
                "applies": [c.code for c in e.applies],
                "causes": [c.__dict__ for c in e.causes],
                "notes": e.notes,
                "fix": e.signature.fix,
                "source": e.signature.source,
            }
            for e in explanations
        ],
    }


MARKS = {APPLIES: "✗", RULED_OUT: "✓", NOT_APPLICABLE: "–", UNKNOWN: "?", NOT_CHECKED: "·"}
WORDS = {APPLIES: "applies here", RULED_OUT: "ruled out", NOT_APPLICABLE: "does not apply",
         UNKNOWN: "unknown", NOT_CHECKED: "not checked"}


def render_text(explanations: list[Explanation], facts_from: str | None) -> str:
    if not explanations:
        return ("No known error signature matches this text.\n"
                "`gpu-doctor explain --list` shows the messages gpu-doctor knows; `gpu-doctor check` inspects "
                "the whole machine.\n")
    lines: list[str] = []
    for e in explanations:
        sig = e.signature
        lines += [f"{sig.title}  [{sig.id}]", f"  matched: {e.matched}"]
        lines += [f"  {n}" for n in e.notes]
        applies = e.applies
        if facts_from is None:
            lines.append("  Possible causes (no machine inspected):")
            lines += [f"    - {c.text}" + ("" if c.code.startswith(UNCHECKED) else f"  ({c.code})") for c in e.causes]
        else:
            head = (f"  On {facts_from}:" if applies else
                    f"  On {facts_from} no cause could be confirmed; the candidates are:")
            lines.append(head)
            for c in e.causes:
                lines += _cause_lines(c)
        lines.append(f"  fix: {sig.fix}")
        lines.append(f"  source: {sig.source}")
        lines.append("")
    return "\n".join(lines)


def _cause_lines(c: CauseVerdict) -> list[str]:
    code = "" if c.code.startswith(UNCHECKED) else f"  ({c.code})"
    out = [f"    {MARKS[c.status]} {WORDS[c.status]}: {c.text}{code}"]
    if c.finding and c.status in (APPLIES, RULED_OUT):
        out.append(f"        {c.finding['title']}")
        fix = c.finding.get("fix") or {}
        if c.status == APPLIES and fix.get("summary"):
            out.append(f"        fix: {fix['summary'].splitlines()[0]}")
    elif c.reason and c.status in (NOT_APPLICABLE, UNKNOWN):
        out.append(f"        ({c.reason})")
    return out
