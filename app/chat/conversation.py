"""The conversation: a scrolling column of MessageWidgets, the reply being generated last, and an error banner.
It follows the bottom while a reply streams, unless the user scrolled up to read."""
from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtWidgets import QLabel, QScrollArea, QVBoxLayout, QWidget

from app.chat.message_widget import MessageWidget
from app.chat.store import Message

BUNDLED_HINT = ("The bundled model knows small arithmetic, counting, spelling backwards, comparing numbers, colours, "
                "opposites, the alphabet and greetings — try \"what is 12 plus 7?\".")


def welcome_text(model_name: str = "", bundled: bool = False) -> str:
    """The empty chat's hint: how to send, to which model (what the bundled one knows)."""
    if not model_name:
        return ("Type a message below and press Enter (Shift+Enter for a new line) once a model is loaded "
                "(File > Open model, Ctrl+O).")
    text = f"Type a message below and press Enter (Shift+Enter for a new line) to chat with {model_name}."
    return text + "\n" + BUNDLED_HINT if bundled else text


class ConversationView(QScrollArea):
    copy_requested = Signal(int)              # message index
    edit_requested = Signal(int)
    regenerate_requested = Signal(int)
    continue_requested = Signal(int)
    version_requested = Signal(int, int)      # message index, -1 / +1
    link_activated = Signal(QUrl)             # an http(s) link in a message was clicked

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setAccessibleName("Conversation")
        inner = QWidget()
        self._layout = QVBoxLayout(inner)
        self._layout.setContentsMargins(12, 12, 12, 12)
        self._layout.setSpacing(8)
        self.welcome = QLabel(welcome_text())
        self.welcome.setWordWrap(True)
        self.welcome.setEnabled(False)
        self._layout.addWidget(self.welcome)
        self.error = QLabel()
        self.error.setObjectName("chatError")
        self.error.setWordWrap(True)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.setStyleSheet("QLabel#chatError { color: #a40000; }")
        self.error.hide()
        self._layout.addWidget(self.error)
        self._layout.addStretch(1)
        self.setWidget(inner)
        self.widgets: list[MessageWidget] = []
        self._follow = True
        self.verticalScrollBar().valueChanged.connect(self._on_scrolled)
        self.verticalScrollBar().rangeChanged.connect(self._on_range_changed)

    # building
    def set_messages(self, messages: list[Message], model_name: str = "") -> None:
        self.clear()
        for m in messages:
            self.add(m, model_name)
        self._follow = True
        QTimer.singleShot(0, self.scroll_to_bottom)

    def clear(self) -> None:
        self.remove_from(0)
        self.show_error("")

    def add(self, message: Message, model_name: str = "") -> MessageWidget:
        title = "You" if message.role == "user" else (message.meta.get("model") or model_name or "Assistant")
        if message.role == "tool":
            title = f"Tool result: {message.meta.get('name', '')}"
        w = MessageWidget(message, title)
        index = len(self.widgets)
        w.copy_requested.connect(lambda _w: self.copy_requested.emit(self.widgets.index(_w)))
        w.edit_requested.connect(lambda _w: self.edit_requested.emit(self.widgets.index(_w)))
        w.regenerate_requested.connect(lambda _w: self.regenerate_requested.emit(self.widgets.index(_w)))
        w.continue_requested.connect(lambda _w: self.continue_requested.emit(self.widgets.index(_w)))
        w.version_requested.connect(lambda _w, step: self.version_requested.emit(self.widgets.index(_w), step))
        w.link_activated.connect(self.link_activated)
        self._layout.insertWidget(index + 1, w)     # after the welcome label
        self.widgets.append(w)
        self._update_actions()
        return w

    def remove_from(self, index: int) -> None:
        for w in self.widgets[index:]:
            self._layout.removeWidget(w)
            w.deleteLater()
        del self.widgets[index:]
        self._update_actions()

    def _update_actions(self) -> None:
        self.welcome.setVisible(not self.widgets)
        for i, w in enumerate(self.widgets):
            w.set_regenerable(i == len(self.widgets) - 1)

    def set_model(self, name: str, bundled: bool = False) -> None:
        """The model replies come from: named in the empty chat's hint."""
        self.welcome.setText(welcome_text(name, bundled))

    def set_busy(self, busy: bool) -> None:
        """While a reply streams, no message offers regenerate, edit or another version."""
        for i, w in enumerate(self.widgets):
            w.set_regenerable(not busy and i == len(self.widgets) - 1)
            w.edit_button.setEnabled(not busy)
            if busy:                          # no switching versions under a streaming reply
                w.previous_button.setEnabled(False)
                w.next_button.setEnabled(False)
            else:
                w.set_meta(w.message.meta)

    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))
        if text:
            QTimer.singleShot(0, self.scroll_to_bottom)

    # following the bottom
    def scroll_to_bottom(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    def _on_scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._follow = value >= bar.maximum() - 4

    def _on_range_changed(self, _low: int, high: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(high)
