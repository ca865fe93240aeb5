"""Remote backends: a base URL and an API key (in the keyring, never in SQLite), the models /v1/models lists, and the
chat driving an OpenAI-compatible endpoint like a local model (streaming, stop, regenerate, edit, the status bar),
against a real `petit serve` on loopback; and every failure a server can cause, each with a clear message and
nothing received lost (scripted servers)."""
import json
import time

import httpx
import keyring
import keyring.backends.fail
import pytest

import app.remote.api as api
from app.remote.keys import SERVICE

from app_helpers import TIMEOUT_MS, send_and_wait, wait_idle
from remote_helpers import MemoryKeyring, ScriptedServer, petit_serve, slow_forever, sse

KEY = "sk-test-4f9a"


@pytest.fixture(autouse=True)
def memory_keyring():
    before = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    yield ring
    keyring.set_keyring(before)


@pytest.fixture
def server():
    with petit_serve(api_key=KEY) as s:
        yield s


def add_backend(qtbot, w, url, key=None, name="test server"):
    box = w.backends_box
    box.name_edit.setText(name)
    box.url_edit.setText(url)
    box.key_edit.setText(key or "")
    box.add_button.click()
    row = w.backends.all()[-1]
    qtbot.waitUntil(lambda: box.state_text(row.id) not in ("listing models…", ""), timeout=TIMEOUT_MS)
    return row


def use_remote(qtbot, w, label):
    items = [label_ for _k, label_ in w.page.switcher.items()]
    w.page.switcher.combo.activated.emit(items.index(label))
    qtbot.waitUntil(lambda: not w.models.loading and w.models.info is not None
                    and w.models.info.weight_type == "remote", timeout=TIMEOUT_MS)


def test_a_petit_serve_backend_answers_in_the_chat_like_a_local_model(qtbot, make_window, server, memory_keyring,
                                                                      data_dir):
    w = make_window()
    row = add_backend(qtbot, w, server.url, KEY)
    assert w.backends_box.state_text(row.id) == "1 models"
    # the key is in the keyring, nowhere in the database
    assert memory_keyring.secrets == {(SERVICE, f"backend-{row.id}"): KEY}
    w.conn.execute("PRAGMA wal_checkpoint(FULL)")
    assert KEY.encode() not in (data_dir / "petit.sqlite3").read_bytes()
    assert not w.backends_box.notice.isVisible()
    assert "default-q8_0 (test server)" in [label for _k, label in w.page.switcher.items()]
    use_remote(qtbot, w, "default-q8_0 (test server)")
    assert w.status.model_label.text() == "default-q8_0 @ test server"
    assert w.status.weights_label.text() == "remote model"
    w.settings_panel.set_value("temperature", 0.0)
    assert send_and_wait(qtbot, w, "what is 12 plus 7?") == "19"
    reply = w.chat.messages[-1]
    assert reply.meta["model"] == "default-q8_0 @ test server"
    assert reply.meta["stats"]["finish_reason"] == "stop"
    assert reply.meta["stats"]["prompt_tokens"] > 0
    assert "first token" in w.status.speed_label.text()
    assert w.page.view.widgets[-1].body.toPlainText() == "19"
    # edit and regenerate go through the server too
    w.chat.edit(0, "which is bigger, 2 or 16?")
    wait_idle(qtbot, w)
    assert [m.content for m in w.chat.messages] == ["which is bigger, 2 or 16?", "16"]
    w.chat.regenerate()
    wait_idle(qtbot, w)
    assert w.chat.messages[-1].content == "16"


def test_a_wrong_api_key_is_reported_and_nothing_is_lost(qtbot, make_window, server):
    w = make_window()
    row = add_backend(qtbot, w, server.url, "wrong-key")
    assert w.backends_box.state_text(row.id).startswith(
        "could not list the models: the server refused the API key (401")
    w.open_model(f"remote:{row.id}/default-q8_0")
    qtbot.waitUntil(lambda: w.error_dialog is not None and w.error_dialog.isVisible(), timeout=TIMEOUT_MS)
    assert w.error_dialog.informativeText().startswith("the server refused the API key (401")
    assert w.error_dialog.informativeText().endswith("Check the backend's key in the Models tab")
    assert w.models.info.weight_type == "q8_0"           # the local model stays
    assert send_and_wait(qtbot, w, "what is 12 plus 7?") == "19"


