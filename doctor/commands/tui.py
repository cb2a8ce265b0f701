"""`gpu-doctor tui` and `gpu-doctor demo`: the interactive view of this machine, a snapshot, or the examples.

Textual is imported only when the TUI starts, so `--help` and every other command stay free of it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from doctor.cli import EXIT_OK, UsageError
from doctor.commands.check import add_probe_options

if TYPE_CHECKING:
    from doctor.model.live import GpuSample
    from doctor.tui.model import Source


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    if name == "tui":
        p.description = ("Open the interactive view of this machine: the findings by area with their evidence and "
                         "fix, the GPUs (refreshed every second), exports. `gpu-doctor` alone on a terminal opens it "
                         "too. Press ? inside for the keys.")
        p.add_argument("--facts", metavar="FILE", help="open this snapshot (from `gpu-doctor snapshot`) instead of "
                       "probing this machine")
        add_probe_options(p)
    else:
        from doctor.examples import EXAMPLES

        p.description = ("Open the TUI on bundled snapshots of real-world hosts (no GPU needed): a CUDA 12 PyTorch on "
                         "an R470 driver, an RTX 5090 with a cu124 PyTorch, a driver/library mismatch, a healthy "
                         "8×H100 node and more. n / p switch between them, l lists them.")
        p.add_argument("example", nargs="?", choices=[e.name for e in EXAMPLES], metavar="EXAMPLE",
                       help="start on this example (see --list)")
        p.add_argument("--list", action="store_true", help="list the examples and exit")


def run(name: str, args: argparse.Namespace) -> int:
    if name == "demo" and args.list:
        from doctor.examples import EXAMPLES

        for e in EXAMPLES:
            print(f"{e.name:<28} {e.title}: {e.description}")
        return EXIT_OK
    sources, index, sampler = demo_sources(args) if name == "demo" else tui_sources(args)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(f"`gpu-doctor {name}` needs a terminal; `gpu-doctor check` prints the report instead")
    import gc

    # Start-up allocates much and frees little (Textual's import, the widgets, the first frame): the cyclic garbage
    # collector would only walk it again and again. It is off until the first frame is on screen (issue 23).
    gc.disable()
    # Textual hands each frame to a writer thread, which waits for the interpreter while the main thread goes on
    # (the next messages, the diagnosis): by default up to 5 ms, the first frame's included. While the app runs
    # the threads take turns every millisecond: each frame reaches the terminal ~1 ms after it is drawn.
    switch = sys.getswitchinterval()
    sys.setswitchinterval(min(switch, SWITCH_INTERVAL))
    try:
        from doctor.tui.app import DoctorApp

        app = DoctorApp(sources, index=index, gpu_sampler=sampler, when_shown=gc.enable)
        end_on_hangup(app)
        run_app(app)
    finally:
        gc.enable()
        sys.setswitchinterval(switch)
    if app.return_code == HANGUP_EXIT or terminal_hung_up():
        from doctor.cli import detach_from_terminal

        detach_from_terminal()
        return HANGUP_EXIT
    return app.return_code or EXIT_OK


HANGUP_EXIT = 129  # 128 + SIGHUP, as the shell reports a program its hang-up ended
SWITCH_INTERVAL = 0.001  # seconds: the interpreter's thread switch interval while the TUI runs (Python's: 0.005)


def end_on_hangup(app: object, grace: float = 2.0) -> None:
    """When the terminal goes away (an SSH drop, `tmux kill-session`), the TUI ends, every time: SIGHUP may be
    ignored (`trap '' HUP`, a parent's nohup) or arrive while the event loop is busy, and a TUI reading a
    hung-up terminal spins. A thread waits in poll() for the terminal's hang-up (no CPU while it waits), stops
    every child, asks the app to exit, and ends the process ``grace`` seconds later if it has not."""
    import os
    import select
    import threading

    if not _terminal_fds() or not hasattr(select, "poll"):
        return

    def watch() -> None:
        from doctor import children

        while not terminal_hung_up(None):  # blocks in poll() until the terminal goes away
            pass
        children.stop()
        exit_app = getattr(app, "exit_when_shown", None) or getattr(app, "exit", None)
        call = getattr(app, "call_from_thread", None)
        if exit_app is not None and call is not None:
            threading.Thread(target=lambda: _quietly(call, exit_app, HANGUP_EXIT), daemon=True).start()
        threading.Event().wait(grace)
        os._exit(HANGUP_EXIT)  # the app did not end by itself: its terminal is gone, nothing is left to show

    threading.Thread(target=watch, name="gpu-doctor-hangup", daemon=True).start()


def _terminal_fds() -> list[int]:
    return [fd for fd in (_fileno(sys.stdin), _fileno(sys.stdout)) if fd is not None]


def terminal_hung_up(timeout_ms: int | None = 0) -> bool:
    """Whether standard input or output reports a hang-up (waiting up to ``timeout_ms``; None: until one)."""
    import select

    if not hasattr(select, "poll"):
        return False
    poller = select.poll()
    for fd in _terminal_fds():
        poller.register(fd, 0)  # no event asked for: poll() still reports POLLHUP, POLLERR and POLLNVAL
    try:
        events = poller.poll(timeout_ms)
    except (OSError, ValueError):
        return True
    return any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _fd, ev in events)


def _fileno(stream: object) -> int | None:
    fileno = getattr(stream, "fileno", None)
    try:
        fd = fileno() if callable(fileno) else None
    except (AttributeError, OSError, ValueError):
        return None
    return fd if isinstance(fd, int) else None


def _quietly(call: Callable[..., object], *args: object) -> None:
    import contextlib

    with contextlib.suppress(Exception):
        call(*args)


def run_app(app: Any) -> None:
    """``app.run()``, where SIGINT, SIGTERM and SIGHUP end the app through Textual's own exit.

    The CLI's handlers (doctor.children) raise in whatever frame the main thread is in; inside the app that is
    the middle of asyncio's event loop, whose tasks then die mid-step and are printed as tracebacks. Here the
    handler kills the child processes as before, then asks the running loop to exit the app, and the signal is
    raised once the loop is gone, so the CLI leaves with its one line and 128 + the signal. Before the loop
    runs (or after it), the handler raises as the CLI's own. A signal the caller ignores (nohup) stays ignored.
    """
    import asyncio
    import functools
    import signal

    from doctor import children

    received: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        children.stop()
        received.append(signum)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: nothing of asyncio's to break
            app.exit_when_shown(128 + signum)  # in case this exception goes astray (see raise_if_signalled)
            raise children.signal_exception(signum) from None
        loop.call_soon_threadsafe(app.exit_when_shown, 128 + signum)
        # an app that never shows its first frame still ends (then Textual may print what it was composing)
        loop.call_soon_threadsafe(loop.call_later, 3.0, functools.partial(app.exit, return_code=128 + signum))

    previous = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is children.on_signal:
            previous[sig] = signal.signal(sig, on_signal)
    try:
        children.raise_if_signalled()  # one that came during the imports and went astray: no app at all
        app.run()
    finally:
        children.restore(previous)
    if received:
        raise children.signal_exception(received[0])


def demo_sources(args: argparse.Namespace) -> tuple[list[Source], int, None]:
    from doctor.examples import EXAMPLES
    from doctor.tui.model import Source

    # Each example is read and diagnosed by the app when it is shown (after the first frame), not all of them here.
    sources = [Source(title=e.title, description=e.description, load=e.facts, origin=f"example {e.name}")
               for e in EXAMPLES]
    index = next((i for i, e in enumerate(EXAMPLES) if e.name == args.example), 0)
    return sources, index, None


def tui_sources(args: argparse.Namespace) -> tuple[list[Source], int, Callable[[], GpuSample] | None]:
    from doctor.commands.check import collect_from_args, host_from_args, load_facts_file
    from doctor.tui.model import Source

    if args.facts:
        if args.facts == "-":
            raise UsageError("--facts -: the TUI reads the keyboard on standard input; give a file")
        if args.root is not None or args.python or args.deep:
            raise UsageError("--facts replays a recorded machine: --root, --python and --deep do not apply")
        path = args.facts
        facts = load_facts_file(path)  # a bad file is a one-line error before the screen opens
        return [Source(title=f"snapshot {path}", facts=facts, load=lambda: load_facts_file(path),
                       origin=f"file {path}")], 0, None
    # --root and --python are checked now (a one-line error, not inside the TUI). Without them there is nothing to
    # check, and this machine's host (doctor.host, ctypes) is made when the GPUs are first sampled, after the first
    # frame (issue 23, start-up); the probes make their own (collect_from_args).
    host = host_from_args(args) if args.root is not None or args.python else None
    sampler: Callable[[], GpuSample] | None = None
    if host is None or host.live:
        made: list[Any] = [] if host is None else [host]

        def sample() -> GpuSample:
            from doctor.pipeline import sample_gpus

            if not made:  # one sampling at a time (the app's worker): no race
                made.append(host_from_args(args))
            return sample_gpus(made[0])

        sampler = sample

    return [Source(title="this machine", live=host is None or host.live, load=lambda: collect_from_args(args),
                   origin="this machine")], 0, sampler
