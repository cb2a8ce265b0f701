"""Pilot tests of the TUI: every binding and flow, on the bundled examples and fake streams.

The app takes its data already described (sources, a runner for active tests, a GPU sampler), so
each test passes exactly what it needs: an example snapshot, a fake event stream, a fake sampler.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_real_host import LIBCUDA
from test_smoke_fake import build_fakes, env_for
from textual.widgets import DataTable, Input, Log, OptionList, ProgressBar, RadioButton, Static, Tabs

from doctor import cli
from doctor.active import events
from doctor.active.gpu import Options
from doctor.examples import EXAMPLES, by_name
from doctor.model.facts import Facts
from doctor.model.findings import Finding
from doctor.model.live import GpuSample
from doctor.tui import active, fixes, model
from doctor.tui.app import DoctorApp
from doctor.tui.model import Source
from doctor.tui.screens import ConfirmDialog, ExportDialog, FixScreen, HelpScreen, SaveDialog, SnapshotPicker
from doctor.tui.widgets import ActivePanel, FindingDetail, FindingsTree, SummaryBar


@pytest.fixture(autouse=True)
def _steady(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No refreshed matrix from the user's cache, no colour setting from the environment."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.chdir(tmp_path)


class RecordingApp(DoctorApp):
    """The real app, remembering its notifications so tests can assert on what the user was told."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.notes: list[tuple[str, str]] = []

    def notify(self, message: str, *, title: str = "", severity: Any = "information", timeout: float | None = None,
               markup: bool = True) -> None:
        self.notes.append((severity, str(message)))
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)


