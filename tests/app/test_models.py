"""Opening models: on a worker while the old one keeps answering, recent list, drop on the window, cancel, the
memory check, and load errors shown in a dialog with the engine's message while the app stays usable."""
import os

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from app.models import memory
import pytest

from app_helpers import DEFAULT, HF_FOLDER, Q4, TIMEOUT_MS, send_and_wait


def _wait_loaded(qtbot, window, weight_type):
    qtbot.waitUntil(lambda: not window.models.loading and window.models.info.weight_type == weight_type,
                    timeout=TIMEOUT_MS)


def test_the_bundled_model_is_loaded_at_start(window):
    assert window.models.info.path == DEFAULT
    assert window.status.model_label.text() == "default-q8_0"
    assert window.windowTitle() == "Petit — default-q8_0"


def test_opening_another_model_switches_the_chat_to_it(qtbot, window):
    send_and_wait(qtbot, window, "what is 12 plus 7?")
    window.open_model(Q4)
    assert window.status.load_bar.isVisibleTo(window.status)
    assert "needs about" in window.status.load_label.text()
    _wait_loaded(qtbot, window, "q4_0")
    assert not window.status.load_bar.isVisibleTo(window.status)
    assert window.status.weights_label.text() == "q4_0 weights"
    assert send_and_wait(qtbot, window, "which is bigger, 2 or 16?") == "16"
    assert window.chat.messages[-1].meta["model"] == "default-q4_0"
    assert window.models.recent.paths()[:2] == [Q4, DEFAULT]


def test_the_old_model_answers_while_the_new_one_loads(qtbot, window):
    window.open_model(Q4)
    window.chat.send("what is 12 plus 7?")              # sent during the load
    qtbot.waitUntil(lambda: not window.chat.busy and not window.models.loading, timeout=TIMEOUT_MS)
    assert window.chat.messages[-1].content == "19"


@pytest.mark.skipif(not os.path.isdir(HF_FOLDER), reason="the Hugging Face test fixtures are not there")
def test_a_hugging_face_folder_opens_and_chats(qtbot, window):
    window.open_model(HF_FOLDER)
    qtbot.waitUntil(lambda: window.models.info.path == HF_FOLDER and not window.models.loading, timeout=TIMEOUT_MS)
    assert window.error_dialog is None
    assert window.status.model_label.text() == "qwen2"
    window.settings_panel.set_value("max_tokens", 4)
    window.chat.send("hello")                       # random weights: any text, but a whole turn
    qtbot.waitUntil(lambda: not window.chat.busy, timeout=TIMEOUT_MS)
    assert window.chat.messages[-1].meta["model"] == "qwen2" or window.chat.messages[-1].role == "user"
    assert not window.page.view.error.isVisibleTo(window.page.view)


def test_a_corrupt_file_shows_the_engine_message_and_the_app_stays_usable(qtbot, window, tmp_path):
    bad = tmp_path / "broken.petit"
    bad.write_bytes(b"PETIT\x00 this is not a model" * 10)
    window.open_model(str(bad))
    qtbot.waitUntil(lambda: window.error_dialog is not None and window.error_dialog.isVisible(), timeout=TIMEOUT_MS)
    dialog = window.error_dialog
    assert not dialog.isModal() or dialog.windowModality() != Qt.WindowModality.ApplicationModal
    assert "broken.petit" in dialog.text()
    assert str(bad) in dialog.informativeText()          # the engine's message names the file and the problem
    assert not window.models.loading and not window.status.load_bar.isVisibleTo(window.status)
    assert window.models.info.path == DEFAULT
    dialog.accept()
    assert send_and_wait(qtbot, window, "what is 12 plus 7?") == "19"
    assert str(bad) not in window.models.recent.paths()


def test_a_missing_file_and_an_unusable_folder_are_reported(qtbot, window, tmp_path):
    window.open_model(str(tmp_path / "nowhere.petit"))
    qtbot.waitUntil(lambda: window.error_dialog is not None, timeout=TIMEOUT_MS)
    assert "nowhere.petit" in window.error_dialog.informativeText()
    window.error_dialog.accept()
    window.error_dialog = None
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    (folder / "readme.txt").write_text("hello")
    window.open_model(str(folder))
    qtbot.waitUntil(lambda: window.error_dialog is not None, timeout=TIMEOUT_MS)
    assert window.error_dialog.informativeText()
    assert window.models.info.path == DEFAULT


def test_cancelling_a_load_keeps_the_current_model(qtbot, window):
    window.open_model(Q4)
    window.status.cancel_button.click()
    assert not window.models.loading and not window.status.load_bar.isVisibleTo(window.status)
    qtbot.waitUntil(lambda: not window.models._jobs, timeout=TIMEOUT_MS)
    qtbot.wait(50)
    assert window.models.info.path == DEFAULT
    assert send_and_wait(qtbot, window, "what is 12 plus 7?") == "19"


