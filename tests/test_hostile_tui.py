"""The attack harness, TUI: data is never markup and never reaches the terminal raw.

A GPU named ``[@click=app.quit]`` must be shown, not obeyed; ``[/bold]`` must not crash the table; an ESC in
a name is shown as a visible stand-in.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rich.text import Text
from textual.widgets import DataTable, Static

from doctor.model.facts import load_facts
from doctor.safeio import visible
from doctor.tui.app import DoctorApp
from doctor.tui.model import Source
from doctor.tui.widgets import FindingsTree, SummaryBar

HEALTHY = Path(__file__).parent.parent / "doctor" / "examples" / "healthy-8x-h100.json"
NAMES = ["[@click=app.quit]", "[/bold]", "[/]", "\x1b[2J\x1b]0;owned\x07", "[red]red[/red]", "\x9b31m\u202e", "ok"]


def hostile_facts() -> object:
    data = json.loads(HEALTHY.read_text())
    for gpu, name in zip(data["gpus"], NAMES, strict=False):
        gpu["name"] = name
    data["host"]["os_pretty"] = "[bold]Ubuntu[/] \x1b[31m"
    data["errors"] = [{"probe": "[@click=app.quit]", "reason": "[/]\x00"}]
    return load_facts(json.dumps(data))


def test_data_is_never_markup_nor_raw_control_characters() -> None:
    facts = hostile_facts()

    async def scenario() -> None:
        app = DoctorApp([Source("hostile", "a snapshot with markup in its values", facts, load=lambda: facts)],
                        gpu_sampler=None)
        async with app.run_test(size=(120, 40)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            await pilot.press("g")
            await pilot.pause(0.2)
            table = app.query_one(DataTable)
            cells = [table.get_row_at(i)[1] for i in range(table.row_count)]
            assert [c.plain for c in cells][:len(NAMES)] == [visible(n, line=True) for n in NAMES]
            assert all(isinstance(c, Text) and not c.spans for c in cells), "a name was read as markup"
            await pilot.click(DataTable, offset=(30, 1))  # on the "[@click=app.quit]" row
            await pilot.pause(0.1)
            assert app.is_running, "a GPU name quit the app"
            shown = str(app.query_one(SummaryBar).render()) + str(app.query_one(FindingsTree).render())
            shown += str(app.query_one("#detail-body", Static).render())
            assert "\x1b" not in shown and "\x00" not in shown and "\x9b" not in shown
            app.notify("[/] \x1b[2J from data")  # a notification quoting data: no markup error, no raw ESC

    asyncio.run(scenario())


def test_json_keeps_the_hostile_values_exact() -> None:
    facts = hostile_facts()
    names = [g["name"] for g in json.loads(facts.to_json())["gpus"]]  # type: ignore[attr-defined]
    assert names[:len(NAMES)] == NAMES  # escaping is for display only
