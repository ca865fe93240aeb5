"""A tool call as the conversation shows it, under the reply that made it: what is called, with which arguments, on
which server, and (when asked before running) Run / Skip buttons; then what became of it. Non-modal: the rest of
the window stays usable while it waits."""
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton

from app.tools.loop import call_text


class CallBox(QFrame):
    run_requested = Signal(object)           # the call (OpenAI-shaped dict)
    skip_requested = Signal(object)

    def __init__(self, call: dict, server: str, parent=None):
        super().__init__(parent)
        self.call = call
        self.setObjectName("toolCall")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        where = f" on {server}" if server else ""
        self.label = QLabel(f"Tool call{where}: <code>{_escape(call_text(call))}</code>")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.label, 1)
        self.state = QLabel()
        self.state.setEnabled(False)
        layout.addWidget(self.state)
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip("Run this tool call")
        self.skip_button = QPushButton("Skip")
        self.skip_button.setToolTip("Do not run it: the model is told the call was refused")
        self.run_button.clicked.connect(lambda: self.run_requested.emit(self.call))
        self.skip_button.clicked.connect(lambda: self.skip_requested.emit(self.call))
        layout.addWidget(self.run_button)
        layout.addWidget(self.skip_button)

    def set_state(self, text: str) -> None:
        """The call was decided: the buttons go, `text` says what happened ("running…", "done", "skipped")."""
        self.run_button.hide()
        self.skip_button.hide()
        self.state.setText(text)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
