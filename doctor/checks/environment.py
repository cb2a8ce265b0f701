"""Rules about frameworks and the environment: CPU-only builds, visible devices, containers, WSL."""

from __future__ import annotations

import re
from collections.abc import Iterator

from doctor import beliefs
from doctor.checks.common import driver_installed, ev, finding, frameworks, gpu_present, label, ok, probed
from doctor.matrix import Matrix, driver_runs_cuda, vtuple
from doctor.model.facts import Facts, Gpu
from doctor.model.findings import Evidence, Finding, FixStep
from doctor.model.intents import InstallContainerToolkit, ReinstallFramework, UnsetEnvVar
from doctor.registry import Context, NotApplicable, Skip, check
from doctor.safeio import small_int

PYTORCH_INSTALL = "https://pytorch.org/get-started/locally/"
CONDA_VIRTUAL = "https://docs.conda.io/projects/conda/en/latest/user-guide/tasks/manage-virtual.html"
NVML_UNKNOWN_NOTICE = "https://github.com/NVIDIA/nvidia-docker/issues/1730"
DUPLICATE_SOURCE = ("(https://github.com/pytorch/pytorch/blob/main/torch/cuda/__init__.py; CUDA's rules: "
                    "https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html)")


@check("framework.cpu_only_build", "Python & frameworks", "The ML frameworks installed are GPU builds.", static=True)
def cpu_only_build(facts: Facts, ctx: Context) -> Iterator[Finding]:
    fw = frameworks(facts)
    if not fw:
        broken = [e for e in facts.python_envs if e.error]
        if broken:
            raise Skip(f"the Python environment {broken[0].executable} could not be inspected: {broken[0].error}")
        raise NotApplicable("no PyTorch, TensorFlow or JAX in the checked Python environment(s)")
    if all(pkg.cpu_only is None for _exe, pkg in fw):
        raise Skip("whether the installed frameworks are CPU or GPU builds is unknown (their build files were "
                   "not readable)")
    # An image checked with --static is built for GPUs: a CPU-only build there is the bug.
    cpu_image = bool(ctx.options.get("cpu"))
    gpu_expected = gpu_present(facts) or driver_installed(facts) or bool(ctx.options.get("static") and not cpu_image)
    for exe, pkg in fw:
        if pkg.cpu_only is None:
            continue
        evidence = [Evidence("python_envs.packages", f"{label(pkg)} built with CUDA {pkg.cuda or 'none'}", exe)]
        if not pkg.cpu_only:
            yield ok("framework.cpu_only_build", f"{label(pkg)} is a CUDA build"
                     + (f" (CUDA {pkg.cuda})" if pkg.cuda else ""), *evidence)
            continue
        static = bool(ctx.options.get("static"))
        if static and cpu_image:
            yield ok("framework.cpu_only_build", f"{label(pkg)} is a CPU build, as an image meant for CPUs should have "
                     f"({facts.sources.get('cpu_image') or '--cpu'})", *evidence)
            continue
        # No GPU and no driver seen, but a CUDA toolkit installed: someone meant this machine for GPU work.
        # (A machine shown to have no NVIDIA GPU at all is not one: the CPU build is the right build there.)
        no_gpu = beliefs.of(facts).no_nvidia_gpu.yes
        intent = None if gpu_expected or no_gpu else _gpu_intent(facts)
        why = ("this image is checked as a GPU image (--static)" if static else "an NVIDIA GPU is attached"
               if gpu_present(facts) else "the NVIDIA driver is installed") if gpu_expected else \
            f"{intent}, though no NVIDIA GPU or driver was seen" if intent else \
            "there is no NVIDIA GPU here either" if no_gpu else "no NVIDIA GPU was seen here either"
        fix = _cpu_only_fix(pkg.name, pkg.version, _torch_variant_for(facts, ctx, pkg.version))
        conda = ""
        if static and facts.env.get("CONDA_PREFIX"):
            # the cause in a conda image build, whatever the plan installs: said in the detail, which the plan keeps
            conda = (" In a conda-based image build there is no GPU, so conda's __cuda virtual package is absent and "
                     "the solver picks CPU builds: set CONDA_OVERRIDE_CUDA to the CUDA version the image targets "
                     f"before `conda install` ({CONDA_VIRTUAL}).")
            fix += conda
        yield finding(
            "framework.cpu_only_build", "fail" if gpu_expected else "warn" if intent else "info",
            f"{label(pkg)} in {exe} is a CPU-only build",
            f"It cannot use a GPU, and {why}. PyTorch raises 'Torch not compiled with CUDA enabled'; TensorFlow "
            "and JAX silently run on the CPU. A plain `pip install torch` on some platforms, or an index URL "
            "ending in /cpu, gives this build." + conda,
            evidence,
            fix=fix,
            intents=[ReinstallFramework(exe, pkg.name, pkg.version, reason="cpu_only")] if gpu_expected else [],
        )


