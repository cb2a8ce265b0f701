"""The real TUI on a pseudo-terminal of its own: it ends when its terminal goes away (an SSH drop, `tmux
kill-session`), every time — whether SIGHUP reaches it or is ignored (`trap '' HUP`, a parent's nohup) — and
leaves no process behind. The child's SIGHUP disposition is set by the test itself, never inherited."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from ptyterm import Pty

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pseudo-terminal tests need Linux")


def _env(tmp: Path) -> dict[str, str]:
    return {"TERM": "xterm-256color", "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp),
            "XDG_CACHE_HOME": str(tmp / "cache"), "LANG": "C.UTF-8", "PYTHONPATH": str(REPO)}


@pytest.mark.parametrize("sighup", [signal.SIG_DFL, signal.SIG_IGN], ids=["sighup-delivered", "sighup-ignored"])
def test_the_tui_ends_when_its_terminal_closes(tmp_path: Path, sighup: object) -> None:
    term = Pty([sys.executable, "-m", "doctor", "demo"], _env(tmp_path), cwd=str(tmp_path), sighup=sighup)
    try:
        assert term.wait_for("Quit", timeout=90) is not None, term.text[-2000:]
        term.pump(0.5)
        term.hang_up()
        code = term.wait_exit(timeout=60)  # generous: a loaded machine; a spinning TUI never ends at all
        assert code == 128 + signal.SIGHUP, code
        with pytest.raises(ProcessLookupError):
            os.killpg(term.proc.pid, 0)  # nothing of its session is left running
    finally:
        term.kill()
