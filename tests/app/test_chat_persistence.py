"""Chats live in SQLite in the data folder: reopened exactly after a restart; new, rename, delete, search; export
as Markdown and JSON."""
import json

from app_helpers import send_and_wait


def _contents(window):
    return [(m.role, m.content) for m in window.chat.messages]


def test_a_restart_reopens_the_chats_exactly(qtbot, make_window, data_dir):
    first = make_window()
    send_and_wait(qtbot, first, "what is 12 plus 7?")
    first.chats.new()
    send_and_wait(qtbot, first, "spell cat backwards")
    first.chats.open(first.chat.store.chats()[-1].id)        # back to the first chat
    reopened_id = first.chat.chat_id
    first.page.composer.set_text("half-typed")
    first.resize(700, 500)
    first.page.setSizes([120, 380, 200])
    sizes, size = first.page.sizes(), first.size()
    before = _contents(first)
    titles = first.page.chat_list.titles()
    first.close()
    assert (data_dir / "petit.sqlite3").exists()

    second = make_window()
    assert second.chat.chat_id == reopened_id
    assert _contents(second) == before == [("user", "what is 12 plus 7?"), ("assistant", "19")]
    assert [w.body.source_text for w in second.page.view.widgets] == ["what is 12 plus 7?", "19"]
    assert second.page.chat_list.titles() == titles
    assert second.page.composer.text == "half-typed"
    assert second.size() == size and second.page.sizes() == sizes
    assert second.chat.messages[1].meta["stats"]["generated_tokens"] > 0    # the figures survive too
    # and the conversation goes on from there
    assert send_and_wait(qtbot, second, "which is bigger, 2 or 16?") == "16"


def test_new_rename_search_and_delete_chats(qtbot, window):
    chats = window.chats
    send_and_wait(qtbot, window, "what is 12 plus 7?")
    window.menu_actions["new_chat"].trigger()                 # Ctrl+N
    send_and_wait(qtbot, window, "spell cat backwards")
    assert window.page.chat_list.titles() == ["spell cat backwards", "what is 12 plus 7?"]
    chats.rename(window.chat.chat_id, "  Backwards   words ")
    assert window.page.chat_list.titles() == ["Backwards words", "what is 12 plus 7?"]
    window.page.chat_list.search.setText("PLUS")
    assert window.page.chat_list.titles() == ["what is 12 plus 7?"]
    window.page.chat_list.search.setText("")
    first_id = window.chat.store.chats()[-1].id
    window.page.chat_list.list.setCurrentRow(1)           # the user clicks the older chat
    assert window.chat.chat_id == first_id and _contents(window)[-1] == ("assistant", "19")
    chats.delete(first_id)
    assert window.page.chat_list.titles() == ["Backwards words"]
    assert window.chat.chat_id != first_id and _contents(window)[0] == ("user", "spell cat backwards")
    assert window.chat.store.messages(first_id) == []


def test_delete_asks_first_without_blocking(qtbot, window):
    send_and_wait(qtbot, window, "what is 12 plus 7?")
    chat_id = window.chat.chat_id
    window.chats.confirm_delete(chat_id)
    box = window.chats.dialog
    assert box.isVisible() and "what is 12 plus 7?" in box.text()
    assert window.chat.store.get(chat_id) is not None
    from PySide6.QtWidgets import QMessageBox
    box.button(QMessageBox.StandardButton.Yes).click()
    assert window.chat.store.get(chat_id) is None and window.page.chat_list.titles() == []


def test_new_chat_reuses_an_untouched_empty_one(qtbot, window):
    window.chats.new()
    window.chats.new()
    assert len(window.chat.store.chats()) == 1


def test_export_as_markdown_and_json(qtbot, window, tmp_path):
    send_and_wait(qtbot, window, "what is 12 plus 7?")
    chat_id = window.chat.chat_id
    md, js = tmp_path / "chat.md", tmp_path / "chat.json"
    window.chats.export(chat_id, str(md))
    window.chats.export(chat_id, str(js))
    text = md.read_text(encoding="utf-8")
    assert text.startswith("# what is 12 plus 7?")
    assert "## You\n\nwhat is 12 plus 7?" in text and "## Assistant (default-q8_0)\n\n19" in text
    doc = json.loads(js.read_text(encoding="utf-8"))
    assert doc["title"] == "what is 12 plus 7?"
    assert [(m["role"], m["content"]) for m in doc["messages"]] == [("user", "what is 12 plus 7?"),
                                                                     ("assistant", "19")]
    assert doc["messages"][1]["meta"]["stats"]["finish_reason"] == "stop"


def test_export_dialog_opens_without_blocking(qtbot, window):
    send_and_wait(qtbot, window, "what is 12 plus 7?")
    window.menu_actions["export"].trigger()                   # Ctrl+E
    dialog = window.chats.dialog
    assert dialog.isVisible() and dialog.selectedFiles()[0].endswith("what-is-12-plus-7.md")
    dialog.reject()