def _gpu_intent(facts: Facts) -> str | None:
    """What shows that GPU work is meant here although no GPU or driver was seen: a CUDA toolkit (not a pip
    wheel a framework pulled in)."""
    tk = next((t for t in facts.toolkits if t.source != "pip" and (t.version or t.nvcc_version)), None)
    return f"a CUDA toolkit ({tk.version or tk.nvcc_version}) is installed" if tk else None


def _torch_variant_for(facts: Facts, ctx: Context, version: str | None) -> tuple[str, str] | None:
    """(CUDA variant, why) of this torch release that suits the machine: the newest variant the driver
    runs and whose arch list covers the GPUs; with nothing known, the release's default CUDA."""
    m = ctx.matrix
    if not isinstance(m, Matrix):
        return None
    row = m.torch(version)
    if not row or not row.get("variant"):
        return None
    drv = beliefs.driver_version(facts)
    ccs: list[str] = [c for c in (g.compute_capability or (m.gpu(g.name) or {}).get("compute_capability")
                                  for g in facts.gpus if g.source != "pci") if c]
    for var in sorted(row["variant"], key=lambda v: vtuple(v["cuda"]), reverse=True):
        if drv and not driver_runs_cuda(m, drv, var["cuda"]).ok:
            continue
        sass = var.get("arch_list") or []
        if ccs and (not sass or not all(any(vtuple(s)[:1] == vtuple(c)[:1] and vtuple(s) <= vtuple(c)
                                                for s in sass) for c in ccs)):
            continue
        why = []
        if drv:
            why.append(f"runs on driver {drv}")
        if ccs:
            why.append(f"has kernels for compute capability {', '.join(sorted(set(ccs)))}")
        return var["cuda"], " and ".join(why) or "the release's default CUDA build"
    return None


def _cpu_only_fix(name: str, version: str | None, variant: tuple[str, str] | None = None) -> str:
    base = (version or "").split("+", 1)[0]
    if name == "torch":
        if variant:
            cu = "cu" + variant[0].replace(".", "")
            return (f"Reinstall the CUDA {variant[0]} build ({variant[1]}): `pip install --force-reinstall "
                    f"torch=={base} --index-url https://download.pytorch.org/whl/{cu}`.")
        return (f"Reinstall torch{'==' + base if base else ''} from a CUDA index that matches your driver, "
                f"e.g. `pip install --force-reinstall torch{'==' + base if base else ''} --index-url "
                f"https://download.pytorch.org/whl/cuXYZ` (choose cuXYZ at {PYTORCH_INSTALL}).")
    if name.startswith("tensorflow") or name == "tf-nightly":
        return "Install the GPU build: `pip install 'tensorflow[and-cuda]'` (Linux; remove tensorflow-cpu first)."
    return "Install JAX with its CUDA plugin: `pip install -U 'jax[cuda12]'`."


def _visible_tokens(value: str) -> list[str]:
    return [t.strip() for t in value.split(",")]


