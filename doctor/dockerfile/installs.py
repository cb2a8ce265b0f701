"""What a RUN line installs: pip / uv / conda / apt calls, and what they resolve to *today* by the matrix
(`pip install torch` is the newest release's default CUDA build on Linux x86_64; `--index-url …/cuXYZ` that
flavour; `--extra-index-url` that flavour when the index has the release; CONDA_OVERRIDE_CUDA …)."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.dockerfile.syntax import MAX_VALUE, TooLarge, bounded, commands, substitute
from doctor.model.facts import PyPackage

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
    upgrade: bool = False  # -U / --force-reinstall / --reinstall: an installed package that satisfies is replaced
    python: str | None = None  # the image's Python version, when the base says (python:3.10 → 3.10)
    arch: str = "x86_64"  # the matrix describes the Linux x86_64 wheels
    uninstall: bool = False
    target: bool = False  # --target / --prefix / --root: installed outside the image's environment
    editables: list[str] = field(default_factory=list)  # -e X: always a local path (or a VCS URL), never a PyPI name
    text: str = ""


def _expand(words: list[str], scope: dict[str, str], shell: dict[str, str]) -> list[str]:
    both = {**scope, **shell}
    out = [substitute(w, both) if "$" in w else w for w in words]
    if sum(map(len, out)) > 16 * MAX_VALUE and sum(map(len, out)) > 2 * sum(map(len, words)):
        raise TooLarge(f"a command expands to more than {16 * MAX_VALUE} characters; too large to judge")
    return out


MAX_COMMANDS = 2_000  # commands read in one RUN
MAX_SPECS = 2_000  # requirements resolved for one RUN (a long requirements file included)
WRAPPERS = ("sudo", "env", "time", "nice", "nohup", "eatmydata", "exec", "command")
SYSTEM_MANAGERS = {"apt-get": "dpkg", "apt": "dpkg", "yum": "rpm", "dnf": "rpm", "microdnf": "rpm", "tdnf": "rpm"}


LOCKED = {"uv": ("sync",), "poetry": ("install", "sync"), "pipenv": ("install", "sync"), "pdm": ("install", "sync"),
          "hatch": ("env",), "pixi": ("install",)}
SHELLS = ("sh", "bash", "zsh", "dash", ".", "source")
SYSTEM_DIRS = ("/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/usr/local/bin/", "/opt/conda/bin/")
NO_INSTALL = ("download", "index", "wheel", "show", "list", "freeze", "check", "config", "cache", "inspect", "hash",
              "debug", "help", "search", "compile", "tree", "lock")


def opaque_command(argv: list[str]) -> str | None:
    """What a command hands over to that gpu-doctor does not read: a script run by its path (./install.sh,
    /opt/setup.sh, `bash x.sh`, `. /clone.sh`), a lock-file install (uv sync, poetry install, pipenv, pdm),
    `python setup.py install`. None for anything else."""
    if not argv:
        return None
    name = argv[0] if argv[0] == "." else Path(argv[0]).name
    if name in LOCKED and len(argv) > 1 and argv[1] in LOCKED[name]:
        return f"`{name} {argv[1]}` installs what the project's lock file says"
    if name in SHELLS:
        script = next((w for w in argv[1:] if not w.startswith("-")), None)
        if name in (".", "source") and script and (Path(script).name == "activate" or script.startswith("/etc/")):
            return None  # activating a virtual environment, reading /etc/os-release: nothing installed
        if "-c" in argv[1:]:
            return None if not any("$(" in w or "`" in w for w in argv) else f"`{name} -c` runs a fetched script"
        return f"runs the script {script}" if script else None
    if re.fullmatch(r"python\d*(\.\d+)?", name) and len(argv) > 2 and argv[1] == "setup.py" and argv[2] in (
            "install", "develop"):
        return f"`python setup.py {argv[2]}` installs the project and whatever its setup.py asks for"
    if re.fullmatch(r"(pip|python)\d*(\.\d+)?|conda|mamba|micromamba|uv|apt-get|apt|dnf|yum|microdnf|tdnf|"
                    r"ldconfig|nvcc|git|curl|wget|tar|make|cmake|ninja", name):
        return None  # a known program by its path (/opt/venv/bin/pip, /usr/local/cuda/bin/nvcc), not a script
    if argv[0].startswith(("./", "../", "~/")) or (argv[0].startswith("/") and (
            argv[0].endswith((".sh", ".bash", ".py")) or not argv[0].startswith(SYSTEM_DIRS))):
        return f"runs the script {argv[0]}"
    return None


def parse_run(script: str, line: int, scope: dict[str, str], depth: int = 0
              ) -> tuple[list[PipCall], list[list[str]], list[tuple[str, list[str]]], list[str]]:
    """The pip-like, conda-like and system package manager (apt, dnf …) install calls of one RUN, and what
    the reader cannot know it installs (an install on a branch, a script, a lock-file sync), said in words."""
    pips: list[PipCall] = []
    condas: list[list[str]] = []
    systems: list[tuple[str, list[str]]] = []
    unknown: list[str] = []
    branched: dict[str, list[str]] = {}  # installs on a branch, by the kind of branch (if, case, for, ||, &&)
    shell: dict[str, str] = {}  # VAR=value assignments earlier in the same RUN (the first one wins: `A && X=1 || X=2`)
    cmds = commands(script)
    if len(cmds) > MAX_COMMANDS:  # bounded work: no real RUN line holds thousands of commands
        unknown.append(f"a RUN of {len(cmds)} commands: those after the first {MAX_COMMANDS} are not read")
        cmds = cmds[:MAX_COMMANDS]
    for cmd in cmds:
        argv = _expand(cmd.argv, scope, shell)
        while argv and (re.fullmatch(r"[A-Za-z_]\w*=.*", argv[0]) or argv[0] in WRAPPERS):
            word = argv.pop(0)
            if word in WRAPPERS:  # `sudo -E pip install …`, `env X=1 pip …`: the command is what follows
                while argv and argv[0].startswith("-"):
                    argv.pop(0)
                continue
            k, v = word.split("=", 1)
            if not cmd.conditional:
                shell.setdefault(k, v)
        if len(argv) > 1 and Path(argv[0]).name in ("conda", "mamba", "micromamba", "uv", "poetry", "pipenv") \
                and argv[1] == "run":  # `conda run -n env pip install …`: the command is what follows its options
            rest_run = argv[2:]
            while rest_run and rest_run[0].startswith("-"):
                takes = rest_run[0] in ("-n", "--name", "-p", "--prefix", "--python", "--with", "--cwd")
                rest_run = rest_run[2:] if takes else rest_run[1:]
            argv = rest_run
        shell_c = Path(argv[0]).name in ("sh", "bash", "zsh", "dash") and "-c" in argv[1:-1] if argv else False
        if shell_c and depth < 4:  # `bash -c "pip install …"`, exec-form RUN ["/bin/bash", "-c", "…"]: read inside
            inner = argv[argv.index("-c") + 1]
            p2, c2, s2, u2 = parse_run(inner, line, {**scope, **shell}, depth + 1)
            pips += p2
            condas += c2
            systems += s2
            unknown += u2
            continue
        if argv and argv[0] in ("export", "ENV"):
            for w in argv[1:]:
                if "=" in w and not cmd.conditional:
                    k, v = w.split("=", 1)
                    shell.setdefault(k, v)
            continue
        handed = opaque_command(argv)
        if handed:
            unknown.append(handed + ("" if not cmd.conditional else f" (under `{cmd.conditional}`)"))
            continue
        rest = _pip_args(argv)
        base = Path(argv[0]).name if argv else ""
        installs = (rest is not None and rest[:1] and rest[0] in ("install", "uninstall")) or (
            base in ("conda", "mamba", "micromamba") and "install" in argv[1:3]) or (
            base in SYSTEM_MANAGERS and "install" in argv[1:3])
        if installs and cmd.conditional:
            branched.setdefault(cmd.conditional, []).append(" ".join(argv)[:100])
            continue
        if rest is not None and rest and rest[0] in ("install", "uninstall"):
            if any(w in ("--dry-run", "--report", "--download", "-d") or w.startswith(("--dry-run", "--report="))
                   for w in rest):
                continue  # pip install --dry-run / --report: nothing is installed
            call = _pip_call([bounded(w, "a pip argument") for w in rest], line)
            unset = [w for w in call.specs + call.requirements if "$" in w]
            if unset:  # a variable set on a branch, or by the base image: which package it names is unknown
                unknown.append(f"`{' '.join(argv)[:100]}` names {unset[0]}, whose value gpu-doctor cannot know")
                call.specs = [w for w in call.specs if "$" not in w]
                call.requirements = [w for w in call.requirements if "$" not in w]
            if call.target:
                continue  # --target / --prefix DIR: not the image's Python environment
            _index_from_env(call, {**scope, **shell}, uv=base == "uv")
            pips.append(call)
            continue
        if rest is not None:
            continue  # pip download / index / wheel …: nothing is installed
        if base in ("conda", "mamba", "micromamba") and len(argv) > 1:
            sub = argv[2:] if argv[1] == "env" else argv[1:]  # `conda env create -f environment.yml`
            if sub and sub[0] in ("install", "create", "update") and "--dry-run" not in sub:
                sub = [bounded(w, "a conda argument") for w in sub]
                files = [w.split("=", 1)[1] if "=" in w else (sub[i + 1] if i + 1 < len(sub) else "")
                         for i, w in enumerate(sub) if w in ("-f", "--file") or w.startswith("--file=")]
                if argv[1] == "env" and not files:
                    files = ["environment.yml"]
                condas += [["--env-file", f] for f in files if f]
                if argv[1] != "env":
                    condas.append(sub[1:])
        if base in SYSTEM_MANAGERS and "install" in argv[1:3]:
            systems.append((SYSTEM_MANAGERS[base], [bounded(w, "a package") for w in argv[argv.index("install") + 1:]
                                                    if not w.startswith("-")]))
    for kind, whats in branched.items():  # one sentence per kind of branch, naming each install on it
        branch = "only if the test before its `&&` holds" if kind == "&&" else f"only on a branch of `{kind}`"
        shown = "`, `".join(whats[:4]) + ("` …" if len(whats) > 4 else "`")
        unknown.append(f"`{shown} run{'s' if len(whats) == 1 else ''} {branch}, which gpu-doctor does not evaluate")
    return pips, condas, systems, unknown


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
            elif opt in ("-e", "--editable"):
                call.specs.append(value)
                call.editables.append(value)
            elif opt in ("-t", "--target", "--prefix", "--root"):
                call.target = True
            continue
        if w in ("-U", "--upgrade", "--force-reinstall", "-I", "--ignore-installed", "--reinstall"):
            call.upgrade = True
        elif not w.startswith("-"):
            call.specs.append(w)
        i += 1
    return call


def satisfied(installed: PyPackage, spec: str) -> bool:
    """Does an installed package already satisfy a requirement? pip (and uv) then leave it alone unless
    told to upgrade: `pip install torch` on an image that has torch keeps that torch."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    try:
        req = Requirement(spec)
    except InvalidRequirement:
        return False
    if not req.specifier:
        return True
    if not installed.version:
        return False  # unknown: the pinned install is what the image gets
    version = installed.version
    if "+" not in version and installed.cuda and any("+" in s.version for s in req.specifier):
        version += "+cu" + installed.cuda.replace(".", "")
    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


