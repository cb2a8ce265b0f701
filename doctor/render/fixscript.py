"""The bash skeleton every fix script shares, and the loop that renders a plan's steps with one renderer.

Safety rules, all enforced here so no renderer can forget them:
- every value that came from facts reaches the shell through :func:`q` (``shlex.quote``) and every
  comment through :func:`comment` (control characters and newlines flattened), so a hostile snapshot
  cannot inject a command;
- ``set -euo pipefail``; a root check when a step needs root; a guard that stops when
  ``/etc/os-release`` (or ``$GPU_DOCTOR_OS_RELEASE``) is not the OS the plan was made for;
- ``--dry-run`` prints every command instead of running it; a log file; no reboot without ``--reboot``.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Callable
from types import ModuleType

from doctor.model.plan import FixPlan, PlanStep
from doctor.model.remedy import Action, Manual, Reboot

_CTRL = re.compile(r"[\x00-\x1f\x7f]+")


def q(value: object) -> str:
    """A shell word for ``value``: ``shlex.quote``, or bash's ``$'…'`` when it holds a control character, so a
    newline in a path stays a newline (never a line the script's indentation could change) and is visible."""
    text = str(value)
    if not _CTRL.search(text):
        return shlex.quote(text)
    return "$'" + re.sub(r"[\\'\x00-\x1f\x7f]", lambda m: _ANSI_C.get(m.group(0)) or f"\\x{ord(m.group(0)):02x}",
                         text) + "'"


_ANSI_C = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def comment(text: str) -> str:
    """One safe comment line's text: newlines and control characters cannot end the comment."""
    return _CTRL.sub(" ", str(text)).strip()


def say(text: str) -> str:
    """A bash line printing ``text`` literally (it is quoted, never interpreted)."""
    return f"say {q(comment(text))}"


Renderer = Callable[[Action, FixPlan], "list[str] | None"]

# Before the first command, so it covers the file: every single-quoted string in these scripts is a value
# (often from the facts) that must NOT expand — exactly what shellcheck's SC2016 asks about.
LITERAL = "# shellcheck disable=SC2016,SC1003  # single-quoted values are literal on purpose"

PRELUDE = r"""
DRY_RUN=0
REBOOT=0
LOG_FILE=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    --reboot) REBOOT=1 ;;
    --log)
      if [ "$#" -lt 2 ]; then echo "--log needs a file name" >&2; exit 2; fi
      LOG_FILE=$2
      shift ;;
    -h|--help) sed -n '2,/^set -euo pipefail/p' "$0"; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$LOG_FILE" ]; then
  LOG_FILE=/var/log/gpu-doctor-fix.log
  if [ "$DRY_RUN" = 1 ]; then LOG_FILE="${TMPDIR:-/tmp}/gpu-doctor-fix-dry-run.log"; fi
fi
if ! touch "$LOG_FILE" 2>/dev/null; then
  echo "cannot write the log file $LOG_FILE (pass --log FILE)" >&2
  exit 2
fi
exec > >(tee -a "$LOG_FILE") 2>&1

CHANGED=0
NEEDS_REBOOT=""
say() { printf '%s\n' "$*"; }
STEP=""
done_step() { if [ -n "$STEP" ] && [ "$CHANGED" = 0 ]; then say "nothing to change"; fi; }
step() { done_step; STEP=$*; CHANGED=0; printf '\n==> %s\n' "$*"; }
die() { printf 'STOPPED: %s\n' "$*" >&2; exit 1; }
# Run a command, or only print it with --dry-run. Arguments are printed literally.
run() {
  CHANGED=1
  if [ "$DRY_RUN" = 1 ]; then
    say "[dry-run] $*"
    return 0
  fi
  say "+ $*"
  "$@"
}
# Write a small configuration file unless it already has exactly this content.
write_file() {
  if [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; then
    say "unchanged: $1"
    return 0
  fi
  CHANGED=1
  if [ "$DRY_RUN" = 1 ]; then
    say "[dry-run] write $1:"
    printf '%s\n' "$2" | sed 's/^/[dry-run]   /'
    return 0
  fi
  say "+ write $1"
  printf '%s\n' "$2" > "$1"
}
need_reboot() { NEEDS_REBOOT="${NEEDS_REBOOT:+$NEEDS_REBOOT; }$*"; }
say "gpu-doctor fix: started $(date '+%Y-%m-%d %H:%M:%S'), log $LOG_FILE"
if [ "$DRY_RUN" = 1 ]; then say "dry run: every command is printed, nothing is changed"; fi
""".strip("\n")

ROOT_CHECK = r"""
if [ "$DRY_RUN" = 0 ] && [ "$(id -u)" -ne 0 ]; then
  die "this script changes system packages: run it as root (sudo bash $0), or with --dry-run"
fi
""".strip("\n")

OS_GUARD = r"""
OS_RELEASE=${GPU_DOCTOR_OS_RELEASE:-/etc/os-release}
os_field() { sed -n "s/^$1=//p" "$OS_RELEASE" | head -n 1 | tr -d "\"'"; }
[ -r "$OS_RELEASE" ] || die "cannot read $OS_RELEASE"
os_id=$(os_field ID)
os_version=$(os_field VERSION_ID)
if [ "$VERSION_MATCH" = major ]; then os_version=${os_version%%.*}; fi
if [ "$os_id" != "$EXPECTED_ID" ] || [ "$os_version" != "$EXPECTED_VERSION" ]; then
  if [ "$DRY_RUN" = 1 ]; then
    # A dry run changes nothing: show the plan anyway, e.g. read on a laptop before running it on the GPU host.
    say "!!! NOTE: this plan was made for $EXPECTED_ID $EXPECTED_VERSION but $OS_RELEASE says $os_id $os_version."
    say "!!! Dry run only: these commands are for the other machine; a real run here refuses."
  else
    die "this plan was made for $EXPECTED_ID $EXPECTED_VERSION but $OS_RELEASE says $os_id $os_version" \
      "(run gpu-doctor fix on this machine)"
  fi
fi
""".strip("\n")

EPILOGUE = r"""
done_step
printf '\n'
if [ -n "$NEEDS_REBOOT" ]; then
  if [ "$REBOOT" = 1 ]; then
    say "Rebooting: $NEEDS_REBOOT"
    run reboot
  else
    say "A REBOOT IS NEEDED to finish: $NEEDS_REBOOT. Run: sudo reboot (or rerun this script with --reboot)."
  fi
fi
say "gpu-doctor fix: done. Then run: gpu-doctor check"
""".strip("\n")


def render_script(plan: FixPlan, system: ModuleType | None, python: ModuleType | None, fmt: str,
                  version: str, python_only: bool = False) -> str:
    """The whole script: header, skeleton, guards, one function per step, the epilogue. ``python_only``
    (`fix --format pip|conda`): only the steps a Python environment can do."""
    renderers = [r for r in (system, python) if r is not None]
    if python_only:
        # A Python-only script (pip, conda): the steps a Python environment can do; the others are named in the
        # header for `gpu-doctor fix` to do, never half-rendered.
        left = [s for s in plan.steps if not s.python_only]
        plan = dataclasses.replace(plan, steps=[s for s in plan.steps if s.python_only], notes=[
            *plan.notes, *(f"not in this format (needs the system): {s.why} — run `gpu-doctor fix` for it"
                           for s in left)])
    body: list[str] = []
    calls: list[str] = []
    needs_root = False
    preludes: list[str] = []
    for r in renderers:
        text = r.prelude(plan)
        if text not in preludes:
            preludes.append(text)
    for n, step in enumerate(plan.steps, 1):
        lines, root = _render_step(n, step, plan, renderers)
        needs_root |= root
        flat = [part for line in lines for part in line.split("\n")]
        body += [f"step_{n}() {{", *[f"  {line}" if line else "" for line in flat], "}", ""]
        calls.append(f"step_{n}")
    out = ["#!/usr/bin/env bash", *_header(plan, fmt, version, needs_root), LITERAL, "set -euo pipefail", "",
           PRELUDE, ""]
    if needs_root:
        out += [ROOT_CHECK, ""]
    if plan.os_id and system is not None:
        expected = system.expected_os(plan)
        out += [f"EXPECTED_ID={q(expected[0])}", f"EXPECTED_VERSION={q(expected[1])}",
                f"VERSION_MATCH={q(expected[2])}", OS_GUARD, ""]
    elif plan.os_id:
        out += ["# Python-only steps: the OS is not checked (the plan was made on "
                + comment(f"{plan.os_id} {plan.os_version}") + ")", ""]
    out += [*preludes, ""] if preludes else []
    out += body
    out += calls or ["say 'Nothing to fix.'"]
    out += ["", EPILOGUE, ""]
    return "\n".join(out)


def _header(plan: FixPlan, fmt: str, version: str, needs_root: bool) -> list[str]:
    where = comment(plan.os_pretty or f"{plan.os_id or '?'} {plan.os_version or ''}")
    h = [f"# gpu-doctor fix script (format: {fmt}), generated by gpu-doctor {version} for {where}.",
         "# Nothing has been run. Read it first; then: " + ("sudo " if needs_root else "")
         + "bash THIS_FILE [--dry-run] [--reboot] [--log FILE]",
         "#", "# What it changes, and why:"]
    if not plan.steps:
        h.append("#   nothing: no finding has a fix")
    for n, s in enumerate(plan.steps, 1):
        h.append(f"#   {n}. [{comment(', '.join(s.resolves))}] {comment(s.why)}")
        if s.verify:
            h.append(f"#      verify: {comment(shlex.join(s.verify))}")
    for note in plan.notes:
        h.append(f"#   note: {comment(note)}")
    h += ["#", "# A reboot is " + ("needed afterwards; it happens only with --reboot."
                                   if plan.needs_reboot else "not needed."),
          "#", "# Options:",
          "#   --dry-run   print every command instead of running it (no root needed)",
          "#   --reboot    reboot at the end when a step needs it",
          "#   --log FILE  append the log to FILE (default /var/log/gpu-doctor-fix.log; dry runs: $TMPDIR)",
          "# Environment:",
          "#   GPU_DOCTOR_OS_RELEASE=FILE  read FILE instead of /etc/os-release (tests, mounted images)"]
    return h


def _render_step(n: int, step: PlanStep, plan: FixPlan, renderers: list[ModuleType]) -> tuple[list[str], bool]:
    lines = [f"step {q(f'{n}/{len(plan.steps)} ' + comment(step.why))}"]
    root = False
    for action in step.actions:
        if isinstance(action, Manual):
            lines += manual(action)
            continue
        if isinstance(action, Reboot):
            cond = "" if action.always else 'if [ "$CHANGED" = 1 ]; then '
            lines.append(f"{cond}need_reboot {q(comment(action.reason))}" + ("; fi" if cond else ""))
            continue
        for r in renderers:
            got = r.render(action, plan)
            if got is not None:
                lines += got
                root |= getattr(r, "ROOT", False)
                break
        else:
            lines.append(f"# not automated for this system (no package manager of it is rendered): "
                         f"{comment(step.why)} — do it by hand")
            lines.append(say(f"skipped (not automated here): {step.why}"))
    if step.verify:
        lines.append(say("verify: " + shlex.join(step.verify)))
    return lines, root


def manual(action: Manual) -> list[str]:
    out = ["# MANUAL: gpu-doctor does not automate this; do it yourself:", f"#   {comment(action.text)}"]
    out += [f"#   $ {comment(c)}" for c in action.commands]
    out.append(say("manual step (see the comment in the script): " + action.text))
    return out


