"""Screens and dialogs: the fix script, save/export, confirmation, help, the snapshot picker."""

from __future__ import annotations

from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Input, Label, OptionList, RadioButton, RadioSet, Static, Tab, Tabs
from textual.widgets.option_list import Option

from doctor.engine import Report
from doctor.findings import Finding
from doctor.tui import fixes, model


class FixScreen(Screen[None]):
    """The fix script of one finding (or of every problem), syntax-highlighted, to read, copy or save."""

    BINDINGS = [  # noqa: RUF012
        Binding("escape", "app.pop_screen", "Back"),
        Binding("s", "save", "Save…"),
        Binding("c", "copy", "Copy"),
    ]

    def __init__(self, report: Report, findings: list[Finding], heading: str) -> None:
        super().__init__()
        self.report = report
        self.findings = findings
        self.heading = heading
        self.formats = fixes.script_formats(report, findings)
        self.format = self.formats[0].id if self.formats else "bash"

    @property
    def script(self) -> str:
        return fixes.fix_script(self.report, self.findings, self.format)

    def compose(self) -> ComposeResult:
        yield Static(Text(self.heading, style="bold"), id="fix-title")
        yield Tabs(*[Tab(f.label, id=f"fmt-{f.id}") for f in self.formats], id="fix-formats")
        missing = [p for p in fixes.PLANNED if p not in {f.id for f in self.formats}]
        if missing:
            yield Static(Text(f"{', '.join(missing)} scripts: not available yet (they come with fix plans).",
                              style="dim italic"), id="fix-planned")
        with VerticalScroll(id="fix-body"):
            yield Static(id="fix-script")
        yield Footer()

    def on_mount(self) -> None:
        self._render_script()
        self.query_one("#fix-body").focus()

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        if event.tab and event.tab.id:
            self.format = event.tab.id.removeprefix("fmt-")
            self._render_script()

    def _render_script(self) -> None:
        self.query_one("#fix-script", Static).update(
            Syntax(self.script, "bash", theme="ansi_dark", line_numbers=True, word_wrap=True))

    def action_copy(self) -> None:
        self.app.copy_to_clipboard(self.script)
        self.notify("Fix script copied to the clipboard (terminals with OSC 52).")

    def action_save(self) -> None:
        def saved(path: str | None) -> None:
            if path:
                self.app.write_file(path, self.script, executable=True)  # type: ignore[attr-defined]

        self.app.push_screen(SaveDialog("Save the fix script", fixes.script_file_name(self.findings)), saved)


class SaveDialog(ModalScreen[str | None]):
    """Ask for a file name; returns it (None when cancelled)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]  # noqa: RUF012

    def __init__(self, heading: str, default: str) -> None:
        super().__init__()
        self.heading = heading
        self.default = default

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label(Text(self.heading, style="bold"))
            yield from self.extra()
            yield Input(self.default, placeholder="file name", id="path")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Save", variant="primary", id="ok", compact=True)
                yield Button("Cancel", id="cancel", compact=True)

    def extra(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._done()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "ok":
            self._done()
        elif event.button.id == "cancel":
            self.dismiss(None)

    def _done(self) -> None:
        value = self.query_one(Input).value.strip()
        if not value:
            self.notify("Give a file name.", severity="warning")
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ExportDialog(SaveDialog):
    """Choose what to export (report JSON, report Markdown, facts) and where; returns 'kind:path'."""

    def __init__(self) -> None:
        super().__init__("Export", "gpu-doctor-report.json")
        self.kind = "report.json"

    def extra(self) -> ComposeResult:
        with RadioSet(id="export-kind"):
            for i, (kind, label) in enumerate(model.EXPORTS.items()):
                yield RadioButton(label, value=i == 0, name=kind)

    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        self.kind = event.pressed.name or "report.json"
        self.query_one(Input).value = f"gpu-doctor-{self.kind}"

    def _done(self) -> None:
        value = self.query_one(Input).value.strip()
        if not value:
            self.notify("Give a file name.", severity="warning")
            return
        self.dismiss(f"{self.kind}:{value}")


class ConfirmDialog(ModalScreen[bool]):
    BINDINGS = [  # noqa: RUF012
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str, yes: str = "Run") -> None:
        super().__init__()
        self.question = question
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Static(self.question)
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.yes} (y)", variant="warning", id="yes", compact=True)
                yield Button("Cancel (n)", id="no", compact=True)

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class HelpScreen(ModalScreen[None]):
    """Every key binding, read from the bindings themselves so the help cannot drift."""

    BINDINGS = [Binding("escape,question_mark,q", "app.pop_screen", "Close")]  # noqa: RUF012

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        text = Text("gpu-doctor — keys\n\n", style="bold")
        for keys, what in self.rows:
            text.append(keys.ljust(10), style="bold")
            text.append(f"{what}\n")
        text.append("\nThe mouse works too: click a finding, a tab or a button.", style="dim")
        with VerticalScroll(id="dialog", classes="dialog help"):
            yield Static(text)


class SnapshotPicker(ModalScreen[int | None]):
    """Pick one of the snapshots (the demo's examples); returns its index."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]  # noqa: RUF012

    def __init__(self, sources: list[model.Source], current: int) -> None:
        super().__init__()
        self.sources = sources
        self.current = current

    def compose(self) -> ComposeResult:
        options = [Option(Text.assemble((s.title, "bold"), "\n", (s.description, "dim")), id=str(i))
                   for i, s in enumerate(self.sources)]
        with Vertical(id="dialog", classes="dialog picker"):
            yield Label(Text("Example hosts", style="bold"))
            yield OptionList(*options, id="snapshots")

    def on_mount(self) -> None:
        ol = self.query_one(OptionList)
        ol.highlighted = self.current
        ol.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(int(event.option.id or 0))

    def action_cancel(self) -> None:
        self.dismiss(None)


def write_text(path: str, text: str, executable: bool = False) -> Path:
    """Write an export or a script; raises OSError with the reason."""
    target = Path(path).expanduser()
    target.write_text(text, encoding="utf-8")
    if executable:
        target.chmod(0o755)
    return target.resolve()
