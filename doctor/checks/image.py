"""Checks of an image's own environment (check --static, check --dockerfile): ENV lines baked into an
image that keep every container started from it away from the GPU."""

from __future__ import annotations

from collections.abc import Iterator

from doctor.checks.common import ev, finding, ok
from doctor.model.facts import Facts
from doctor.model.findings import Finding
from doctor.registry import Context, NotApplicable, check

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


CHECKS = [env_blocks_gpu]