def pilot_test(fn: Any) -> Any:
    """Run an async pilot test with asyncio.run (no async plugin needed; fixtures still resolve)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return run


EXAMPLES_DIR = Path(__file__).parent.parent / "doctor" / "examples"


def example_sources() -> list[Source]:
    return [Source(e.title, e.description, e.facts(), load=e.facts, origin=e.name) for e in EXAMPLES]


def index_of(name: str) -> int:
    return next(i for i, e in enumerate(EXAMPLES) if e.name == name)


def live_source(name: str = "r470-geforce-cu124-torch", load: Any = None) -> Source:
    example = by_name(name)
    assert example is not None
    return Source("this machine", facts=None, live=True, load=load or example.facts, origin="this machine")


async def settle(pilot: Any) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def body(app: DoctorApp) -> str:
    return str(app.query_one(FindingDetail).query_one("#detail-body", Static).render())


def summary(app: DoctorApp) -> str:
    return str(app.query_one(SummaryBar).render())


def cursor_finding(app: DoctorApp) -> Finding | None:
    node = app.query_one(FindingsTree).cursor_node
    return node.data.finding if node and node.data else None


# --- the diagnosis view -----------------------------------------------------------------------------


@pilot_test
async def test_opens_on_the_first_failure_with_evidence_rule_and_fix() -> None:
    app = RecordingApp(example_sources())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        f = cursor_finding(app)
        assert f is not None and f.code == "framework.cuda_newer_than_driver"
        text = body(app)
        assert "torch 2.5.1 needs a newer driver than 470.63.01" in text
        assert "Evidence" in text and "driver.kernel_module = 470.63.01" in text
        assert "Matrix rule" in text and "source: https://docs.nvidia.com/" in text
        assert "Install NVIDIA driver branch 580" in text and "torch 2.5.1 built for CUDA 11.8" in text
        # at 80×24 the pane shows the first lines: the fix comes before the evidence and the rule
        assert text.index("Fix") < text.index("Evidence") < text.index("Matrix rule")
        assert "[1/6] CUDA 12 PyTorch on an R470 driver" in summary(app)
        assert "NOT READY" in summary(app)


@pilot_test
async def test_arrow_and_vi_keys_move_through_findings_and_the_detail_follows() -> None:
    app = RecordingApp(example_sources())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        tree = app.query_one(FindingsTree)
        start = tree.cursor_line
        await pilot.press("k")
        assert tree.cursor_line == start - 1
        await pilot.press("j", "down")
        assert tree.cursor_line == start + 1
        await pilot.press("up")
        assert cursor_finding(app) is not None and cursor_finding(app).code == "framework.cuda_newer_than_driver"
        # to the top: an area; enter closes it, enter opens it again
        tree.move_cursor_to_line(0)
        await pilot.pause()
        node = tree.cursor_node
        assert node is not None and node.data is not None and node.data.kind == "area"
        assert "Checks" in body(app) and node.data.area is not None and node.data.area.name in body(app)
        was = node.is_expanded
        await pilot.press("enter")
        assert node.is_expanded is not was
        await pilot.press("enter")
        assert node.is_expanded is was


@pilot_test
async def test_passed_and_not_checked_nodes_explain_themselves() -> None:
    app = RecordingApp(example_sources())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        tree = app.query_one(FindingsTree)
        passed = next(n for n in tree.nodes() if n.data and n.data.kind == "passed")
        passed.parent.expand()  # type: ignore[union-attr]
        await pilot.pause()
        tree.move_cursor(passed)
        await pilot.pause()
        assert "passed" in body(app)
        skipped = next(n for n in tree.nodes() if n.data and n.data.kind == "not_checked")
        skipped.parent.expand()  # type: ignore[union-attr]
        await pilot.pause()
        tree.move_cursor(skipped)
        await pilot.pause()
        assert "These checks did not run, and why" in body(app)


@pilot_test
async def test_side_by_side_the_findings_use_the_width_their_titles_need() -> None:
    app = RecordingApp(example_sources(), index=index_of("r470-geforce-cu124-torch"))
    async with app.run_test(size=(110, 30)) as pilot:
        await settle(pilot)
        tree = app.query_one(FindingsTree)
        assert tree.size.width > 110 // 2, tree.size.width  # wider than half: the titles need it
        assert app.query_one(FindingDetail).size.width >= DoctorApp.DETAIL_MIN - 2
        first = cursor_finding(app)
        assert first is not None
        line = tree.render_line(tree.cursor_line - tree.scroll_offset.y).text
        assert line.rstrip().endswith(model.tree_title(first.title)[-12:]), (line, first.title)


@pilot_test
async def test_tab_moves_focus_to_the_explanation_for_scrolling() -> None:
    app = RecordingApp(example_sources())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.focused is app.query_one(FindingsTree)
        await pilot.press("tab")
        assert app.focused is app.query_one(FindingDetail)


@pilot_test
async def test_mouse_click_selects_a_finding_and_a_tab() -> None:
    app = RecordingApp(example_sources(), index=index_of("module-userspace-mismatch"))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        tree = app.query_one(FindingsTree)
        target = next(n for n in tree.nodes() if n.data and n.data.kind == "area" and n.data.area
                      and n.data.area.name == "CUDA toolkit")
        await pilot.click(FindingsTree, offset=(6, target.line))
        assert tree.cursor_node is target
        assert "CUDA toolkit" in body(app)
        await pilot.click("#tabs Tab#--content-tab-gpus")
        await pilot.pause()
        assert app.query_one("#tabs").active == "gpus"  # type: ignore[attr-defined]


@pilot_test
async def test_view_keys_switch_views_and_focus_follows() -> None:
    app = RecordingApp(example_sources(), index=index_of("healthy-8x-h100"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        tabs = app.query_one("#tabs")
        for key, view, focused in (("g", "gpus", DataTable), ("t", "tests", Log), ("d", "diagnosis", FindingsTree)):
            await pilot.press(key)
            assert tabs.active == view  # type: ignore[attr-defined]
            assert isinstance(app.focused, focused)


# --- fix scripts -------------------------------------------------------------------------------------


def cli_fix(name: str, fmt: str, tmp_path: Path) -> str:
    """What `gpu-doctor fix --facts EXAMPLE --format FMT` writes: the TUI's plan scripts must be exactly this.
    (Written with -o: inside run_test, Textual holds standard output.)"""
    out = tmp_path / f"cli-{name}-{fmt}.sh"
    assert cli.main(["fix", "--facts", str(EXAMPLES_DIR / f"{name}.json"), "--format", fmt, "-o", str(out)]) == 0
    return out.read_text()


async def save_script(app: RecordingApp, pilot: Any, target: Path) -> str:
    """Save the fix view's script through its dialog; the file's text."""
    await pilot.press("s")
    assert isinstance(app.screen, SaveDialog)
    app.screen.query_one(Input).value = str(target)
    await pilot.press("enter")
    await pilot.pause()
    assert isinstance(app.screen, FixScreen)
    assert os.access(target, os.X_OK)
    assert any(f"Wrote {target}" in msg for _, msg in app.notes)
    return target.read_text()


@pilot_test
async def test_fix_script_opens_on_the_apt_plan_and_saves_it_through_the_dialog(
        tmp_path: Path) -> None:
    app = RecordingApp(example_sources(), index=index_of("module-userspace-mismatch"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        # F: the plan for every problem, which is what `gpu-doctor fix` writes (the example also carries the
        # end-of-life warning of its R535 branch, so the selected finding's own plan is a part of it)
        await pilot.press("F")
        screen = app.screen
        assert isinstance(screen, FixScreen) and screen.format == "apt"  # Ubuntu 22.04: what `fix` picks
        script = screen.script
        assert script.startswith("#!/usr/bin/env bash\n# gpu-doctor fix script (format: apt)")
        await pilot.press("s")
        assert isinstance(app.screen, SaveDialog)
        assert app.screen.query_one(Input).value == "gpu-doctor-fix-all-apt.sh"
        await pilot.press("escape")
        target = tmp_path / "out" / "fix.sh"
        target.parent.mkdir()
        saved = await save_script(app, pilot, target)
        assert saved == script == cli_fix("module-userspace-mismatch", "apt", tmp_path)
        assert "\n  apt_hold libnvidia-compute-535 nvidia-driver-535\n" in saved  # the step holds the packages…
        assert '      run apt-mark hold -- "$p"\n' in saved  # …with apt-mark, unless held already
        assert "\n    run reboot\n" in saved and "only with --reboot" in saved  # never rebooted unasked
        await pilot.press("escape")
        assert not isinstance(app.screen, FixScreen)


@pytest.mark.slow  # a few seconds each: with the slow tests (CI runs both) to keep the fast set in budget
@pilot_test
async def test_f_cycles_through_the_formats_and_each_one_saves(tmp_path: Path) -> None:
    app = RecordingApp(example_sources(), index=index_of("module-userspace-mismatch"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("f")
        screen = app.screen
        assert isinstance(screen, FixScreen)
        assert [t.id for t in screen.query("#fix-formats Tab")] == ["fmt-apt", "fmt-pip", "fmt-conda"]
        tabs = screen.query_one("#fix-formats", Tabs)
        seen = []
        for i in range(4):
            about = str(screen.query_one("#fix-about", Static).render())
            seen.append((screen.format, tabs.active, about.split(",")[0], screen.script.split(" generated")[0]))
            if i < 3:
                assert await save_script(app, pilot, tmp_path / f"{screen.format}.sh") == screen.script
            await pilot.press("f")
            await pilot.pause()
        head = "#!/usr/bin/env bash\n# gpu-doctor fix script (format: "
        assert seen == [
            ("apt", "fmt-apt", "gpu-doctor fix --format apt", head + "apt),"),
            ("pip", "fmt-pip", "gpu-doctor fix --format pip", head + "pip),"),
            ("conda", "fmt-conda", "gpu-doctor fix --format conda", head + "conda),"),
            ("apt", "fmt-apt", "gpu-doctor fix --format apt", head + "apt),"),  # round and round
        ]
        pip = (tmp_path / "pip.sh").read_text()
        # pip cannot hold a .deb or reboot: the step is named for `gpu-doctor fix`, never half-rendered
        assert "not in this format (it needs the system, not the Python environment)" in pip
        assert "HoldPackages" not in pip and "apt_hold" not in pip
        await pilot.click("#fix-formats Tab#fmt-conda")  # the mouse switches too
        await pilot.pause()
        assert screen.format == "conda" and "(format: conda)" in screen.script


@pilot_test
async def test_pip_script_for_the_r470_host_is_the_plans_python_side(tmp_path: Path) -> None:
    app = RecordingApp(example_sources(), index=index_of("r470-geforce-cu124-torch"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        # every problem (the driver, and the missing toolkit's note), as `gpu-doctor fix --format pip` plans them
        await pilot.press("F", "f")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FixScreen) and screen.format == "pip"
        saved = await save_script(app, pilot, tmp_path / "fix-pip.sh")
        assert saved == cli_fix("r470-geforce-cu124-torch", "pip", tmp_path)
        # pip takes the finding's Python-only route: a torch build driver 470 runs (PyTorch's cu118 index), and never
        # half-renders the driver step (no leaked action repr, no reboot).
        assert [ln.strip() for ln in saved.splitlines() if "-m pip install" in ln and "run " in ln] == [
            "run /home/ml/venv/bin/python -m pip install --index-url https://download.pytorch.org/whl/cu118 -- "
            "torch==2.5.1"]
        assert "InstallDriver" not in saved and "need_reboot 'the new" not in saved


@pilot_test
async def test_save_dialog_cancel_writes_nothing_and_bad_path_is_a_notification(tmp_path: Path) -> None:
    app = RecordingApp(example_sources(), index=index_of("module-userspace-mismatch"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("f", "s")
        await pilot.press("escape")
        assert isinstance(app.screen, FixScreen)
        assert list(tmp_path.glob("*.sh")) == []
        await pilot.press("s")
        app.screen.query_one(Input).value = str(tmp_path / "no" / "such" / "dir" / "fix.sh")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, FixScreen)  # still running, still on the fix view
        assert any(sev == "error" and "Could not write" in msg for sev, msg in app.notes)


@pilot_test
async def test_fix_for_every_problem_is_the_fix_commands_script_and_copies(tmp_path: Path) -> None:
    app = RecordingApp(example_sources(), index=index_of("debian12-535-no-gpu"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("F")
        screen = app.screen
        assert isinstance(screen, FixScreen)
        assert screen.script == cli_fix("debian12-535-no-gpu", "apt", tmp_path)  # Debian 12: apt
        # the toolkit needs a newer driver branch; with no GPU on the bus, loading the module is for a person
        assert "driver.too_old_for_cuda_runtime] Install NVIDIA driver branch 580" in screen.script
        # no GPU on the bus: attaching one is the first step, before the driver
        assert "1. [driver.not_loaded] First attach an NVIDIA GPU" in screen.script
        assert "[container.no_gpu_passthrough]" not in screen.script  # a VM from a Docker image: no container
        about = str(screen.query_one("#fix-about", Static).render())
        assert about.startswith("gpu-doctor fix --format apt, for every problem: apt for the system, pip for Python")
        await pilot.press("c")
        assert app.clipboard == screen.script
        await pilot.press("c")  # copies the script shown
        assert app.clipboard == screen.script and "$ lspci -nn" in app.clipboard  # a person's step: printed


@pilot_test
async def test_a_script_that_cannot_be_rendered_is_a_message_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    real = fixes.fix_script

    def broken(report: Any, findings: list[Finding], fmt: str = "bash") -> str:
        if fmt == "pip":
            raise KeyError("torch")
        return real(report, findings, fmt)

    monkeypatch.setattr(fixes, "fix_script", broken)
    app = RecordingApp(example_sources(), index=index_of("rtx5090-cu124-torch"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("f", "f")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FixScreen) and screen.format == "pip"
        shown = str(screen.query_one("#fix-script", Static).render())
        assert shown == "The pip script could not be written: KeyError: 'torch'"
        await pilot.press("s", "c")
        assert isinstance(app.screen, FixScreen)  # no save dialog for nothing
        assert [m for s, m in app.notes if s == "error"] == [shown, shown]
        await pilot.press("f")
        await pilot.pause()
        assert screen.format == "conda" and screen.error is None and "(format: conda)" in screen.script


@pilot_test
async def test_fix_on_a_finding_without_fix_says_so() -> None:
    app = RecordingApp(example_sources(), index=index_of("healthy-8x-h100"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        tree = app.query_one(FindingsTree)
        ok = next(n for n in tree.nodes() if n.data and n.data.finding and n.data.finding.severity == "ok")
        ok.parent.expand()  # type: ignore[union-attr]
        ok.parent.parent.expand()  # type: ignore[union-attr]
        await pilot.pause()
        tree.move_cursor(ok)
        await pilot.pause()
        await pilot.press("f")
        assert not isinstance(app.screen, FixScreen)
        assert ("information", "This finding carries no fix.") in app.notes
        await pilot.press("F")
        assert ("information", "No problem here carries a fix.") in app.notes


# --- demo snapshots ----------------------------------------------------------------------------------


@pytest.mark.slow  # a few seconds each: with the slow tests (CI runs both) to keep the fast set in budget
@pilot_test
async def test_next_previous_and_picker_switch_the_example() -> None:
    app = RecordingApp(example_sources())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("n")
        await settle(pilot)
        assert app.index == 1 and "[2/6] RTX 5090 with a cu124 PyTorch" in summary(app)
        assert cursor_finding(app).code == "framework.arch_unsupported"  # type: ignore[union-attr]
        await pilot.press("p", "p")
        await settle(pilot)
        assert app.index == 5 and "NVIDIA user space, no GPU, no module" in summary(app)
        await pilot.press("l")
        assert isinstance(app.screen, SnapshotPicker)
        assert app.screen.query_one(OptionList).highlighted == 5
        await pilot.press("home", "down", "down", "enter")
        await settle(pilot)
        assert app.index == 2
        assert cursor_finding(app).code == "driver.module_userspace_mismatch"  # type: ignore[union-attr]
        await pilot.press("l", "escape")
        assert app.index == 2 and not isinstance(app.screen, SnapshotPicker)


@pilot_test
async def test_single_snapshot_hides_the_switcher() -> None:
    app = RecordingApp(example_sources()[:1])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("n", "l")
        assert app.index == 0 and not isinstance(app.screen, SnapshotPicker)
        assert "[1/" not in summary(app)


# --- GPUs ---------------------------------------------------------------------------------------------


@pilot_test
async def test_gpu_table_of_a_snapshot_is_static() -> None:
    calls: list[int] = []
    app = RecordingApp(example_sources(), index=index_of("healthy-8x-h100"),
                       gpu_sampler=lambda: calls.append(1) or GpuSample([]), refresh_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("g")
        await pilot.pause(0.2)
        table = app.query_one(DataTable)
        assert table.row_count == 8
        assert str(table.get_row_at(0)[1]) == "H100 80GB HBM3"  # a Text (never markup), without the NVIDIA prefix
        assert "recorded 2026-11-22T09:00:00+00:00" in str(app.query_one("#gpu-status", Static).render())
        assert calls == []  # a replayed snapshot is never sampled


@pilot_test
async def test_no_gpu_says_why_there_is_no_table() -> None:
    app = RecordingApp(example_sources(), index=index_of("debian12-535-no-gpu"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("g")
        assert not app.query_one(DataTable).display
        reason = str(app.query_one("#gpu-reason", Static).render())
        assert "No GPU answered NVML or nvidia-smi" in reason
        assert "The PCI bus lists no NVIDIA display or 3D controller." in reason
        assert "NVML: Driver Not Loaded." in reason


@pilot_test
async def test_live_gpu_table_refreshes_from_a_worker_thread_while_shown() -> None:
    facts = by_name("r470-geforce-cu124-torch").facts()  # type: ignore[union-attr]
    threads: list[str] = []
    temps = iter(range(40, 1000))

    def sampler() -> GpuSample:
        threads.append(threading.current_thread().name)
        return GpuSample([replace(facts.gpus[0], temperature_c=next(temps))])

    app = RecordingApp([live_source()], gpu_sampler=sampler, refresh_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.pause(0.2)
        assert threads == []  # the Diagnosis view is shown: nobody looks at the table, nothing is sampled
        await pilot.press("g")
        for _ in range(50):
            await pilot.pause(0.05)
            if len(threads) >= 3:
                break
        assert len(threads) >= 3
        assert threading.main_thread().name not in threads
        table = app.query_one(DataTable)
        assert table.row_count == 1
        await settle(pilot)
        temp = str(table.get_row_at(0)[5])
        assert temp.endswith("°C") and int(temp[:-2]) > 40
        assert "live: NVML every 0.05 s · updated" in str(app.query_one("#gpu-status", Static).render())


@pilot_test
async def test_a_failing_sampler_becomes_one_notification_not_a_crash() -> None:
    def sampler() -> GpuSample:
        raise OSError("nvml child died")

    app = RecordingApp([live_source()], gpu_sampler=sampler, refresh_interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("g")
        await pilot.pause(0.4)
        warned = [m for s, m in app.notes if "NVML gave no GPU list" in m]
        assert warned == ["NVML gave no GPU list: OSError: nvml child died"]
        assert app.is_running


# --- active tests -------------------------------------------------------------------------------------


def fake_stream(test: active.ActiveTest, facts: Facts) -> Iterator[active.Event]:
    yield active.Progress(None, "creating a context on GPU 0")
    yield active.Log(f"{test.id}: GPU 0 {facts.gpus[0].name}")
    yield active.Progress(0.5, "copying 256 MiB")
    yield active.Log("host→device 24.1 GB/s")
    yield active.Progress(1.0, "verifying")
    yield active.Outcome("ok", "GPU 0 passed", [Finding("gpu.smoke", "ok", "GPU 0 ran the kernel", area="GPUs")])


@pilot_test
async def test_smoke_test_streams_progress_and_log_into_the_ui() -> None:
    app = RecordingApp([live_source()], runner=fake_stream)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        assert app.query_one("#tabs").active == "tests"  # type: ignore[attr-defined]
        log = app.query_one(Log)
        assert list(log.lines) == ["smoke: GPU 0 NVIDIA GeForce RTX 3080", "host→device 24.1 GB/s"]
        assert app.query_one(ProgressBar).percentage == 1.0
        assert app.results["smoke"].summary == "GPU 0 passed"
        assert "Smoke test: GPU 0 passed" in str(app.query_one("#active-step", Static).render())
        labels = [str(n.label) for n in app.query_one(FindingsTree).nodes() if n.data and n.data.kind == "active_test"]
        assert "✓ Smoke test: GPU 0 passed" in labels
        assert ("information", "Smoke test: GPU 0 passed") in app.notes


@pilot_test
async def test_a_failed_active_test_is_counted_in_the_header_and_exported(tmp_path: Path) -> None:
    def failing(test: active.ActiveTest, facts: Facts) -> Iterator[active.Event]:
        yield active.Outcome("fail", "GPU 0 returned wrong results",
                             [Finding("gpu.wrong_results", "fail", "GPU 0 returned wrong results", area="Smoke test")])

    app = RecordingApp([live_source("healthy-8x-h100")], runner=failing)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert "NOT READY" not in summary(app) and "✗" not in summary(app).split("\n")[0]
        await pilot.press("s")
        await settle(pilot)
        assert "NOT READY" in summary(app) and "1✗" in summary(app)
        await pilot.press("e")
        assert isinstance(app.screen, ExportDialog)
        await pilot.click("#ok")  # the first format: report.json
        await pilot.pause()
    report = json.loads((tmp_path / "gpu-doctor-report.json").read_text())
    exported = [f for f in report["findings"] if f["code"] == "gpu.wrong_results"]
    assert exported and exported[0]["area"] == "Active tests" and report["status"] == "fail"


@pilot_test
async def test_oom_probe_asks_first_and_runs_only_on_yes() -> None:
    ran: list[str] = []

    def runner(test: active.ActiveTest, facts: Facts) -> Iterator[active.Event]:
        ran.append(test.id)
        yield active.Outcome("warn", "largest block 9.2 of 9.6 GiB free")

    app = RecordingApp([live_source()], runner=runner)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("o")
        assert isinstance(app.screen, ConfirmDialog)
        assert "allocates all free memory" in str(app.screen.query_one(Static).render())
        await pilot.press("n")
        await settle(pilot)
        assert ran == [] and "oom" not in app.results
        await pilot.press("o")
        await pilot.click("#yes")
        await settle(pilot)
        assert ran == ["oom"]
        assert app.results["oom"].status == "warn"


@pytest.mark.slow  # a few seconds each: with the slow tests (CI runs both) to keep the fast set in budget
@pilot_test
async def test_running_test_can_be_cancelled_and_the_ui_stays_responsive() -> None:
    release = threading.Event()

    def slow(test: active.ActiveTest, facts: Facts) -> Iterator[active.Event]:
        yield active.Log("allocating")
        for i in range(200):  # at most 10 s; the cancel check runs between events
            if release.wait(0.05):
                break
            yield active.Progress(i / 200, f"step {i}", gpu=0)
        yield active.Outcome("ok", "done")

    app = RecordingApp([live_source()], runner=slow)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await pilot.pause(0.1)
        assert app.running_test == "smoke"
        assert str(app.query_one("#active-step", Static).render()).startswith("Smoke test: GPU 0: step ")
        await pilot.press("d")  # the UI answers while the test runs
        assert app.query_one("#tabs").active == "diagnosis"  # type: ignore[attr-defined]
        await pilot.press("s")
        assert any("running already" in m for _, m in app.notes)
        await pilot.press("c")
        await settle(pilot)
        assert app.running_test is None
        assert app.results["smoke"].summary == "cancelled"


@pilot_test
async def test_a_crashing_runner_is_a_result_and_a_notification() -> None:
    def broken(test: active.ActiveTest, facts: Facts) -> Iterator[active.Event]:
        yield active.Log("starting")
        raise RuntimeError("libcuda vanished")

    app = RecordingApp([live_source()], runner=broken)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        assert app.results["smoke"].summary == "crashed: RuntimeError: libcuda vanished"
        assert ("error", "Smoke test: crashed: RuntimeError: libcuda vanished") in app.notes
        assert app.is_running


@pilot_test
async def test_switched_off_active_tests_say_so() -> None:
    app = RecordingApp([live_source()], runner=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("s", "o", "c")
        assert not isinstance(app.screen, ConfirmDialog)
        assert app.results == {}
        warnings = [m for s, m in app.notes if s == "warning"]
        assert warnings == ["Smoke test: active tests are switched off in this session.",
                            "OOM probe: active tests are switched off in this session."]
        assert ("information", "No test is running.") in app.notes
        assert app.query_one(ActivePanel).query_one("#run-smoke").disabled


@pilot_test
async def test_the_engines_tests_refuse_a_recorded_snapshot() -> None:
    app = RecordingApp(example_sources())  # the default runner: the engine's
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("s", "o")
        assert not isinstance(app.screen, ConfirmDialog) and app.results == {}
        assert [m for s, m in app.notes if s == "warning"] == [
            "Smoke test: active tests run on this machine's GPUs only; this is a recorded snapshot.",
            "OOM probe: active tests run on this machine's GPUs only; this is a recorded snapshot."]
        assert app.query_one(ActivePanel).query_one("#run-smoke").disabled


def active_labels(app: DoctorApp) -> list[str]:
    return [str(n.label) for n in app.query_one(FindingsTree).nodes() if n.data and n.data.kind == "active_test"]


@pytest.mark.real_driver
@pytest.mark.skipif(not LIBCUDA.exists(), reason="Debian's libcuda1 is not installed (.ci/run installs it)")
@pilot_test
async def test_smoke_test_on_this_machine_shows_the_drivers_own_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real engine, the real child, Debian's real libcuda 535 with no GPU: an outcome, not a crash."""
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)  # the child loads the system's libcuda.so.1
    for knob in [k for k in os.environ if k.startswith("FAKE_")]:
        monkeypatch.delenv(knob)
    app = RecordingApp([live_source("debian12-535-no-gpu")])  # the default runner: doctor.active.gpu
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        outcome = app.results["smoke"]
        assert isinstance(outcome, events.Outcome)
        said = "cuInit failed with CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"
        assert (outcome.status, outcome.summary) == ("fail", f"smoke test: {said}")
        assert [(f.code, f.severity) for f in outcome.findings] == [("gpu.no_cuda_device", "fail")]
        assert outcome.results["global"]["cuda_driver_version"] == 12020  # libcuda 535 = CUDA 12.2
        assert list(app.query_one(Log).lines) == ["cuInit: CUDA_ERROR_NO_DEVICE"]
        assert str(app.query_one("#active-step", Static).render()) == f"✗ Smoke test: {said}"
        assert active_labels(app) == [f"✗ Smoke test: {said}", "· OOM probe"]
        assert ("error", f"Smoke test: {said}") in app.notes
        assert app.is_running and app.running_test is None


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fakes(tmp_path_factory)


