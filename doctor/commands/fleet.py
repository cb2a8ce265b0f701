"""`gpu-doctor fleet FILE…|DIR`: many nodes' reports in one view, with the nodes that differ.

Node names: the file name without ``.json`` (``reports/gpu-017.json`` → ``gpu-017``), unless the
facts carry the node's own host name (no v1 probe records one). Two files that would give the same
name are both shown by their path instead (``reports/rack1/gpu-017``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from dataclasses import replace
from typing import Any, TextIO

from doctor.cli import EXIT_FAIL, EXIT_OK, UsageError
from doctor.fleet import FileError, Fleet, FleetInputError, Node, aggregate, read_node
from doctor.safeio import display, megabytes, read_file

REPORT_CAP = 64 * 1024 * 1024  # a report of 8 GPUs and 3 environments is ~100 kB

# Below this many files one process is as fast as two workers (measured on 2 cores: even at ~600).
PARALLEL_MIN = 1000
MARKS = {"ok": "✓", "warn": "!", "fail": "✗"}
MD_MARKS = {"ok": "✅", "warn": "⚠️", "fail": "❌"}


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    p.description = ("Aggregate the reports of many nodes (`gpu-doctor check --json`, or facts snapshots, which are "
                     "diagnosed here): one row per node, the nodes grouped by identical problem, and the outliers — "
                     "a driver, CUDA toolkit or framework build that differs from the majority, fewer GPUs than the "
                     "majority, a GPU with ECC errors or pending retirement, a PCIe link narrower than it can be. "
                     "A node's name is its file name without .json.")
    p.epilog = ("Exit codes: 0 every node passes; 1 a node fails, a file is not a readable report, or a GPU is "
                "faulty (--strict: or any warning or outlier); 2 usage error.")
    p.add_argument("paths", nargs="+", metavar="FILE|DIR",
                   help="report or snapshot files, or directories searched recursively for *.json")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_const", const="json", dest="format", default="text",
                     help="print the fleet as JSON (same as --format json)")
    out.add_argument("--format", choices=("text", "json", "markdown", "prometheus"), default="text",
                     help="text (default), json, markdown (for an issue or a wiki page), or prometheus (metrics "
                     "gpu_doctor_node_*, one series per node)")
    p.add_argument("--output", metavar="PATH", help="write to PATH instead of standard output: atomically over a "
                   "regular file (for prometheus: a node_exporter textfile-collector file), through a character "
                   "device or a FIFO with a reader; a symlink is followed, a block device, socket or unread FIFO "
                   "refused")
    p.add_argument("--strict", action="store_true", help="exit 1 on warnings and outliers too")
    p.add_argument("-j", "--jobs", type=int, default=0, metavar="N",
                   help=f"processes reading the files (default: one per CPU from {PARALLEL_MIN} files on)")


def _write(fleet: Fleet, fmt: str, output: str | None) -> None:
    """--format prometheus and --output: prometheus_client's exposition, or any format, written atomically."""
    from doctor.render.files import OutputError, write_output

    try:
        if fmt == "prometheus":
            from doctor.render.prometheus import render_fleet, write_textfile

            if output is None:
                sys.stdout.write(render_fleet(fleet))
                return
            write_textfile(fleet, output, fleet=True)
        else:
            text = json.dumps(fleet.to_dict(), indent=2) + "\n" if fmt == "json" else (
                render_markdown(fleet) if fmt == "markdown" else render_text(fleet, colour=False))
            write_output(output or "-", text)
    except OutputError as exc:
        raise UsageError(f"--output {exc}") from None
    if output and output != "-":
        print(f"gpu-doctor: wrote {output}", file=sys.stderr)


