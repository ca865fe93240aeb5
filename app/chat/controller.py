"""The message flow of the open chat: send, stream, stop, regenerate, continue, edit-and-continue, copy. It keeps the
SQLite store, the conversation view and the generation worker (through GenerationClient) in step.

Replies stream into the last message widget; the Markdown is re-rendered at most every RENDER_MS, however fast
tokens arrive. A new request settles the one in progress first: its partial reply is kept, marked stopped.

A streaming reply is also saved as it grows, at most every SAVE_MS, marked "interrupted" until it ends: if the app
dies (kill -9, a power cut) it loses at most the last SAVE_MS of text, and the reply reopens marked interrupted,
with Continue (go on from its text) and Regenerate.
"""
import time

from PySide6.QtCore import QObject, QTimer, Signal

from app.chat.attachments import with_attachments
from app.chat.store import INTERRUPTED, ChatStore, Message
from app.documents.prompt import with_sources

RENDER_MS = 33
SAVE_MS = 250
NO_MODEL = "no model is loaded; open one with File > Open model (Ctrl+O)"


def versions_of(m: Message) -> list:
    """A reply's versions ({"content", "meta"} each, the meta without the versions themselves)."""
    if m.meta.get("versions"):
        return list(m.meta["versions"])
    return [{"content": m.content, "meta": {k: v for k, v in m.meta.items() if k not in ("versions", "version")}}]


