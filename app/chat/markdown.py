"""A read-only text view that renders Markdown (Qt's CommonMark importer, code blocks shaded in the bundled
monospace font) and grows to fit its text, for one chat message."""
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor, QTextFormat
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser

from app.fonts import MONO_FAMILY

CODE_BACKGROUND = QColor(0, 0, 0, 18)


class MarkdownView(QTextBrowser):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setOpenExternalLinks(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction
                                     | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self.viewport().setAutoFillBackground(False)
        self.setStyleSheet("QTextBrowser { background: transparent; }")
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._source = ""

    @property
    def source_text(self) -> str:
        """The text as given (Markdown source or plain text)."""
        return self._source

    def show_markdown(self, text: str) -> None:
        self._source = text
        self.setMarkdown(text)
        shade_code(self.document())
        self._fit()

    def show_plain(self, text: str) -> None:
        self._source = text
        self.setPlainText(text)
        self._fit()

    def _fit(self, *_args) -> None:
        self.document().setTextWidth(self.viewport().width())
        height = int(self.document().size().height() + 0.999) + 2 * self.frameWidth()
        if height != self.height():
            self.setFixedHeight(height)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit()


def shade_code(document) -> None:
    """Give fenced code blocks and inline code the monospace font and a light background."""
    mono = QTextCharFormat()
    mono.setFontFamilies([MONO_FAMILY, "monospace"])
    block = document.begin()
    while block.isValid():
        fmt = block.blockFormat()
        cursor = QTextCursor(block)
        if fmt.hasProperty(QTextFormat.Property.BlockCodeFence):
            fmt.setBackground(CODE_BACKGROUND)
            cursor.setBlockFormat(fmt)
            cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(mono)
        else:
            it = block.begin()
            while not it.atEnd():
                fragment = it.fragment()
                if fragment.charFormat().fontFixedPitch():
                    inline = QTextCharFormat(mono)
                    inline.setBackground(CODE_BACKGROUND)
                    c = QTextCursor(document)
                    c.setPosition(fragment.position())
                    c.setPosition(fragment.position() + fragment.length(), QTextCursor.MoveMode.KeepAnchor)
                    c.mergeCharFormat(inline)
                it += 1
        block = block.next()
