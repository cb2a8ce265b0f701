"""`gpu-doctor smoke` and `gpu-doctor oom`: run something on the GPU and report what happened.

Both print the same report as `check` (text or JSON, schema gpu-doctor.report/v1, the findings of the
test instead of the checks' ones, plus an ``active`` key with the raw measurements) and show progress
on stderr. Exit codes as everywhere: 1 when a finding fails (with --strict: or warns).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from doctor.cli import EXIT_FAIL, EXIT_OK, UsageError, positive_seconds

FRAMEWORKS = ("torch", "tensorflow", "jax", "cupy")


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    if name == "smoke":
        p.description = (
            "Run a smoke test on each GPU through the CUDA driver API, no framework needed: create a context, "
            "JIT-compile PTX kernels, copy data in, run them, copy back and check every element; measure host↔device "
            "and device memory bandwidth and FP32 throughput against the GPU's specification; compare ECC counters "
            "and slowdown reasons before and after. With --framework, run a matrix product (and a cuDNN "
            "convolution / cuBLAS call) in each framework of the target Python environment instead.")
    else:
        p.description = (
            "Find the largest single allocation and the total memory a program can really get on each GPU, "
            "explain the gap to what NVML reports, and prove the context still works after running out of memory. "
            "Takes all free memory of the GPU for a few seconds: refuses to run where other processes compute, "
            "unless --force.")
    p.add_argument("--gpu", default="all", metavar="N|all",
                   help="the GPU to test: its CUDA number (PCI order, like nvidia-smi, unless CUDA_DEVICE_ORDER is "
                   "set; among the CUDA_VISIBLE_DEVICES ones), or all (default)")
    out = p.add_argument_group("output")
    out.add_argument("--format", choices=("text", "json"), default=None, help="text (default) or json")
    out.add_argument("--json", action="store_true", help="the same as --format json")
    out.add_argument("-v", "--verbose", action="store_true", help="evidence and sources under each line")
    out.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    out.add_argument("-q", "--quiet", action="store_true", help="no progress line on stderr")
    out.add_argument("--snapshot", metavar="FILE", help="also write the facts snapshot, with what the test measured "
                     "(facts `active`), to FILE: `gpu-doctor check --facts FILE` judges it again anywhere")
    p.add_argument("--timeout", type=positive_seconds, default=None, metavar="SEC",
                   help="watchdog: a step that reports nothing for SEC seconds is a hang (gpu.hang), and the test "
                   "process is killed (default: 30; with --framework the limit of each framework's run, default "
                   "120)")
    if name == "smoke":
        p.add_argument("--level", type=int, choices=(1, 3), default=1,
                       help="1 (default): the driver-API smoke test; 3: also hand a long stress test to gpu-burn, "
                       "DCGM's `dcgmi diag` and nccl-tests' all_reduce_perf when they are installed (their "
                       "verdicts are read from their output: gpu-burn exits 0 even for a FAULTY GPU)")
        p.add_argument("--burn-seconds", type=int, default=60, metavar="SEC", help="with --level 3: gpu-burn's "
                       "duration (default 60)")
        p.add_argument("--dcgm-seconds", type=int, default=1800, metavar="SEC",
                       help="with --level 3: the time budget of DCGM's `dcgmi diag` (when a DCGM host engine "
                       "runs), which also picks its level: >=1200 -r 3 (default 1800), >=300 -r 2, less -r 1")
        p.add_argument("--size-mib", type=int, default=256, metavar="MIB",
                       help="buffer size of the bandwidth measurements (default 256; at most an eighth of free memory)")
        fw = p.add_argument_group("frameworks")
        fw.add_argument("--framework", choices=(*FRAMEWORKS, "all"),
                        help="test this framework (or all installed ones) in the target Python environment instead")
        fw.add_argument("--nccl", action="store_true",
                        help="run an NCCL all-reduce across all GPUs through torch.distributed in the target "
                        "environment instead (one process per GPU) and report its bus bandwidth")
        fw.add_argument("--python", metavar="PATH", action="append", default=[],
                        help="with --framework / --nccl: the interpreter or environment directory (repeatable; "
                        "default: the active environment, as `check` finds it)")
    else:
        p.add_argument("--force", action="store_true",
                       help="run even where other processes use the GPU (they may fail with out-of-memory meanwhile)")
        fw = p.add_argument_group("torch")
        fw.add_argument("--framework", choices=("torch",),
                        help="probe through torch's caching allocator in the target environment instead: "
                        "OutOfMemoryError, mem_get_info, recovery after empty_cache, PYTORCH_CUDA_ALLOC_CONF")
        fw.add_argument("--batch-probe", metavar="MODULE:FACTORY",
                        help="find the largest batch size that fits for your model: FACTORY() returns (model, "
                        "make_batch), make_batch(n) the input for a batch of n; a forward and backward pass per try")
        fw.add_argument("--batch-cap", type=int, default=4096, metavar="N",
                        help="with --batch-probe: the largest batch size tried (default 4096)")
        fw.add_argument("--python", metavar="PATH", action="append", default=[],
                        help="with --framework / --batch-probe: the interpreter or environment directory")


def run(name: str, args: argparse.Namespace) -> int:
    gpus = _gpus(args.gpu)
    torch_mode = _torch_mode(name, args)
    if torch_mode:
        return _report(name, args, _torch_events(args, torch_mode))
    if name == "smoke" and args.framework:
        if args.gpu != "all":
            raise UsageError("--gpu applies to the driver smoke test; with --framework each framework uses its GPU 0")
        return _report(name, args, _framework_events(args))
    if args.python:
        raise UsageError("--python selects the environment for --framework")
    if name == "smoke" and not 1 <= args.size_mib <= 65536:
        raise UsageError(f"--size-mib {args.size_mib}: between 1 and 65536")
    from doctor.active.gpu import DEFAULT_TIMEOUT, Options, oom_events, smoke_events

    opts = Options(gpus=gpus, timeout=args.timeout or DEFAULT_TIMEOUT, force=getattr(args, "force", False),
                   size_mib=getattr(args, "size_mib", 256))
    if name == "oom":
        return _report(name, args, oom_events(opts))
    if args.level == 3:
        from doctor.active.dcgm import dcgm_events
        from doctor.active.heavy import burn_events
        from doctor.active.nccltests import nccl_events
        from doctor.host import Host

        if not 1 <= args.burn_seconds <= 86400:
            raise UsageError(f"--burn-seconds {args.burn_seconds}: between 1 and 86400")
        if not 1 <= args.dcgm_seconds <= 86400:
            raise UsageError(f"--dcgm-seconds {args.dcgm_seconds}: between 1 and 86400")

        def nccl(results: dict[str, Any]) -> Any:  # after the smoke test: its GPU count and topology
            mg = (results.get("global") or {}).get("multi_gpu")
            return nccl_events(Host(), len(results.get("gpus") or []), mg)

        return _report(name, args, _chain(smoke_events(opts), burn_events(Host(), args.burn_seconds),
                                          dcgm_events(Host(), args.dcgm_seconds), nccl))
    return _report(name, args, smoke_events(opts))


def _chain(*tests: Any) -> Any:
    """Several tests as one: their progress in turn, then one outcome with all the findings. A callable is
    called with the results so far and returns the test (a later test that depends on an earlier one)."""
    from doctor.active.events import Outcome
    from doctor.model.facts_active import ActiveFacts
    from doctor.model.severity import status
    from doctor.pipeline import judged

    findings: list[Any] = []
    results: dict[str, Any] = {}
    active = ActiveFacts()
    summaries = []
    for test in tests:
        for ev in judged(test(results) if callable(test) else test):
            if isinstance(ev, Outcome):
                findings += ev.findings
                results.update(ev.results)
                active = active.merged(ev.active)
                summaries.append(ev.summary)
            else:
                yield ev
    yield Outcome(status(f.severity for f in findings), "; ".join(summaries), findings, results, active)


def _gpus(text: str) -> Any:
    if text == "all":
        return "all"
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"--gpu {text!r}: a GPU number (0, 1, …) or all") from None
    if n < 0:
        raise UsageError(f"--gpu {text}: GPU numbers start at 0")
    return [n]


def _torch_mode(name: str, args: argparse.Namespace) -> str | None:
    if name == "smoke":
        if getattr(args, "nccl", False) and args.framework:
            raise UsageError("--nccl and --framework are separate tests: run them one after the other")
        return "allreduce" if getattr(args, "nccl", False) else None
    if args.batch_probe:
        if ":" not in args.batch_probe or not all(args.batch_probe.partition(":")[::2]):
            raise UsageError(f"--batch-probe {args.batch_probe!r}: MODULE:FACTORY (e.g. mymodel:make)")
        if not 1 <= args.batch_cap <= 1 << 24:
            raise UsageError(f"--batch-cap {args.batch_cap}: between 1 and 16777216")
        return "batch"
    return "oom" if args.framework == "torch" else None


def _targets(args: argparse.Namespace) -> list[str]:
    from doctor.host import Host
    from doctor.probes.pyenvs import target_pythons

    host = Host()
    for p in args.python:
        if not host.path(p).exists():
            raise UsageError(f"--python {p}: no such interpreter or environment")
    targets = target_pythons(host, args.python)
    if not targets:
        raise UsageError("no Python environment to test: give --python PATH")
    return [exe for exe, _origin in targets]


def _torch_events(args: argparse.Namespace, mode: str) -> Any:
    from doctor.active.torchmem import DEFAULT_TIMEOUT, torch_events

    if args.gpu != "all":
        raise UsageError("--gpu applies to the driver tests; torch uses its GPU 0 (set CUDA_VISIBLE_DEVICES)")
    return torch_events(_targets(args), mode, getattr(args, "batch_probe", None), getattr(args, "batch_cap", 4096),
                        args.timeout or DEFAULT_TIMEOUT)


def _framework_events(args: argparse.Namespace) -> Any:
    from doctor.active.frameworks import DEFAULT_TIMEOUT, framework_events
    from doctor.host import Host
    from doctor.probes.pyenvs import target_pythons

    host = Host()
    for p in args.python:
        if not host.path(p).exists():
            raise UsageError(f"--python {p}: no such interpreter or environment")
    targets = target_pythons(host, args.python)
    if not targets:
        raise UsageError("no Python environment to test: give --python PATH")
    which = FRAMEWORKS if args.framework == "all" else (args.framework,)
    return framework_events([exe for exe, _origin in targets], which, args.timeout or DEFAULT_TIMEOUT,
                            only_installed=args.framework == "all")


def _report(name: str, args: argparse.Namespace, events: Any) -> int:
    from doctor.active.events import StderrProgress, last_outcome
    from doctor.host import Host
    from doctor.pipeline import judged
    from doctor.pipeline import render as render_report
    from doctor.probes import collect

    outcome = last_outcome(judged(events), StderrProgress(quiet=args.quiet))
    # The facts go into the report so it is the same document as `check --json`; they are collected after
    # the test, so a GPU the test broke shows as broken. What the test measured is recorded in them.
    # The header names the interpreter(s) the test ran in: the --python given, not the default one.
    facts = with_active(collect(Host(timeout=5.0), list(getattr(args, "python", None) or []) or None), outcome)
    report = active_report(facts)
    if getattr(args, "snapshot", None):
        _write_snapshot(args.snapshot, facts)
    fmt = "json" if args.json else (args.format or "text")
    if fmt == "json":
        import json

        doc = report.to_dict()
        doc["active"] = {"test": name if not getattr(args, "framework", None) else "smoke --framework",
                         "summary": outcome.summary, "results": outcome.results}
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(render_report(report, fmt, verbose=args.verbose, strict=args.strict))
    if report.status == "fail" or (args.strict and report.status == "warn"):
        return EXIT_FAIL
    return EXIT_OK


def with_active(facts: Any, outcome: Any) -> Any:
    """The facts with what the test measured (an Outcome's ``active``) on top of what they recorded before."""
    from dataclasses import replace
    from datetime import datetime, timezone

    from doctor.model.facts_active import ActiveFacts

    if outcome.active is None:
        return facts
    stamp = ActiveFacts(recorded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return replace(facts, active=(facts.active or ActiveFacts()).merged(stamp.merged(outcome.active)))


def active_report(facts: Any) -> Any:
    """The report of the active-test checks on these facts: the same findings `check --facts` gives for them.
    Checks with nothing recorded (not applicable) are left out of the list."""
    from dataclasses import replace

    from doctor.checks.active import CHECKS
    from doctor.pipeline import diagnose

    full = diagnose(facts, checks=list(CHECKS))
    ran = [c for c in full.checks if c.status != "not_applicable"]
    return replace(full, checks=ran)


def _write_snapshot(path: str, facts: Any) -> None:
    from pathlib import Path

    text = facts.to_json()
    try:
        Path(path).write_text(text)
    except OSError as exc:
        raise UsageError(f"--snapshot {path}: {exc.strerror or exc}") from None
    print(f"gpu-doctor: wrote {path} ({len(text)} bytes)", file=sys.stderr)


def record(facts: Any, smoke: bool, oom: bool, timeout: float | None = None, quiet: bool = False) -> Any:
    """`gpu-doctor snapshot --smoke / --oom`: run the driver smoke test and/or the OOM probe on every GPU and
    record what they measured in the snapshot (facts ``active``), nothing judged."""
    from doctor.active.events import StderrProgress, last_outcome
    from doctor.active.gpu import DEFAULT_TIMEOUT, Options, oom_events, smoke_events

    opts = Options(timeout=timeout or DEFAULT_TIMEOUT)
    for wanted, events in ((smoke, smoke_events), (oom, oom_events)):
        if wanted:
            facts = with_active(facts, last_outcome(events(opts), StderrProgress(quiet=quiet)))
    return facts
