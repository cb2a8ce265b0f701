#!/usr/bin/env python3
"""Regenerate the command outputs shown in README.md from real runs, so the README cannot drift.

Each block between `<!-- gen: NAME -->` and `<!-- /gen -->` is the output of the commands of NAME below,
run by bash in a scratch directory (the repository's `doctor/` and `docs/` linked in) with this
interpreter's `gpu-doctor` first on PATH. The inputs are recorded runs on real machines: the bundled
snapshots in doctor/examples/ and docs/examples/ (a `gpu-doctor snapshot` of a Debian 12 machine with
a real torch 2.13.0 CPU wheel in ~/venv), so the output is the same on every machine.

Usage: python scripts/gen_readme.py [--check]   (--check: exit 1 and show the difference when stale;
tests/test_docs.py runs it)
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"

# name -> [(command as shown, lines kept: None = all, or (first line regex, last line regex))]
BLOCKS: dict[str, list[tuple[str, tuple[str, str] | None]]] = {
    "check": [("gpu-doctor check --facts doctor/examples/debian12-535-no-gpu.json", None)],
    "cpu-torch": [("gpu-doctor check --facts docs/examples/debian12-torch-cpu-venv.json",
                   (r"^Python & frameworks", r"^$"))],
    "fix": [("gpu-doctor fix --facts doctor/examples/r470-geforce-cu124-torch.json -o fix.sh", None),
            ("sed -n '/^# What it changes/,/verify:/p' fix.sh", None),
            ("sudo bash fix.sh --dry-run", None)],
}
# What differs between two runs of the same command and says nothing: the clock.
VOLATILE = [(re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"), "2026-11-22 03:01:23")]


def run_block(name: str) -> str:
    bindir = Path(sys.executable).parent
    out: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for d in ("doctor", "docs"):
            os.symlink(REPO / d, Path(tmp) / d)
        env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1",
               "COLUMNS": "100", "TMPDIR": tmp, "GPU_DOCTOR_OS_RELEASE": str(REPO / "docs" / "examples" /
                                                                              "os-release-debian-12")}
        for shown, keep in BLOCKS[name]:
            # sudo: the shown command is what a user types; here it runs as whoever runs the generator.
            proc = subprocess.run(["bash", "-c", shown.removeprefix("sudo ")], cwd=tmp, env=env, text=True,
                                  capture_output=True, timeout=120)
            text = proc.stdout + proc.stderr
            lines = text.rstrip("\n").splitlines()
            if keep:
                start = next(i for i, line in enumerate(lines) if re.search(keep[0], line))
                end = next((i for i in range(start + 1, len(lines)) if re.search(keep[1], lines[i])), len(lines))
                lines = lines[start:end]
            out += [f"$ {shown}", *lines]
        text = "\n".join(out) + "\n"
    for pattern, fixed in VOLATILE:
        text = pattern.sub(fixed, text)
    # The Debian 12 os-release stands in for /etc/os-release, so every machine prints what Debian 12 prints.
    text = text.replace(env["GPU_DOCTOR_OS_RELEASE"], "/etc/os-release").replace(tmp, "/tmp")
    return text.replace(str(REPO), ".")


def regenerate(readme: str) -> str:
    def block(m: re.Match[str]) -> str:
        return f"{m.group(1)}```\n{run_block(m.group(2))}```\n{m.group(3)}"

    return re.sub(r"(<!-- gen: ([\w-]+) -->\n)```\n.*?```\n(<!-- /gen -->)", block, readme, flags=re.S)


def main() -> int:
    old = README.read_text()
    new = regenerate(old)
    if "--check" in sys.argv:
        if new != old:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "README.md",
                                                       "README.md (regenerated)"))
            print("README.md is stale: run python scripts/gen_readme.py")
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