@check("env.cuda_visible_devices", "Environment", "CUDA_VISIBLE_DEVICES names GPUs that exist.")
def cuda_visible_devices(facts: Facts, ctx: Context) -> Iterator[Finding]:
    if "CUDA_VISIBLE_DEVICES" not in facts.env:
        raise Skip("the environment variables were not recorded")
    value = facts.env.get("CUDA_VISIBLE_DEVICES")
    evidence = [ev(facts, "env.CUDA_VISIBLE_DEVICES", value, "env")]
    if value is None:
        yield ok("env.cuda_visible_devices", "CUDA_VISIBLE_DEVICES is not set: every GPU is visible", *evidence)
        return
    if value.strip() == "" or value.strip() in ("-1", "NoDevFiles", "none", "void"):
        yield finding(
            "env.cuda_visible_devices", "fail", f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU from CUDA",
            "With this value every CUDA program sees zero devices ('no CUDA-capable device is detected', "
            "torch.cuda.is_available() is False) even though nvidia-smi lists the GPUs.",
            evidence, fix="Unset it (`unset CUDA_VISIBLE_DEVICES`) or list the GPUs to use, e.g. 0,1.",
            intents=[UnsetEnvVar("CUDA_VISIBLE_DEVICES", "it hides every GPU from CUDA")],
        )
        return
    gpus = [g for g in facts.gpus if g.source != "pci"]
    if not gpus:
        raise Skip("the GPU list is unknown, so the indices cannot be checked")
    uuids = [g.uuid for g in gpus if g.uuid] + [m.uuid for g in gpus for m in g.mig_devices if m.uuid]
    tokens = _visible_tokens(value)
    seen: list[str] = []
    for pos, tok in enumerate(tokens):
        valid = (small_int(tok) is not None and int(tok) < len(gpus)) or (
            re.match(r"^(GPU|MIG)-", tok) is not None and any(u.startswith(tok) for u in uuids))
        canonical = str(small_int(tok)) if small_int(tok) is not None else tok
        if valid and canonical in seen:
            yield finding(
                "env.cuda_visible_devices", "fail",
                f"CUDA_VISIBLE_DEVICES={value} names GPU {tok} twice: no GPU is visible to PyTorch",
                "A repeated entry makes the whole list invalid for PyTorch, whose parser follows the CUDA "
                "driver's: torch.cuda.device_count() is 0 and is_available() is False (torch/cuda/__init__.py "
                "_parse_visible_devices; its test says 'Double mention of ordinal returns empty set'). NVIDIA's "
                f"documentation does not define a repeated index for the driver itself. {DUPLICATE_SOURCE}",
                [*evidence, Evidence("gpus", [f"{g.index}: {g.uuid}" for g in gpus], gpus[0].source)],
                fix=f"List each GPU once, e.g. CUDA_VISIBLE_DEVICES={','.join(dict.fromkeys([*seen, canonical]))}.",
            )
            return
        seen.append(canonical)
        if not valid:
            kept = tokens[:pos]
            yield finding(
                "env.cuda_visible_devices", "fail" if not kept else "warn",
                f"CUDA_VISIBLE_DEVICES={value} names {tok!r}, which is not one of the {len(gpus)} GPU(s) here",
                "CUDA reads the list up to the first entry it cannot match and ignores the rest, so programs see "
                + (f"only {', '.join(kept)}." if kept else "no GPU at all."),
                [*evidence, Evidence("gpus", [f"{g.index}: {g.uuid}" for g in gpus], gpus[0].source)],
                fix=f"Use indices 0–{len(gpus) - 1} or the UUIDs from `nvidia-smi -L`.",
            )
            return
    yield ok("env.cuda_visible_devices", f"CUDA_VISIBLE_DEVICES={value}: {len(tokens)} of {len(gpus)} GPU(s) "
             "visible", *evidence)


def ordinal_table(facts: Facts) -> str:
    """NVML index ↔ PCI bus id ↔ UUID ↔ CUDA ordinal under the current environment."""
    gpus = [g for g in facts.gpus if g.source != "pci"]
    order = facts.env.get("CUDA_DEVICE_ORDER") or "FASTEST_FIRST"
    by_bus = sorted(gpus, key=lambda g: (g.pci_bus_id or "").lower())
    same_model = len({g.name for g in gpus}) <= 1
    # FASTEST_FIRST ranks mixed models by a speed heuristic CUDA does not document: order unknown.
    cuda_order = by_bus if order == "PCI_BUS_ID" or same_model else []
    visible = facts.env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and cuda_order:
        picked = []
        for tok in _visible_tokens(visible):
            match = [g for g in cuda_order if g.uuid and tok.startswith(("GPU-", "MIG-")) and g.uuid.startswith(tok)]
            if small_int(tok) is not None and int(tok) < len(cuda_order):
                match = [cuda_order[int(tok)]]
            if not match:
                break
            picked.append(match[0])
        cuda_order = picked
    rows = [f"{'NVML':>4}  {'PCI bus id':<18} {'UUID':<42} {'CUDA':>4}  name"]
    for g in sorted(gpus, key=lambda g: g.index if g.index is not None else 0):
        cuda = (str(cuda_order.index(g)) if g in cuda_order else "-") if cuda_order else "?"
        rows.append(f"{g.index!s:>4}  {g.pci_bus_id or '?':<18} {g.uuid or '?':<42} {cuda:>4}  {g.name or '?'}")
        for m in g.mig_devices:
            rows.append(f"{'':>4}  {'  MIG ' + str(m.index):<18} {m.uuid or '?':<42} {'':>4}  {m.name or ''}")
    note = f"CUDA_DEVICE_ORDER={order}" + (f", CUDA_VISIBLE_DEVICES={visible}" if visible is not None else "")
    if not cuda_order and not same_model:
        note += " ('?': FASTEST_FIRST puts the fastest GPU first; the rest of the order is unspecified)"
    return note + "\n" + "\n".join(rows)


