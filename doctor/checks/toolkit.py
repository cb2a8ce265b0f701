"""Rules about the CUDA toolkit and cuDNN that need no compatibility matrix."""

from __future__ import annotations

from collections.abc import Iterator

from doctor import beliefs
from doctor.checks.common import ev, finding, frameworks, label, major_minor, ok, probed
from doctor.checks.compat import built_cudnn
from doctor.matrix import Matrix, vtuple
from doctor.model.facts import Cudnn, Facts, PyPackage, Toolkit
from doctor.model.findings import Evidence, Finding, FixStep
from doctor.model.intents import OnlyIfWanted, ReinstallFramework
from doctor.registry import Context, NotApplicable, Skip, check

AREA = "CUDA toolkit"


def _bundles_runtime(pkg: PyPackage, env_pkgs: set[str]) -> bool:
    """Does this framework build bring its own CUDA runtime (so no system toolkit is needed)?"""
    if pkg.cpu_only:
        return True  # needs no CUDA at all
    if pkg.name == "torch":
        return True  # CUDA wheels of torch ship libcudart (inside torch/lib or as nvidia-* wheels)
    if pkg.name in ("jax", "jaxlib"):
        return any(n.startswith("jax-cuda") for n in env_pkgs)
    if pkg.name.startswith("tensorflow") or pkg.name == "tf-nightly":
        return any(n.startswith("nvidia-cuda-runtime") for n in env_pkgs)  # tensorflow[and-cuda]
    return False


def _system_toolkits(facts: Facts) -> list[Toolkit]:
    return [t for t in facts.toolkits if t.source != "pip"]


def runtime_soname(cuda: str | None) -> str | None:
    """The libcudart soname a prebuilt binary for this CUDA asks the loader for: the major.minor up to
    CUDA 10.x (libcudart.so.10.1), the major from 11.x on (libcudart.so.11.0, libcudart.so.12)."""
    mm = major_minor(cuda)
    if not mm:
        return None
    if mm[0] <= 10:
        return f"libcudart.so.{mm[0]}.{mm[1] if len(mm) > 1 else 0}"
    return "libcudart.so.11.0" if mm[0] == 11 else f"libcudart.so.{mm[0]}"


def _soname_matches(lib_version: str | None, want: str) -> bool:
    have = major_minor(lib_version)
    need = major_minor(want.split("libcudart.so.", 1)[1])
    if not have or not need:
        return False
    return have[:1] == need[:1] if need[0] >= 11 else have[:2] == need[:2]


def _needy(facts: Facts) -> list[PyPackage]:
    out = []
    for env in facts.python_envs:
        names = {p.name for p in env.packages}
        out += [p for p in env.packages if p.name in ("torch", "tensorflow", "tf-nightly", "jax", "jaxlib")
                and not _bundles_runtime(p, names)]
    return out