_INDEX = re.compile(r"download\.pytorch\.org/whl/(?:nightly/|test/)?(cu\d+|cpu|rocm[\d.]+)\b")


def _index_flavour(url: str | None) -> str | None:
    m = _INDEX.search(url or "")
    return m.group(1) if m else None


def _cu(flavour: str) -> str:
    digits = flavour[2:]
    return f"{digits[:-1]}.{digits[-1]}"


def _runs_on(row: dict[str, Any], python: str | None) -> bool:
    """Does this release's Requires-Python admit the image's Python (unknown: yes)?"""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    if not python or not row.get("python"):
        return True
    try:
        return SpecifierSet(str(row["python"])).contains(Version(python))
    except (InvalidSpecifier, InvalidVersion):
        return True


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
    if call.arch != "x86_64":
        notes.append((call.line, f"torch for {call.arch}: the matrix describes the Linux x86_64 wheels; its CUDA "
                      "build is unknown"))
        return PyPackage(name="torch", version=pinned, cuda=None, cpu_only=None)
    main = _index_flavour(call.index_url)
    if call.torch_backend and re.fullmatch(r"cu\d+|cpu", call.torch_backend):
        main = call.torch_backend  # uv's --torch-backend picks the PyTorch index of that flavour
    elif call.torch_backend:  # auto: uv picks by the build machine's driver, and an image build has none
        notes.append((call.line, f"--torch-backend={call.torch_backend}: the flavour depends on the machine that "
                      "builds the image; its CUDA build is unknown"))
        return PyPackage(name="torch", version=None, cuda=None, cpu_only=None)
    extra = next((f for f in map(_index_flavour, call.extra_index_urls) if f), None)
    if any("/nightly/" in (u or "") for u in [call.index_url, *call.extra_index_urls]) and (main or extra):
        nightly = main or extra or ""
        notes.append((call.line, "a nightly build of torch: its version is not in the matrix"))
        return PyPackage(name="torch", version=None, cuda=_cu(nightly) if nightly.startswith("cu") else None,
                         cpu_only=nightly == "cpu" or (False if nightly.startswith("cu") else None))
    releases = [r for r in (matrix.rows("pytorch", "torch") if matrix is not None else []) if r.get("version")]

    def ok(r: dict[str, Any]) -> bool:
        try:
            return req.specifier.contains(Version(r["version"]), prereleases=False)
        except InvalidVersion:
            return False

    candidates = [r for r in releases if ok(r) and _runs_on(r, call.python)]
    if main and main.startswith("cu"):  # only releases built for that index
        candidates = [r for r in candidates if any(mm(v.get("cuda")) == _cu(main) for v in r.get("variant", []))]
    row = max(candidates, key=lambda r: Version(r["version"]), default=None)
    if pinned and row:  # `torch==2.7` is 2.7.0 to pip (PEP 440 pads with zeros): name it as the matrix does
        with contextlib.suppress(InvalidVersion):
            pinned = row["version"] if Version(row["version"]) == Version(pinned) else pinned
    version = pinned or (row or {}).get("version")
    if version is None:
        notes.append((call.line, f"{spec}: no torch release in the matrix matches; its CUDA build is unknown"))
        return PyPackage(name="torch", version=None, cuda=None, cpu_only=None)
    row = row if row and row.get("version") == version else matrix.torch(version) if matrix is not None else None
    flavour = local or main or None
    # pip takes the highest version across indexes: X+cuYZ sorts above X, when the extra index has X
    if flavour is None and extra and row and (extra == "cpu" or (extra.startswith("cu") and any(
            mm(v.get("cuda")) == _cu(extra) for v in row.get("variant", [])))):
        flavour = extra
    elif flavour is None and extra and row is None:  # a release older than the matrix: the page's own flavour
        flavour = extra
        notes.append((call.line, f"torch {version} is not in the matrix: read as the {extra} build that "
                      f"{next(u for u in call.extra_index_urls if extra in u)} offers (its local version sorts "
                      "above PyPI's)"))
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


