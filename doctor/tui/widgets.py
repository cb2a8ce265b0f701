"""The widgets of the main screen: summary bar, findings tree, detail pane, key bar, GPU view, active tests.

Start-up speed (issue 23: the first frame within 0.6 s): the first frame shows the summary, the findings and the
key bar, so only their Textual modules are imported here; the GPU view and the active-test panel are in tabs that
are not shown at first, and make their widgets (a DataTable, buttons, a progress bar, a log: their modules and
their stylesheets) the first time their tab is shown (:class:`Deferred`). The model's types are annotations only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Footer, Static, Tree  # each imports its own module only (textual.widgets is lazy)
from textual.widgets._footer import FooterKey  # the keys of the footer (not exported by textual.widgets)
from textual.widgets.tree import TreeNode

from doctor.model.records import dataclass
from doctor.safeio import visible
from doctor.tui import active, model
from doctor.tui.model import MARKS, AreaView, Source

if TYPE_CHECKING:
    from textual.screen import Screen
    from textual.widgets import DataTable, Log

    from doctor.model.facts import Facts, Gpu
    from doctor.model.findings import Finding
    from doctor.model.report import CheckResult, Report

SEVERITY_STYLE = {"fail": "bold red", "warn": "bold yellow", "info": "dim", "ok": "green", "none": "dim",
                  "unknown": "bold magenta"}


def mark(severity: str) -> Text:
    return Text(MARKS[severity], style=SEVERITY_STYLE[severity])


def safe(text: Text) -> Text:
    """A Text built from facts, made safe to show: control characters (ESC, C1, NUL …) become visible stand-ins,
    one for one, so the styles stay put. Data only ever reaches the screen inside a Text, never as a markup
    string: a GPU named "[@click=app.quit]" is shown, not obeyed."""
    text.plain = visible(text.plain)
    return text


def cell(value: object) -> Text:
    """A table cell from data: a Text (a str cell would be parsed as markup by DataTable)."""
    return value if isinstance(value, Text) else Text(visible(str(value), line=True))


# --- summary bar ----------------------------------------------------------------------------------


class SummaryBar(Static):
    """Status, what is being looked at, and the host line of the text report."""

    def show(self, source: Source, report: Report | None, position: str = "") -> None:
        text = Text()
        text.append(f"{position}{source.title}", style="bold")
        if source.live:
            text.append(" (live)", style="dim")
        text.append("  ")
        if report is None:
            text.append("… probing this machine" if source.live else "… diagnosing", style="bold")
        else:
            text.append_text(mark(report.status))
            text.append(f" {model.STATUS_WORDS[report.status]}", style=SEVERITY_STYLE[report.status])
            text.append("  " + " ".join(f"{n}{MARKS[s]}" for s in ("fail", "warn", "ok")
                                        if (n := sum(1 for f in report.findings if f.severity == s))))
        if source.description:
            text.append(f"\n{source.description}", style="italic")
        if report is not None:
            text.append("\n" + model.host_line(report), style="dim")
        self.update(safe(text))


# --- key bar --------------------------------------------------------------------------------------


class KeyBar(Footer):
    """Textual's footer, with its keys in the first frame and recomposed only when they change.

    Textual's Footer composes empty and fills in its keys when the screen first publishes its bindings (after the
    first focus), one frame later; and it recomposes all its keys at every focus change, even when the keys shown
    stay the same. Here the keys are those of the screen's active bindings from the start (the app's keys: the
    same ones Textual would show a moment later), and a change of focus recomposes only if what is shown changed.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.set_reactive(Footer._bindings_ready, True)
        self._composed: tuple[object, ...] | None = None
        self._recompose_queued = False

    def shown(self) -> tuple[object, ...]:
        """What the key bar shows of the screen's active bindings (the command palette's key included)."""
        palette = self.app.COMMAND_PALETTE_BINDING if self.show_command_palette else None
        return tuple((key, b.binding, b.enabled, b.tooltip) for key, b in self.screen.active_bindings.items()
                     if b.binding.show or key == palette)

    def compose(self) -> ComposeResult:
        self._composed = self.shown()
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                # The class its `compact` watcher sets once mounted (the footer's compact, bound to each key), set
                # before its first styling: the watcher then finds it in place and does not style the key again.
                widget.set_class(self.compact, "-compact", update=False)
            yield widget

    def bindings_changed(self, screen: Screen[Any]) -> None:
        if not screen.app.app_focus or not self.is_attached or screen is not self.screen:
            return
        if not self._recompose_queued and self.shown() != self._composed:
            self._recompose_queued = True
            self.call_after_refresh(self._recompose)

    async def _recompose(self) -> None:
        self._recompose_queued = False
        await self.recompose()


