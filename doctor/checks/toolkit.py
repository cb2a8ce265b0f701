"""Rules about the CUDA toolkit and cuDNN that need no compatibility matrix."""

from __future__ import annotations

from collections.abc import Iterator

from doctor.checks.common import ev, finding, frameworks, label, major_minor, ok, probed
from doctor.facts import Facts, PyPackage
from doctor.findings import Evidence, Finding, FixStep
from doctor.intents import OnlyIfWanted, ReinstallFramework
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


def _system_toolkits(facts: Facts) -> list:
    return [t for t in facts.toolkits if t.source != "pip"]


@check("toolkit.missing", AREA, "A CUDA toolkit is installed where something needs one.", static=True)
def toolkit_missing(facts: Facts, ctx: Context) -> Iterator[Finding]:
    system = _system_toolkits(facts)
    if system:
        shown = ", ".join(f"{t.version or '?'} at {t.root}" for t in system)
        yield ok("toolkit.missing", f"CUDA toolkit found: {shown}",
                 *[Evidence(f"toolkits[{i}]", f"{t.version} {t.root}", t.source) for i, t in enumerate(system)])
        return
    if not probed(facts, "toolkits"):
        raise Skip("the CUDA toolkits were not inspected (a recorded report that does not say)")
    needy = []
    owners = []
    for env in facts.python_envs:
        names = {p.name for p in env.packages}
        mine = [p for p in env.packages if p.name in ("torch", "tensorflow", "tf-nightly", "jax", "jaxlib")
                and not _bundles_runtime(p, names)]
        needy += mine
        owners += [(env.executable, p) for p in mine]
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
    else:
        why = ("every framework here brings its own CUDA runtime: " + ", ".join(label(p) for _e, p in fw)) if fw \
            else "nothing here needs one yet; you need it to compile CUDA code (nvcc, extensions)"
        yield finding(
            "toolkit.missing", "warn", "No CUDA toolkit is installed",
            f"Not a problem for running code: {why}. Building CUDA extensions (e.g. flash-attn, "
            "torch.utils.cpp_extension) needs nvcc.",
            [Evidence("toolkits", [])],
            fix="Install a CUDA toolkit only if you compile CUDA code (`gpu-doctor fix` picks the version).",
            intents=[OnlyIfWanted("No CUDA toolkit is installed; nothing here needs one to run. Pass --target-cuda X.Y "
                              "to install one for compiling CUDA code.")],
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
        tk = next((t for t in facts.toolkits if t.source == f"env:{home_var}"), None)
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
        shown = ", ".join(f"{c.version} ({c.source}: {c.location})" for c in facts.cudnn[:3])
        yield ok("cudnn.missing", f"cuDNN found: {shown}",
                 *[Evidence(f"cudnn[{i}]", c.version, c.source) for i, c in enumerate(facts.cudnn)])
        return
    owners = [(e, p) for e, p in frameworks(facts) if p.name in NEEDS_CUDNN and p.cpu_only is False]
    needy = [p for _e, p in owners]
    if not needy:
        raise NotApplicable("no cuDNN installed, and nothing here needs a system cuDNN "
                            "(CUDA builds of torch bring their own)")
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


CHECKS = [toolkit_missing, multiple_conflicting, path_not_set]
CUDNN_CHECKS = [cudnn_missing]