def test_stop_ends_a_remote_reply_and_keeps_what_came(qtbot, make_window):
    scripted = ScriptedServer(slow_forever)
    try:
        w = make_window()
        row = add_backend(qtbot, w, scripted.url)
        use_remote(qtbot, w, "scripted (test server)")
        w.chat.send("talk")
        qtbot.waitUntil(lambda: "w3" in w.chat._buffer, timeout=TIMEOUT_MS)
        w.chat.stop()
        wait_idle(qtbot, w)
        reply = w.chat.messages[-1]
        assert reply.content.startswith("w0 w1 w2 w3")
        assert reply.meta["stats"]["finish_reason"] == "cancelled"
        assert "stopped" in w.page.view.widgets[-1].footer.text()
        qtbot.waitUntil(scripted.closed.is_set, timeout=TIMEOUT_MS)     # the connection was closed
        assert row.id == 1
    finally:
        scripted.stop()


def test_stop_works_before_the_server_has_answered_at_all(qtbot, make_window):
    scripted = ScriptedServer(slow_forever, before_headers=60)     # a prefill longer than the test may wait
    try:
        w = make_window()
        add_backend(qtbot, w, scripted.url)
        use_remote(qtbot, w, "scripted (test server)")
        w.chat.send("talk")
        qtbot.waitUntil(scripted.asked.is_set, timeout=TIMEOUT_MS)
        w.chat.stop()
        wait_idle(qtbot, w)
        assert [m.content for m in w.chat.messages] == ["talk"]
        qtbot.waitUntil(scripted.closed.is_set, timeout=TIMEOUT_MS)
    finally:
        scripted.stop()


def test_a_server_that_goes_away_mid_reply_keeps_the_text_received(qtbot, make_window):
    def script(send):
        send(sse("Hello"))
        send(sse(" there"))
        time.sleep(0.05)
        raise ScriptedServer.Gone
    scripted = ScriptedServer(script)
    try:
        w = make_window()
        add_backend(qtbot, w, scripted.url)
        use_remote(qtbot, w, "scripted (test server)")
        w.chat.send("hi")
        wait_idle(qtbot, w)
        reply = w.chat.messages[-1]
        assert reply.content == "Hello there"
        assert reply.meta["stats"]["finish_reason"] == "error"
        error = reply.meta["stats"]["error"]
        assert error.startswith(f"the connection to {scripted.url} dropped: ")
        assert w.page.view.error.text() == (f"The reply was cut off: {error}. What arrived is kept; Continue goes "
                                            "on with it, Regenerate starts again.")
        assert w.page.view.widgets[-1].continue_button.isVisibleTo(w.page.view.widgets[-1])
        # the kept reply is in the history after a reopen
        w.chats.restore()
        assert [m.content for m in w.chat.store.messages(w.chat.chat_id)] == ["hi", "Hello there"]
    finally:
        scripted.stop()


def test_a_silent_server_times_out_with_a_clear_message(qtbot, make_window, monkeypatch):
    def script(send):
        send(sse("Partial"))
        time.sleep(2)
    scripted = ScriptedServer(script)
    monkeypatch.setattr(api, "READ_TIMEOUT", 0.5)
    try:
        w = make_window()
        add_backend(qtbot, w, scripted.url)
        use_remote(qtbot, w, "scripted (test server)")
        w.chat.send("hi")
        wait_idle(qtbot, w)
        assert w.chat.messages[-1].content == "Partial"
        assert w.chat.messages[-1].meta["stats"]["error"] == (
            f"the server at {scripted.url} stopped answering (nothing for 0.5 s)")
    finally:
        scripted.stop()