# --- findings tree --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """What a tree node stands for; the detail pane renders it."""

    kind: str  # area | finding | passed | not_checked | active_area | active_test
    area: AreaView | None = None
    finding: Finding | None = None
    test: active.ActiveTest | None = None


class FindingsTree(Tree[Node]):
    BINDINGS = [  # noqa: RUF012 (Textual's own convention)
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(Text("report"), **kwargs)  # a Text: a str label is parsed as markup (rich's emoji table)
        self.show_root = False
        self.guide_depth = 2

    def on_resize(self, event: Any) -> None:
        """Keep the cursor's line in sight when the tree changes height (the narrow layout, the summary growing
        when a report arrives): otherwise the first failure can sit just below the visible rows."""
        node = self.cursor_node
        if node is not None:
            self.call_after_refresh(self.scroll_to_node, node, False)

    def build(self, report: Report, results: dict[str, active.Outcome], unavailable: str | None) -> None:
        self.clear()
        for area in model.areas(report):
            label = Text.assemble(mark(area.status), f" {area.name} ", (area.counts_text(), "dim"))
            node = self.root.add(safe(label), Node("area", area=area), expand=area.status in ("fail", "warn"))
            for f in area.problems:
                node.add_leaf(safe(Text.assemble(mark(f.severity), f" {model.tree_title(f.title)}")),
                              Node("finding", area=area, finding=f))
            if area.passed:
                passed = node.add(Text.assemble(mark("ok"), f" {len(area.passed)} passed"), Node("passed", area=area))
                for f in area.passed:
                    passed.add_leaf(safe(Text.assemble(mark(f.severity), f" {model.tree_title(f.title)}")),
                                    Node("finding", area=area, finding=f))
            if area.not_checked:
                node.add_leaf(Text(f"· {len(area.not_checked)} not checked", style="dim"),
                              Node("not_checked", area=area))
        self._add_active(results, unavailable)

    def _add_active(self, results: dict[str, active.Outcome], unavailable: str | None) -> None:
        self._active_node = self.root.add("Active tests", Node("active_area"))
        self.refresh_active(results, unavailable)

    def refresh_active(self, results: dict[str, active.Outcome], unavailable: str | None) -> None:
        """Relabel the Active tests area in place: the cursor and the open areas stay where they are."""
        node = self._active_node
        worst = max((r.status for r in results.values()), key=lambda s: model.SEVERITY_ORDER.get(s, 0), default=None)
        status = {"error": "fail"}.get(worst or "", worst or "none")
        counts = "unavailable" if unavailable else (f"{len(results)} run" if results else "not run")
        node.set_label(Text.assemble(mark(status), " Active tests ", (counts, "dim")))
        node.remove_children()
        for test in active.TESTS:
            res = results.get(test.id)
            sev = {"error": "fail"}.get(res.status, res.status) if res else "none"
            label = f" {test.title}" + (f": {active.result_line(test, res)}" if res else "")
            node.add_leaf(safe(Text.assemble(mark(sev), label)), Node("active_test", test=test))
        if results:
            node.expand()

    def content_width(self) -> int:
        """Columns the widest line of the tree needs: its label after the guides of its depth (root hidden)."""
        widest = 0
        for node in self.nodes():
            depth, parent = 0, node.parent
            while parent is not None and parent is not self.root:
                depth, parent = depth + 1, parent.parent
            label = node.label
            cells = label.cell_len if isinstance(label, Text) else len(str(label))
            widest = max(widest, (depth + 1) * self.guide_depth + cells)
        return widest

    def nodes(self) -> list[TreeNode[Node]]:
        out: list[TreeNode[Node]] = []

        def walk(n: TreeNode[Node]) -> None:
            for child in n.children:
                out.append(child)
                walk(child)

        walk(self.root)
        return out

    def find(self, finding: Finding) -> TreeNode[Node] | None:
        return next((n for n in self.nodes() if n.data and n.data.finding is finding), None)


# --- detail pane ----------------------------------------------------------------------------------


class FindingDetail(VerticalScroll):
    """The explanation of what the tree's cursor is on."""

    can_focus = True

    def compose(self) -> ComposeResult:
        yield Static(id="detail-body")

    def show(self, node: Node | None, report: Report | None, results: dict[str, active.Outcome],
             unavailable: str | None) -> None:
        body = self.query_one("#detail-body", Static)
        if report is None:
            body.update(Text("Waiting for the diagnosis…", style="dim"))
        elif node is None:
            body.update(safe(Text(model.status_line(report))))
        elif node.kind == "finding" and node.finding:
            body.update(safe(finding_text(node.finding)))
        elif node.kind == "area" and node.area:
            body.update(safe(area_text(node.area, report)))
        elif node.kind == "passed" and node.area:
            body.update(safe(list_text(f"{node.area.name}: passed", node.area.passed)))
        elif node.kind == "not_checked" and node.area:
            body.update(safe(not_checked_text(node.area.name, node.area.not_checked)))
        elif node.kind in ("active_area", "active_test"):
            body.update(safe(active_text(node.test, results, unavailable)))
        self.scroll_home(animate=False)


def _heading(text: Text, title: str) -> None:
    text.append(f"\n\n{title}\n", style="bold underline")


def finding_text(f: Finding) -> Text:
    """Title, then the fix (at 80×24 the pane shows ~15 lines: what to do must be among them), then why."""
    text = Text()
    text.append_text(mark(f.severity))
    text.append(f" {f.severity.upper()}  ", style=SEVERITY_STYLE[f.severity])
    text.append(f.title, style="bold")
    if f.fix:
        _heading(text, "Fix")
        text.append(f.fix.summary)
        for step in f.fix.steps:
            text.append("\n  $ ", style="dim")
            text.append(step.shell(), style="bold")
            extra = [x for x in (step.note, None if step.risk == "safe" else f"risk: {step.risk}") if x]
            if extra:
                text.append(f"   # {'; '.join(extra)}", style="dim")
        text.append("\npress f for the fix script", style="italic dim")
    if f.detail:
        if f.fix:
            _heading(text, "Why")
            text.append(f.detail)
        else:
            text.append("\n\n" + f.detail)
    facts_ev, rules = model.split_evidence(f)
    if facts_ev:
        _heading(text, "Evidence")
        for e in facts_ev:
            text.append(f"  {e.fact}", style="bold")
            text.append(f" = {model.value_text(e.value)}")
            if e.source:
                text.append(f"  [{e.source}]", style="dim")
            text.append("\n")
        text.rstrip()
    if rules:
        _heading(text, "Matrix rule")
        for e in rules:
            text.append(f"  {e.fact}", style="bold")
            text.append(f": {model.value_text(e.value)}\n")
            text.append(f"    source: {e.source}\n", style="dim underline")
        text.rstrip()
    ident = f"code {f.code} · check {f.check}" if f.severity in ("fail", "warn") else f"check {f.check or f.code}"
    text.append(f"\n\n{ident}", style="dim")  # a passing line has no failure code to show
    return text


def area_text(area: AreaView, report: Report) -> Text:
    text = Text()
    text.append_text(mark(area.status))
    text.append(f" {area.name}", style="bold")
    text.append(f"  {area.counts_text()}", style="dim")
    checks = [c for c in report.checks if c.area == area.name]
    if checks:
        _heading(text, "Checks")
        for c in checks:
            sev = c.status if c.status in MARKS else "none"
            text.append_text(mark(sev))
            text.append(f" {c.id}", style="bold")
            text.append(f"  {c.summary}\n")
        text.rstrip()
    return text


def list_text(title: str, findings: list[Finding]) -> Text:
    text = Text(title, style="bold")
    text.append("\n")
    for f in findings:
        text.append("\n")
        text.append_text(mark(f.severity))
        text.append(f" {f.title}")
    return text


def not_checked_text(area: str, checks: list[CheckResult]) -> Text:
    text = Text(f"{area}: not checked", style="bold")
    text.append("\nThese checks did not run, and why:\n", style="dim")  # not "on this machine": also snapshots
    for c in checks:
        text.append(f"\n· {c.id}", style="bold")
        text.append(f"  {c.reason or c.status}")
    return text


def active_text(test: active.ActiveTest | None, results: dict[str, active.Outcome], unavailable: str | None) -> Text:
    text = Text("Active tests", style="bold")
    text.append("\nStatic checks say what should work; only running something says it works.\n", style="dim")
    for t in (test,) if test else active.TESTS:
        text.append(f"\n{t.title}", style="bold")
        key = "s" if t.id == "smoke" else "o"
        text.append(f"  (key {key})\n", style="dim")
        text.append(t.what + "\n")
        res = results.get(t.id)
        if res:
            text.append(f"Result: {active.result_line(t, res)}\n", style=SEVERITY_STYLE.get(res.status, "bold red"))
            for f in res.findings:
                text.append_text(mark(f.severity))
                text.append(f" {f.title}\n")
    if unavailable:
        text.append(f"\n{unavailable[0].upper()}{unavailable[1:]}.", style="italic")
    return text


# --- views of the tabs not shown at first ---------------------------------------------------------


class Deferred(Vertical):
    """A view whose widgets are made the first time it is shown (:meth:`build`), not for the first frame.

    What it is asked to show before that is remembered, the latest request only, and shown when it is built."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = False
        self._pending: Callable[[], None] | None = None

    def make(self) -> None:
        """Mount the widgets, each container before what it holds: every one is in the DOM when this returns."""
        raise NotImplementedError

    def build(self) -> None:
        if self.built:
            return
        self.built = True
        self.make()
        self.on_built()
        pending, self._pending = self._pending, None
        if pending is not None:
            pending()

    def on_built(self) -> None:
        """The widgets are in place (mounted in this same call): set them up."""

    def later(self, call: Callable[[], None]) -> bool:
        """True when ``call`` was kept for when the view is built, False when it is built (the caller goes on)."""
        if self.built:
            return False
        self._pending = call
        return True


class GpuView(Deferred):
    """The GPU table (every GPU a driver answered for), or why there is none."""

    def make(self) -> None:
        from textual.widgets import DataTable

        self.mount_all([Static(id="gpu-status"), DataTable(id="gpu-table", cursor_type="row", zebra_stripes=True),
                        Static(id="gpu-reason")])

    def on_built(self) -> None:
        table = self.table()
        for col in model.GPU_COLUMNS:
            table.add_column(col, key=col)

    def table(self) -> DataTable[Any]:
        self.build()
        return cast("DataTable[Any]", self.query_one("#gpu-table"))

    def show_facts(self, facts: Facts | None, live: bool) -> None:
        if self.later(lambda: self.show_facts(facts, live)):
            return
        if facts is None:
            self._status("waiting for the first probe…")
            return
        gpus = model.driver_gpus(facts)
        if gpus:
            self.show_gpus(gpus)
            self._status(f"live: NVML every {self.app_interval():g} s" if live else
                         f"recorded {facts.collected_at or 'at an unknown time'} (a snapshot: static)")
        else:
            self.show_none(model.no_table_reason(facts))

    def app_interval(self) -> float:
        return float(getattr(self.app, "refresh_interval", 1.0))

    def show_gpus(self, gpus: list[Gpu]) -> None:
        table = self.table()
        table.display = True
        self.query_one("#gpu-reason", Static).display = False
        rows = [model.gpu_row(g) for g in gpus]
        if table.row_count == len(rows):
            for i, row in enumerate(rows):
                for col, value in zip(model.GPU_COLUMNS, row, strict=True):
                    table.update_cell(str(i), col, cell(value))
        else:
            table.clear()
            for i, row in enumerate(rows):
                table.add_row(*(cell(v) for v in row), key=str(i))

    def show_none(self, reason: list[str]) -> None:
        self.table().display = False
        body = self.query_one("#gpu-reason", Static)
        body.display = True
        text = Text(reason[0], style="bold")
        for line in reason[1:]:
            text.append("\n" + line)
        body.update(safe(text))
        self._status("no GPU table")

    def _status(self, line: str) -> None:
        self.build()
        self.query_one("#gpu-status", Static).update(safe(Text(line, style="dim")))


# --- active tests ---------------------------------------------------------------------------------


class ActivePanel(Deferred):
    """The two tests with their run buttons, a progress bar and the live log of the running test."""

    def make(self) -> None:
        from textual.widgets import Button, Log, ProgressBar

        buttons, run = Horizontal(id="active-buttons"), Vertical(id="active-run")  # run: shown once a test started
        self.mount_all([Static(id="active-intro"), buttons, run])
        buttons.mount_all([Button("Smoke test (s)", id="run-smoke", compact=True),
                           Button("OOM probe (o)", id="run-oom", compact=True),
                           Button("Cancel (c)", id="cancel-active", compact=True, disabled=True)])
        run.mount_all([Static(id="active-step"),
                       ProgressBar(total=100, id="active-progress", show_eta=False),  # determinate: no idle animation
                       Log(id="active-log", max_lines=2000)])

    def on_built(self) -> None:
        self.query_one("#active-run").display = False

    def main_widget(self) -> Widget:
        """What takes the keys when the view is shown: the live log."""
        self.build()
        return self.query_one("#active-log")

    def show_state(self, unavailable: str | None, results: dict[str, active.Outcome], running: str | None) -> None:
        if self.later(lambda: self.show_state(unavailable, results, running)):
            return
        intro = Text()
        for t in active.TESTS:
            res = results.get(t.id)
            intro.append_text(mark({"error": "fail"}.get(res.status, res.status) if res else "none"))
            intro.append(f" {t.title}: ", style="bold")
            intro.append(active.result_line(t, res) if res else ("running…" if running == t.id else "not run"))
            intro.append("\n")
            if running is None and not results:  # before the first run: what each test does
                intro.append(f"{t.what}\n", style="dim")
        if unavailable:
            intro.append(f"{unavailable[0].upper()}{unavailable[1:]}.", style="italic")
        intro.rstrip()  # in place
        self.query_one("#active-intro", Static).update(intro)
        for b in ("#run-smoke", "#run-oom"):
            self.query_one(b).disabled = bool(unavailable) or running is not None
        self.query_one("#cancel-active").disabled = running is None

    def start(self, test: active.ActiveTest) -> None:
        self.build()
        self.query_one("#active-run").display = True
        cast("Log", self.query_one("#active-log")).clear()
        bar: Any = self.query_one("#active-progress")
        bar.update(total=None, progress=0)
        self.query_one("#active-step", Static).update(Text(f"{test.title}: starting", style="bold"))

    def event(self, test: active.ActiveTest, ev: active.Event) -> None:
        self.build()
        bar: Any = self.query_one("#active-progress")
        if isinstance(ev, active.Progress):
            if ev.fraction is None:
                bar.update(total=None)
            else:
                bar.update(total=100, progress=round(100 * max(0.0, min(1.0, ev.fraction))))
            if ev.step:
                where = f"GPU {ev.gpu}: " if ev.gpu is not None else ""
                self.query_one("#active-step", Static).update(Text(f"{test.title}: {where}{ev.step}", style="bold"))
        elif isinstance(ev, active.Log):
            cast("Log", self.query_one("#active-log")).write_line(visible(ev.line, line=True))
        elif isinstance(ev, active.Outcome):
            bar.update(total=100, progress=100)
            self.query_one("#active-step", Static).update(
                Text.assemble(mark({"error": "fail"}.get(ev.status, ev.status)),
                              f" {test.title}: {active.result_line(test, ev)}"))