def test_a_model_too_big_for_the_memory_needs_confirming(qtbot, window, monkeypatch):
    monkeypatch.setattr(memory, "machine_memory", lambda: memory.MemoryInfo(total=4 << 20, available=1 << 19))
    window.open_model(Q4)
    dialog = window.confirm_dialog
    assert dialog is not None and dialog.isVisible()
    assert "may not fit" in dialog.text() and "available" in dialog.text()
    assert not window.models.loading
    from PySide6.QtWidgets import QMessageBox
    dialog.button(QMessageBox.StandardButton.Yes).click()
    _wait_loaded(qtbot, window, "q4_0")


def test_memory_figures():
    info = memory.machine_memory()
    assert info.total is None or info.total > 0
    assert memory.model_bytes(DEFAULT) > 500_000
    text, fits = memory.fit_message(DEFAULT, memory.MemoryInfo(total=8 << 30, available=4 << 30))
    assert fits and text == f"needs about {memory.human_bytes(os.path.getsize(DEFAULT))}; 4.0 GB available of 8.0 GB"
    _, fits = memory.fit_message(DEFAULT, memory.MemoryInfo(total=1 << 20, available=1 << 20))
    assert not fits


def test_windows_memory_comes_from_global_memory_status(monkeypatch):
    """The Windows branch, with kernel32 stood in for: the struct is the documented 64 bytes, its length field is
    set before the call, and the physical total and available figures are what the app reports."""
    import ctypes
    assert ctypes.sizeof(memory.MEMORYSTATUSEX) == 64

    def global_memory_status_ex(ref):
        status = ctypes.cast(ref, ctypes.POINTER(memory.MEMORYSTATUSEX)).contents
        assert status.dwLength == 64
        status.ullTotalPhys, status.ullAvailPhys = 16 << 30, 5 << 30
        return 1

    class Windll:
        kernel32 = type("kernel32", (), {"GlobalMemoryStatusEx": staticmethod(global_memory_status_ex)})

    monkeypatch.setattr(memory.sys, "platform", "win32")
    monkeypatch.setattr(ctypes, "windll", Windll, raising=False)
    assert memory.machine_memory() == memory.MemoryInfo(total=16 << 30, available=5 << 30)
    Windll.kernel32.GlobalMemoryStatusEx = staticmethod(lambda ref: 0)     # the call failed
    assert memory.machine_memory() == memory.MemoryInfo(None, None)


def test_dropping_a_model_on_the_window_opens_it(qtbot, window):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(Q4)])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                       Qt.KeyboardModifier.NoModifier)
    window.dropEvent(event)
    _wait_loaded(qtbot, window, "q4_0")


def test_a_dropped_gguf_file_opens_and_answers(qtbot, window):
    gguf = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "gguf", "qwen2", "q8_0.gguf")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(gguf)])
    window.dropEvent(QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                                Qt.KeyboardModifier.NoModifier))
    qtbot.waitUntil(lambda: not window.models.loading and window.models.info.path == gguf, timeout=TIMEOUT_MS)
    assert window.status.model_label.text() == "q8_0"               # the name without .gguf
    assert window.models.info.has_template                           # the file's chat template
    send_and_wait(qtbot, window, "hello")
    last = window.chat.messages[-1]
    assert last.role == "assistant" and last.content                 # the tiny random model answers something


def test_the_open_dialog_offers_gguf_files():
    from app.models.dialogs import MODEL_FILTER
    assert MODEL_FILTER.startswith("Models (*.petit *.gguf);;")


def test_the_recent_menu_reopens_a_model(qtbot, window):
    window.open_model(Q4)
    _wait_loaded(qtbot, window, "q4_0")
    from app.actions import fill_recent
    fill_recent(window)
    actions = {a.text(): a for a in window.recent_menu.actions()}
    assert list(actions) == ["default-q4_0.petit", "default-q8_0.petit"]
    actions["default-q8_0.petit"].trigger()
    _wait_loaded(qtbot, window, "q8_0")


def test_a_restart_reopens_the_last_model(qtbot, make_window):
    first = make_window()
    first.open_model(Q4)
    _wait_loaded(qtbot, first, "q4_0")
    first.close()
    second = make_window()
    assert second.models.info.path == Q4


def test_the_engines_warnings_about_a_model_are_shown(qtbot, window, monkeypatch):
    """A model the engine loads with warnings (e.g. a file with no checksums): the chat switches to it and a
    non-modal notice says each warning."""
    import petit
    from app.models import loader
    warning = "this file carries no checksums and cannot be checked"

    real_load = petit.load

    def load_with_warnings(path, **kw):
        """The loaded model, carrying the `warnings` list the engine adds."""
        model = real_load(path, **kw)
        model.warnings = [warning]
        return model
    monkeypatch.setattr(loader.petit, "load", load_with_warnings)
    assert window.models.warning_dialog is None            # the bundled model: no warnings, no notice
    window.open_model(Q4)
    _wait_loaded(qtbot, window, "q4_0")
    box = window.models.warning_dialog
    assert box is not None and box.isVisible() and box.windowModality() == Qt.WindowModality.NonModal
    assert box.text() == f"default-q4_0 is loaded, but note:\n• {warning}"
    assert window.models.info.warnings == [warning]
    assert send_and_wait(qtbot, window, "which is bigger, 2 or 16?") == "16"    # the chat works meanwhile
    box.close()
