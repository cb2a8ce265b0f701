"""Pointing findings at the Dockerfile line they are about: `Dockerfile:12: title`, in every format."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from doctor.dockerfile.image import Image


def line_for(finding: Any, image: Image) -> int:
    """The Dockerfile line a finding is about: an ENV line its evidence quotes; else, in its title, then its
    detail, then its evidence, the install of a package it names or the toolkit it names; else the FROM line
    of the final stage."""
    for e in finding.evidence:
        if e.fact.startswith("env.") and image.lines.get(e.fact):
            return image.lines[e.fact]
    pkgs = sorted((k[4:] for k in image.lines if k.startswith("pkg.")), key=len, reverse=True)
    toolkits = {k[8:]: ln for k, ln in image.lines.items() if k.startswith("toolkit.")}
    for text in (finding.title, finding.detail or "", " ".join(f"{e.fact} {e.value}" for e in finding.evidence)):
        for name in pkgs:
            if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text):
                return image.lines[f"pkg.{name}"]
        for cuda, ln in toolkits.items():
            if re.search(rf"/usr/local/cuda-{re.escape(cuda)}\b", text):
                return ln
        if re.search(r"\b(CUDA toolkit|nvcc)\b", text):
            return next(iter(toolkits.values()), image.lines["base"])
    for k, ln in image.lines.items():
        if k.startswith("env.") and k[4:] in finding.title:
            return ln
    return image.lines["base"]


def locate(report: Any, image: Image) -> Any:
    """The report with each finding pointing at its line: `Dockerfile:12: title`, and the location as
    evidence (fact ``dockerfile``) for JSON and CI annotations."""
    from doctor.model.findings import Evidence

    found = []
    for f in [*report.findings, *note_findings(image)]:
        if f.code == "dockerfile.unresolved":
            found.append(f)
            continue
        ln = line_for(f, image)
        where = f"{image.path}:{ln}"
        found.append(replace(f, title=f"{where}: {f.title}",
                             evidence=[Evidence("dockerfile", where, "dockerfile"), *f.evidence]))
    return replace(report, findings=found)


def note_findings(image: Image) -> list[Any]:
    """What the reader could not resolve, as info findings at their lines (shown with -v and in JSON)."""
    from doctor.model.findings import Evidence, Finding

    return [Finding(code="dockerfile.unresolved", severity="info", title=f"{image.path}:{ln}: {text}",
                    evidence=[Evidence("dockerfile", f"{image.path}:{ln}", "dockerfile")], area="Environment",
                    check="dockerfile.unresolved")
            for ln, text in image.notes]
