"""The desktop app's tests: pytest-qt, offscreen, each test with its own data folder.

The whole folder is skipped when PySide6 or pytest-qt is not installed (the engine's tests need neither).
QT_QPA_PLATFORM is set before anything imports Qt.
"""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

try:
    import PySide6  # noqa: F401
    import pytestqt  # noqa: F401
except ImportError:
    collect_ignore_glob = ["test_*.py"]
else:
    import pytest

    @pytest.fixture(autouse=True)
    def data_dir(tmp_path, monkeypatch):
        """Every test gets a fresh data folder: its own database, chats, settings and recent models."""
        path = tmp_path / "petit-data"
        monkeypatch.setenv("PETIT_DATA_DIR", str(path))
        return path

    @pytest.fixture(autouse=True)
    def home_dir(tmp_path, monkeypatch):
        """The model library looks for other apps' stores (Hugging Face cache, LM Studio, Ollama) in this empty
        home, never in the real one."""
        import app.library.locations as locations
        path = tmp_path / "home"
        path.mkdir()
        monkeypatch.setattr(locations, "home", lambda: str(path))
        for name in ("HF_HOME", "HF_HUB_CACHE", "OLLAMA_MODELS"):
            monkeypatch.delenv(name, raising=False)
        return path

    @pytest.fixture(scope="session", autouse=True)
    def _app_fonts(qapp):
        from app.fonts import load_fonts
        load_fonts(qapp)
        qapp.setApplicationName("Petit")

    @pytest.fixture(autouse=True)
    def workers(monkeypatch):
        """Every app.threads.Worker a test starts (loads, training, export, verify, speed measurements): each must
        have been stopped and joined by the end of the test (the window's and panels' shutdown, or its end)."""
        import shiboken6

        from app.threads import Worker
        started = []

        def start(self, *args, _orig=Worker.start):
            started.append(self)
            return _orig(self, *args)
        monkeypatch.setattr(Worker, "start", start)
        yield started
        # a deleted worker was deleted after its thread ended (the owners wait, then deleteLater)
        running = [w.objectName() for w in started if shiboken6.isValid(w) and not w.isFinished()]
        assert not running, f"worker threads still running: {running}"

    @pytest.fixture
    def make_window(qtbot):
        """make_window(model_path=None) -> a shown MainWindow whose model is loaded. Every window is shut down
        at teardown, and no thread it started may still run."""
        from app_helpers import assert_no_threads_left, open_window
        windows = []

        def make(model_path=None, wait=True):
            w = open_window(qtbot, model_path, wait)
            windows.append(w)
            return w

        yield make
        for w in windows:
            w.close()
            assert_no_threads_left(w)

    @pytest.fixture
    def window(make_window):
        return make_window()