def _key(g: Gpu) -> str:
    return g.name or "?"


@check("env.device_order", "Environment", "GPU numbering is the same for nvidia-smi and CUDA.")
def device_order(facts: Facts, ctx: Context) -> Iterator[Finding]:
    gpus = [g for g in facts.gpus if g.source != "pci"]
    if len(gpus) < 2 and not any(g.mig_devices for g in gpus):
        raise NotApplicable("fewer than two GPUs and no MIG instances")
    if "CUDA_DEVICE_ORDER" not in facts.env:
        raise Skip("the environment variables were not recorded")
    order = facts.env.get("CUDA_DEVICE_ORDER")
    models = sorted({_key(g) for g in gpus})
    table = ordinal_table(facts)
    evidence = [ev(facts, "env.CUDA_DEVICE_ORDER", order, "env"), Evidence("gpus", models, gpus[0].source)]
    if len(models) == 1 or order == "PCI_BUS_ID":
        yield ok("env.device_order", "nvidia-smi and CUDA number the GPUs the same way", *evidence, detail=table)
        return
    yield finding(
        "env.device_order", "warn",
        f"Mixed GPU models ({', '.join(models)}) without CUDA_DEVICE_ORDER=PCI_BUS_ID: "
        "CUDA's GPU 0 is not nvidia-smi's",
        "CUDA numbers devices fastest first by default, nvidia-smi by PCI bus id, so `cuda:0` and "
        "CUDA_VISIBLE_DEVICES=0 may mean a different card than nvidia-smi's GPU 0.\n" + table,
        evidence,
        fix="export CUDA_DEVICE_ORDER=PCI_BUS_ID (in the shell profile or the job script)",
    )