class ChatController(QObject):
    busy_changed = Signal(bool)
    turn_finished = Signal(object)        # the result dict of a reply (stats, context used / size)
    context_measured = Signal(int, int)   # context tokens used, context size
    chats_changed = Signal()              # a chat was created or renamed itself: the list should refresh

    def __init__(self, store: ChatStore, generation, view, composer, options, parent=None):
        """options: a callable returning the session options (app.settings.values.session_options)."""
        super().__init__(parent)
        self.store, self.generation, self.view, self.composer, self.options = store, generation, view, composer, options
        self.chat_id: int | None = None
        self.messages: list[Message] = []
        self.model_name = ""
        self.model_ready = False
        self._reply = None                # the MessageWidget being streamed into
        self._buffer = ""
        self._row: int | None = None      # the streamed reply's position in the store, once saved
        self._resumed: Message | None = None   # the reply Continue goes on with, as it was
        self._replaced: Message | None = None  # the reply Regenerate answers again, as it was
        self._versions: list | None = None     # the reply's other versions ({"content", "meta"}), when it has some
        self._version_index: int | None = None  # which of them the new text replaces (None: a new version)
        self._pending = None              # (history, text, partial) waiting for the first model
        self._awaiting_model = False      # a load is in progress
        self.sources_for = None           # (question, options) -> the documents' passages for it (app.documents)
        self._sources: list = []          # those of the reply in progress, kept in its meta
        self.tools = None                 # the MCP tool turns (app.tools.turns.ToolTurns), when the app has them
        self._render_timer = QTimer(self)
        self._render_timer.setSingleShot(True)
        self._render_timer.setInterval(RENDER_MS)
        self._render_timer.timeout.connect(self._render)
        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._save_timer.setInterval(SAVE_MS)
        self._save_timer.timeout.connect(self._save_partial)
        generation.tokens_decoded.connect(self._on_tokens)
        generation.finished.connect(self._on_finished)
        generation.failed.connect(self._on_failed)
        generation.measured.connect(self.context_measured)
        view.copy_requested.connect(self.copy)
        view.edit_requested.connect(self.begin_edit)
        view.regenerate_requested.connect(lambda _i: self.regenerate())
        view.continue_requested.connect(lambda _i: self.continue_reply())
        view.version_requested.connect(self.show_version)
        composer.send_requested.connect(self.send)
        composer.stop_requested.connect(self.stop)
        composer.attachment_changed.connect(self.measure)

    @property
    def busy(self) -> bool:
        return self._reply is not None

    # chats
    def open_chat(self, chat_id: int | None) -> None:
        """Show chat `chat_id` (None: no chat until the first message), as it was stored."""
        self.settle()
        self.save_draft()
        self.chat_id = chat_id
        self.messages = self.store.messages(chat_id) if chat_id is not None else []
        self.view.set_messages(self.messages, self.model_name)
        self.composer.end_edit()
        self.composer.set_text(self.store.draft(chat_id) if chat_id is not None else "")
        self.measure()

    def save_draft(self) -> None:
        if self.chat_id is not None and self.store.get(self.chat_id) is not None:
            self.store.set_draft(self.chat_id, self.composer.text if self.composer.editing is None else "")

    # the model
    def set_model(self, name: str, bundled: bool = False) -> None:
        """The model `name` now answers (bundled: the model that ships with Petit)."""
        self.model_name, self.model_ready = name, True
        self.view.set_model(name, bundled)
        if self._pending is not None:
            history, text, partial = self._pending
            self._pending = None
            self.generation.generate(history, text, self.options(), partial)
        self.measure()

    def model_loading(self, loading: bool) -> None:
        """A load started (True) or failed (False). Before the first model, messages wait for a load in progress;
        with none in progress they are answered with an error."""
        self._awaiting_model = loading
        if not loading and self._pending is not None and not self.model_ready:
            self._pending = None
            self._on_failed(NO_MODEL)

    # sending
    def send(self, text: str) -> None:
        """Send `text` as a new user message (or, while editing, in place of the edited one and what followed), with
        the file attached in the composer, if any."""
        attachment = self.composer.attachment
        if not text.strip() and attachment is None:
            return
        self.settle()
        if self.composer.editing is not None:
            self._truncate(self.composer.editing)
            self.composer.end_edit()
        if self.chat_id is None:
            self.chat_id = self.store.create()
        message = Message("user", text, {"attachments": [attachment]} if attachment is not None else {})
        sources = self.sources_for(text, self.options()) if self.sources_for is not None and text.strip() else []
        if sources:
            message.meta["sources"] = sources
        self.store.append(self.chat_id, message)
        self.messages.append(message)
        self.view.add(message)
        self.composer.input.clear()
        self.store.set_draft(self.chat_id, "")
        self.chats_changed.emit()
        self._start(self.messages[:-1], self._plain(message)["content"])
        self.composer.set_attachment(None)          # after the start: no measure of the old draft while busy

    def regenerate(self) -> None:
        """Answer the last user message again; the old reply is kept as an alternative (the arrows on the reply
        go back to it)."""
        self.settle(keep_partial=False)
        last_user = max((i for i, m in enumerate(self.messages) if m.role == "user"), default=None)
        if last_user is None:
            return
        has_reply = len(self.messages) > last_user + 1
        old_reply = self.view.widgets[last_user + 1] if has_reply else None
        replaced = self.messages[last_user + 1] if has_reply else None
        self.store.truncate(self.chat_id, last_user + 1)
        del self.messages[last_user + 1:]
        self.view.remove_from(last_user + 2)         # the old reply's widget is reused for the new one
        self._start(self.messages[:last_user], self._plain(self.messages[last_user])["content"], reuse=old_reply,
                    versions=versions_of(replaced) if replaced is not None else None, replaced=replaced)

    def continue_reply(self) -> None:
        """Go on with the last reply (interrupted, stopped or cut at the token limit): what the model says next is
        appended to it."""
        self.settle()
        if len(self.messages) < 2 or self.messages[-1].role != "assistant" or self.messages[-2].role != "user":
            return
        reply = self.messages.pop()
        versions = reply.meta.get("versions")
        self._start(self.messages[:-1], self._plain(self.messages[-1])["content"], reuse=self.view.widgets[-1],
                    resume=reply, versions=list(versions) if versions else None,
                    version_index=reply.meta.get("version"))

    def show_version(self, index: int, step: int) -> None:
        """Show the previous (step -1) or next (+1) version of reply `index`; the conversation goes on from the
        version shown."""
        if self.busy or not 0 <= index < len(self.messages):
            return
        m = self.messages[index]
        versions = m.meta.get("versions") or []
        new = m.meta.get("version", len(versions) - 1) + step
        if not 0 <= new < len(versions):
            return
        chosen = versions[new]
        m.content = chosen["content"]
        m.meta = dict(chosen["meta"], versions=versions, version=new)
        self.store.update(self.chat_id, index, m)
        widget = self.view.widgets[index]
        widget.set_text(m.content)
        widget.set_meta(m.meta)
        self.measure()

    def begin_edit(self, index: int) -> None:
        if 0 <= index < len(self.messages) and self.messages[index].role == "user":
            self.composer.begin_edit(index, self.messages[index].content)
            attachments = self.messages[index].meta.get("attachments") or []
            self.composer.set_attachment(attachments[0] if attachments else None)

    def edit(self, index: int, text: str) -> None:
        """Replace user message `index` by `text`, drop everything after it, and answer it."""
        self.composer.begin_edit(index, text)
        self.send(text)

    def copy(self, index: int) -> None:
        if 0 <= index < len(self.view.widgets):
            self.view.widgets[index].copy_to_clipboard()

    def stop(self) -> None:
        """Stop the reply within one token; what was said so far is kept."""
        if self._reply is not None:
            if self._pending is not None:
                self._pending = None
                self._finish(self._buffer, {"finish_reason": "cancelled"})
            else:
                self.generation.stop()

    def measure(self) -> None:
        """Measure the context the conversation takes, with the file attached for the next message (so the meter
        counts it before it is sent)."""
        if self.model_ready and not self.busy:
            history = [self._plain(m) for m in self.messages]
            attachment = self.composer.attachment
            if attachment is not None:
                history.append({"role": "user", "content": with_attachments(self.composer.text, [attachment])})
            self.generation.measure(history, self.options())

    def _truncate(self, keep: int) -> None:
        self.store.truncate(self.chat_id, keep)
        del self.messages[keep:]
        self.view.remove_from(keep)

    def _start(self, history: list[Message], text: str, reuse=None, resume: Message | None = None,
               versions: list | None = None, version_index: int | None = None,
               replaced: Message | None = None) -> None:
        """Answer `text` after `history` in a new reply (in the widget `reuse`, when given), or go on with the
        reply `resume` (stored right after `text`). `versions`: the reply's other versions, kept with it (the new
        text replaces version `version_index`, or is added after them)."""
        self.view.show_error("")
        self._render_timer.setInterval(RENDER_MS)
        self._resumed, self._replaced = resume, replaced
        self._versions, self._version_index = versions, version_index
        self._buffer = resume.content if resume is not None else ""
        self._row = len(self.messages) if resume is not None else None
        question = self.messages[len(history)] if len(history) < len(self.messages) else None
        self._sources = (question.meta.get("sources") or []) if question is not None else []
        pending = Message("assistant", self._buffer, self._meta())
        if reuse is not None:
            reuse.message = pending
            reuse.set_title(self.model_name or "Assistant")
            reuse.set_text(self._buffer)
            reuse.set_meta(pending.meta)
            self._reply = reuse
        else:
            self._reply = self.view.add(pending, self.model_name)
        self._set_busy(True)
        plain = [self._plain(m) for m in history]
        partial = self._buffer
        if self.model_ready:
            self.generation.generate(plain, text, self.options(), partial)
        elif self._awaiting_model:
            self._pending = (plain, text, partial)
        else:
            self._on_failed(NO_MODEL)

    @staticmethod
    def _plain(m: Message) -> dict:
        """The message as the model sees it (the documents' passages before the text, attached files after it; tool
        calls, a tool result's call id)."""
        content = with_attachments(m.content, m.meta.get("attachments"))
        plain = {"role": m.role,
                 "content": with_sources(content, m.meta.get("sources") if m.role == "user" else None)}
        plain.update({k: m.meta[k] for k in ("tool_calls", "tool_call_id", "name") if m.meta.get(k)})
        return plain

    def _meta(self, **more) -> dict:
        """A reply's meta: the model, `more`, and the passages its question was given."""
        meta = {"model": self.model_name, **more}
        if self._sources:
            meta["sources"] = self._sources
        return meta

    def answer(self) -> None:
        """Ask the model again after the last messages (the tools' results: app.tools.turns), in a new reply."""
        self.settle()
        self._start(list(self.messages), "")

    # the worker's answers
    def _on_tokens(self, text: str) -> None:
        if self._reply is None:
            return
        self._buffer += text
        if not self._render_timer.isActive():
            self._render_timer.start()
        if not self._save_timer.isActive():
            self._save_timer.start()

    def _render(self) -> None:
        """Show the reply so far; a long reply, whose render costs more, is rendered less often (at most a fifth of
        the GUI thread's time goes to it), so input stays answered."""
        if self._reply is not None:
            start = time.perf_counter()
            self._reply.set_text(self._buffer)
            cost_ms = 1000 * (time.perf_counter() - start)
            self._render_timer.setInterval(max(RENDER_MS, int(4 * cost_ms)))

    def _save_partial(self) -> None:
        """Save the reply so far, marked interrupted (what it stays if the app dies before the reply ends)."""
        if self._reply is None or not self._buffer:
            return
        message = self._with_versions(Message("assistant", self._buffer, self._meta(
            stats={"finish_reason": INTERRUPTED})))
        if self._row is None:
            self._row = self.store.append(self.chat_id, message)
        else:
            self.store.update(self.chat_id, self._row, message)

    def _on_finished(self, reply: str, result) -> None:
        if self._reply is not None:
            self._finish(reply, dict(result))

    def _finish(self, reply: str, result: dict) -> None:
        calls = result.pop("tool_calls", None)
        self._render_timer.stop()
        self._save_timer.stop()
        widget, self._reply, row, self._resumed = self._reply, None, self._row, None
        replaced, self._replaced = self._replaced, None
        self._row = None
        if not reply and not calls and replaced is not None:
            # a regenerate stopped before its first token: the old reply stays
            reply, result = replaced.content, replaced.meta.get("stats") or {}
            message = replaced
        elif reply or calls:
            message = self._with_versions(Message("assistant", reply, self._meta(
                stats=result, **({"tool_calls": calls} if calls else {}))))
        self._versions = self._version_index = None
        if reply or calls:
            if row is None:
                self.store.append(self.chat_id, message)
            else:
                self.store.update(self.chat_id, row, message)
            self.messages.append(message)
            widget.message = message
            widget.set_text(reply)
            widget.set_meta(message.meta)
        else:                              # stopped before the first token: nothing to keep
            if row is not None:
                self.store.truncate(self.chat_id, row)
            self.view.remove_from(len(self.messages))
        if result.get("error"):             # a remote reply cut off: what arrived is kept
            self.view.show_error(f"The reply was cut off: {result['error']}. What arrived is kept; Continue goes "
                                 "on with it, Regenerate starts again.")
        elif result.get("dropped_messages"):
            self.view.show_error(f"The {result['dropped_messages']} oldest messages no longer fit the context: "
                                 f"the model did not see them.")
        self._set_busy(False)
        self.turn_finished.emit(result)
        if calls and self.tools is not None:
            self.tools.calls_made()

    def _on_failed(self, message: str) -> None:
        if self._reply is None:
            return
        self._render_timer.stop()
        self._save_timer.stop()
        widget, self._reply, row, resumed = self._reply, None, self._row, self._resumed or self._replaced
        self._row = self._resumed = self._replaced = None
        self._versions = self._version_index = None
        if resumed is not None:            # Continue or Regenerate failed: the reply stays as it was
            if row is None:
                self.store.append(self.chat_id, resumed)
            else:
                self.store.update(self.chat_id, row, resumed)
            self.messages.append(resumed)
            widget.message = resumed
            widget.set_text(resumed.content)
            widget.set_meta(resumed.meta)
        else:
            if row is not None:
                self.store.truncate(self.chat_id, row)
            self.view.remove_from(len(self.messages))
        hint = " Start a new chat (Ctrl+N), or turn on \"forget the oldest turns\" in the settings." \
            if "context" in message else ""
        self.view.show_error(f"The model could not answer: {message}.{hint}")
        self._set_busy(False)

    def _with_versions(self, message: Message) -> Message:
        """The reply with its other versions in its meta ("versions", and "version": which one it is)."""
        if self._versions is None:
            return message
        versions = list(self._versions)
        entry = {"content": message.content, "meta": dict(message.meta)}
        if self._version_index is None or not 0 <= self._version_index < len(versions):
            versions.append(entry)
            index = len(versions) - 1
        else:
            versions[self._version_index] = entry
            index = self._version_index
        message.meta = dict(message.meta, versions=versions, version=index)
        return message

    def settle(self, keep_partial: bool = True) -> None:
        """End the reply in progress now: the worker is told to stop and its late tokens are dropped; the text
        received so far is kept as a stopped reply (or discarded)."""
        if self.tools is not None:
            self.tools.settle()
        if self._reply is None:
            return
        self._pending = None
        self.generation.abandon()
        self._finish(self._buffer if keep_partial else "", {"finish_reason": "cancelled"})

    def _set_busy(self, busy: bool) -> None:
        self.composer.set_busy(busy)
        self.view.set_busy(busy)
        self.busy_changed.emit(busy)

    def shutdown(self) -> None:
        self.settle()
        self.save_draft()
