"""Where the user types: Enter (or Ctrl+Enter) sends, Shift+Enter starts a new line, Esc stops the reply or
leaves editing. One button is Send while idle and Stop while a reply streams. Editing an earlier message shows a
banner above the box. Attach adds a text file to the next message (shown above the box, with Remove)."""
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (QFileDialog, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QSizePolicy,
                               QToolButton, QVBoxLayout, QWidget)

from app.chat.attachments import AttachmentError, read_attachment


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
    attachment_changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 4, 12, 8)
        self.banner = QLabel()
        self.banner.setWordWrap(True)
        self.banner.hide()
        layout.addWidget(self.banner)
        chip = QHBoxLayout()
        self.attachment_label = QLabel()
        self.attachment_label.setAccessibleName("Attached file")
        self.remove_attachment_button = QToolButton()
        self.remove_attachment_button.setText("Remove")
        self.remove_attachment_button.setToolTip("Do not send this file")
        self.remove_attachment_button.clicked.connect(lambda: self.set_attachment(None))
        chip.addWidget(self.attachment_label)
        chip.addWidget(self.remove_attachment_button)
        chip.addStretch(1)
        layout.addLayout(chip)
        row = QHBoxLayout()
        self.input = MessageInput(self)
        row.addWidget(self.input, 1)
        self.attach_button = QPushButton("Attach…")
        self.attach_button.setToolTip("Attach a text file to the message (its text is sent with it)")
        self.attach_button.setAccessibleName(self.attach_button.toolTip())
        self.attach_button.setAutoDefault(False)
        self.attach_button.clicked.connect(self.choose_attachment)
        row.addWidget(self.attach_button, 0, Qt.AlignmentFlag.AlignBottom)
        self.button = QPushButton("Send")
        self.button.setDefault(False)
        self.button.setAutoDefault(False)
        self.button.clicked.connect(self._on_button)
        row.addWidget(self.button, 0, Qt.AlignmentFlag.AlignBottom)
        layout.addLayout(row)
        self.input.submitted.connect(self.submit)
        self.input.escaped.connect(self._on_escape)
        self.editing: int | None = None
        self.attachment: dict | None = None
        self.file_dialog = None
        self._busy = False
        self.set_busy(False)
        self.set_attachment(None)

    @property
    def text(self) -> str:
        return self.input.toPlainText()

    def set_text(self, text: str) -> None:
        self.input.setPlainText(text)
        self.input.moveCursor(self.input.textCursor().MoveOperation.End)

    def submit(self) -> None:
        """Send what is typed (even while a reply streams: the new message replaces that reply's run)."""
        text = self.text
        if text.strip() or self.attachment is not None:
            self.send_requested.emit(text)

    def choose_attachment(self) -> None:
        self.file_dialog = QFileDialog(self, "Attach a text file")
        self.file_dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        self.file_dialog.fileSelected.connect(self.attach)
        self.file_dialog.open()

    def attach(self, path: str) -> bool:
        """Attach the text file at `path` to the next message; a file that is not text is refused, saying why."""
        try:
            self.set_attachment(read_attachment(path))
        except AttachmentError as e:
            self.attachment_label.setText(f"Not attached: {e}.")
            self.attachment_label.setStyleSheet("color: #a40000;")
            self.attachment_label.show()
            self.remove_attachment_button.hide()
            return False
        return True

    def set_attachment(self, attachment: dict | None) -> None:
        changed = attachment != self.attachment
        self.attachment = attachment
        self.attachment_label.setStyleSheet("")
        if attachment is not None:
            lines = attachment["text"].count("\n") + 1
            self.attachment_label.setText(f"Attached: {attachment['name']} ({lines} lines, "
                                          f"{len(attachment['text'])} characters)")
        self.attachment_label.setVisible(attachment is not None)
        self.remove_attachment_button.setVisible(attachment is not None)
        if changed:
            self.attachment_changed.emit()

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
            self.set_attachment(None)
            self.edit_cancelled.emit()

    def end_edit(self) -> None:
        self.editing = None
        self.banner.hide()
