"""The hash of what a gpu-doctor wheel is built from (pyproject.toml, doctor/, compat/), so that gpu-validate can
say when the wheels it installs were built from another tree than the one beside them.

    python3 source_hash.py REPO_ROOT
"""

import hashlib
import os
import sys


def source_hash(root: str) -> str:
    digest = hashlib.sha256()
    paths = ["pyproject.toml"]
    for top in ("doctor", "compat"):
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            paths += [os.path.relpath(os.path.join(folder, f), root) for f in files if not f.endswith(".pyc")]
    for rel in sorted(paths):
        digest.update(rel.encode() + b"\0")
        with open(os.path.join(root, rel), "rb") as fh:
            digest.update(hashlib.sha256(fh.read()).digest())
    return digest.hexdigest()[:16]


if __name__ == "__main__":
    print(source_hash(sys.argv[1]))
