"""Regenerate keeps the earlier answers: the reply shows "2/3" between arrows that go back and forth, the
conversation goes on from the version shown, and the versions are kept in the history across a restart."""
import httpx
import keyring

import app.remote.api as api

from app_helpers import TIMEOUT_MS, send_and_wait, wait_idle
from remote_helpers import MemoryKeyring, sse


def _regenerate_with_seed(qtbot, window, seed):
    window.settings_panel.set_value("seed", seed)
    window.chat.regenerate()
    wait_idle(qtbot, window)
    return window.chat.messages[-1].content


def test_regenerated_answers_are_kept_as_versions_with_arrows(qtbot, make_window):
    w = make_window()
    assert send_and_wait(qtbot, w, "what is 12 plus 7?") == "19"
    widget = w.page.view.widgets[-1]
    assert not widget.version_label.isVisibleTo(widget)          # one answer: no arrows
    w.settings_panel.set_value("temperature", 1.8)
    second = _regenerate_with_seed(qtbot, w, 1)
    third = _regenerate_with_seed(qtbot, w, 2)
    widget = w.page.view.widgets[-1]
    assert widget.version_label.text() == "3/3"
    assert widget.version_label.isVisibleTo(widget)
    assert widget.previous_button.isEnabled() and not widget.next_button.isEnabled()
    assert [v["content"] for v in w.chat.messages[-1].meta["versions"]] == ["19", second, third]
    widget.previous_button.click()
    widget.previous_button.click()
    assert widget.version_label.text() == "1/3"
    assert widget.body.toPlainText() == "19"
    assert w.chat.messages[-1].content == "19"
    assert not widget.previous_button.isEnabled() and widget.next_button.isEnabled()
    widget.next_button.click()
    assert widget.version_label.text() == "2/3" and w.chat.messages[-1].content == second
    widget.previous_button.click()
    # kept across a restart, on the version shown
    w.close()
    w2 = make_window()
    widget = w2.page.view.widgets[-1]
    assert widget.version_label.text() == "1/3"
    assert widget.body.toPlainText() == "19"
    # a regenerate adds a fourth
    w2.settings_panel.set_value("temperature", 0.0)
    _regenerate_with_seed(qtbot, w2, 3)
    assert w2.page.view.widgets[-1].version_label.text() == "4/4"
    assert [v["content"] for v in w2.chat.messages[-1].meta["versions"]] == ["19", second, third, "19"]
    assert len(w2.chat.store.messages(w2.chat.chat_id)) == 2


def test_the_conversation_goes_on_from_the_version_shown(qtbot, make_window):
    w = make_window()
    send_and_wait(qtbot, w, "what is 12 plus 7?")
    w.settings_panel.set_value("temperature", 1.8)
    _regenerate_with_seed(qtbot, w, 1)
    w.page.view.widgets[-1].previous_button.click()
    sent = []
    original = w.generation.generate
    w.generation.generate = lambda history, text, options, partial="": (sent.append(history),
                                                                       original(history, text, options, partial))[1]
    w.settings_panel.set_value("temperature", 0.0)
    send_and_wait(qtbot, w, "spell cat backwards")
    assert sent[-1] == [{"role": "user", "content": "what is 12 plus 7?"}, {"role": "assistant", "content": "19"}]
    assert w.page.view.widgets[1].version_label.text() == "1/2"


def test_a_regenerate_that_fails_keeps_the_old_reply(qtbot, make_window, monkeypatch):
    before = keyring.get_keyring()
    keyring.set_keyring(MemoryKeyring())
    answers = iter([httpx.Response(200, headers={"content-type": "text/event-stream"},
                                   content=sse("first") + b"data: [DONE]\n\n"),
                    httpx.Response(500, text="out of memory")])

    def handler(request):
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"object": "list", "data": [{"id": "m"}]})
        return next(answers)
    monkeypatch.setattr(api, "transport", httpx.MockTransport(handler))
    try:
        w = make_window()
        w.backends_box.url_edit.setText("https://api.example/v1")
        w.backends_box.name_edit.setText("example")
        w.backends_box.add_button.click()
        qtbot.waitUntil(lambda: "m (example)" in [label for _k, label in w.page.switcher.items()], timeout=TIMEOUT_MS)
        w.page.switcher.combo.activated.emit([label for _k, label in w.page.switcher.items()].index("m (example)"))
        qtbot.waitUntil(lambda: not w.models.loading and w.models.info.weight_type == "remote", timeout=TIMEOUT_MS)
        assert send_and_wait(qtbot, w, "hi") == "first"
        w.chat.regenerate()
        wait_idle(qtbot, w)
        assert [m.content for m in w.chat.messages] == ["hi", "first"]
        assert [m.content for m in w.chat.store.messages(w.chat.chat_id)] == ["hi", "first"]
        assert w.page.view.widgets[-1].body.toPlainText() == "first"
        assert w.page.view.error.text() == "The model could not answer: the server failed (500: out of memory)."
    finally:
        keyring.set_keyring(before)
