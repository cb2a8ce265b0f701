"""What the TUI shows, computed from a Report without Textual: areas, counts, GPU rows, exports.

Presentation only: grouping, ordering, wording of facts already judged by the engine. No rule
lives here; a test imports this module and asserts Textual is not loaded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from doctor.model.records import dataclass, field
from doctor.model.severity import LEVELS, STATUS_MARKS

if TYPE_CHECKING:
    from doctor.model.facts import Facts, Gpu
    from doctor.model.findings import Evidence, Finding
    from doctor.model.report import CheckResult, Report

# The TUI's first frame imports this module (Source, the marks and words) and nothing of the engine: the model's
# classes, the renderers and the pipeline are imported by the functions that read a report (issue 23).

MARKS = {**STATUS_MARKS, "none": LEVELS["info"].mark}  # "none": an area without findings
STATUS_WORDS = {"fail": "NOT READY", "warn": "usable, with warnings", "ok": "ready",
                "unknown": "UNKNOWN (too little evidence)"}
NOT_RUN = ("skipped", "not_applicable")
SEVERITY_ORDER = {"none": -1, "ok": 0, "info": 1, "warn": 2, "fail": 3, "error": 3}


@dataclass(frozen=True)
class Source:
    """What the TUI looks at: this machine (live) or a recorded snapshot (an example, a file).

    ``load`` gives fresh facts: it probes this machine (slow: the app calls it in a worker) or
    re-reads a file. ``facts`` is None for a live host until the first collection has finished.
    """

    title: str
    description: str = ""
    facts: Facts | None = None
    live: bool = False
    load: Callable[[], Facts] | None = None
    origin: str = ""


@dataclass(frozen=True)
class AreaView:
    """One area of the report: its problems first, then what passed and what was not checked."""

    name: str
    problems: list[Finding] = field(default_factory=list)  # fail and warn, report order
    passed: list[Finding] = field(default_factory=list)  # ok and info
    not_checked: list[CheckResult] = field(default_factory=list)

    @property
    def status(self) -> str:
        if any(f.severity == "fail" for f in self.problems):
            return "fail"
        if self.problems:
            return "warn"
        return "ok" if self.passed else "none"

    def count(self, severity: str) -> int:
        return sum(1 for f in (*self.problems, *self.passed) if f.severity == severity)

    def counts_text(self) -> str:
        parts = [f"{n}{MARKS[s]}" for s in ("fail", "warn", "ok") if (n := self.count(s))]
        return " ".join(parts) or "not checked"


def areas(report: Report) -> list[AreaView]:
    """The report's areas in the fixed order of doctor.model.findings.AREAS (then any other, sorted)."""
    from doctor.model.findings import AREAS

    names = list(AREAS)
    extra = {f.area for f in report.findings} | {c.area for c in report.checks}
    names += sorted(a for a in extra if a not in names)
    out = []
    for name in names:
        found = [f for f in report.findings if f.area == name]
        quiet = [c for c in report.checks if c.area == name and c.status in NOT_RUN]
        if not found and not any(c.area == name for c in report.checks):
            continue  # an area no check of this run belongs to (e.g. no --require gate given)
        if name == "Active tests" and not found and all(c.status == "not_applicable"
                                                        for c in report.checks if c.area == name):
            continue  # run on request (`smoke`, `oom`): without a recorded test there is nothing to say
        out.append(AreaView(name, [f for f in found if f.severity in ("fail", "warn")],
                            [f for f in found if f.severity in ("ok", "info")], quiet))
    return out


def first_problem(report: Report) -> Finding | None:
    """Where the cursor starts: the first failure, else the first warning."""
    for sev in ("fail", "warn"):
        hit = next((f for f in report.findings if f.severity == sev), None)
        if hit:
            return hit
    return None


ACTIVE_AREA = "Active tests"


def with_active(report: Report, results: Mapping[str, Any]) -> Report:
    """The report with what the active tests run in this session found (their findings in "Active tests", their
    measurements in the facts), so that the header counts them and every export carries them."""
    done = [o for o in results.values() if getattr(o, "findings", None) or getattr(o, "active", None)]
    if not done:
        return report
    facts = report.facts
    measured = [o.active for o in done if getattr(o, "active", None) is not None]
    if measured:
        from doctor.model.facts_active import ActiveFacts

        merged = facts.active or ActiveFacts()
        for m in measured:
            merged = merged.merged(m)
        facts = replace(facts, active=merged)
    found = [replace(f, area=ACTIVE_AREA) for o in done for f in o.findings]
    return replace(report.with_findings(found), facts=facts)


