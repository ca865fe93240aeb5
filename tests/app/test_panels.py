"""The panels' plug-in points: the Train / Export / Verify / Server tabs; "chat with this model" loads a model into
the chat; the server panel hears of every model change."""
import pytest
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from app_helpers import Q4, TIMEOUT_MS


class FakeTrainPanel(QWidget):
    chat_with_model = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)


class FakeServerPanel(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.models = []
        self.shut_down = False

    def set_model(self, path, options):
        self.models.append((path, options))

    def shutdown(self):
        self.shut_down = True


@pytest.fixture
def fake_panels(monkeypatch):
    import app.window
    verify = type("FakeVerifyPanel", (QWidget,), {})
    monkeypatch.setattr(app.window, "PANELS", (("Train", FakeTrainPanel), ("Export", FakeTrainPanel),
                                               ("Verify", verify), ("Server", FakeServerPanel)))


def test_the_window_has_a_tab_per_panel(window):
    titles = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    assert titles == ["Chat", "Models", "Documents", "Train", "Fine-tune", "Export", "Verify", "Server", "Tools"]


def test_chat_with_this_model_and_the_server_hears_of_model_changes(qtbot, fake_panels, make_window):
    window = make_window()
    server = window.panels["Server"]
    assert isinstance(server, FakeServerPanel)
    assert server.models and server.models[-1][0] == window.models.info.path
    options = server.models[-1][1]
    assert options["n_ctx"] == 128 and options["temperature"] == 0.0 and "system" in options
    window.tabs.setCurrentIndex(1)
    window.panels["Export"].chat_with_model.emit(Q4)
    assert window.tabs.currentWidget() is window.page
    qtbot.waitUntil(lambda: window.models.info.path == Q4 and not window.models.loading, timeout=TIMEOUT_MS)
    assert server.models[-1][0] == Q4
    window.close()
    assert server.shut_down
