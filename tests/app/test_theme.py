"""Light and dark themes: the window follows the system's colour scheme as it changes, unless the user picked one
in the settings (kept across a restart); the palette, the message bubbles and the code colours all change, and the
replies already shown are drawn again."""
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette, QTextCursor
from pygments.token import Keyword

from app.chat.code_blocks import DARK, LIGHT
from app.style import MESSAGE_STYLE, MESSAGE_STYLE_DARK

from app_helpers import send_and_wait


def _window_colour():
    return QGuiApplication.palette().color(QPalette.ColorRole.Window)


def _keyword_colour(widget):
    body = widget.body
    c = QTextCursor(body.document())
    c.setPosition(body.toPlainText().index("return") + 1)
    return c.charFormat().foreground().color()


def _code_reply(qtbot, w):
    send_and_wait(qtbot, w, "what is 12 plus 7?")
    widget = w.page.view.widgets[-1]
    widget.set_text("```python\nreturn 1\n```")
    return widget


def _choose(w, value):
    combo = w.settings_panel.theme_combo
    combo.activated.emit(combo.findData(value))


def test_the_theme_follows_the_system_scheme(qtbot, make_window):
    w = make_window()
    assert w.settings_panel.theme_combo.currentText() == "Follow the system"
    assert w.theme.mode == "light" and _window_colour().lightness() > 128
    widget = _code_reply(qtbot, w)
    assert _keyword_colour(widget) == QColor(LIGHT[Keyword])
    QGuiApplication.styleHints().colorSchemeChanged.emit(Qt.ColorScheme.Dark)     # the OS turned dark
    assert w.theme.mode == "dark"
    assert _window_colour().lightness() < 128
    assert w.page.view.styleSheet() == MESSAGE_STYLE_DARK
    assert _keyword_colour(widget) == QColor(DARK[Keyword])                       # drawn again
    QGuiApplication.styleHints().colorSchemeChanged.emit(Qt.ColorScheme.Light)
    assert w.theme.mode == "light" and w.page.view.styleSheet() == MESSAGE_STYLE
    assert _keyword_colour(widget) == QColor(LIGHT[Keyword])


def test_a_theme_chosen_in_the_settings_overrides_the_system_and_is_kept(qtbot, make_window):
    w = make_window()
    _choose(w, "dark")
    assert w.theme.mode == "dark" and _window_colour().lightness() < 128
    QGuiApplication.styleHints().colorSchemeChanged.emit(Qt.ColorScheme.Light)     # ignored: the user chose
    assert w.theme.mode == "dark"
    w.close()
    assert _window_colour().lightness() > 128                                     # the app left as it was
    w2 = make_window()
    assert w2.settings_panel.theme_combo.currentText() == "Dark"
    assert w2.theme.mode == "dark" and w2.page.view.styleSheet() == MESSAGE_STYLE_DARK
    _choose(w2, "light")
    assert w2.theme.mode == "light" and _window_colour().lightness() > 128
