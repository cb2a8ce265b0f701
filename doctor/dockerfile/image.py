"""The stages of a Dockerfile and the final one as facts: the base image from compat/images.toml, ARG/ENV,
what RUN lines install (installs.py), `COPY --from` and `FROM <stage>` inheritance, each fact with its line."""

from __future__ import annotations

import posixpath
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from doctor.dockerfile.installs import (
    MAX_SPECS,
    PipCall,
    and_cuda_specs,
    conda_packages,
    environment_file,
    mm,
    parse_run,
    pip_package,
    satisfied,
    spec_name,
    wheel_spec,
)
from doctor.dockerfile.syntax import (
    Instruction,
    TooLarge,
    bounded,
    exec_form,
    key_values,
    read_instructions,
    substitute,
)
from doctor.model.facts import (
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
from doctor.safeio import read_file

# A RUN that runs a fetched script (`curl … | sh`, `sh -c "$(curl …)"`); scripts by path are installs.opaque_command
OPAQUE = re.compile(r"\|\s*(sudo\s+)?(ba|z)?sh\b|\$\((curl|wget)\b")
# A RUN that registers a forward-compatibility directory with the loader: `ldconfig /usr/local/cuda-12.4/compat/`,
# `echo /usr/local/cuda/compat > /etc/ld.so.conf.d/…`
COMPAT_DIR = re.compile(r"(?:\bldconfig\s+(?:-\w+\s+)*|\becho\s+[\"']?)(/.*?/compat)(?=/|\b)(?![\w-])")
# Installers of build tools piped to a shell (uv, poetry, rustup, get-pip, Node): they install that tool, no CUDA
TOOL_INSTALLERS = re.compile(r"astral\.sh/uv|install\.python-poetry\.org|sh\.rustup\.rs|bootstrap\.pypa\.io/get-pip|"
                             r"deb\.nodesource\.com|nvm-sh/nvm|pixi\.sh/install|get\.pnpm\.io")
# A RUN that fetches files (a clone, a download): a requirements file it names comes from there, not the context
FETCHES = re.compile(r"\bgit\s+clone\b|\bwget\b|\bcurl\b|\bgit\s+(checkout|pull)\b|\bgh\s+repo\s+clone\b")
# COPY --from sources that carry a Python environment (and so the packages installed in that stage)
PYTHON_TREE = re.compile(r"site-packages|dist-packages|conda|venv|/lib/python|\.local|^/usr(/local)?/?$|^/opt/?$|^/$")
MAX_BYTES = 1_000_000  # a Dockerfile or requirements file larger than this is not one
HEDGED = ("torch", "tensorflow", "tensorflow-gpu", "jax", "jaxlib", "cupy-cuda12x", "cupy-cuda11x", "cupy-cuda13x")
MAX_STAGES = 256  # FROM lines (BuildKit's own graphs of thousands of stages are no real Dockerfile)
MAX_REQUIREMENTS = 5_000  # requirement lines read for one pip call, all included files together
EXTRA_ENV = ("CONDA_OVERRIDE_CUDA", "TORCH_CUDA_ARCH_LIST", "NVIDIA_REQUIRE_CUDA", "NVIDIA_DISABLE_REQUIRE")
CPU_LABEL = "gpu-doctor.cpu"  # LABEL gpu-doctor.cpu=true: an image meant for CPUs (as `check --cpu` says)
PYTHON = "python3"  # the interpreter the facts name for the image's packages (a fix runs `python3 -m pip`)


class DockerfileError(ValueError):
    """A file that cannot be read as a Dockerfile."""


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
    require_exceptions_known: bool = True  # the brand exceptions of its NVIDIA_REQUIRE_CUDA are in the table
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
    workdir: str = "/"
    opaque: int = 0  # the first line that runs a script (./install.sh, curl … | sh): what it installs is unknown
    copied: dict[str, str] = field(default_factory=dict)  # COPY from the build context: image path → context path
    arch: str = "x86_64"  # FROM --platform=linux/arm64 builds for aarch64
    cpu_label: int = 0  # the line of LABEL gpu-doctor.cpu=true: the image says it is meant for CPUs
    compat: tuple[int, str] | None = None  # (line, dir) of a RUN that puts a cuda-compat directory on the loader path
    hedged: set[str] = field(default_factory=set)  # packages resolved as if an unknown base had none of them
    python: str | None = None  # the Python the image installs itself (apt python3.11, conda python=3.10, uv python)
    fetched: int = 0  # the first line of a RUN that clones or downloads files (they are not the build context's)

    def context_path(self, path: str) -> str | None:
        """Where a path of the image came from in the build context (COPY . /app → /app/x is ./x)."""
        full = posixpath.normpath(posixpath.join(self.workdir, path))
        for dest in sorted(self.copied, key=len, reverse=True):
            if full == dest or full.startswith(dest.rstrip("/") + "/"):
                return posixpath.normpath(posixpath.join(self.copied[dest], full[len(dest):].lstrip("/")))
        return None


@dataclass(frozen=True)
class Image:
    """The final stage of a Dockerfile as facts, with the line each fact came from."""

    path: str
    facts: Facts
    lines: dict[str, int]  # "base", "env.NAME", "pkg.NAME"
    notes: list[tuple[int, str]]
    hedged: tuple[str, ...] = ()  # packages read as if the (unknown) base image had none: no failure rests on them


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

    def rows(table: str) -> list[dict[str, Any]]:
        return matrix.rows("images", table) if matrix is not None else []

    env = next(({k: str(v) for k, v in r.items() if k.isupper()} for r in rows("base_env")
                if r.get("image") == repo), {})
    schemes = [r for r in rows("tag_scheme") if r.get("image") == repo]
    if repo == "nvidia/cuda" and schemes:
        m = re.fullmatch(r"(\d+\.\d+(?:\.\d+)?)(?:-cudnn(\d*))?-(base|runtime|devel)-([a-z]+)(\d[\d.]*)", tag)
        if m:
            row = next((r for r in schemes if r.get("flavour") == m.group(3)), schemes[0])
            # every nvidia/cuda image sets NVIDIA_REQUIRE_CUDA=cuda>=<major.minor>, with brand exceptions by release
            require = next((str(r["require"]) for r in rows("require_cuda") if r.get("image") == repo
                            and r.get("cuda") == mm(m.group(1)) and r.get("require")), None)
            env = {**env, "NVIDIA_REQUIRE_CUDA": require or f"cuda>={mm(m.group(1))}"}
            return Base(ref, line, cuda=m.group(1), require_exceptions_known=require is not None,
                        cudnn=m.group(2) or None, cudnn_present=m.group(2) is not None,
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
        ngc = next((r for r in rows("ngc_pytorch") if r.get("tag") == tag), None)
        if ngc:
            return Base(ref, line, cuda=ngc.get("cuda"), cudnn=ngc.get("cudnn"), cudnn_present=bool(ngc.get("cudnn")),
                        toolkit=True, os_id=ngc.get("os"),
                        os_version=ngc.get("os_version"), python=ngc.get("python"), torch=ngc.get("torch"),
                        known=True, source=ngc.get("source"))
        return Base(ref, line)
    m = re.fullmatch(r"(ubuntu|debian|rockylinux|almalinux|centos|fedora|python)", repo)
    if m:  # a base without CUDA: what its tag says of the OS is all there is
        os_m = re.match(r"(\d[\d.]*)", tag) if repo != "python" else None
        py_m = re.match(r"(\d+\.\d+)", tag) if repo == "python" else None
        return Base(ref, line, os_id=repo if repo != "python" else None, os_version=os_m.group(1) if os_m else None,
                    python=py_m.group(1) if py_m else None, known=True, source=None)
    return Base(ref, line)


def _distro_python(base: Base, matrix: Any) -> str | None:
    """The Python 3 an OS release's package manager installs (compat/images.toml [[distro_python]])."""
    rows = matrix.rows("images", "distro_python") if matrix is not None else []
    return next((str(r["python"]) for r in rows if r.get("os") == base.os_id
                 and r.get("os_version") == base.os_version and r.get("python")), None)


def _arch(platform: str) -> str:
    """linux/amd64 → x86_64, linux/arm64 → aarch64 (uname's names, as the facts carry them)."""
    cpu = platform.split("/")[1] if "/" in platform else platform
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(cpu, cpu if "$" not in cpu else "x86_64")


def _os_id(word: str) -> str:
    return {"ubi": "rhel", "rockylinux": "rocky"}.get(word, word)


# --- the stages ---------------------------------------------------------------------------------


def read(path: str | Path, matrix: Any = None, build_args: dict[str, str] | None = None,
         context: Path | None = None) -> Image:
    """The final stage of the Dockerfile at ``path`` as facts. Raises DockerfileError on unreadable input."""
    if str(path) == "-":  # standard input; the build context is the current directory
        import sys

        raw = sys.stdin.buffer.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES or b"\0" in raw:
            raise DockerfileError("-: not a Dockerfile (binary, or larger than 1 MB)")
        return from_text(raw.decode("utf-8", errors="replace"), "Dockerfile", matrix or _current(),
                         context=context or Path.cwd(), build_args=build_args)
    p = Path(path)
    try:
        if not p.is_file():
            raise DockerfileError(f"{path}: not a file" if p.exists() else f"{path}: No such file")
        if p.stat().st_size > MAX_BYTES:
            raise DockerfileError(f"{path}: larger than {MAX_BYTES} bytes; not a Dockerfile")
        raw = read_file(p, MAX_BYTES)[0]  # a regular file only, never blocking, never more than the cap
    except OSError as exc:
        raise DockerfileError(f"{path}: {exc.strerror or exc}") from None
    if b"\0" in raw:
        raise DockerfileError(f"{path}: a binary file, not a Dockerfile")
    text = raw.decode("utf-8", errors="replace")
    return from_text(text, str(path), matrix or _current(), context=context or p.parent, build_args=build_args)


def _current() -> Any:
    from doctor.matrix import current

    return current()


def from_text(text: str, path: str, matrix: Any, context: Path | None = None,
              build_args: dict[str, str] | None = None) -> Image:
    instructions = read_instructions(text)
    froms = sum(1 for i in instructions if i.keyword == "FROM")
    if not froms:
        raise DockerfileError(f"{path}: no FROM line; not a Dockerfile")
    if froms > MAX_STAGES:
        raise DockerfileError(f"{path}: {froms} build stages, more than {MAX_STAGES}; too many to judge")
    try:
        given = {k: bounded(v, f"--build-arg {k}") for k, v in (build_args or {}).items()}
    except TooLarge as exc:
        raise DockerfileError(f"{path}: {exc}") from None
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for ins in instructions:
        try:
            _instruction(ins, stages, global_args, given, matrix, context)
        except TooLarge as exc:
            raise DockerfileError(f"{path}:{ins.line}: {exc}") from None
        except RecursionError:
            raise DockerfileError(f"{path}:{ins.line}: nested too deeply to judge") from None
    if not stages:
        raise DockerfileError(f"{path}: no FROM line; not a Dockerfile")
    return _image(path, stages[-1])


def _instruction(ins: Instruction, stages: list[Stage], global_args: dict[str, str], given: dict[str, str],
                 matrix: Any, context: Path | None) -> None:
    """One instruction's effect on the stages (ARG before the first FROM goes to global_args)."""
    if ins.keyword == "ARG" and not stages:
        for k, v in key_values(ins.args):
            global_args[k] = given.get(k, bounded(substitute(v, global_args), f"ARG {k}"))
        return
    if ins.keyword == "FROM":
        platform = re.search(r"--platform=(\S+)", ins.args)
        arch = _arch(substitute(platform.group(1), global_args)) if platform else "x86_64"
        words = [w for w in ins.args.split() if not w.startswith("--")]
        ref = bounded(substitute(words[0], global_args), "the FROM image") if words else ""
        name = words[2].lower() if len(words) >= 3 and words[1].lower() == "as" else None
        parent = next((s for s in reversed(stages) if s.name and s.name == ref.lower()), None)
        if parent:
            stage = Stage(name, parent.base, env=dict(parent.env), packages=dict(parent.packages),
                          conda=parent.conda, system=dict(parent.system), notes=list(parent.notes),
                          workdir=parent.workdir, copied=dict(parent.copied), opaque=parent.opaque,
                          cpu_label=parent.cpu_label, compat=parent.compat, hedged=set(parent.hedged),
                          python=parent.python, fetched=parent.fetched,
                          arch=parent.arch if not platform else arch)
        else:
            base = base_image(ref, ins.line, matrix)
            env = {k: (substitute(v, {}), ins.line) for k, v in base.env.items()}
            stage = Stage(name, base, env=env, arch=arch)
            if base.torch:  # the image's own torch, which a later `pip install torch` keeps when it satisfies
                stage.packages["torch"] = Install(PyPackage(name="torch", version=base.torch, cuda=mm(base.cuda),
                                                            cudnn=base.cudnn, cpu_only=False), ins.line,
                                                  f"base image {ref}")
            if not ref or "$" in ref:
                stage.notes.append((ins.line, f"base image {words[0] if words else '?'}: a build argument "
                                    "without a value (give it with --build-arg); what the base holds is unknown"))
            elif not base.known:
                stage.notes.append((ins.line, f"base image {ref}: what it holds is not in the matrix "
                                    "(compat/images.toml); its CUDA, cuDNN and frameworks are unknown"))
        stages.append(stage)
        return
    if not stages:
        return
    st = stages[-1]
    scope = {**st.args, **{k: v for k, (v, _l) in st.env.items()}}  # ENV overrides an ARG of the same name
    if ins.keyword == "ARG":
        for k, v in key_values(ins.args):
            st.args[k] = given.get(k, bounded(substitute(v, scope), f"ARG {k}") if v else global_args.get(k, ""))
    elif ins.keyword == "ENV":
        for k, v in key_values(ins.args):
            # ENV X=$X:… reads the ARG or the ENV of that name; one set nowhere is empty (as Docker has it)
            st.env[k] = (bounded(substitute(v, {k: "", **scope}), f"ENV {k}"), ins.line)
            scope[k] = st.env[k][0]
    elif ins.keyword == "LABEL":
        for k, v in key_values(ins.args):
            if k.lower() == CPU_LABEL and v.strip().lower() in ("true", "1", "yes"):
                st.cpu_label = ins.line
    elif ins.keyword == "WORKDIR":
        st.workdir = posixpath.normpath(posixpath.join(st.workdir, substitute(ins.args.strip(), scope)))
    elif ins.keyword in ("COPY", "ADD") and "--from=" not in ins.args:
        words = [substitute(w, scope) for w in exec_form(ins.args).split() if not w.startswith("--")]
        srcs, target = words[:-1], (words[-1] if len(words) > 1 else "")
        into_dir = target.endswith("/") or target in (".", "./") or len(srcs) > 1
        for src in (x for x in srcs if "://" not in x):
            src = posixpath.normpath(src)
            dest = posixpath.normpath(posixpath.join(st.workdir, target))
            if into_dir and _a_file(src, context):  # COPY requirements.txt . → ./requirements.txt
                dest = posixpath.join(dest, posixpath.basename(src))
            st.copied[dest] = src
    elif ins.keyword == "COPY" and (from_ref := re.search(r"--from=(\S*)", ins.args)):
        src = bounded(substitute(from_ref.group(1), scope), "COPY --from").lower()  # empty: no stage, nothing known
        other = stages[int(src)] if src.isdigit() and int(src) < len(stages) - 1 else next(
            (s for s in stages[:-1] if src and s.name == src), None)
        paths = [w for w in exec_form(ins.args).split() if not w.startswith("--")][:-1]  # the sources
        if other and any(PYTHON_TREE.search(p) for p in paths):
            # that stage's Python packages come along; each keeps the line that installed it, where a fix goes
            for n, inst in other.packages.items():
                if n not in st.packages or st.packages[n].package != inst.package:
                    st.packages[n] = inst
            st.conda = st.conda or other.conda
            st.opaque = st.opaque or other.opaque  # a tree a script filled may hold anything
            st.notes += [n for n in other.notes if n not in st.notes]  # and why, at that stage's lines
    elif ins.keyword == "RUN":
        _run(ins, st, scope, matrix, context)


def _a_file(src: str, context: Path | None) -> bool:
    """Is a COPY source a file (copied into a directory under its own name) rather than a directory (whose
    contents are copied)? The build context says; without it, a name with an extension is taken for a file."""
    if src in (".", "/") or src.endswith("/") or "*" in src:
        return False
    path = context / src.lstrip("/") if context is not None else None
    if path is not None and _inside(context, path) and path.exists():
        return path.is_file()
    return "." in posixpath.basename(src).lstrip(".")


def _run(ins: Instruction, st: Stage, scope: dict[str, str], matrix: Any, context: Path | None) -> None:
    script = re.sub(r"^(--\S+\s+)+", "", exec_form(ins.args))
    pips, condas, systems, unknown = parse_run(script, ins.line, scope)
    fetched = bool(FETCHES.search(script))
    earlier = st.fetched
    if fetched and not st.fetched:
        st.fetched = ins.line
    for cmd in re.split(r"&&|\|\||;|\n", script):
        hit = COMPAT_DIR.search(cmd)
        if hit and (re.search(r"\bldconfig\b", cmd) or "ld.so.conf" in cmd):
            st.compat = (ins.line, substitute(hit.group(1), scope))
            break
    for what in unknown:
        st.notes.append((ins.line, f"{what}: what it installs (a CUDA toolkit, frameworks) is unknown"))
        st.opaque = st.opaque or ins.line
    for manager, words in systems:
        for w in words:
            py = re.fullmatch(r"python(3)\.?(\d{1,2})(?:[=-][\w.:~+-]*)?", w)
            if py:  # apt-get install python3.11 / dnf install python3.12: the interpreter pip then installs for
                st.python = f"{py.group(1)}.{py.group(2)}"
            elif w in ("python3", "python3-pip", "python3-dev", "python3-venv") and not (st.python or st.base.python):
                st.python = _distro_python(st.base, matrix)  # the release's own Python 3
            name, _, version = w.partition("=") if manager == "dpkg" else (w, "", "")
            if re.match(r"(cuda|libcudnn|cudnn|nvidia-driver|libnvidia-compute|nvidia-utils)", name):
                st.system[name] = (version or None, ins.line, manager)
    for call in pips:
        call.python = st.python or st.base.python
        call.arch = st.arch
        local = [s for s in call.specs if _is_path(s) or (s in call.editables and "://" not in s and "+" not in
                                                           s.split("[", 1)[0])]
        specs = [(s, call.upgrade) for s in call.specs if s not in local]
        for req in call.requirements:
            if (fetched or earlier) and not _in_context(req, st, context):
                how = "the same RUN clones or downloads it" if fetched else f"line {earlier} clones or downloads files"
                st.notes.append((ins.line, f"-r {req}: fetched at build time ({how}); what it installs is unknown"))
                st.opaque = st.opaque or ins.line
                continue
            specs += [(s, call.upgrade) for s in _requirements(req, context, ins.line, st.notes, call)]
        specs = list(dict.fromkeys(specs))  # each requirement once (a file included twice, a repeated name)
        if len(specs) > MAX_SPECS:
            st.notes.append((ins.line, f"{len(specs)} requirements: those after the first {MAX_SPECS} are not read"))
            specs = specs[:MAX_SPECS]
        specs += [(x, upgrade) for spec, upgrade in list(specs) for x in and_cuda_specs(spec, call, matrix)]
        for path in local:  # the project being built: its dependencies, installed only if needed
            where = st.context_path(path.split("[", 1)[0])
            extras = "[" + path.split("[", 1)[1] if "[" in path else ""
            specs += [(s, False) for s in _project_dependencies((where or path.split("[", 1)[0]) + extras, context,
                                                                   ins.line, st.notes, shown=path)]
        for spec, upgrade in specs:
            if call.uninstall:
                dropped = spec_name(spec)
                if dropped:
                    st.packages.pop(dropped, None)
                continue
            pkg = pip_package(spec, call, matrix, st.notes)
            if not pkg:
                continue
            have = st.packages.get(pkg.name)
            if have and not upgrade and satisfied(have.package, spec):
                continue  # pip keeps what is installed
            if not upgrade and not st.base.known and pkg.name in HEDGED and pkg.name not in st.packages:
                st.hedged.add(pkg.name)
                st.notes.append((ins.line, f"{pkg.name}: read as what pip installs if the base image {st.base.image} "
                                 f"has no {pkg.name} of its own (pip keeps one that satisfies `{spec}`)"))
            st.packages[pkg.name] = Install(pkg, ins.line, f"pip {call.text}")
    env = {k: v for k, (v, _l) in st.env.items()} | scope
    for words in condas:
        st.conda = True
        py = next((re.fullmatch(r"python[=]{1,2}(3\.\d{1,2})(?:[.*][\w.*]*)?", w) for w in words
                   if w.startswith("python=")), None)
        if py:
            st.python = py.group(1)
        pip_specs: list[str] = []
        if words[:1] == ["--env-file"]:
            text = _context_file(words[1], st, context, ins.line)
            if text is None:
                continue
            words, pip_specs = environment_file(text)
        pkgs, _specs = conda_packages(words, env)
        for pkg in pkgs:
            st.packages[pkg.name] = Install(pkg, ins.line, "conda install " + " ".join(words)[:120])
        for spec in pip_specs:
            pkg = pip_package(spec, PipCall(line=ins.line, specs=[]), matrix, st.notes)
            if pkg and not (pkg.name in st.packages and satisfied(st.packages[pkg.name].package, spec)):
                st.packages[pkg.name] = Install(pkg, ins.line, f"environment file: pip {spec}")
    if re.search(r"\bconda\b", script):
        st.conda = True
    fetched_scripts = [seg for seg in re.split(r"&&|;|\n", script) if OPAQUE.search(seg)]
    if fetched_scripts and not unknown and not all(TOOL_INSTALLERS.search(seg) for seg in fetched_scripts):
        st.opaque = st.opaque or ins.line
        st.notes.append((ins.line, "runs a fetched script gpu-doctor does not read: what it installs (a CUDA "
                         "toolkit, frameworks) is unknown"))


def _in_context(name: str, st: Stage, context: Path | None) -> bool:
    """Did the image get this file from the build context (a COPY of it, or of a directory holding it)?"""
    return context is not None and st.context_path(name) is not None


def _context_file(name: str, st: Stage, context: Path | None, line: int) -> str | None:
    """A file the image got from the build context (through its COPY lines, else by its name)."""
    rel = st.context_path(name) or name
    path = next((p for p in ([context / rel.lstrip("/"), context / Path(name).name] if context else [])
                 if _inside(context, p) and p.is_file()), None)
    if path is None:
        st.notes.append((line, f"{name}: not found in the build context; what it installs is unknown"))
        return None
    try:
        return read_file(path, MAX_BYTES)[0].decode("utf-8", errors="replace")
    except OSError:
        return None


def _is_path(spec: str) -> bool:
    """A local directory or wheel (the project being built): `.`, `./x`, `/src/x`, `python/[all]`, `dist/*.whl`."""
    name = spec.split("[", 1)[0]
    if "://" in name or name.startswith(("git+", "hg+", "svn+", "bzr+")) or "@" in name:
        return False
    if name.endswith(".whl"):  # a wheel that names its release is that release; a glob (dist/*.whl) is the project
        return "*" in name or wheel_spec(name) is None
    return name in (".", "..") or name.startswith(("./", "../", "/")) or "/" in name


def _project_dependencies(spec: str, context: Path | None, line: int, notes: list[tuple[int, str]],
                          shown: str | None = None) -> list[str]:
    """`pip install .[extra]` / `-e .`: the [project] dependencies (and the extras asked for) of the
    pyproject.toml in the build context (the COPY'd project; its path is taken relative to the context)."""
    path, _, extras = spec.partition("[")
    wanted = {e.strip() for e in extras.rstrip("]").split(",") if e.strip()}
    shown = shown or spec
    root = (context / path.lstrip("/")) if context is not None else None
    if root is None or not _inside(context, root / "pyproject.toml") or not (root / "pyproject.toml").is_file():
        notes.append((line, f"pip install {shown}: the project being built; without its pyproject.toml in the build "
                      "context, what it installs is unknown"))
        return []
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(read_file(root / "pyproject.toml", MAX_BYTES)[0].decode("utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError):  # unreadable, not TOML, or nested too deeply to parse
        notes.append((line, f"pip install {shown}: its pyproject.toml cannot be read; what it installs is unknown"))
        return []
    table = data.get("project")
    project: dict[str, Any] = table if isinstance(table, dict) else {}
    deps = [d for d in project.get("dependencies", []) if isinstance(d, str)]
    extras_table = project.get("optional-dependencies")
    optional: dict[str, Any] = extras_table if isinstance(extras_table, dict) else {}
    for extra in wanted:
        deps += [d for d in optional.get(extra, []) if isinstance(d, str)]
    if not deps and "dependencies" in project.get("dynamic", []):
        notes.append((line, f"pip install {shown}: its dependencies are dynamic (setup.py); what it installs is "
                      "unknown"))
    return [bounded(d.split(";", 1)[0].strip(), "pyproject.toml: a dependency") for d in deps[:MAX_REQUIREMENTS]
            if _applies(d)]


def _applies(requirement: str) -> bool:
    """A dependency's environment marker, judged for the image (Linux x86_64)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        marker = Requirement(requirement).marker
    except InvalidRequirement:
        return False
    if marker is None:
        return True
    try:
        return bool(marker.evaluate({"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
                                     "os_name": "posix", "extra": ""}))
    except Exception:  # an undefined variable or malformed marker: count it in
        return True


def _inside(root: Path | None, path: Path) -> bool:
    """Only files of the build context are read, as docker build only sends those (no ../ escapes)."""
    if root is None:
        return False
    try:
        path.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return False
    return True


def _requirements(name: str, context: Path | None, line: int, notes: list[tuple[int, str]], call: PipCall,
                  depth: int = 0, root: Path | None = None, seen: set[Path] | None = None) -> list[str]:
    """The requirement lines of a file from the build context (by its name: COPY usually keeps it). Each file
    is read once (a file that includes itself, or two that include each other, end there), at most
    MAX_REQUIREMENTS lines in all."""
    if context is None or "$" in name:
        notes.append((line, f"-r {name}: not read (no build context)"))
        return []
    root = root or context
    seen = set() if seen is None else seen
    candidates = [context / name.lstrip("/"), context / Path(name).name]
    path = next((c for c in candidates if _inside(root, c) and c.is_file()), None)
    if path is None or depth > 8:
        notes.append((line, f"-r {name}: not found next to the Dockerfile; what it installs is unknown"))
        return []
    if path.resolve() in seen:
        return []  # pip reads an included file again; its lines are the same
    seen.add(path.resolve())
    try:
        text = read_file(path, MAX_BYTES)[0].decode("utf-8", errors="replace")
    except OSError:
        return []
    out: list[str] = []
    for raw in text.splitlines():
        s = raw.split(" #", 1)[0].strip()
        if not s or s.startswith("#"):
            continue
        if len(seen) + len(out) > MAX_REQUIREMENTS:
            notes.append((line, f"-r {name}: more than {MAX_REQUIREMENTS} requirements; the rest is not read"))
            break
        if s.startswith(("-r ", "--requirement")):
            out += _requirements(s.split(None, 1)[1].strip() if " " in s else s.partition("=")[2], path.parent,
                                 line, notes, call, depth + 1, root, seen)
        elif s.startswith(("--index-url", "-i ")):
            call.index_url = s.split(None, 1)[1].strip() if " " in s else s.partition("=")[2]
        elif s.startswith(("--extra-index-url", "-f ", "--find-links")):
            call.extra_index_urls.append(s.split(None, 1)[1].strip() if " " in s else s.partition("=")[2])
        elif not s.startswith("-"):
            out.append(bounded(s.split(";", 1)[0].strip(), f"{name}: a requirement"))
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
    if st.compat:  # the loader finds the cuda-compat libcuda before the driver's own
        loader = replace(loader, libcuda=LibRef(path=f"{st.compat[1].rstrip('/')}/libcuda.so.1"))
        lines["loader.libcuda"] = st.compat[0]
    if (b.cudnn or b.cudnn_present) and not b.torch:
        cudnn.append(Cudnn(version=b.cudnn, location=f"base image {b.image}", source="image"))
    known_cuda = {mm(t.version) for t in toolkits}
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
        if hit and not (toolkits[hit[0]].source or "").startswith("env:"):
            toolkits[hit[0]] = replace(toolkits[hit[0]], source=f"env:{var}")
    drivers = [Package(name=n, version=v, manager=mgr) for n, (v, _l, mgr) in st.system.items()
               if n.startswith(("cuda-compat", "nvidia-driver", "libnvidia-compute", "nvidia-utils"))]
    packages = {n: i.package for n, i in st.packages.items()}
    for n, inst in st.packages.items():
        lines[f"pkg.{n}"] = inst.line
    for n, p in packages.items():
        if p.cudnn and n == "torch" and not any(c.source == "pip" for c in cudnn):
            cudnn.append(Cudnn(version=p.cudnn, location=f"{PYTHON} [{label_of(p)}]", source="pip"))
    envs = [PythonEnv(executable=PYTHON, version=st.python or b.python, origin="dockerfile",
                      packages=sorted(packages.values(), key=lambda p: p.name))] if packages else []
    env: dict[str, str | None] = {k: None for k in ENV_NAMES}
    for k, (v, ln) in st.env.items():
        if k in ENV_NAMES or k in EXTRA_ENV:
            env[k] = v
            lines[f"env.{k}"] = ln
    if st.conda and env.get("CONDA_PREFIX") is None:
        env["CONDA_PREFIX"] = "/opt/conda"
    host = HostInfo(os_id=b.os_id, os_version=b.os_version, arch=st.arch,
                    os_pretty=f"Dockerfile {path} (final stage FROM {b.image})", container="docker")
    # An unknown base image may hold a toolkit: only a known one lets "no toolkit" mean absent.
    sources = {"python_envs": f"dockerfile:{path}", "env": f"dockerfile:{path}"}
    if b.known and not st.opaque:  # only then does "no toolkit here" mean none
        sources["toolkits"] = f"dockerfile:{path}"
    if b.source:
        sources["base"] = b.source
    if st.cpu_label:
        sources["cpu_image"] = f"LABEL {CPU_LABEL}=true at {path}:{st.cpu_label}"
    if not b.require_exceptions_known and env.get("NVIDIA_REQUIRE_CUDA") == b.env.get("NVIDIA_REQUIRE_CUDA"):
        sources["require_cuda"] = (f"{b.image} sets NVIDIA_REQUIRE_CUDA={env['NVIDIA_REQUIRE_CUDA']} with brand "
                                   "exceptions that compat/images.toml does not list for this release")
    facts = Facts(host=host, driver=DriverInfo(packages=drivers), toolkits=toolkits, loader=loader, cudnn=cudnn,
                  python_envs=envs, env=env, sources=sources)
    return Image(path=path, facts=facts, lines=lines, notes=list(st.notes),
                 hedged=tuple(sorted(n for n in st.hedged if n in st.packages)))


def label_of(p: PyPackage) -> str:
    return f"{p.name} {p.version}" if p.version else p.name
