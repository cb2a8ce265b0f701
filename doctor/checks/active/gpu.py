"""The smoke test and the OOM probe, judged: a recorded :class:`~doctor.model.facts_active.DriverTest` and the
matrix's GPU specs in, findings out. Pure.

The test (doctor/active/gpu.py and its child) recorded, per GPU, what NVML said before, during and after it,
the kernels' results compared on the host, the rates it measured and the driver's errors; these rules say what
they mean: errors and hangs, wrong results, rates far below the GPU's and the link's peaks, new ECC errors and
slowdowns, the memory a program can allocate and where the rest went.
"""

from __future__ import annotations

import signal
from dataclasses import asdict
from typing import Any

from doctor.checks.active.cuerrors import meaning
from doctor.model.facts_active import (
    ActiveEnd,
    ActiveError,
    ActiveGpu,
    DriverTest,
    NvmlReading,
    PcieLink,
    TensorRate,
    Verified,
    known,
)
from doctor.model.findings import Evidence, Finding, Fix, FixStep
from doctor.model.severity import Severity

MIB = 1 << 20
AREA_SMOKE = "Smoke test"
AREA_OOM = "OOM probe"

# Below these fractions of the theoretical rate a measurement is a warning. Healthy systems reach about
# 80 % of the PCIe link with pinned copies, 80-90 % of peak memory bandwidth with a plain copy kernel and
# 90 % of peak FP32 with an FMA loop; 60 % leaves room for boost clocks and NUMA placement.
MIN_RATIO = {"pcie": 0.6, "memory": 0.6, "fp32": 0.6}

# GB/s per lane and direction after line encoding: gen 1-2 use 8b/10b, gen 3-5 128b/130b
# (2.5, 5, 8, 16, 32 GT/s); gen 6 (64 GT/s PAM4) carries 242 payload bytes per 256-byte FLIT.
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 8 * 128 / 130 / 8, 4: 16 * 128 / 130 / 8, 5: 32 * 128 / 130 / 8,
                 6: 64 * 242 / 256 / 8}

# A slowdown reason appearing during the test; sw_power_cap under a full FMA load is the GPU working as
# designed at its power limit, so it is information, not a warning.
SERIOUS_THROTTLE = {"hw_slowdown": "hardware slowdown (power brake or overheating signalled by the board)",
                    "hw_thermal_slowdown": "hardware thermal slowdown (the GPU is too hot)",
                    "hw_power_brake_slowdown": "power brake (the system's power supply asked the GPU to slow down)",
                    "sw_thermal_slowdown": "software thermal slowdown (the GPU is above its target temperature)"}

_XID = FixStep(["sh", "-c", "dmesg | grep -iE 'NVRM|Xid' | tail -n 20"], root=True,
               note="the driver's kernel log says why")
_NO_READING = NvmlReading()


def _spec_source(row: Any) -> str | None:
    """Where a GPU's peak figures were read (compat/gpus.toml `spec_source`, else the row's sources)."""
    row = row or {}
    source: str | None = row.get("spec_source") or row.get("source2") or row.get("source")
    return source


def _name(g: ActiveGpu) -> str | None:
    """The GPU's name as NVML gave it before the test, else as CUDA did."""
    return (g.nvml_before.name if g.nvml_before is not None else None) or g.name


def label(g: ActiveGpu) -> str:
    name = _name(g)
    return f"GPU {g.ordinal} ({name})" if name else f"GPU {g.ordinal}"


def _f(code: str, severity: Severity, title: str, detail: str = "", evidence: list[Evidence] | None = None,
       fix: str | None = None, steps: list[FixStep] | None = None, area: str = AREA_SMOKE) -> Finding:
    return Finding(code=code, severity=severity, title=title, detail=detail,
                   evidence=evidence or [], fix=Fix(fix or "Look closer:", steps or []) if fix or steps else None,
                   area=area, check=code)


# --- shared: errors, hangs, crashes ---------------------------------------------------------------


