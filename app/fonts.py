"""The bundled fonts (assets/fonts, DejaVu): registered with Qt and made the app's font, so the window is readable
on a machine with no system fonts."""
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import QApplication

from app.paths import asset_files

UI_FAMILY = "DejaVu Sans"
MONO_FAMILY = "DejaVu Sans Mono"


def load_fonts(app: QApplication) -> list[str]:
    """Register every bundled TTF; make DejaVu Sans the app font. Returns the families registered."""
    families = []
    for path in asset_files("fonts", ".ttf"):
        font_id = QFontDatabase.addApplicationFont(path)
        if font_id >= 0:
            families.extend(QFontDatabase.applicationFontFamilies(font_id))
    if MONO_FAMILY in families:
        QFont.insertSubstitution("monospace", MONO_FAMILY)     # what Qt's Markdown importer asks for code
    if UI_FAMILY in families:
        font = QFont(UI_FAMILY)
        font.setPointSizeF(max(app.font().pointSizeF(), 10.0))
        app.setFont(font)
    return sorted(set(families))


def mono_font() -> QFont:
    font = QFont(MONO_FAMILY)
    font.setStyleHint(QFont.StyleHint.Monospace)
    return font
