"""The attack harness, Dockerfile side: `check --dockerfile` on hostile Dockerfiles and build contexts.

Values are expanded as Docker expands them, so a Dockerfile can grow them (ENV PATH=$PATH:$PATH repeated doubles
each time); numbers are turned into versions and stage indexes; exec-form RUN lines and copied pyproject.toml files
are parsed; requirements files include others. Every run goes through the real command line in-process and must
end with exit 0, 1, 2 or 4 — never a traceback, never a hang (each test is under an alarm) — with bounded work:
what cannot be judged is refused in one line with exit 2. ``ATTACK_COUNTS`` records how many inputs were tried.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile import NASTY, crashed, no_hang_within, report_attack_counts, run_cli, terminal_unsafe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ATTACK_COUNTS: Counter[str] = Counter()
FAST = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    with no_hang_within(60, "check --dockerfile"):  # a loaded 2-core machine; the inputs finish in seconds
        yield


@pytest.fixture(scope="module", autouse=True)
def report_counts() -> Iterator[None]:
    yield
    report_attack_counts(ATTACK_COUNTS)


def check(tmp_path: Path, text: str | bytes, *extra: str, files: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    for name, body in (files or {}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    path = tmp_path / "Dockerfile"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")  # a lone surrogate: invalid UTF-8 bytes
    ATTACK_COUNTS["hostile dockerfiles"] += 1
    r = run_cli(["check", "--dockerfile", str(path), *extra])
    assert not crashed(r), r
    assert r.code in (0, 1, 2, 4), r
    assert not terminal_unsafe(r.out), r.out[:300]
    if r.code == 2:
        lines = r.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpu-doctor: error: --dockerfile "), r.err[:300]
        assert not terminal_unsafe(r.err)
    return r


DIGITS = "9" * 5000
# Inputs refused with one line (exit 2): they would grow without bound or hold no version a build could use.
REFUSED = {
    "ENV PATH=$PATH:$PATH, 40 times": "FROM ubuntu:22.04\n" + "ENV PATH=$PATH:$PATH\n" * 40,
    "ENV X=$X$X from an ARG": "FROM ubuntu:22.04\nARG X=abc\nENV X=$X\n" + "ENV X=${X}${X}\n" * 40,
    "a shell default doubling": "FROM ubuntu:22.04\nENV A=x\n" + "ENV A=${B:-$A}${A:+$A}\n" * 40,
    "a CUDA version of 5000 digits": f"FROM nvidia/cuda:{DIGITS}.0-runtime-ubuntu22.04\n",
    "a torch version of 5000 digits": f"FROM ubuntu:22.04\nRUN pip install torch=={DIGITS}\n",
    "a stage index of 5000 digits": f"FROM ubuntu AS a\nFROM ubuntu:22.04\nCOPY --from={DIGITS} /opt/conda /opt\n",
    "an ARG of 5000 digits in FROM": f"ARG V={DIGITS}\nFROM nvidia/cuda:${{V}}-devel-ubuntu22.04\n",
    "an apt version of 5000 digits": f"FROM ubuntu:22.04\nRUN apt-get install -y cuda-toolkit-12-4={DIGITS}\n",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_growth_and_huge_numbers_are_one_line_errors(tmp_path: Path, name: str) -> None:
    r = check(tmp_path, REFUSED[name])
    assert r.code == 2, (name, r)
    assert "Dockerfile:" in r.err  # the line it stopped at


def test_twenty_thousand_stages_are_refused(tmp_path: Path) -> None:
    r = check(tmp_path, "".join(f"FROM ubuntu:22.04 AS s{i}\n" for i in range(20_000)))
    assert r.code == 2 and "20000 build stages" in r.err


def test_a_build_arg_of_5000_digits_is_refused(tmp_path: Path) -> None:
    r = check(tmp_path, "ARG CUDA=12.4.1\nFROM nvidia/cuda:${CUDA}-runtime-ubuntu22.04\n",
              "--build-arg", f"CUDA={DIGITS}")
    assert r.code == 2


# Inputs read to the end (or to a stated bound) in bounded time: exit 0, 1 or 4, never a crash.
MEGA = 990_000
READ = {
    "exec-form RUN nested 100000 deep": "FROM ubuntu:22.04\nRUN " + "[" * 100_000 + "]" * 100_000 + "\n",
    "exec-form RUN of a long list": "FROM ubuntu:22.04\nRUN " + json.dumps(["pip", "install", *["torch"] * 40_000]),
    "a RUN of one 990 KB word": "FROM ubuntu:22.04\nRUN " + "x" * MEGA + "\n",
    "a RUN of 45000 pip calls": "FROM ubuntu:22.04\nRUN " + "pip install a==1 && " * 45_000 + "true\n",
    "a RUN naming torch 90000 times": "FROM ubuntu:22.04\nRUN pip install " + " ".join(["torch>=1"] * 90_000) + "\n",
    "a RUN of 990 KB of quotes": "FROM ubuntu:22.04\nRUN " + '"' * MEGA + "\n",
    "a RUN of 300000 unclosed ${": "FROM ubuntu:22.04\nRUN " + "${" * 300_000 + "\n",
    "${A:-${A:-…}} 30000 deep": "FROM ubuntu:22.04\nENV B=" + "${A:-" * 30_000 + "x" + "}" * 30_000 + "\n",
    "30000 nested if": "FROM ubuntu:22.04\nRUN " + "if true; then " * 30_000 + "pip install torch" + "; fi" * 30_000,
    "a heredoc that never ends": "FROM ubuntu:22.04\nRUN <<EOF\n" + "pip install torch\n" * 10_000,
    "250 stages, each FROM the last": "FROM ubuntu:22.04 AS s0\n" + "".join(f"FROM s{i} AS s{i + 1}\nENV A=$A:{i}\n"
                                                                         for i in range(249)),
    "escape sequences in names": "FROM nvidia/cuda:12.4.1-\x1b[2J-runtime\nENV LD_LIBRARY_PATH=\x1b]0;x\x07/compat\n"
                                 "RUN pip install 'torch\x9b31m'\n",
}


@pytest.mark.parametrize("name", sorted(READ))
def test_large_and_deep_dockerfiles_are_read_in_bounded_time(tmp_path: Path, name: str) -> None:
    r = check(tmp_path, READ[name])
    assert r.code in (0, 1, 4, 2), (name, r)


def test_a_utf8_bom_is_stripped_as_buildkit_does(tmp_path: Path) -> None:
    r = check(tmp_path, "\ufeffFROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n", "--json")
    assert r.code == 0, r
    assert json.loads(r.out)["facts"]["toolkits"][0]["version"] == "12.4.1"


def test_a_requirements_file_that_includes_itself_is_read_once(tmp_path: Path) -> None:
    r = check(tmp_path, "FROM ubuntu:22.04\nCOPY . /app\nWORKDIR /app\nRUN pip install -r requirements.txt\n",
              "--json", files={"requirements.txt": "-r requirements.txt\n" * 300 + "torch==2.5.1\n",
                               "b.txt": "-r requirements.txt\n"})
    torch = [p for e in json.loads(r.out)["facts"]["python_envs"] for p in e["packages"] if p["name"] == "torch"]
    assert torch and torch[0]["version"] == "2.5.1"


def test_two_requirements_files_that_include_each_other(tmp_path: Path) -> None:
    check(tmp_path, "FROM ubuntu:22.04\nCOPY . /app\nWORKDIR /app\nRUN pip install -r a.txt -r b.txt\n",
          files={"a.txt": "-r b.txt\n" * 200 + "numpy\n", "b.txt": "-r a.txt\n" * 200 + "torch\n"})


def test_a_copied_pyproject_nested_100000_deep(tmp_path: Path) -> None:
    r = check(tmp_path, "FROM ubuntu:22.04\nCOPY . /app\nWORKDIR /app\nRUN pip install .\n", "-v",
              files={"pyproject.toml": "[project]\nname='x'\ndependencies=" + "[" * 100_000 + "]" * 100_000 + "\n"})
    assert "pyproject.toml cannot be read" in r.out


def test_a_requirements_file_of_a_megabyte(tmp_path: Path) -> None:
    check(tmp_path, "FROM ubuntu:22.04\nCOPY . /app\nWORKDIR /app\nRUN pip install -r r.txt\n",
          files={"r.txt": "".join(f"pkg{i}>=1.{i}\n" for i in range(60_000))})


@pytest.mark.parametrize("line", ["COPY --from= /opt/conda /opt/conda", "COPY --from=", "COPY --from=\t/opt /opt",
                                  "COPY --from=$UNSET /opt/conda /opt/conda"])
def test_a_copy_from_no_stage_copies_nothing_known(tmp_path: Path, line: str) -> None:
    """`COPY --from=` with nothing after the `=` was an internal error; it names no stage, so the packages of the
    earlier stage do not come along (and the report is written)."""
    r = check(tmp_path, "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04 AS a\nRUN pip install torch==2.5.1\n"
                        f"FROM ubuntu:22.04\n{line}\n", "--json")
    assert r.code in (0, 1, 4), r
    assert not [p for p in json.loads(r.out)["facts"]["python_envs"] for _ in p["packages"]]


FRAGMENTS = ["FROM nvidia/cuda:12.8.1-devel-ubuntu24.04", "FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
             "FROM $BASE AS a", "FROM a", "ARG BASE=ubuntu:22.04", "ENV PATH=$PATH:/x", "ENV A=${A:-${B:+$A}}",
             "ENV NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=tesla,driver>=535,driver<536", "LABEL gpu-doctor.cpu=true",
             "RUN pip install torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124",
             "RUN if [ -n \"$X\" ]; then pip install torch; fi", "RUN ldconfig /usr/local/cuda/compat",
             "RUN conda install -y pytorch pytorch-cuda=12.1", "COPY --from=a /opt/conda /opt/conda",
             "COPY --from= /a /b", "RUN [\"pip\", \"install\", \"jax[cuda12]\"]", "WORKDIR /app", "COPY . .",
             "RUN pip install -e .[all]",
             "RUN uv sync", "RUN ./install.sh", "RUN pip install -r requirements.txt", "RUN echo \\", "# comment"]


@settings(FAST, max_examples=40)
@given(lines=st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.sampled_from(NASTY),
                                st.builds(lambda a, b: a + b, st.sampled_from(FRAGMENTS), st.sampled_from(NASTY))),
                      min_size=1, max_size=12))
def test_hostile_fragments(tmp_path_factory: pytest.TempPathFactory, lines: list[str]) -> None:
    tmp = tmp_path_factory.mktemp("df")
    check(tmp, "FROM ubuntu:22.04\n" + "\n".join(lines) + "\n", "--host-driver", "535.104.05", "--target-gpu",
          "RTX 4090")


@settings(FAST, max_examples=30)
@given(data=st.binary(max_size=400))
def test_any_bytes_as_a_dockerfile(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    tmp = tmp_path_factory.mktemp("bytes")
    check(tmp, b"FROM ubuntu:22.04\n" + data)