def error_finding(err: ActiveError, who: str, area: str) -> Finding:
    """A failed driver call (``err.step``: what the test was doing) as the finding its name means."""
    m = meaning(err.name or "")
    code_txt = f" ({err.code})" if err.code not in (None, -1) else ""
    title = f"{who + ': ' if who else ''}{err.call} failed with {err.name}{code_txt}"
    title += f": {err.text}" if err.text else ""
    detail = m.explanation + (f"\nIt happened while {err.step}." if err.step and who else "")
    evidence = [Evidence("cuda.error", f"{err.name}{code_txt}: {err.text}", f"libcuda:{err.call}")]
    if err.log:
        evidence.append(Evidence("cuda.jit_log", err.log, "libcuda:CU_JIT_ERROR_LOG_BUFFER"))
    return _f(m.code, m.severity, title, detail, evidence, m.fix, list(m.steps), area)


def end_findings(test: DriverTest, area: str) -> list[Finding]:
    """A hang (the watchdog fired) or a child that died without finishing."""
    end = test.end or ActiveEnd()
    gpus = {g.ordinal: g for g in test.gpus}
    at_gpu = test.last_step_gpu if test.last_step is not None else None
    g = gpus.get(at_gpu) if at_gpu is not None else None
    who = label(g) if g is not None else "The GPU test"
    step = test.last_step or "starting"
    if end.event == "hang":
        stuck = "" if end.reaped is not False else (
            " The process could not be killed: it is stuck inside the driver (uninterruptible), which only a GPU "
            "reset or a reboot ends.")
        return [_f("gpu.hang", "fail", f"{who} hung: '{step}' did not finish within {end.silent_for:g} s; "
                   "the doctor stopped the test",
                   "A kernel or driver call that never returns means a wedged GPU or driver: the kernel log "
                   "usually has an Xid (e.g. 79 fallen off the bus, 119/120 GSP timeout) naming the cause." + stuck,
                   [Evidence("active.step", step, "child progress"),
                    Evidence("active.watchdog_s", end.silent_for, "--timeout")],
                   "Read the kernel log; reset the GPU (or reboot) and run the smoke test again. Raise --timeout "
                   "only if the GPU is merely slow (a first JIT, many GPUs).",
                   [_XID, FixStep(["nvidia-smi", "--gpu-reset", "-i", str(at_gpu if at_gpu is not None else 0)],
                                  root=True, risk="restart")], area)]
    if end.event == "exit" and (end.returncode not in (0, None) or not test.done):
        rc = end.returncode
        how = f"exit {rc}" if rc is None or rc >= 0 else f"signal {_signame(-rc)}"
        tail = (end.stderr or end.error or "").strip().splitlines()
        return [_f("gpu.test_crashed", "fail", f"{who}: the test process died ({how}) while {step}",
                   "A crash inside the CUDA driver (a segmentation fault in libcuda) points at a driver/library "
                   "mismatch or a broken installation; a Python error is a bug in gpu-doctor.",
                   [Evidence("active.stderr", "\n".join(tail[-5:]) or None, "child stderr"),
                    Evidence("active.step", step, "child progress")],
                   "Run `gpu-doctor check`; if it finds nothing, please report this with the evidence.", None, area)]
    return []


