"""The GUI thread never does the engine's work: every model load (petit.load) runs on a load thread, and every
prefill, decode and template rendering of a reply or a context measurement runs on the generation worker's thread,
whatever the user does (open models, a Hugging Face folder converted at load, send, regenerate, continue, change a
setting). The event-loop stalls themselves are measured by bench/bench_app_stall.py (tests never assert timings).
"""
import sys
import threading

import pytest
from PySide6.QtCore import QThread

import petit
import petit.generation.session
from app.threads import Worker
from app_helpers import DEFAULT, HF_FOLDER, Q4, TIMEOUT_MS, send_and_wait, wait_idle


class ThreadLog:
    """Which thread (Python id and QThread) each engine call ran on."""

    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()

    def record(self, what: str) -> None:
        with self.lock:
            self.calls.append((what, threading.get_ident(), QThread.currentThread()))

    def kinds(self) -> set:
        return {what for what, _, _ in self.calls}


@pytest.fixture
def engine_calls(monkeypatch):
    """Wrap the engine's entry points the app calls (petit.load; the Session's token generation and prompt
    rendering) to log the thread each call runs on; they still do their work."""
    log = ThreadLog()
    load, generate_tokens = petit.load, petit.generation.session.generate_tokens
    prompt_ids = petit.generation.session.Session.prompt_ids

    def logged_load(*args, **kwargs):
        log.record("load")
        return load(*args, **kwargs)

    def logged_generate_tokens(*args, **kwargs):
        log.record("generate")
        yield from generate_tokens(*args, **kwargs)

    def logged_prompt_ids(self, messages, *args, **kwargs):
        log.record("render")
        return prompt_ids(self, messages, *args, **kwargs)

    monkeypatch.setattr(petit, "load", logged_load)
    monkeypatch.setattr(petit.generation.session, "generate_tokens", logged_generate_tokens)
    monkeypatch.setattr(petit.generation.session.Session, "prompt_ids", logged_prompt_ids)
    return log


def test_no_loading_or_generation_runs_on_the_gui_thread(qtbot, make_window, engine_calls, qapp, workers):
    gui_ident, gui_thread = threading.get_ident(), qapp.thread()
    w = make_window()                                     # the first load, at start
    assert send_and_wait(qtbot, w, "what is 12 plus 7?") == "19"
    w.chat.regenerate()
    wait_idle(qtbot, w)
    w.chat.send("count from 1 to 30")
    w.chat.stop()
    wait_idle(qtbot, w)
    w.chat.continue_reply()
    wait_idle(qtbot, w)
    w.settings_panel.set_value("n_ctx", 96)               # measured again: rendered on the worker
    for path in (Q4, HF_FOLDER, DEFAULT):
        w.open_model(path)
        qtbot.waitUntil(lambda p=path: w.models.info.path == p and not w.models.loading, timeout=TIMEOUT_MS)
    assert send_and_wait(qtbot, w, "spell cat backwards") == "tac"
    qtbot.waitUntil(lambda: not w.generation.busy, timeout=TIMEOUT_MS)

    calls = engine_calls.calls
    assert engine_calls.kinds() == {"load", "generate", "render"}
    assert sum(what == "load" for what, _, _ in calls) == 4
    on_gui = [what for what, ident, thread in calls if ident == gui_ident or thread == gui_thread]
    assert on_gui == [], f"engine work ran on the GUI thread: {on_gui}"
    worker_thread = w.generation._thread
    for what, _, thread in calls:
        if what == "load":
            assert isinstance(thread, Worker) and any(thread is w for w in workers), f"a load ran on {thread!r}"
        else:
            assert thread == worker_thread, f"{what} ran on {thread!r}, not the generation worker's thread"


def test_the_app_leaves_the_interpreters_switch_interval_alone(qtbot, make_window):
    """No process-wide side effect: Python's thread switch interval is the same after a window has opened, loaded
    and answered as before it (the app once set it to 1 ms for good)."""
    before = sys.getswitchinterval()
    w = make_window()
    assert send_and_wait(qtbot, w, "what is 12 plus 7?") == "19"
    assert sys.getswitchinterval() == before
