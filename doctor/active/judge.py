"""Findings from what the smoke test and the OOM probe measured. Pure: results (JSON) + matrix in, findings out.

The results are what :mod:`doctor.active.gpu` assembled from the child's events::

    {"mode": "smoke"|"oom", "global": {...}, "errors": [global errors],
     "gpus": [{"ordinal": 0, "name": ..., "errors": [...], "last_step": ..., <facts>}],
     "end": {"event": "exit"|"hang", ...}}
"""

from __future__ import annotations

import signal
from typing import Any

from doctor.active.cuerrors import meaning
from doctor.model.findings import Evidence, Finding, Fix, FixStep

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


def _spec_source(row: Any) -> str | None:
    """Where a GPU's peak figures were read (compat/gpus.toml `spec_source`, else the row's sources)."""
    row = row or {}
    return row.get("spec_source") or row.get("source2") or row.get("source")


def label(g: dict[str, Any]) -> str:
    name = (g.get("nvml_before") or {}).get("name") or g.get("name")
    return f"GPU {g['ordinal']} ({name})" if name else f"GPU {g['ordinal']}"


def _f(code: str, severity: str, title: str, detail: str = "", evidence: list[Evidence] | None = None,
       fix: str | None = None, steps: list[FixStep] | None = None, area: str = AREA_SMOKE) -> Finding:
    return Finding(code=code, severity=severity, title=title, detail=detail,  # type: ignore[arg-type]
                   evidence=evidence or [], fix=Fix(fix or "Look closer:", steps or []) if fix or steps else None,
                   area=area, check=code)


# --- shared: errors, hangs, crashes ---------------------------------------------------------------


def error_finding(err: dict[str, Any], who: str, step: str | None, area: str) -> Finding:
    e = err
    m = meaning(e.get("name") or "")
    code_txt = f" ({e['code']})" if e.get("code") not in (None, -1) else ""
    title = f"{who + ': ' if who else ''}{e.get('call')} failed with {e.get('name')}{code_txt}"
    title += f": {e['text']}" if e.get("text") else ""
    detail = m.explanation + (f"\nIt happened while {step}." if step and who else "")
    evidence = [Evidence("cuda.error", f"{e.get('name')}{code_txt}: {e.get('text')}", f"libcuda:{e.get('call')}")]
    if e.get("log"):
        evidence.append(Evidence("cuda.jit_log", e["log"], "libcuda:CU_JIT_ERROR_LOG_BUFFER"))
    return _f(m.code, m.severity, title, detail, evidence, m.fix, list(m.steps), area)


def end_findings(results: dict[str, Any], area: str) -> list[Finding]:
    """A hang (the watchdog fired) or a child that died without finishing."""
    end = results.get("end") or {}
    gpus = {g["ordinal"]: g for g in results.get("gpus", [])}
    where = results.get("last_step") or {}
    g = gpus.get(where.get("gpu")) if where.get("gpu") is not None else None
    who = label(g) if g else "The GPU test"
    step = where.get("step") or "starting"
    if end.get("event") == "hang":
        stuck = "" if end.get("reaped", True) else (
            " The process could not be killed: it is stuck inside the driver (uninterruptible), which only a GPU "
            "reset or a reboot ends.")
        return [_f("gpu.hang", "fail", f"{who} hung: '{step}' did not finish within {end.get('silent_for'):g} s; "
                   "the doctor stopped the test",
                   "A kernel or driver call that never returns means a wedged GPU or driver: the kernel log "
                   "usually has an Xid (e.g. 79 fallen off the bus, 119/120 GSP timeout) naming the cause." + stuck,
                   [Evidence("active.step", step, "child progress"),
                    Evidence("active.watchdog_s", end.get("silent_for"), "--timeout")],
                   "Read the kernel log; reset the GPU (or reboot) and run the smoke test again. Raise --timeout "
                   "only if the GPU is merely slow (a first JIT, many GPUs).",
                   [_XID, FixStep(["nvidia-smi", "--gpu-reset", "-i", str(where.get("gpu", 0))], root=True,
                                  risk="restart")], area)]
    if end.get("event") == "exit" and (end.get("returncode") not in (0, None) or not results.get("done")):
        rc = end.get("returncode")
        how = f"exit {rc}" if rc is None or rc >= 0 else f"signal {_signame(-rc)}"
        tail = (end.get("stderr") or end.get("error") or "").strip().splitlines()
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


