"""The floor under the TUI's first paint: the least a Textual app with a key bar costs on this machine.

One App, one binding (q Quit), one Footer, nothing else: what `benchmarks/tui_speed.py` measures for it is the
interpreter's start, Textual's import, the App's start and its first frame with the key bar on screen, in the
same pseudo-terminal as the TUI. No first paint of gpu-doctor can come sooner."""

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Footer


class Floor(App[None]):
    BINDINGS = [Binding("q", "quit", "Quit")]  # noqa: RUF012 (Textual's convention)

    def compose(self) -> ComposeResult:
        yield Footer()


if __name__ == "__main__":
    Floor().run()
