"""Starting the app: `main()` opens the window with the bundled model ready; the bundled font and icon load; it
works at 2x scale; and the engine stays free of Qt."""
import json
import os
import signal
import subprocess
import sys

import pytest
from PySide6.QtGui import QFontDatabase

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


MAIN = r"""
import sys
sys.path.insert(0, sys.argv[1])
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from app.main import main
from app.window import MainWindow

def check():
    windows = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]
    if not windows or not windows[0].chat.model_ready:
        QTimer.singleShot(20, check)
        return
    w = windows[0]
    print("model:", w.status.model_label.text(), "title:", w.windowTitle(), "icon:", not w.windowIcon().isNull())
    w.close()                                   # the last window: the app quits

QTimer.singleShot(0, check)
QTimer.singleShot(20000, lambda: QApplication.exit(3))
sys.exit(main(sys.argv[2:]))
"""


def test_main_opens_the_window_with_the_bundled_model(tmp_path):
    """`petit-app` / `python -m app`: a window with the bundled model ready to chat; closing it quits."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PETIT_DATA_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", MAIN, ROOT], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "model: default-q8_0 title: Petit — default-q8_0 icon: True" in out.stdout
    assert (tmp_path / "petit.sqlite3").exists()


def test_the_bundled_font_and_icon(qapp):
    from app.fonts import MONO_FAMILY, UI_FAMILY, load_fonts
    from app.icon import app_icon
    families = load_fonts(qapp)
    assert UI_FAMILY in families and MONO_FAMILY in families
    assert qapp.font().family() == UI_FAMILY
    assert UI_FAMILY in QFontDatabase.families()
    assert not app_icon().isNull()
    assert os.path.exists(os.path.join(ROOT, "assets", "fonts", "LICENSE-DejaVu.txt"))


SCALED = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from PySide6.QtCore import QEventLoop
from app.main import create_app
from app.window import MainWindow
app = create_app([])
w = MainWindow()
w.resize(900, 600)
w.show()
import time
end = time.time() + 15
def spin(cond):
    while not cond() and time.time() < end:
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 10)
spin(lambda: w.chat.model_ready)
w.chat.send("what is 12 plus 7?")
spin(lambda: not w.chat.busy and len(w.chat.messages) == 2)
shot = w.grab()
box = w.page.composer.input
print(json.dumps({"ratio": w.devicePixelRatio(), "shot": [shot.width(), shot.height()],
                  "size": [w.width(), w.height()], "reply": w.chat.messages[-1].content,
                  "input_h": box.height(), "line": box.fontMetrics().lineSpacing(),
                  "send_visible": w.page.composer.button.isVisible(),
                  "status": w.status.context_label.text()}))
w.close()
"""


