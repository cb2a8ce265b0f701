#!/usr/bin/env python3
"""Maintainers: compare the framework rows PyPI can tell with the reviewed compat/ files.

Fetches what `gpu-doctor matrix refresh` fetches (doctor/refresh.py: the nvidia-* pins in the core
metadata of torch, tensorflow[and-cuda] and jax-cuda*-plugin wheels) and prints a diff to review:
releases PyPI has that compat/ lacks, and reviewed values PyPI now contradicts. Values PyPI cannot
tell (torchvision, arch lists, TensorFlow's tested CUDA/cuDNN, driver minimums) are not compared.

Reviewed files are never rewritten. --write puts the new releases' rows in compat/pypi-proposed.toml
(rewritten on each run, not read by gpu-doctor) so they can be checked against the release notes and
moved by hand into pytorch.toml / tensorflow.toml / jax.toml, then the proposal deleted.

--nvidia compares NVIDIA's side instead (doctor/redist.py): the newest CUDA / driver / cuDNN redistrib manifests
(developer.download.nvidia.com/compute/*/redist/) against cuda.toml and cudnn.toml; --nvidia-from DIR reads
manifests saved by hand (redistrib_*.json, any product) instead of the network. --write then puts the proposed
rows in compat/nvidia-proposed.toml, each with the manifest's URL as its source.

Usage: python scripts/update_matrix.py [--newest N] [--timeout SEC] [--no-cache] [--write]
                                       [--nvidia | --nvidia-from DIR]
Exit codes: 0 compat/ agrees with PyPI (or NVIDIA), 1 differences found, 2 nothing could be read.
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
NVIDIA_PROPOSED = "nvidia-proposed.toml"
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


# --- NVIDIA's side: redistrib manifests -------------------------------------------------------------


def read_manifests(folder: Path) -> tuple[list[Any], list[Any], list[Any], list[str]]:
    """Every redistrib_*.json in a folder, sorted by product (its release_product)."""
    from doctor import redist

    cuda, drivers, cudnn, notes = [], [], [], []
    parse = {"cuda": redist.parse_cuda, "nvidia-driver": redist.parse_driver, "cudnn": redist.parse_cudnn}
    bins = {"cuda": cuda, "nvidia-driver": drivers, "cudnn": cudnn}
    for path in sorted(folder.glob("*redistrib_*.json")):
        try:
            data = json.loads(path.read_text())
            product = data.get("release_product") if isinstance(data, dict) else None
            if product not in parse:
                notes.append(f"{path.name}: release_product {product!r} is not cuda, nvidia-driver or cudnn")
                continue
            label = redist.parse_index(path.name)
            url = redist.BASE.format(product=product) + (f"redistrib_{label[0]}.json" if label else path.name)
            bins[product].append(parse[product](data, url))
        except (OSError, ValueError) as exc:
            notes.append(f"{path.name}: {exc}")
    return cuda, drivers, cudnn, notes


def render_nvidia(proposals: list[Any], notes: list[str]) -> str:
    lines = [f"note: {n}" for n in notes]
    for kind, mark, title in (("new", "+", "releases NVIDIA's manifests have and compat/ lacks"),
                              ("changed", "~", "reviewed rows NVIDIA's manifests contradict (reviewed → NVIDIA)")):
        picked = [p for p in proposals if p.kind == kind]
        if picked:
            lines.append(f"{title}:")
            lines += [f"  {mark} {p.name}: {p.detail}\n      {p.row.get('source')}" for p in picked]
    if not proposals:
        lines.append("compat/ agrees with every manifest read")
    return "\n".join(lines)


def nvidia_proposal(proposals: list[Any], today: str) -> str:
    lines = ["# Proposed from NVIDIA's redistrib manifests by scripts/update_matrix.py --nvidia --write. NOT REVIEWED,",
             "# not read by gpu-doctor: check each row against the release notes (label, Linux minimum driver,",
             "# cuDNN's support matrix), move it into cuda.toml / cudnn.toml and delete this file.",
             "schema = 1", f'generated = "{today}"']
    for p in proposals:
        if not p.row.get("version"):
            continue
        lines += ["", f"# {p.kind}: {p.name}: {p.detail}", f"[[{p.table}]]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in p.row.items()]
    return "\n".join(lines) + "\n"


def main_nvidia(args: argparse.Namespace) -> int:
    from doctor import redist
    from doctor.matrix import bundled

    if args.nvidia_from:
        cuda, drivers, cudnn, notes = read_manifests(Path(args.nvidia_from))
    else:
        import requests

        with requests.Session() as session:
            cuda, drivers, cudnn, _wheels, notes = redist.fetch(
                session, args.timeout, None if args.no_cache else default_cache_dir(), newest=args.newest, pypi={})
    if not (cuda or drivers or cudnn):
        print(f"update_matrix: no manifest read ({notes[0] if notes else 'none found'})", file=sys.stderr)
        return 2
    proposals = redist.propose(bundled(), cuda, drivers, cudnn)
    print(render_nvidia(proposals, notes))
    if args.write and any(p.row.get("version") for p in proposals):
        (COMPAT / NVIDIA_PROPOSED).write_text(nvidia_proposal(proposals, date.today().isoformat()))
        print(f"wrote the proposed rows to compat/{NVIDIA_PROPOSED}")
    return 1 if proposals else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--newest", type=int, default=NEWEST, metavar="N",
                        help=f"releases per package to fetch (default: {NEWEST})")
    parser.add_argument("--timeout", type=float, default=20.0, metavar="SEC", help="per request (default: 20)")
    parser.add_argument("--no-cache", action="store_true", help="do not use or fill the user's HTTP cache")
    parser.add_argument("--write", action="store_true", help=f"write the new releases to compat/{PROPOSED}")
    side = parser.add_mutually_exclusive_group()
    side.add_argument("--nvidia", action="store_true", help="compare NVIDIA's redistrib manifests instead of PyPI")
    side.add_argument("--nvidia-from", metavar="DIR", help="like --nvidia, from manifests saved in DIR")
    args = parser.parse_args(argv)
    if args.nvidia or args.nvidia_from:
        return main_nvidia(args)

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