def global_findings(results: dict[str, Any], area: str) -> list[Finding]:
    out = [error_finding(e["error"], "", e.get("step"), area) for e in results.get("errors", [])]
    glob = results.get("global") or {}
    if not out and glob.get("device_count") == 0:
        out.append(_f("gpu.no_cuda_device", "fail", "cuInit succeeded but CUDA sees no GPU",
                      "CUDA_VISIBLE_DEVICES may hide every GPU.",
                      [Evidence("cuda.device_count", 0, "libcuda:cuDeviceGetCount")], area=area))
    return out


def _gpu_errors(g: dict[str, Any], area: str) -> list[Finding]:
    return [error_finding(e["error"], label(g), e.get("step"), area) for e in g.get("errors", [])]


# --- the smoke test -------------------------------------------------------------------------------


def smoke_findings(results: dict[str, Any], matrix: Any) -> list[Finding]:
    out = global_findings(results, AREA_SMOKE)
    for g in results.get("gpus", []):
        out += _gpu_errors(g, AREA_SMOKE)
        out += correctness(g)
        out += performance(g, matrix)
        out += health_changes(g, AREA_SMOKE)
        if g.get("cleanup_problems") and not g.get("errors"):
            out.append(_f("gpu.cuda_error", "warn", f"{label(g)}: releasing the test's resources failed: "
                          + ", ".join(g["cleanup_problems"]),
                          evidence=[Evidence("active.cleanup", g["cleanup_problems"], "libcuda")]))
    return out + end_findings(results, AREA_SMOKE)


def correctness(g: dict[str, Any]) -> list[Finding]:
    out = []
    sax = g.get("saxpy")
    who = label(g)
    if sax:
        if sax["wrong"] == 0:
            out.append(_f("gpu.smoke", "ok", f"{who}: context, PTX JIT, copies and a kernel work: "
                          f"{sax['elements']:,} of {sax['elements']:,} elements exact",
                          evidence=[Evidence("smoke.saxpy.elements", sax["elements"], "smoke:saxpy"),
                                    Evidence("smoke.jit_ms", g.get("jit_ms"), "smoke:cuModuleLoadDataEx")]))
        else:
            out.append(_wrong(who, "the saxpy kernel", sax))
    if g.get("roundtrip_intact") is False:
        out.append(_f("gpu.wrong_results", "fail", f"{who}: data copied to the GPU and back came back different",
                      "Host↔device copies corrupt data: a PCIe or memory fault.", steps=[_XID]))
    if g.get("device_copy_intact") is False:
        out.append(_f("gpu.wrong_results", "fail", f"{who}: the copy kernel's output differs from its input",
                      "Device memory corrupts data.", steps=[_XID]))
    if g.get("fma") and g["fma"]["wrong"]:
        out.append(_wrong(who, "the FMA kernel", g["fma"]))
    return out


def _wrong(who: str, what: str, res: dict[str, Any]) -> Finding:
    first = (res.get("first_wrong") or [{}])[0]
    return _f("gpu.wrong_results", "fail",
              f"{who}: {what} returned {res['wrong']:,} wrong element(s) of {res['elements']:,}"
              + (f" (element {first['index']}: {first['got']:g} instead of {first['want']:g})" if first else ""),
              "The GPU computed a wrong result without reporting an error: silent data corruption, the most "
              "dangerous GPU fault. Do not use this GPU for work until it is explained.",
              [Evidence("smoke.wrong", res.get("first_wrong"), "smoke: host comparison")],
              "Reset the GPU and repeat; if it recurs, drain the node and RMA the GPU.", [_XID])


