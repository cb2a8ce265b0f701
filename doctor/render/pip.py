"""pip rendering: framework steps run with the environment's own interpreter (``PY -m pip``), plus the
requirements and constraints files the same plan implies.

- torch: the exact build from PyTorch's index ``https://download.pytorch.org/whl/cuXYZ`` (PyTorch's "Get
  started" and "Previous versions" pages); a CPU-only build is uninstalled first, explicitly, so pip cannot
  keep it as "already satisfied".
- TensorFlow: ``tensorflow[and-cuda]==X`` (TensorFlow's pip install guide), which pins the CUDA and cuDNN
  wheels; JAX: ``jax[cudaNN]==X`` (JAX installation guide).
- constraints: the ``nvidia-*`` pins the matrix holds for that build (``and_cuda`` of compat/tensorflow.toml,
  the cuDNN of a torch variant in compat/pytorch.toml).
"""

from __future__ import annotations

import re

from doctor.model.plan import FixPlan
from doctor.model.remedy import Action, PipInstall, ReinstallTorch
from doctor.render.fixscript import comment, q, say
from doctor.render.values import fits, refused

ROOT = False
_REQ = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(\[[A-Za-z0-9_,\-]+\])?([=<>!~]=?[A-Za-z0-9.+*!\-]+,?)*$")


def supports(os_id: str | None, os_version: str | None) -> bool:
    return True


def prelude(plan: FixPlan) -> str:
    return PRELUDE


PRELUDE = r"""
# The version pip reports for a distribution in an interpreter, or nothing.
pip_version() { { "$1" -m pip show -- "$2" 2>/dev/null || true; } | sed -n 's/^Version: //p'; }
need_python() {
  if [ -x "$1" ]; then return 0; fi
  if [ "$DRY_RUN" = 1 ]; then
    say "warning: no Python interpreter at $1 here (the plan was made for it)"
    return 0
  fi
  die "no Python interpreter at $1 (the plan was made for it)"
}
"""


def safe_requirement(text: str) -> bool:
    return bool(_REQ.fullmatch(text))


def render(action: Action, plan: FixPlan) -> list[str] | None:
    if isinstance(action, (ReinstallTorch, PipInstall)) and not fits("path", action.python):
        return refused("path", action.python, "the Python interpreter that runs pip")
    if isinstance(action, ReinstallTorch):
        return _torch(action)
    if isinstance(action, PipInstall):
        return _pip(action)
    return None


def _torch(a: ReinstallTorch) -> list[str]:
    py = q(a.python)
    label = f"{a.version}+cu{a.cuda.replace('.', '')}"
    out = [f"need_python {py}", "local have", f"have=$(pip_version {py} torch)",
           f"if [ \"$have\" = {q(label)} ]; then",
           f"  say {q(f'torch {label} is already installed in {a.python}')}",
           "else"]
    if a.replace_cpu:
        out.append("  # A CPU-only build counts as 'already satisfied' for pip: remove it explicitly first.")
    companions = [c for c in a.companions if safe_requirement(c)]
    out += ['  if [ -n "$have" ]; then', f"    run {py} -m pip uninstall -y -- torch", "  fi",
            f"  run {py} -m pip install --index-url {q(a.index_url)} -- "
            + " ".join(q(r) for r in [f"torch=={a.version}", *companions])]
    if not companions:
        out.append("  # torchvision/torchaudio, if installed, must come from the same index (pip install --index-url "
                   f"{comment(a.index_url)} torchvision==<its pair>).")
    out.append("fi")
    return out


def _pip(a: PipInstall) -> list[str]:
    bad = [r for r in [*a.requirements, *a.uninstall, *a.done_when] if not safe_requirement(r)]
    if bad:
        return [f"# MANUAL: not a plain requirement, not run: {comment(', '.join(bad))}",
                say("manual step: a requirement from the snapshot is not a plain name==version")]
    py = q(a.python)
    out = [f"need_python {py}"]
    conds = []
    for spec in a.done_when:
        name, _, version = spec.partition("==")
        conds.append(f'[ "$(pip_version {py} {q(name)})" = {q(version)} ]' if version
                     else f'[ -n "$(pip_version {py} {q(name)})" ]')
    if conds:
        out += [f"if {' && '.join(conds)}; then",
                f"  say {q('already installed: ' + ' '.join(a.requirements))}", "else"]
    pad = "  " if conds else ""
    for u in a.uninstall:
        out += [f'{pad}if [ -n "$(pip_version {py} {q(u)})" ]; then', f"{pad}  run {py} -m pip uninstall -y -- {q(u)}",
                f"{pad}fi"]
    out.append(f"{pad}run {py} -m pip install -- {' '.join(q(r) for r in a.requirements)}")
    if conds:
        out.append("fi")
    return out


# --- the files ------------------------------------------------------------------------------------


def requirements(plan: FixPlan) -> str:
    """A requirements file for the framework steps (one interpreter's worth each, labelled)."""
    lines = ["# gpu-doctor fix: Python requirements for the GPU builds this plan installs.",
             "# Install with: python -m pip install -r THIS_FILE -c constraints.txt"]
    extra: list[str] = []
    for a in plan.actions():
        if isinstance(a, ReinstallTorch):
            extra.append(f"--extra-index-url {a.index_url}")
            lines.append(f"torch=={a.version}+cu{a.cuda.replace('.', '')}  # replaces {comment(a.installed or '?')} "
                         f"in {comment(q(a.python))}; uninstall a CPU-only build first")
        elif isinstance(a, PipInstall) and all(safe_requirement(r) for r in a.requirements):
            lines += [f"{r}  # for {comment(q(a.python))}" for r in a.requirements]
    return "\n".join([*lines[:2], *dict.fromkeys(extra), *lines[2:]]) + "\n"


def constraints(plan: FixPlan) -> str:
    """Pins for the nvidia-* wheels the frameworks pull in: the planner took them from the reviewed matrix rows."""
    lines = ["# gpu-doctor fix: constraints for the nvidia-* wheels (from gpu-doctor's reviewed matrix).",
             *plan.constraints]
    return "\n".join(dict.fromkeys(lines)) + "\n"
