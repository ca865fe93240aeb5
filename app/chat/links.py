"""Opening a link from a reply: the model wrote it, so the user sees the whole address and confirms first, in a
non-modal question (the window stays usable). Only http(s) links get here (app.chat.markdown drops the rest)."""
from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QMessageBox

from app.chat.markdown import is_web_link


def confirm_open_link(parent, url: QUrl) -> QMessageBox | None:
    """Ask whether to open `url` in the browser (Open opens it). Returns the (shown) question, or None for a link
    that is not http(s)."""
    if not is_web_link(url):
        return None
    address = url.toString()
    box = QMessageBox(QMessageBox.Icon.Question, "Open link", "Open this link in your browser?",
                      QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Cancel, parent)
    box.setInformativeText(address)
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)
    box.button(QMessageBox.StandardButton.Open).clicked.connect(lambda: QDesktopServices.openUrl(QUrl(address)))
    box.open()
    return box
