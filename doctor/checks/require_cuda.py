"""NVIDIA_REQUIRE_CUDA: the condition the NVIDIA container runtime checks before it starts a container.

An image sets it (every nvidia/cuda image does, and images built FROM them inherit it): ``cuda>=12.8`` means the
host driver must support CUDA 12.8, or the container is refused ("nvidia-container-cli: requirement error:
unsatisfied condition: cuda>=12.8") before any code runs. Space-separated alternatives are OR-ed, comma-separated
constraints AND-ed, so ``brand=tesla,driver>=535,driver<536`` lets Tesla-brand GPUs start on the 535 branch. Since
CUDA 12.8 the nvidia/cuda images list no GeForce or TITAN brand. ``NVIDIA_DISABLE_REQUIRE`` turns the check off.
"""

from __future__ import annotations

import re

from doctor.matrix import Matrix, Row, vtuple
from doctor.model.records import dataclass

# NVML's brands per market segment of compat/gpus.toml (nvmlBrandType: GEFORCE, TITAN, QUADRO, TESLA, NVIDIA, …)
SEGMENT_BRANDS = {
    "consumer": {"geforce", "geforcertx", "titan", "titanrtx"},
    "datacenter": {"tesla", "nvidia", "unknown"},
    "workstation": {"quadro", "quadrortx", "nvidiartx", "nvidia"},
}
_CONSTRAINT = re.compile(r"(cuda|driver|arch|brand)(>=|<=|==|=|>|<)([\w.]+)")


@dataclass(frozen=True)
class Requirement:
    """An image's NVIDIA_REQUIRE_CUDA, parsed: its floor, its brand exceptions."""
    text: str
    cuda: str | None  # the cuda>= floor of the alternative without a brand
    exceptions: list[tuple[int, frozenset[str]]]  # (driver branch, brands) of the brand=…,driver>=N,driver<N+1 ones
    alternatives: list[dict[str, list[tuple[str, str]]]]


def parse(text: str | None) -> Requirement | None:
    """The alternatives of an NVIDIA_REQUIRE_CUDA value (None when unset or holding no constraint)."""
    if not text or not text.strip():
        return None
    alts: list[dict[str, list[tuple[str, str]]]] = []
    for token in text.split()[:512]:
        conds: dict[str, list[tuple[str, str]]] = {}
        for c in token.split(","):
            m = _CONSTRAINT.fullmatch(c.strip().strip("\"'"))
            if m and len(m.group(3)) <= 32:
                conds.setdefault(m.group(1), []).append((m.group(2), m.group(3)))
        if conds:
            alts.append(conds)
    if not alts:
        return None
    cuda = next((v for a in alts if "brand" not in a for op, v in a.get("cuda", []) if op in (">=", ">", "=", "==")),
                None)
    exceptions: dict[int, set[str]] = {}
    for a in alts:
        lows = [vtuple(v) for op, v in a.get("driver", []) if op in (">=", ">")]
        if "brand" in a and lows and lows[0]:
            exceptions.setdefault(lows[0][0], set()).update(v.lower() for _op, v in a["brand"])
    return Requirement(text.strip(), cuda, sorted((b, frozenset(s)) for b, s in exceptions.items()), alts)


def disabled(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def cuda_floor(m: Matrix, req: Requirement) -> Row | None:
    """The toolkit row whose driver is the oldest that supports the required CUDA (its first release)."""
    return m.min_driver(req.cuda) if req.cuda else None


def _holds(op: str, have: tuple[int, ...], want: tuple[int, ...]) -> bool:
    n = max(len(want), 1)
    have, want = have[:n], want[:n]
    return {">=": have >= want, ">": have > want, "<=": have <= want, "<": have < want,
            "=": have == want, "==": have == want}[op]


def satisfied(m: Matrix, req: Requirement, driver: str, brands: set[str] | None, cc: str | None
              ) -> tuple[bool | None, str]:
    """Does a host with this driver (and GPU brands, compute capability, when known) start the container?
    (True / False / None when it depends on the GPU's brand), with the alternative that decided."""
    have = vtuple(driver)
    maybe = ""
    for alt in req.alternatives:
        result: bool | None = True
        for _op, v in alt.get("cuda", []):  # cuda>=X.Y: the driver supports CUDA X.Y
            row = m.min_driver(v)
            if row is None or not row.get("linux_min_driver"):
                result = None if result else result
                continue
            result = result and have >= vtuple(row["linux_min_driver"])
        for op, v in alt.get("driver", []):
            result = result and _holds(op, have, vtuple(v))
        for op, v in alt.get("arch", []):
            known = _holds(op, vtuple(cc), vtuple(v)) if cc else None
            result = result and known if known is not None else (None if result else result)
        wanted = {v.lower() for _op, v in alt.get("brand", [])}
        if wanted and result:
            result = None if brands is None else bool(wanted & brands)
        text = ",".join(f"{k}{op}{v}" for k, cs in alt.items() for op, v in cs)
        if result:
            return True, text
        if result is None and not maybe:
            maybe = text
    return (None, maybe) if maybe else (False, "")


def branches_text(req: Requirement) -> str:
    """'the 470, 535 and 550 branches on data-center and professional GPUs (no GeForce/TITAN)'."""
    if not req.exceptions:
        return ""
    names = [str(b) for b, _s in req.exceptions]
    listed = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
    consumer = any(s & SEGMENT_BRANDS["consumer"] for _b, s in req.exceptions)
    who = "GPUs of the brands it lists" if consumer else "data-center and professional GPUs (no GeForce or TITAN)"
    return f"the {listed} branch{'es' if len(names) > 1 else ''} for {who}"
