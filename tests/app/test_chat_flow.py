"""Send and stream, stop, regenerate, edit and continue, copy, and a new message replacing a reply in progress,
with the bundled model (greedy, so its answers are exact)."""
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app_helpers import TIMEOUT_MS, send_and_wait, wait_idle


def test_a_message_streams_a_reply_that_is_stored(qtbot, window):
    deltas = []
    window.generation.tokens_decoded.connect(deltas.append)
    with qtbot.waitSignal(window.chat.turn_finished, timeout=TIMEOUT_MS) as finished:
        window.chat.send("what is 12 plus 7?")
    assert "".join(deltas) == "19"
    assert finished.args[0]["finish_reason"] == "stop"
    chat = window.chat
    assert [(m.role, m.content) for m in chat.messages] == [("user", "what is 12 plus 7?"), ("assistant", "19")]
    assert [(m.role, m.content) for m in chat.store.messages(chat.chat_id)] == \
        [("user", "what is 12 plus 7?"), ("assistant", "19")]
    assert window.page.view.widgets[-1].body.source_text == "19"
    assert window.page.chat_list.titles() == ["what is 12 plus 7?"]


def test_enter_sends_and_shift_enter_starts_a_new_line(qtbot, window):
    box = window.page.composer.input
    qtbot.keyClicks(box, "what is 12")
    qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    assert box.toPlainText() == "what is 12\n"
    box.setPlainText("what is 12 plus 7?")
    qtbot.keyClick(box, Qt.Key.Key_Return)
    wait_idle(qtbot, window)
    assert window.chat.messages[-1].content == "19"
    assert box.toPlainText() == ""


def test_stop_ends_the_reply_within_one_token_and_keeps_it(qtbot, window):
    full = send_and_wait(qtbot, window, "count from 1 to 30")
    assert len(full.split()) > 5
    window.chats.new()
    worker = window.generation.worker
    seen = []

    def stop_at_first(_request_id, text):       # runs on the worker thread, as the first token is reported
        if not seen:
            window.generation.stop()
        seen.append(text)

    worker.tokens_decoded.connect(stop_at_first, Qt.ConnectionType.DirectConnection)
    window.chat.send("count from 1 to 30")
    wait_idle(qtbot, window)
    worker.tokens_decoded.disconnect(stop_at_first)
    reply = window.chat.messages[-1]
    assert reply.role == "assistant"
    assert reply.meta["stats"]["finish_reason"] == "cancelled"
    assert reply.meta["stats"]["generated_tokens"] == 1
    assert full.startswith(reply.content) and reply.content
    assert "stopped" in window.page.view.widgets[-1].footer.text()


def test_escape_stops_the_reply(qtbot, window):
    window.chat.send("count from 1 to 30")
    window.escape()                                # Esc (the Stop action)
    wait_idle(qtbot, window)
    last = window.chat.messages[-1]
    if last.role == "assistant":                   # stopped after a token or two, or before the first
        assert last.meta["stats"]["finish_reason"] in ("cancelled", "stop")
    assert not window.chat.busy and window.page.composer.button.text() == "Send"


def test_regenerate_answers_the_last_message_again(qtbot, window):
    send_and_wait(qtbot, window, "what is 12 plus 7?")
    window.menu_actions["regenerate"].trigger()         # Ctrl+R
    wait_idle(qtbot, window)
    chat = window.chat
    assert [(m.role, m.content) for m in chat.messages] == [("user", "what is 12 plus 7?"), ("assistant", "19")]
    assert len(chat.store.messages(chat.chat_id)) == 2
    assert window.page.view.widgets[-1].regenerate_button.isVisibleTo(window.page.view.widgets[-1])


def test_editing_a_message_replaces_it_and_what_followed(qtbot, window):
    send_and_wait(qtbot, window, "what is 12 plus 7?")
    send_and_wait(qtbot, window, "spell cat backwards")
    assert window.chat.messages[-1].content == "tac"
    window.page.view.widgets[0].edit_button.click()
    composer = window.page.composer
    assert composer.editing == 0 and composer.text == "what is 12 plus 7?"
    composer.set_text("which is bigger, 2 or 16?")
    composer.submit()
    wait_idle(qtbot, window)
    chat = window.chat
    expected = [("user", "which is bigger, 2 or 16?"), ("assistant", "16")]
    assert [(m.role, m.content) for m in chat.messages] == expected
    assert [(m.role, m.content) for m in chat.store.messages(chat.chat_id)] == expected
    assert composer.editing is None and not composer.banner.isVisibleTo(composer)


