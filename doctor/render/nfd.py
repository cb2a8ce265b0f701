"""A Node Feature Discovery local feature file: the report as node labels a scheduler can select on.

NFD's `local` source reads every file in ``/etc/kubernetes/node-feature-discovery/features.d/``; each line
is ``<namespace>/<name>[=<value>]``, ``#`` starts a comment, ``# +expiry-time=<RFC3339>`` makes the lines
after it expire, dot-files are ignored (so a temporary ``.gpu-doctor.*`` renamed over the file is atomic),
and a file over 64 kB is ignored. Labels use the ``feature.node.kubernetes.io/`` namespace, which nfd-master
always allows (unprefixed names are deprecated there). Source: kubernetes-sigs/node-feature-discovery,
docs/usage/customization-guide.md, "Local feature source" / "Input format" / "Node labels".

Kubernetes label syntax (apimachinery validation): a name is 1–63 characters, a value 0–63, both
``[A-Za-z0-9]`` at the ends and ``[-_.A-Za-z0-9]`` between; a value that cannot be written so is left out.

Labels (``feature.node.kubernetes.io/`` +):
  gpu-doctor.ready=true|false       no check fails, and there was evidence to say so
  gpu-doctor.status=ok|warn|fail|unknown
  gpu-doctor.failing=<area>         the first failing area (driver, gpus, cuda-toolkit, cudnn, frameworks, …)
  gpu-doctor.failing.<area>=true    one per failing area
  gpu-doctor.driver=<version>       the driver's version
  gpu-doctor.cuda=<X.Y>             the CUDA version the driver runs (the driver check's ``driver.runs_cuda``
                                    evidence: libcuda's word, else the newest CUDA the matrix gives the version)
  gpu-doctor.gpus=<n>               GPUs visible
and, for node affinity's ``Gt`` / ``Lt`` operators (which read a label value as an integer, so "12.4"
cannot be compared), each version's parts as plain integers:
  gpu-doctor.driver.major=<n>, gpu-doctor.driver.minor=<n>      535 and 104 for driver 535.104.05
  gpu-doctor.cuda.major=<n>, gpu-doctor.cuda.minor=<n>          12 and 2 for CUDA 12.2
  gpu-doctor.compute.major=<n>, gpu-doctor.compute.minor=<n>    the lowest compute capability of the node's
                                                                GPUs (a pod may land on any of them)
The renderer reads the report and its beliefs only, never the matrix.
"""

from __future__ import annotations

import re
import time
from typing import Any

from doctor import beliefs
from doctor.safeio import small_int

PREFIX = "feature.node.kubernetes.io/"
FEATURE_FILE = "/etc/kubernetes/node-feature-discovery/features.d/gpu-doctor"
EXPIRY_SECONDS = 3600  # labels outlive a stopped gpu-doctor by at most an hour
MAX_BYTES = 64 * 1024
_NAME = re.compile(r"[A-Za-z0-9]([-_.A-Za-z0-9]{0,61}[A-Za-z0-9])?")
AREA_SLUG = {"Driver": "driver", "GPUs": "gpus", "CUDA toolkit": "cuda-toolkit", "cuDNN": "cudnn",
             "Python & frameworks": "frameworks", "Environment": "environment", "Requirements": "requirements"}


def valid_name(name: str) -> bool:
    return bool(_NAME.fullmatch(name))


def valid_value(value: str) -> bool:
    return value == "" or bool(_NAME.fullmatch(value))


def slug(area: str) -> str:
    return AREA_SLUG.get(area) or re.sub(r"[^a-z0-9]+", "-", area.lower()).strip("-") or "other"


def labels(report: Any) -> dict[str, str]:
    """The label names (without the namespace) and values for a report; invalid values are left out."""
    failing = []
    for f in report.findings:
        if f.severity == "fail" and slug(f.area) not in failing:
            failing.append(slug(f.area))
    out = {"gpu-doctor.ready": "true" if report.status in ("ok", "warn") else "false",
           "gpu-doctor.status": report.status}
    if failing:
        out["gpu-doctor.failing"] = failing[0]
        for area in failing:
            out[f"gpu-doctor.failing.{area}"] = "true"
    b = beliefs.of(report.facts)
    version = b.driver_version.value
    if isinstance(version, str) and version:
        out["gpu-doctor.driver"] = version
        out.update(_parts("gpu-doctor.driver", version))
    cuda = driver_cuda(report)
    if cuda:
        out["gpu-doctor.cuda"] = cuda
        out.update(_parts("gpu-doctor.cuda", cuda))
    gpus = [g for g in report.facts.gpus if g.source != "pci"]
    out["gpu-doctor.gpus"] = str(len(gpus))
    capabilities = [p for p in (_numbers(g.compute_capability) for g in gpus) if len(p) >= 2]
    if capabilities and len(capabilities) == len(gpus):  # one GPU of unknown capability: no floor to state
        low = min(capabilities)
        out["gpu-doctor.compute.major"], out["gpu-doctor.compute.minor"] = str(low[0]), str(low[1])
    return {k: v for k, v in out.items() if valid_name(k) and valid_value(v)}


def _numbers(version: Any) -> tuple[int, ...]:
    """The leading dot-separated ASCII integers of a version ("535.104.05" → (535, 104, 5)); () when none."""
    out: list[int] = []
    for piece in (version if isinstance(version, str) else "").split("."):
        n = small_int(piece)
        if n is None:
            break
        out.append(n)
    return tuple(out)


def _parts(name: str, version: str) -> dict[str, str]:
    parts = _numbers(version)
    if len(parts) < 2:
        return {}
    return {f"{name}.major": str(parts[0]), f"{name}.minor": str(parts[1])}


def driver_cuda(report: Any) -> str | None:
    """The CUDA version the driver runs, as the report states it: the ``driver.runs_cuda`` evidence of the
    driver check (libcuda's or nvidia-smi's word, else the matrix's for this driver version), else the
    beliefs' driver CUDA."""
    for f in report.findings:
        for e in f.evidence:
            if e.fact == "driver.runs_cuda" and isinstance(e.value, str) and e.value:
                return e.value
    known = beliefs.of(report.facts).driver_cuda.value
    return str(known) if known else None


def render(report: Any, now: float | None = None, expiry_seconds: int = EXPIRY_SECONDS) -> str:
    now = time.time() if now is None else now
    expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + expiry_seconds))
    lines = ["# gpu-doctor: the node's GPU software stack as Node Feature Discovery labels",
             f"# written {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(now))}; expires unless rewritten",
             f"# +expiry-time={expiry}"]
    lines += [f"{PREFIX}{k}={v}" for k, v in labels(report).items()]
    return "\n".join(lines) + "\n"  # a handful of short lines, far below NFD's 64 kB limit


def parse(text: str) -> dict[str, str]:
    """Read a feature file as NFD's local source does (comments skipped, value defaults to "true")."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, eq, value = line.partition("=")
        out[key] = value if eq else "true"
    return out
