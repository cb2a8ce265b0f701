"""What the multi-GPU part of the smoke test found, judged: the recorded
:class:`~doctor.model.facts_active.MultiGpu` in, findings out. Pure.

The child (:func:`doctor.active.gpu_child.multi_gpu`) recorded, for the selected GPUs, their PCI bus ids,
nvmlDeviceGetTopologyCommonAncestor per pair ("a-b", a < b), each GPU's NVLink links (state, version, the bus
id at the other end) and PCIe link, cuDeviceCanAccessPeer and cuCtxEnablePeerAccess per ordered pair ("a>b"),
and a cuMemcpyPeer per ordered pair (bytes, ms, GB/s, intact).

:func:`topology_matrix` turns it into the matrix ``nvidia-smi topo -m`` prints (X, NV#, PIX, PXB, PHB, NODE,
SYS), shown in the finding and kept in the JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from doctor.model.facts_active import MultiGpu, NvLink, PcieLink, bus_key, known
from doctor.model.findings import Evidence, Finding, Fix, FixStep
from doctor.model.severity import Severity

AREA = "Multi-GPU"

# nvmlGpuTopologyLevel_t → the column labels of `nvidia-smi topo -m`
LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
LEGEND = ("X = self, NV# = # NVLink links, PIX = one PCIe switch, PXB = several PCIe switches, PHB = the PCIe "
          "host bridge, NODE = host bridges within one NUMA node, SYS = across NUMA nodes (the CPU interconnect)")

# GB/s per NVLink link and direction by nvmlDeviceGetNvLinkVersion. Drivers answer either the nvmlNvlinkVersion_t
# enum (1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0) or the major version; both readings of
# 2-6 mean 25 GB/s (NVLink 2, 3 and 4 links), so only 1 (P100, 20 GB/s) and 7+ (NVLink 5, 50 GB/s) differ.
NVLINK_LINK_GBS = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 25.0, 6: 25.0, 7: 50.0}
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 8 * 128 / 130 / 8, 4: 16 * 128 / 130 / 8, 5: 32 * 128 / 130 / 8,
                 6: 64 * 242 / 256 / 8}
# A peer copy below this fraction of the link's rate is a warning: cuMemcpyPeer reaches ~80-90 % of one
# direction of an NVLink bundle and ~80 % of a PCIe link through a switch; 40 % leaves room for clocks and
# small buffers, and still catches a link that trained down or traffic that detours through the CPU.
MIN_PEER_RATIO = 0.4


def _f(code: str, severity: Severity, title: str, detail: str = "", evidence: list[Evidence] | None = None,
       fix: str | None = None, steps: list[FixStep] | None = None) -> Finding:
    return Finding(code=code, severity=severity, title=title, detail=detail,
                   evidence=evidence or [], fix=Fix(fix or "Look closer:", steps or []) if fix or steps else None,
                   area=AREA, check=code)


def nvlink_links(mg: MultiGpu, a: int, b: int) -> list[NvLink]:
    """GPU a's NVLink links whose other end is GPU b (from a's side, as nvidia-smi counts them)."""
    want = bus_key(mg.bus_ids.get(str(b)))
    links = mg.nvlinks.get(str(a)) or []
    return [lk for lk in links if want is not None and bus_key(lk.remote_bus) == want]


def topology_matrix(mg: MultiGpu) -> dict[str, Any]:
    """The `nvidia-smi topo -m` matrix: {"gpus": [0, 1], "rows": [["X", "NV4"], ["NV4", "X"]], "legend": …}.
    NV# counts the *active* links; a pair whose links are all down shows its PCIe path instead."""
    gpus = list(mg.gpus)
    rows = []
    for a in gpus:
        row = []
        for b in gpus:
            if a == b:
                row.append("X")
                continue
            up = [lk for lk in nvlink_links(mg, a, b) if lk.active]
            if up:
                row.append(f"NV{len(up)}")
                continue
            level = mg.topology.get(f"{min(a, b)}-{max(a, b)}")
            row.append(LEVELS.get(level, "?") if isinstance(level, int) else "?")
        rows.append(row)
    return {"gpus": gpus, "rows": rows, "legend": LEGEND}


def _grid(gpus: list[int], cell: Callable[[int, int], str]) -> str:
    head = "        " + "".join(f"GPU{g:<6}" for g in gpus)
    lines = [head.rstrip()]
    for a in gpus:
        lines.append(f"GPU{a:<5}" + "".join(f"{cell(a, b):<9}" for b in gpus).rstrip())
    return "\n".join(lines)


