"""`gpu-doctor fix` and `gpu-doctor pin`: write (never run) the commands that fix or freeze this machine."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from doctor.cli import EXIT_FAIL, EXIT_OK, UsageError
from doctor.commands.check import add_probe_options, collect_from_args, load_facts_file
from doctor.pipeline import PYTHON_FORMATS, SCRIPT_FORMATS
from doctor.safeio import display

FORMATS = SCRIPT_FORMATS
FILES = ("script", "requirements", "constraints", "environment")
PIN_MARK = "# gpu-doctor-pin v1"


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    if name == "fix":
        p.description = ("Turn the findings of this machine (or of --facts FILE) into a fix plan and print it as a "
                         "shell script for the package manager: ordered steps, each naming the finding it resolves "
                         "and how to verify it. Nothing is run; the script has --dry-run, --reboot and a log.")
        p.add_argument("--format", choices=FORMATS, default="auto",
                       help="apt, dnf, conda or pip; auto (default) picks by distribution and by how the Python "
                       "environment was installed")
        p.add_argument("--file", choices=FILES, default="script",
                       help="what to print: the script (default), or the pip requirements / constraints file, or a "
                       "conda environment.yml for the same plan")
        p.add_argument("--target-driver", metavar="BRANCH", help="install this driver branch (e.g. 550)")
        p.add_argument("--target-cuda", metavar="X.Y", help="install this CUDA toolkit / pick this torch CUDA variant")
        p.add_argument("--want", metavar="SPEC", help="the torch build to install, e.g. 'torch==2.5.1'")
        p.add_argument("--json", action="store_true", help="print the plan itself as JSON (gpu-doctor.fixplan/v1)")
    else:
        p.description = ("Freeze a healthy state: write apt holds and an apt preferences pin, dnf versionlock "
                         "entries, a pip constraints file or a conda `pinned` file, so an unattended upgrade "
                         "cannot reintroduce a mismatch. `pin --check FILE` reports drift from such a file "
                         "(exit 1 on drift).")
        p.add_argument("--format", choices=FORMATS, default="auto", help="apt, dnf, conda or pip (auto: by "
                       "distribution)")
        p.add_argument("--check", metavar="FILE", help="compare this machine (or --facts) with a pin file")
        p.add_argument("--force", action="store_true", help="pin even though the check reports failures")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    what = "plan for" if name == "fix" else "pin (or --check)"
    p.add_argument("--facts", metavar="FILE", help=f"{what} this snapshot (from `gpu-doctor snapshot`; - for "
                   "standard input) instead of this machine")
    add_probe_options(p)


def run(name: str, args: argparse.Namespace) -> int:
    return cmd_fix(args) if name == "fix" else cmd_pin(args)


def _facts(args: argparse.Namespace) -> Any:
    if args.facts and (args.root is not None or args.python or args.deep):
        raise UsageError("--facts replays a recorded machine: --root, --python and --deep do not apply")
    return load_facts_file(args.facts) if args.facts else collect_from_args(args)


def _write(args: argparse.Namespace, text: str, executable: bool = False) -> None:
    if not args.output:
        sys.stdout.write(text)
        return
    from doctor.render.files import OutputError, write_output

    try:  # as --output: never renamed over a device or FIFO, never chmod-ed one (a regular file: atomically)
        write_output(args.output, text, mode=0o755 if executable else 0o644)
    except OutputError as exc:
        raise UsageError(f"-o {exc}") from None
    print(f"gpu-doctor: wrote {args.output} ({len(text)} bytes)", file=sys.stderr)


def renderers(plan: Any, fmt: str) -> tuple[Any, Any]:
    """(system renderer, Python renderer) for a format; a usage error when the format cannot render the plan."""
    from doctor.pipeline import ScriptFormatError, script_renderers

    try:
        return script_renderers(plan, fmt)
    except ScriptFormatError as exc:
        raise UsageError(str(exc)) from None


def make_plan(facts: Any, args: argparse.Namespace) -> Any:
    from doctor import pipeline
    from doctor.fixplan import Options, PlanError
    from doctor.matrix import current

    matrix = current()
    report = pipeline.diagnose(facts, matrix=matrix, plan_fixes=False)  # planned once, below
    try:
        return pipeline.plan(facts, report.findings, matrix, Options(
            target_driver=getattr(args, "target_driver", None), target_cuda=getattr(args, "target_cuda", None),
            want=getattr(args, "want", None), python_only=getattr(args, "format", None) in PYTHON_FORMATS))
    except PlanError as exc:
        raise UsageError(str(exc)) from None


def cmd_fix(args: argparse.Namespace) -> int:
    from doctor import pipeline
    from doctor.render import conda, pip

    facts = _facts(args)
    plan = make_plan(facts, args)
    if args.json:
        _write(args, json.dumps(plan.to_dict(), indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    if args.file == "requirements":
        _write(args, pip.requirements(plan))
        return EXIT_OK
    if args.file == "constraints":
        _write(args, pip.constraints(plan))
        return EXIT_OK
    if args.file == "environment":
        env = next((e for e in facts.python_envs if e.packages), None)
        _write(args, conda.environment_yml(plan, _mm(env.version) if env else None))
        return EXIT_OK
    renderers(plan, args.format)  # a usage error when the format cannot render this plan
    _write(args, pipeline.fix_script(plan, args.format), executable=True)
    return EXIT_OK


def _mm(version: str | None) -> str | None:
    from doctor.matrix import major_minor

    return major_minor(version)


# --- pin ----------------------------------------------------------------------------------------


def pins(facts: Any) -> list[tuple[str, str, str]]:
    """(kind, name, version) of what keeps this machine healthy: driver, its packages, framework wheels."""
    from doctor.beliefs import driver_version

    out: list[tuple[str, str, str]] = []
    drv = driver_version(facts)
    if drv:
        out.append(("driver", "nvidia", drv))
    for p in facts.driver.packages:
        if p.version:
            out.append(("pkg", p.name, p.version))
    for env in facts.python_envs:
        for p in env.packages:
            if p.version and (p.name in ("torch", "tensorflow", "jax", "jaxlib") or p.name.startswith(
                    ("nvidia-", "jax-cuda", "tensorflow"))):
                out.append(("py", p.name, p.version))
    return out


def cmd_pin(args: argparse.Namespace) -> int:
    facts = _facts(args)
    if args.check:
        return _check(facts, args.check)
    from doctor.pipeline import diagnose

    report = diagnose(facts, plan_fixes=False)  # only its status is read
    if report.status == "fail" and not args.force:
        bad = [f.code for f in report.findings if f.severity == "fail"]
        print(f"gpu-doctor: not pinning a failing state ({', '.join(bad)}): run `gpu-doctor fix` first, or pass "
              "--force", file=sys.stderr)
        return EXIT_FAIL
    _write(args, render_pin(facts, args.format), executable=args.format in ("apt", "dnf", "auto"))
    return EXIT_OK


def render_pin(facts: Any, fmt: str) -> str:
    from doctor import __version__
    from doctor.matrix import major_minor
    from doctor.pipeline import pin_plan
    from doctor.render import apt, dnf
    from doctor.render.fixscript import render_script

    found = pins(facts)
    marks = [PIN_MARK] + [f"# pin: {pin_field(k)} {pin_field(n)} {pin_field(v)}" for k, n, v in found]
    h = facts.host
    if fmt == "auto":
        fmt = "apt" if apt.supports(h.os_id, h.os_version) else "dnf" if dnf.supports(h.os_id, h.os_version) else "pip"
    if fmt == "pip":
        lines = [f"{n}=={v}" for k, n, v in found if k == "py" and _plain(n, v)]
        return "\n".join([*marks, "# pip constraints: python -m pip install -c THIS_FILE …", *lines]) + "\n"
    if fmt == "conda":
        names = {"torch": "pytorch"}
        lines = []
        for k, n, v in found:
            if k == "py" and not n.startswith("nvidia-") and _plain(n, v):
                lines.append(f"{names.get(n, n)} {v.split('+', 1)[0]}.*")
        torch = next((p for e in facts.python_envs for p in e.packages if p.name == "torch" and p.cuda), None)
        if torch and major_minor(torch.cuda):
            lines.append(f"cuda-version {major_minor(torch.cuda)}.*")
        return "\n".join([*marks, "# conda: copy to $CONDA_PREFIX/conda-meta/pinned", *lines]) + "\n"
    system = apt if fmt == "apt" else dnf
    if not system.supports(h.os_id, h.os_version):
        raise UsageError(f"--format {fmt}: this machine is {h.os_id or '?'} {h.os_version or '?'}")
    plan = pin_plan(facts, "dpkg" if fmt == "apt" else "rpm")
    script = render_script(plan, system, None, f"pin/{fmt}", __version__)
    first, rest = script.split("\n", 1)
    return "\n".join([first, *marks, rest])


def _plain(name: str, version: str) -> bool:
    return bool(re.match(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", name) and re.match(r"^[0-9][A-Za-z0-9.+!\-]*$", version))


# A pin line holds three fields separated by spaces; inside a field, whitespace, "%", control characters and
# lone surrogates are written %XX / %uXXXX, so a name with a space survives the round trip exactly and the
# line stays one comment line.
_PIN_ESCAPE = re.compile(r"[\s%'\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029]")
_PIN_UNESCAPE = re.compile(r"%(?:u([0-9A-Fa-f]{4})|([0-9A-Fa-f]{2}))")


def pin_field(value: str) -> str:
    """One field of a pin line: escaped so it holds no space; '' for an empty value."""
    escaped = _PIN_ESCAPE.sub(lambda m: f"%{ord(m.group(0)):02X}" if ord(m.group(0)) < 0x100 else
                              f"%u{ord(m.group(0)):04X}", str(value))
    return escaped or "''"


def _unpin_field(text: str) -> str:
    return "" if text == "''" else _PIN_UNESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text)


def parse_pins(text: str) -> list[tuple[str, str, str]]:
    """The pins of a pin file; UsageError for a pin line that does not hold exactly three fields (a pin that
    cannot be read must not pass for no drift)."""
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if line.startswith("# pin:"):
            parts = line[len("# pin:"):].split(" ")
            parts = [p for p in parts if p]
            if len(parts) != 3:
                raise UsageError(f"line {number}: a pin line must be '# pin: KIND NAME VERSION', found "
                                 f"{display(line[:120], line=True)!r}")
            kind, name, version = (_unpin_field(p) for p in parts)
            out.append((kind, name, version))
    return out


def drift(facts: Any, pinned: list[tuple[str, str, str]]) -> list[str]:
    now = {(k, n): v for k, n, v in pins(facts)}
    out = []
    for kind, name, version in pinned:
        have = now.get((kind, name))
        what = {"driver": "driver", "pkg": "package", "py": "Python package"}.get(kind, kind)
        if have is None:
            out.append(f"{what} {name}: pinned {version}, now absent")
        elif have != version:
            out.append(f"{what} {name}: pinned {version}, now {have}")
    return out


def _check(facts: Any, path: str) -> int:
    from doctor.safeio import InputError, read_input

    try:
        text = read_input(path, "--check")
    except InputError as exc:
        raise UsageError(str(exc)) from None
    if PIN_MARK not in text:
        raise UsageError(f"--check {path}: not a pin file written by `gpu-doctor pin` (no '{PIN_MARK}' line)")
    try:
        pinned = parse_pins(text)
    except UsageError as exc:
        raise UsageError(f"--check {path}: {exc}") from None
    problems = drift(facts, pinned)
    shown = display(path, line=True)
    if problems:
        print(f"Drift from {shown}:")
        for p in problems:
            print(f"  ✗ {display(p, line=True)}")
        return EXIT_FAIL
    print(f"No drift: {len(pinned)} pin(s) in {shown} match this machine.")
    return EXIT_OK
