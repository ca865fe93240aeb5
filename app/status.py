"""The status bar: the model (name, weights type), the kernel path, the last reply's speed and time to first
token, and how much of the context the conversation uses (warning when nearly full). While a model loads it shows
a busy bar, what the model needs against the machine's memory, and a Cancel button."""
import os

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QProgressBar, QPushButton, QSizePolicy, QStatusBar

from app.chat.message_widget import speculation_parts

NEARLY_FULL = 0.85


def kernel_text() -> str:
    from petit.native import info
    i = info()
    return f"{i['isa']} kernels, {i['threads']} threads"


def context_text(used: int, size: int) -> tuple[str, bool]:
    """'context 40 / 128' and whether it is nearly full."""
    full = size > 0 and used >= NEARLY_FULL * size
    text = f"context {used} / {size}"
    return (text + " — nearly full" if full else text), full


class StatusBar(QStatusBar):
    cancel_load_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.model_label = QLabel("no model")
        self.weights_label = QLabel()
        self.kernel_label = QLabel(kernel_text())
        self.speed_label = QLabel()
        self.context_label = QLabel()
        self.load_label = QLabel()
        self.load_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # never widens
        self.load_bar = QProgressBar()
        self.load_bar.setRange(0, 0)                 # busy: petit.load reports no progress
        self.load_bar.setMaximumWidth(120)
        self.load_bar.setAccessibleName("Loading the model")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop loading; keep the current model")
        self.cancel_button.clicked.connect(self.cancel_load_requested)
        for w in (self.load_label, self.load_bar, self.cancel_button):
            self.addWidget(w)
        for w in (self.model_label, self.weights_label, self.kernel_label, self.speed_label, self.context_label):
            self.addPermanentWidget(w)
        self.context_full = False
        self.set_loading(None)

    def set_model(self, info) -> None:
        self.model_label.setText(info.name)
        self.model_label.setToolTip(info.path)
        remote = info.weight_type == "remote"
        on = "" if remote or info.device == "CPU" else f" on {info.device}"      # the OpenCL device its products use
        self.weights_label.setText("remote model" if remote else f"{info.weight_type} weights{on}")
        self.weights_label.setToolTip(info.device_note)
        self.kernel_label.setText("answered by its server" if remote else kernel_text())
        self.speed_label.setText("")
        self.context_label.setText("")       # the new model's figures come with its measurement

    def set_turn(self, result: dict) -> None:
        """The figures of the reply that just ended."""
        parts = []
        if result.get("decode_tokens_per_s"):
            parts.append(f"{result['decode_tokens_per_s']:.1f} tok/s")
        if result.get("time_to_first_token"):
            parts.append(f"first token {1000 * result['time_to_first_token']:.0f} ms")
        parts += speculation_parts(result)
        if parts:
            self.speed_label.setText(" · ".join(parts))
        if result.get("context_size"):
            self.set_context(result["context_used"], result["context_size"])

    def set_context(self, used: int, size: int) -> None:
        text, full = context_text(used, size)
        self.context_full = full
        self.context_label.setText(text)
        self.context_label.setStyleSheet("color: #a40000; font-weight: bold;" if full else "")
        self.context_label.setToolTip(
            "The conversation nearly fills the model's context: start a new chat (Ctrl+N), or let the oldest "
            "turns be forgotten (Settings)." if full else "Tokens of the context the conversation takes")

    def set_loading(self, path: str | None, need: str = "") -> None:
        """Show the load in progress (None: no load)."""
        loading = path is not None
        if loading:
            self.load_label.setText(f"Loading {os.path.basename(path) or path}" + (f" — {need}" if need else "") + "…")
            self.load_label.setToolTip(path)
        for w in (self.load_label, self.load_bar, self.cancel_button):
            w.setVisible(loading)
