"""Rules about the GPUs themselves: memory held by others, hardware faults, throttling, PCIe link."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from doctor.checks.common import finding, ok
from doctor.matrix import Matrix
from doctor.model.facts import Facts, Gpu, XidEvent
from doctor.model.findings import Evidence, Finding, FixStep
from doctor.model.severity import Severity
from doctor.registry import Context, NotApplicable, Skip, check, matrix_of
from doctor.safeio import lazy_compile

AREA = "GPUs"


def _gpus(facts: Facts) -> list[Gpu]:
    gpus = [g for g in facts.gpus if g.source != "pci"]
    if not gpus:
        raise NotApplicable("no GPU is visible to NVML or nvidia-smi")
    return gpus


def _name(g: Gpu) -> str:
    return f"GPU {g.index} ({g.name})" if g.name else f"GPU {g.index}"


def _gev(g: Gpu, field: str, source: str | None = None) -> Evidence:
    return Evidence(f"gpus[{g.index}].{field}", getattr(g, field), source or g.source)


@check("gpu.memory_in_use", AREA, "No other process holds most of a GPU's memory.")
def memory_in_use(facts: Facts, ctx: Context) -> list[Finding]:
    return _each_known(facts, _memory_in_use, "memory_used_mib", "memory use")


def _each_known(facts: Facts, rule: Any, field: str, what: str) -> list[Finding]:
    """Apply a per-GPU rule to the GPUs where ``field`` is known; skip the check when none is."""
    out = [f for g in _gpus(facts) if getattr(g, field) is not None for f in rule(g)]
    if not out:
        raise Skip(f"the {what} of every GPU is unknown ({field} not reported by NVML / nvidia-smi)")
    return out


def _memory_in_use(g: Gpu) -> Iterator[Finding]:
    if not g.memory_total_mib or g.memory_used_mib is None:
        return
    share = g.memory_used_mib / g.memory_total_mib
    if share < 0.5:
        yield ok("gpu.memory_in_use", f"{_name(g)}: {g.memory_total_mib - g.memory_used_mib} of "
                 f"{g.memory_total_mib} MiB free", _gev(g, "memory_used_mib"), _gev(g, "memory_total_mib"))
        return
    procs = sorted(g.processes, key=lambda p: -(p.used_mib or 0))
    who = ", ".join(f"{p.name or '?'} (pid {p.pid}, {p.used_mib if p.used_mib is not None else '?'} MiB)"
                    for p in procs[:5]) or "processes this user cannot see (another container or user)"
    yield finding(
        "gpu.memory_in_use", "warn",
        f"{_name(g)}: {g.memory_used_mib} of {g.memory_total_mib} MiB ({share:.0%}) already in use by {who}",
        "Memory held by other processes is the first cause of a surprising 'CUDA out of memory': your "
        "program gets only what is left.",
        [_gev(g, "memory_used_mib"), _gev(g, "memory_total_mib"), _gev(g, "processes")],
        fix="Stop the processes holding the memory, or pick another GPU with CUDA_VISIBLE_DEVICES.",
        steps=[FixStep(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv"])],
    )


def xid_catalog(m: Matrix | None) -> dict[int, dict[str, Any]]:
    """NVIDIA's Xid catalog as reviewed data (compat/xid.toml, part of the matrix the caller passed in); empty
    without a matrix: every Xid is then one to look up, none a verdict."""
    if m is None:
        return {}
    return {row["xid"]: row for row in m.rows("xid", "xid") if isinstance(row.get("xid"), int)}


ACTION_TEXT = {
    "restart_app": "restart the application (the GPU itself is fine)",
    "reset_gpu": "reset the GPU (`nvidia-smi -r -i N` with no process on it) or reboot",
    "reboot": "reboot the node",
    "drain_and_rma": "drain the node and, if it recurs after a reset, RMA the GPU",
    "check_platform": "check power, cooling, the PCIe slot/riser and the system BIOS; reboot to recover",
    "none": "nothing to do",
}


@check("gpu.hardware_fault", AREA, "No uncorrectable ECC errors, pending page retirement or Xid faults.")
def hardware_fault(facts: Facts, ctx: Context) -> Iterator[Finding]:
    gpus = [g for g in facts.gpus if g.source != "pci"]
    xids = facts.driver.xid_events
    if not gpus and not xids:
        raise NotApplicable("no GPU is visible and the kernel log has no Xid event")
    known = [g for g in gpus if (g.ecc_uncorrected, g.retired_pages_pending, g.remapped_rows_pending) !=
             (None, None, None)]
    if not known and not xids:
        raise Skip("no GPU reports its ECC, page-retirement or row-remapping state, and the kernel log has no "
                   "Xid event")
    for g in known:
        problems = []
        if g.ecc_uncorrected:
            problems.append(f"{g.ecc_uncorrected} uncorrectable ECC error(s)")
        if g.retired_pages_pending:
            problems.append("a retired memory page waiting for a GPU reset")
        if g.remapped_rows_pending:
            problems.append("a remapped memory row waiting for a GPU reset")
        if problems:
            yield finding(
                "gpu.hardware_fault", "fail", f"{_name(g)}: " + ", ".join(problems),
                "Uncorrectable memory errors corrupt results or kill jobs. A pending retirement/remap takes "
                "effect only after the GPU is reset; errors that come back after that mean failing memory.",
                [_gev(g, "ecc_uncorrected"), _gev(g, "retired_pages_pending"), _gev(g, "remapped_rows_pending")],
                fix="Drain the GPU, reset it (or reboot), and RMA it if the errors return.",
                steps=[FixStep(["nvidia-smi", "-q", "-d", "ECC,PAGE_RETIREMENT,ROW_REMAPPER", "-i", str(g.index)]),
                       FixStep(["nvidia-smi", "-r", "-i", str(g.index)], root=True, risk="restart")],
            )
        else:
            yield ok("gpu.hardware_fault", f"{_name(g)}: no uncorrectable ECC errors or pending retirements",
                     _gev(g, "ecc_uncorrected"))
    catalog = xid_catalog(ctx.matrix if isinstance(ctx.matrix, Matrix) else None) if xids else {}
    seen: dict[tuple[int, str | None], list[XidEvent]] = {}
    for e in xids:
        seen.setdefault((e.xid, e.pci_bus_id), []).append(e)
    for (xid, bus), events in seen.items():
        yield _xid_finding(facts, xid, bus, events, catalog.get(xid, {}))


# The kernel line's own word for how bad it is (NVLink5 Xids 144-150 and others print it).
_NONFATAL = lazy_compile(r"\bNon-?fatal\b", re.IGNORECASE)


def _xid_finding(facts: Facts, xid: int, bus: str | None, events: list[XidEvent], row: dict[str, Any]) -> Finding:
    count = len(events)
    klass = row.get("class", "unknown")
    action = row.get("action")
    nonfatal = all(e.message and _NONFATAL.search(e.message) for e in events)
    severity: Severity
    if not row:
        severity = "warn"  # not in the reviewed catalog: something to look up, not a verdict on the node
    elif nonfatal or klass in ("application", "info"):
        severity = "warn"  # a line that says Nonfatal never fails a node
    else:
        severity = "fail"
    kind = KIND_TEXT.get(klass, "a fault not in the reviewed catalog")
    what = row.get("description") or "not in the reviewed Xid catalog"
    source = facts.sources.get("driver.xid_events")
    ev_list = [Evidence("driver.xid_events", f"Xid {xid} on {bus} ×{count}", source)]
    if events[-1].message:
        ev_list.append(Evidence("driver.xid_events.message", events[-1].message[:300], source))
    if row.get("source"):
        ev_list.append(Evidence("compat/xid.toml", f"Xid {xid}: {row.get('mnemonic', what)}", row["source"]))
    if not row:
        detail = ("Xid events are the driver's record of GPU faults since boot. This Xid is not in gpu-doctor's "
                  "reviewed catalog: look it up in NVIDIA's Xid catalog "
                  "(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) before acting on the node.")
        fix = "See NVIDIA's Xid catalog for this code."
        title_kind = f"{kind} — look it up"
    else:
        detail = ("Xid events are the driver's record of GPU faults since boot. NVIDIA's catalog classes this one "
                  f"as {kind}.")
        if nonfatal:
            detail += (" The kernel line says the event was non-fatal: NVIDIA's catalog gives no immediate action "
                       "for the non-fatal subcodes; watch for it repeating or for Xid 48/94/95 following it.")
        fix = _sentence("nothing to do now; watch for repeats" if nonfatal else
                        ACTION_TEXT.get(action or "") or "See NVIDIA's Xid catalog for this code")
        title_kind = f"{kind}, non-fatal" if nonfatal else kind
    return finding("gpu.hardware_fault", severity,
                   f"Kernel log: Xid {xid} on GPU {bus or '?'} ({what}), {count}×: {title_kind}",
                   detail, ev_list, fix=fix)


KIND_TEXT = {"application": "an application fault", "driver": "a driver fault", "hardware": "a hardware fault",
             "info": "informational"}


def _sentence(text: str) -> str:
    text = text.rstrip(".")
    return text[:1].upper() + text[1:] + "."


SLOWDOWNS = {
    "hw_slowdown": "hardware slowdown (power or thermal emergency signal)",
    "hw_thermal_slowdown": "hardware thermal slowdown (the GPU is too hot)",
    "sw_thermal_slowdown": "software thermal slowdown",
    "hw_power_brake_slowdown": "power brake (the system's power supply asserted the brake)",
}


@check("gpu.throttling", AREA, "No GPU is being slowed down by heat or power.")
def throttling(facts: Facts, ctx: Context) -> list[Finding]:
    return _each_known(facts, _throttling, "throttle_reasons", "throttle state")


def _throttling(g: Gpu) -> Iterator[Finding]:
    active = [SLOWDOWNS[r] for r in g.throttle_reasons or [] if r in SLOWDOWNS]
    if not active:
        yield ok("gpu.throttling", f"{_name(g)}: not throttled", _gev(g, "throttle_reasons"))
        return
    yield finding(
        "gpu.throttling", "warn", f"{_name(g)} is throttled: " + "; ".join(active),
        f"At {g.temperature_c if g.temperature_c is not None else '?'} °C and "
        f"{g.power_draw_w if g.power_draw_w is not None else '?'} W the clocks are being held down, so every "
        "job on it runs slower than the datasheet says.",
        [_gev(g, "throttle_reasons"), _gev(g, "temperature_c"), _gev(g, "power_draw_w")],
        fix="Check the cooling (fans, airflow, data-centre inlet temperature) and the power supply/cabling.",
        steps=[FixStep(["nvidia-smi", "-q", "-d", "PERFORMANCE,TEMPERATURE,POWER", "-i", str(g.index)])],
    )


@check("gpu.pcie_degraded", AREA, "Each GPU's PCIe link trained as wide as its platform can give it: a data-center "
       "GPU below its slot's width, or any GPU at x1/x4, is a finding; a consumer, workstation or laptop GPU at x8 "
       "is normal.")
def pcie_degraded(facts: Facts, ctx: Context) -> list[Finding]:
    m = matrix_of(ctx)
    return _each_known(facts, lambda g: _pcie_degraded(g, _segment(m, g)), "pcie_width_max", "PCIe link width")


def _segment(m: Matrix, g: Gpu) -> str | None:
    if g.name and "laptop" in g.name.lower():
        return "laptop"
    row = m.gpu(g.name)
    return str(row["segment"]) if row and row.get("segment") else None


# GPUs that cloud instances attach at x8 of the card's x16 by design (issue 11: T4 instances).
_X8_BY_DESIGN = ("t4",)


def _pcie_degraded(g: Gpu, segment: str | None) -> Iterator[Finding]:
    if g.pcie_width_current is None or g.pcie_width_max is None:
        return
    # Idle GPUs lower their link *generation* to save power; that is not a fault. The width does
    # not change with load, so a narrower link is a training problem (slot, riser, dirty contacts) —
    # or the platform's design: consumer boards split x16 into x8/x8 for two GPUs, laptops and some
    # cloud instances wire x8.
    cur, top = g.pcie_width_current, g.pcie_width_max
    evidence = [_gev(g, "pcie_width_current"), _gev(g, "pcie_width_max"), _gev(g, "pcie_gen_current"),
                _gev(g, "pcie_gen_max"), Evidence(f"gpus[{g.index}].segment", segment, "matrix (gpus.toml)")]
    by_design = segment in ("consumer", "workstation", "laptop", "embedded") or (
        bool(g.name and any(w in _norm(g.name).split() for w in _X8_BY_DESIGN)))
    if cur >= top or (cur >= 8 and (by_design or segment is None)):
        note = "" if cur >= top else (" — normal for this platform (boards with two GPUs split x16 into x8/x8; "
                                      "laptops and some cloud instances wire x8)")
        width = f"x{cur}" if cur >= top else f"x{cur} of x{top}"
        yield ok("gpu.pcie_degraded", f"{_name(g)}: PCIe {width}, gen "
                 f"{g.pcie_gen_current if g.pcie_gen_current is not None else '?'} (max "
                 f"{g.pcie_gen_max if g.pcie_gen_max is not None else '?'}){note}", *evidence)
        return
    why = (f"A data-center GPU trained narrower than its slot (x{cur} of x{top})" if cur >= 8 else
           f"A x{cur} link is far below what a GPU slot should give (x{top} possible)")
    yield finding(
        "gpu.pcie_degraded", "warn",
        f"{_name(g)}: PCIe link runs at x{cur} of x{top}",
        f"{why}: host↔device bandwidth drops in proportion, so data loading and "
        "multi-GPU traffic over PCIe slow down. Usual causes: a riser or cable, a slot wired narrower, or "
        "dirty/poorly seated contacts.",
        evidence,
        fix="Reseat the card (or move it to a full-width slot), check risers/cables and the BIOS PCIe settings.",
    )


def _norm(name: str) -> str:
    return name.lower().replace("-", " ")


CHECKS = [memory_in_use, hardware_fault, throttling, pcie_degraded]
