"""Shared steps of the app tests: open a window with a loaded model, send and wait, check threads are gone."""
import os

from petit.assets import default_model_path

DEFAULT = default_model_path()
Q4 = os.path.join(os.path.dirname(DEFAULT), "default-q4_0.petit")
HF_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "hf")
HF_FOLDER = os.path.join(HF_FIXTURES, "qwen2")        # a tiny random-weight Hugging Face folder
TIMEOUT_MS = 10000


def open_window(qtbot, model_path=None, wait=True):
    from app.window import MainWindow
    w = MainWindow(model_path=model_path)
    qtbot.addWidget(w)
    w.show()
    if wait:
        qtbot.waitUntil(lambda: w.chat.model_ready and not w.models.loading, timeout=TIMEOUT_MS)
    return w


def send_and_wait(qtbot, window, text: str) -> str:
    """Send `text`, wait for the reply to end; returns it."""
    window.chat.send(text)
    wait_idle(qtbot, window)
    last = window.chat.messages[-1]
    return last.content if last.role == "assistant" else ""


def wait_idle(qtbot, window) -> None:
    qtbot.waitUntil(lambda: not window.chat.busy, timeout=TIMEOUT_MS)


def assert_no_threads_left(window) -> None:
    assert window.generation._thread.isFinished(), "the generation thread still runs"
    assert not window.models._jobs, "a model load thread still runs"
    assert window.tools.hub is None, "the MCP sessions' thread still runs"
