"""Small helpers the checks share: evidence from facts, and the questions many rules ask."""

from __future__ import annotations

from typing import Any

from doctor import beliefs
from doctor.model.facts import Facts, PyPackage
from doctor.model.findings import Evidence, Finding, Fix, FixStep
from doctor.model.intents import Intent
from doctor.model.severity import Severity
from doctor.safeio import small_int

FRAMEWORKS = ("torch", "tensorflow", "tensorflow-cpu", "tf-nightly", "jax", "jaxlib")


def fact(facts: Facts, path: str) -> Any:
    """The value at a dotted path of the snapshot ("driver.kernel_module")."""
    value: Any = facts
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    return value


def ev(facts: Facts, path: str, value: Any = None, source: str | None = None) -> Evidence:
    """Evidence for one fact, with the source the probes recorded for it."""
    return Evidence(
        fact=path,
        value=fact(facts, path) if value is None else value,
        source=source or facts.sources.get(path),
    )


def ok(code: str, title: str, *evidence: Evidence, detail: str = "") -> Finding:
    return Finding(code=code, severity="ok", title=title, detail=detail, evidence=list(evidence))


def finding(code: str, severity: Severity, title: str, detail: str, evidence: list[Evidence],
            fix: str | None = None, steps: list[FixStep] | None = None, intents: list[Intent] | None = None
            ) -> Finding:
    return Finding(
        code=code,
        severity=severity,
        title=title,
        detail=detail,
        evidence=evidence,
        fix=Fix(summary=fix, steps=steps or []) if fix else None,
        intents=list(intents or []),
    )


def driver_installed(facts: Facts) -> bool:
    """The driver is known to be installed (the belief is yes; unknown is not yes)."""
    return beliefs.of(facts).userspace_installed.yes


def probed(facts: Facts, what: str) -> bool:
    """Did the probe for this area run? (A snapshot parsed from a bug report holds only what it said.)"""
    return what in facts.sources


def gpu_present(facts: Facts) -> bool:
    """An NVIDIA GPU is known to be attached (from NVML, nvidia-smi or the PCI bus)."""
    return bool(facts.gpus) or bool(facts.host.pci_nvidia_gpus)


def frameworks(facts: Facts) -> list[tuple[str, PyPackage]]:
    """(interpreter, package) for every ML framework in the checked environments."""
    return [(env.executable, p) for env in facts.python_envs for p in env.packages if p.name in FRAMEWORKS]


def label(pkg: PyPackage) -> str:
    return f"{pkg.name} {pkg.version}" if pkg.version else pkg.name


def major_minor(version: str | None) -> tuple[int, ...] | None:
    if not version:
        return None
    parts = []
    for piece in version.split(".")[:2]:
        digits = small_int("".join(ch for ch in piece if ch in "0123456789"))
        if digits is None:
            break
        parts.append(digits)
    return tuple(parts) or None
