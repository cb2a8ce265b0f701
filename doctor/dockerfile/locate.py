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
        if (e.fact.startswith("env.") or e.fact.startswith("loader.")) and image.lines.get(e.fact):
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
        f = hedge(f, image)
        found.append(replace(dockerfile_fix(f), title=f"{where}: {f.title}",
                             evidence=[Evidence("dockerfile", where, "dockerfile"), *f.evidence]))
    return replace(report, findings=found)


_EXPORT = re.compile(r"^\s*export\s+([A-Za-z_]\w*)=(.*)$", re.M)
_HOST_ONLY = re.compile(r"gpu-doctor fix|~/\.bashrc|shell profile|\breboot\b|modprobe|\bdkms\b|nvidia-driver|"
                        r"install(ing)? (the )?(NVIDIA )?driver|driver ≥|sudo ")


def hedge(f: Any, image: Image) -> Any:
    """A failure that rests on a package read as if an unknown base image had none of it is a warning, and
    says so: the base may bring its own (an NGC or vendor image with torch), which pip then keeps."""
    if f.severity != "fail" or not image.hedged:
        return f
    text = " ".join([f.title, f.detail or "", *(f"{e.fact} {e.value}" for e in f.evidence)])
    names = [n for n in image.hedged if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)]
    if not names:
        return f
    return replace(f, severity="warn", detail=(f.detail or "") + f" This rests on the base image having no "
                   f"{names[0]} of its own: what it holds is unknown, and pip keeps one that satisfies the request.")


def dockerfile_fix(f: Any) -> Any:
    """A finding's fix as a Dockerfile line: `export X=…` for a shell profile becomes `ENV X=…`; a toolkit to
    install becomes a FROM …-devel tag or a RUN line; the host's driver is not the image's, so no fix for it is
    given here; `gpu-doctor fix` (which changes this machine) is never the answer. The plan's host intents go."""
    from doctor.model.findings import Fix
    from doctor.model.intents import InstallDriverBranch, InstallToolkit

    if f.fix is None and not f.intents:
        return f
    text = f.fix.summary if f.fix else ""
    if _EXPORT.search(text):
        env = "\n".join(f"ENV {k}={v.strip()}" for k, v in _EXPORT.findall(text))
        text = f"Set it in the Dockerfile:\n{env}"
    elif any(isinstance(i, InstallDriverBranch) for i in f.intents) or (_HOST_ONLY.search(text) and "driver" in text):
        text = ""  # the driver is the host's: the detail says which one the host needs
    elif any(isinstance(i, InstallToolkit) for i in f.intents) or (
            "toolkit" in text.lower() and _HOST_ONLY.search(text)):
        cuda = next((i.cuda for i in f.intents if isinstance(i, InstallToolkit) and i.cuda), None)
        text = (f"Give the image the CUDA {cuda} toolkit: build FROM an nvidia/cuda:{cuda}.*-devel tag, or RUN "
                f"apt-get install -y cuda-toolkit-{cuda.replace('.', '-')} from NVIDIA's CUDA repository."
                if cuda else "Give the image a CUDA toolkit only if it compiles CUDA code: build FROM an "
                "nvidia/cuda:*-devel tag.")
    text = re.sub(r"\s*\(?`gpu-doctor fix`[^)]*\)?\.?", "", text).strip()
    return replace(f, fix=Fix(summary=text) if text else None, intents=[])


def note_findings(image: Image) -> list[Any]:
    """What the reader could not resolve, as info findings at their lines (shown with -v and in JSON)."""
    from doctor.model.findings import Evidence, Finding

    return [Finding(code="dockerfile.unresolved", severity="info", title=f"{image.path}:{ln}: {text}",
                    evidence=[Evidence("dockerfile", f"{image.path}:{ln}", "dockerfile")], area="Environment",
                    check="dockerfile.unresolved")
            for ln, text in image.notes]
