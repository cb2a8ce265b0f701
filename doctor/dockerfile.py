"""A Dockerfile read as the image it would build: a facts snapshot, without a Docker daemon.

`gpu-doctor check --dockerfile PATH` feeds the result to the same static checks as `check --static` on a
built image. What each line contributes is read, never run:

* ``FROM``: the base image's CUDA / cuDNN / OS / PyTorch from compat/images.toml (tags that name their own
  contents, NGC releases with a row); any other base brings nothing known (python:3.12-slim, ubuntu:24.04).
* ``RUN pip install`` / ``uv pip install`` / ``conda install`` and ``-r requirements*.txt`` (read from the
  build context, the Dockerfile's directory): what they resolve to *today* by the matrix — ``pip install
  torch`` is the newest release's default CUDA build on Linux x86_64; ``--index-url …/cuXYZ`` that flavour.
* ``ENV`` (and the base image's own ENV lines) for LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES,
  NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES, CONDA_OVERRIDE_CUDA …; ``ARG`` defaults substitute.

Multi-stage builds: the final stage is judged (with what it inherits from earlier stages it is built FROM
or COPYs --from). Each fact remembers its line, so every finding can point at ``Dockerfile:12``.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from doctor.facts import (
    ENV_NAMES,
    Cudnn,
    DriverInfo,
    Facts,
    HostInfo,
    LibRef,
    LoaderInfo,
    Package,
    PyPackage,
    PythonEnv,
    Toolkit,
)

MAX_BYTES = 1_000_000  # a Dockerfile or requirements file larger than this is not one
EXTRA_ENV = ("CONDA_OVERRIDE_CUDA", "TORCH_CUDA_ARCH_LIST")
PYTHON = "python3"  # the interpreter the facts name for the image's packages (a fix runs `python3 -m pip`)


class DockerfileError(ValueError):
    """A file that cannot be read as a Dockerfile."""


@dataclass(frozen=True)
class Instruction:
    line: int  # first line, 1-based
    keyword: str  # upper case
    args: str  # continuation lines joined


@dataclass(frozen=True)
class Base:
    image: str  # as written after substitution, e.g. nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04
    line: int
    cuda: str | None = None
    cudnn: str | None = None
    flavour: str | None = None
    nvcc: bool | None = None
    os_id: str | None = None
    os_version: str | None = None
    python: str | None = None
    torch: str | None = None
    cudnn_present: bool = False  # a cuDNN tag whose version the tag does not name ("-cudnn-")
    toolkit: bool = False  # a CUDA toolkit (at least its runtime) is installed under /usr/local/cuda
    known: bool = False  # the matrix says what this image holds
    source: str | None = None  # the compat row's URL
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Install:
    package: PyPackage
    line: int
    how: str  # the command, shortened, for evidence


@dataclass
class Stage:
    name: str | None
    base: Base
    args: dict[str, str] = field(default_factory=dict)
    env: dict[str, tuple[str, int]] = field(default_factory=dict)
    packages: dict[str, Install] = field(default_factory=dict)
    conda: bool = False
    # apt/dnf installs: name → (version, line, manager)
    system: dict[str, tuple[str | None, int, str]] = field(default_factory=dict)
    notes: list[tuple[int, str]] = field(default_factory=list)  # what could not be resolved, by line


@dataclass(frozen=True)
class Image:
    """The final stage of a Dockerfile as facts, with the line each fact came from."""

    path: str
    facts: Facts
    lines: dict[str, int]  # "base", "env.NAME", "pkg.NAME"
    notes: list[tuple[int, str]]


# --- reading ------------------------------------------------------------------------------------


def read_instructions(text: str) -> list[Instruction]:
    """Logical instructions: continuation lines joined, comments dropped, heredocs folded into their RUN."""
    escape = "\\"
    lines = text.splitlines()
    for raw in lines[:5]:  # parser directives come first
        m = re.match(r"#\s*escape\s*=\s*(\S)", raw.strip(), re.I)
        if m:
            escape = m.group(1)
    out: list[Instruction] = []
    i = 0
    while i < len(lines):
        raw = lines[i]
        start = i + 1
        i += 1
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        parts = [stripped]
        while parts[-1].endswith(escape) and i <= len(lines):
            parts[-1] = parts[-1][:-1]
            while i < len(lines) and (not lines[i].strip() or lines[i].strip().startswith("#")):
                i += 1  # comment and empty lines inside a continuation are skipped by Docker
            if i >= len(lines):
                break
            parts.append(lines[i].strip())
            i += 1
        joined = " ".join(p for p in parts if p)
        keyword, _, args = joined.partition(" ")
        heredoc = re.search(r"<<-?\s*[\"']?(\w+)[\"']?", args) if keyword.upper() in ("RUN", "COPY") else None
        if heredoc:
            body = []
            while i < len(lines) and lines[i].strip() != heredoc.group(1):
                body.append(lines[i])
                i += 1
            i += 1
            args = args[: heredoc.start()] + "\n" + "\n".join(body)
        out.append(Instruction(start, keyword.upper(), args.strip()))
    return out


def _exec_form(args: str) -> str:
    """RUN ["pip", "install", "x"] → pip install x (the JSON form is an argv)."""
    if args.startswith("["):
        try:
            argv = json.loads(args)
        except ValueError:
            return args
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
            return shlex.join(argv)
    return args


_VAR = re.compile(r"\$(?:\{(\w+)(?::?([-+])([^}]*))?\}|(\w+))")


def substitute(text: str, scope: dict[str, str]) -> str:
    """Docker's variable substitution: $X, ${X}, ${X:-default}, ${X:+alt}; unknown names stay as written."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(4)
        op, word = m.group(2), m.group(3)
        value = scope.get(name)
        if op == "-":
            return value if value else substitute(word or "", scope)
        if op == "+":
            return substitute(word or "", scope) if value else ""
        return value if value is not None else m.group(0)

    return _VAR.sub(one, text)