def render(mg: MultiGpu) -> str:
    """The three matrices as text: topology, peer access, peer copy GB/s (row = source, column = destination)."""
    m = topology_matrix(mg)
    gpus, rows = m["gpus"], m["rows"]
    at = {(a, b): rows[i][j] for i, a in enumerate(gpus) for j, b in enumerate(gpus)}
    can = mg.can_access_peer
    copies = mg.copies

    def peer(a: int, b: int) -> str:
        if a == b:
            return "X"
        v = can.get(f"{a}>{b}")
        return "?" if v is None else "OK" if v else "no"

    def gbs(a: int, b: int) -> str:
        if a == b:
            return "X"
        c = copies.get(f"{a}>{b}")
        return f"{c.gbs:.1f}" if c is not None and c.gbs is not None else "-"

    return ("Topology (nvidia-smi topo -m):\n" + _grid(gpus, lambda a, b: at[(a, b)]) + "\n" + str(m["legend"]) +
            "\n\nPeer access (cuDeviceCanAccessPeer, row → column):\n" + _grid(gpus, peer) +
            "\n\nPeer copy GB/s (cuMemcpyPeer, row → column):\n" + _grid(gpus, gbs))


def expected_gbs(mg: MultiGpu, a: int, b: int) -> tuple[float | None, str | None]:
    """The rate a peer copy a → b should approach: its active NVLink links, or the slower PCIe link when the
    path stays below the host bridge (PIX/PXB/PHB); None when nothing sensible is known (NODE/SYS detours
    through the CPU, whose rate NVML does not say)."""
    up = [lk for lk in nvlink_links(mg, a, b) if lk.active]
    if up:
        per = [NVLINK_LINK_GBS.get(lk.version or 0, 25.0) if (lk.version or 0) < 8 else 50.0 for lk in up]
        return sum(per), f"{len(up)} NVLink link(s)"
    level = mg.topology.get(f"{min(a, b)}-{max(a, b)}")
    if not isinstance(level, int) or level > 30:
        return None, None
    rates = []
    for g in (a, b):
        link = mg.pcie.get(str(g)) or PcieLink()
        gen, width = link.pcie_gen, link.pcie_width
        if gen not in PCIE_LANE_GBS or not width:
            return None, None
        rates.append((PCIE_LANE_GBS[gen] * width, f"PCIe gen {gen} x{width}"))
    rate, text = min(rates)
    return rate, f"the {text} link"