def mm(v: Any) -> str | None:
    m = re.match(r"(\d+)\.(\d+)", str(v or ""))
    return f"{m.group(1)}.{m.group(2)}" if m else None


def wheel_spec(spec: str) -> str | None:
    """A wheel file or URL as a pinned requirement: .../torch-2.1.0%2Bcu121-cp311-…whl → torch==2.1.0+cu121."""
    from urllib.parse import unquote

    m = re.fullmatch(r"([A-Za-z0-9_.]+)-([0-9][^-]*)-[^-]+-[^-]+-[^-]+\.whl", unquote(spec.rsplit("/", 1)[-1]))
    return f"{m.group(1).replace('_', '-')}=={m.group(2)}" if m else None


def spec_name(spec: str) -> str | None:
    m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
    if not m or "/" in spec.split("[", 1)[0] or spec.startswith((".", "git+", "http")) or spec.endswith(".whl"):
        return None
    return m.group(1).lower().replace("_", "-")


def pip_package(spec: str, call: PipCall, matrix: Any, notes: list[tuple[int, str]]) -> PyPackage | None:
    if spec.endswith(".whl"):
        spec = wheel_spec(spec) or spec
    name = spec_name(spec)
    if name is None:
        return None
    if name == "torch":
        return resolve_torch(spec, call, matrix, notes)
    m = re.search(r"==\s*([\w.+!-]+)", spec)
    version = m.group(1) if m else None
    if name in ("tensorflow", "tensorflow-gpu"):
        row = tensorflow_row(spec, call, matrix)
        if row:  # the Linux x86_64 wheel is the GPU build of its tested configuration; [and-cuda] adds the libraries
            return PyPackage(name=name, version=version or row.get("version"), cuda=row.get("cuda"),
                             cudnn=row.get("cudnn"), cpu_only=False)
    if name in ("tensorflow", "tensorflow-gpu", "tf-nightly", "jax", "jaxlib", "tensorflow-cpu"):
        # Their CUDA build is decided by extras (tensorflow[and-cuda], jax[cuda12]); without them: unknown
        extras = re.search(r"\[([^\]]*)\]", spec)
        major = re.search(r"cuda(\d+)", extras.group(1)) if extras else None
        cuda = major.group(1) if major else None
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


