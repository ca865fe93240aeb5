"""Details a new user notices: the context counter follows the loaded model and the reply in progress, the empty
chat's hint names the loaded model, a chat's title follows an edit of its first message, and About and Keyboard
shortcuts are in the normal font."""
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QLabel

from app.fonts import MONO_FAMILY
from app_helpers import HF_FOLDER, Q4, TIMEOUT_MS, send_and_wait, wait_idle


def _context(window) -> str:
    return window.status.context_label.text()


def test_the_context_counter_follows_the_reply_in_progress(qtbot, window):
    qtbot.waitUntil(lambda: _context(window) == "context 0 / 128", timeout=TIMEOUT_MS)   # the empty chat
    seen = []
    window.chat.context_measured.connect(lambda used, size: seen.append((used, size, window.chat.busy)))
    send_and_wait(qtbot, window, "count from 1 to 30")
    stats = window.chat.messages[-1].meta["stats"]
    prompt, generated = stats["prompt_tokens"], stats["generated_tokens"]
    assert generated == 12
    # one step per token while the reply streams: the prompt, then one more for each token
    assert seen == [(prompt + k, 128, True) for k in range(1, generated + 1)]
    assert _context(window) == f"context {prompt + generated} / 128"


def test_the_context_counter_follows_the_loaded_model(qtbot, window):
    send_and_wait(qtbot, window, "what is 12 plus 7?")
    assert _context(window).endswith("/ 128")
    window.settings_panel.store.set(Q4, {"n_ctx": 64})
    shown_at_switch = []
    window.models.model_loaded.connect(lambda _info: shown_at_switch.append(_context(window)))
    window.open_model(Q4)
    qtbot.waitUntil(lambda: _context(window).endswith("/ 64"), timeout=TIMEOUT_MS)
    assert shown_at_switch == [""]             # never the old model's figures for the new one
    used = int(_context(window).split()[1])
    session = window.generation.worker.session
    history = [{"role": m.role, "content": m.content} for m in window.chat.messages]
    assert used == len(session.prompt_ids(history)) and session.cache.n_ctx == 64


def test_the_empty_chat_hint_names_the_loaded_model(qtbot, window):
    welcome = window.page.view.welcome
    assert welcome.isVisibleTo(window.page.view)
    assert welcome.text() == ("Type a message below and press Enter (Shift+Enter for a new line) to chat with "
                              "default-q8_0.\nThe bundled model knows small arithmetic, counting, spelling "
                              "backwards, comparing numbers, colours, opposites, the alphabet and greetings — try "
                              "\"what is 12 plus 7?\".")
    window.open_model(HF_FOLDER)
    name = lambda: window.models.info.name if window.models.info.path == HF_FOLDER else None  # noqa: E731
    qtbot.waitUntil(lambda: name() is not None and not window.models.loading, timeout=TIMEOUT_MS)
    assert welcome.text() == ("Type a message below and press Enter (Shift+Enter for a new line) to chat with "
                              f"{name()}.")


def test_a_chat_title_follows_an_edit_of_its_first_message(qtbot, window):
    send_and_wait(qtbot, window, "what is 12 plus 7?")
    send_and_wait(qtbot, window, "spell cat backwards")
    window.chat.edit(0, "which is bigger, 2 or 16?")
    wait_idle(qtbot, window)
    assert window.chat.store.get(window.chat.chat_id).title == "which is bigger, 2 or 16?"
    assert window.page.chat_list.titles() == ["which is bigger, 2 or 16?"]
    window.chats.rename(window.chat.chat_id, "Numbers")      # a name the user chose stays
    window.chat.edit(0, "what is 12 plus 7?")
    wait_idle(qtbot, window)
    assert window.page.chat_list.titles() == ["Numbers"]


def _rendered(label: QLabel) -> tuple[str, set]:
    """The label's rich text as shown: its plain text and the (family, fixed pitch) of every fragment."""
    doc = QTextDocument()
    doc.setDefaultFont(label.font())
    doc.setHtml(label.text())
    fonts, block = set(), doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            fonts.add((fmt.font().family(), fmt.fontFixedPitch()))
            it += 1
        block = block.next()
    return doc.toPlainText(), fonts


def test_about_and_shortcuts_use_the_normal_font(qtbot, window):
    for name, expected in (("about", "Everything runs on this computer"), ("shortcuts", "Ctrl+Shift+O")):
        window.menu_actions[name].trigger()
        box = window.info_dialog
        label = box.findChild(QLabel, "qt_msgbox_informativelabel")
        text, fonts = _rendered(label)
        assert expected in text and label.font().family() == "DejaVu Sans"
        assert fonts == {("DejaVu Sans", False)}, name
        assert MONO_FAMILY not in label.text() and "<pre>" not in label.text()
        box.accept()