@pilot_test
async def test_smoke_test_on_a_fake_a100_passes_with_its_measured_figures(fake_driver: Path) -> None:
    # The app runs the engine in a worker thread, the engine spawns the child: the fakes reach the child through
    # the environment it is given (LD_LIBRARY_PATH first, the FAKE_* knobs say what the "GPU" measures).
    env = env_for(fake_driver, FAKE_CUDA_PCIE_GBS=25, FAKE_CUDA_MEM_BW_GBS=1400, FAKE_CUDA_FP32_TFLOPS=18.5,
                  FAKE_NVML_GPU0_PCIE_GEN=4, FAKE_NVML_GPU0_PCIE_GEN_MAX=4)
    app = RecordingApp([live_source("healthy-8x-h100")],
                       runner=active.engine_runner(Options(size_mib=4, fma_ms=50, env=env)))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        outcome = app.results["smoke"]
        assert (outcome.status, outcome.summary) == ("ok", "smoke test: passed")
        assert list(app.query_one(Log).lines) == ["GPU 0: host→device 25.0 GB/s, device→host 25.0 GB/s",
                                                  "GPU 0: device memory 1400 GB/s", "GPU 0: FP32 18.50 TFLOP/s"]
        assert app.query_one(ProgressBar).percentage == 1.0
        assert str(app.query_one("#active-step", Static).render()) == "✓ Smoke test: passed"
        assert active_labels(app)[0] == "✓ Smoke test: passed"
        assert ("information", "Smoke test: passed") in app.notes
        tree = app.query_one(FindingsTree)
        node = next(n for n in tree.nodes() if n.data and n.data.test is active.SMOKE)
        tree.move_cursor(node)
        await pilot.pause()
        text = body(app)
        a100 = "GPU 0 (NVIDIA A100-SXM4-40GB)"
        assert "Result: passed" in text
        assert f"✓ {a100}: context, PTX JIT, copies and a kernel work: 1,048,576 of 1,048,576 elements exact" in text
        assert (f"✓ {a100}: device memory bandwidth (copy kernel) 1,400 GB/s, 90% of NVIDIA's published peak "
                "(1,555 GB/s)") in text
        assert f"✓ {a100}: FP32 throughput (FMA kernel) 18.5 TFLOP/s, 95% of NVIDIA's published peak" in text