def _mock(monkeypatch, handler):
    monkeypatch.setattr(api, "transport", httpx.MockTransport(handler))


def _models_or(chat):
    def handler(request):
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"object": "list", "data": [{"id": "m"}]})
        return chat(request)
    return handler


@pytest.mark.parametrize("response, message", [
    (httpx.Response(404, json={"error": {"message": "The model 'm' does not exist.", "param": "model"}}),
     "not found (404) at https://api.example/v1/chat/completions: The model 'm' does not exist. Check the "
     "backend's base URL (it usually ends in /v1) and that it serves the model 'm'"),
    (httpx.Response(429, headers={"Retry-After": "7"}, json={"error": {"message": "Slow down."}}),
     "the server is busy or rate-limited (429: Slow down); it asks to retry in 7 s"),
    (httpx.Response(400, json={"error": {"message": "Unrecognized request argument supplied: top_k",
                                         "param": "top_k"}}),
     "the server rejected the request (400: Unrecognized request argument supplied: top_k); the parameter it "
     "names: 'top_k' (change that setting, or reset the settings)"),
    (httpx.Response(500, text="boom"), "the server failed (500: boom)"),
])
def test_http_errors_are_reported_in_the_chat(qtbot, make_window, monkeypatch, response, message):
    _mock(monkeypatch, _models_or(lambda request: response))
    w = make_window()
    add_backend(qtbot, w, "https://api.example/v1", "k", name="example")
    use_remote(qtbot, w, "m (example)")
    w.settings_panel.set_value("top_k", 40)
    w.chat.send("hi")
    wait_idle(qtbot, w)
    assert w.page.view.error.text() == f"The model could not answer: {message}."
    assert [m.content for m in w.chat.messages] == ["hi"]


def test_the_request_carries_the_settings_and_a_dropped_stream_keeps_the_text(qtbot, make_window, monkeypatch):
    seen = []

    def chat(request):
        seen.append((request.headers.get("authorization"), json.loads(request.content)))

        def body():
            yield sse("one")
            yield sse(" two")
            raise httpx.ReadError("connection reset by peer")
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())
    _mock(monkeypatch, _models_or(chat))
    w = make_window()
    add_backend(qtbot, w, "https://api.example/v1", "k-123", name="example")
    use_remote(qtbot, w, "m (example)")
    for key, value in (("temperature", 0.3), ("max_tokens", 9), ("seed", 5), ("system", "Be brief.")):
        w.settings_panel.set_value(key, value)
    w.chat.send("hi")
    wait_idle(qtbot, w)
    auth, body = seen[-1]
    assert auth == "Bearer k-123"
    assert body["model"] == "m" and body["stream"] is True and body["max_tokens"] == 9 and body["seed"] == 5
    assert body["temperature"] == 0.3
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert "top_k" not in body                       # not OpenAI's, sent only when set
    assert w.chat.messages[-1].content == "one two"
    assert w.chat.messages[-1].meta["stats"]["error"] == (
        "the connection to https://api.example/v1 dropped: connection reset by peer")


def test_without_a_usable_keyring_the_key_is_kept_for_the_session_and_the_app_says_so(qtbot, make_window, server,
                                                                                     data_dir):
    keyring.set_keyring(keyring.backends.fail.Keyring())
    w = make_window()
    assert w.backends_box.notice.text() == (
        "No usable keyring was found on this system, so API keys are kept for this session only: enter them "
        "again after a restart.")
    assert w.backends_box.notice.isVisibleTo(w.backends_box)
    add_backend(qtbot, w, server.url, KEY)
    use_remote(qtbot, w, "default-q8_0 (test server)")
    w.settings_panel.set_value("temperature", 0.0)
    assert send_and_wait(qtbot, w, "what is 12 plus 7?") == "19"
    w.conn.execute("PRAGMA wal_checkpoint(FULL)")
    assert KEY.encode() not in (data_dir / "petit.sqlite3").read_bytes()
