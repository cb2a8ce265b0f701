"""The gpu-doctor TUI: the engine's report as areas and findings, the GPUs, the active tests.

``DoctorApp(sources)`` takes what to show, already described (harlequin's app factory): this machine
(a live Source whose ``load`` probes), a snapshot file, or the bundled examples. Everything slow —
probing, diagnosing, sampling NVML, running a test — happens in ``@work(thread=True)`` workers that
post their result back; an exception there becomes a notification, never a crash.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import enum
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.theme import Theme
from textual.widgets import Static, TabbedContent, TabPane, Tabs
from textual.worker import Worker, WorkerState, get_current_worker

from doctor.safeio import visible
from doctor.tui import active, model
from doctor.tui.model import Source
from doctor.tui.widgets import ActivePanel, FindingDetail, FindingsTree, GpuView, KeyBar, Node, SummaryBar

if TYPE_CHECKING:
    from textual.message import Message
    from textual.notifications import SeverityLevel
    from textual.widgets import Tree

    from doctor.model.facts import Facts
    from doctor.model.findings import Finding
    from doctor.model.live import GpuSample
    from doctor.model.report import Report

# Start-up speed (issue 23): the first frame needs Textual, this module and the widgets of the main screen. The
# engine (doctor.pipeline, the model's classes), the dialogs and the fix view (doctor.tui.screens: their
# widgets, rich's syntax highlighting) are imported when they are first used, after the first frame.

MONO = Theme(name="gpu-doctor-mono", primary="#c0c0c0", secondary="#a0a0a0", accent="#ffffff",
             foreground="#e0e0e0", background="#000000", surface="#101010", panel="#202020",
             success="#e0e0e0", warning="#ffffff", error="#ffffff", dark=True)


def now() -> _dt.datetime:
    """The clock of the live GPU view (tests replace it)."""
    return _dt.datetime.now()


class _Default(enum.Enum):
    ENGINE_RUNNER = "engine"  # sentinel: ask doctor.tui.active for the engine's runner (None: no runner)


_ENGINE_RUNNER = _Default.ENGINE_RUNNER


class MainScreen(Screen[None]):
    """The main screen (summary, tabs, key bar), first on the stack.

    Start-up speed (issue 23): Textual styles each widget as it is mounted, then, when the screen is first shown
    (its first ScreenResume), styles the whole screen again before the first frame: the same styles a second time,
    every widget, ~15 ms of the first frame. That first resume comes here without it (Textual's own
    ``refresh_styles=False``, as when it brings back a screen that nothing changed under); the app styles the
    screen again once the first frame is on screen (:meth:`DoctorApp.on_ready`), so that a Textual whose first
    styling left anything out shows it a frame later. tests/test_tui_app.py checks that the styles of the first
    frame are those of a full styling."""

    def __init__(self) -> None:
        super().__init__(id="_default")  # the id of Textual's own default screen
        self._resumed = False

    def post_message(self, message: Message) -> bool:
        # getattr: a Textual without the attribute restyles as it always did (and the app once more after it)
        if isinstance(message, events.ScreenResume) and getattr(message, "refresh_styles", False) and \
                not self._resumed:
            self._resumed = True
            message.refresh_styles = False
        return super().post_message(message)


class DoctorApp(App[None]):
    CSS_PATH = Path(__file__).with_name("doctor.tcss")  # absolute: subclasses elsewhere (tests) find it too
    TITLE = "gpu-doctor"
    AUTO_FOCUS = "#tree"  # keys move through the findings from the first frame (one focus change, not two)
    FIRST_FRAME_WAIT = 5.0  # seconds the diagnosis waits for the first frame at most (then it runs regardless)
    MAIN_ONLY = frozenset({"fix", "fix_all", "rerun", "show_tab", "smoke", "oom", "cancel_active", "export",
                           "next_snapshot", "previous_snapshot", "pick_snapshot"})
    BINDINGS = [  # noqa: RUF012 (Textual's convention)
        Binding("q", "quit", "Quit"),
        Binding("question_mark,f1", "help", "Help", key_display="?"),
        Binding("f", "fix", "Fix"),
        Binding("F", "fix_all", "All fixes", show=False, key_display="F"),
        Binding("n", "next_snapshot", "Next"),
        Binding("p", "previous_snapshot", "Previous", show=False),
        Binding("l", "pick_snapshot", "Examples"),
        Binding("d", "show_tab('diagnosis')", "Diagnosis", show=False),
        Binding("g", "show_tab('gpus')", "GPUs"),
        Binding("t", "show_tab('tests')", "Tests"),
        Binding("s", "smoke", "Smoke test", show=False),
        Binding("o", "oom", "OOM probe", show=False),
        Binding("c", "cancel_active", "Cancel test", show=False),
        Binding("r", "rerun", "Re-run", show=False),
        Binding("e", "export", "Export"),
    ]
    # What the help screen says for each action (the footer has room for a word only). Not named HELP: that is
    # Textual's class variable for a widget's Markdown help text.
    ACTION_HELP: ClassVar[dict[str, str]] = {
        "quit": "quit",
        "help": "this help",
        "fix": "the selected finding's fix as a script: apt/dnf, pip, conda or its own steps (save, copy)",
        "fix_all": "one fix script (the fix plan) for every failure and warning",
        "next_snapshot": "next example host",
        "previous_snapshot": "previous example host",
        "pick_snapshot": "choose an example host from the list",
        "show_tab('diagnosis')": "Diagnosis view: areas, findings, explanation",
        "show_tab('gpus')": "GPUs view (live every second on this machine)",
        "show_tab('tests')": "Active tests view: progress and live log",
        "smoke": "run the smoke test",
        "oom": "run the OOM probe (asks first)",
        "cancel_active": "cancel the running test",
        "rerun": "re-run the checks (probes again when live)",
        "export": "export the report (JSON, Markdown) or the facts",
    }

    def get_default_screen(self) -> Screen[Any]:
        return MainScreen()

    def __init__(self, sources: list[Source], *, index: int = 0,
                 runner: active.Runner | Literal[_Default.ENGINE_RUNNER] | None = _ENGINE_RUNNER,
                 gpu_sampler: Callable[[], GpuSample] | None = None, refresh_interval: float = 1.0,
                 diagnose_fn: Callable[[Facts], Report] | None = None,
                 when_shown: Callable[[], object] | None = None) -> None:
        super().__init__()
        if not sources:
            raise ValueError("nothing to show: no source")
        self.sources = sources
        self.index = index
        self.runner: active.Runner | None = active.engine_runner() if runner is _ENGINE_RUNNER else runner
        self.gpu_sampler = gpu_sampler
        self.refresh_interval = refresh_interval
        self.diagnose_fn = diagnose_fn
        self.when_shown = when_shown  # called once the first frame is on screen
        self.reports: dict[int, Report] = {}
        self.report: Report | None = None
        self.results: dict[str, active.Outcome] = {}
        self._tree_width: int | None = None  # the findings tree's width set by _fit_tree (None: the stylesheet's)
        self.running_test: str | None = None
        self.last_sample: GpuSample | None = None
        self._sampling = False
        self._shown = False  # the first frame is on screen (Textual's Ready event)
        self._first_frame = threading.Event()  # the same, for the workers: they start their work after it
        self._exit_asked: int | None = None
        self.register_theme(MONO)
        if self.no_color:  # NO_COLOR: Textual also filters every colour out; the theme keeps contrast plain
            self.theme = MONO.name

    # --- layout -------------------------------------------------------------------------------


    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Every notification is plain text: messages quote data (an error, a path, a test result), which must
        never be read as markup, nor reach the terminal with its control characters."""
        super().notify(visible(message, line=True), title=visible(title, line=True), severity=severity,
                       timeout=timeout, markup=False)
    def compose(self) -> ComposeResult:
        yield SummaryBar(id="summary")
        with TabbedContent(id="tabs", initial="diagnosis"):
            with TabPane("Diagnosis", id="diagnosis"), Horizontal(id="diagnosis-pane"):
                yield FindingsTree(id="tree")
                yield FindingDetail(id="detail")
            with TabPane("GPUs", id="gpus"):
                yield GpuView(id="gpu-view")
            with TabPane("Active tests", id="tests"):
                yield ActivePanel(id="active")
        yield KeyBar(compact=True)

    NARROW = 100  # below this many columns the findings stack above the detail: titles get the full width
    DETAIL_MIN = 44  # side by side, the detail keeps this many columns; the findings take the rest they need

    def on_resize(self, event: events.Resize) -> None:
        # query, not query_one: a resize can come before the panes are composed or while the app exits
        self.query("#diagnosis-pane").set_class(event.size.width < self.NARROW, "narrow")
        self._fit_tree()

    def on_ready(self) -> None:
        self._shown = True
        if self.when_shown is not None:
            self.when_shown()
        self._first_frame.set()
        self.screen_stack[0].update_node_styles(animate=False)  # the full styling the first frame went without
        if self._exit_asked is not None:
            self.exit(return_code=self._exit_asked)

    def exit(self, *args: Any, **kwargs: Any) -> None:
        self._first_frame.set()  # a worker waiting for the first frame goes on (and ends) when the app exits
        super().exit(*args, **kwargs)

    def exit_when_shown(self, return_code: int) -> None:
        """Exit now, or once the first frame is on screen: an exit while the layout is still being composed leaves
        Textual's widgets half-mounted, and their errors printed on the terminal (a signal during start-up)."""
        if self._shown:
            self.exit(return_code=return_code)
        elif self._exit_asked is None:
            self._exit_asked = return_code

    def _fit_tree(self) -> None:
        """Side by side, the findings are as wide as their longest title needs, up to what leaves the detail
        DETAIL_MIN columns (never narrower than the stylesheet's half): titles end after their key words.
        The width is set only when it changes: a relayout while the cursor's node is scrolled into view would
        leave the scroll position to chance."""
        trees = self.query(FindingsTree)
        if not trees:
            return  # a resize before the panes are composed, or while the app exits
        tree = trees.first()
        width = self.size.width
        want: int | None = None
        if width >= self.NARROW:
            need = tree.content_width() + 3  # the border and the scrollbar
            want = max(width // 2, min(need, width - self.DETAIL_MIN))
        if want != self._tree_width:
            self._tree_width = want
            tree.styles.width = want  # None: the stylesheet's width (stacked: the full width)

    def on_mount(self) -> None:
        if not self.query("#diagnosis-pane"):  # exited before the layout was composed (a signal at start-up)
            return
        self.query_one("#diagnosis-pane").set_class(self.size.width < self.NARROW, "narrow")
        if self.gpu_sampler is not None:
            self.set_interval(self.refresh_interval, self._tick_gpus)
        self.show_source(self.index)

    @property
    def source(self) -> Source:
        return self.sources[self.index]

    @property
    def unavailable(self) -> str | None:
        return active.unavailable_reason(self.runner, self.source.live)

    def position(self) -> str:
        return f"[{self.index + 1}/{len(self.sources)}] " if len(self.sources) > 1 else ""

    # --- loading and showing a report -----------------------------------------------------------

    def show_source(self, index: int) -> None:
        self.index = index
        self.results = {}
        self.last_sample = None
        if index in self.reports:
            self._apply_report(index, self.reports[index])
            return
        self.report = None
        self.query_one(SummaryBar).show(self.source, None, self.position())
        self.query_one(FindingsTree).clear()
        self.query_one(FindingDetail).show(None, None, {}, None)
        self.query_one(GpuView).show_facts(None, self.source.live)
        self._diagnose(index, reload=False)

    @work(thread=True, exclusive=True, group="diagnose", exit_on_error=False)
    def _diagnose(self, index: int, reload: bool) -> None:
        # Probing and diagnosing start once the first frame is on screen: until then this thread would take
        # the interpreter from the main thread that draws it (the screen says "probing…" meanwhile).
        self._first_frame.wait(self.FIRST_FRAME_WAIT)
        src = self.sources[index]
        try:
            facts = src.load() if src.load and (reload or src.facts is None) else src.facts
            if facts is None:
                raise RuntimeError("no facts to diagnose")
            if self.diagnose_fn is None:
                from doctor.pipeline import diagnose

                self.diagnose_fn = diagnose
            report = self.diagnose_fn(facts)
        except Exception as exc:
            self.call_from_thread(self._failed, index, exc)
            return
        self.call_from_thread(self._apply_report, index, report, reload)

    def _failed(self, index: int, exc: BaseException) -> None:
        what = "Probing this machine" if self.sources[index].live else "Reading the snapshot"
        self.notify(f"{what} failed: {type(exc).__name__}: {exc}", title="gpu-doctor", severity="error",
                    timeout=10)
        if index == self.index and self.report is None:
            self.query_one(FindingDetail).query_one("#detail-body", Static).update(
                f"{what} failed: {exc}\nPress r to try again.")

    def _apply_report(self, index: int, report: Report, reload: bool = False) -> None:
        self.reports[index] = report
        if index != self.index:
            return  # the user moved on while this one was diagnosed
        self.report = report
        self.query_one(SummaryBar).show(self.source, model.with_active(report, self.results), self.position())
        tree = self.query_one(FindingsTree)
        tree.build(report, self.results, self.unavailable)
        self._fit_tree()
        target = model.first_problem(report)
        node = tree.find(target) if target else None
        if node is not None:
            parent = node.parent
            while parent is not None:
                parent.expand()
                parent = parent.parent
            self.call_after_refresh(tree.move_cursor, node)
        else:
            self.call_after_refresh(tree.move_cursor_to_line, 0)
        self.query_one(FindingDetail).show(node.data if node else None, report, self.results, self.unavailable)
        self.query_one(GpuView).show_facts(report.facts, self.source.live)
        self._refresh_active()
        if reload:
            self.notify(f"Checks re-run: {model.status_line(report)}.", title="gpu-doctor")

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[Node]) -> None:
        self.query_one(FindingDetail).show(event.node.data, self.report, self.results, self.unavailable)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:  # our workers catch what they expect; this is the rest
            self.notify(f"{event.worker.name}: {event.worker.error}", title="internal error", severity="error")

    # --- actions ----------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.MAIN_ONLY and isinstance(self.screen, Screen) and self.screen is not self.screen_stack[0]:
            return False  # a dialog or the fix view is open: its own keys only
        if action in ("next_snapshot", "previous_snapshot", "pick_snapshot"):
            return len(self.sources) > 1
        return True

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        self._focus_tab(tab)
        self._tick_gpus()

    def _focus_tab(self, tab: str) -> None:
        """Focus the main widget of the shown view: keys go there, and the view stays shown (a focused
        widget in a hidden pane would bring its pane back)."""
        if tab == "diagnosis":
            self.query_one(FindingsTree).focus()
        elif tab == "gpus":
            table = self.query_one(GpuView).table()
            (table if table.display else self.query_one(TabbedContent).query_one(Tabs)).focus()
        else:
            self.query_one(ActivePanel).main_widget().focus()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        shown = {"gpus": GpuView, "tests": ActivePanel}.get(self.query_one(TabbedContent).active)
        if shown is not None:
            self.query_one(shown).build()  # its widgets, the first time it is shown
        pane = self.query_one(TabbedContent).active_pane
        # a click on a tab keeps the focus on the tabs; anything else moves it into the shown view
        if not isinstance(self.focused, Tabs) and (self.focused is None or pane not in self.focused.ancestors):
            self._focus_tab(self.query_one(TabbedContent).active)
        self._tick_gpus()

    def selected_finding(self) -> Finding | None:
        node = self.query_one(FindingsTree).cursor_node
        return node.data.finding if node is not None and node.data is not None else None

    def action_fix(self) -> None:
        from doctor.tui import fixes, screens

        f = self.selected_finding()
        if f is None:
            self.notify("Select a finding first (the Diagnosis view).", severity="warning")
        elif self.report is None or not fixes.script_formats(self.report, [f]):
            self.notify("This finding carries no fix.", severity="information")
        else:
            self.push_screen(screens.FixScreen(self.report, [f], f"Fix: {f.title}"))

    def action_fix_all(self) -> None:
        from doctor.tui import fixes, screens

        report = self.report
        problems = [f for f in (report.findings if report else []) if f.severity in ("fail", "warn")]
        if report is None or not problems or not fixes.script_formats(report, problems):
            self.notify("No problem here carries a fix.", severity="information")
            return
        self.push_screen(screens.FixScreen(report, problems, f"Fixes for every problem: {self.source.title}"))

    def action_rerun(self) -> None:
        if self.source.load is None and self.source.facts is None:
            return
        self.notify("Probing this machine…" if self.source.live else "Re-running the checks…", timeout=2)
        self._diagnose(self.index, reload=True)

    def action_help(self) -> None:
        from doctor.tui import screens

        rows = [("↑ ↓ j k", "move in the findings; enter opens/closes an area"),
                ("tab", "next pane (findings, explanation, tabs)")]
        for b in self.BINDINGS:
            assert isinstance(b, Binding)
            if b.action == "next_snapshot" and len(self.sources) < 2:
                continue
            if b.action in ("previous_snapshot", "pick_snapshot") and len(self.sources) < 2:
                continue
            keys = " ".join(b.key_display or k for k in b.key.split(","))
            rows.append((keys if "," not in b.key else b.key.replace(",", " ").replace("question_mark", "?"),
                         self.ACTION_HELP.get(b.action, b.description)))
        rows += [(b.key_display or b.key, f"fix view: {b.description.lower()}") for b in screens.FixScreen.BINDINGS
                 if isinstance(b, Binding)]
        rows.append(("ctrl+p", "command palette: every action by name"))
        self.push_screen(screens.HelpScreen(rows))

    def action_export(self) -> None:
        if self.report is None:
            self.notify("Nothing to export yet: the diagnosis is still running.", severity="warning")
            return
        from doctor.tui import screens

        report = model.with_active(self.report, self.results)  # the active tests run here belong to the report

        def chosen(answer: str | None) -> None:
            if answer:
                kind, _, path = answer.partition(":")
                self.write_file(path, model.export_text(kind, report, self.source.title))

        self.push_screen(screens.ExportDialog(), chosen)

    def write_file(self, path: str, text: str, executable: bool = False) -> Path | None:
        from doctor.tui import screens

        return screens.write_and_tell(self, path, text, executable)

    # --- snapshots (the demo's examples) ------------------------------------------------------------

    def action_next_snapshot(self) -> None:
        self.show_source((self.index + 1) % len(self.sources))

    def action_previous_snapshot(self) -> None:
        self.show_source((self.index - 1) % len(self.sources))

    def action_pick_snapshot(self) -> None:
        from doctor.tui import screens

        def picked(index: int | None) -> None:
            if index is not None and index != self.index:
                self.show_source(index)

        self.push_screen(screens.SnapshotPicker(self.sources, self.index), picked)

    # --- the GPU table ----------------------------------------------------------------------------

    def _tick_gpus(self) -> None:
        if self.gpu_sampler is None or not self.source.live or self._sampling or self.report is None:
            return
        tabs = self.query(TabbedContent)  # absent while another screen (fix, help, a dialog) is on top
        if not tabs or tabs.first().active != "gpus":
            return  # sample only while someone looks
        if not model.driver_gpus(self.report.facts):
            return  # no GPU answered the probe: the view says why; r probes again
        self._sampling = True
        self._sample_gpus(self.index)

    @work(thread=True, group="gpus", exit_on_error=False)
    def _sample_gpus(self, index: int) -> None:
        assert self.gpu_sampler is not None
        try:
            sample = self.gpu_sampler()
        except Exception as exc:
            from doctor.model.live import GpuSample

            sample = GpuSample([], f"{type(exc).__name__}: {exc}")
        self.call_from_thread(self._apply_sample, index, sample)

    def _apply_sample(self, index: int, sample: GpuSample) -> None:
        self._sampling = False
        if index != self.index:
            return
        view = self.query_one(GpuView)
        stamp = now().strftime("%H:%M:%S")
        if sample.gpus:
            view.show_gpus(sample.gpus)
            view._status(f"live: NVML every {self.refresh_interval:g} s · updated {stamp}")
        else:
            if self.last_sample is None or self.last_sample.error != sample.error:
                self.notify(f"NVML gave no GPU list: {sample.error}", severity="warning")
            view._status(f"live: NVML did not answer at {stamp}: {sample.error}")
        self.last_sample = sample

    # --- active tests -----------------------------------------------------------------------------

    def _refresh_active(self) -> None:
        self.query_one(ActivePanel).show_state(self.unavailable, self.results, self.running_test)

    def action_smoke(self) -> None:
        self._start_test(active.SMOKE)

    def action_oom(self) -> None:
        self._start_test(active.OOM)

    def on_button_pressed(self, event: object) -> None:
        button = getattr(event, "button", None)
        ident = getattr(button, "id", None)
        if ident == "run-smoke":
            self.action_smoke()
        elif ident == "run-oom":
            self.action_oom()
        elif ident == "cancel-active":
            self.action_cancel_active()

    def _start_test(self, test: active.ActiveTest) -> None:
        self.action_show_tab("tests")
        reason = self.unavailable
        if reason:
            self.notify(f"{test.title}: {reason}.", severity="warning")
            return
        if self.running_test:
            self.notify("A test is running already; press c to cancel it.", severity="warning")
            return
        if self.report is None:
            self.notify("Wait for the diagnosis to finish first.", severity="warning")
            return
        if test.confirm:
            from doctor.tui import screens

            self.push_screen(screens.ConfirmDialog(test.confirm), lambda yes: self._run_test(test) if yes else None)
        else:
            self._run_test(test)

    def _run_test(self, test: active.ActiveTest) -> None:
        assert self.report is not None
        self.running_test = test.id
        self.results.pop(test.id, None)
        self.query_one(ActivePanel).start(test)
        self._refresh_active()
        self._active_worker(test, self.report.facts)

    @work(thread=True, group="active", exit_on_error=False)
    def _active_worker(self, test: active.ActiveTest, facts: Facts) -> None:
        worker = get_current_worker()
        outcome: active.Outcome | None = None
        assert self.runner is not None
        events: Iterator[active.Event] | None = None
        try:
            events = self.runner(test, facts)
            for ev in events:
                if worker.is_cancelled:
                    outcome = active.Outcome("error", "cancelled")
                    break
                self.call_from_thread(self._active_event, test, ev)
                if isinstance(ev, active.Outcome):
                    outcome = ev
                    break
        except Exception as exc:
            outcome = active.Outcome("error", f"crashed: {type(exc).__name__}: {exc}")
        finally:
            # A cancelled engine test kills its child process now (the generator's cleanup), not at garbage
            # collection; a failing cleanup must not leave the test marked as running.
            with contextlib.suppress(Exception):
                getattr(events, "close", lambda: None)()
        self.call_from_thread(self._active_done, test, outcome or active.Outcome("error", "ended without a result"))

    def _active_event(self, test: active.ActiveTest, ev: active.Event) -> None:
        self.query_one(ActivePanel).event(test, ev)

    def _active_done(self, test: active.ActiveTest, outcome: active.Outcome) -> None:
        self.running_test = None
        self.results[test.id] = outcome
        panel = self.query_one(ActivePanel)
        panel.event(test, outcome)
        self._refresh_active()
        if self.report is not None:
            self.query_one(FindingsTree).refresh_active(self.results, self.unavailable)
            self.query_one(SummaryBar).show(self.source, model.with_active(self.report, self.results),
                                            self.position())
        sev: SeverityLevel = ("information" if outcome.status == "ok" else "warning" if outcome.status == "warn"
                              else "error")
        self.notify(f"{test.title}: {active.result_line(test, outcome)}", severity=sev)

    def action_cancel_active(self) -> None:
        if self.running_test is None:
            self.notify("No test is running.", severity="information")
            return
        self.workers.cancel_group(self, "active")
        self.notify("Cancelling…", timeout=2)

    # --- command palette ----------------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Re-run checks", "Diagnose again (probes this machine when live)", self.action_rerun)
        yield SystemCommand("Show fix script", "The selected finding's fix as a script: apt/dnf, pip, conda or bash",
                            self.action_fix)
        yield SystemCommand("Fix script for every problem", "One script for every failure and warning",
                            self.action_fix_all)
        yield SystemCommand("Run the smoke test", active.SMOKE.what, self.action_smoke)
        yield SystemCommand("Run the OOM probe", active.OOM.what, self.action_oom)
        yield SystemCommand("Export report or snapshot", "JSON report, Markdown report, or the facts",
                            self.action_export)
        yield SystemCommand("Show GPUs", "The GPU table", lambda: self.action_show_tab("gpus"))
        yield SystemCommand("Help", "Every key binding", self.action_help)
        if len(self.sources) > 1:
            yield SystemCommand("Next example", "Switch to the next example host", self.action_next_snapshot)
            yield SystemCommand("Choose example", "Pick an example host from the list", self.action_pick_snapshot)
