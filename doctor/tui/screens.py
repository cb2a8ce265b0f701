"""Screens and dialogs: the fix script, save/export, confirmation, help, the snapshot picker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.syntax import Syntax
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Input, Label, OptionList, RadioButton, RadioSet, Static, Tab, Tabs
from textual.widgets.option_list import Option

from doctor.model.findings import Finding
from doctor.model.report import Report
from doctor.safeio import visible
from doctor.tui import fixes, model


class FixScreen(Screen[None]):
    """The fix script of one finding (or of every problem), syntax-highlighted, to read, copy or save; ``f`` (or a
    click on a tab) switches between the formats :func:`fixes.script_formats` offers."""

    BINDINGS = [  # noqa: RUF012
        Binding("escape", "app.pop_screen", "Back"),
        Binding("s", "save", "Save…"),
        Binding("c", "copy", "Copy"),
        Binding("f", "next_format", "Format"),
    ]

    def __init__(self, report: Report, findings: list[Finding], heading: str) -> None:
        super().__init__()
        self.report = report
        self.findings = findings
        self.heading = heading
        self.formats = fixes.script_formats(report, findings)
        self.format = self.formats[0].id if self.formats else "apt"
        self._scripts: dict[str, str] = {}
        self.error: str | None = None  # why the shown format could not be rendered

    @property
    def script(self) -> str:
        """The script in the selected format ("" when it could not be rendered: :attr:`error` says why)."""
        if self.format not in self._scripts:
            try:
                self._scripts[self.format] = fixes.fix_script(self.report, self.findings, self.format)
                self.error = None
            except Exception as exc:  # a renderer bug is a message on the screen, not a crash
                self.error = f"The {self.format} script could not be written: {type(exc).__name__}: {exc}"
                return ""
        return self._scripts[self.format]

    def compose(self) -> ComposeResult:
        yield Static(Text(self.heading, style="bold"), id="fix-title")
        yield Tabs(*[Tab(f.label, id=f"fmt-{f.id}") for f in self.formats], id="fix-formats")
        yield Static(id="fix-about")
        with VerticalScroll(id="fix-body"):
            yield Static(id="fix-script")
        yield Footer()

    def on_mount(self) -> None:
        self._render_script()
        self.query_one("#fix-body").focus()

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        if event.tab and event.tab.id and event.tab.id.removeprefix("fmt-") != self.format:
            self.format = event.tab.id.removeprefix("fmt-")
            self._render_script()

    def action_next_format(self) -> None:
        ids = [f.id for f in self.formats]
        if len(ids) > 1:
            following = ids[(ids.index(self.format) + 1) % len(ids)] if self.format in ids else ids[0]
            # The format changes now, not when the tab's event arrives: keys pressed faster than the events are
            # handled (a loaded machine, a pasted key sequence) each move one format on.
            self.format = following
            self._render_script()
            self.query_one("#fix-formats", Tabs).active = f"fmt-{following}"

    def _render_script(self) -> None:
        about = next((f.about for f in self.formats if f.id == self.format), "")
        self.query_one("#fix-about", Static).update(Text(visible(about), style="dim italic"))
        script = self.script
        body = self.query_one("#fix-script", Static)
        if self.error:
            body.update(Text(visible(self.error), style="bold red"))
        else:  # shown with control characters as stand-ins; copied and saved exactly
            shown, _folded = model.fold_script(script)  # the steps in sight, not 100 lines of helpers
            body.update(Syntax(visible(shown), "bash", theme="ansi_dark", word_wrap=True))
        self.query_one("#fix-body", VerticalScroll).scroll_home(animate=False)

    def action_copy(self) -> None:
        script = self.script
        if not script:
            self.notify(self.error or "Nothing to copy.", severity="error")
            return
        self.app.copy_to_clipboard(script)
        self.notify(f"The {self.format} fix script is on the clipboard (terminals with OSC 52).")

    def action_save(self) -> None:
        script, fmt = self.script, self.format
        if not script:
            self.notify(self.error or "Nothing to save.", severity="error")
            return

        def saved(path: str | None) -> None:
            if path:
                write_and_tell(self.app, path, script, executable=True)

        self.app.push_screen(SaveDialog(f"Save the {fmt} fix script", fixes.script_file_name(self.findings, fmt)),
                             saved)


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
    """Choose what to export (the report in every registered format, the facts) and where; returns 'kind:path'."""

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
            yield Static(Text(visible(self.question)))  # a Text: the question may quote data, never markup
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
    target.write_text(text, encoding="utf-8", errors="backslashreplace")  # a lone surrogate from data
    if executable:
        target.chmod(0o755)
    return target.resolve()


def write_and_tell(app: App[Any], path: str, text: str, executable: bool = False) -> Path | None:
    """Write an export or a script and say so in a notification: where it went, or why it could not be written."""
    try:
        target = write_text(path, text, executable)
    except OSError as exc:
        app.notify(f"Could not write {path}: {exc.strerror or exc}", severity="error", timeout=8)
        return None
    app.notify(f"Wrote {target} ({len(text)} bytes).")
    return target