def test_escape_leaves_editing(qtbot, window):
    send_and_wait(qtbot, window, "what is 12 plus 7?")
    window.chat.begin_edit(0)
    assert window.page.composer.editing == 0
    window.escape()
    assert window.page.composer.editing is None and window.page.composer.text == ""


def test_copy_puts_the_message_on_the_clipboard(qtbot, window):
    send_and_wait(qtbot, window, "what is 12 plus 7?")
    window.page.view.widgets[0].copy_button.click()
    assert QGuiApplication.clipboard().text() == "what is 12 plus 7?"
    window.menu_actions["copy_last"].trigger()
    assert QGuiApplication.clipboard().text() == "19"


def test_a_new_message_during_a_reply_replaces_that_reply(qtbot, window):
    window.chat.send("count from 1 to 30")
    window.chat.send("what is 12 plus 7?")          # at once: the first reply is cut off
    wait_idle(qtbot, window)
    qtbot.wait(100)                                  # late tokens of the first reply would arrive now
    messages = window.chat.messages
    assert messages[-2].content == "what is 12 plus 7?" and messages[-1].content == "19"
    assert messages[0].content == "count from 1 to 30"
    if messages[1].role == "assistant":              # whatever the first reply had said, marked stopped
        assert messages[1].meta["stats"]["finish_reason"] == "cancelled"
    assert window.page.view.widgets[-1].body.source_text == "19"


def test_a_message_sent_before_the_model_is_ready_waits_for_it(qtbot, make_window):
    w = make_window(wait=False)
    w.chat.send("what is 12 plus 7?")
    qtbot.waitUntil(lambda: w.chat.model_ready and not w.chat.busy, timeout=TIMEOUT_MS)
    assert w.chat.messages[-1].content == "19"


def test_replies_render_markdown_with_code_blocks(qtbot):
    from app.chat.message_widget import MessageWidget
    from app.chat.store import Message
    w = MessageWidget(Message("assistant", "Use **this**:\n\n```python\nprint(1)\n```\n"), "model")
    qtbot.addWidget(w)
    doc = w.body.document()
    assert "print(1)" in doc.toPlainText() and "**" not in doc.toPlainText()
    block = doc.findBlock(doc.toPlainText().index("print(1)"))
    assert "DejaVu Sans Mono" in (block.charFormat().fontFamilies() or []) or \
        "DejaVu Sans Mono" in (block.begin().fragment().charFormat().fontFamilies() or [])
    user = MessageWidget(Message("user", "**not bold**"), "You")
    qtbot.addWidget(user)
    assert user.body.document().toPlainText() == "**not bold**"


def test_keyboard_shortcuts_are_bound(window):
    keys = {name: [s.toString() for s in action.shortcuts()] for name, action in window.menu_actions.items()}
    assert keys["new_chat"] == ["Ctrl+N"] and keys["open_model"] == ["Ctrl+O"]
    assert keys["open_folder"] == ["Ctrl+Shift+O"] and keys["regenerate"] == ["Ctrl+R"]
    assert keys["stop"] == ["Esc"] and keys["export"] == ["Ctrl+E"] and keys["rename"] == ["F2"]
    assert "Ctrl+Return" in keys["send"] and keys["settings"] == ["Ctrl+,"] and keys["quit"] == ["Ctrl+Q"]
    window.menu_actions["settings"].trigger()
    assert not window.settings_panel.isVisibleTo(window)
    window.menu_actions["settings"].trigger()
    assert window.settings_panel.isVisibleTo(window)


def test_escape_in_the_message_box_stops_the_reply(qtbot, window):
    window.chat.send("count from 1 to 30")
    qtbot.keyClick(window.page.composer.input, Qt.Key.Key_Escape)
    wait_idle(qtbot, window)
    assert not window.chat.busy


def test_a_message_without_any_model_gets_a_clear_error(qtbot, make_window, tmp_path):
    bad = tmp_path / "broken.petit"
    bad.write_bytes(b"not a model")
    w = make_window(model_path=str(bad), wait=False)
    w.chat.send("hello")                           # while the load is still in progress: it waits
    qtbot.waitUntil(lambda: not w.chat.busy, timeout=TIMEOUT_MS)
    assert "no model is loaded" in w.page.view.error.text()
    assert w.error_dialog is not None and "broken.petit" in w.error_dialog.text()
    w.page.view.show_error("")
    w.chat.send("hello again")                     # no load in progress: answered at once
    assert not w.chat.busy and "no model is loaded" in w.page.view.error.text()
    assert [m.role for m in w.chat.messages] == ["user", "user"]