@check("toolkit.missing", AREA, "A CUDA toolkit is installed where something needs one.", static=True)
def toolkit_missing(facts: Facts, ctx: Context) -> Iterator[Finding]:
    system = _system_toolkits(facts)
    needy = _needy(facts)
    b = beliefs.of(facts)
    if b.no_nvidia_gpu.yes and not b.gpu_expected.yes and not ctx.options.get("static"):
        raise NotApplicable("no NVIDIA GPU here, and nothing here needs CUDA")
    # A prebuilt framework that does not bundle CUDA dlopens an exact runtime soname: the loader must find it.
    # nvcc on PATH does not help it.
    loader_known = probed(facts, "loader")
    cudart = facts.loader.libcudart
    for p in needy:
        want = runtime_soname(p.cuda)
        if not want or not loader_known or (not system and cudart is None):
            continue  # with no toolkit and no runtime at all, the plain "no toolkit" finding below says it
        evidence = [Evidence("python_envs.packages", f"{label(p)} built for CUDA {p.cuda}"),
                    ev(facts, "loader.libcudart", f"{cudart.path} ({cudart.version})" if cudart else None),
                    ev(facts, "env.LD_LIBRARY_PATH")]
        if cudart and _soname_matches(cudart.version, want):
            continue
        have = [t for t in system if t.version and _soname_matches(t.version, want)]
        where = (f"CUDA {have[0].version} is installed at {have[0].root} but its lib64 is neither on "
                 "LD_LIBRARY_PATH nor in the ld.so configuration" if have else
                 f"no CUDA {p.cuda} runtime is installed" + (f" (the toolkit(s) here: "
                 f"{', '.join(str(t.version) for t in system)})" if system else ""))
        if cudart is None or not have:
            yield finding(
                "toolkit.missing", "fail", f"{label(p)} needs {want}, and the dynamic loader cannot find it",
                f"This build does not bring its own CUDA runtime: it loads {want} at run time, and {where}. "
                f"It falls back to the CPU or fails with 'Could not load dynamic library {want}'.",
                evidence,
                fix=(f"export LD_LIBRARY_PATH={have[0].root}/lib64:$LD_LIBRARY_PATH (or add it to "
                     "/etc/ld.so.conf.d and run ldconfig)") if have else
                    f"Install the CUDA {p.cuda} runtime (toolkit or the nvidia-cuda-runtime wheel of that CUDA), or "
                    "install the framework with its CUDA extra (`pip install 'tensorflow[and-cuda]'`).",
            )
        else:
            yield finding(
                "toolkit.missing", "warn",
                f"{label(p)} needs {want}; the loader's first libcudart is {cudart.path} (CUDA {cudart.version})",
                f"Whether {want} is also found is not certain from here; {where}.",
                evidence,
                fix=f"Make sure a CUDA {p.cuda} runtime's lib64 is on LD_LIBRARY_PATH or in the ld.so configuration.",
            )
        return
    if system:
        shown = ", ".join(f"{t.version or '?'} at {t.root}" for t in system)
        yield ok("toolkit.missing", f"CUDA toolkit found: {shown}",
                 *[Evidence(f"toolkits[{i}]", f"{t.version} {t.root}", t.source) for i, t in enumerate(system)])
        return
    if not probed(facts, "toolkits"):
        raise Skip("the CUDA toolkits were not inspected (a recorded report that does not say)")
    owners = [(env.executable, p) for env in facts.python_envs for p in env.packages if p in needy]
    fw = frameworks(facts)
    if needy:
        who = ", ".join(label(p) for p in needy)
        yield finding(
            "toolkit.missing", "fail", f"No CUDA toolkit is installed, and {who} needs a system CUDA runtime",
            "These builds load libcudart, cuBLAS and friends from the system; without them they fall back to the "
            "CPU or fail to import their GPU support.",
            [Evidence("toolkits", []), *[Evidence("python_envs.packages", label(p)) for p in needy]],
            fix="Install the CUDA runtime wheels with the framework (e.g. `pip install 'tensorflow[and-cuda]'`) "
                "or a system CUDA toolkit of the version the framework was built for.",
            intents=[ReinstallFramework(exe, p.name, p.version, reason="runtime") for exe, p in owners],
        )
    elif ctx.options.get("static") and fw:  # a runtime image whose framework brings its CUDA: as it should be
        yield ok("toolkit.missing", "No CUDA toolkit in the image, and none is needed: every framework here brings "
                 "its own CUDA runtime (" + ", ".join(label(p) for _e, p in fw) + ")", Evidence("toolkits", []),
                 detail="Building CUDA extensions (flash-attn, torch.utils.cpp_extension) in the image would need "
                        "nvcc: an nvidia/cuda *-devel base.")
    else:
        why = ("every framework here brings its own CUDA runtime: " + ", ".join(label(p) for _e, p in fw)) if fw \
            else "nothing here needs one yet; you need it to compile CUDA code (nvcc, extensions)"
        yield finding(
            "toolkit.missing", "warn" if fw or b.gpu_expected.yes else "info", "No CUDA toolkit is installed",
            f"Not a problem for running code: {why}. Building CUDA extensions (e.g. flash-attn, "
            "torch.utils.cpp_extension) needs nvcc.",
            [Evidence("toolkits", [])],
            fix="Install a CUDA toolkit only if you compile CUDA code (`gpu-doctor fix` picks the version).",
            intents=[OnlyIfWanted("No CUDA toolkit is installed; nothing here needs one to run. Pass --target-cuda X.Y "
                              "to install one for compiling CUDA code.")],
        )