def test_it_works_at_twice_the_scale(tmp_path):
    env = dict(os.environ, QT_SCALE_FACTOR="2", QT_QPA_PLATFORM="offscreen", PETIT_DATA_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", SCALED, ROOT], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["ratio"] == 2.0
    assert result["shot"] == [2 * result["size"][0], 2 * result["size"][1]]
    assert result["reply"] == "19" and result["send_visible"]
    assert result["input_h"] >= 2 * result["line"]
    assert result["status"].startswith("context ")


def test_the_engine_does_not_import_qt():
    code = ("import sys, petit, petit.generation.session, petit.cli, petit.chat.formats; "
            "print(sorted(m for m in sys.modules if m.startswith(('PySide', 'PyQt', 'shiboken'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# one instance per data folder
FIRST = r"""
import sys
sys.path.insert(0, sys.argv[1])
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from app.main import main
from app.window import MainWindow
said = set()

def check():
    windows = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow)]
    if not windows or not windows[0].chat.model_ready:
        QTimer.singleShot(20, check)
        return
    w = windows[0]
    if "ready" not in said:
        said.add("ready")
        w.showMinimized()
        print("ready", flush=True)
    if w.windowTitle() == "Petit — default-q4_0":
        print("opened:", w.windowTitle(), "minimized:", w.isMinimized(), flush=True)
        w.close()
        return
    QTimer.singleShot(20, check)

QTimer.singleShot(0, check)
QTimer.singleShot(60000, lambda: QApplication.exit(3))
sys.exit(main(sys.argv[2:]))
"""


def start_first(tmp_path):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PETIT_DATA_DIR=str(tmp_path))
    first = subprocess.Popen([sys.executable, "-c", FIRST, ROOT], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    line = first.stdout.readline()
    assert line == "ready\n", first.stderr.read() if not line else line
    return first, env


def test_a_second_start_on_the_same_data_folder_brings_the_first_forward(tmp_path):
    """`petit-app MODEL` while Petit runs on that data folder: no second window; the first comes out of the task
    bar, to the front, and opens MODEL."""
    from app_helpers import Q4
    first, env = start_first(tmp_path)
    try:
        second = subprocess.run([sys.executable, "-m", "app", Q4], env=env, cwd=ROOT, capture_output=True,
                                text=True, timeout=60)
        assert second.returncode == 0, second.stderr[-2000:]
        assert second.stderr == (f"petit-app: Petit is already running with the data folder {tmp_path}: brought "
                                 f"its window to the front to open {Q4}.\n")
        out, err = first.communicate(timeout=60)
        assert first.returncode == 0, err[-2000:]
        assert out == "opened: Petit — default-q4_0 minimized: False\n"
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


def test_a_killed_instance_does_not_block_the_next_start(tmp_path):
    first, env = start_first(tmp_path)
    first.send_signal(signal.SIGKILL if hasattr(signal, "SIGKILL") else signal.SIGTERM)
    first.communicate()
    assert (tmp_path / "petit.lock").exists()           # left behind by the killed instance
    out = subprocess.run([sys.executable, "-c", MAIN, ROOT], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "model: default-q8_0 title: Petit — default-q8_0 icon: True" in out.stdout


def test_a_data_folder_held_by_a_process_that_does_not_answer_is_named(tmp_path):
    from PySide6.QtCore import QLockFile
    tmp_path.mkdir(exist_ok=True)
    lock = QLockFile(str(tmp_path / "petit.lock"))
    assert lock.tryLock(0)
    try:
        pid, host, name = lock.getLockInfo()
        env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PETIT_DATA_DIR=str(tmp_path))
        out = subprocess.run([sys.executable, "-m", "app"], env=env, cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
    finally:
        lock.unlock()
    assert out.returncode == 1
    assert out.stderr == (f"petit-app: Petit cannot start: process {pid} ({name}) on {host} is using its data "
                          f"folder {tmp_path} and does not answer. Close that Petit (or end that process) and start "
                          f"again.\n")


# the window's system libraries (Linux, X11)
MISSING = {"libxcb-icccm.so.4", "libxcb-keysyms.so.1"}         # what a fresh Debian 12 lacks


def test_missing_window_libraries_are_named_with_the_packages_that_install_them(monkeypatch, capsys):
    """Qt's xcb plugin cannot load without libxcb-icccm4 and libxcb-keysyms1, and Qt's own message names another
    package: the app says which libraries are missing and how to install them, before Qt aborts."""
    import app.display as display
    import app.main
    loaded = []

    def no_qt(*_):
        raise AssertionError("Qt was started: it would abort")
    monkeypatch.setattr(app.main, "create_app", no_qt)

    def loadable(lib):
        loaded.append(lib)
        return lib not in MISSING
    monkeypatch.setattr(display, "_loadable", loadable)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert app.main.main([]) == 1
    assert capsys.readouterr().err == ("petit-app: Petit cannot open its window: missing system libraries "
                                       "libxcb-icccm.so.4, libxcb-keysyms.so.1 — on Debian/Ubuntu: sudo apt-get "
                                       "install libxcb-icccm4 libxcb-keysyms1\n")
    assert {"libxcb.so.1", "libxcb-cursor.so.0", "libxkbcommon-x11.so.0"} <= set(loaded)


def test_the_xcb_libraries_are_checked_only_where_qt_uses_xcb():
    from app.display import QT_LIBRARIES, window_problem
    qt = {lib for lib, _ in QT_LIBRARIES}
    none = lambda lib: lib in qt                                # noqa: E731  (every xcb library missing)
    x11 = {"DISPLAY": ":0"}
    assert window_problem(x11, (), "linux", none).startswith("Petit cannot open its window: missing system "
                                                             "libraries libX11-xcb.so.1, libxkbcommon-x11.so.0, ")
    assert window_problem(x11, (), "linux", lambda lib: True) is None          # all there
    assert window_problem({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, (), "linux", none) is None
    assert window_problem({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, (), "linux", none) is None
    assert window_problem(x11, ("-platform", "offscreen"), "linux", none) is None
    assert window_problem({}, (), "linux", none) is None                     # no display: Qt says so itself
    assert window_problem(x11, (), "darwin", lambda lib: False) is None
    assert window_problem(x11, (), "win32", lambda lib: False) is None


@pytest.mark.parametrize("environ", [{"DISPLAY": ":0"}, {"QT_QPA_PLATFORM": "offscreen"}, {}])
def test_the_libraries_qt_itself_links_are_named_on_every_linux_start(environ):
    """A fresh Debian 12 lacks libGL, libEGL, GLib and D-Bus too: the import of QtGui failed naming one of them,
    and the app then blamed PySide6 ("the desktop app needs PySide6"), which was installed (found in a fresh
    bookworm chroot)."""
    from app.display import window_problem
    gone = {"libGL.so.1", "libglib-2.0.so.0", "libdbus-1.so.3"}
    text = window_problem(environ, (), "linux", lambda lib: lib not in gone)
    assert text == ("Petit cannot open its window: missing system libraries libglib-2.0.so.0, libdbus-1.so.3, "
                    "libGL.so.1 — on Debian/Ubuntu: sudo apt-get install libglib2.0-0 libdbus-1-3 libgl1")


def test_the_bundled_app_does_not_check_the_libraries_it_carries(monkeypatch):
    from app.display import window_problem
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert window_problem({"DISPLAY": ":0"}, (), "linux", lambda lib: False) is None
