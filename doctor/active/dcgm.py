"""`gpu-doctor smoke --level 3`: hand over to NVIDIA DCGM's `dcgmi diag` when a host engine answers.

`dcgmi` is only a client: without a running `nv-hostengine` every command prints "Unable to establish a
connection to the specified host". So `dcgmi discovery -l` runs first (15 s); when it fails the diagnostic is
a skipped step with that reason. Otherwise `dcgmi diag -r N` runs with the time budget (`--dcgm-seconds`,
default 1800) as its timeout, the level chosen from the budget: ≥ 1200 s → 3 (DCGM documents ~15 minutes),
≥ 300 s → 2 (~2 minutes), less → 1 (seconds).

The plain-text table is parsed, not `-j`: no real JSON output of `dcgmi diag` was available to test a parser
against (tests/data/dcgmi/SOURCES.md). A test row is `| <name> | Pass|Fail|Warn|Skip[ - All|…] |`, followed by
`Info`/`Warning`/`Error` rows whose text DCGM wraps at 45 characters, mid-word, over continuation rows. What it
read is recorded (facts ``active.dcgm``); :mod:`doctor.checks.active.dcgm` judges it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from doctor.active.events import Event, Outcome, Progress

if TYPE_CHECKING:
    from doctor.host import Host

DEFAULT_SECONDS = 1800
DISCOVERY_TIMEOUT = 15.0
MESSAGE_KINDS = ("Info", "Warning", "Error")
METADATA = {"DCGM Version": "version", "Driver Version Detected": "driver", "GPU Device IDs Detected": "device_ids"}


def level_for(seconds: int) -> int:
    return 3 if seconds >= 1200 else 2 if seconds >= 300 else 1


def parse_dcgmi_diag(text: str) -> dict[str, Any]:
    """Pure: the metadata and each test with its category, status, scope and messages (unwrapped)."""
    out: dict[str, Any] = {"version": None, "driver": None, "device_ids": None, "tests": [], "table": False}
    category = None
    msg: dict[str, Any] | None = None
    for line in text.splitlines():
        cat = re.match(r"^[|+]-{3,}\s+(\w[\w ]*?)\s+-+\+", line)
        if cat:
            category, msg = cat[1], None
            continue
        if not line.startswith("|") or not line.rstrip().endswith("|"):
            continue
        parts = line.rstrip().split("|")
        if len(parts) < 4:
            continue
        name, cell = parts[1].strip(), "|".join(parts[2:-1])
        chunk = cell[1:] if cell.startswith(" ") else cell
        if name == "Diagnostic" and cell.strip() == "Result":
            out["table"] = True
            continue
        if name in METADATA:
            out[METADATA[name]] = cell.strip()
        elif name in MESSAGE_KINDS and out["tests"]:
            msg = {"kind": name, "text": chunk[:45]}
            out["tests"][-1]["messages"].append(msg)
        elif not name and out["tests"]:
            per_gpu = re.match(r"^\s*GPU(\d+): (\w+)", cell)
            if per_gpu and msg is None:  # DCGM 4.x: a status line per GPU under the test
                out["tests"][-1]["gpus"][int(per_gpu[1])] = per_gpu[2]
            elif msg is not None:
                # Wrapped at 45 characters: the chunks join as they are ("disab" + "led."), spaces included.
                msg["text"] += chunk[:45]
        elif name:
            status, _, scope = cell.strip().partition(" - ")
            out["tests"].append({"category": category, "name": name, "status": status, "scope": scope or None,
                                 "messages": [], "gpus": {}})
            msg = None
    for test in out["tests"]:
        for m in test["messages"]:
            m["text"] = re.sub(r"\s+", " ", m["text"]).strip()
    return out


def dcgm_events(host: Host, seconds: int = DEFAULT_SECONDS) -> Iterator[Event]:
    level = level_for(seconds)
    if host.which("dcgmi") is None:
        yield _outcome({"skipped": "dcgmi is not installed", "level": level})
        return
    yield Progress(None, "dcgmi discovery -l (is a DCGM host engine running?)")
    probe = host.run(["dcgmi", "discovery", "-l"], timeout=DISCOVERY_TIMEOUT)
    said = (probe.stdout + "\n" + probe.stderr).strip()
    if probe.error or probe.returncode != 0 or "Unable to establish a connection" in said:
        reason = probe.error or next((ln.strip() for ln in said.splitlines() if ln.strip()),
                                     f"exit {probe.returncode}")
        yield _outcome({"skipped": f"no DCGM host engine answered `dcgmi discovery -l`: {reason}", "level": level})
        return
    yield Progress(None, f"dcgmi diag -r {level} (up to {seconds} s; its own progress is not streamed)")
    result = host.run(["dcgmi", "diag", "-r", str(level)], timeout=seconds)
    rec: dict[str, Any] = {"level": level, "returncode": result.returncode}
    if result.error:
        yield _outcome({**rec, "error": result.error})
        return
    parsed = parse_dcgmi_diag(result.stdout + "\n" + result.stderr)
    if not parsed["tests"]:
        rec["output"] = (result.stdout + result.stderr).strip()[:500]
    yield _outcome({**rec, **parsed})


def _outcome(rec: dict[str, Any]) -> Outcome:
    from doctor.active.record import outcome
    from doctor.model.facts_active import ActiveFacts, DcgmDiag, coerce

    summary = f"DCGM: skipped ({rec['skipped']})" if rec.get("skipped") else None
    return outcome(ActiveFacts(dcgm=coerce(DcgmDiag, rec)), {"dcgm": rec}, summary)