def counts(report: Report) -> str:
    n = {s: sum(1 for f in report.findings if f.severity == s) for s in ("fail", "warn", "ok")}
    words = (("failure", "failures"), ("warning", "warnings"), ("ok", "ok"))
    return ", ".join(f"{n[s]} {w[0] if n[s] == 1 else w[1]}" for s, w in zip(("fail", "warn", "ok"), words,
                                                                           strict=True))


def status_line(report: Report) -> str:
    return f"{MARKS[report.status]} {STATUS_WORDS[report.status]}: {counts(report)}"


def host_line(report: Report) -> str:
    """OS, kernel, driver (module / user space), CUDA driver API, GPU count and matrix, on one line."""
    f = report.facts
    d = f.driver
    os_name = f.host.os_pretty or "unknown OS"
    parts = [os_name + (f" (in {f.host.container})" if f.host.container else "")]
    if f.host.kernel:
        parts.append(f"kernel {f.host.kernel}")
    if d.kernel_module and d.kernel_module == d.userspace:
        parts.append(f"driver {d.kernel_module}")  # module and user space agree
    else:
        parts.append(f"module {d.kernel_module or 'not loaded'} / user space {d.userspace or 'none'}")
    parts.append(f"CUDA API {d.cuda_driver_api}" if d.cuda_driver_api else
                 f"CUDA {d.smi_cuda_version} (nvidia-smi)" if d.smi_cuda_version else "CUDA API unknown")
    gpus = driver_gpus(f)
    if gpus:
        parts.append(f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}")
    elif f.host.pci_nvidia_gpus:
        parts.append(f"{f.host.pci_nvidia_gpus} NVIDIA GPU(s) on PCI only")
    else:
        parts.append("no GPU visible")
    if report.matrix:
        parts.append(report.matrix)
    return " · ".join(parts)


# --- findings ---------------------------------------------------------------------------------


def split_evidence(f: Finding) -> tuple[list[Evidence], list[Evidence]]:
    """(facts the finding rests on, matrix rows it applied): a matrix row's source is its URL."""
    rules = [e for e in f.evidence if isinstance(e.source, str) and e.source.startswith(("http://", "https://"))]
    return [e for e in f.evidence if e not in rules], rules


def value_text(value: object) -> str:
    from doctor.model.findings import value_text as words

    return words(value)


# --- GPUs ---------------------------------------------------------------------------------------

# ECC before PCIe: at 80 columns the last column is the one cut, and an ECC error matters more than a link width.
GPU_COLUMNS = ("#", "Name", "CC", "Memory", "Util", "Temp", "Power", "ECC", "PCIe")


def memory_bar(used: int | None, total: int | None, width: int = 6) -> str:
    if used is None or not total:
        return "?"
    filled = max(0, min(width, round(width * used / total)))
    # The same precision on both sides: "11.1/11 GiB" read as more used than there is.
    return "█" * filled + "░" * (width - filled) + f" {used / 1024:.1f}/{total / 1024:.1f} GiB"


def _or_dash(value: object, unit: str = "") -> str:
    return "–" if value is None else f"{value}{unit}"


def gpu_row(g: Gpu) -> tuple[str, ...]:
    pcie = "–"
    if g.pcie_gen_current is not None or g.pcie_width_current is not None:
        pcie = f"gen{_or_dash(g.pcie_gen_current)} x{_or_dash(g.pcie_width_current)}"
        if (g.pcie_gen_max, g.pcie_width_max) != (g.pcie_gen_current, g.pcie_width_current):
            pcie += f" (max gen{_or_dash(g.pcie_gen_max)} x{_or_dash(g.pcie_width_max)})"
    power = "–" if g.power_draw_w is None else f"{g.power_draw_w:.0f} W"
    name = (g.name or "").removeprefix("NVIDIA ") or f"PCI {g.pci_bus_id} ({g.pci_device_id})"  # all are NVIDIA's
    return (_or_dash(g.index), name, _or_dash(g.compute_capability),
            memory_bar(g.memory_used_mib, g.memory_total_mib), _or_dash(g.utilization_pct, "%"),
            _or_dash(g.temperature_c, "°C"), power,
            "–" if g.ecc_uncorrected is None else f"{g.ecc_uncorrected} unc.", pcie)


_LONG_PATH = re.compile(r"(?<![\w.])(/[^\s/:,;()'\"`]+){4,}/?")


def tree_title(title: str, keep: int = 3) -> str:
    """A finding's title for the one-line tree: long paths lose their middle ("…/venv/bin/python3"), so the
    words after them ("is a CPU-only build") stay in sight. The detail pane shows the title whole."""
    def shorten(m: re.Match[str]) -> str:
        parts = m.group(0).rstrip("/").split("/")
        return "…/" + "/".join(parts[-keep:]) if len(m.group(0)) > 24 else m.group(0)

    return _LONG_PATH.sub(shorten, title)


