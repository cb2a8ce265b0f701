"""gpu-validate's TUI step where tmux is missing: `gpu-doctor tui` on this machine, driven headless by Textual's
pilot (the same app, the live GPU sampler and the engine's smoke/OOM runner), its screen written as text and SVG.

    python tui_pilot.py OUTDIR

Keys as a user presses them: wait for the diagnosis, `g` (the live GPU table, refreshed every second), `s` (the
smoke test, until its result), `o` then `y` (the OOM probe after its question, until its result), `q`. Each
screen goes to OUTDIR/NN-name.txt (plain text) and .svg; OUTDIR/pilot.json records what the app held at each
point (the verdict, the tests' outcomes), so a recording is read without parsing a picture.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
import time
from pathlib import Path
from typing import Any


def screen_text(app: Any) -> tuple[str, str]:
    """The screen as plain text and as SVG (what `export_screenshot` draws, kept as text too)."""
    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text(), console.export_svg(title="gpu-doctor tui")


async def drive(out: Path) -> dict[str, Any]:
    from doctor.cli import build_parser
    from doctor.commands.tui import tui_sources
    from doctor.tui.app import DoctorApp

    args = build_parser("tui").parse_args(["tui"])
    sources, index, sampler = tui_sources(args)
    app = DoctorApp(sources, index=index, gpu_sampler=sampler)
    record: dict[str, Any] = {"screens": []}

    async def wait(pilot: Any, done: Any, limit: float) -> bool:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if done():
                return True
            await pilot.pause(0.25)
        return False

    async def shot(name: str) -> None:
        text, svg = screen_text(app)
        n = len(record["screens"]) + 1
        (out / f"{n:02d}-{name}.txt").write_text(text)
        (out / f"{n:02d}-{name}.svg").write_text(svg)
        record["screens"].append({"name": name, "running_test": app.running_test,
                                  "results": {k: [v.status, v.summary] for k, v in app.results.items()}})

    async with app.run_test(size=(120, 40)) as pilot:
        record["diagnosed"] = await wait(pilot, lambda: app.report is not None, 60)
        if app.report is not None:
            record["report"] = {"status": app.report.status,
                                "findings": [[f.code, f.severity] for f in app.report.findings]}
        await shot("diagnosis")
        await pilot.press("g")
        await pilot.pause(2.5)  # two refreshes of the live table
        await shot("gpus")
        for key, name in (("s", "smoke"), ("o", "oom")):
            await pilot.press(key)
            await pilot.pause(0.5)
            if key == "o":
                await shot("oom-question")
                await pilot.press("y")
            record[f"{name}_finished"] = await wait(pilot, lambda n=name: n in app.results, 90)
            await pilot.pause(0.5)
            await shot(name)
        await pilot.press("q")
    return record


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    record = asyncio.run(drive(out))
    (out / "pilot.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(json.dumps(record, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
