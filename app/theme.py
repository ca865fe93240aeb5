"""Light and dark themes: following the operating system's colour scheme (QStyleHints.colorScheme, Qt 6.5+, and
its colorSchemeChanged) unless the user picked one (Settings panel, "Theme"; kept in the database). A theme is a
QPalette for the application, the message bubbles' style sheet and the code colours of replies; replies already
shown are rendered again in the new colours."""
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPalette

from app.chat import code_blocks
from app.style import MESSAGE_STYLE, MESSAGE_STYLE_DARK

THEME_KEY = "theme"
CHOICES = (("system", "Follow the system"), ("light", "Light"), ("dark", "Dark"))


def system_scheme() -> str:
    hints = QGuiApplication.styleHints()
    scheme = hints.colorScheme() if hasattr(hints, "colorScheme") else Qt.ColorScheme.Unknown
    return "dark" if scheme == Qt.ColorScheme.Dark else "light"


def dark_palette() -> QPalette:
    p = QPalette()
    roles = QPalette.ColorRole
    for role, colour in ((roles.Window, "#2b2b2b"), (roles.WindowText, "#e6e6e6"), (roles.Base, "#1f1f1f"),
                         (roles.AlternateBase, "#2f2f2f"), (roles.Text, "#e6e6e6"), (roles.Button, "#353535"),
                         (roles.ButtonText, "#e6e6e6"), (roles.ToolTipBase, "#3c3c3c"), (roles.ToolTipText, "#e6e6e6"),
                         (roles.Highlight, "#2f65ca"), (roles.HighlightedText, "#ffffff"), (roles.Link, "#6ea8ff"),
                         (roles.PlaceholderText, "#8c8c8c"), (roles.BrightText, "#ff6b6b")):
        p.setColor(role, QColor(colour))
    for role in (roles.WindowText, roles.Text, roles.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor("#7f7f7f"))
    return p


class Theme(QObject):
    changed = Signal(str)              # "light" or "dark", once applied

    def __init__(self, state, view=None, parent=None):
        """state: the database's State (the user's choice); view: the conversation (styled, and re-rendered)."""
        super().__init__(parent)
        self.state, self.view = state, view
        self.choice = state.get(THEME_KEY) or "system"
        self.mode = ""
        self._light = QGuiApplication.palette()
        hints = QGuiApplication.styleHints()
        if hasattr(hints, "colorSchemeChanged"):
            hints.colorSchemeChanged.connect(self._on_system_changed)
        self.apply()

    def set_choice(self, choice: str) -> None:
        """"system", "light" or "dark"; kept for the next start."""
        self.choice = choice if choice in dict(CHOICES) else "system"
        self.state.set(THEME_KEY, self.choice)
        self.apply()

    def _on_system_changed(self, scheme) -> None:
        if self.choice == "system":
            self.apply("dark" if scheme == Qt.ColorScheme.Dark else "light")

    def apply(self, system: str | None = None) -> None:
        mode = self.choice if self.choice != "system" else (system or system_scheme())
        if mode == self.mode:
            return
        self.mode = mode
        QGuiApplication.setPalette(dark_palette() if mode == "dark" else self._light)
        code_blocks.set_theme(mode)
        if self.view is not None:
            self.view.setStyleSheet(MESSAGE_STYLE_DARK if mode == "dark" else MESSAGE_STYLE)
            for w in self.view.widgets:
                w.refresh()
        self.changed.emit(mode)

    def shutdown(self) -> None:
        """Leave the application as it was (the tests' next window starts light)."""
        if self.mode == "dark":
            QGuiApplication.setPalette(self._light)
            code_blocks.set_theme("light")
        hints = QGuiApplication.styleHints()
        if hasattr(hints, "colorSchemeChanged"):
            try:
                hints.colorSchemeChanged.disconnect(self._on_system_changed)
            except (RuntimeError, TypeError):
                pass