@check("container.no_gpu_passthrough", "Environment", "Inside a container, the GPU was passed in.")
def no_gpu_passthrough(facts: Facts, ctx: Context) -> Iterator[Finding]:
    kind = facts.host.container
    if not kind:
        raise NotApplicable("not in a container")
    nvd = facts.env.get("NVIDIA_VISIBLE_DEVICES")
    nodes = [n for n in facts.driver.device_nodes if re.search(r"/nvidia\d+$", n)]
    libs = facts.loader.libcuda
    evidence = [ev(facts, "driver.device_nodes"), ev(facts, "loader.libcuda"),
                ev(facts, "env.NVIDIA_VISIBLE_DEVICES", nvd, "env")]
    if nvd in ("void", "none", ""):
        yield finding("container.no_gpu_passthrough", "fail",
                      f"NVIDIA_VISIBLE_DEVICES={nvd!r}: the container was told to get no GPU",
                      "The NVIDIA container runtime injects no device for this value.", evidence,
                      fix="Run with --gpus all (Docker) or request nvidia.com/gpu (Kubernetes), and do not set "
                          "NVIDIA_VISIBLE_DEVICES to void/none.")
        return
    if nodes and facts.driver.nvml_error and "unknown error" in facts.driver.nvml_error.lower():
        yield finding(
            "container.no_gpu_passthrough", "fail",
            "This container lost access to its GPUs: 'Failed to initialize NVML: Unknown Error'",
            "The device nodes are still here but the container may no longer open them: when systemd manages "
            "the container's cgroups, a `systemctl daemon-reload` on the host (often run by a package upgrade) "
            "resets the device rules the NVIDIA runtime added. NVIDIA's notice describes it: "
            f"{NVML_UNKNOWN_NOTICE}.",
            [*evidence, ev(facts, "driver.nvml_error")],
            fix="Recreate the container (a restart of the same container is not always enough). On the host, "
                "prevent it: `sudo nvidia-ctk system create-dev-char-symlinks --create-all` (and the udev rule from "
                "NVIDIA's notice), or use the cgroupfs cgroup driver for Docker.",
        )
        return
    b = beliefs.of(facts)
    # NVML or libcuda answering proves the driver library is inside, whatever the loader probe said.
    answered = bool(beliefs.listed_gpus(facts) or facts.driver.cuda_driver_api
                    or (facts.driver.userspace and "nvml" in (facts.sources.get("driver.userspace") or "")))
    has_lib: bool | None = True if (libs and not libs.stub) or answered else (
        False if (libs and libs.stub) or b.libcuda.value == "absent" else None)
    if beliefs.listed_gpus(facts) or (nodes and has_lib):
        shown = f"{len(nodes)} GPU device node(s)" if nodes else f"{len(beliefs.listed_gpus(facts))} GPU(s) listed"
        yield ok("container.no_gpu_passthrough", f"{shown} and the driver library "
                 f"{(libs.version if libs else None) or facts.driver.userspace or ''} are inside the container"
                 .replace("  ", " "), *evidence)
        return
    if nodes and has_lib is None:
        raise Skip("the device nodes are here, but whether the driver library was injected is unknown "
                   "(the loader was not inspected)")
    missing = []
    if not nodes:
        missing.append("no /dev/nvidiaN device node")
    if has_lib is False:
        missing.append("no driver library libcuda.so.1" + (" (only the toolkit's stub)" if libs else ""))
    if not missing:
        raise Skip("whether the GPU was passed in is unknown")
    flag = {"docker": "docker run --gpus all …", "podman": "podman run --device nvidia.com/gpu=all …",
            "kubernetes": "resources.limits: nvidia.com/gpu: 1 in the pod spec"}.get(kind, "--gpus all")
    yield finding(
        "container.no_gpu_passthrough", "fail",
        f"This {kind} container has no GPU passed in: " + " and ".join(missing),
        "The GPU and the driver's libraries come from the host through the NVIDIA container toolkit; they are "
        "only injected when the container is started asking for a GPU.",
        evidence,
        fix=f"Start the container with a GPU request ({flag}); the host needs the NVIDIA container toolkit.",
    )


@check("container.toolkit_missing", "Environment", "A GPU host with a container engine has the NVIDIA container "
       "toolkit configured.")
def container_toolkit_missing(facts: Facts, ctx: Context) -> Iterator[Finding]:
    ct = facts.host.container_toolkit
    if facts.host.container:
        raise NotApplicable("inside a container")
    if ct is None:
        raise Skip("the container engines and the NVIDIA container toolkit were not probed")
    if not ct.engines:
        raise NotApplicable("no container engine installed")
    if not gpu_present(facts):
        raise NotApplicable("no NVIDIA GPU on this host")
    evidence = [ev(facts, "host.container_toolkit.engines", ct.engines),
                ev(facts, "host.container_toolkit.installed", ct.installed),
                ev(facts, "host.container_toolkit.runtime_configured", ct.runtime_configured)]
    engines = ", ".join(ct.engines)
    steps = _toolkit_steps(ct.engines, install=not ct.installed)
    if not ct.installed:
        yield finding(
            "container.toolkit_missing", "warn",
            f"{engines} is installed but the NVIDIA container toolkit is not: containers cannot get the GPU",
            "`docker run --gpus all` fails with 'could not select device driver \"\" with capabilities: [[gpu]]'.",
            evidence, fix="Install nvidia-container-toolkit from NVIDIA's repository, then configure the engine.",
            steps=steps, intents=[InstallContainerToolkit(_engine(ct.engines), install=True)],
        )
    elif ct.runtime_configured is False:
        yield finding(
            "container.toolkit_missing", "warn",
            f"The NVIDIA container toolkit {ct.version or ''} is installed but {engines} is not configured to use it",
            "The engine's configuration has no nvidia runtime (or CDI spec), so GPU requests fail with "
            "'could not select device driver \"\" with capabilities: [[gpu]]'.",
            evidence, fix="Configure the engine and restart it.",
            steps=steps, intents=[InstallContainerToolkit(_engine(ct.engines), install=False)],
        )
    else:
        yield ok("container.toolkit_missing", f"NVIDIA container toolkit {ct.version or ''} is installed for "
                 f"{engines}".replace("  ", " "), *evidence)


