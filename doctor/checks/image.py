"""Checks of an image's own environment (check --static, check --dockerfile): ENV lines baked into an
image that keep every container started from it away from the GPU."""

from __future__ import annotations

from collections.abc import Iterator

from doctor.checks import require_cuda as rc
from doctor.checks.common import ev, finding, ok
from doctor.matrix import major_minor
from doctor.model.facts import Facts
from doctor.model.findings import Evidence, Finding
from doctor.registry import Context, NotApplicable, check, matrix_of

TOOLKIT_DOC = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html"
STUB_DOC = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html (cudaErrorStubLibrary = 34)"
HIDING = ("", "-1", "none", "void", "NoDevFiles")


@check("image.env_blocks_gpu", "Environment", "With --static: the image's ENV does not hide the GPU or the driver "
       "from its containers.", static=True)
def env_blocks_gpu(facts: Facts, ctx: Context) -> Iterator[Finding]:
    if not ctx.options.get("static"):
        raise NotApplicable("only with --static (an image's baked-in environment; a live one is judged by "
                            "env.cuda_visible_devices and container.no_gpu_passthrough)")
    env = facts.env
    found = False
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None and cvd.strip() in HIDING:
        found = True
        yield finding("image.env_blocks_gpu", "fail",
                      f"The image sets CUDA_VISIBLE_DEVICES={cvd!r}: CUDA in its containers sees no GPU",
                      "Every process started from this image inherits it, so torch.cuda.is_available() is False "
                      "and CUDA reports 'no CUDA-capable device is detected' on any host.",
                      [ev(facts, "env.CUDA_VISIBLE_DEVICES", cvd, "env")],
                      fix="Remove the ENV CUDA_VISIBLE_DEVICES line; choose GPUs when the container is started.")
    nvd = env.get("NVIDIA_VISIBLE_DEVICES")
    if nvd is not None and nvd.strip() in ("", "void", "none"):
        found = True
        yield finding("image.env_blocks_gpu", "warn",
                      f"The image sets NVIDIA_VISIBLE_DEVICES={nvd!r}: the NVIDIA runtime passes it no GPU "
                      "unless the run overrides it",
                      "'void' or empty makes the NVIDIA container runtime behave like runc (no GPU, no driver "
                      f"libraries); 'none' gives the driver libraries but no GPU ({TOOLKIT_DOC}). `docker run "
                      "--gpus` and a Kubernetes GPU request set the variable again, a plain run does not.",
                      [ev(facts, "env.NVIDIA_VISIBLE_DEVICES", nvd, "env")],
                      fix="Remove the ENV NVIDIA_VISIBLE_DEVICES line (or set it to all).")
    caps = env.get("NVIDIA_DRIVER_CAPABILITIES")
    if caps and caps.strip():
        wanted = {c.strip() for c in caps.split(",")}
        if not wanted & {"compute", "all"}:
            found = True
            yield finding("image.env_blocks_gpu", "fail",
                          f"The image sets NVIDIA_DRIVER_CAPABILITIES={caps}: without 'compute' the driver's "
                          "CUDA library is not mounted into its containers",
                          f"'compute' is required for CUDA and OpenCL applications ({TOOLKIT_DOC}); without it "
                          "libcuda.so.1 is missing in the container and CUDA cannot start.",
                          [ev(facts, "env.NVIDIA_DRIVER_CAPABILITIES", caps, "env")],
                          fix="Set ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility (add the others you need).")
    ld = env.get("LD_LIBRARY_PATH") or ""
    stubs = [d for d in ld.split(":") if d.rstrip("/").endswith("/stubs")]
    if stubs:
        found = True
        yield finding("image.env_blocks_gpu", "warn",
                      f"The image puts {stubs[0]} on LD_LIBRARY_PATH: a program that looks libcuda up there gets "
                      "the toolkit's stub instead of the driver's",
                      "The stubs directory exists to link against. Loaded at run time, the stub makes every CUDA "
                      f"call fail with cudaErrorStubLibrary (34) ({STUB_DOC}); whether a program reaches it depends "
                      "on the name it loads and on links made in that directory.",
                      [ev(facts, "env.LD_LIBRARY_PATH", ld, "env")],
                      fix="Keep the stubs directory for linking only (LIBRARY_PATH, or -L at build time), not on "
                          "LD_LIBRARY_PATH.")
    if not found:
        if not any(k in env for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")):
            raise NotApplicable("the image's environment was not recorded")
        yield ok("image.env_blocks_gpu", "The image's environment leaves the GPU and the driver visible",
                 ev(facts, "env.CUDA_VISIBLE_DEVICES", cvd, "env"), ev(facts, "env.NVIDIA_VISIBLE_DEVICES", nvd, "env"),
                 ev(facts, "env.NVIDIA_DRIVER_CAPABILITIES", caps, "env"))


@check("image.require_cuda", "Environment", "With --static and --host-driver: the host driver meets the image's "
       "NVIDIA_REQUIRE_CUDA, without which the NVIDIA container runtime refuses to start its containers.", static=True)
def require_cuda(facts: Facts, ctx: Context) -> Iterator[Finding]:
    if not ctx.options.get("static"):
        raise NotApplicable("only with --static (an image's own requirement; a running container already passed it)")
    text = facts.env.get("NVIDIA_REQUIRE_CUDA")
    req = rc.parse(text)
    if req is None:
        raise NotApplicable("the image sets no NVIDIA_REQUIRE_CUDA")
    evidence = [ev(facts, "env.NVIDIA_REQUIRE_CUDA", _short(req.text), "env")]
    if rc.disabled(facts.env.get("NVIDIA_DISABLE_REQUIRE")):
        raise NotApplicable("NVIDIA_DISABLE_REQUIRE is set: the runtime does not check NVIDIA_REQUIRE_CUDA")
    driver = facts.driver.userspace or facts.driver.kernel_module
    if not driver:
        raise NotApplicable("the future host's driver is not given (--host-driver)")
    m = matrix_of(ctx)
    gpu = facts.gpus[0] if facts.gpus else None
    segment = (m.gpu(gpu.name) or {}).get("segment") if gpu else None
    brands = rc.SEGMENT_BRANDS.get(segment or "") if gpu else None
    verdict, why = rc.satisfied(m, req, driver, brands, gpu.compute_capability if gpu else None)
    floor = rc.cuda_floor(m, req)
    need = floor.get("linux_min_driver") if floor else None
    evidence += [Evidence("driver", driver, "--host-driver")] + ([Evidence("gpu", gpu.name, "--target-gpu")]
                                                                  if gpu else [])
    exceptions = rc.branches_text(req)
    unknown = facts.sources.get("require_cuda")
    fix = (f"Build FROM a CUDA release the host driver {driver} supports (e.g. an nvidia/cuda tag of an older CUDA), "
           f"or run it on hosts with driver ≥ {need}." if need else None)
    if verdict:
        yield ok("image.require_cuda", f"Driver {driver} meets the image's NVIDIA_REQUIRE_CUDA ({why})", *evidence)
    elif verdict is None:
        yield finding("image.require_cuda", "warn",
                      f"The NVIDIA container runtime starts this image on driver {driver} only for some GPUs: "
                      f"NVIDIA_REQUIRE_CUDA needs {_driver_for(need, req.cuda)} or {why}",
                      f"Below CUDA {req.cuda}'s driver the image starts only under its exceptions ({exceptions}); "
                      "any other GPU gets 'nvidia-container-cli: requirement error: unsatisfied condition: "
                      f"cuda>={req.cuda}'. Give --target-gpu to judge one GPU." + (f" {unknown}." if unknown else ""),
                      evidence, fix=fix)
    else:
        brand_note = (f"; its exceptions cover only {exceptions}, not {gpu.name}" if gpu and req.exceptions else "")
        yield finding("image.require_cuda", "fail",
                      f"The NVIDIA container runtime refuses to start this image on driver {driver}: "
                      f"NVIDIA_REQUIRE_CUDA needs {_driver_for(need, major_minor(req.cuda) or req.cuda)}"
                      + brand_note,
                      "The runtime checks the requirement before the container starts: 'nvidia-container-cli: "
                      f"requirement error: unsatisfied condition: cuda>={req.cuda}'. Minor-version compatibility "
                      "does not help: the check compares the driver's CUDA version. NVIDIA_DISABLE_REQUIRE=1 skips "
                      "the check, and only helps when the image's CUDA runs on that driver by minor-version "
                      "compatibility." + (f" {unknown}." if unknown else ""),
                      evidence, fix=fix)


def _short(text: str) -> str:
    return text if len(text) <= 160 else text[:157] + "…"


COMPAT_DOC = "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html"


@check("image.forward_compat", "Environment", "With --static: the image does not force NVIDIA's forward-compatibility "
       "libcuda (cuda-compat) on every host.", static=True)
def forward_compat_forced(facts: Facts, ctx: Context) -> Iterator[Finding]:
    if not ctx.options.get("static"):
        raise NotApplicable("only with --static (a live machine's compat libcuda is judged by driver.forward_compat)")
    ld = [d for d in (facts.env.get("LD_LIBRARY_PATH") or "").split(":") if d.rstrip("/").endswith("/compat")]
    lib = facts.loader.libcuda
    forced = [*ld, *([lib.path.rsplit("/", 1)[0]] if lib and "/compat/" in lib.path else [])]
    packages = [p.name for p in facts.driver.packages if p.name.startswith("cuda-compat")]
    if not forced and not packages:
        raise NotApplicable("the image puts no cuda-compat library on the loader's path and installs none")
    evidence = ([ev(facts, "env.LD_LIBRARY_PATH", facts.env.get("LD_LIBRARY_PATH"), "env")] if ld else []) + (
        [ev(facts, "loader.libcuda", lib.path, "ldconfig")] if lib and "/compat/" in lib.path else []) + (
        [Evidence("driver.packages", packages, "dpkg")] if packages else [])

    m = matrix_of(ctx)
    gpu = facts.gpus[0] if facts.gpus else None
    segment = (m.gpu(gpu.name) or {}).get("segment") if gpu else None
    where = f"{', '.join(forced)} on the loader's path" if forced else f"{', '.join(packages)} installed"
    detail = ("NVIDIA's forward compatibility works only on data-center GPUs (and select NGC-ready RTX SKUs); on "
              "GeForce and most workstation GPUs every CUDA call fails with CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE "
              "(804). On a host whose kernel driver is not a branch the compat library was made for (a newer driver, "
              "typically) CUDA fails with CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803). The NVIDIA container runtime "
              f"already uses an image's compat libraries by itself, and only on hosts that need them ({COMPAT_DOC}).")
    fix = ("Remove the line that puts the compat directory on the loader's path (the `ldconfig …/compat` RUN, or "
           "…/compat in ENV LD_LIBRARY_PATH)." if forced else
           "Install cuda-compat only for data-center hosts with an older driver branch; leave it off the loader's "
           "path.")
    if gpu is not None and segment not in (None, "datacenter", "embedded"):  # a consumer GPU
        yield finding("image.forward_compat", "fail",
                      f"The image forces forward compatibility ({where}): on {gpu.name} CUDA fails with 804",
                      detail, [*evidence, Evidence("gpu", gpu.name, "--target-gpu")], fix=fix)
        return
    yield finding("image.forward_compat", "warn" if forced else "info",
                  f"The image {'forces' if forced else 'carries'} forward compatibility ({where}): consumer GPUs "
                  "fail with 804, hosts with another driver branch with 803", detail, evidence, fix=fix)


CHECKS = [env_blocks_gpu, require_cuda, forward_compat_forced]


def _driver_for(need: str | None, cuda: str | None) -> str:
    """'driver ≥ 570.26 (CUDA 12.8)', or what is known when the matrix has no row for that CUDA."""
    if need and cuda:
        return f"driver ≥ {need} (CUDA {cuda})"
    if cuda:
        return f"a driver that supports CUDA {cuda}"
    return f"driver ≥ {need}" if need else "a driver the image's requirement names"
