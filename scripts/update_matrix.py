#!/usr/bin/env python3
"""Maintainers: compare the framework rows PyPI can tell with the reviewed compat/ files.

Fetches what `gpu-doctor matrix refresh` fetches (doctor/refresh.py: the nvidia-* pins in the core
metadata of torch, tensorflow[and-cuda] and jax-cuda*-plugin wheels) and prints a diff to review:
releases PyPI has that compat/ lacks, and reviewed values PyPI now contradicts. Values PyPI cannot
tell (torchvision, arch lists, TensorFlow's tested CUDA/cuDNN, driver minimums) are not compared.

Reviewed files are never rewritten. --write puts the new releases' rows in compat/pypi-proposed.toml
(rewritten on each run, not read by gpu-doctor) so they can be checked against the release notes and
moved by hand into pytorch.toml / tensorflow.toml / jax.toml, then the proposal deleted.

Usage: python scripts/update_matrix.py [--newest N] [--timeout SEC] [--no-cache] [--write]
Exit codes: 0 compat/ agrees with PyPI, 1 differences found, 2 PyPI could not be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from doctor.matrix import major_minor
from doctor.refresh import GROUPS, NEWEST, FetchError, default_cache_dir, fetch_pypi_rows

COMPAT = Path(__file__).resolve().parent.parent / "compat"
PROPOSED = "pypi-proposed.toml"
Row = dict[str, Any]


@dataclass(frozen=True)
class Change:
    kind: str  # new | changed
    table: str  # torch | tensorflow | jax
    name: str  # "torch 2.5.1", "jax-cuda12-plugin 0.4.30"
    detail: str
    row: Row  # the row PyPI gives


def _key(table: str, row: Row) -> tuple[str, str]:
    return (str(row.get("plugin", "")) if table == "jax" else "", str(row.get("version")))


def _name(table: str, row: Row) -> str:
    return f"{row.get('plugin', table) if table == 'jax' else table} {row.get('version')}"


def summary(table: str, row: Row) -> str:
    """One line of what PyPI says about a release."""
    parts = [f"python {row['python']}"] if row.get("python") else []
    if table == "torch":
        for v in row.get("variant", []):
            parts.append(f"CUDA {v.get('cuda')}" + "".join(f", {k} {v[k]}" for k in ("cudnn", "nccl") if k in v))
        if not row.get("variant"):
            parts.append("no CUDA pins (CUDA bundled in the wheel)")
    elif table == "tensorflow":
        parts.append(f"[and-cuda] {len(row['and_cuda'])} pins" if "and_cuda" in row else "no [and-cuda] extra")
    else:
        cudnn = next((p for p in row.get("pins", []) if p.startswith("nvidia-cudnn")), None)
        parts.append(f"CUDA {row.get('cuda_major')}" + (f", {cudnn}" if cudnn else ""))
    return ", ".join(parts)


def _compare(table: str, reviewed: Row, pypi: Row) -> list[str]:
    """Reviewed values PyPI contradicts or could now supply. A value PyPI cannot tell is not compared."""
    out = []

    def field(label: str, old: Any, new: Any) -> None:
        if new is None or old == new:
            return
        out.append(f"{label}: {'not in compat' if old is None else old} → {new}")

    if table == "torch":
        field("python", reviewed.get("python"), pypi.get("python"))
        field("default_cuda", reviewed.get("default_cuda"), pypi.get("default_cuda"))
        for variant in pypi.get("variant", []):
            mm = major_minor(variant.get("cuda"))
            mine = next((v for v in reviewed.get("variant", []) if major_minor(v.get("cuda")) == mm), None)
            if mine is None:
                out.append(f"variant CUDA {mm}: not in compat")
                continue
            for key in ("cudnn", "nccl"):
                field(f"{key} (CUDA {mm})", mine.get(key), variant.get(key))
    elif table == "tensorflow":
        # compat's python ("3.9-3.11") and cuda/cudnn come from TensorFlow's tested build table,
        # not from the wheel: only the [and-cuda] pins are the same fact.
        if "and_cuda" in reviewed:
            field("and_cuda", reviewed.get("and_cuda"), pypi.get("and_cuda"))
    else:
        field("cuda_major", reviewed.get("cuda_major"), pypi.get("cuda_major"))
        if "pins" in reviewed:
            field("pins", reviewed.get("pins"), pypi.get("pins"))
    return out


def diff(reviewed: dict[str, dict[str, Any]], fetched: dict[str, Any]) -> tuple[list[Change], int]:
    """Changes per table (new releases first, newest first) and how many fetched rows agree."""
    changes, same = [], 0
    for file, table in GROUPS:
        known = {_key(table, r): r for r in reviewed.get(file, {}).get(table, []) if isinstance(r, dict)}
        for row in fetched.get(file, {}).get(table, []):
            mine = known.get(_key(table, row))
            if mine is None:
                changes.append(Change("new", table, _name(table, row), summary(table, row), row))
                continue
            problems = _compare(table, mine, row)
            if problems:
                changes.append(Change("changed", table, _name(table, row), "; ".join(problems), row))
            else:
                same += 1
    return changes, same


def load_reviewed(compat: Path = COMPAT) -> tuple[dict[str, dict[str, Any]], list[str]]:
    data, notes = {}, []
    for file, _ in GROUPS:
        path = compat / f"{file}.toml"
        try:
            data[file] = tomllib.loads(path.read_text())
        except FileNotFoundError:
            data[file] = {}
            notes.append(f"compat/{file}.toml not found: every release counts as new")
        except (OSError, tomllib.TOMLDecodeError) as exc:
            data[file] = {}
            notes.append(f"compat/{file}.toml unreadable ({exc}): every release counts as new")
    return data, notes


def render(changes: list[Change], same: int, skipped: list[str], notes: list[str]) -> str:
    lines = [f"note: {n}" for n in notes]
    for kind, mark, title in (("new", "+", "releases PyPI has and compat/ lacks"),
                              ("changed", "~", "reviewed rows PyPI contradicts (reviewed → PyPI)")):
        picked = [c for c in changes if c.kind == kind]
        if picked:
            lines.append(f"{title}:")
            lines += [f"  {mark} {c.name}: {c.detail}\n      {c.row.get('source')}" for c in picked]
    lines.append(f"{same} fetched release{'s' if same != 1 else ''} agree with compat/")
    if skipped:
        lines.append("skipped (no core metadata on PyPI):")
        lines += [f"  - {s}" for s in skipped]
    return "\n".join(lines)


# --- writing the proposal ---------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(value, list) and all(not isinstance(v, dict) for v in value):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as a TOML value")


def proposal(changes: list[Change], today: str) -> str:
    """compat/-format TOML for the new releases, each row noting it is unreviewed."""
    lines = ["# Proposed from PyPI core metadata by scripts/update_matrix.py --write. NOT REVIEWED, not read",
             "# by gpu-doctor: check each row against the release notes, add what PyPI cannot tell",
             "# (torchvision, arch_list, TensorFlow's tested CUDA/cuDNN, min_cudnn), move it into",
             "# pytorch.toml / tensorflow.toml / jax.toml and delete this file.",
             "schema = 1", f'generated = "{today}"']
    for change in (c for c in changes if c.kind == "new"):
        row = dict(change.row)
        row.setdefault("note", f"proposed from PyPI metadata on {today}; not reviewed")
        lines += ["", f"[[{change.table}]]"]
        variants = row.pop("variant", [])
        lines += [f"{k} = {_toml_value(v)}" for k, v in row.items()]
        for variant in variants:
            lines += ["", f"[[{change.table}.variant]]"]
            lines += [f"{k} = {_toml_value(v)}" for k, v in variant.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--newest", type=int, default=NEWEST, metavar="N",
                        help=f"releases per package to fetch (default: {NEWEST})")
    parser.add_argument("--timeout", type=float, default=20.0, metavar="SEC", help="per request (default: 20)")
    parser.add_argument("--no-cache", action="store_true", help="do not use or fill the user's HTTP cache")
    parser.add_argument("--write", action="store_true", help=f"write the new releases to compat/{PROPOSED}")
    args = parser.parse_args(argv)

    import requests

    with requests.Session() as session:
        try:
            fetched = fetch_pypi_rows(session, args.timeout, None if args.no_cache else default_cache_dir(),
                                      newest=args.newest)
        except FetchError as exc:
            print(f"update_matrix: {exc.kind}: {exc.detail}", file=sys.stderr)
            return 2
        except OSError as exc:  # the HTTP cache could not be written: --no-cache goes around it
            print(f"update_matrix: cache: {exc}", file=sys.stderr)
            return 2
    reviewed, notes = load_reviewed()
    changes, same = diff(reviewed, fetched)
    print(render(changes, same, fetched.get("skipped", []), notes))
    if args.write:
        new = [c for c in changes if c.kind == "new"]
        if new:
            (COMPAT / PROPOSED).write_text(proposal(changes, date.today().isoformat()))
            print(f"wrote {len(new)} proposed row{'s' if len(new) != 1 else ''} to compat/{PROPOSED}")
        else:
            print(f"no new release: compat/{PROPOSED} not written")
    return 1 if changes else 0


if __name__ == "__main__":
    sys.exit(main())