def findings(mg: MultiGpu | None) -> list[Finding]:
    if mg is None or len(mg.gpus) < 2:
        return []
    gpus = mg.gpus
    out = [_f("multigpu.topology", "info", f"{len(gpus)} GPUs: topology, peer access and peer copy bandwidth",
              render(mg), [Evidence("multigpu.matrix", topology_matrix(mg)["rows"],
                                    "nvml:nvmlDeviceGetTopologyCommonAncestor, nvmlDeviceGetNvLinkState")])]
    can = mg.can_access_peer
    for a in gpus:
        for lk in mg.nvlinks.get(str(a)) or []:
            if lk.active:
                continue
            other = next((b for b in gpus if bus_key(mg.bus_ids.get(str(b))) == bus_key(lk.remote_bus)), None)
            to = f" (to GPU {other})" if other is not None else f" (to {lk.remote_bus})"
            out.append(_f("multigpu.nvlink_down", "warn", f"GPU {a}: NVLink link {lk.link}{to} is down",
                          "An inactive NVLink link halves (or worse) the bandwidth between these GPUs and NCCL may "
                          "route around it through PCIe. Usual causes: a link that failed training (bad bridge or "
                          "baseboard), a GPU reset that left it down, or on NVSwitch systems the fabric manager.",
                          [Evidence("nvml.nvlink_state", {"gpu": a, "link": lk.link, "active": False},
                                    "nvml:nvmlDeviceGetNvLinkState")],
                          "Check the link's error counters and the kernel log; reset the GPUs or reboot.",
                          [FixStep(["nvidia-smi", "nvlink", "--status", "-i", str(a)]),
                           FixStep(["nvidia-smi", "nvlink", "-e", "-i", str(a)])]))
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            links = nvlink_links(mg, a, b) or nvlink_links(mg, b, a)
            denied = [f"{x}>{y}" for x, y in ((a, b), (b, a)) if can.get(f"{x}>{y}") is False]
            if links and denied:
                out.append(_f("multigpu.peer_access", "fail",
                              f"GPU {a} and GPU {b} are joined by NVLink but cannot access each other's memory "
                              "(cuDeviceCanAccessPeer = 0)",
                              "NCCL and frameworks then copy through host memory: far slower, and on NVSwitch "
                              "systems a sign that the fabric manager is not running or the GPUs are in different "
                              "partitions; in a VM, that peer-to-peer is not passed through.",
                              [Evidence("cuda.can_access_peer", {k: can.get(k) for k in (f"{a}>{b}", f"{b}>{a}")},
                                        "libcuda:cuDeviceCanAccessPeer"),
                               Evidence("nvml.nvlinks", len(links), "nvml:nvmlDeviceGetNvLinkRemotePciInfo")],
                              "Start the fabric manager on NVSwitch systems and check the topology:",
                              [FixStep(["systemctl", "status", "nvidia-fabricmanager"]),
                               FixStep(["nvidia-smi", "topo", "-p2p", "r"])]))
    for pair, err in sorted(mg.peer_enable_errors.items(), key=lambda item: item[0]):
        src, dst = pair.split(">")
        out.append(_f("multigpu.peer_access", "fail",
                      f"GPU {src} → GPU {dst}: cuCtxEnablePeerAccess failed with {err.name} ({err.code}): {err.text}",
                      "The driver said the GPUs can access each other, then refused to enable it: peer copies fall "
                      "back to host memory (IOMMU/ACS settings, a virtualised PCIe topology, or too many peers).",
                      [Evidence("cuda.error", f"{err.name}: {err.text}",
                                "libcuda:cuCtxEnablePeerAccess")]))
    fine: list[tuple[str, float]] = []
    for pair, c in sorted(mg.copies.items(), key=lambda item: item[0]):
        a, b = (int(x) for x in pair.split(">"))
        if c.intact is False:
            out.append(_f("gpu.wrong_results", "fail", f"GPU {a} → GPU {b}: a peer copy arrived corrupted",
                          "Data copied from one GPU to another came back different: a fault on the NVLink or PCIe "
                          "path between them.", [Evidence("multigpu.copy", asdict(c), "smoke:cuMemcpyPeer")]))
        if c.gbs is None:
            continue
        direct = can.get(pair) and pair not in mg.peer_enable_errors
        peak, what = expected_gbs(mg, a, b) if direct else (None, None)
        ev = [Evidence("multigpu.peer_gbs", round(c.gbs, 1),
                       f"smoke:cuMemcpyPeer ({known(c.bytes, 'peer copy size') >> 20} MiB, best of 3)")]
        shown = f"{c.gbs:,.1f} GB/s"
        if not peak:  # in the matrix only: no figure to hold it against
            continue
        ratio = c.gbs / peak
        title = f"GPU {a} → GPU {b}: peer copy {shown}, {ratio:.0%} of {what} ({peak:,.1f} GB/s)"
        if ratio >= MIN_PEER_RATIO:
            fine.append((pair, ratio))
        else:
            out.append(_f("multigpu.peer_bandwidth", "warn", title.replace(f", {ratio:.0%}", f": only {ratio:.0%}"),
                          f"Below {MIN_PEER_RATIO:.0%} of what the link carries. Likely causes: NVLink links down or "
                          "degraded, a PCIe link trained below its width or generation, peer traffic routed through "
                          "the CPU (IOMMU / ACS on the PCIe switch), or other work on the GPUs.", ev,
                          "Compare with NVIDIA's p2pBandwidthLatencyTest and check the links:",
                          [FixStep(["nvidia-smi", "topo", "-m"]), FixStep(["nvidia-smi", "nvlink", "--status"])]))
    if fine:
        worst = min(fine, key=lambda item: item[1])
        out.append(_f("multigpu.peer_bandwidth", "ok", f"Peer copies reach their links' rate on {len(fine)} GPU "
                      f"pair direction(s) (lowest {worst[1]:.0%}, GPU {worst[0].replace('>', ' → GPU ')})",
                      evidence=[Evidence("multigpu.peer_ratios", {p: round(r, 2) for p, r in fine},
                                         "smoke:cuMemcpyPeer vs NVLink / PCIe")]))
    if mg.cleanup_problems:
        out.append(_f("gpu.cuda_error", "warn", "Multi-GPU test: releasing its resources failed: "
                      + ", ".join(mg.cleanup_problems)))
    return out
