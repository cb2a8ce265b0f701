"""Runs inside the *target* Python environment (python PATH/torch_child.py MODE …): torch's view of GPU memory.

Modes (each prints JSON events after the marker, like framework_child.py, and never lets an exception escape):

  oom                       fill the GPU through torch's caching allocator until torch.cuda.OutOfMemoryError,
                            read torch.cuda.mem_get_info before / full / after del / after empty_cache, prove the
                            GPU still computes, and report the allocator settings in force (PYTORCH_CUDA_ALLOC_CONF)
  batch MODULE:FACTORY CAP  the largest batch size that fits for the user's model: FACTORY() returns
                            (model, make_batch) where make_batch(n) gives the model's input for a batch of n; each
                            try runs a forward and a backward pass; the search is :func:`largest_fitting`
  allreduce [MAX_MIB]       an NCCL all-reduce across every visible GPU, one worker process per GPU (this file run
                            again as `allreduce-worker RANK WORLD PORT MAX_MIB`), with its bus bandwidth

The search is a pure function over ``try_batch(n) -> bool`` so it is tested without a GPU
(tests/test_batch_probe.py). Plain syntax on purpose: the interpreter may be old (Python >= 3.6).
"""

import json
import os
import socket
import subprocess
import sys
import time
import traceback

# Annotations for mypy only, as in doctor/probes/pyenv_child.py, kept readable by Python 3.6: a signature's are
# quoted unless a builtin name (they are evaluated when the function is defined, and `list[str]` fails before 3.9),
# a local variable's are never evaluated, and typing is not imported at run time (mypy takes this name as true; the
# interpreter never enters the block). tests/test_types.py holds these files to it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

    Out = dict[str, object]  # what one run reports, sent as JSON

MARKER = "@@GPU-DOCTOR@@"
MIB = 1 << 20


def emit(event: str, **data: object) -> None:
    data["event"] = event
    sys.stdout.write(MARKER + json.dumps(data, default=str) + "\n")
    sys.stdout.flush()


PROGRESS = [0, 1]  # steps done, steps planned (main() sets the plan of the mode)


def step(text: str) -> None:
    """Say what runs now, with how far along the run is: the parent draws it as a percentage."""
    done, planned = PROGRESS
    emit("step", step=text, fraction=round(min(done / planned, 1.0), 4))
    PROGRESS[0] = done + 1


def planned_steps(mode: str, cap: int = 1) -> int:
    """The step() calls of a mode: oom 5; allreduce 5; batch 3 and at most one per try of
    :func:`largest_fitting` (2 * ceil(log2(cap)) + 1), so a search that ends early ends below 100 %."""
    if mode == "batch":
        return 3 + 2 * (max(cap, 1) - 1).bit_length() + 1
    return 5


def error_of(exc: BaseException, where: str) -> "dict[str, str]":
    lines = traceback.format_exception_only(type(exc), exc)
    return {"type": type(exc).__module__ + "." + type(exc).__name__, "text": "".join(lines).strip(), "step": where}


# --- the search (pure) ------------------------------------------------------------------------------


def largest_fitting(try_batch: "Callable[[int], object]", cap: int) -> "tuple[int, list[tuple[int, bool]]]":
    """The largest n in [1, cap] for which try_batch(n) is True, assuming it fits up to some size and not beyond
    (0 when not even 1 fits). Doubles from 1 until a try fails or reaches the cap, then bisects between the last
    size that fitted and the first that did not, as Lightning's batch-size finder ("binsearch") does.
    Returns (n, [(size, fitted), ...] in the order tried); at most 2 * ceil(log2(cap)) + 1 tries."""
    if cap < 1:
        raise ValueError("cap must be at least 1")
    trials: list[tuple[int, bool]] = []

    def attempt(n: int) -> bool:
        ok = bool(try_batch(n))
        trials.append((n, ok))
        return ok

    lo, n = 0, 1  # lo fits (0: nothing tried yet)
    while True:
        if not attempt(n):
            hi = n
            break
        lo = n
        if n >= cap:
            return lo, trials
        n = min(2 * n, cap)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if attempt(mid):
            lo = mid
        else:
            hi = mid
    return lo, trials


# --- torch ------------------------------------------------------------------------------------------


