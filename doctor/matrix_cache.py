"""The PyPI rows `gpu-doctor matrix refresh` fetched, as the matrix reads them: a local cache file, never the
network (doctor.refresh writes it). Kept apart from the refresh so that reading the matrix imports no HTTP code.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from doctor.safeio import load_json, read_file

CACHE_FILE = "pypi-rows.json"
SCHEMA = 1
GROUPS = (("pytorch", "torch"), ("tensorflow", "tensorflow"), ("jax", "jax"))


def default_cache_dir(env: dict[str, str] | None = None) -> Path:
    """$XDG_CACHE_HOME/gpu-doctor, else ~/.cache/gpu-doctor (a relative XDG path is ignored, per the spec)."""
    env = dict(os.environ) if env is None else env
    base = env.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / "gpu-doctor"


def validate(data: Any) -> list[str]:
    """What is wrong with a rows document (empty: usable). Every row needs a version that parses and an https source."""
    if not isinstance(data, dict):
        return ["not a JSON object"]
    problems = []
    for file, table in GROUPS:
        rows = data.get(file, {}).get(table) if isinstance(data.get(file), dict) else None
        if not isinstance(rows, list):
            problems.append(f"{file}.{table}: missing")
            continue
        for i, row in enumerate(rows):
            where = f"{file}.{table}[{i}]"
            problems += _row_problems(row, where, need_version=True)
            for j, variant in enumerate(row.get("variant", []) if isinstance(row, dict) else []):
                problems += _row_problems(variant, f"{where}.variant[{j}]", need_version=False)
    return problems


def _row_problems(row: Any, where: str, need_version: bool) -> list[str]:
    if not isinstance(row, dict):
        return [f"{where}: not a table"]
    problems = []
    if need_version:
        from packaging.version import InvalidVersion, Version  # ~50 ms: only when a refreshed cache is read

        try:
            Version(str(row["version"]))
            if not isinstance(row["version"], str):
                raise TypeError
        except (KeyError, InvalidVersion, TypeError):
            problems.append(f"{where}: no valid version")
    source = row.get("source")
    if not isinstance(source, str) or not source.startswith("https://"):
        problems.append(f"{where}: no source URL")
    return problems


def load_cached(cache_dir: Path | str | None = None) -> dict[str, Any] | None:
    """The refreshed rows, or None when there are none or they are unusable.

    {"fetched_at": ISO time, "pytorch": {"torch": [...]}, "tensorflow": {"tensorflow": [...]},
    "jax": {"jax": [...]}, "skipped": [...]}. Never touches the network.
    """
    path = Path(cache_dir or default_cache_dir()) / CACHE_FILE
    try:  # every `check` reads this: a FIFO or a device here must not hang it, nor deep nesting crash it
        raw, more = read_file(path, 64 * 1024 * 1024)
        data = None if more else load_json(raw)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or validate(data):
        return None
    try:
        datetime.fromisoformat(str(data.get("fetched_at")))
    except ValueError:
        return None
    out = {"fetched_at": data["fetched_at"]}
    out.update({file: {table: data[file][table]} for file, table in GROUPS})
    out["skipped"] = [str(s) for s in data.get("skipped", [])] if isinstance(data.get("skipped"), list) else []
    return out


def counts(data: dict[str, Any]) -> dict[str, int]:
    return {table: len(data[file][table]) for file, table in GROUPS}
