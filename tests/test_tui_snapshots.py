"""SVG snapshots of the TUI's main screens (pytest-textual-snapshot) at 80×24 and 120×40.

The SVGs live in tests/__snapshots__/test_tui_snapshots/. After an intended change of the layout,
look at the report pytest prints, then accept with `pytest tests/test_tui_snapshots.py
--snapshot-update`. docs/tui-demo.svg is a copy of one of them (see test_docs_screenshot_is_current).
"""

from __future__ import annotations

import datetime as dt
import socket
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input

from doctor.examples import EXAMPLES
from doctor.tui import app as tui_app
from doctor.tui.model import Source

SNAPSHOTS = Path(__file__).parent / "__snapshots__" / "test_tui_snapshots"
DOCS_SVG = Path(__file__).parent.parent / "docs" / "tui-demo.svg"
DOCS_SOURCE = "test_main_screen[r470-geforce-cu124-torch-120x40].svg"


@pytest.fixture(autouse=True)
def _deterministic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Nothing from this machine or this moment reaches a snapshot."""
    monkeypatch.setattr(tui_app, "now", lambda: dt.datetime(2026, 11, 22, 9, 0, 0))  # the live view's clock
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)  # a dialog's cursor never blinks
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no matrix refreshed on this machine
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # default save paths are relative: no repository path on screen
    monkeypatch.delenv("NO_COLOR", raising=False)  # the theme is chosen in make_app


def make_app(name: str) -> tui_app.DoctorApp:
    sources = [Source(e.title, e.description, e.facts(), load=e.facts, origin=e.name) for e in EXAMPLES]
    app = tui_app.DoctorApp(sources, index=next(i for i, e in enumerate(EXAMPLES) if e.name == name))
    app.theme = "textual-dark"  # not whatever TEXTUAL_THEME said when textual was imported
    return app


async def diagnosed(pilot: Any) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


SIZES = {"80x24": (80, 24), "120x40": (120, 40)}
SHOWN = ("r470-geforce-cu124-torch", "module-userspace-mismatch", "debian12-535-no-gpu")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", SHOWN)
def test_main_screen(snap_compare: Any, name: str, size: str) -> None:
    assert snap_compare(make_app(name), terminal_size=SIZES[size], run_before=diagnosed)


def test_fix_script_view(snap_compare: Any) -> None:
    assert snap_compare(make_app("module-userspace-mismatch"), press=["f"], terminal_size=(80, 24),
                        run_before=diagnosed)


def test_gpu_table_of_the_h100_node(snap_compare: Any) -> None:
    assert snap_compare(make_app("healthy-8x-h100"), press=["g"], terminal_size=(120, 40), run_before=diagnosed)


def test_export_dialog(snap_compare: Any) -> None:
    assert snap_compare(make_app("shared-p100-memory-held"), press=["e"], terminal_size=(80, 24),
                        run_before=diagnosed)


def test_snapshots_hold_nothing_from_this_machine() -> None:
    svgs = list(SNAPSHOTS.glob("*.svg"))
    assert len(svgs) >= 9, "run the snapshot tests with --snapshot-update once"
    host = socket.gethostname()
    for svg in svgs:
        text = svg.read_text()
        assert str(Path(__file__).parent.parent) not in text, svg.name
        assert not host or f">{host}<" not in text, svg.name


def test_docs_screenshot_is_current() -> None:
    """docs/tui-demo.svg (shown by docs/tui.md) is the 120×40 snapshot of the first example."""
    assert DOCS_SVG.read_text() == (SNAPSHOTS / DOCS_SOURCE).read_text(), (
        f"cp tests/__snapshots__/test_tui_snapshots/'{DOCS_SOURCE}' docs/tui-demo.svg")