ENGINE_PRIORITY = ("docker", "podman", "containerd", "cri-o")


def _engine(engines: list[str]) -> str:
    return min(engines, key=lambda e: ENGINE_PRIORITY.index(e) if e in ENGINE_PRIORITY else 99)


def _toolkit_steps(engines: list[str], install: bool) -> list[FixStep]:
    """What NVIDIA's container toolkit guide says to run for the engine users start GPU containers with.

    Docker also ships containerd, so docker comes first; podman (and CRI-O) use CDI specs instead of
    a runtime entry.
    """
    engine = _engine(engines)
    steps = []
    if install:
        steps.append(FixStep(["apt-get", "install", "-y", "nvidia-container-toolkit"], root=True,
                             note="from NVIDIA's repository (dnf install nvidia-container-toolkit on RHEL)"))
    if engine in ("podman", "cri-o"):
        steps.append(FixStep(["nvidia-ctk", "cdi", "generate", "--output=/etc/cdi/nvidia.yaml"], root=True))
    else:
        steps += [FixStep(["nvidia-ctk", "runtime", "configure", f"--runtime={engine}"], root=True),
                  FixStep(["systemctl", "restart", engine], root=True, risk="restart")]
    return steps


@check("wsl.driver", "Environment", "Under WSL2, CUDA uses the Windows driver's libcuda from /usr/lib/wsl/lib.")
def wsl_driver(facts: Facts, ctx: Context) -> Iterator[Finding]:
    if not facts.host.wsl:
        raise NotApplicable("not WSL")
    lib = facts.loader.libcuda
    # A libcuda path that is known is evidence even when the loader was not fully probed.
    if not probed(facts, "loader") and lib is None:
        raise Skip("the dynamic loader's libcuda was not inspected (a recorded report that does not say)")
    linux_driver = [p.name for p in facts.driver.packages if re.match(r"(nvidia-driver|cuda-drivers|libnvidia-compute)",
                                                                       p.name)]
    evidence = [ev(facts, "loader.libcuda"), Evidence("driver.packages", linux_driver, "dpkg")]
    if lib is None:
        yield finding(
            "wsl.driver", "fail", "WSL2 without /usr/lib/wsl/lib/libcuda.so: the Windows NVIDIA driver is not exposed",
            "Under WSL2 the GPU driver is the Windows one; Windows mounts its libcuda into /usr/lib/wsl/lib. "
            "It is missing when the Windows driver is too old for WSL or WSL itself needs an update.",
            evidence, fix="Install a current NVIDIA driver on Windows (not inside Linux) and run `wsl --update`.",
        )
    elif not lib.path.startswith("/usr/lib/wsl/") or linux_driver:
        yield finding(
            "wsl.driver", "fail",
            f"A Linux NVIDIA driver inside WSL shadows the Windows driver's libcuda ({lib.path})",
            "Under WSL2 no Linux display driver may be installed: its libcuda.so replaces the one in "
            "/usr/lib/wsl/lib and CUDA fails to find a device.",
            evidence, fix="Remove the Linux driver packages inside WSL" +
            (f" ({', '.join(linux_driver)})" if linux_driver else "")
            + " and keep only the toolkit (cuda-toolkit-X-Y).",
        )
    else:
        yield ok("wsl.driver", "WSL2 uses the Windows driver's libcuda from /usr/lib/wsl/lib", *evidence)


@check("framework.cuda_unavailable", "Python & frameworks",
       "Each CUDA build of a framework sees the GPU (torch.cuda.is_available() / its device list).")