_FIRST_STEP = re.compile(r"^step_1\(\) \{$", re.M)


def fold_script(script: str) -> tuple[str, int]:
    """The script as the fix view shows it: its header (what it changes, and why), then the steps; the helper
    functions between them (dry-run, log, OS guard: the same in every script) folded into one comment line.
    Returns (text, lines folded); saving or copying takes the whole script."""
    lines = script.splitlines()
    header = next((i for i, line in enumerate(lines) if line and not line.startswith("#")), None)
    if header is not None:  # the header's own usage notes (# Options: …) are helpers too; its plan is not
        header = next((i for i in range(header) if lines[i].startswith("# Options:")), header)
    step = _FIRST_STEP.search(script)
    if header is None or step is None:
        return script, 0
    first_step = script.count("\n", 0, step.start())
    folded = first_step - header
    if folded < 10:
        return script, 0
    note = (f"# … {folded} lines folded: options and helpers (--dry-run, the log, the OS guard); "
            "s saves the whole script")
    return "\n".join([*lines[:header], note, "", *lines[first_step:]]) + "\n", folded


def driver_gpus(facts: Facts) -> list[Gpu]:
    """GPUs a driver answered for (NVML or nvidia-smi); PCI-only entries are not in the table."""
    return [g for g in facts.gpus if g.source != "pci"]


def no_table_reason(facts: Facts) -> list[str]:
    """Why there is no GPU table, quoting the facts that say so (nothing is judged here)."""
    d = facts.driver
    lines = ["No GPU answered NVML or nvidia-smi, so there is nothing to tabulate."]
    pci = [g for g in facts.gpus if g.source == "pci"]
    if pci:
        lines.append("On the PCI bus: " + ", ".join(f"{g.pci_bus_id} (device {g.pci_device_id})" for g in pci) + ".")
    elif facts.host.pci_nvidia_gpus == 0:
        lines.append("The PCI bus lists no NVIDIA display or 3D controller.")
    elif facts.host.pci_nvidia_gpus is None:
        lines.append("The PCI bus could not be read.")
    if d.nvml_error:
        lines.append(f"NVML: {d.nvml_error}.")
    if d.cuda_init_error:
        lines.append(f"cuInit: {d.cuda_init_error}.")
    if facts.host.container:
        lines.append(f"This is a {facts.host.container} container: its GPUs are the ones passed in by the host.")
    lines += [f"{e.probe}: {e.reason}" for e in facts.errors if e.probe in ("native", "nvml", "nvidia-smi", "gpus")]
    lines.append("The Diagnosis view says what to do about it.")
    return lines


# --- exports ------------------------------------------------------------------------------------

# Every format of the renderer registry (doctor.pipeline.FORMATS) is offered, rendered by it and saved under the
# registry's file name: a new format appears here. The first ones keep the TUI's own labels.
_LABELS = {"json": "report (JSON, gpu-doctor.report/v1)", "markdown": "report (Markdown)"}
_FIRST = ("json", "markdown")  # offered first, then the facts, then the other formats in the registry's order
_FACTS = {"facts.json": "facts snapshot (JSON, gpu-doctor.facts/v1)"}


def _registered() -> dict[str, Any]:
    """The registered formats by the file name an export saves each as, the first ones first."""
    from doctor.pipeline import FORMATS

    return {f.default_file: f for f in sorted(FORMATS.values(), key=lambda f: f.name not in _FIRST)}


def exports() -> dict[str, str]:
    """What the export dialog offers, {kind: label}: the report in every registered format, and the facts."""
    labels = {kind: (f.name, _LABELS.get(f.name, f"report ({f.name}: {f.about})")) for kind, f in _registered().items()}
    return {**{k: label for k, (name, label) in labels.items() if name in _FIRST}, **_FACTS,
            **{k: label for k, (name, label) in labels.items() if name not in _FIRST}}


def __getattr__(name: str) -> Any:
    if name == "EXPORTS":  # the registry as it is when first asked
        return exports()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def export_text(kind: str, report: Report, title: str = "") -> str:
    """What an export writes: the facts snapshot, or the report as the registered format renders it (in a file:
    no colour; ``title``, the source's name, heads the Markdown)."""
    if kind in _FACTS:
        return report.facts.to_json()
    registered = _registered()
    if kind in registered:
        from doctor.pipeline import render

        return render(report, registered[kind].name, colour=False, title=title)
    raise ValueError(f"unknown export {kind!r}")
