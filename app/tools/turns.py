"""The tool-use loop in the chat: the model's reply calls tools; each call is shown under the reply and, when the
user asked for it (the default), waits for Run or Skip; the results (or "refused") are added to the conversation as
`tool` messages, stored with the chat; once every call of the reply is answered the model is asked again, up to
MAX_ROUNDS rounds after one user message.

It hooks into the chat controller (controller.tools): the controller tells it when a reply with calls ended
(calls_made) and when the conversation moves on (settle: calls still unanswered are answered "did not run").
"""
from PySide6.QtCore import QObject

from app.tools.client import ToolResult
from app.tools.formats import call_arguments
from app.tools.loop import ABANDONED, MAX_ROUNDS, REFUSED, pending_calls, rounds_since_user, tool_message
from app.tools.widgets import CallBox


class ToolTurns(QObject):
    def __init__(self, service, controller, parent=None):
        super().__init__(parent)
        self.service, self.chat = service, controller
        self.force_first = False             # the first round after a user message must call a tool
        self._boxes: dict = {}               # call id -> CallBox of the calls of the last reply
        self._running: set = set()           # ids of the calls run and not yet answered
        controller.tools = self
        controller.busy_changed.connect(self._on_busy)
        service.call_finished.connect(self._on_call_finished)

    def options(self) -> dict:
        """What the generation options gain: the tools offered and the tool_choice ({} without tools)."""
        tools = [t.openai() for t in self.service.tools()]
        if not tools:
            return {}
        first = rounds_since_user(self.chat.messages) == 0
        return {"tools": tools, "tool_choice": "required" if self.force_first and first else "auto"}

    # the controller's hooks
    def calls_made(self) -> None:
        """The last reply called tools: show each call, run it or wait for the user's word."""
        calls = pending_calls(self.chat.messages)
        if not calls:
            return
        if rounds_since_user(self.chat.messages) > MAX_ROUNDS:
            for call in calls:
                self._answer(call, f"Not run: the model already made {MAX_ROUNDS} rounds of tool calls for this "
                                   "message.", True, "skipped")
            self.chat.view.show_error(f"The model kept calling tools ({MAX_ROUNDS} rounds): it was stopped. Ask "
                                      "again, or turn tools off in the Tools tab.")
            return
        reply = self.chat.view.widgets[-1]
        self._boxes = {}
        for call in calls:
            tool = self.service.find((call.get("function") or {}).get("name"))
            box = CallBox(call, tool.server if tool is not None else "", reply)
            box.run_requested.connect(self._run)
            box.skip_requested.connect(self._skip)
            reply.layout().insertWidget(reply.layout().count() - 1, box)     # above the reply's figures
            self._boxes[call.get("id")] = box
        if not self.service.ask:
            for call in calls:
                self._run(call)

    def settle(self) -> None:
        """The conversation moves on: a call still waiting (or running) is answered "did not run"; a late result
        is dropped."""
        if not self._boxes:
            return
        for call in pending_calls(self.chat.messages):
            self._answer(call, ABANDONED, True, "skipped", ask_again=False)
        self._boxes, self._running = {}, set()

    def _on_busy(self, busy: bool) -> None:
        """A reply starts: when it reuses a reply's widget (Regenerate), that reply's calls are no longer shown."""
        widgets = self.chat.view.widgets
        if busy and widgets:
            for box in widgets[-1].findChildren(CallBox):
                box.setParent(None)
                box.deleteLater()

    # the user's word
    def _run(self, call: dict) -> None:
        box = self._boxes.get(call.get("id"))
        if box is None or call.get("id") in self._running:
            return
        box.set_state("running…")
        self._running.add(call.get("id"))
        try:
            args = call_arguments(call)
        except ValueError as e:
            self._on_call_finished(call.get("id"), ToolResult(str(e), True))
            return
        self.service.call(call.get("id"), (call.get("function") or {}).get("name"), args)

    def _skip(self, call: dict) -> None:
        if call.get("id") in self._boxes and call.get("id") not in self._running:
            self._answer(call, REFUSED, True, "skipped")

    def _on_call_finished(self, call_id: str, result) -> None:
        if call_id not in self._running:
            return                           # the conversation went on without it
        self._running.discard(call_id)
        call = next((c for c in pending_calls(self.chat.messages) if c.get("id") == call_id), None)
        if call is not None:
            self._answer(call, result.text, result.is_error, "failed" if result.is_error else "done")

    def _add(self, message) -> None:
        """Append a tool's message to the open chat: stored and shown."""
        chat = self.chat
        chat.store.append(chat.chat_id, message)
        chat.messages.append(message)
        chat.view.add(message, chat.model_name)

    def _answer(self, call: dict, text: str, error: bool, state: str, ask_again: bool = True) -> None:
        """Add the call's `tool` message (its box says `state`); once the reply's calls are all answered, ask the
        model again."""
        box = self._boxes.pop(call.get("id"), None)
        if box is not None:
            box.set_state(state)
        self._add(tool_message(call, text, error))
        if ask_again and not pending_calls(self.chat.messages) and not self._running:
            self._boxes = {}
            if rounds_since_user(self.chat.messages) <= MAX_ROUNDS:
                self.chat.answer()