def _key_values(args: str) -> list[tuple[str, str]]:
    """ENV/ARG pairs: `K=V K2="v 2"` or the legacy `K V` form."""
    try:
        words = shlex.split(args, posix=True)
    except ValueError:
        words = args.split()
    if words and "=" not in words[0]:
        return [(words[0], " ".join(words[1:]))]
    return [tuple(w.split("=", 1)) if "=" in w else (w, "") for w in words]  # type: ignore[misc]


# --- the base image -----------------------------------------------------------------------------


def base_image(ref: str, line: int, matrix: Any) -> Base:
    """What the matrix knows of a FROM reference (registry, tag and digest tolerated)."""
    ref = ref.split("@", 1)[0]
    name, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        registry, repo = parts[0], "/".join(parts[1:])
    else:
        registry, repo = "docker.io", name
    repo = repo.removeprefix("library/")
    rows = lambda table: matrix.rows("images", table) if matrix is not None else []  # noqa: E731
    env = next(({k: str(v) for k, v in r.items() if k.isupper()} for r in rows("base_env")
                if r.get("image") == repo), {})
    schemes = [r for r in rows("tag_scheme") if r.get("image") == repo]
    if repo == "nvidia/cuda" and schemes:
        m = re.fullmatch(r"(\d+\.\d+(?:\.\d+)?)(?:-cudnn(\d*))?-(base|runtime|devel)-([a-z]+)(\d[\d.]*)", tag)
        if m:
            row = next((r for r in schemes if r.get("flavour") == m.group(3)), schemes[0])
            return Base(ref, line, cuda=m.group(1), cudnn=m.group(2) or None, cudnn_present=m.group(2) is not None,
                        flavour=m.group(3), nvcc=bool(row.get("nvcc")), os_id=_os_id(m.group(4)),
                        os_version=m.group(5), toolkit=True, known=True, source=row.get("source"), env=env)
    if repo == "pytorch/pytorch" and schemes:
        m = re.fullmatch(r"(\d+\.\d+(?:\.\d+)?)-cuda(\d+\.\d+)-cudnn(\d+)-(runtime|devel)", tag)
        if m:
            row = next((r for r in schemes if r.get("flavour") == m.group(4)), schemes[0])
            variant = matrix.torch_variant(m.group(1), m.group(2)) or {}
            cudnn = variant.get("cudnn") if str(variant.get("cudnn", "")).split(".")[0] == m.group(3) else m.group(3)
            return Base(ref, line, cuda=m.group(2), cudnn=cudnn, cudnn_present=True, flavour=m.group(4),
                        nvcc=bool(row.get("nvcc")), torch=m.group(1), known=True, source=row.get("source"))
    if registry == "nvcr.io" and repo == "nvidia/pytorch":
        row = next((r for r in rows("ngc_pytorch") if r.get("tag") == tag), None)
        if row:
            return Base(ref, line, cuda=row.get("cuda"), cudnn=row.get("cudnn"), cudnn_present=bool(row.get("cudnn")),
                        toolkit=True, os_id=row.get("os"),
                        os_version=row.get("os_version"), python=row.get("python"), torch=row.get("torch"),
                        known=True, source=row.get("source"))
        return Base(ref, line)
    m = re.fullmatch(r"(ubuntu|debian|rockylinux|almalinux|centos|fedora|python)", repo)
    if m:  # a base without CUDA: what its tag says of the OS is all there is
        os_m = re.match(r"(\d[\d.]*)", tag) if repo != "python" else None
        return Base(ref, line, os_id=repo if repo != "python" else None, os_version=os_m.group(1) if os_m else None,
                    python=(re.match(r"(\d+\.\d+)", tag) or [None, None])[1] if repo == "python" else None,  # type: ignore[index]
                    known=True, source=None)
    return Base(ref, line)


def _os_id(word: str) -> str:
    return {"ubi": "rhel", "rockylinux": "rocky"}.get(word, word)


# --- installs -----------------------------------------------------------------------------------