# --- re-run, errors, export, help, palette, quit ------------------------------------------------------


@pilot_test
async def test_rerun_probes_again_in_a_worker() -> None:
    loads: list[str] = []
    example = by_name("module-userspace-mismatch")
    assert example is not None

    def load() -> Facts:
        loads.append(threading.current_thread().name)
        return example.facts()

    app = RecordingApp([live_source(load=load)])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert len(loads) == 1 and "(live)" in summary(app)
        await pilot.press("r")
        await settle(pilot)
        assert len(loads) == 2 and threading.main_thread().name not in loads
        assert any(m.startswith("Checks re-run: ✗ NOT READY") for _, m in app.notes)


@pilot_test
async def test_a_failing_probe_is_a_notification_and_r_retries() -> None:
    attempts: list[int] = []
    example = by_name("healthy-8x-h100")
    assert example is not None

    def load() -> Facts:
        attempts.append(1)
        if len(attempts) == 1:
            raise PermissionError("/proc/driver/nvidia: permission denied")
        return example.facts()

    app = RecordingApp([live_source(load=load)])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.report is None and app.is_running
        assert any(s == "error" and "permission denied" in m for s, m in app.notes)
        assert "Press r to try again" in body(app)
        await pilot.press("r")
        await settle(pilot)
        assert app.report is not None and app.report.status == "ok"


