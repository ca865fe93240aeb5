"""A reply is saved as it streams: a real app process killed with SIGKILL mid-reply reopens with the text it had
streamed, marked interrupted, with Continue (go on from that text) and Regenerate (answer again) on the message."""
import os
import signal
import sqlite3
import subprocess
import sys
import time

from PySide6.QtCore import Qt

from app_helpers import send_and_wait, wait_idle

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FULL = "1 2 3 4 5 6 7 8 9 10 11"                  # the bundled model's (greedy) answer to "count from 1 to 30"

# the app, asked to count; each token takes 0.3 s longer on the worker thread, so the reply streams for seconds
APP = """
import time
from PySide6.QtCore import Qt
from app.main import create_app
from app.window import MainWindow
app = create_app([])
w = MainWindow()
w.show()
def slow(_request_id, _text):
    time.sleep(0.3)
def ask(_info):
    w.generation.worker.tokens_decoded.connect(slow, Qt.ConnectionType.DirectConnection)
    w.chat.send("count from 1 to 30")
w.models.model_loaded.connect(ask)
app.exec()
"""


def _saved_reply(db: str) -> tuple[str, dict] | None:
    """The assistant message in the database, read as another process would; None before there is one."""
    if not os.path.exists(db):
        return None
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT content, meta FROM messages WHERE role = 'assistant'").fetchone()
        finally:
            conn.close()
    except sqlite3.OperationalError:                # the schema is still being created
        return None
    return row


def crash_mid_reply(data_dir) -> str:
    """Run the app in its own process, kill it (SIGKILL) once part of its reply is saved; the text saved."""
    db = str(data_dir / "petit.sqlite3")
    proc = subprocess.Popen([sys.executable, "-c", APP], cwd=ROOT, env=dict(os.environ),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        row = None
        while time.monotonic() < deadline and proc.poll() is None:
            row = _saved_reply(db)
            if row and len(row[0].split()) >= 3:
                break
            time.sleep(0.02)
        assert proc.poll() is None, f"the app ended by itself: {proc.stderr.read().decode()[-2000:]}"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
    assert row is not None, "no reply was saved while it streamed"
    return row[0]


def test_a_reply_survives_a_kill_mid_stream_and_continue_finishes_it(qtbot, make_window, data_dir):
    saved = crash_mid_reply(data_dir)
    w = make_window()
    messages = w.chat.messages
    assert [m.role for m in messages] == ["user", "assistant"] and messages[0].content == "count from 1 to 30"
    partial = messages[1].content
    assert partial.startswith(saved) and FULL.startswith(partial) and len(partial) < len(FULL)
    assert messages[1].meta["stats"]["finish_reason"] == "interrupted"
    reply = w.page.view.widgets[-1]
    assert reply.body.source_text == partial
    assert reply.footer.text() == "interrupted: the app closed before the reply ended"
    assert reply.continue_button.isVisibleTo(reply) and reply.regenerate_button.isVisibleTo(reply)
    reply.continue_button.click()
    wait_idle(qtbot, w)
    assert [(m.role, m.content) for m in w.chat.messages] == [("user", "count from 1 to 30"), ("assistant", FULL)]
    assert [(m.role, m.content) for m in w.chat.store.messages(w.chat.chat_id)] == \
        [("user", "count from 1 to 30"), ("assistant", FULL)]
    assert w.chat.messages[1].meta["stats"]["finish_reason"] == "stop"
    reply = w.page.view.widgets[-1]
    assert reply.body.source_text == FULL and len(w.page.view.widgets) == 2
    assert not reply.continue_button.isVisibleTo(reply) and "interrupted" not in reply.footer.text()


def test_regenerate_replaces_an_interrupted_reply(qtbot, make_window, data_dir):
    crash_mid_reply(data_dir)
    w = make_window()
    reply = w.page.view.widgets[-1]
    assert w.chat.messages[-1].meta["stats"]["finish_reason"] == "interrupted"
    reply.regenerate_button.click()
    wait_idle(qtbot, w)
    expected = [("user", "count from 1 to 30"), ("assistant", FULL)]
    assert [(m.role, m.content) for m in w.chat.store.messages(w.chat.chat_id)] == expected
    assert w.chat.messages[1].meta["stats"]["finish_reason"] == "stop"
    assert w.chat.messages[1].meta["stats"]["generated_tokens"] == 12        # answered afresh, not continued


def test_continue_goes_on_with_a_stopped_reply(qtbot, window):
    worker = window.generation.worker
    seen = []

    def stop_at_third(_request_id, text):          # on the worker thread, as the third token is reported
        seen.append(text)
        if len(seen) == 3:
            window.generation.stop()

    worker.tokens_decoded.connect(stop_at_third, Qt.ConnectionType.DirectConnection)
    window.chat.send("count from 1 to 30")
    wait_idle(qtbot, window)
    worker.tokens_decoded.disconnect(stop_at_third)
    stopped = window.chat.messages[-1]
    assert stopped.meta["stats"]["finish_reason"] == "cancelled" and stopped.content == "".join(seen)
    assert FULL.startswith(stopped.content) and len(stopped.content) < len(FULL)
    reply = window.page.view.widgets[-1]
    assert reply.continue_button.isVisibleTo(reply)
    reply.continue_button.click()
    wait_idle(qtbot, window)
    assert [m.content for m in window.chat.messages] == ["count from 1 to 30", FULL]
    assert [m.content for m in window.chat.store.messages(window.chat.chat_id)] == ["count from 1 to 30", FULL]


def test_a_reply_that_ended_by_itself_offers_no_continue(qtbot, window):
    assert send_and_wait(qtbot, window, "what is 12 plus 7?") == "19"
    reply = window.page.view.widgets[-1]
    assert reply.regenerate_button.isVisibleTo(reply) and not reply.continue_button.isVisibleTo(reply)

