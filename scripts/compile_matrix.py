#!/usr/bin/env python3
"""Write compat/matrix.json, the fast-loading copy of the reviewed compat/*.toml files.

The TOML files stay the source of truth: the loader uses the JSON copy only while each file's
SHA-256 matches, and tests/test_compat_data.py fails while the copy is stale.
Usage: python scripts/compile_matrix.py [--check]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from doctor.matrix import COMPILED, compile_matrix

OUT = Path(__file__).resolve().parent.parent / "compat" / COMPILED


def main() -> int:
    text = json.dumps(compile_matrix(), sort_keys=True, separators=(",", ":"), default=str) + "\n"
    if "--check" in sys.argv:
        if not OUT.exists() or OUT.read_text() != text:
            print("compat/matrix.json is stale: run scripts/compile_matrix.py")
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
