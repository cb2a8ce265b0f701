"""`gpu-doctor matrix …` and `gpu-doctor plan`: the matrix's answers as text or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from doctor.cli import EXIT_FAIL, EXIT_OK, UsageError, positive_seconds


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    if name == "plan":
        p.description = ("Pick the newest PyTorch build (version, CUDA variant, index URL, cuDNN) — or TensorFlow or "
                         "JAX build, when --want names one — that runs on this GPU, platform and driver and satisfies "
                         "--want, or explain which constraint makes it impossible and what to relax. Offline. Exit 1 "
                         "when nothing fits.")
        p.add_argument("--gpu", metavar="NAME", action="append",
                       help='GPU name as nvidia-smi prints it (e.g. "H100 80GB HBM3"); repeat it for a machine with '
                            "several kinds: the build must run on every one")
        p.add_argument("--driver", metavar="VERSION", help="installed driver (535 or 535.104.05)")
        p.add_argument("--driver-cuda", metavar="X.Y",
                       help="the driver's CUDA level when its version is unknown (nvidia-smi's 'CUDA Version', "
                            "cuDriverGetVersion, torch's 'found version')")
        p.add_argument("--want", metavar="SPEC", help="e.g. 'torch>=2.4', 'tensorflow>=2.16', 'jax'")
        p.add_argument("--python", metavar="X.Y", help="the Python version the environment uses")
        p.add_argument("--platform", default=None,
                       choices=("linux-x86_64", "linux-aarch64", "jetson", "windows", "macos"),
                       help="where the wheel must run (default: what the GPU implies — GH200/GB200/GB300/GB10 and "
                            "Jetson Thor are linux-aarch64, other Jetsons jetson — else linux-x86_64)")
        p.add_argument("--json", action="store_true", help="print the plan as JSON")
        return
    p.description = ("Answer from the bundled compatibility matrix (compat/), offline: what a driver runs, what a "
                     "GPU needs, what a CUDA version brings; alone, how current the bundled data is (the newest "
                     "CUDA, driver branch and cuDNN it knows, and what a refresh has seen since). `matrix refresh` "
                     "is the one command that downloads (framework rows from PyPI, NVIDIA's release manifests, into "
                     "your cache).")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    msub = p.add_subparsers(dest="what", metavar="QUESTION", required=False)
    for what, arg, text in (("driver", "VERSION", "the CUDA runtimes and newest framework builds a driver runs"),
                            ("gpu", "NAME", "compute capability, drivers, toolkits and builds for a GPU"),
                            ("cuda", "VERSION", "minimum driver, cuDNN versions and framework builds for a CUDA")):
        q = msub.add_parser(what, help=text, description=text)
        q.add_argument("value", metavar=arg)
        q.add_argument("--json", action="store_true", help="print the answer as JSON")
        if what == "gpu":
            q.add_argument("--platform", default=None,
                           choices=("linux-x86_64", "linux-aarch64", "jetson", "windows", "macos"),
                           help="whose wheels to list (default: what the GPU implies, else linux-x86_64)")
    ref = msub.add_parser("refresh", help="download the PyPI-derived framework rows and NVIDIA's newest releases "
                          "into the user cache",
                          description="Fetch framework rows (torch, tensorflow[and-cuda], jax plugins) from PyPI, and "
                          "the newest CUDA / driver / cuDNN releases from NVIDIA's redistrib manifests and PyPI's "
                          "nvidia-* wheels, with timeouts and ETag caching into the user cache; on failure keep "
                          "the bundled matrix.")
    ref.add_argument("--json", action="store_true", help="print the outcome as JSON")
    ref.add_argument("--timeout", type=positive_seconds, default=10.0, metavar="SEC",
                     help="network timeout (default 10)")


def run(name: str, args: argparse.Namespace) -> int:
    return cmd_plan(args) if name == "plan" else cmd_matrix(args)


def _matrix() -> Any:
    from doctor.matrix import current

    return current()


def _print(data: dict[str, Any], as_json: bool, lines: list[str]) -> None:
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write("\n".join(lines) + "\n")


def cmd_matrix(args: argparse.Namespace) -> int:
    from doctor import queries

    if args.what == "refresh":
        return _refresh(args)
    m = _matrix()
    if args.what is None:
        return _status(m, args.json)
    try:
        if args.what == "gpu":
            answer = queries.query_gpu(m, args.value, getattr(args, "platform", None))
        else:
            answer = {"driver": queries.query_driver, "cuda": queries.query_cuda}[args.what](m, args.value)
    except queries.QueryError as exc:
        raise UsageError(str(exc)) from None
    answer["matrix"] = m.describe()
    answer["reviewed"] = m.oldest_review
    answer["stale_warning"] = m.staleness()
    lines = TEXT[args.what](answer)
    lines.append(f"  data reviewed: {m.oldest_review or 'unknown'} (oldest file) to {m.reviewed or 'unknown'}")
    if answer["stale_warning"]:
        lines.append(f"  warning: {answer['stale_warning']}")
    answer["newer_releases_seen"] = _behind(m)
    lines += [f"  warning: {line}" for line in answer["newer_releases_seen"]]
    _print(answer, args.json, lines)
    return EXIT_OK


def _behind(m: Any) -> list[str]:
    """What the last `matrix refresh` saw that the bundled data lacks (read from the cache; offline)."""
    from doctor.redist import behind, load_seen

    cached = load_seen()
    if not cached:
        return []
    when = cached["fetched_at"][:10]
    return [f"{line} (refresh of {when}): upgrade gpu-doctor" for line in behind(m, cached["seen"])]


def _status(m: Any, as_json: bool) -> int:
    from doctor.redist import bundled_newest, load_seen

    newest = bundled_newest(m)
    cached = load_seen()
    data = {"matrix": m.describe(), "reviewed": m.oldest_review, "newest": newest,
            "refreshed_at": cached["fetched_at"] if cached else None,
            "seen": cached["seen"] if cached else {}, "newer_releases_seen": _behind(m),
            "stale_warning": m.staleness()}
    lines = [f"Compatibility data  ({m.describe()})",
             f"  newest known: CUDA {newest['cuda'] or '?'}, driver branch R{newest['driver_branch'] or '?'}, "
             f"cuDNN {newest['cudnn'] or '?'}",
             f"  data reviewed: {m.oldest_review or 'unknown'} (oldest file) to {m.reviewed or 'unknown'}"]
    if cached:
        seen = ", ".join(f"{k.replace('_', ' ')} {v['version']}" for k, v in sorted(cached["seen"].items()))
        lines.append(f"  last refresh: {cached['fetched_at']} saw {seen or 'nothing'}")
    else:
        lines.append("  never refreshed on this machine (`gpu-doctor matrix refresh` checks NVIDIA and PyPI)")
    if data["stale_warning"]:
        lines.append(f"  warning: {data['stale_warning']}")
    lines += [f"  warning: {line}" for line in data["newer_releases_seen"]]
    _print(data, as_json, lines)
    return EXIT_OK


def _refresh(args: argparse.Namespace) -> int:
    import requests

    from doctor.matrix import bundled
    from doctor.redist import refresh as nvidia_refresh
    from doctor.refresh import default_cache_dir, refresh

    result = refresh(timeout=args.timeout)
    with requests.Session() as session:
        try:
            nv_ok, nv_line = nvidia_refresh(session, args.timeout, default_cache_dir(), bundled())
        except OSError as exc:
            nv_ok, nv_line = False, f"NVIDIA releases: cache not writable: {exc.strerror or exc}"
    _print(result.__dict__ | {"path": str(result.path) if getattr(result, "path", None) else None,
                              "nvidia": {"ok": nv_ok, "message": nv_line}},
           args.json, [result.message, nv_line])
    return EXIT_OK if result.ok or nv_ok else EXIT_FAIL


def _driver_text(a: dict[str, Any]) -> list[str]:
    n = a["newest_native_cuda"]
    head = (f"Driver branch R{a['driver'].lstrip('Rr')} (its newest release)" if a.get("branch")
            else f"Driver {a['driver']}")
    lines = [f"{head}  ({a['matrix']})"]
    lines.append(f"  newest CUDA it runs natively: {n['version']} ({n['label']}, needs ≥ {n['min_driver']})"
                 if n else "  runs no CUDA release in the matrix natively")
    if a["native_cuda"]:
        lines.append("  CUDA runtimes it runs natively: " + ", ".join(a["native_cuda"]))
    for r in a["minor_version_compat"]:
        lines.append(f"  any CUDA {r['cuda_major']}.x application by minor-version compatibility (floor "
                     f"{r['floor']}; no JIT of newer PTX)")
    fw = a["newest_frameworks"]
    if "torch" in fw:
        t = fw["torch"]
        lines.append(f"  newest PyTorch: {t['version']} cu{t['cuda'].replace('.', '')} ({t['rule']}) — "
                     f"pip install torch=={t['version']} --index-url {t['index_url']}")
    if "tensorflow" in fw:
        t = fw["tensorflow"]
        lines.append(f"  newest TensorFlow: {t['version']} (CUDA {t['cuda']}, cuDNN {t['cudnn']})")
    if "jax" in fw:
        t = fw["jax"]
        lines.append(f"  newest JAX: {t['version']} ({t['plugin'] or 'jaxlib'}, CUDA {t['cuda_major']})")
    return lines


def _gpu_text(a: dict[str, Any]) -> list[str]:
    d = a.get("driver") or {}
    lines = [f"{a['gpu']}: compute capability {a['compute_capability']} ({a['architecture']}, {a['segment']})  "
             f"({a['matrix']})"]
    if d and d.get("jetpack"):
        lines.append("  driver: comes with JetPack (Jetson Linux), not a desktop driver branch")
    elif d:
        parts = [f"≥ {d['first']}"] if d.get("first") else []
        parts.append(f"last branch R{d['last_branch']}" if d.get("last_branch") else "current branches")
        lines.append("  driver: " + ", ".join(parts)
                     + ("" if d.get("open_kernel_module") is None else
                        "; open kernel module " + ("required" if d.get("open_kernel_module_required") else
                                                   "supported (from R515)" if d["open_kernel_module"]
                                                   else "not supported")))
    toolkits = ", ".join(a["toolkits_that_compile_for_it"]) or "none known"
    lines.append(f"  CUDA toolkits that compile for it: {toolkits}")
    if a["torch_builds"]:
        newest = a["torch_builds"][0]
        lines.append(f"  PyTorch {a['platform']} builds with its kernels (and a cuDNN that runs on it): "
                     f"{len(a['torch_builds'])} releases, newest {newest['version']} "
                     f"(CUDA {', '.join(newest['cuda'])})")
    elif a.get("torch_note"):
        lines.append(f"  PyTorch: {a['torch_note']}")
    else:
        lines.append(f"  PyTorch {a['platform']} builds with its kernels: none in the matrix")
    lines.append(f"  forward compatibility (cuda-compat): {'yes' if a['forward_compat_eligible'] else 'no'}")
    return lines


def _cuda_text(a: dict[str, Any]) -> list[str]:
    lines = [f"CUDA {a['cuda']}  ({a['matrix']})"]
    for r in a["releases"]:
        floor = r["linux_min_driver"] or (f"R{r['driver_branch']} (branch; no per-release minimum)"
                                          if r.get("driver_branch") else "?")
        lines.append(f"  {r['label'] or r['version']}: Linux driver ≥ {floor}"
                     + (f", Windows ≥ {r['windows_min_driver']}" if r.get("windows_min_driver") else ""))
    if a["minor_version_compat_floor"]:
        lines.append(f"  by minor-version compatibility: any driver ≥ {a['minor_version_compat_floor']}")
    if a["sm_targets"]:
        lines.append("  GPU targets: " + " ".join("sm_" + s.replace(".", "") for s in a["sm_targets"]))
    if a["cudnn"]:
        lines.append("  cuDNN releases supporting it (NVIDIA's support matrix): " + ", ".join(a["cudnn"]))
    if a.get("cudnn_same_major_unverified_minor"):
        lines.append(f"  cuDNN builds for CUDA {a['cuda'].split('.')[0]}.x (known from NVIDIA's nvidia-cudnn wheels on "
                     "PyPI; support for this minor not verified): " + ", ".join(a["cudnn_same_major_unverified_minor"]))
    if a["cudnn"] or a.get("cudnn_same_major_unverified_minor"):
        lines.append("  (PyPI is one channel: NVIDIA's redistributable archives and CUDA repositories carry cuDNN "
                     "builds PyPI has no wheel for)")
    if a["torch"]:
        pypi = [t["version"] for t in a["torch"] if t.get("on_pypi")]
        lines.append("  PyTorch builds: " + ", ".join(t["version"] for t in a["torch"])
                     + f" (PyTorch's index {a['torch'][0]['index_url']}"
                     + (f"; PyPI's default wheel for {', '.join(pypi)})" if pypi else ")"))
    if a["tensorflow"]:
        lines.append("  TensorFlow built with it: " + ", ".join(a["tensorflow"]))
    return lines


TEXT = {"driver": _driver_text, "gpu": _gpu_text, "cuda": _cuda_text}


def this_machine(args: argparse.Namespace) -> None:
    """Fill --gpu, --driver, --python and --platform from this machine (probed read-only, offline), and say so."""
    from doctor import beliefs
    from doctor.host import Host
    from doctor.probes import collect

    facts = collect(Host(timeout=5.0, budget=15.0))
    args.gpu = list(dict.fromkeys(g.name for g in facts.gpus if g.name)) or None
    b = beliefs.of(facts)
    args.driver = b.driver_version.value
    if not args.driver and b.driver_cuda.value:  # the version unknown, its CUDA level known: plan within it
        args.driver_cuda = b.driver_cuda.value
    env = next((e for e in facts.python_envs if e.version), None)
    if args.python is None and env is not None and env.version:
        args.python = ".".join(env.version.split(".")[:2])
    if args.platform is None:
        from doctor.platforms import infer

        args.platform = infer(facts, _matrix())
    if not (args.gpu or args.driver or args.driver_cuda):
        raise UsageError("plan: no NVIDIA GPU or driver found on this machine; say what to plan for with --gpu, "
                         "--driver or --want")
    said = [f"GPU {', '.join(args.gpu)}" if args.gpu else "no GPU listed",
            f"driver {args.driver}" if args.driver else "driver unknown",
            f"Python {args.python}" if args.python else None]
    print(f"gpu-doctor: planning for this machine: {', '.join(x for x in said if x)} "
          "(--gpu, --driver, --python and --want plan for another)", file=sys.stderr)


def cmd_plan(args: argparse.Namespace) -> int:
    from doctor import queries

    if not (args.gpu or args.driver or args.want or args.driver_cuda):
        this_machine(args)  # as `fix` does: plan for the GPUs, driver and Python found here
    m = _matrix()
    try:
        result = queries.plan(m, args.gpu, args.driver, args.want, args.python, platform=args.platform,
                              driver_cuda=args.driver_cuda)
    except queries.QueryError as exc:
        raise UsageError(str(exc)) from None
    result["matrix"] = m.describe()
    family = result.get("framework", "torch")
    if not result["possible"]:
        lines = [f"No {_FAMILY[family]} build fits: {result['why']}"]
    elif family == "tensorflow":
        lines = [f"tensorflow {result['tensorflow']} built for CUDA {result['cuda']}, cuDNN {result['cudnn']} "
                 f"({result['platform']})", f"  {result['install']}", f"  from: {result['channel']}",
                 f"  needs driver ≥ {result.get('driver_floor') or '?'}", f"  source: {result['source']}"]
    elif family == "jax":
        lines = [f"jax {result['jax']} with {result['plugin']} (CUDA {result['cuda_major']}, cuDNN ≥ "
                 f"{result.get('min_cudnn') or '?'}; {result['platform']})"]
        if result.get("install"):
            lines.append(f"  {result['install']}")
        lines += [f"  from: {result['channel']}", f"  needs driver ≥ {result.get('driver_floor') or '?'}"]
        if result.get("local"):
            lines.append(f"  or, with CUDA installed locally: {result['local']}")
        lines.append(f"  source: {result['source']}")
    else:
        lines = _torch_lines(result, args.driver)
    _print(result, args.json, lines)
    return EXIT_OK if result["possible"] else EXIT_FAIL


_FAMILY = {"torch": "PyTorch", "tensorflow": "TensorFlow", "jax": "JAX"}


def _torch_lines(result: dict[str, Any], driver: str | None) -> list[str]:
    lines = [f"torch {result['torch']} built for CUDA {result['cuda']} ({result['rule']}; {result['platform']})",
             f"  {result['install']}", f"  from: {result['channel']}"]
    if result.get("torchvision"):
        lines.append(f"  torchvision {result['torchvision']} pairs with it")
    if result.get("torchaudio"):
        lines.append(f"  torchaudio {result['torchaudio']} pairs with it")
    if result.get("cudnn"):
        lines.append(f"  cuDNN {result['cudnn']} comes with the wheel (NVIDIA's nvidia-cudnn wheel on PyPI)")
    if result.get("forward_compat"):
        fc = result["forward_compat"]
        lines.append(f"  runs on driver {driver} of this data-center GPU with NVIDIA's forward-compatibility "
                     f"package {fc['package']} (without it: driver ≥ {result.get('driver_floor')})")
    elif result.get("driver_floor") and result.get("driver_floor") != result.get("min_driver"):
        lines.append(f"  needs driver ≥ {result['driver_floor']} (minor-version compatibility; "
                     f"≥ {result.get('min_driver')} for full support)")
    elif result.get("min_driver"):
        lines.append(f"  needs driver ≥ {result['min_driver']} natively")
    if result.get("base_image"):
        lines.append(f"  base image: {result['base_image']['tag']} (or {result['base_image']['runtime']}; "
                     f"tags: {result['base_image']['source']})")
    lines.append(f"  source: {result['source']}")
    return lines