def cuda_unavailable(facts: Facts, ctx: Context) -> Iterator[Finding]:
    asked = [(exe, p) for exe, p in frameworks(facts) if p.deep and p.deep.is_available is not None]
    if not asked:
        raise NotApplicable("no framework was asked whether it sees a GPU (only with --deep, or from a "
                            "collect_env report)")
    b = beliefs.of(facts)
    for exe, p in asked:
        deep = p.deep
        assert deep is not None
        evidence = [Evidence("python_envs.packages.deep.is_available", deep.is_available, exe)]
        if deep.error:
            evidence.append(Evidence("python_envs.packages.deep.error", deep.error, exe))
        if deep.is_available:
            count = f" ({deep.device_count} device(s))" if deep.device_count else ""
            yield ok("framework.cuda_unavailable", f"{label(p)} sees the GPU{count}", *evidence)
            continue
        if p.cpu_only:
            continue  # framework.cpu_only_build says why
        causes = []
        if b.no_nvidia_gpu.yes:
            causes.append("there is no NVIDIA GPU on this machine")
        if b.userspace_installed.no:
            causes.append("no NVIDIA driver is installed (see driver.missing)")
        elif b.module_loaded.no:
            causes.append("the NVIDIA kernel module is not loaded (see driver.not_loaded)")
        drv = b.driver_version.value
        m = ctx.matrix
        if p.cuda and isinstance(m, Matrix) and (drv or b.driver_cuda.value):
            v = driver_runs_cuda(m, drv, p.cuda if "." in p.cuda else f"{p.cuda}.0",
                                 driver_api=b.driver_cuda.value, windows=beliefs.windows_driver(facts))
            if not v.ok and v.rule != "unknown":
                causes.append(f"the driver is too old for its CUDA {p.cuda}: {v.explanation} "
                              "(see framework.cuda_newer_than_driver)")
        visible = facts.env.get("CUDA_VISIBLE_DEVICES")
        if visible is not None and visible.strip() in ("", "-1", "none", "void", "NoDevFiles"):
            causes.append(f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU")
        if facts.host.container and not [n for n in facts.driver.device_nodes if re.search(r"/nvidia\d+$", n)]:
            causes.append("the container has no GPU passed in (see container.no_gpu_passthrough)")
        if b.libcuda.value == "stub":
            causes.append("the loader resolves the toolkit's stub libcuda (see loader.libcuda_stub)")
        said = f" It said: {deep.error!r}." if deep.error else ""
        if not causes and not (drv or b.driver_cuda.value):
            # A report cut short (or a driver line 'Could not collect') leaves the likeliest causes unknown:
            # that is not "no cause is visible".
            yield finding(
                "framework.cuda_unavailable", "warn",
                f"{label(p)} is a CUDA build but sees no GPU; the driver version is unknown",
                f"{label(p)} in {exe} answered that CUDA is not available." + said + " The facts do not say which "
                "NVIDIA driver version is installed, so a driver too old for its CUDA"
                + (f" {p.cuda}" if p.cuda else "") + " (or a missing or unloaded one) is not ruled out.", evidence,
                fix="Run `nvidia-smi` and `gpu-doctor check` on the machine itself: they show the driver and the "
                    "CUDA version it supports.")
            continue
        if causes:
            yield finding(
                "framework.cuda_unavailable", "warn",
                f"{label(p)} is a CUDA build but sees no GPU: {causes[0]}",
                f"{label(p)} in {exe} answered that CUDA is not available." + said + " Causes found: "
                + "; ".join(causes) + ".", evidence,
                fix="Fix the cause named above; then `python -c 'import torch; print(torch.cuda.is_available())'` "
                    "says True.")
            continue
        yield finding(
            "framework.cuda_unavailable", "fail",
            f"{label(p)} is a CUDA build but sees no GPU, and no cause is visible from these facts",
            f"{label(p)} in {exe} answered that CUDA is not available." + said + " The driver, the GPU list and "
            "the framework's CUDA version do not explain it. Common causes: the process cannot open /dev/nvidia* "
            "(permissions, a container or cgroup rule), a GPU in a bad state (Xid errors; `nvidia-smi -q`), "
            "CUDA_VISIBLE_DEVICES set in the job's own environment, or a second libcuda earlier on the loader path.",
            evidence,
            fix="Run `gpu-doctor check --deep -v` in the same environment as the failing program, and "
                "`python -c 'import torch; torch.cuda.init()'` to see CUDA's own error.")


FRAMEWORK_CHECKS = [cpu_only_build, cuda_unavailable]
ENV_CHECKS = [cuda_visible_devices, device_order, container_toolkit_missing, no_gpu_passthrough, wsl_driver]