def is_oom(torch: "ModuleType", exc: BaseException) -> bool:
    oom_type = getattr(torch.cuda, "OutOfMemoryError", None)  # torch >= 1.13
    return (oom_type is not None and isinstance(exc, oom_type)) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc))


def alloc_settings(torch: "ModuleType") -> "dict[str, object]":
    out: dict[str, object] = {"PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
           "PYTORCH_ALLOC_CONF": os.environ.get("PYTORCH_ALLOC_CONF"),
           "PYTORCH_NO_CUDA_MEMORY_CACHING": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING")}
    try:
        out["backend"] = torch.cuda.get_allocator_backend()
    except Exception:
        out["backend"] = None
    return out


def cuda_ready(out: "Out") -> None:
    step("import torch")
    import torch

    out["version"] = torch.__version__
    out["cuda"] = torch.version.cuda
    step("a tensor on cuda:0")
    torch.zeros(1, device="cuda")  # raises what a user's code would meet (a CPU build: AssertionError)
    out["gpu_name"] = torch.cuda.get_device_name(0)


def test_oom(out: "Out", max_blocks: int = 100000) -> None:
    cuda_ready(out)
    import torch

    out["alloc"] = alloc_settings(torch)
    free0, total = torch.cuda.mem_get_info()
    out["mem_get_info_before"] = [free0, total]
    chunk = max(64 * MIB, free0 // 64 // (2 * MIB) * (2 * MIB))
    step("filling the GPU through the caching allocator until torch.cuda.OutOfMemoryError")
    blocks: list[object] = []
    try:
        while len(blocks) < max_blocks:
            try:
                blocks.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
            except Exception as exc:
                if not is_oom(torch, exc):
                    raise
                if chunk <= 2 * MIB:
                    out["oom"] = error_of(exc, "torch.empty")
                    out["oom_is_OutOfMemoryError"] = type(exc).__name__ == "OutOfMemoryError"
                    break
                chunk //= 2
        out["allocated_at_oom"] = torch.cuda.memory_allocated()
        out["reserved_at_oom"] = torch.cuda.memory_reserved()
        out["mem_get_info_full"] = list(torch.cuda.mem_get_info())
    finally:
        del blocks[:]
    step("releasing: del, then torch.cuda.empty_cache()")
    out["reserved_after_del"] = torch.cuda.memory_reserved()
    torch.cuda.empty_cache()
    out["reserved_after_empty_cache"] = torch.cuda.memory_reserved()
    out["mem_get_info_after"] = list(torch.cuda.mem_get_info())
    step("after the OOM: a matrix product on the GPU")
    a = torch.ones(256, 256, device="cuda")
    out["recovered"] = bool(((a @ a) == 256).all().item())


def test_batch(out: "Out", spec: str, cap: int) -> None:
    cuda_ready(out)
    import torch

    out["alloc"] = alloc_settings(torch)
    step("importing " + spec)
    import importlib

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module, _, factory = spec.partition(":")
    made = getattr(importlib.import_module(module), factory)()
    model, make_batch = made
    model = model.cuda().train()
    out["parameters"] = sum(p.numel() for p in model.parameters())
    memory: list[dict[str, object]] = []

    def try_batch(n: int) -> bool:
        step(f"batch {n}: forward and backward")
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        inputs = None
        try:
            inputs = make_batch(n)
            inputs = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
            inputs = [x.cuda() if hasattr(x, "cuda") else x for x in inputs]
            result = model(*inputs)
            tensors = result if isinstance(result, (tuple, list)) else [result]
            loss = sum(t.float().mean() for t in tensors if hasattr(t, "float"))
            loss.backward()
            torch.cuda.synchronize()
            ok = True
        except Exception as exc:
            if not is_oom(torch, exc):
                raise
            ok = False
        finally:
            model.zero_grad(set_to_none=True)
            del inputs
        memory.append({"batch": n, "fits": ok, "peak_allocated": torch.cuda.max_memory_allocated(),
                       "reserved": torch.cuda.memory_reserved()})
        emit("framework", batch_memory=memory)
        return ok

    out["largest_batch"], _tried = largest_fitting(try_batch, cap)
    out["cap"] = cap
    out["trials"] = memory


# --- NCCL all-reduce --------------------------------------------------------------------------------


def test_allreduce(out: "Out", max_mib: int = 256, timeout: float = 60.0) -> None:
    step("import torch")
    import torch

    out["version"] = torch.__version__
    out["cuda"] = torch.version.cuda
    step("torch.cuda.device_count()")
    n = torch.cuda.device_count()
    out["device_count"] = n
    if n < 2:
        why = " (a CPU-only build)" if torch.version.cuda is None else ""
        raise RuntimeError(f"the NCCL all-reduce needs ≥2 CUDA GPUs; torch {torch.__version__} sees {n}{why}")
    cuda_ready(out)
    import torch.distributed as dist

    if not dist.is_nccl_available():
        raise RuntimeError("this torch build has no NCCL (torch.distributed.is_nccl_available() is False)")
    version = torch.cuda.nccl.version()  # (2, 28, 9); older torch answers NCCL_VERSION_CODE (2708): decoded later
    out["nccl"] = ".".join(str(v) for v in version) if isinstance(version, (tuple, list)) else str(version)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    step(f"NCCL all-reduce: {n} processes, one per GPU")
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "allreduce-worker", str(r), str(n),
                               str(port), str(max_mib)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for r in range(n)]
    deadline = time.time() + timeout
    outputs: list[tuple[int, str, str]] = []  # (exit status, stdout, stderr) of each worker, decoded
    try:
        for p in procs:
            raw_out, raw_err = p.communicate(timeout=max(1.0, deadline - time.time()))
            outputs.append((p.returncode, raw_out.decode("utf-8", "replace"), raw_err.decode("utf-8", "replace")))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        raise RuntimeError(f"the NCCL all-reduce did not finish within {timeout:g} s (a hung collective: a peer "
                           "path or NCCL transport that never delivers)") from None
    for rank, (rc, _stdout, stderr) in enumerate(outputs):
        if rc != 0:
            raise RuntimeError(f"NCCL worker {rank} exited {rc}: {stderr.strip()[-2000:]}")
    for line in outputs[0][1].splitlines():
        if line.startswith(MARKER):
            out["allreduce"] = json.loads(line[len(MARKER):])


def allreduce_worker(rank: int, world: int, port: int, max_mib: int) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    results: list[dict[str, object]] = []
    size = MIB
    while size <= max_mib * MIB:
        x = torch.ones(size // 4, device="cuda")
        for _ in range(2):
            dist.all_reduce(x)
        x.fill_(1.0)
        torch.cuda.synchronize()
        iters = 5
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        seconds = (time.perf_counter() - t0) / iters
        want = float(world ** iters)  # each all-reduce multiplies every element by the world size
        algbw = size / seconds / 1e9
        results.append({"bytes": size, "us": seconds * 1e6, "algbw": algbw, "busbw": algbw * 2 * (world - 1) / world,
                        "correct": bool((x == want).all().item())})
        size *= 4
    dist.destroy_process_group()
    if rank == 0:
        sys.stdout.write(MARKER + json.dumps({"world": world, "sizes": results}) + "\n")


def main(argv: "list[str]") -> int:
    mode = argv[0] if argv else "oom"
    if mode == "allreduce-worker":
        allreduce_worker(int(argv[1]), int(argv[2]), int(argv[3]), int(argv[4]))
        return 0
    out: Out = {"mode": mode, "python": sys.executable}
    where = ["starting"]
    orig_step = step

    def tracking(text: str) -> None:
        where[0] = text
        orig_step(text)

    globals()["step"] = tracking
    cap = argv[2] if mode == "batch" and len(argv) > 2 else "1"
    PROGRESS[1] = planned_steps(mode, int(cap) if 0 < len(cap) < 10 and all(c in "0123456789" for c in cap) else 1)
    try:
        import importlib.util

        out["installed"] = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        out["installed"] = False
    if out["installed"]:
        try:
            if mode == "oom":
                test_oom(out)
            elif mode == "batch":
                test_batch(out, argv[1], int(argv[2]))
            elif mode == "allreduce":
                test_allreduce(out, int(argv[1]) if len(argv) > 1 else 256,
                               float(argv[2]) if len(argv) > 2 else 60.0)
            out["ok"] = True
        except BaseException as exc:  # an AssertionError or SystemExit from a framework is an answer too
            out["ok"] = False
            out["error"] = error_of(exc, where[0])
    emit("framework", **out)
    emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