def environment_file(text: str) -> tuple[list[str], list[str]]:
    """(conda specs, pip specs) of a conda environment.yml: the `dependencies:` list and its `- pip:` list.
    A small reader for this one shape, so no YAML library is needed."""
    conda: list[str] = []
    pip: list[str] = []
    in_deps = False
    pip_indent: int | None = None
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            in_deps = line.startswith("dependencies:")
            pip_indent = None
            continue
        item = line.strip()
        if not in_deps or not item.startswith("- "):
            continue
        value = item[2:].strip().strip("'\"")
        if pip_indent is not None and indent > pip_indent:
            pip.append(value)
            continue
        pip_indent = None
        if value.rstrip(":") == "pip" and value.endswith(":"):
            pip_indent = indent
        else:
            conda.append(value)
    return conda, pip


def tensorflow_row(spec: str, call: PipCall, matrix: Any) -> dict[str, Any] | None:
    """The tensorflow.toml row `pip install <spec>` gets: the pinned line, else the newest for the image's Python."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    try:
        req = Requirement(spec)
    except InvalidRequirement:
        return None
    rows = matrix.rows("tensorflow", "tensorflow") if matrix is not None else []

    def fits(r: dict[str, Any]) -> bool:
        try:
            admitted = req.specifier.contains(Version(str(r.get("version"))), prereleases=False)
        except InvalidVersion:
            return False
        lo, _, hi = str(r.get("python", "")).partition("-")
        if call.python and lo and hi:
            py = tuple(int(x) for x in call.python.split(".")[:2])
            admitted = admitted and (tuple(map(int, lo.split("."))) <= py <= tuple(map(int, hi.split("."))))
        return admitted

    pinned = next((sp.version for sp in req.specifier if sp.operator == "==" and "*" not in sp.version), None)
    if pinned:  # a row is a release line: 2.16.1 for 2.16.*
        return matrix.tensorflow(pinned) if matrix is not None else None
    return max((r for r in rows if fits(r)), key=lambda r: Version(str(r["version"])), default=None)


def and_cuda_specs(spec: str, call: PipCall, matrix: Any) -> list[str]:
    """What a framework's CUDA extra adds: tensorflow[and-cuda] the NVIDIA wheels its extra requires
    (tensorflow.toml `and_cuda`); jax[cuda12] the jax-cuda12 plugin, which brings its CUDA wheels."""
    jax = re.match(r"jax\[[^\]]*\bcuda(\d+)(?!_local)", spec.replace(" ", ""))
    if jax:
        return ["jaxlib", f"jax-cuda{jax.group(1)}-plugin"]
    if not re.match(r"tensorflow(-gpu)?\[[^\]]*and-cuda", spec.replace(" ", "")):
        return []
    row = tensorflow_row(re.sub(r"\[[^\]]*\]", "", spec), call, matrix)
    return [str(x) for x in (row or {}).get("and_cuda", [])]


def conda_packages(args: list[str], env: dict[str, str]) -> tuple[list[PyPackage], list[str]]:
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
            out.append(PyPackage(name="torch", version=version, cuda=mm(cuda) or cuda, cpu_only=False))
        else:  # conda picks the build from __cuda (CONDA_OVERRIDE_CUDA in a build without a GPU)
            out.append(PyPackage(name="torch", version=version, cuda=mm(override),
                                 cpu_only=False if override or name == "pytorch-gpu" else None))
    return out, specs