@check("toolkit.cuda_home_invalid", AREA, "CUDA_HOME / CUDA_PATH, when set, point at a CUDA toolkit.", static=True)
def cuda_home_invalid(facts: Facts, ctx: Context) -> Iterator[Finding]:
    set_vars = [v for v in ("CUDA_HOME", "CUDA_PATH") if facts.env.get(v)]
    if not set_vars:
        if "CUDA_HOME" not in facts.env:
            raise Skip("the environment variables were not recorded")
        raise NotApplicable("neither CUDA_HOME nor CUDA_PATH is set")
    if not beliefs.live_probed(facts, "toolkits"):
        raise Skip("the toolkit directories were not inspected here (a recorded report)")
    for var in set_vars:
        home = facts.env[var] or ""
        t = beliefs.toolkit_named_by(facts, var)
        evidence = [ev(facts, f"env.{var}", home, "env")]
        if t:
            yield ok("toolkit.cuda_home_invalid", f"{var}={home} is the toolkit at {t.root}"
                     + (f" (CUDA {t.version})" if t.version else ""), *evidence)
            continue
        missing = any(e.probe == "toolkits" and var in e.reason and "does not exist" in e.reason
                      for e in facts.errors)
        what = "does not exist" if missing else "holds no CUDA toolkit (no version.json / version.txt, no bin/nvcc)"
        yield finding(
            "toolkit.cuda_home_invalid", "warn", f"{var}={home} {what}",
            f"torch.utils.cpp_extension, CMake's FindCUDAToolkit and many build scripts read {var} before PATH: "
            "extension builds fail with 'No CUDA runtime is found' / \"nvcc\" not found, or pick nothing.",
            [*evidence, *[Evidence("errors", e.reason, e.probe) for e in facts.errors if e.probe == "toolkits"]],
            fix=f"Point {var} at an installed toolkit (e.g. /usr/local/cuda) or unset it.",
        )


@check("toolkit.multiple_conflicting", AREA, "nvcc on PATH, CUDA_HOME and the loader's libcudart agree.", static=True)
def multiple_conflicting(facts: Facts, ctx: Context) -> Iterator[Finding]:
    claims: list[tuple[str, str, Evidence]] = []
    nvcc = facts.loader.nvcc_on_path
    if nvcc and nvcc.version:
        claims.append(("nvcc on PATH", nvcc.version, ev(facts, "loader.nvcc_on_path", f"{nvcc.path} {nvcc.version}")))
    home_var = "CUDA_HOME" if facts.env.get("CUDA_HOME") else "CUDA_PATH" if facts.env.get("CUDA_PATH") else None
    if home_var:
        home = facts.env[home_var] or ""
        tk = beliefs.toolkit_named_by(facts, home_var)
        if tk and tk.version:
            claims.append((home_var, tk.version, ev(facts, f"env.{home_var}", f"{home} → CUDA {tk.version}")))
    cudart = facts.loader.libcudart
    if cudart and cudart.version:
        claims.append(("the loader's libcudart", cudart.version,
                       ev(facts, "loader.libcudart", f"{cudart.path} {cudart.version}")))
    if len(claims) < 2:
        if not _system_toolkits(facts):
            raise NotApplicable("no system CUDA toolkit")
        raise Skip("fewer than two of nvcc on PATH, CUDA_HOME and the loader's libcudart are known")
    # A library file name may carry only the major ("libcudart.so.13"): compare at the precision all have.
    parsed = [major_minor(v) or () for _w, v, _e in claims]
    depth = min(len(p) for p in parsed)
    if depth and len({p[:depth] for p in parsed}) == 1:
        agreed = ".".join(claims[0][1].split(".")[:2])
        yield ok("toolkit.multiple_conflicting",
                 f"{' and '.join(w for w, _v, _e in claims)} agree on CUDA {agreed}",
                 *[e for _w, _v, e in claims])
        return
    said = "; ".join(f"{w} is CUDA {v}" for w, v, _e in claims)
    yield finding(
        "toolkit.multiple_conflicting", "warn", f"Several CUDA versions are mixed: {said}",
        "Builds compile with one CUDA (nvcc) and link or run against another (libcudart, CUDA_HOME), which "
        "gives errors such as 'undefined symbol' or 'CUDA version mismatch' when building extensions.",
        [e for _w, _v, e in claims],
        fix="Point PATH, CUDA_HOME and LD_LIBRARY_PATH at the same toolkit.",
    )


