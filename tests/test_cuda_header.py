"""A toolkit without version.json (CUDA from pip's wheels, some distributions' packages) is known by its cuda.h:
`#define CUDA_VERSION 13000`. The header is ~1.1 MB and the define sits in its first ~15 kB, so its head is read
first; the answer must be the same as reading the whole file, wherever the define is."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.host import Host
from doctor.probes.base import Recorder
from doctor.probes.cuda import CUDA_H_HEAD, cuda_h_version, probe_toolkits

LICENCE = "/*\n * Copyright 1993-2025 NVIDIA Corporation.  All rights reserved.\n */\n" * 200


def _toolkit(root: Path, header: str) -> Host:
    inc = root / "usr/local/cuda-13.0/include"
    inc.mkdir(parents=True)
    (inc / "cuda.h").write_text(header)
    (root / "usr/local/cuda").symlink_to("cuda-13.0")
    return Host(root=root, env={"PATH": "/usr/bin"})


@pytest.mark.parametrize("where", ["in-the-head", "past-the-head", "cut-by-the-head", "absent"])
def test_cuda_h_gives_its_version_wherever_the_define_is(tmp_path: Path, where: str) -> None:
    define = "#define CUDA_VERSION 13000\n"
    filler = "#define CU_SOMETHING 1\n" * (2 * CUDA_H_HEAD // 24)  # the rest of a >1 MB header
    if where == "in-the-head":
        text = LICENCE + define + filler
    elif where == "past-the-head":
        text = LICENCE + filler + define
    elif where == "cut-by-the-head":  # the head ends inside the define's digits: "130" must not be read as 13000
        pad = CUDA_H_HEAD - len("#define CUDA_VERSION 130")
        text = "x" * (pad - 1) + "\n" + define + filler
        assert text.encode()[:CUDA_H_HEAD].endswith(b"#define CUDA_VERSION 130")
    else:
        text = LICENCE + filler
    host = _toolkit(tmp_path, text)
    expected = None if where == "absent" else "13.0"
    assert cuda_h_version(host, "/usr/local/cuda-13.0/include/cuda.h") == expected
    if expected is not None:
        rec = Recorder()
        assert [t.version for t in probe_toolkits(host, rec, {})] == ["13.0"]
        assert [v for k, v in rec.sources.items() if k.startswith("toolkit:")] == [
            "file:/usr/local/cuda/include/cuda.h"]
    assert host.notes == []  # a head read is no truncation to report


def test_a_short_or_unreadable_header(tmp_path: Path) -> None:
    host = _toolkit(tmp_path, "#define CUDA_VERSION 12040")  # no newline at all, shorter than the head
    assert cuda_h_version(host, "/usr/local/cuda-13.0/include/cuda.h") == "12.4"
    assert cuda_h_version(host, "/usr/local/cuda-13.0/include/missing.h") is None
    assert cuda_h_version(host, "/usr/local/cuda-13.0/include") is None  # a directory where the file belongs


@pytest.mark.skipif(not Path("/usr/local/cuda-13.0/include/cuda.h").is_file(), reason="no CUDA 13.0 toolkit here")
def test_the_real_cuda_13_header() -> None:
    assert cuda_h_version(Host(), "/usr/local/cuda-13.0/include/cuda.h") == "13.0"