PIP_VALUE_OPTIONS = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-r", "--requirement", "-c",
                     "--constraint", "-e", "--editable", "-t", "--target", "--prefix", "--root", "--root-user-action",
                     "--python-version", "--platform", "--only-binary", "--no-binary", "--progress-bar", "--cache-dir",
                     "--src", "--upgrade-strategy", "--trusted-host", "--timeout", "--retries", "--log", "--python",
                     "--implementation", "--abi", "--index-strategy", "--extra-index", "--config-settings", "-C",
                     "--torch-backend"}
CONDA_VALUE_OPTIONS = {"-c", "--channel", "-n", "--name", "-p", "--prefix", "--override-channels-file", "-f", "--file"}


@dataclass
class PipCall:
    line: int
    specs: list[str]
    index_url: str | None = None
    extra_index_urls: list[str] = field(default_factory=list)
    requirements: list[str] = field(default_factory=list)
    torch_backend: str | None = None  # uv pip install --torch-backend=cu126 | cpu | auto
    uninstall: bool = False
    text: str = ""


def commands(script: str) -> list[list[str]]:
    """The simple commands of a RUN script as argv lists; `case` arms for arm64/aarch64 only are dropped
    (an amd64 build does not run them)."""
    script = re.sub(r"(^|\s)#[^\n]*", r"\1", script)  # a trailing shell comment (`RUN rm -rf x  # why`)
    script = "\n".join(seg for seg in re.split(r";;", script)
                       if not re.search(r"[\"']?linux/arm64[\"']?\s*\)|\baarch64\s*\)", seg))
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""  # `${#VAR}` is not a comment; Docker already dropped the comment lines
    out: list[list[str]] = [[]]
    try:
        for tok in lexer:
            if tok and set(tok) <= set(";&|()<>"):
                out.append([])
            else:
                out[-1].append(tok)
    except ValueError:  # an unbalanced quote: fall back to whitespace
        out = [script.split()]
    return [c for c in out if c]


def _expand(words: list[str], scope: dict[str, str], shell: dict[str, str]) -> list[str]:
    return [substitute(w, {**scope, **shell}) for w in words]


SYSTEM_MANAGERS = {"apt-get": "dpkg", "apt": "dpkg", "yum": "rpm", "dnf": "rpm", "microdnf": "rpm", "tdnf": "rpm"}


def parse_run(script: str, line: int, scope: dict[str, str]
              ) -> tuple[list[PipCall], list[list[str]], list[tuple[str, list[str]]]]:
    """The pip-like, conda-like and system package manager (apt, dnf …) install calls of one RUN."""
    pips: list[PipCall] = []
    condas: list[list[str]] = []
    systems: list[tuple[str, list[str]]] = []
    shell: dict[str, str] = {}  # VAR=value assignments earlier in the same RUN (the first one wins: `A && X=1 || X=2`)
    for argv in commands(script):
        argv = _expand(argv, scope, shell)
        while argv and re.fullmatch(r"[A-Za-z_]\w*=.*", argv[0]):
            k, v = argv.pop(0).split("=", 1)
            shell.setdefault(k, v)
        if argv and argv[0] in ("export", "ENV"):
            for w in argv[1:]:
                if "=" in w:
                    k, v = w.split("=", 1)
                    shell.setdefault(k, v)
            continue
        rest = _pip_args(argv)
        if rest is not None and rest and rest[0] in ("install", "uninstall"):
            call = _pip_call(rest, line)
            _index_from_env(call, {**scope, **shell}, uv=Path(argv[0]).name == "uv")
            pips.append(call)
            continue
        base = Path(argv[0]).name if argv else ""
        if base in ("conda", "mamba", "micromamba") and len(argv) > 1 and argv[1] in ("install", "create"):
            condas.append(argv[2:])
        if base in SYSTEM_MANAGERS and "install" in argv[1:3]:
            systems.append((SYSTEM_MANAGERS[base], [w for w in argv[argv.index("install") + 1:]
                                                    if not w.startswith("-")]))
    return pips, condas, systems


def _index_from_env(call: PipCall, env: dict[str, str], uv: bool) -> None:
    """pip and uv read their index from the environment too (ENV PIP_EXTRA_INDEX_URL=… in a Dockerfile)."""
    names = ("UV_DEFAULT_INDEX", "UV_INDEX_URL") if uv else ("PIP_INDEX_URL",)
    if call.index_url is None:
        call.index_url = next((env[n] for n in names if env.get(n)), None)
    extra = ("UV_INDEX", "UV_EXTRA_INDEX_URL") if uv else ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")
    for n in extra:
        call.extra_index_urls += (env.get(n) or "").split()
    if uv and call.torch_backend is None and env.get("UV_TORCH_BACKEND"):
        call.torch_backend = env["UV_TORCH_BACKEND"]


