"""`--require SPEC` gates for CI and image builds: each spec becomes a finding, met or not.

Specs: ``torch>=2.4``, ``tensorflow==2.16.*``, ``jax>=0.4.30``, ``cuda>=12.1``, ``cudnn>=9``,
``driver>=550``, ``gpus>=8``, ``gpu-memory>=79GiB``, ``cc>=8.0``, ``python>=3.10``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from doctor import beliefs
from doctor.model.facts import Facts
from doctor.model.findings import Evidence, Finding
from doctor.safeio import lazy_compile

NAMES = {
    "torch": "PyTorch version", "tensorflow": "TensorFlow version", "jax": "JAX version",
    "cuda": "CUDA the framework was built with (else the system toolkit)", "cudnn": "cuDNN version",
    "driver": "NVIDIA driver version", "gpus": "number of GPUs", "gpu-memory": "memory of the smallest GPU",
    "cc": "compute capability of the least capable GPU", "python": "Python version of the checked environment",
}
_SPEC = lazy_compile(r"^\s*([a-z][a-z-]*)\s*((==|!=|<=|>=|~=|<|>).+)$")  # name, specifier, its first operator
_MEM = lazy_compile(r"^(\d+(?:\.\d+)?)\s*(GiB|GB|MiB|MB)?$", re.I)


class RequireError(ValueError):
    """A spec that cannot be read: one line for the user (exit 2)."""


@dataclass(frozen=True)
class Requirement:
    name: str
    spec: str  # the user's text
    specifier: SpecifierSet


def parse(text: str) -> Requirement:
    m = _SPEC.match(text)
    if not m:
        raise RequireError(f"--require {text!r}: expected NAME OP VERSION, e.g. torch>=2.4 (names: "
                           f"{', '.join(NAMES)})")
    name, body = m.group(1), m.group(2).strip()
    if name not in NAMES:
        raise RequireError(f"--require {text!r}: unknown name {name!r} (one of: {', '.join(NAMES)})")
    if name == "gpu-memory":
        op = m.group(3)
        mem = _MEM.match(body[len(op):].strip())
        if not mem:
            raise RequireError(f"--require {text!r}: memory like 79GiB, 80GB or 81920MiB")
        body = f"{op}{_to_gib(float(mem.group(1)), mem.group(2) or 'GiB'):.3f}"
    try:
        spec = SpecifierSet(body)
        if not list(spec):
            raise InvalidSpecifier(body)
    except InvalidSpecifier:
        raise RequireError(f"--require {text!r}: {body!r} is not a version condition") from None
    return Requirement(name, text.strip(), spec)


def _to_gib(value: float, unit: str) -> float:
    return {"gib": value, "gb": value * 1e9 / 2**30, "mib": value / 1024, "mb": value * 1e6 / 2**30}[unit.lower()]


def _have(facts: Facts, name: str) -> tuple[str | None, str]:
    """The machine's value for a requirement name, and where it came from."""
    pkgs = {p.name: p for env in facts.python_envs for p in env.packages}
    gpus = [g for g in facts.gpus if g.source != "pci"]
    if name in ("torch", "tensorflow", "jax"):
        names = {"jax": ("jax", "jaxlib"),
                 "tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly")}.get(name, (name,))
        pkg = next((pkgs[n] for n in names if n in pkgs), None)
        return ((pkg.version or "").split("+", 1)[0] or None) if pkg else None, "python_envs.packages"
    if name == "cuda":
        fw = next((p.cuda for p in pkgs.values() if p.name in ("torch", "tensorflow", "jaxlib") and p.cuda), None)
        if fw:
            return fw, "framework build"
        tk = next((t.version for t in facts.toolkits if t.version and t.source != "pip"), None)
        return tk, "toolkits"
    if name == "cudnn":
        return next((c.version for c in facts.cudnn if c.version), None), "cudnn"
    if name == "driver":
        return beliefs.driver_version(facts), "driver"
    if name == "gpus":
        return str(len(gpus)), "gpus"
    if name == "gpu-memory":
        mems = [g.memory_total_mib for g in gpus if g.memory_total_mib]
        return (f"{min(mems) / 1024:.3f}" if mems else None), "gpus[].memory_total_mib"
    if name == "cc":
        ccs = [g.compute_capability for g in gpus if g.compute_capability]
        return (min(ccs, key=lambda c: Version(c)) if ccs else None), "gpus[].compute_capability"
    env = facts.python_envs[0] if facts.python_envs else None
    return (env.version if env else None), "python_envs[0].version"


def evaluate(facts: Facts, reqs: list[Requirement]) -> list[Finding]:
    out = []
    for r in reqs:
        have, where = _have(facts, r.name)
        code = f"require.{r.name}"
        evidence = [Evidence(where, have), Evidence("--require", r.spec)]
        shown = f"{float(have):.1f} GiB" if r.name == "gpu-memory" and have else have
        if have is None:
            out.append(Finding(code, "fail", f"Requirement {r.spec} cannot be verified: the {NAMES[r.name]} is "
                               "unknown here", evidence=evidence, area="Requirements", check=code))
            continue
        try:
            met = r.specifier.contains(Version(have), prereleases=True)
        except InvalidVersion:
            met = False
        title = f"Requirement {r.spec} {'met' if met else 'NOT met'}: the {NAMES[r.name]} is {shown}"
        out.append(Finding(code, "ok" if met else "fail", title, evidence=evidence, area="Requirements", check=code))
    return out
