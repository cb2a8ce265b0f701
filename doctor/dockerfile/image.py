"""The stages of a Dockerfile and the final one as facts: the base image from compat/images.toml, ARG/ENV,
what RUN lines install (installs.py), `COPY --from` and `FROM <stage>` inheritance, each fact with its line."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from doctor.dockerfile.installs import (
    PipCall,
    and_cuda_specs,
    conda_packages,
    environment_file,
    mm,
    parse_run,
    pip_package,
    satisfied,
    spec_name,
)
from doctor.dockerfile.syntax import Instruction, exec_form, key_values, read_instructions, substitute
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

# A RUN that hands over to a script: `./install.sh`, `bash setup.sh`, `curl … | sh`, `sh -c "$(curl …)"`
OPAQUE = re.compile(r"(^|[;&|(]\s*|\s)(\./[\w.-]+|(ba|z)?sh\s+(-\w+\s+)*[\w./~-]+\.sh)\b|\|\s*(sudo\s+)?(ba)?sh\b|"
                    r"\$\((curl|wget)\b")
# COPY --from sources that carry a Python environment (and so the packages installed in that stage)
PYTHON_TREE = re.compile(r"site-packages|dist-packages|conda|venv|/lib/python|\.local|^/usr(/local)?/?$|^/opt/?$|^/$")
MAX_BYTES = 1_000_000  # a Dockerfile or requirements file larger than this is not one
EXTRA_ENV = ("CONDA_OVERRIDE_CUDA", "TORCH_CUDA_ARCH_LIST")
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
    if not any(i.keyword == "FROM" for i in instructions):
        raise DockerfileError(f"{path}: no FROM line; not a Dockerfile")
    given = dict(build_args or {})
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for ins in instructions:
        if ins.keyword == "ARG" and not stages:
            for k, v in key_values(ins.args):
                global_args[k] = given.get(k, substitute(v, global_args))
            continue
        if ins.keyword == "FROM":
            platform = re.search(r"--platform=(\S+)", ins.args)
            arch = _arch(substitute(platform.group(1), global_args)) if platform else "x86_64"
            words = [w for w in ins.args.split() if not w.startswith("--")]
            ref = substitute(words[0], global_args) if words else ""
            name = words[2].lower() if len(words) >= 3 and words[1].lower() == "as" else None
            parent = next((s for s in reversed(stages) if s.name and s.name == ref.lower()), None)
            if parent:
                stage = Stage(name, parent.base, env=dict(parent.env), packages=dict(parent.packages),
                              conda=parent.conda, system=dict(parent.system), notes=list(parent.notes),
                              workdir=parent.workdir, copied=dict(parent.copied), opaque=parent.opaque,
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
            continue
        if not stages:
            continue
        st = stages[-1]
        scope = {**st.args, **{k: v for k, (v, _l) in st.env.items()}}  # ENV overrides an ARG of the same name
        if ins.keyword == "ARG":
            for k, v in key_values(ins.args):
                st.args[k] = given.get(k, substitute(v, scope) if v else global_args.get(k, ""))
        elif ins.keyword == "ENV":
            for k, v in key_values(ins.args):
                st.env[k] = (substitute(v, {**scope, k: st.env.get(k, ("", 0))[0]}), ins.line)
                scope[k] = st.env[k][0]
        elif ins.keyword == "WORKDIR":
            st.workdir = posixpath.normpath(posixpath.join(st.workdir, substitute(ins.args.strip(), scope)))
        elif ins.keyword in ("COPY", "ADD") and "--from=" not in ins.args:
            words = [substitute(w, scope) for w in exec_form(ins.args).split() if not w.startswith("--")]
            if len(words) == 2 and "://" not in words[0]:
                dest = posixpath.normpath(posixpath.join(st.workdir, words[1]))
                st.copied[dest] = posixpath.normpath(words[0])
        elif ins.keyword == "COPY" and "--from=" in ins.args:
            src = substitute(re.search(r"--from=(\S+)", ins.args).group(1), scope).lower()  # type: ignore[union-attr]
            other = stages[int(src)] if src.isdigit() and int(src) < len(stages) - 1 else next(
                (s for s in stages[:-1] if s.name == src), None)
            paths = [w for w in exec_form(ins.args).split() if not w.startswith("--")][:-1]  # the sources
            if other and any(PYTHON_TREE.search(p) for p in paths):
                # that stage's Python packages come along; each keeps the line that installed it, where a fix goes
                for n, inst in other.packages.items():
                    if n not in st.packages or st.packages[n].package != inst.package:
                        st.packages[n] = inst
                st.conda = st.conda or other.conda
                st.opaque = st.opaque or other.opaque  # a tree a script filled may hold anything
        elif ins.keyword == "RUN":
            _run(ins, st, scope, matrix, context)
    final = stages[-1]
    return _image(path, final)


def _run(ins: Instruction, st: Stage, scope: dict[str, str], matrix: Any, context: Path | None) -> None:
    script = re.sub(r"^(--\S+\s+)+", "", exec_form(ins.args))
    pips, condas, systems = parse_run(script, ins.line, scope)
    for manager, words in systems:
        for w in words:
            name, _, version = w.partition("=") if manager == "dpkg" else (w, "", "")
            if re.match(r"(cuda|libcudnn|cudnn|nvidia-driver|libnvidia-compute|nvidia-utils)", name):
                st.system[name] = (version or None, ins.line, manager)
    for call in pips:
        call.python = st.base.python
        call.arch = st.arch
        specs = [(s, call.upgrade) for s in call.specs if not _is_path(s)]
        for req in call.requirements:
            specs += [(s, call.upgrade) for s in _requirements(req, context, ins.line, st.notes, call)]
        specs += [(x, upgrade) for spec, upgrade in list(specs) for x in and_cuda_specs(spec, call, matrix)]
        for path in (s for s in call.specs if _is_path(s)):  # a project: its dependencies, installed only if needed
            where = st.context_path(path.split("[", 1)[0])
            extras = "[" + path.split("[", 1)[1] if "[" in path else ""
            specs += [(s, False) for s in _project_dependencies((where or path) + extras, context, ins.line,
                                                                   st.notes)]
        for spec, upgrade in specs:
            if call.uninstall:
                name = spec_name(spec)
                if name:
                    st.packages.pop(name, None)
                continue
            pkg = pip_package(spec, call, matrix, st.notes)
            if not pkg:
                continue
            have = st.packages.get(pkg.name)
            if have and not upgrade and satisfied(have.package, spec):
                continue  # pip keeps what is installed
            st.packages[pkg.name] = Install(pkg, ins.line, f"pip {call.text}")
    env = {k: v for k, (v, _l) in st.env.items()} | scope
    for words in condas:
        st.conda = True
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
    if OPAQUE.search(script) and not st.opaque:
        st.opaque = ins.line
        st.notes.append((ins.line, "runs a script gpu-doctor does not read: what it installs (a CUDA toolkit, "
                         "frameworks) is unknown"))


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
    return spec.split("[", 1)[0] in (".", "..") or (spec.startswith(("./", "../", "/")) and not spec.endswith(".whl"))


def _project_dependencies(spec: str, context: Path | None, line: int, notes: list[tuple[int, str]]) -> list[str]:
    """`pip install .[extra]` / `-e .`: the [project] dependencies (and the extras asked for) of the
    pyproject.toml in the build context (the COPY'd project; its path is taken relative to the context)."""
    path, _, extras = spec.partition("[")
    wanted = {e.strip() for e in extras.rstrip("]").split(",") if e.strip()}
    root = (context / path.lstrip("/")) if context is not None else None
    if root is None or not _inside(context, root / "pyproject.toml") or not (root / "pyproject.toml").is_file():
        notes.append((line, f"pip install {spec}: no pyproject.toml for it in the build context; what it installs "
                      "is unknown"))
        return []
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        data = tomllib.loads(read_file(root / "pyproject.toml", MAX_BYTES)[0].decode("utf-8", errors="replace"))
    except (OSError, ValueError):
        return []
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    deps = [d for d in project.get("dependencies", []) if isinstance(d, str)]
    optional = project.get("optional-dependencies") if isinstance(project.get("optional-dependencies"), dict) else {}
    for extra in wanted:
        deps += [d for d in optional.get(extra, []) if isinstance(d, str)]
    if not deps and "dependencies" in project.get("dynamic", []):
        notes.append((line, f"pip install {spec}: its dependencies are dynamic (setup.py); what it installs is "
                      "unknown"))
    return [d.split(";", 1)[0].strip() for d in deps if _applies(d)]


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
                  depth: int = 0, root: Path | None = None) -> list[str]:
    """The requirement lines of a file from the build context (by its name: COPY usually keeps it)."""
    if context is None or "$" in name:
        notes.append((line, f"-r {name}: not read (no build context)"))
        return []
    root = root or context
    candidates = [context / name.lstrip("/"), context / Path(name).name]
    path = next((c for c in candidates if _inside(root, c) and c.is_file()), None)
    if path is None or depth > 3:
        notes.append((line, f"-r {name}: not found next to the Dockerfile; what it installs is unknown"))
        return []
    try:
        text = read_file(path, MAX_BYTES)[0].decode("utf-8", errors="replace")
    except OSError:
        return []
    out: list[str] = []
    for raw in text.splitlines():
        s = raw.split(" #", 1)[0].strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith(("-r ", "--requirement")):
            out += _requirements(s.split(None, 1)[1].strip(), path.parent, line, notes, call, depth + 1, root)
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
        if hit and not toolkits[hit[0]].source.startswith("env:"):  # type: ignore[union-attr]
            toolkits[hit[0]] = replace(toolkits[hit[0]], source=f"env:{var}")
    drivers = [Package(name=n, version=v, manager=mgr) for n, (v, _l, mgr) in st.system.items()
               if n.startswith(("cuda-compat", "nvidia-driver", "libnvidia-compute", "nvidia-utils"))]
    packages = {n: i.package for n, i in st.packages.items()}
    for n, inst in st.packages.items():
        lines[f"pkg.{n}"] = inst.line
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
    host = HostInfo(os_id=b.os_id, os_version=b.os_version, arch=st.arch,
                    os_pretty=f"Dockerfile {path} (final stage FROM {b.image})", container="docker")
    # An unknown base image may hold a toolkit: only a known one lets "no toolkit" mean absent.
    sources = {"python_envs": f"dockerfile:{path}", "env": f"dockerfile:{path}"}
    if b.known and not st.opaque:  # only then does "no toolkit here" mean none
        sources["toolkits"] = f"dockerfile:{path}"
    if b.source:
        sources["base"] = b.source
    facts = Facts(host=host, driver=DriverInfo(packages=drivers), toolkits=toolkits, loader=loader, cudnn=cudnn,
                  python_envs=envs, env=env, sources=sources)
    return Image(path=path, facts=facts, lines=lines, notes=list(st.notes))


def label_of(p: PyPackage) -> str:
    return f"{p.name} {p.version}" if p.version else p.name