def _pip_args(argv: list[str]) -> list[str] | None:
    """The words after `pip`, `pip3.11`, `python -m pip`, `python3 -mpip`, `uv pip`; None if not a pip call."""
    if not argv:
        return None
    name = Path(argv[0]).name
    if re.fullmatch(r"pip\d*(\.\d+)?", name):
        return argv[1:]
    if name == "uv" and len(argv) > 1 and argv[1] == "pip":
        return argv[2:]
    if re.fullmatch(r"python\d*(\.\d+)?", name):
        for i, w in enumerate(argv[1:], 1):
            if w == "-m" and i + 1 < len(argv) and argv[i + 1] == "pip":
                return argv[i + 2:]
            if w == "-mpip":
                return argv[i + 1:]
    return None


def _pip_call(words: list[str], line: int) -> PipCall:
    call = PipCall(line=line, specs=[], uninstall=words[0] == "uninstall", text=" ".join(words)[:160])
    i = 1
    while i < len(words):
        w = words[i]
        opt, eq, inline = w.partition("=")
        if w.startswith("-") and opt in PIP_VALUE_OPTIONS:
            value = inline if eq else (words[i + 1] if i + 1 < len(words) else "")
            i += 1 if eq else 2
            if opt in ("-i", "--index-url"):
                call.index_url = value
            elif opt in ("--extra-index-url", "--extra-index", "-f", "--find-links"):
                call.extra_index_urls.append(value)
            elif opt in ("-r", "--requirement"):
                call.requirements.append(value)
            elif opt == "--torch-backend":
                call.torch_backend = value
            continue
        if not w.startswith("-"):
            call.specs.append(w)
        i += 1
    return call


_INDEX = re.compile(r"download\.pytorch\.org/whl/(?:nightly/|test/)?(cu\d+|cpu|rocm[\d.]+)\b")


def _index_flavour(url: str | None) -> str | None:
    m = _INDEX.search(url or "")
    return m.group(1) if m else None


def _cu(flavour: str) -> str:
    digits = flavour[2:]
    return f"{digits[:-1]}.{digits[-1]}"