@pilot_test
async def test_diagnosis_is_not_on_the_ui_thread() -> None:
    seen: list[str] = []
    gate = threading.Event()

    def slow_diagnose(facts: Facts) -> Any:
        from doctor.pipeline import diagnose

        seen.append(threading.current_thread().name)
        gate.wait(10)
        return diagnose(facts)

    app = RecordingApp(example_sources(), diagnose_fn=slow_diagnose)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert "diagnosing" in summary(app)  # drawn, and answering keys, before the report exists
        await pilot.press("g")
        assert app.query_one("#tabs").active == "gpus"  # type: ignore[attr-defined]
        gate.set()
        await settle(pilot)
        assert seen and threading.main_thread().name not in seen
        assert "NOT READY" in summary(app)


@pytest.mark.parametrize(("choice", "name", "start"), [
    (0, "gpu-doctor-report.json", '{\n  "schema": "gpu-doctor.report/v1"'),
    (1, "gpu-doctor-report.md", "## gpu-doctor report: Driver/library mismatch after an upgrade"),
    (2, "gpu-doctor-facts.json", '{\n  "schema": "gpu-doctor.facts/v1"'),
])
@pilot_test
async def test_export_writes_the_chosen_format(tmp_path: Path, choice: int, name: str, start: str) -> None:
    app = RecordingApp(example_sources(), index=index_of("module-userspace-mismatch"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("e")
        assert isinstance(app.screen, ExportDialog)
        await pilot.click(list(app.screen.query(RadioButton))[choice])
        await pilot.pause()
        assert app.screen.query_one(Input).value == name
        await pilot.click("#ok")
        await pilot.pause()
        text = (tmp_path / name).read_text()
        assert text.startswith(start)
        if name.endswith(".md"):
            assert "#### ✗ Driver/library version mismatch: kernel module 535.104.05 ≠ user-space 535.129.03" in text


@pilot_test
async def test_help_lists_every_binding_and_closes() -> None:
    app = RecordingApp(example_sources())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        keys = {k for k, _ in app.screen.rows}
        for binding in DoctorApp.BINDINGS:
            first = binding.key.split(",")[0].replace("question_mark", "?")  # type: ignore[union-attr]
            assert any(k.split()[0] == first for k in keys), first
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)


@pilot_test
async def test_command_palette_offers_every_action() -> None:
    app = RecordingApp(example_sources())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Re-run checks", "Show fix script", "Fix script for every problem", "Run the smoke test",
                "Run the OOM probe", "Export report or snapshot", "Show GPUs", "Help", "Next example",
                "Choose example", "Quit"} <= titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert type(app.screen).__name__ == "CommandPalette"
        await pilot.press("escape")