def run(name: str, args: argparse.Namespace) -> int:
    if args.jobs < 0:
        raise UsageError(f"--jobs {args.jobs}: must be 0 (automatic) or more")
    fleet = load_fleet(args.paths, jobs=args.jobs)
    if getattr(args, "output", None) or args.format == "prometheus":
        _write(fleet, args.format, getattr(args, "output", None))
    elif args.format == "json":
        sys.stdout.write(json.dumps(fleet.to_dict(), indent=2) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(render_markdown(fleet))
    else:
        sys.stdout.write(render_text(fleet, colour=_use_colour(sys.stdout)))
    if fleet.status == "fail" or (args.strict and fleet.status == "warn"):
        return EXIT_FAIL
    return EXIT_OK


# --- finding and reading the files ----------------------------------------------------------------


def load_fleet(paths: list[str], jobs: int = 0) -> Fleet:
    files = discover(paths)
    results = read_files(files, jobs)
    nodes = [r for r in results if isinstance(r, Node)]
    errors = [r for r in results if isinstance(r, FileError)]
    return aggregate(_unique_names(nodes), errors)


def discover(paths: list[str]) -> list[str]:
    files: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found: list[str] = []
            unlisted: list[str] = []
            # A directory that cannot be listed is kept as an entry: reading it fails, so it is named in the
            # errors and fails the run, instead of its reports silently missing from the fleet.
            def unreadable(exc: OSError, into: list[str] = unlisted) -> None:
                into.append(exc.filename)

            for top, dirs, names in os.walk(p, onerror=unreadable):
                dirs.sort()
                found += [os.path.join(top, n) for n in names if n.endswith(".json")]
            found += unlisted
            if not found:
                raise UsageError(f"{p}: no *.json file in this directory")
            files += sorted(found)
        elif os.path.exists(p) or os.path.islink(p):  # a dangling link is named as unreadable, not skipped
            files.append(p)
        else:
            raise UsageError(f"{p}: no such file or directory")
    return list(dict.fromkeys(files))


def node_name(file: str) -> str:
    base = os.path.basename(file)
    return base[:-5] if base.endswith(".json") else base


def read_files(files: list[str], jobs: int = 0) -> list[Node | FileError]:
    """Read every file, in the order given; a process per CPU for large fleets (``jobs`` 0: automatic).

    The workers never outlive the doctor: each asks the kernel to kill it when its parent dies (so after a
    ``kill -9`` of the doctor no worker keeps the caller's standard output open, and ``$(gpu-doctor fleet …)``
    or a CI log pipe ends), and on SIGINT / SIGTERM / SIGHUP — or any other way out of the pool — the doctor
    kills the workers before it leaves, instead of waiting for the chunks they are reading."""
    if jobs == 0:
        jobs = (os.cpu_count() or 1) if len(files) >= PARALLEL_MIN else 1
    jobs = min(jobs, len(files) or 1)
    if jobs == 1:
        return read_chunk(files)
    import threading
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    from multiprocessing import active_children, get_all_start_methods, get_context

    size = -(-len(files) // (jobs * 2))  # two chunks per worker evens out a slow disk or a few snapshots
    chunks = [files[i:i + size] for i in range(0, len(files), size)]
    # fork is the cheapest start and re-imports nothing, but is unsafe once the process has threads;
    # forkserver then, whose workers re-import the main module (which fails under `python -`).
    method = "fork" if threading.active_count() == 1 and "fork" in get_all_start_methods() else "forkserver"
    before = {p.pid for p in active_children()}
    try:
        # A forkserver's workers are the server's children, not ours: the parent check is for fork only.
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=get_context(method), initializer=_worker_start,
                                   initargs=(os.getpid() if method == "fork" else None,))
    except OSError:
        return read_chunk(files)
    done = False
    try:
        out = [r for part in pool.map(read_chunk, chunks) for r in part]
        done = True
        return out
    except (BrokenProcessPool, OSError):  # no workers here: one process reads the same, only slower
        return read_chunk(files)
    finally:
        if not done:  # a signal, an error, a broken pool: the workers go now, whatever they were reading
            for p in active_children():
                if p.pid not in before:
                    p.kill()
        pool.shutdown(wait=done, cancel_futures=True)


def _worker_start(parent: int | None) -> None:
    """In each worker: die with the parent, and leave signals to it."""
    import signal

    # A Ctrl-C on the terminal reaches the whole process group: the doctor decides, and kills the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)
    _die_with_parent()
    if parent is not None and os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _die_with_parent() -> None:
    """prctl(PR_SET_PDEATHSIG, SIGKILL) on Linux: the kernel kills this process when its parent exits."""
    import ctypes
    import signal

    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG (linux/prctl.h)
    except (OSError, AttributeError):
        pass


def read_chunk(files: list[str]) -> list[Node | FileError]:
    """Each file as a node, or as a named error: a FIFO, a device, an oversized or corrupt file fails the run."""
    out: list[Node | FileError] = []
    for file in files:
        try:
            data, more = read_file(file, REPORT_CAP)
            if more:
                raise FleetInputError(f"larger than {megabytes(REPORT_CAP)}: not a gpu-doctor report")
            out.append(read_node(data.decode("utf-8", errors="replace"), node_name(file), file))
        except OSError as exc:
            out.append(FileError(file, f"cannot read: {exc.strerror or exc}"))
        except (FleetInputError, RecursionError) as exc:
            out.append(FileError(file, str(exc) or "nested too deeply"))
    return out


def _unique_names(nodes: list[Node]) -> list[Node]:
    seen = Counter(n.name for n in nodes)
    return [replace(n, name=n.file[:-5] if n.file.endswith(".json") else n.file) if seen[n.name] > 1 else n
            for n in nodes]


# --- rendering -----------------------------------------------------------------------------------


def _use_colour(stream: TextIO) -> bool:
    return "NO_COLOR" not in os.environ and hasattr(stream, "isatty") and stream.isatty()


def _paint(mark: str, severity: str, colour: bool) -> str:
    return f"\x1b[{ {'ok': '32', 'warn': '33', 'fail': '31'}[severity]}m{mark}\x1b[0m" if colour else mark


def gpus_cell(n: Node) -> str:
    if not n.gpu_count:
        return "none"
    model = (n.gpu_model or "").removeprefix("NVIDIA ")
    return f"{n.gpu_count}× {model}" if model else str(n.gpu_count)


def row(n: Node) -> list[str]:
    codes = list(dict.fromkeys(p.code for p in n.problems))
    return [n.name, n.status, n.driver or "none", n.cuda_driver_api or "?", n.toolkit or "none",
            n.framework or "none", gpus_cell(n), ", ".join(codes)]


HEADERS = ["NODE", "STATUS", "DRIVER", "CUDA API", "TOOLKIT", "FRAMEWORK", "GPUS", "PROBLEMS"]


def summary_line(fleet: Fleet) -> str:
    c = fleet.counts()
    verdict = {"ok": "READY", "warn": "READY, with warnings", "fail": "NOT READY"}[fleet.status]
    parts = [f"{c['fail']} of {c['nodes']} node(s) failing, {c['warn']} with warnings, {c['ok']} ok"]
    if c["outliers"]:
        parts.append(f"{c['outliers']} outlier(s)")
    if c["errors"]:
        parts.append(f"{c['errors']} unreadable file(s)")
    return f"{verdict}: " + "; ".join(parts)


def _wrap(names: tuple[str, ...] | list[str], indent: str, width: int = 100) -> list[str]:
    lines, line = [], ""
    for name in names:
        if line and len(indent) + len(line) + len(name) + 2 > width:
            lines.append(indent + line + ",")
            line = name
        else:
            line = f"{line}, {name}" if line else name
    return [*lines, indent + line]


def render_text(fleet: Fleet, colour: bool = False) -> str:
    """The fleet for a terminal: every value from the files passes :func:`display`."""
    rows = [[display(c, line=True) for c in row(n)] for n in fleet.nodes]
    for r in rows:
        r[1] = f"{MARKS[r[1]]} {r[1]}"
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(HEADERS)]
    lines = [f"gpu-doctor fleet — {len(fleet.nodes)} node(s)", ""]
    if rows:
        lines.append("  ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True)).rstrip())
        for n, r in zip(fleet.nodes, rows, strict=True):
            cells = [c.ljust(w) for c, w in zip(r, widths, strict=True)]
            cells[1] = _paint(MARKS[n.status], n.status, colour) + cells[1][1:]
            lines.append("  ".join(cells).rstrip())
        lines.append("")
    if fleet.groups:
        lines += ["Problems — nodes grouped by the same failing/warning findings", ""]
        for g in fleet.groups:
            lines.append(f"  {_paint(MARKS[g.severity], g.severity, colour)} {len(g.nodes)} node(s):")
            lines += _wrap(tuple(display(n, line=True) for n in g.nodes), "      ")
            lines += [f"      {_paint(MARKS[p.severity], p.severity, colour)} {display(p.title, line=True)}  "
                      f"[{display(p.code, line=True)}]" for p in g.problems]
            lines.append("")
    if fleet.outliers:
        lines.append("Outliers")
        for o in fleet.outliers:
            mark = _paint(MARKS[o.severity], o.severity, colour)
            if len(o.nodes) == 1:
                lines.append(f"  {mark} {display(o.nodes[0], line=True)}: {display(o.title, line=True)}")
            elif o.value is None:  # a split with no majority: its title names every variant and its nodes
                lines.append(f"  {mark} {display(o.kind, line=True)}: {display(o.title, line=True)}")
            else:
                lines.append(f"  {mark} {display(o.title, line=True)}:")
                lines += _wrap(tuple(display(n, line=True) for n in o.nodes), "      ")
        lines.append("")
    if fleet.errors:
        lines.append("Files that are not readable reports")
        lines += [f"  {_paint(MARKS['fail'], 'fail', colour)} {display(e.file, line=True)}: "
                  f"{display(e.reason, line=True)}" for e in fleet.errors]
        lines.append("")
    lines.append(summary_line(fleet))
    return "\n".join(lines) + "\n"


def _md(text: Any) -> str:
    flat = str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return display(flat.replace("<", "&lt;").replace(">", "&gt;").replace("`", "'"), line=True)


def render_markdown(fleet: Fleet) -> str:
    lines = [f"## gpu-doctor fleet: {summary_line(fleet)}", ""]
    if fleet.nodes:
        lines += ["| " + " | ".join(h.lower() for h in HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
        for n in fleet.nodes:
            cells = [_md(c) for c in row(n)]
            cells[1] = f"{MD_MARKS[n.status]} {cells[1]}"
            cells[-1] = ", ".join(f"`{_md(c)}`" for c in dict.fromkeys(p.code for p in n.problems))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    if fleet.groups:
        lines += ["### Problems (nodes grouped by the same findings)", ""]
        for g in fleet.groups:
            lines.append(f"- {MD_MARKS[g.severity]} **{len(g.nodes)} node(s)**: {_md(', '.join(g.nodes))}")
            lines += [f"  - {MD_MARKS[p.severity]} {_md(p.title)} (`{_md(p.code)}`)" for p in g.problems]
        lines.append("")
    if fleet.outliers:
        lines += ["### Outliers", ""]
        lines += [f"- {MD_MARKS[o.severity]} **{_md(o.nodes[0])}**: {_md(o.title)}" if len(o.nodes) == 1 else
                  f"- {MD_MARKS[o.severity]} {_md(o.kind)}: {_md(o.title)}" if o.value is None else  # a split
                  f"- {MD_MARKS[o.severity]} {_md(o.title)}: {_md(', '.join(o.nodes))}" for o in fleet.outliers]
        lines.append("")
    if fleet.errors:
        lines += ["### Files that are not readable reports", ""]
        lines += [f"- `{_md(e.file)}`: {_md(e.reason)}" for e in fleet.errors]
        lines.append("")
    return "\n".join(lines)