def resolve_torch(spec: str, call: PipCall, matrix: Any, notes: list[tuple[int, str]]) -> PyPackage | None:
    """What `pip install <spec>` of torch gets today on Linux x86_64, by the matrix."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    try:
        req = Requirement(spec)
    except InvalidRequirement:
        return None
    local = None
    pinned = None
    for s in req.specifier:
        if s.operator in ("==", "===") and not s.version.endswith(".*"):
            pinned = s.version.split("+", 1)[0]
            local = s.version.split("+", 1)[1] if "+" in s.version else None
    main = _index_flavour(call.index_url)
    if call.torch_backend and re.fullmatch(r"cu\d+|cpu", call.torch_backend):
        main = call.torch_backend  # uv's --torch-backend picks the PyTorch index of that flavour
    elif call.torch_backend:  # auto: uv picks by the build machine's driver, and an image build has none
        notes.append((call.line, f"--torch-backend={call.torch_backend}: the flavour depends on the machine that "
                      "builds the image; its CUDA build is unknown"))
        return PyPackage(name="torch", version=None, cuda=None, cpu_only=None)
    extra = next((f for f in map(_index_flavour, call.extra_index_urls) if f), None)
    if any("/nightly/" in (u or "") for u in [call.index_url, *call.extra_index_urls]) and (main or extra):
        flavour = main or extra or ""
        notes.append((call.line, "a nightly build of torch: its version is not in the matrix"))
        return PyPackage(name="torch", version=None, cuda=_cu(flavour) if flavour.startswith("cu") else None,
                         cpu_only=flavour == "cpu" or (False if flavour.startswith("cu") else None))
    releases = [r for r in (matrix.rows("pytorch", "torch") if matrix is not None else []) if r.get("version")]

    def ok(r: dict[str, Any]) -> bool:
        try:
            return req.specifier.contains(Version(r["version"]), prereleases=False)
        except InvalidVersion:
            return False

    candidates = [r for r in releases if ok(r)]
    if main and main.startswith("cu"):  # only releases built for that index
        candidates = [r for r in candidates if any(_mm(v.get("cuda")) == _cu(main) for v in r.get("variant", []))]
    row = max(candidates, key=lambda r: Version(r["version"]), default=None)
    version = pinned or (row or {}).get("version")
    if version is None:
        notes.append((call.line, f"{spec}: no torch release in the matrix matches; its CUDA build is unknown"))
        return PyPackage(name="torch", version=None, cuda=None, cpu_only=None)
    row = row if row and row.get("version") == version else matrix.torch(version) if matrix is not None else None
    flavour = local or main or None
    # pip takes the highest version across indexes: X+cuYZ sorts above X, when the extra index has X
    if flavour is None and extra and row and (extra == "cpu" or (extra.startswith("cu") and any(
            _mm(v.get("cuda")) == _cu(extra) for v in row.get("variant", [])))):
        flavour = extra
    if flavour == "cpu":
        return PyPackage(name="torch", version=f"{version}+cpu", cuda=None, cpu_only=True)
    if flavour and flavour.startswith("rocm"):
        return PyPackage(name="torch", version=f"{version}+{flavour}", cuda=None, cpu_only=False)
    cuda = _cu(flavour) if flavour and flavour.startswith("cu") else (row or {}).get("default_cuda")
    if cuda is None:
        notes.append((call.line, f"torch {version}: the CUDA of its default wheel is not in the matrix"))
        return PyPackage(name="torch", version=version, cuda=None, cpu_only=None)
    variant = matrix.torch_variant(version, cuda) if matrix is not None else None
    shown = f"{version}+cu{cuda.replace('.', '')}" if flavour else version
    return PyPackage(name="torch", version=shown, cuda=cuda, cudnn=(variant or {}).get("cudnn"), cpu_only=False)


def _mm(v: Any) -> str | None:
    m = re.match(r"(\d+)\.(\d+)", str(v or ""))
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _wheel_spec(spec: str) -> str | None:
    """A wheel file or URL as a pinned requirement: .../torch-2.1.0%2Bcu121-cp311-…whl → torch==2.1.0+cu121."""
    from urllib.parse import unquote

    m = re.fullmatch(r"([A-Za-z0-9_.]+)-([0-9][^-]*)-[^-]+-[^-]+-[^-]+\.whl", unquote(spec.rsplit("/", 1)[-1]))
    return f"{m.group(1).replace('_', '-')}=={m.group(2)}" if m else None


def _spec_name(spec: str) -> str | None:
    m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
    if not m or "/" in spec.split("[", 1)[0] or spec.startswith((".", "git+", "http")) or spec.endswith(".whl"):
        return None
    return m.group(1).lower().replace("_", "-")


def _pip_package(spec: str, call: PipCall, matrix: Any, notes: list[tuple[int, str]]) -> PyPackage | None:
    if spec.endswith(".whl"):
        spec = _wheel_spec(spec) or spec
    name = _spec_name(spec)
    if name is None:
        return None
    if name == "torch":
        return resolve_torch(spec, call, matrix, notes)
    m = re.search(r"==\s*([\w.+!-]+)", spec)
    version = m.group(1) if m else None
    if name in ("tensorflow", "tensorflow-gpu", "tf-nightly", "jax", "jaxlib", "tensorflow-cpu"):
        # Their CUDA build is decided by extras (tensorflow[and-cuda], jax[cuda12]); without them: unknown
        extras = re.search(r"\[([^\]]*)\]", spec)
        cuda = None
        if extras and re.search(r"cuda(\d+)", extras.group(1)):
            cuda = re.search(r"cuda(\d+)", extras.group(1)).group(1)  # type: ignore[union-attr]
        cpu_only = True if name == "tensorflow-cpu" else (False if cuda or (extras and "and-cuda" in extras.group(1))
                                                         else None)
        return PyPackage(name=name, version=version, cuda=cuda, cpu_only=cpu_only)
    cm = re.fullmatch(r"nvidia-[a-z-]+-cu(\d+)", name)
    if cm:
        return PyPackage(name=name, version=version, cuda=cm.group(1),
                         cudnn=version if name.startswith("nvidia-cudnn-cu") else None)
    cm = re.fullmatch(r"cupy-cuda(\d\d)(\d|x)", name)
    if cm:
        return PyPackage(name=name, version=version,
                         cuda=cm.group(1) if cm.group(2) == "x" else f"{cm.group(1)}.{cm.group(2)}", cpu_only=False)
    return PyPackage(name=name, version=version)


def _conda_packages(args: list[str], env: dict[str, str]) -> tuple[list[PyPackage], list[str]]:
    """conda install words → packages; pytorch with pytorch-cuda / cudatoolkit / cuda-version gives its CUDA."""
    specs: list[str] = []
    i = 0
    while i < len(args):
        w = args[i]
        if w.startswith("-"):
            i += 2 if w.partition("=")[0] in CONDA_VALUE_OPTIONS and "=" not in w else 1
            continue
        specs.append(w.split("::", 1)[-1])
        i += 1
    pins: dict[str, str] = {}
    for s in specs:
        name, *rest = re.split(r"[=<>!~ ]+", s, maxsplit=1)
        pins[name.lower()] = rest[0] if rest else ""
    cuda = next((pins[k] for k in ("pytorch-cuda", "cudatoolkit", "cuda-version", "cuda") if pins.get(k)), None)
    cuda = cuda if cuda and re.fullmatch(r"\d+(\.\d+)*", cuda) else None
    out = []
    name = next((n for n in ("pytorch", "pytorch-gpu", "pytorch-cpu") if n in pins), None)
    if name:
        version = pins[name] or None
        override = env.get("CONDA_OVERRIDE_CUDA")
        if "cpuonly" in pins or name == "pytorch-cpu":
            out.append(PyPackage(name="torch", version=version, cuda=None, cpu_only=True))
        elif cuda:
            out.append(PyPackage(name="torch", version=version, cuda=_mm(cuda) or cuda, cpu_only=False))
        else:  # conda picks the build from __cuda (CONDA_OVERRIDE_CUDA in a build without a GPU)
            out.append(PyPackage(name="torch", version=version, cuda=_mm(override),
                                 cpu_only=False if override or name == "pytorch-gpu" else None))
    return out, specs


# --- the stages ---------------------------------------------------------------------------------


def read(path: str | Path, matrix: Any = None, build_args: dict[str, str] | None = None) -> Image:
    """The final stage of the Dockerfile at ``path`` as facts. Raises DockerfileError on unreadable input."""
    if str(path) == "-":  # standard input; the build context is the current directory
        import sys

        raw = sys.stdin.buffer.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES or b"\0" in raw:
            raise DockerfileError("-: not a Dockerfile (binary, or larger than 1 MB)")
        return from_text(raw.decode("utf-8", errors="replace"), "Dockerfile", matrix or _current(), context=Path.cwd(),
                         build_args=build_args)
    p = Path(path)
    try:
        if not p.is_file():
            raise DockerfileError(f"{path}: not a file" if p.exists() else f"{path}: No such file")
        if p.stat().st_size > MAX_BYTES:
            raise DockerfileError(f"{path}: larger than {MAX_BYTES} bytes; not a Dockerfile")
        raw = p.read_bytes()
    except OSError as exc:
        raise DockerfileError(f"{path}: {exc.strerror or exc}") from None
    if b"\0" in raw:
        raise DockerfileError(f"{path}: a binary file, not a Dockerfile")
    text = raw.decode("utf-8", errors="replace")
    return from_text(text, str(path), matrix or _current(), context=p.parent, build_args=build_args)


def _current() -> Any:
    from doctor.matrix import current

    return current()


def from_text(text: str, path: str, matrix: Any, context: Path | None = None,
              build_args: dict[str, str] | None = None) -> Image:
    instructions = read_instructions(text)
    if not any(i.keyword == "FROM" for i in instructions):
        raise DockerfileError(f"{path}: no FROM line; not a Dockerfile")
    given = dict(build_args or {})
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for ins in instructions:
        if ins.keyword == "ARG" and not stages:
            for k, v in _key_values(ins.args):
                global_args[k] = given.get(k, substitute(v, global_args))
            continue
        if ins.keyword == "FROM":
            words = [w for w in ins.args.split() if not w.startswith("--")]
            ref = substitute(words[0], global_args) if words else ""
            name = words[2].lower() if len(words) >= 3 and words[1].lower() == "as" else None
            parent = next((s for s in reversed(stages) if s.name and s.name == ref.lower()), None)
            if parent:
                stage = Stage(name, parent.base, env=dict(parent.env), packages=dict(parent.packages),
                              conda=parent.conda, system=dict(parent.system), notes=list(parent.notes))
            else:
                base = base_image(ref, ins.line, matrix)
                env = {k: (substitute(v, {}), ins.line) for k, v in base.env.items()}
                stage = Stage(name, base, env=env)
                if not ref or "$" in ref:
                    stage.notes.append((ins.line, f"base image {words[0] if words else '?'}: a build argument "
                                        "without a value (give it with --build-arg); what the base holds is unknown"))
                elif not base.known:
                    stage.notes.append((ins.line, f"base image {ref}: what it holds is not in the matrix "
                                        "(compat/images.toml); its CUDA, cuDNN and frameworks are unknown"))
            stages.append(stage)
            continue
        if not stages:
            continue
        st = stages[-1]
        scope = {**st.args, **{k: v for k, (v, _l) in st.env.items()}}  # ENV overrides an ARG of the same name
        if ins.keyword == "ARG":
            for k, v in _key_values(ins.args):
                st.args[k] = given.get(k, substitute(v, scope) if v else global_args.get(k, ""))
        elif ins.keyword == "ENV":
            for k, v in _key_values(ins.args):
                st.env[k] = (substitute(v, {**scope, k: st.env.get(k, ("", 0))[0]}), ins.line)
                scope[k] = st.env[k][0]
        elif ins.keyword == "COPY" and "--from=" in ins.args:
            src = substitute(re.search(r"--from=(\S+)", ins.args).group(1), scope).lower()  # type: ignore[union-attr]
            other = stages[int(src)] if src.isdigit() and int(src) < len(stages) - 1 else next(
                (s for s in stages[:-1] if s.name == src), None)
            if other:  # what that stage installed comes along (site-packages, /opt/conda are what is copied)
                for n, inst in other.packages.items():
                    st.packages[n] = Install(inst.package, ins.line, f"COPY --from={src} ({inst.how})")
                st.conda = st.conda or other.conda
        elif ins.keyword == "RUN":
            _run(ins, st, scope, matrix, context)
    final = stages[-1]
    return _image(path, final)


def _run(ins: Instruction, st: Stage, scope: dict[str, str], matrix: Any, context: Path | None) -> None:
    script = re.sub(r"^(--\S+\s+)+", "", _exec_form(ins.args))
    pips, condas, systems = parse_run(script, ins.line, scope)
    for manager, words in systems:
        for w in words:
            name, _, version = w.partition("=") if manager == "dpkg" else (w, "", "")
            if re.match(r"(cuda|libcudnn|cudnn|nvidia-driver|libnvidia-compute|nvidia-utils)", name):
                st.system[name] = (version or None, ins.line, manager)
    for call in pips:
        specs = list(call.specs)
        for req in call.requirements:
            specs += _requirements(req, context, ins.line, st.notes, call)
        for spec in specs:
            if call.uninstall:
                name = _spec_name(spec)
                if name:
                    st.packages.pop(name, None)
                continue
            pkg = _pip_package(spec, call, matrix, st.notes)
            if pkg:
                st.packages[pkg.name] = Install(pkg, ins.line, f"pip {call.text}")
    for words in condas:
        st.conda = True
        pkgs, _specs = _conda_packages(words, {k: v for k, (v, _l) in st.env.items()} | scope)
        for pkg in pkgs:
            st.packages[pkg.name] = Install(pkg, ins.line, "conda install " + " ".join(words)[:120])
    if re.search(r"\bconda\b", script):
        st.conda = True


def _requirements(name: str, context: Path | None, line: int, notes: list[tuple[int, str]], call: PipCall,
                  depth: int = 0) -> list[str]:
    """The requirement lines of a file from the build context (by its name: COPY usually keeps it)."""
    if context is None or "$" in name:
        notes.append((line, f"-r {name}: not read (no build context)"))
        return []
    candidates = [context / name, context / Path(name).name]
    path = next((c for c in candidates if c.is_file()), None)
    if path is None or depth > 3:
        notes.append((line, f"-r {name}: not found next to the Dockerfile; what it installs is unknown"))
        return []
    try:
        text = path.read_bytes()[:MAX_BYTES].decode("utf-8", errors="replace")
    except OSError:
        return []
    out: list[str] = []
    for raw in text.splitlines():
        s = raw.split(" #", 1)[0].strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith(("-r ", "--requirement")):
            out += _requirements(s.split(None, 1)[1].strip(), path.parent, line, notes, call, depth + 1)
        elif s.startswith(("--index-url", "-i ")):
            call.index_url = s.split(None, 1)[1].strip() if " " in s else s.partition("=")[2]
        elif s.startswith(("--extra-index-url", "-f ", "--find-links")):
            call.extra_index_urls.append(s.split(None, 1)[1].strip() if " " in s else s.partition("=")[2])
        elif not s.startswith("-"):
            out.append(s.split(";", 1)[0].strip())
    return out


def _image(path: str, st: Stage) -> Image:
    b = st.base
    lines: dict[str, int] = {"base": b.line}
    toolkits: list[Toolkit] = []
    cudnn: list[Cudnn] = []
    loader = LoaderInfo()
    env_path = st.env.get("PATH", ("", 0))[0]
    if b.cuda and b.toolkit:  # nvidia/cuda, NGC: the toolkit (its runtime part at least) is in the image
        toolkits.append(Toolkit(root="/usr/local/cuda", version=b.cuda, nvcc_version=b.cuda if b.nvcc else None,
                                source=f"dockerfile:FROM {b.image}"))
        if b.nvcc and "/usr/local/cuda/bin" in env_path:
            loader = LoaderInfo(nvcc_on_path=LibRef(path="/usr/local/cuda/bin/nvcc", version=b.cuda))
    if (b.cudnn or b.cudnn_present) and not b.torch:
        cudnn.append(Cudnn(version=b.cudnn, location=f"base image {b.image}", source="image"))
    known_cuda = {_mm(t.version) for t in toolkits}
    for name, (version, ln, _manager) in st.system.items():
        m = re.fullmatch(r"cuda(?:-(toolkit|nvcc|runtime|libraries|cudart))?-(\d+)-(\d+)", name)
        if m and f"{m.group(2)}.{m.group(3)}" not in known_cuda:
            cuda = f"{m.group(2)}.{m.group(3)}"
            known_cuda.add(cuda)
            nvcc = m.group(1) in (None, "toolkit", "nvcc")
            toolkits.append(Toolkit(root=f"/usr/local/cuda-{cuda}", version=cuda, nvcc_version=cuda if nvcc else None,
                                    source=f"dockerfile:{name}"))
            lines[f"toolkit.{cuda}"] = ln
            if nvcc and re.search(rf"/usr/local/cuda(-{re.escape(cuda)})?/bin", env_path) and not loader.nvcc_on_path:
                loader = LoaderInfo(nvcc_on_path=LibRef(path=f"/usr/local/cuda-{cuda}/bin/nvcc", version=cuda))
        m = re.fullmatch(r"(?:lib)?cudnn(\d+)(?:-cuda-\d+)?", name)
        if m:
            cudnn.append(Cudnn(version=(version or "").split("-")[0] or m.group(1), location=f"{name} (apt/dnf)",
                               source="package"))
            lines["cudnn.package"] = ln
    for var in ("CUDA_HOME", "CUDA_PATH"):  # as the probe does: the toolkit found through the variable says so
        home = (st.env.get(var, ("", 0))[0] or "").rstrip("/")
        hit = [i for i, t in enumerate(toolkits) if home and (t.root.rstrip("/") == home or (
            home == "/usr/local/cuda" and len(toolkits) == 1))]  # the /usr/local/cuda link to the only toolkit
        if hit and not toolkits[hit[0]].source.startswith("env:"):  # type: ignore[union-attr]
            toolkits[hit[0]] = replace(toolkits[hit[0]], source=f"env:{var}")
    drivers = [Package(name=n, version=v, manager=mgr) for n, (v, _l, mgr) in st.system.items()
               if n.startswith(("cuda-compat", "nvidia-driver", "libnvidia-compute", "nvidia-utils"))]
    packages = {n: i.package for n, i in st.packages.items()}
    for n, inst in st.packages.items():
        lines[f"pkg.{n}"] = inst.line
    if b.torch and "torch" not in packages:
        packages["torch"] = PyPackage(name="torch", version=b.torch, cuda=_mm(b.cuda), cudnn=b.cudnn, cpu_only=False)
        lines["pkg.torch"] = b.line
    for n, p in packages.items():
        if p.cudnn and n == "torch" and not any(c.source == "pip" for c in cudnn):
            cudnn.append(Cudnn(version=p.cudnn, location=f"{PYTHON} [{label_of(p)}]", source="pip"))
    envs = [PythonEnv(executable=PYTHON, version=b.python, origin="dockerfile",
                      packages=sorted(packages.values(), key=lambda p: p.name))] if packages else []
    env: dict[str, str | None] = {k: None for k in ENV_NAMES}
    for k, (v, ln) in st.env.items():
        if k in ENV_NAMES or k in EXTRA_ENV:
            env[k] = v
            lines[f"env.{k}"] = ln
    if st.conda and env.get("CONDA_PREFIX") is None:
        env["CONDA_PREFIX"] = "/opt/conda"
    host = HostInfo(os_id=b.os_id, os_version=b.os_version, arch="x86_64",
                    os_pretty=f"Dockerfile {path} (final stage FROM {b.image})", container="docker")
    # An unknown base image may hold a toolkit: only a known one lets "no toolkit" mean absent.
    sources = {"python_envs": f"dockerfile:{path}", "env": f"dockerfile:{path}"}
    if b.known:
        sources["toolkits"] = f"dockerfile:{path}"
    if b.source:
        sources["base"] = b.source
    facts = Facts(host=host, driver=DriverInfo(packages=drivers), toolkits=toolkits, loader=loader, cudnn=cudnn,
                  python_envs=envs, env=env, sources=sources)
    return Image(path=path, facts=facts, lines=lines, notes=list(st.notes))


def label_of(p: PyPackage) -> str:
    return f"{p.name} {p.version}" if p.version else p.name


# --- pointing findings at lines -------------------------------------------------------------------


def line_for(finding: Any, image: Image) -> int:
    """The Dockerfile line a finding is about: an ENV line its evidence quotes; else, in its title, then its
    detail, then its evidence, the install of a package it names or the toolkit it names; else the FROM line
    of the final stage."""
    for e in finding.evidence:
        if e.fact.startswith("env.") and image.lines.get(e.fact):
            return image.lines[e.fact]
    pkgs = sorted((k[4:] for k in image.lines if k.startswith("pkg.")), key=len, reverse=True)
    toolkits = {k[8:]: ln for k, ln in image.lines.items() if k.startswith("toolkit.")}
    for text in (finding.title, finding.detail or "", " ".join(f"{e.fact} {e.value}" for e in finding.evidence)):
        for name in pkgs:
            if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text):
                return image.lines[f"pkg.{name}"]
        for cuda, ln in toolkits.items():
            if re.search(rf"/usr/local/cuda-{re.escape(cuda)}\b", text):
                return ln
        if re.search(r"\b(CUDA toolkit|nvcc)\b", text):
            return next(iter(toolkits.values()), image.lines["base"])
    for k, ln in image.lines.items():
        if k.startswith("env.") and k[4:] in finding.title:
            return ln
    return image.lines["base"]


def locate(report: Any, image: Image) -> Any:
    """The report with each finding pointing at its line: `Dockerfile:12: title`, and the location as
    evidence (fact ``dockerfile``) for JSON and CI annotations."""
    from doctor.findings import Evidence

    found = []
    for f in [*report.findings, *note_findings(image)]:
        if f.code == "dockerfile.unresolved":
            found.append(f)
            continue
        ln = line_for(f, image)
        where = f"{image.path}:{ln}"
        found.append(replace(f, title=f"{where}: {f.title}",
                             evidence=[Evidence("dockerfile", where, "dockerfile"), *f.evidence]))
    return replace(report, findings=found)


def note_findings(image: Image) -> list[Any]:
    """What the reader could not resolve, as info findings at their lines (shown with -v and in JSON)."""
    from doctor.findings import Evidence, Finding

    return [Finding(code="dockerfile.unresolved", severity="info", title=f"{image.path}:{ln}: {text}",
                    evidence=[Evidence("dockerfile", f"{image.path}:{ln}", "dockerfile")], area="Environment",
                    check="dockerfile.unresolved")
            for ln, text in image.notes]
