"""Where the user types: Enter (or Ctrl+Enter) sends, Shift+Enter starts a new line, Esc stops the reply or
leaves editing. One button is Send while idle and Stop while a reply streams. Editing an earlier message shows a
banner above the box."""
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QSizePolicy, QVBoxLayout, QWidget


class MessageInput(QPlainTextEdit):
    submitted = Signal()
    escaped = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setPlaceholderText("Message the model — Enter sends, Shift+Enter for a new line")
        self.setAccessibleName("Message")
        self.setTabChangesFocus(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._fit()

    def _fit(self, *_args) -> None:
        """Grow with the text, from 2 to 8 lines."""
        line = QFontMetrics(self.font()).lineSpacing()
        lines = min(max(int(self.document().size().height()), 2), 8)   # the plain-text layout counts lines
        margins = self.contentsMargins()
        doc_margin = 2 * self.document().documentMargin()
        self.setFixedHeight(int(lines * line + doc_margin + margins.top() + margins.bottom()))

    def keyPressEvent(self, event) -> None:
        key, mods = event.key(), event.modifiers()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if mods & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
            else:
                self.submitted.emit()
            return
        if key == Qt.Key.Key_Escape:
            self.escaped.emit()
            return
        super().keyPressEvent(event)


class Composer(QWidget):
    send_requested = Signal(str)          # the text to send (Send, Enter)
    stop_requested = Signal()
    edit_cancelled = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 4, 12, 8)
        self.banner = QLabel()
        self.banner.setWordWrap(True)
        self.banner.hide()
        layout.addWidget(self.banner)
        row = QHBoxLayout()
        self.input = MessageInput(self)
        row.addWidget(self.input, 1)
        self.button = QPushButton("Send")
        self.button.setDefault(False)
        self.button.setAutoDefault(False)
        self.button.clicked.connect(self._on_button)
        row.addWidget(self.button, 0, Qt.AlignmentFlag.AlignBottom)
        layout.addLayout(row)
        self.input.submitted.connect(self.submit)
        self.input.escaped.connect(self._on_escape)
        self.editing: int | None = None
        self._busy = False
        self.set_busy(False)

    @property
    def text(self) -> str:
        return self.input.toPlainText()

    def set_text(self, text: str) -> None:
        self.input.setPlainText(text)
        self.input.moveCursor(self.input.textCursor().MoveOperation.End)

    def submit(self) -> None:
        """Send what is typed (even while a reply streams: the new message replaces that reply's run)."""
        text = self.text
        if text.strip():
            self.send_requested.emit(text)

    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        self.button.setText("Stop" if busy else "Send")
        self.button.setToolTip("Stop the reply (Esc)" if busy else "Send the message (Enter)")
        self.button.setAccessibleName(self.button.toolTip())

    def _on_button(self) -> None:
        if self._busy:
            self.stop_requested.emit()
        else:
            self.submit()

    def _on_escape(self) -> None:
        if self._busy:
            self.stop_requested.emit()
        elif self.editing is not None:
            self.cancel_edit()

    def begin_edit(self, index: int, text: str) -> None:
        self.editing = index
        self.banner.setText("Editing an earlier message: sending replaces it and everything after it "
                            "(Esc cancels).")
        self.banner.show()
        self.set_text(text)
        self.input.setFocus()

    def cancel_edit(self) -> None:
        if self.editing is not None:
            self.editing = None
            self.banner.hide()
            self.input.clear()
            self.edit_cancelled.emit()

    def end_edit(self) -> None:
        self.editing = None
        self.banner.hide()
