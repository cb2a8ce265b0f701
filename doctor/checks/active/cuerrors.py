"""What a CUDA driver error means, in plain words, and which finding it becomes (the smoke test's and the OOM
probe's judges read it).

The meanings are reviewed data in the one error catalog, ``compat/errors.toml`` ([[cuda_error]], each row
with its source). Keys are the driver's own names (cuGetErrorName); the numbers and texts are those of the
real libcuda 535.309.01 (Debian's libcuda1), read with cuGetErrorName/cuGetErrorString. A name not listed
still becomes a finding (``gpu.cuda_error``) with the driver's name and text; nothing is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from doctor.matrix import bundled
from doctor.model.findings import FixStep
from doctor.model.severity import Severity, severity_of


@dataclass(frozen=True)
class Meaning:
    code: str  # the finding code
    explanation: str
    fix: str | None = None
    steps: list[FixStep] = field(default_factory=list)
    severity: Severity = "fail"


def _step(raw: Any) -> FixStep | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("command"), list):
        return None
    risk = raw.get("risk", "safe")
    return FixStep([str(a) for a in raw["command"]], root=bool(raw.get("root", False)),
                   risk=risk if risk in ("safe", "restart", "reboot", "destructive") else "safe",
                   note=str(raw["note"]) if raw.get("note") else None)


def _meanings(rows: list[dict[str, Any]]) -> dict[str, Meaning]:
    out: dict[str, Meaning] = {}
    for row in rows:
        try:
            steps = [st for st in (_step(r) for r in row.get("steps", [])) if st is not None]
            out[str(row["name"])] = Meaning(str(row["finding"]), str(row["explanation"]),
                                            str(row["fix"]) if row.get("fix") else None, steps,
                                            severity_of(row.get("severity"), "fail"))
        except (KeyError, TypeError, AttributeError):
            continue
    return out


@cache
def meanings() -> dict[str, Meaning]:
    """The one catalog: compat/errors.toml [[cuda_error]] (name → finding, explanation, fix, steps, source).
    Read on first use, not at import: a judge needs it only for a driver error."""
    return _meanings(bundled().rows("errors", "cuda_error"))


def __getattr__(name: str) -> Any:  # ``MEANINGS``: the catalog, built when first asked for
    if name == "MEANINGS":
        return meanings()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def meaning(name: str) -> Meaning:
    return meanings().get(name) or Meaning("gpu.cuda_error", "The CUDA driver reported an error it does not explain "
                                                           "further; its name and text are in the title.")