@check("toolkit.path_not_set", AREA, "The installed toolkit's nvcc is on PATH.", static=True)
def path_not_set(facts: Facts, ctx: Context) -> Iterator[Finding]:
    system = [t for t in _system_toolkits(facts) if t.nvcc_version]
    if not system:
        raise NotApplicable("no system CUDA toolkit with nvcc")
    if facts.loader.nvcc_on_path:
        yield ok("toolkit.path_not_set", f"nvcc is on PATH: {facts.loader.nvcc_on_path.path}",
                 ev(facts, "loader.nvcc_on_path", facts.loader.nvcc_on_path.path))
        return
    newest = max(system, key=lambda t: major_minor(t.version) or (0,))
    lines = (f'export PATH="{newest.root}/bin:$PATH"\n'
             f'export LD_LIBRARY_PATH="{newest.root}/lib64:${{LD_LIBRARY_PATH:-}}"')
    yield finding(
        "toolkit.path_not_set", "warn", f"CUDA {newest.version} is installed at {newest.root} but nvcc is not on PATH",
        "NVIDIA's installers do not change PATH: builds that call nvcc (extensions, CMake's CUDA language) fail "
        "with 'nvcc: command not found' or pick an older compiler.",
        [ev(facts, "loader.nvcc_on_path", None), Evidence("toolkits", f"{newest.version} {newest.root}",
                                                          newest.source), ev(facts, "env.PATH")],
        fix=f"Add the toolkit to your shell profile (e.g. ~/.bashrc):\n{lines}",
    )


NEEDS_CUDNN = ("tensorflow", "tf-nightly", "jax", "jaxlib")


