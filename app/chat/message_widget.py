"""One message of the conversation: who said it, its text (Markdown for replies, plain for the user's), the
reply's figures, and its actions (copy; edit for the user's messages; regenerate for the last reply, and continue
when that reply was interrupted, stopped or cut at the token limit)."""
from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QVBoxLayout

from app.chat.markdown import MarkdownView
from app.chat.store import INTERRUPTED, Message
from app.documents.sources_view import SourcesView
from app.tools.loop import call_text

CONTINUABLE = (INTERRUPTED, "cancelled", "length", "error")     # how a reply Continue can go on with ended


def stats_text(meta: dict) -> str:
    """'12 tokens · 95.3 tok/s · first token 31 ms' (with speculative decoding: '· accepted 7/9 drafted · 2.40
    tokens/step'), plus how the reply ended when it did not end by itself."""
    stats = meta.get("stats") or {}
    parts = [f"attached: {a['name']}" for a in meta.get("attachments") or []]
    parts += [f"called {call_text(c)}" for c in meta.get("tool_calls") or []]
    if stats.get("generated_tokens"):
        parts.append(f"{stats['generated_tokens']} tokens")
    if stats.get("decode_tokens_per_s"):
        parts.append(f"{stats['decode_tokens_per_s']:.1f} tok/s")
    if stats.get("time_to_first_token"):
        parts.append(f"first token {1000 * stats['time_to_first_token']:.0f} ms")
    parts += speculation_parts(stats)
    if stats.get("tools_refused"):
        parts.append("answered without tools: the server refused them")
    reason = stats.get("finish_reason")
    if reason == "cancelled":
        parts.append("stopped")
    elif reason == "length":
        parts.append("cut at the token limit")
    elif reason == "error":
        parts.append(f"cut off: {stats.get('error') or 'the connection failed'}")
    elif reason == INTERRUPTED:
        parts.append("interrupted: the app closed before the reply ended")
    return " · ".join(parts)


def speculation_parts(stats: dict) -> list:
    """Speculative decoding's figures: ['accepted 14/20 drafted', '2.33 tokens/step'] (none without it)."""
    passes = stats.get("target_passes")
    if not passes:
        return []
    return [f"accepted {stats.get('accepted_tokens', 0)}/{stats.get('drafted_tokens', 0)} drafted",
            f"{stats.get('generated_tokens', 0) / passes:.2f} tokens/step"]


class MessageWidget(QFrame):
    copy_requested = Signal(object)          # this widget
    edit_requested = Signal(object)
    regenerate_requested = Signal(object)
    continue_requested = Signal(object)
    version_requested = Signal(object, int)  # this widget, -1 (the previous version) or +1 (the next)
    link_activated = Signal(QUrl)            # an http(s) link in the text was clicked

    def __init__(self, message: Message, title: str, parent=None):
        super().__init__(parent)
        self.message = message
        self.setObjectName("userMessage" if message.role == "user" else "assistantMessage")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.setSpacing(2)
        head = QHBoxLayout()
        self.title = QLabel()
        head.addWidget(self.title)
        head.addStretch(1)
        self.previous_button = self._button("‹", "The previous version of this reply", None)
        self.version_label = QLabel()
        self.version_label.setAccessibleName("Version of this reply")
        self.next_button = self._button("›", "The next version of this reply", None)
        self.previous_button.clicked.connect(lambda: self.version_requested.emit(self, -1))
        self.next_button.clicked.connect(lambda: self.version_requested.emit(self, 1))
        for w in (self.previous_button, self.version_label, self.next_button):
            head.addWidget(w)
        self.copy_button = self._button("Copy", "Copy this message", self.copy_requested)
        self.edit_button = self._button("Edit", "Edit this message and continue from it", self.edit_requested)
        self.regenerate_button = self._button("Regenerate", "Answer again", self.regenerate_requested)
        self.continue_button = self._button("Continue", "Go on with this reply", self.continue_requested)
        self.fold_button = self._button("Hide", "Hide or show this tool result", None)    # tool results fold
        self.fold_button.clicked.connect(lambda: self.set_folded(not self.body.isHidden()))
        for b in (self.fold_button, self.edit_button, self.continue_button, self.regenerate_button, self.copy_button):
            head.addWidget(b)
        layout.addLayout(head)
        self.body = MarkdownView(self)
        self.body.link_activated.connect(self.link_activated)
        self.body.source_cited.connect(lambda n: self.sources.show_source(n))
        layout.addWidget(self.body)
        self.set_title(title)
        self.footer = QLabel()
        self.footer.setObjectName("messageStats")
        self.footer.setEnabled(False)       # drawn dimmed
        layout.addWidget(self.footer)
        self.sources = SourcesView(self)        # the documents' passages a reply was given, shown on click
        layout.addWidget(self.sources)
        self.copy_requested.connect(lambda _w: self.copy_to_clipboard())
        self.edit_button.setVisible(message.role == "user")
        self.fold_button.setVisible(message.role == "tool")
        self.regenerate_button.setVisible(False)
        self.continue_button.setVisible(False)
        self.set_text(message.content)
        self.set_meta(message.meta)

    def _button(self, text: str, tip: str, signal) -> QToolButton:
        b = QToolButton(self)
        b.setText(text)
        b.setToolTip(tip)
        b.setAccessibleName(tip)
        b.setAutoRaise(True)
        if signal is not None:
            b.clicked.connect(lambda: signal.emit(self))
        return b

    def set_folded(self, folded: bool) -> None:
        """Hide (or show again) the text of a tool result."""
        self.body.setHidden(folded)
        self.fold_button.setText("Show" if folded else "Hide")

    def set_title(self, title: str) -> None:
        self.title.setText(f"<b>{title}</b>")
        self.body.setAccessibleName(f"{title} message")

    def set_text(self, text: str, force: bool = False) -> None:
        self.message.content = text
        if text and text == self.body.source_text and not force:
            return                                   # already shown (the last streamed render)
        if self.message.role == "assistant":
            self.body.show_markdown(text if text or self.message.meta.get("tool_calls") else "…")
        else:
            self.body.show_plain(text)

    def refresh(self) -> None:
        """Render the text again (the theme's colours changed)."""
        self.set_text(self.message.content, force=True)

    def set_meta(self, meta: dict) -> None:
        self.message.meta = dict(meta)
        text = stats_text(meta)
        self.footer.setText(text)
        self.footer.setVisible(bool(text))
        self.sources.set_sources(meta.get("sources") if self.message.role == "assistant" else None)
        cited = {s["n"] for s in self.sources.sources}
        if cited != self.body.citations:             # its "[n]" become links to the passages (or stop being)
            self.body.citations = cited
            self.refresh()
        versions = len(meta.get("versions") or [])
        index = meta.get("version", versions - 1)
        self.version_label.setText(f"{index + 1}/{versions}" if versions > 1 else "")
        for w in (self.previous_button, self.version_label, self.next_button):
            w.setVisible(versions > 1)
        self.previous_button.setEnabled(index > 0)
        self.next_button.setEnabled(index < versions - 1)

    def set_regenerable(self, on: bool) -> None:
        """Offer Regenerate (and Continue, for a reply that did not end by itself): on the last reply, when idle."""
        reply = on and self.message.role == "assistant"
        self.regenerate_button.setVisible(reply)
        reason = (self.message.meta.get("stats") or {}).get("finish_reason")
        self.continue_button.setVisible(reply and reason in CONTINUABLE)

    def copy_to_clipboard(self) -> None:
        QGuiApplication.clipboard().setText(self.message.content)
