"""conda rendering: conda-forge GPU builds selected with ``cuda-version``, and an environment.yml.

- conda-forge publishes the GPU builds itself (``pytorch-gpu`` from the pytorch-cpu-feedstock, CUDA builds of
  ``tensorflow`` and ``jaxlib`` whose build strings contain ``cuda``); the ``pytorch`` channel no longer
  publishes new releases.
- ``cuda-version=X.Y`` is conda-forge's pin for the CUDA the whole environment uses.
- ``CONDA_OVERRIDE_CUDA=X.Y`` tells conda which CUDA the ``__cuda`` virtual package should claim when the
  environment is built where no GPU is visible (a Docker build), so the solver still picks GPU builds.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from doctor.model.plan import FixPlan
from doctor.model.remedy import Action, PipInstall, ReinstallTorch
from doctor.model.versions import major_minor
from doctor.render.fixscript import comment, q, say
from doctor.render.values import fits, refused

_SPEC = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*(=[0-9][A-Za-z0-9_.*+!\-]*(=[A-Za-z0-9_.*+\-]+)?)?")

ROOT = False


def supports(os_id: str | None, os_version: str | None) -> bool:
    return True


def prelude(plan: FixPlan) -> str:
    prefix = plan.conda_prefix or ""
    if prefix and not fits("path", prefix):
        prefix = ""  # not an absolute path (it could be an option): the script asks for CONDA_ENV_PREFIX instead
    lines = [f"CONDA_ENV_PREFIX=${{CONDA_ENV_PREFIX:-{q(prefix) if prefix else ''}}}", PRELUDE]
    if not plan.gpu_visible:
        cuda = _cuda(plan)
        if cuda:
            lines.insert(0, "# No GPU is visible where the plan was made (a container build?): tell conda the CUDA.")
            lines.insert(1, f"export CONDA_OVERRIDE_CUDA={q(cuda)}")
    return "\n".join(lines)


PRELUDE = r"""
CONDA=${CONDA_EXE:-conda}
if [ -z "$CONDA_ENV_PREFIX" ]; then
  if [ "$DRY_RUN" = 0 ]; then die "no conda environment: set CONDA_ENV_PREFIX=/path/to/env"; fi
  say "warning: no conda environment known (set CONDA_ENV_PREFIX=/path/to/env)"
  CONDA_ENV_PREFIX=/path/to/env
fi
# Is a package of this version (and build) in the environment?
conda_has() {
  { "$CONDA" list -p "$CONDA_ENV_PREFIX" --full-name -- "$1" 2>/dev/null || true; } | grep -v '^#' | grep -q -- "$2"
}
"""


def _cuda(plan: FixPlan) -> str | None:
    for a in plan.actions():
        if isinstance(a, ReinstallTorch):
            return major_minor(a.cuda)
        if isinstance(a, PipInstall) and a.cuda:
            return major_minor(a.cuda)
    return None


def specs(action: Action) -> list[str]:
    if isinstance(action, ReinstallTorch):
        return [f"cuda-version={major_minor(action.cuda)}", f"pytorch-gpu={action.version}"]
    if isinstance(action, PipInstall):
        return ([f"cuda-version={major_minor(action.cuda)}"] if action.cuda else []) + action.conda
    return []


def render(action: Action, plan: FixPlan) -> list[str] | None:
    if not isinstance(action, (ReinstallTorch, PipInstall)):
        return None
    want = specs(action)
    if not want:
        return None
    bad = [s for s in want if not _SPEC.fullmatch(s)]
    if bad:  # a version from the snapshot that is not a version: never handed to conda
        return [line for s in bad for line in refused("version", s, "conda install")]
    main = want[-1].split("=")
    name, version = main[0], main[1] if len(main) > 1 else ""
    return [f"if conda_has {q(name)} {q(' ' + version)}; then",
            f"  say {q(f'{name} {version} is already in the environment')}",
            "else",
            f'  run "$CONDA" install -y -p "$CONDA_ENV_PREFIX" -c conda-forge --override-channels '
            f"-- {' '.join(q(s) for s in want)}",
            "fi",
            say(f"(the plan was made for the interpreter {action.python})")]


def environment_yml(plan: FixPlan, python: str | None = None) -> str:
    deps: list[str] = []
    for a in plan.actions():
        deps += specs(a)
    name = PurePosixPath(plan.conda_prefix).name if plan.conda_prefix else "gpu"
    lines = ["# gpu-doctor fix: a conda-forge environment with the GPU builds this plan installs.",
             "# Create it with: conda env create -f environment.yml"
             + (f"   (no GPU here: CONDA_OVERRIDE_CUDA={_cuda(plan)} conda env create …)"
                if not plan.gpu_visible and _cuda(plan) else ""),
             f"name: {_yaml(name)}", "channels:", "  - conda-forge", "dependencies:"]
    if python:
        lines.append(f"  - {_yaml('python=' + python)}")
    lines += [f"  - {_yaml(d)}" for d in dict.fromkeys(deps)]
    return "\n".join(lines) + "\n"


def _yaml(text: str) -> str:
    """A YAML scalar that is always a plain string (quoted)."""
    return '"' + comment(text).replace("\\", "\\\\").replace('"', '\\"') + '"'
