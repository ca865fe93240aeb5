"""The app's icon (assets/icons: an SVG, and a PNG for platforms that prefer one)."""
from PySide6.QtGui import QIcon

from app.paths import asset


def app_icon() -> QIcon:
    icon = QIcon()
    for name in ("petit.svg", "petit.png"):
        path = asset("icons", name)
        if path:
            icon.addFile(path)
    return icon