@pilot_test
async def test_q_quits() -> None:
    app = RecordingApp(example_sources())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running
    assert app.return_code in (None, 0)


@pilot_test
async def test_no_color_selects_the_monochrome_theme(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = RecordingApp(example_sources())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.no_color and app.theme == "gpu-doctor-mono"
        assert "NOT READY" in summary(app)  # the words carry the status without colour


def test_fix_script_of_the_view_is_the_seam_function() -> None:
    facts = by_name("module-userspace-mismatch").facts()  # type: ignore[union-attr]
    from doctor.pipeline import diagnose

    report = diagnose(facts)
    bad = [f for f in report.findings if f.severity == "fail"]
    assert [f.id for f in fixes.script_formats(report, bad)] == ["apt", "pip", "conda"]
    screen = FixScreen(report, bad, "x")
    assert screen.script == fixes.fix_script(report, bad, "apt")


def test_the_tui_and_the_engine_share_one_set_of_event_classes() -> None:
    assert (active.Progress, active.Log, active.Outcome) == (events.Progress, events.Log, events.Outcome)


# --- start-up (issue 23: the first frame within 0.6 s; benchmarks/tui_speed.py measures it) -----------------------


@pilot_test
async def test_the_diagnosis_starts_once_the_first_frame_is_on_screen() -> None:
    shown_then: list[bool] = []

    def diagnose_fn(facts: Facts) -> Any:
        from doctor.pipeline import diagnose

        shown_then.append(app._shown)
        return diagnose(facts)

    calls: list[bool] = []  # `gpu-doctor tui` passes gc.enable: the collector is off until the first frame
    app = RecordingApp(example_sources(), diagnose_fn=diagnose_fn, when_shown=lambda: calls.append(app._shown))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert shown_then == [True]  # it never took the interpreter from the thread drawing the first frame
        assert calls == [True]
        assert "NOT READY" in summary(app)


@pilot_test
async def test_the_key_bar_shows_the_keys_in_the_first_frame_and_recomposes_only_when_they_change() -> None:
    class Toggling(RecordingApp):
        exportable = True

        def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
            return self.exportable if action == "export" else super().check_action(action, parameters)

    app = Toggling(example_sources())
    async with app.run_test(size=(120, 40)) as pilot:
        keys = list(app.screen.query("FooterKey"))
        assert [k.description for k in keys][:3] == ["Quit", "Help", "Fix"]  # type: ignore[attr-defined]
        await settle(pilot)
        await pilot.press("g", "t", "d", "tab")  # focus moves; the keys shown stay the same
        await pilot.pause()
        assert list(app.screen.query("FooterKey")) == keys  # the same widgets: not recomposed
        app.exportable = False
        app.refresh_bindings()
        for _ in range(50):  # the bar recomposes after the next refresh
            await pilot.pause(0.02)
            shown = [k.description for k in app.screen.query("FooterKey")]  # type: ignore[attr-defined]
            if "Export" not in shown:
                break
        assert "Export" not in shown and "Quit" in shown


def styles_of(app: DoctorApp) -> dict[str, object]:
    """Every node of the main screen, keyed by its path, with the rules styling it and its components."""
    out: dict[str, object] = {}
    for node in app.screen_stack[0].walk_children(with_self=True):
        components = {name: node.get_component_styles(name).get_rules()
                      for name in sorted(node._get_component_classes())}  # Textual's own list
        key = "/".join(f"{n.__class__.__name__}#{n.id}" for n in reversed(node.ancestors_with_self))
        while key in out:
            key += "'"
        out[key] = (node.styles.base.get_rules(), components)  # the stylesheet's (the app sets some inline)
    return out


@pytest.mark.parametrize(("size", "no_color"), [((120, 40), False), ((80, 24), False), ((120, 40), True)])
def test_the_first_frame_is_styled_as_a_full_styling_of_the_screen_styles_it(
        size: tuple[int, int], no_color: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The main screen's first resume does not style it all again (issue 23: ~15 ms of the first frame); the app
    does it once the first frame is on screen. It must change nothing there: the first frame was right (NO_COLOR:
    the monochrome theme, set before the first frame)."""
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    asyncio.run(_first_frame_styles(size))


async def _first_frame_styles(size: tuple[int, int]) -> None:
    first: dict[str, object] = {}
    applied: list[object] = []

    class Watching(RecordingApp):
        def on_ready(self) -> None:
            first.update(styles_of(self))
            super().on_ready()

    app = Watching(example_sources())
    apply = app.stylesheet.apply

    def counting(node: Any, **kwargs: Any) -> None:
        if not app._shown and type(node).__name__ == "FooterKey":
            applied.append(node)
        apply(node, **kwargs)

    app.stylesheet.apply = counting  # type: ignore[method-assign]
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert first and app._shown
        assert styles_of(app) == first
        keys = list(app.screen.query("FooterKey"))
        assert len(keys) >= 5 and all(k.has_class("-compact") for k in keys)
        assert sorted(map(id, applied)) == sorted(map(id, keys))  # each key styled once for the first frame


@pilot_test
async def test_the_views_not_shown_at_first_make_their_widgets_when_shown() -> None:
    app = RecordingApp(example_sources(), index=index_of("healthy-8x-h100"))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert not app.query(DataTable) and not app.query(Log)  # not made for the first frame
        await pilot.press("g")
        assert app.query_one(DataTable).row_count == 8  # the report that came before the view was made
        await pilot.press("t")
        assert "Smoke test: not run" in str(app.query_one("#active-intro", Static).render())