def pcie_theoretical(g: dict[str, Any]) -> tuple[float | None, dict[str, Any]]:
    link = g.get("pcie_after_copy") or g.get("nvml_before") or {}
    gen, width = link.get("pcie_gen"), link.get("pcie_width")
    if not gen or not width or gen not in PCIE_LANE_GBS:
        return None, link
    return PCIE_LANE_GBS[gen] * width, link


def performance(g: dict[str, Any], matrix: Any) -> list[Finding]:
    out: list[Finding] = []
    who = label(g)
    name = (g.get("nvml_before") or {}).get("name") or g.get("name")
    row = matrix.gpu(name) if matrix is not None and name else None
    pcie, link = pcie_theoretical(g)
    link_txt = f"the PCIe gen {link.get('pcie_gen')} x{link.get('pcie_width')} link" if pcie else None
    for key, what in (("h2d_gbs", "host→device"), ("d2h_gbs", "device→host")):
        if g.get(key) is None:
            continue
        call = "cuMemcpyHtoD_v2" if key == "h2d_gbs" else "cuMemcpyDtoH_v2"
        ev = [Evidence(f"smoke.{key}", round(g[key], 2),
                       f"smoke:{call} (pinned, {g.get('copy_bytes', 0) // MIB} MiB, best of 3)")]
        if pcie:
            ev.append(Evidence("nvml.pcie_link", f"gen {link['pcie_gen']} x{link['pcie_width']}",
                               "nvml:nvmlDeviceGetCurrPcieLinkGeneration/Width"))
        out.append(_rate(who, f"{what} copy", g[key], "GB/s", pcie, link_txt, "pcie", ev, _pcie_causes(g, link)))
    if g.get("device_gbs") is not None:
        spec = row.get("memory_bandwidth_gbs") if row else None
        out.append(_rate(who, "device memory bandwidth (copy kernel)", g["device_gbs"], "GB/s", spec,
                         "NVIDIA's published peak" if spec else None, "memory",
                         [Evidence("smoke.device_gbs", round(g["device_gbs"], 1), "smoke:copy_v4 (read + write)"),
                          *([Evidence("spec.memory_bandwidth_gbs", spec, _spec_source(row))]
                            if spec else [])],
                         _load_causes(g)))
    if g.get("fp32_tflops") is not None:
        spec = row.get("fp32_tflops") if row else None
        out.append(_rate(who, "FP32 throughput (FMA kernel)", g["fp32_tflops"], "TFLOP/s", spec,
                         "NVIDIA's published peak" if spec else None, "fp32",
                         [Evidence("smoke.fp32_tflops", round(g["fp32_tflops"], 2), "smoke:fma_loop"),
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


def _pcie_causes(g: dict[str, Any], link: dict[str, Any]) -> list[str]:
    causes = []
    if link.get("pcie_width") and link.get("pcie_width_max") and link["pcie_width"] < link["pcie_width_max"]:
        causes.append(f"the PCIe link trained at x{link['pcie_width']} of x{link['pcie_width_max']} (slot, riser "
                      "or seating)")
    if link.get("pcie_gen") and link.get("pcie_gen_max") and link["pcie_gen"] < link["pcie_gen_max"]:
        causes.append(f"the PCIe link runs at gen {link['pcie_gen']} of {link['pcie_gen_max']} under load (BIOS "
                      "setting, riser, or a slower slot)")
    causes += _others(g)
    return causes


def _load_causes(g: dict[str, Any]) -> list[str]:
    during = g.get("nvml_during") or {}
    causes = [SERIOUS_THROTTLE.get(r, r.replace("_", " ")) for r in during.get("throttle_reasons") or []]
    return causes + _others(g)


def _others(g: dict[str, Any]) -> list[str]:
    procs = (g.get("nvml_during") or g.get("nvml_before") or {}).get("processes") or []
    if not procs:
        return []
    names = ", ".join(f"{p.get('name') or '?'} (pid {p.get('pid')})" for p in procs[:3])
    return [f"other processes share the GPU: {names}"]


def health_changes(g: dict[str, Any], area: str) -> list[Finding]:
    """ECC counters and slowdown reasons: before the test vs during and after it."""
    out: list[Finding] = []
    before, after = g.get("nvml_before") or {}, g.get("nvml_after") or {}
    during = g.get("nvml_during") or {}
    who = label(g)
    for key, sev, what in (("ecc_uncorrected", "fail", "uncorrectable"), ("ecc_corrected", "warn", "corrected")):
        b, a = before.get(key), after.get(key)
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
    seen_before = set(before.get("throttle_reasons") or [])
    new = [r for r in (during.get("throttle_reasons") or []) + (after.get("throttle_reasons") or [])
           if r not in seen_before]
    new = list(dict.fromkeys(new))
    serious = [r for r in new if r in SERIOUS_THROTTLE]
    if serious:
        out.append(_f("gpu.throttling", "warn", f"{who} slowed down during the test: "
                      + "; ".join(SERIOUS_THROTTLE[r] for r in serious),
                      "The GPU lowered its clocks under load for a reason outside the program: cooling, power "
                      "delivery or the board.",
                      [Evidence("nvml.throttle_reasons.before", sorted(seen_before),
                                "nvml:nvmlDeviceGetCurrentClocksEventReasons"),
                       Evidence("nvml.throttle_reasons.during", during.get("throttle_reasons"),
                                "nvml:nvmlDeviceGetCurrentClocksEventReasons")],
                      "Check the cooling (fans, airflow, inlet temperature) and the power supply; `nvidia-smi -q -d "
                      "PERFORMANCE` shows the reasons live.", [FixStep(["nvidia-smi", "-q", "-d", "PERFORMANCE"])],
                      area))
    elif new:
        out.append(_f("gpu.throttling", "info", f"{who} reached a limit under load: " + ", ".join(
            r.replace("_", " ") for r in new), "Normal for a GPU at its power limit during a full-load kernel.",
            [Evidence("nvml.throttle_reasons.during", during.get("throttle_reasons"),
                      "nvml:nvmlDeviceGetCurrentClocksEventReasons")], area=area))
    return out


# --- the OOM probe --------------------------------------------------------------------------------


def _mib(n: int | None) -> str:
    return "?" if n is None else f"{n / MIB:,.0f} MiB"


def oom_findings(results: dict[str, Any], matrix: Any) -> list[Finding]:
    out = global_findings(results, AREA_OOM)
    for g in results.get("gpus", []):
        if g.get("refused"):
            out.append(refused({**g, "nvml_error": (results.get("global") or {}).get("nvml_error")}))
            continue
        out += _gpu_errors(g, AREA_OOM)
        if g.get("total_allocatable") is not None and g.get("largest_block") is not None:
            out.append(capacity(g, matrix))
        out += recovery(g)
        out += health_changes(g, AREA_OOM)
    return out + end_findings(results, AREA_OOM)


# The OOM probe's idle allowance (doctor/active/gpu_child.py IDLE_USED_MIB / IDLE_USED_FRACTION), for the text.
IDLE_TEXT = "512 MiB or 2 % of its memory, the driver's own reservation on an idle GPU"


def refused(g: dict[str, Any]) -> Finding:
    """Why the probe did not run. It runs only where the GPU's used memory is known to be about zero: another
    container's job is invisible to NVML's process list, but not to its memory counter."""
    before = g.get("nvml_before") or {}
    procs = before.get("processes") or []
    reason = g.get("refused_reason") or ("processes" if procs else "memory_unknown")
    evidence = [Evidence("nvml.processes", before.get("processes"), "nvml:nvmlDeviceGetComputeRunningProcesses"),
                Evidence("nvml.memory", {"total": before.get("memory_total"), "used": before.get("memory_used")},
                         "nvml:nvmlDeviceGetMemoryInfo")]
    if reason == "processes":
        who = ", ".join(f"{p.get('name') or '?'} (pid {p.get('pid')}, "
                        f"{_mib(p.get('used_bytes')) if p.get('used_bytes') is not None else '? MiB'})"
                        for p in procs)
        title = f"{label(g)}: the OOM probe did not run: {who} use(s) this GPU"
    elif reason == "memory_in_use":
        title = (f"{label(g)}: the OOM probe did not run: {_mib(before.get('memory_used'))} of "
                 f"{_mib(before.get('memory_total'))} are in use, by processes NVML does not list (another "
                 "container or user)")
    else:
        why = (g.get("nvml_error") or "NVML gave no reading of this GPU") if not before else \
            "NVML does not report this GPU's memory use"
        title = f"{label(g)}: the OOM probe did not run: whether another program uses this GPU is unknown ({why})"
    return _f("oom.refused", "warn", title,
              "The probe takes every free byte of the GPU for a few seconds; a job running there could fail with "
              "'out of memory' meanwhile. It runs only where the GPU's used memory is known to be about zero (at "
              f"most {IDLE_TEXT}).", evidence,
              "Run it when the GPU is idle, or add --force to run it anyway.", area=AREA_OOM)


def capacity(g: dict[str, Any], matrix: Any) -> Finding:
    """Largest block and total allocatable, against what NVML says, and where the difference went."""
    who = label(g)
    before = g.get("nvml_before") or {}
    with_ctx = g.get("nvml_with_context") or {}
    total, largest = g["total_allocatable"], g["largest_block"]
    cuda_free, cuda_total = g.get("cuda_free"), g.get("cuda_total")
    nvml_total, nvml_free = before.get("memory_total"), before.get("memory_free")
    lines: list[str] = []
    procs = before.get("processes") or []
    held = sum(p.get("used_bytes") or 0 for p in procs)
    if procs:
        lines.append(f"other processes hold {_mib(held)}: " + ", ".join(
            f"{p.get('name') or '?'} (pid {p.get('pid')}, {_mib(p.get('used_bytes'))})" for p in procs[:5]))
    if before.get("memory_used") is not None and before["memory_used"] > held + 64 * MIB:
        lines.append(f"{_mib(before['memory_used'] - held)} was in use before the test beyond the processes NVML "
                     "lists (the driver's own reservation, or processes in other containers this user cannot see)")
    if before.get("mig_mode") and cuda_total and nvml_total and cuda_total < nvml_total:
        lines.append(f"MIG is on: this context sees a MIG slice of {_mib(cuda_total)}, not the GPU's "
                     f"{_mib(nvml_total)}")
    elif cuda_total and nvml_total and cuda_total < 0.95 * nvml_total:
        lines.append(f"CUDA sees {_mib(cuda_total)} of NVML's {_mib(nvml_total)} (a vGPU profile or MIG slice)")
    if with_ctx.get("memory_used") is not None and before.get("memory_used") is not None:
        ctx = with_ctx["memory_used"] - before["memory_used"]
        if ctx > 0:
            lines.append(f"this test's own CUDA context takes {_mib(ctx)} (every process pays this once per GPU)")
    if cuda_free is not None and cuda_free - total >= 4 * MIB:
        lines.append(f"{_mib(cuda_free - total)} that cuMemGetInfo reports free could not be allocated "
                     "(the driver's page tables and reserve)")
    frag = total - largest
    if frag > 2 * MIB:
        lines.append(f"free memory is fragmented: the largest single block is {_mib(largest)}, "
                     f"{_mib(frag)} less than the total")
    row = matrix.gpu(before.get("name") or g.get("name")) if matrix is not None else None
    spec_gib = row.get("memory_gib") if row else None
    if spec_gib and nvml_total and before.get("ecc_enabled") and nvml_total < spec_gib * 1024 * MIB * 0.97:
        lines.append(f"ECC is on: the GPU reports {_mib(nvml_total)} of its {spec_gib} GiB (ECC reserves part of "
                     "the memory on some GPUs)")
    title = (f"{who}: {_mib(total)} allocatable in total, largest single block {_mib(largest)}"
             + (f"; NVML reported {_mib(nvml_free)} free of {_mib(nvml_total)}" if nvml_total else ""))
    severity = "ok"
    if largest < 0.9 * total:
        severity = "warn"  # a single large tensor does not fit although the total would
    ctx_cost = max(0, (with_ctx.get("memory_used") or 0) - (before.get("memory_used") or 0))
    unexplained = (nvml_free or 0) - total - ctx_cost
    if nvml_free and unexplained > 0.05 * (nvml_total or nvml_free):
        severity = "warn"
        lines.append(f"{_mib(unexplained)} of what NVML called free could not be allocated for no reason NVML shows")
    detail = ("Where the memory went: " + "; ".join(lines) + ".") if lines else \
        "Nearly all the memory NVML reports free can be allocated, in one block."
    evidence = [Evidence("oom.largest_block", largest,
                         f"libcuda:cuMemAlloc_v2 (binary search, {g.get('largest_calls')} calls)"),
                Evidence("oom.total_allocatable", total, f"libcuda:cuMemAlloc_v2 ({g.get('total_blocks')} blocks, "
                         f"{g.get('total_calls')} calls)"),
                Evidence("cuda.mem_info", {"free": cuda_free, "total": cuda_total}, "libcuda:cuMemGetInfo_v2"),
                Evidence("nvml.memory", {"total": nvml_total, "used": before.get("memory_used"), "free": nvml_free},
                         "nvml:nvmlDeviceGetMemoryInfo")]
    return _f("oom.capacity", severity, title, detail, evidence, area=AREA_OOM)


def recovery(g: dict[str, Any]) -> list[Finding]:
    out = []
    who = label(g)
    rec = g.get("recovery")
    if rec is not None:
        if rec["wrong"] == 0:
            out.append(_f("oom.recovery", "ok", f"{who}: after running out of memory the context still works: a new "
                          f"allocation and a kernel ({rec['elements']:,} elements exact)",
                          evidence=[Evidence("oom.recovery", rec, "smoke:saxpy after CUDA_ERROR_OUT_OF_MEMORY")],
                          area=AREA_OOM))
        else:
            out.append(_wrong(who, "the kernel run after the out-of-memory error", rec))
    start, after, end = g.get("cuda_free"), g.get("cuda_free_after_release"), g.get("cuda_free_end")
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


def tensor_core_findings(who: str, gpu_name: str | None, rates: dict[str, Any] | None, matrix: Any,
                         area: str = AREA_SMOKE, source: str = "torch.matmul") -> list[Finding]:
    """One finding per measured dtype: the achieved TFLOP/s, against the tensor-core peak when one is recorded.

    ``rates`` is what framework_child.tensor_core_rates measured: {"bf16": {"tflops", "n", "iters", "seconds"}
    | {"skipped": why}, "fp16": {...}}. Pure.
    """
    out: list[Finding] = []
    row = matrix.gpu(gpu_name) if matrix is not None and gpu_name else None
    for dtype in TENSOR_DTYPES:
        shown = dtype
        res = (rates or {}).get(dtype) or {}
        value = res.get("tflops")
        if not isinstance(value, (int, float)) or value <= 0:
            continue
        what = f"{shown} matrix product (tensor cores)"
        how = f"{source}: {res.get('n')}×{res.get('n')} {shown}, {res.get('iters')} iterations after warm-up, " \
              "timed with CUDA events"
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
