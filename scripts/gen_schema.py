#!/usr/bin/env python3
"""Regenerate the shipped JSON Schemas from the dataclasses (facts v1, report v1).

Run after changing doctor/model/facts.py or doctor/model/findings.py; tests fail while the files are stale.
Usage: python scripts/gen_schema.py [--check]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from doctor.model.facts import generate_facts_schema
from doctor.model.report import generate_report_schema

OUT = Path(__file__).resolve().parent.parent / "doctor" / "schemas"


def main() -> int:
    check = "--check" in sys.argv
    stale = []
    for name, schema in (("facts-v1.json", generate_facts_schema()), ("report-v1.json", generate_report_schema())):
        text = json.dumps(schema, indent=2) + "\n"
        path = OUT / name
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print("stale: " + ", ".join(stale) + " (run scripts/gen_schema.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
