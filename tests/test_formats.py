"""Adding an output format is one renderer and one registry line (issue 19): the registry of doctor.pipeline drives
both `check --format` and the TUI's export list, so a format registered there appears in both, rendered by it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from doctor.pipeline import FORMATS

EXAMPLE = Path(__file__).resolve().parent.parent / "doctor" / "examples" / "module-userspace-mismatch.json"

# A throwaway renderer registered the way a real one is (one line in FORMATS), before the CLI and the TUI load.
PROBE = f"""
import contextlib, io, json, sys
from doctor import pipeline

def render(report, verbose, strict, **_):
    return "dummy: " + report.status + "\\n"

pipeline.FORMATS["dummy"] = pipeline.Format("dummy", "a throwaway format", render)

from doctor.cli import build_parser, main
from doctor.tui import model

choices = next(a.choices for a in build_parser("check")._subparsers._group_actions[0].choices["check"]._actions
               if "--format" in a.option_strings)
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["check", "--facts", {str(EXAMPLE)!r}, "--format", "dummy"])
from doctor.pipeline import diagnose, load
report = diagnose(load(open({str(EXAMPLE)!r}).read()))
print(json.dumps({{"choices": list(choices), "stdout": out.getvalue(), "code": code,
                  "exports": model.EXPORTS, "export": model.export_text("report.dummy", report)}}))
"""


def test_a_registered_format_appears_in_the_cli_and_the_tui() -> None:
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.splitlines()[-1])
    assert got["choices"] == [*FORMATS, "dummy"]
    assert got["stdout"] == "dummy: fail\n" and got["code"] == 1
    assert got["exports"]["report.dummy"] == "report (dummy: a throwaway format)"
    assert got["export"] == "dummy: fail\n"


def test_the_tui_offers_every_registered_format_and_the_facts_and_nothing_else() -> None:
    from doctor.tui import model

    assert sorted(model.EXPORTS) == sorted([*(f.default_file for f in FORMATS.values()), "facts.json"])
