"""The sources under a reply: one link per passage the question was given ("[1] notes.md, lines 4-9"); clicking
one shows the passage below the links (its file, where it is in it, and its text), clicking it again hides it."""
import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget


class SourcesView(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.sources: list[dict] = []
        self.shown: int | None = None          # the number of the passage on show
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 2, 0, 0)
        layout.setSpacing(2)
        self.links = QLabel()
        self.links.setObjectName("documentSources")
        self.links.setTextFormat(Qt.TextFormat.RichText)
        self.links.setWordWrap(True)
        self.links.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse |
                                           Qt.TextInteractionFlag.LinksAccessibleByKeyboard)
        self.links.setAccessibleName("Sources of this reply")
        self.links.linkActivated.connect(self._on_link)
        layout.addWidget(self.links)
        self.passage = QLabel()
        self.passage.setObjectName("documentPassage")
        self.passage.setTextFormat(Qt.TextFormat.PlainText)
        self.passage.setWordWrap(True)
        self.passage.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.passage.setFrameShape(QLabel.Shape.StyledPanel)
        self.passage.setAccessibleName("Source passage")
        layout.addWidget(self.passage)
        self.set_sources(None)

    def set_sources(self, sources: list | None) -> None:
        self.sources = list(sources or [])
        self.links.setText("Sources: " + " · ".join(
            f'<a href="source:{s["n"]}">[{s["n"]}] {html.escape(s["name"])}, {html.escape(s["location"])}</a>'
            for s in self.sources) if self.sources else "")
        self.setVisible(bool(self.sources))
        self.show_source(None)

    def link_texts(self) -> list[str]:
        """The links as a person reads them: ['[1] notes.md, lines 4-9', ...]."""
        return [f"[{s['n']}] {s['name']}, {s['location']}" for s in self.sources]

    def _on_link(self, href: str) -> None:
        if href.startswith("source:") and href[7:].isdigit():
            n = int(href[7:])
            self.show_source(None if n == self.shown else n)

    def show_source(self, n: int | None) -> None:
        """Show passage `n` (None: hide the passage)."""
        source = next((s for s in self.sources if s["n"] == n), None)
        self.shown = n if source is not None else None
        if source is not None:
            self.passage.setText(f"[{n}] {source['path']}, {source['location']}\n\n{source['text']}")
        self.passage.setVisible(source is not None)