def _signame(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return str(num)


def global_findings(test: DriverTest, area: str) -> list[Finding]:
    out = [error_finding(e, "", area) for e in test.errors]
    if not out and test.device_count == 0:
        out.append(_f("gpu.no_cuda_device", "fail", "cuInit succeeded but CUDA sees no GPU",
                      "CUDA_VISIBLE_DEVICES may hide every GPU.",
                      [Evidence("cuda.device_count", 0, "libcuda:cuDeviceGetCount")], area=area))
    return out


def _gpu_errors(g: ActiveGpu, area: str) -> list[Finding]:
    return [error_finding(e, label(g), area) for e in g.errors]


# --- the smoke test -------------------------------------------------------------------------------


def smoke_findings(test: DriverTest, matrix: Any) -> list[Finding]:
    out = global_findings(test, AREA_SMOKE)
    for g in test.gpus:
        out += _gpu_errors(g, AREA_SMOKE)
        out += correctness(g)
        out += performance(g, matrix)
        out += health_changes(g, AREA_SMOKE)
        if g.cleanup_problems and not g.errors:
            out.append(_f("gpu.cuda_error", "warn", f"{label(g)}: releasing the test's resources failed: "
                          + ", ".join(g.cleanup_problems),
                          evidence=[Evidence("active.cleanup", g.cleanup_problems, "libcuda")]))
    return out + end_findings(test, AREA_SMOKE)


def correctness(g: ActiveGpu) -> list[Finding]:
    out = []
    sax = g.saxpy
    who = label(g)
    if sax is not None:
        if sax.wrong == 0:
            out.append(_f("gpu.smoke", "ok", f"{who}: context, PTX JIT, copies and a kernel work: "
                          f"{sax.elements:,} of {sax.elements:,} elements exact",
                          evidence=[Evidence("smoke.saxpy.elements", sax.elements, "smoke:saxpy"),
                                    Evidence("smoke.jit_ms", g.jit_ms, "smoke:cuModuleLoadDataEx")]))
        else:
            out.append(_wrong(who, "the saxpy kernel", sax))
    if g.roundtrip_intact is False:
        out.append(_f("gpu.wrong_results", "fail", f"{who}: data copied to the GPU and back came back different",
                      "Host↔device copies corrupt data: a PCIe or memory fault.", steps=[_XID]))
    if g.device_copy_intact is False:
        out.append(_f("gpu.wrong_results", "fail", f"{who}: the copy kernel's output differs from its input",
                      "Device memory corrupts data.", steps=[_XID]))
    if g.fma is not None and g.fma.wrong:
        out.append(_wrong(who, "the FMA kernel", g.fma))
    return out


def _wrong(who: str, what: str, res: Verified) -> Finding:
    first = res.first_wrong[0] if res.first_wrong else None
    return _f("gpu.wrong_results", "fail",
              f"{who}: {what} returned {res.wrong:,} wrong element(s) of {res.elements:,}"
              + (f" (element {first.index}: {first.got:g} instead of {first.want:g})"
                 if first is not None else ""),
              "The GPU computed a wrong result without reporting an error: silent data corruption, the most "
              "dangerous GPU fault. Do not use this GPU for work until it is explained.",
              [Evidence("smoke.wrong", [asdict(w) for w in res.first_wrong], "smoke: host comparison")],
              "Reset the GPU and repeat; if it recurs, drain the node and RMA the GPU.", [_XID])


def _link(g: ActiveGpu) -> PcieLink | NvmlReading:
    """The PCIe link as read right after the copies (it trains down when idle), else before the test."""
    return g.pcie_after_copy or g.nvml_before or PcieLink()


def pcie_theoretical(g: ActiveGpu) -> float | None:
    link = _link(g)
    gen, width = link.pcie_gen, link.pcie_width
    if not gen or not width or gen not in PCIE_LANE_GBS:
        return None
    return PCIE_LANE_GBS[gen] * width


def performance(g: ActiveGpu, matrix: Any) -> list[Finding]:
    out: list[Finding] = []
    who = label(g)
    name = _name(g)
    row = matrix.gpu(name) if matrix is not None and name else None
    pcie, link = pcie_theoretical(g), _link(g)
    link_txt = f"the PCIe gen {link.pcie_gen} x{link.pcie_width} link" if pcie else None
    for key, value, what, call in (("h2d_gbs", g.h2d_gbs, "host→device", "cuMemcpyHtoD_v2"),
                                   ("d2h_gbs", g.d2h_gbs, "device→host", "cuMemcpyDtoH_v2")):
        if value is None:
            continue
        ev = [Evidence(f"smoke.{key}", round(value, 2),
                       f"smoke:{call} (pinned, {known(g.copy_bytes, 'copy size') // MIB} MiB, best of 3)")]
        if pcie:
            ev.append(Evidence("nvml.pcie_link", f"gen {link.pcie_gen} x{link.pcie_width}",
                               "nvml:nvmlDeviceGetCurrPcieLinkGeneration/Width"))
        out.append(_rate(who, f"{what} copy", value, "GB/s", pcie, link_txt, "pcie", ev, _pcie_causes(g, link)))
    if g.device_gbs is not None:
        spec = row.get("memory_bandwidth_gbs") if row else None
        out.append(_rate(who, "device memory bandwidth (copy kernel)", g.device_gbs, "GB/s", spec,
                         "NVIDIA's published peak" if spec else None, "memory",
                         [Evidence("smoke.device_gbs", round(g.device_gbs, 1), "smoke:copy_v4 (read + write)"),
                          *([Evidence("spec.memory_bandwidth_gbs", spec, _spec_source(row))]
                            if spec else [])],
                         _load_causes(g)))
    if g.fp32_tflops is not None:
        spec = row.get("fp32_tflops") if row else None
        out.append(_rate(who, "FP32 throughput (FMA kernel)", g.fp32_tflops, "TFLOP/s", spec,
                         "NVIDIA's published peak" if spec else None, "fp32",
                         [Evidence("smoke.fp32_tflops", round(g.fp32_tflops, 2), "smoke:fma_loop"),
                          *([Evidence("spec.fp32_tflops", spec, _spec_source(row))]
                            if spec else [])],
                         _load_causes(g)))
    return out


def _rate(who: str, what: str, value: float, unit: str, peak: float | None, peak_txt: str | None, kind: str,
          evidence: list[Evidence], causes: list[str]) -> Finding:
    shown = _num(value, unit)
    if not peak:
        return _f("gpu.underperforming", "info", f"{who}: {what} {shown}",
                  "No theoretical figure is known for this GPU or link (the compatibility data lists peaks only "
                  "where NVIDIA published them), so the measurement is shown as is.", evidence)
    ratio = value / peak
    title = f"{who}: {what} {shown}, {ratio:.0%} of {peak_txt} ({_num(peak, unit)})"
    if ratio >= MIN_RATIO[kind]:
        return _f("gpu.underperforming", "ok", title, evidence=evidence)
    likely = causes or ["no cause visible to NVML: look at the CPU socket the process ran on (NUMA), the IOMMU, "
                        "clocks locked with nvidia-smi -lgc, or a power limit set lower"]
    return _f("gpu.underperforming", "warn", title.replace(f", {ratio:.0%}", f": only {ratio:.0%}"),
              f"Below {MIN_RATIO[kind]:.0%} of the theoretical rate. Likely causes: " + "; ".join(likely) + ".",
              evidence, "Remove the cause named above and run `gpu-doctor smoke` again.",
              [FixStep(["nvidia-smi", "-q", "-d", "PERFORMANCE,CLOCK,POWER,PCIE"])])


def _num(value: float, unit: str) -> str:
    return f"{value:,.1f} {unit}" if value < 100 else f"{value:,.0f} {unit}"


def _pcie_causes(g: ActiveGpu, link: PcieLink | NvmlReading) -> list[str]:
    causes = []
    if link.pcie_width and link.pcie_width_max and link.pcie_width < link.pcie_width_max:
        causes.append(f"the PCIe link trained at x{link.pcie_width} of x{link.pcie_width_max} (slot, riser "
                      "or seating)")
    if link.pcie_gen and link.pcie_gen_max and link.pcie_gen < link.pcie_gen_max:
        causes.append(f"the PCIe link runs at gen {link.pcie_gen} of {link.pcie_gen_max} under load (BIOS "
                      "setting, riser, or a slower slot)")
    causes += _others(g)
    return causes


def _load_causes(g: ActiveGpu) -> list[str]:
    during = g.nvml_during or _NO_READING
    causes = [SERIOUS_THROTTLE.get(r, r.replace("_", " ")) for r in during.throttle_reasons or []]
    return causes + _others(g)


def _others(g: ActiveGpu) -> list[str]:
    procs = (g.nvml_during or g.nvml_before or _NO_READING).processes or []
    if not procs:
        return []
    names = ", ".join(f"{p.name or '?'} (pid {p.pid})" for p in procs[:3])
    return [f"other processes share the GPU: {names}"]


def health_changes(g: ActiveGpu, area: str) -> list[Finding]:
    """ECC counters and slowdown reasons: before the test vs during and after it."""
    out: list[Finding] = []
    before, after = g.nvml_before or _NO_READING, g.nvml_after or _NO_READING
    during = g.nvml_during or _NO_READING
    who = label(g)
    ecc: list[tuple[str, int | None, int | None, Severity, str]] = [
        ("ecc_uncorrected", before.ecc_uncorrected, after.ecc_uncorrected, "fail", "uncorrectable"),
        ("ecc_corrected", before.ecc_corrected, after.ecc_corrected, "warn", "corrected")]
    for key, b, a, sev, what in ecc:
        if isinstance(b, int) and isinstance(a, int) and a > b:
            out.append(_f("gpu.hardware_fault", sev, f"{who}: {a - b} new {what} ECC error(s) during the test "
                          f"(volatile count {b} → {a})",
                          "The GPU's memory produced errors while the test used it." + (
                              " Uncorrectable errors corrupt data and need a GPU reset (page retirement / row "
                              "remapping)." if sev == "fail" else " Corrected errors are harmless one by one; a "
                              "rising count predicts a failing memory."),
                          [Evidence(f"nvml.{key}.before", b, "nvml:nvmlDeviceGetTotalEccErrors(volatile)"),
                           Evidence(f"nvml.{key}.after", a, "nvml:nvmlDeviceGetTotalEccErrors(volatile)")],
                          "Check `nvidia-smi -q -d ECC,ROW_REMAPPER`; reset the GPU; RMA if the count keeps rising.",
                          [FixStep(["nvidia-smi", "-q", "-d", "ECC,ROW_REMAPPER"])], area))
    seen_before = set(before.throttle_reasons or [])
    new = [r for r in (during.throttle_reasons or []) + (after.throttle_reasons or []) if r not in seen_before]
    new = list(dict.fromkeys(new))
    serious = [r for r in new if r in SERIOUS_THROTTLE]
    if serious:
        out.append(_f("gpu.throttling", "warn", f"{who} slowed down during the test: "
                      + "; ".join(SERIOUS_THROTTLE[r] for r in serious),
                      "The GPU lowered its clocks under load for a reason outside the program: cooling, power "
                      "delivery or the board.",
                      [Evidence("nvml.throttle_reasons.before", sorted(seen_before),
                                "nvml:nvmlDeviceGetCurrentClocksEventReasons"),
                       Evidence("nvml.throttle_reasons.during", during.throttle_reasons,
                                "nvml:nvmlDeviceGetCurrentClocksEventReasons")],
                      "Check the cooling (fans, airflow, inlet temperature) and the power supply; `nvidia-smi -q -d "
                      "PERFORMANCE` shows the reasons live.", [FixStep(["nvidia-smi", "-q", "-d", "PERFORMANCE"])],
                      area))
    elif new:
        out.append(_f("gpu.throttling", "info", f"{who} reached a limit under load: " + ", ".join(
            r.replace("_", " ") for r in new), "Normal for a GPU at its power limit during a full-load kernel.",
            [Evidence("nvml.throttle_reasons.during", during.throttle_reasons,
                      "nvml:nvmlDeviceGetCurrentClocksEventReasons")], area=area))
    return out


# --- the OOM probe --------------------------------------------------------------------------------


def _mib(n: int | None) -> str:
    return "?" if n is None else f"{n / MIB:,.0f} MiB"


def oom_findings(test: DriverTest, matrix: Any) -> list[Finding]:
    out = global_findings(test, AREA_OOM)
    for g in test.gpus:
        if g.refused:
            out.append(refused(g, test.nvml_error))
            continue
        out += _gpu_errors(g, AREA_OOM)
        if g.total_allocatable is not None and g.largest_block is not None:
            out.append(capacity(g, matrix))
        out += recovery(g)
        out += health_changes(g, AREA_OOM)
    return out + end_findings(test, AREA_OOM)


# The OOM probe's idle allowance (doctor/active/gpu_child.py IDLE_USED_MIB / IDLE_USED_FRACTION), for the text.
IDLE_TEXT = "512 MiB or 2 % of its memory, the driver's own reservation on an idle GPU"


def refused(g: ActiveGpu, nvml_error: str | None = None) -> Finding:
    """Why the probe did not run. It runs only where the GPU's used memory is known to be about zero: another
    container's job is invisible to NVML's process list, but not to its memory counter."""
    before = g.nvml_before or _NO_READING
    procs = before.processes or []
    reason = g.refused_reason or ("processes" if procs else "memory_unknown")
    evidence = [Evidence("nvml.processes", [asdict(p) for p in before.processes]
                         if before.processes is not None else None, "nvml:nvmlDeviceGetComputeRunningProcesses"),
                Evidence("nvml.memory", {"total": before.memory_total, "used": before.memory_used},
                         "nvml:nvmlDeviceGetMemoryInfo")]
    if reason == "processes":
        who = ", ".join(f"{p.name or '?'} (pid {p.pid}, "
                        f"{_mib(p.used_bytes) if p.used_bytes is not None else '? MiB'})"
                        for p in procs)
        title = f"{label(g)}: the OOM probe did not run: {who} {'uses' if len(procs) == 1 else 'use'} this GPU"
    elif reason == "memory_in_use":
        title = (f"{label(g)}: the OOM probe did not run: {_mib(before.memory_used)} of "
                 f"{_mib(before.memory_total)} are in use, by processes NVML does not list (another "
                 "container or user)")
    else:
        why = (nvml_error or "NVML gave no reading of this GPU") if g.nvml_before is None else \
            "NVML does not report this GPU's memory use"
        title = f"{label(g)}: the OOM probe did not run: whether another program uses this GPU is unknown ({why})"
    return _f("oom.refused", "warn", title,
              "The probe takes every free byte of the GPU for a few seconds; a job running there could fail with "
              "'out of memory' meanwhile. It runs only where the GPU's used memory is known to be about zero (at "
              f"most {IDLE_TEXT}).", evidence,
              "Run it when the GPU is idle, or add --force to run it anyway.", area=AREA_OOM)


def capacity(g: ActiveGpu, matrix: Any) -> Finding:
    """Largest block and total allocatable, against what NVML says, and where the difference went."""
    who = label(g)
    before = g.nvml_before or _NO_READING
    with_ctx = g.nvml_with_context or _NO_READING
    total, largest = g.total_allocatable, g.largest_block
    assert total is not None and largest is not None  # the caller judges capacity only where both were measured
    cuda_free, cuda_total = g.cuda_free, g.cuda_total
    nvml_total, nvml_free = before.memory_total, before.memory_free
    lines: list[str] = []
    procs = before.processes or []
    held = sum(p.used_bytes or 0 for p in procs)
    if procs:
        lines.append(f"other processes hold {_mib(held)}: " + ", ".join(
            f"{p.name or '?'} (pid {p.pid}, {_mib(p.used_bytes)})" for p in procs[:5]))
    if before.memory_used is not None and before.memory_used > held + 64 * MIB:
        lines.append(f"{_mib(before.memory_used - held)} was in use before the test beyond the processes NVML "
                     "lists (the driver's own reservation, or processes in other containers this user cannot see)")
    if before.mig_mode and cuda_total and nvml_total and cuda_total < nvml_total:
        lines.append(f"MIG is on: this context sees a MIG slice of {_mib(cuda_total)}, not the GPU's "
                     f"{_mib(nvml_total)}")
    elif cuda_total and nvml_total and cuda_total < 0.95 * nvml_total:
        lines.append(f"CUDA sees {_mib(cuda_total)} of NVML's {_mib(nvml_total)} (a vGPU profile or MIG slice)")
    if with_ctx.memory_used is not None and before.memory_used is not None:
        ctx = with_ctx.memory_used - before.memory_used
        if ctx > 0:
            lines.append(f"this test's own CUDA context takes {_mib(ctx)} (every process pays this once per GPU)")
    if cuda_free is not None and cuda_free - total >= 4 * MIB:
        lines.append(f"{_mib(cuda_free - total)} that cuMemGetInfo reports free could not be allocated "
                     "(the driver's page tables and reserve)")
    frag = total - largest
    if frag > 2 * MIB:
        lines.append(f"free memory is fragmented: the largest single block is {_mib(largest)}, "
                     f"{_mib(frag)} less than the total")
    row = matrix.gpu(before.name or g.name) if matrix is not None else None
    spec_gib = row.get("memory_gib") if row else None
    if spec_gib and nvml_total and before.ecc_enabled and nvml_total < spec_gib * 1024 * MIB * 0.97:
        lines.append(f"ECC is on: the GPU reports {_mib(nvml_total)} of its {spec_gib} GiB (ECC reserves part of "
                     "the memory on some GPUs)")
    title = (f"{who}: {_mib(total)} allocatable in total, largest single block {_mib(largest)}"
             + (f"; NVML reported {_mib(nvml_free)} free of {_mib(nvml_total)}" if nvml_total else ""))
    severity: Severity = "ok"
    if largest < 0.9 * total:
        severity = "warn"  # a single large tensor does not fit although the total would
    ctx_cost = max(0, (with_ctx.memory_used or 0) - (before.memory_used or 0))
    unexplained = (nvml_free or 0) - total - ctx_cost
    if nvml_free and unexplained > 0.05 * (nvml_total or nvml_free):
        severity = "warn"
        lines.append(f"{_mib(unexplained)} of what NVML called free could not be allocated for no reason NVML shows")
    detail = ("Where the memory went: " + "; ".join(lines) + ".") if lines else \
        "Nearly all the memory NVML reports free can be allocated, in one block."
    evidence = [Evidence("oom.largest_block", largest,
                         f"libcuda:cuMemAlloc_v2 (binary search, {g.largest_calls} calls)"),
                Evidence("oom.total_allocatable", total, f"libcuda:cuMemAlloc_v2 ({g.total_blocks} blocks, "
                         f"{g.total_calls} calls)"),
                Evidence("cuda.mem_info", {"free": cuda_free, "total": cuda_total}, "libcuda:cuMemGetInfo_v2"),
                Evidence("nvml.memory", {"total": nvml_total, "used": before.memory_used, "free": nvml_free},
                         "nvml:nvmlDeviceGetMemoryInfo")]
    return _f("oom.capacity", severity, title, detail, evidence, area=AREA_OOM)


def recovery(g: ActiveGpu) -> list[Finding]:
    out = []
    who = label(g)
    rec = g.recovery
    if rec is not None:
        if rec.wrong == 0:
            out.append(_f("oom.recovery", "ok", f"{who}: after running out of memory the context still works: a new "
                          f"allocation and a kernel ({rec.elements:,} elements exact)",
                          evidence=[Evidence("oom.recovery", asdict(rec),
                                             "smoke:saxpy after CUDA_ERROR_OUT_OF_MEMORY")],
                          area=AREA_OOM))
        else:
            out.append(_wrong(who, "the kernel run after the out-of-memory error", rec))
    start, after, end = g.cuda_free, g.cuda_free_after_release, g.cuda_free_end
    if start is not None and after is not None:
        lost = max(start - after, start - (end if end is not None else start))
        if lost <= 0:
            out.append(_f("oom.released", "ok", f"{who}: every byte was released ({_mib(after)} free again)",
                          evidence=[Evidence("cuda.free", {"before": start, "after_release": after, "end": end},
                                             "libcuda:cuMemGetInfo_v2")], area=AREA_OOM))
        else:
            out.append(_f("oom.released", "warn", f"{who}: {_mib(lost)} did not come back after freeing every block",
                          "cuMemGetInfo reports less free memory after the probe freed all it allocated: the driver "
                          "kept memory (a leak in the driver, or another process started meanwhile).",
                          [Evidence("cuda.free", {"before": start, "after_release": after, "end": end},
                                    "libcuda:cuMemGetInfo_v2")], area=AREA_OOM))
    return out


# --- tensor cores: the framework smoke test's half-precision matrix products -----------------------

# A cuBLAS half-precision GEMM this large reaches 70-90 % of the dense tensor-core peak on a healthy GPU;
# 50 % leaves room for boost clocks, power limits and a first cuBLAS heuristic.
TENSOR_MIN_RATIO = 0.5
TENSOR_DTYPES = ("bf16", "fp16")


def tensor_core_peak(row: dict[str, Any] | None, dtype: str) -> float | None:
    """The reviewed dense tensor-core peak (compat/gpus.toml `bf16_tflops` / `fp16_tflops`), else None."""
    value = (row or {}).get(f"{dtype}_tflops")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def tensor_core_findings(who: str, gpu_name: str | None, rates: dict[str, TensorRate] | None, matrix: Any,
                         area: str = AREA_SMOKE, source: str = "torch.matmul") -> list[Finding]:
    """One finding per measured dtype: the achieved TFLOP/s, against the tensor-core peak when one is recorded.

    ``rates`` is what framework_child.tensor_core_rates measured (``FrameworkRun.matmul_tflops``): a
    :class:`TensorRate` per dtype ("bf16", "fp16"), with the rate or why it was skipped. Pure.
    """
    out: list[Finding] = []
    row = matrix.gpu(gpu_name) if matrix is not None and gpu_name else None
    for dtype in TENSOR_DTYPES:
        shown = dtype
        res = (rates or {}).get(dtype) or TensorRate()
        value = res.tflops
        if not isinstance(value, (int, float)) or value <= 0:
            continue
        what = f"{shown} matrix product (tensor cores)"
        how = f"{source}: {res.n}×{res.n} {shown}, {res.iters} iterations after warm-up, timed with CUDA events"
        ev = [Evidence(f"framework.{dtype}_tflops", round(value, 1), how)]
        peak = tensor_core_peak(row, dtype)
        if peak is None:
            out.append(_f("gpu.underperforming", "info", f"{who}: {what} {_num(value, 'TFLOP/s')}",
                          "No reviewed tensor-core peak is recorded for this GPU in the compatibility data "
                          f"(compat/gpus.toml `{dtype}_tflops`), so the figure is shown as is: compare it with the "
                          "dense (not sparse) figure of the GPU's datasheet.", ev, area=area))
            continue
        ev.append(Evidence(f"spec.{dtype}_tflops", peak, _spec_source(row)))
        ratio = value / peak
        title = f"{who}: {what} {_num(value, 'TFLOP/s')}, {ratio:.0%} of the tensor-core peak ({_num(peak, 'TFLOP/s')})"
        if ratio >= TENSOR_MIN_RATIO:
            out.append(_f("gpu.underperforming", "ok", title, evidence=ev, area=area))
            continue
        out.append(_f("gpu.underperforming", "warn", title.replace(f", {ratio:.0%}", f": only {ratio:.0%}"),
                      f"Below {TENSOR_MIN_RATIO:.0%} of the tensor cores' dense {shown} peak. Likely causes: another "
                      "process using the GPU, a power limit or clocks set lower, thermal throttling, or a framework "
                      "/ cuBLAS build that does not use the tensor cores of this GPU for this type.", ev,
                      "Run `gpu-doctor smoke` (FP32, clocks and slowdown reasons) and look at the GPU's processes.",
                      [FixStep(["nvidia-smi", "-q", "-d", "PERFORMANCE,CLOCK,POWER"])], area))
    return out
