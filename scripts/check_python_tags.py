#!/usr/bin/env python3
"""Maintainers: the Python versions each framework row claims, against the wheel tags PyPI actually has.

For every release row of compat/pytorch.toml (`python_wheels`), tensorflow.toml (`python`, "3.9-3.12") and
jax.toml (plugin rows: `python`, Requires-Python), reads the release's files from PyPI's simple index (PEP 691
JSON, one request per project) and lists the CPython minors with a Linux x86_64 wheel (cpXY, free-threaded
"cpXYt" builds aside). Prints, per row, the minors the row claims without a wheel and the wheels it misses.
The row's range is what PyPI has, not a promise of what works: use it to review, then edit the row by hand.

Usage: python scripts/check_python_tags.py [--timeout SEC] [--json]
Exit codes: 0 every row agrees, 1 differences found, 2 PyPI could not be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

COMPAT = Path(__file__).resolve().parent.parent / "compat"
SIMPLE = "https://pypi.org/simple/{name}/"
MINORS = [f"3.{n}" for n in range(5, 20)]


def wheel_pythons(files: list[dict[str, Any]]) -> dict[str, set[str]]:
    """release version -> CPython minors with a Linux x86_64 wheel (from the file names of a simple index)."""
    out: dict[str, set[str]] = {}
    for f in files:
        name = str(f.get("filename", ""))
        if not name.endswith(".whl") or f.get("yanked"):
            continue
        try:
            _, version, _, tags = parse_wheel_filename(name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        for tag in tags:
            if "x86_64" not in tag.platform or not tag.platform.startswith(("manylinux", "linux")):
                continue
            if tag.interpreter.startswith("cp") and not tag.abi.endswith("t"):
                digits = tag.interpreter[2:]
                out.setdefault(str(version), set()).add(f"{digits[0]}.{digits[1:]}")
    return out


def claimed(spec: str) -> set[str]:
    """The minors a row's Python field admits: "3.9-3.12", ">=3.9,<3.14", ">=3.10" (open: up to 3.19)."""
    spec = spec.strip()
    if "-" in spec and not any(c in spec for c in "<>=!~"):
        lo, hi = (tuple(int(p) for p in s.split(".")[:2]) for s in spec.split("-", 1))
        return {m for m in MINORS if lo <= tuple(int(p) for p in m.split(".")) <= hi}
    try:
        s = SpecifierSet(spec)
    except InvalidSpecifier:
        return set()
    return {m for m in MINORS if Version(m) in s}


def compare(rows: list[tuple[str, str, str, str]], wheels: dict[str, dict[str, set[str]]]) -> list[dict[str, Any]]:
    """(file, package, version, spec) -> differences; an open upper bound only counts minors below its newest wheel."""
    out = []
    for file, package, version, spec in rows:
        have = wheels.get(package, {}).get(version)
        if not have:
            continue  # no Linux x86_64 wheel on PyPI (e.g. jaxlib+cuda wheels served from JAX's own index)
        want = claimed(spec)
        top = max(have, key=lambda m: int(m.split(".")[1]))
        if "<" not in spec and "-" not in spec:  # open-ended (Requires-Python): only judge up to PyPI's newest
            want = {m for m in want if int(m.split(".")[1]) <= int(top.split(".")[1])}
        extra, missing = sorted(want - have, key=_key), sorted(have - want, key=_key)
        if extra or missing:
            out.append({"file": file, "package": package, "version": version, "row": spec,
                        "wheels": f"{min(have, key=_key)}-{max(have, key=_key)}",
                        "claims_without_wheel": extra, "wheels_not_claimed": missing})
    return out


def _key(m: str) -> int:
    return int(m.split(".")[1])


def row_specs() -> list[tuple[str, str, str, str]]:
    rows = []
    for r in tomllib.loads((COMPAT / "pytorch.toml").read_text()).get("torch", []):
        if r.get("python_wheels"):
            rows.append(("pytorch", "torch", r["version"], r["python_wheels"]))
    for r in tomllib.loads((COMPAT / "tensorflow.toml").read_text()).get("tensorflow", []):
        if r.get("python"):
            rows.append(("tensorflow", "tensorflow", r["version"], r["python"]))
    for r in tomllib.loads((COMPAT / "jax.toml").read_text()).get("jax", []):
        if r.get("python") and str(r.get("plugin", "")).startswith("jax-cuda"):
            rows.append(("jax", r["plugin"], r["version"], r["python"]))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SEC")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import requests

    rows = row_specs()
    wheels: dict[str, dict[str, set[str]]] = {}
    with requests.Session() as s:
        for package in sorted({p for _, p, _, _ in rows}):
            try:
                resp = s.get(SIMPLE.format(name=canonicalize_name(package)), timeout=args.timeout,
                             headers={"Accept": "application/vnd.pypi.simple.v1+json"})
                resp.raise_for_status()
                wheels[package] = wheel_pythons(resp.json().get("files", []))
            except (requests.RequestException, ValueError) as exc:
                print(f"check_python_tags: {package}: {exc}", file=sys.stderr)
                return 2
    diffs = compare(rows, wheels)
    if args.json:
        print(json.dumps(diffs, indent=1))
    for d in diffs if not args.json else []:
        print(f"{d['file']} {d['package']} {d['version']}: row {d['row']!r}, Linux x86_64 wheels {d['wheels']}"
              + (f"; claims {', '.join(d['claims_without_wheel'])} without a wheel" if d["claims_without_wheel"]
                 else "")
              + (f"; misses {', '.join(d['wheels_not_claimed'])}" if d["wheels_not_claimed"] else ""))
    if not diffs and not args.json:
        print(f"{len(rows)} rows agree with PyPI's wheel tags")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