@check("cudnn.missing", "cuDNN", "cuDNN is installed where a framework needs a system cuDNN.", static=True)
def cudnn_missing(facts: Facts, ctx: Context) -> Iterator[Finding]:
    if facts.cudnn:
        shown = _cudnn_shown(facts)
        absent = list(_major_absent(facts, ctx))
        for exe, p, built in absent:
            major = vtuple(built)[0]
            yield finding(
                "cudnn.missing", "fail", f"{label(p)} needs cuDNN {major}, but only cuDNN {shown} is installed",
                f"{label(p)} was built with cuDNN {built} and loads libcudnn.so.{major} by name; no cuDNN {major}.x "
                "is installed, so it cannot use the GPU (TensorFlow logs 'Could not load dynamic library "
                f"libcudnn.so.{major}'; JAX: 'Unable to load cuDNN').",
                [*[Evidence(f"cudnn[{i}]", _cudnn_text(c), c.source) for i, c in enumerate(facts.cudnn)],
                 Evidence("python_envs.packages", f"{label(p)} built with cuDNN {built}", exe)],
                fix=f"Install cuDNN {major} for the framework's CUDA"
                    + (f" (`pip install 'nvidia-cudnn-cu{(p.cuda or '12').split('.')[0]}=={major}.*'`)"
                       if major >= 8 else "") + ", or reinstall the framework with its CUDA extra.",
                intents=[ReinstallFramework(exe, p.name, p.version, reason="cudnn")])
        if not absent:
            yield ok("cudnn.missing", f"cuDNN found: {shown}",
                     *[Evidence(f"cudnn[{i}]", _cudnn_text(c) + (f" ({c.location})" if c.location else ""), c.source)
                       for i, c in enumerate(facts.cudnn)])
        return
    owners = [(e, p) for e, p in frameworks(facts) if p.name in NEEDS_CUDNN and p.cpu_only is False]
    needy = [p for _e, p in owners]
    if not needy:
        raise NotApplicable("no cuDNN installed, and nothing here needs a system cuDNN "
                            "(CUDA builds of torch bring their own)")
    if beliefs.of(facts).no_nvidia_gpu.yes and not ctx.options.get("static"):
        raise NotApplicable("no NVIDIA GPU on this machine: cuDNN would not be used")
    # An unknown cuDNN list is unknown, not empty: a report that says "cuDNN version: Could not collect".
    if "cudnn" not in facts.sources and not beliefs.live_probed(facts, "toolkits") \
            and not beliefs.live_probed(facts, "driver"):
        raise Skip("the cuDNN libraries were not inspected (a recorded report that does not say)")
    who = ", ".join(label(p) for p in needy)
    yield finding(
        "cudnn.missing", "fail", f"No cuDNN is installed, and {who} needs one",
        "Without cuDNN these frameworks fail to use the GPU, e.g. TensorFlow logs 'Could not load dynamic "
        "library libcudnn.so.8' and lists no GPU.",
        [Evidence("cudnn", []), *[Evidence("python_envs.packages", label(p), p.name) for p in needy]],
        fix="Install the cuDNN wheel that matches the framework's CUDA major (e.g. nvidia-cudnn-cu12), or "
            "reinstall the framework with its CUDA extra: `pip install 'tensorflow[and-cuda]'`, "
            "`pip install 'jax[cuda12]'`.",
        steps=[FixStep(["pip", "install", f"nvidia-cudnn-cu{major}"], note=f"for a CUDA {major} framework build")
               for major in sorted({(p.cuda or "12").split(".")[0] for p in needy})],
        intents=[ReinstallFramework(e, p.name, p.version, reason="cudnn") for e, p in owners],
    )


def _cudnn_text(c: Cudnn) -> str:  # an image tag like …-cudnn-runtime names cuDNN but not its version
    return c.version or ("cuDNN (version not in the tag)" if c.source == "image" else "version unknown")


def _cudnn_shown(facts: Facts) -> str:
    """Each cuDNN version once, with where it was first found and how many other places hold it: one package puts
    its version in two headers and two or three library names, a title names the version."""
    groups: dict[str, list[Cudnn]] = {}
    for c in facts.cudnn:
        groups.setdefault(_cudnn_text(c), []).append(c)
    parts = []
    for shown, places in list(groups.items())[:3]:
        more = f" and {len(places) - 1} more" if len(places) > 1 else ""
        parts.append(f"{shown} ({places[0].source}: {places[0].location}{more})")
    rest = len(groups) - 3
    return ", ".join(parts) + (f", and {rest} other version(s)" if rest > 0 else "")


def _major_absent(facts: Facts, ctx: Context) -> Iterator[tuple[str, PyPackage, str]]:
    """(interpreter, framework, the cuDNN it was built with) for each TensorFlow/JAX CUDA build whose cuDNN
    major is not among the cuDNN versions installed. A major is looked for by name (libcudnn.so.8), so an
    installed cuDNN of another major is as good as none."""
    if not isinstance(ctx.matrix, Matrix):
        return
    majors = {vtuple(c.version)[0] for c in facts.cudnn if c.version and vtuple(c.version)}
    if not majors:
        return
    for exe, p in frameworks(facts):
        if p.name not in NEEDS_CUDNN or p.cpu_only is not False:
            continue
        built, _rule = built_cudnn(ctx.matrix, p)
        if built and vtuple(built) and vtuple(built)[0] not in majors:
            yield exe, p, built


CHECKS = [toolkit_missing, cuda_home_invalid, multiple_conflicting, path_not_set]
CUDNN_CHECKS = [cudnn_missing]
