"""Attaching a text file to a message: it is shown above the box, its tokens count in the context meter before the
message is sent, the model receives it after the text, the chat names it, and a file that is not text is refused
with the reason."""
from app_helpers import TIMEOUT_MS, wait_idle


def _context(window):
    return window.status.context_label.text()


def test_an_attached_file_counts_in_the_context_meter_before_sending(qtbot, window, tmp_path):
    qtbot.waitUntil(lambda: _context(window) == "context 0 / 128", timeout=TIMEOUT_MS)
    notes = tmp_path / "notes.txt"
    notes.write_text("12 plus 7\n")
    composer = window.page.composer
    composer.set_text("what is it?")
    assert composer.attach(str(notes))
    assert composer.attachment_label.text() == "Attached: notes.txt (2 lines, 10 characters)"
    assert composer.attachment_label.isVisibleTo(composer)
    # the meter now counts the message with the file, as the model's template lays it out
    session = window.generation.worker._session(window.settings_panel.options())
    expected = len(session.prompt_ids([{"role": "user", "content":
                                        "what is it?\n\nAttached file notes.txt:\n```\n12 plus 7\n```"}]))
    qtbot.waitUntil(lambda: _context(window) == f"context {expected} / 128", timeout=TIMEOUT_MS)
    sent = []
    original = window.generation.generate
    window.generation.generate = lambda history, text, options, partial="": (sent.append(text),
                                                                            original(history, text, options,
                                                                                     partial))[1]
    composer.submit()
    wait_idle(qtbot, window)
    assert sent == ["what is it?\n\nAttached file notes.txt:\n```\n12 plus 7\n```"]
    user = window.chat.messages[0]
    assert user.content == "what is it?"
    assert user.meta["attachments"] == [{"name": "notes.txt", "text": "12 plus 7\n"}]
    assert window.page.view.widgets[0].footer.text() == "attached: notes.txt"
    assert composer.attachment is None and not composer.attachment_label.isVisibleTo(composer)
    # stored with the message: reopened after a restart, and sent again by Regenerate
    assert window.chat.store.messages(window.chat.chat_id)[0].meta["attachments"][0]["name"] == "notes.txt"
    window.chat.regenerate()
    wait_idle(qtbot, window)
    assert sent[-1] == sent[0]


def test_removing_the_attachment_takes_it_out_of_the_meter(qtbot, window, tmp_path):
    qtbot.waitUntil(lambda: _context(window) == "context 0 / 128", timeout=TIMEOUT_MS)
    notes = tmp_path / "long.txt"
    notes.write_text("word " * 80)
    composer = window.page.composer
    composer.attach(str(notes))
    qtbot.waitUntil(lambda: _context(window).endswith("nearly full"), timeout=TIMEOUT_MS)
    composer.remove_attachment_button.click()
    qtbot.waitUntil(lambda: _context(window) == "context 0 / 128", timeout=TIMEOUT_MS)


def test_a_file_that_is_not_text_is_refused_with_the_reason(qtbot, window, tmp_path):
    binary = tmp_path / "image.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café".encode("latin-1"))
    composer = window.page.composer
    assert not composer.attach(str(binary))
    assert composer.attachment_label.text() == "Not attached: image.png is not a text file (it holds binary data)."
    assert not composer.attach(str(latin))
    assert composer.attachment_label.text() == ("Not attached: latin.txt is not UTF-8 text (byte 3 cannot be "
                                               "decoded).")
    assert composer.attachment is None
    assert not composer.attach(str(tmp_path / "missing.txt"))
    assert composer.attachment_label.text() == "Not attached: missing.txt cannot be read: No such file or directory."
