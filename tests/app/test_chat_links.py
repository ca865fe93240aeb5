"""Replies are the model's text, not trusted: raw HTML shows as text, only http(s) links are links, and a click
opens one only after a (non-modal) confirmation."""
from PySide6.QtCore import QPoint, QSize, Qt, QUrl
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QMessageBox

import app.chat.links as links
from app.chat.store import Message

REPLY = ('See <b>this</b> and <img src="file:///etc/hostname">, [the docs](https://example.com/docs?a=1), '
         '[run me](javascript:alert(1)), [a file](file:///etc/passwd), [relative](notes.txt) and '
         '<a href="https://evil.example">html link</a>.\n\n<div onclick="x()">block</div>\n')


def _anchors(view) -> dict:
    """{text: href} of every link in the rendered document."""
    found, block = {}, view.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isAnchor():
                found[it.fragment().text()] = fmt.anchorHref()
            it += 1
        block = block.next()
    return found


def _show_reply(qtbot, window, text):
    window.chat.view.add(Message("assistant", text, {"model": "m"}), "m")
    widget = window.page.view.widgets[-1]
    qtbot.waitUntil(lambda: widget.body.isVisible(), timeout=2000)
    return widget.body


def _click_text(qtbot, view, text: str) -> None:
    """A real mouse click in the middle of `text` in the view."""
    start = view.document().toPlainText().index(text)
    cursor = QTextCursor(view.document())
    cursor.setPosition(start + len(text) // 2)
    rect = view.cursorRect(cursor)
    point = QPoint(rect.center().x(), rect.center().y())
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=point)


def test_raw_html_is_shown_as_text_and_only_web_links_are_links(qtbot, window):
    view = _show_reply(qtbot, window, REPLY)
    text = view.document().toPlainText()
    assert '<b>this</b>' in text and '<img src="file:///etc/hostname">' in text
    assert '<a href="https://evil.example">html link</a>' in text and '<div onclick="x()">block</div>' in text
    assert _anchors(view) == {"the docs": "https://example.com/docs?a=1"}


def test_a_link_opens_only_after_confirmation(qtbot, window, monkeypatch):
    opened = []

    class Browser:
        @staticmethod
        def openUrl(url):
            opened.append(url.toString())
            return True

    monkeypatch.setattr(links, "QDesktopServices", Browser)
    view = _show_reply(qtbot, window, REPLY)
    _click_text(qtbot, view, "run me")                     # not a link any more: nothing happens
    assert window.link_dialog is None
    _click_text(qtbot, view, "the docs")
    box = window.link_dialog
    assert box is not None and box.isVisible()            # shown with open(): the test goes on, nothing blocks
    assert box.informativeText() == "https://example.com/docs?a=1" and opened == []
    box.button(QMessageBox.StandardButton.Cancel).click()
    assert opened == []
    _click_text(qtbot, view, "the docs")
    window.link_dialog.button(QMessageBox.StandardButton.Open).click()
    assert opened == ["https://example.com/docs?a=1"]


def test_only_http_links_are_offered(window):
    for url in ("javascript:alert(1)", "file:///etc/passwd", "notes.txt", "ftp://example.com/x"):
        assert links.confirm_open_link(window, QUrl(url)) is None
    box = links.confirm_open_link(window, QUrl("http://example.com/"))
    assert box.informativeText() == "http://example.com/"
    box.reject()


def test_images_in_a_reply_are_never_read(qtbot, window, tmp_path):
    from PySide6.QtGui import QImage, QTextDocument
    picture = tmp_path / "secret.png"
    image = QImage(4, 4, QImage.Format.Format_RGB32)
    image.fill(0xFF0000)
    assert image.save(str(picture))
    url = QUrl.fromLocalFile(str(picture)).toString()
    view = _show_reply(qtbot, window, f"look: ![secret]({url}) and ![rel](secret.png)")
    view.repaint()                                          # painted: any image would have been loaded now
    assert view.document().toPlainText() == "look: [image: secret] and [image: rel]"
    for name in (url, "secret.png"):
        resource = view.document().resource(QTextDocument.ResourceType.ImageResource, QUrl(name))
        assert resource is None or resource.size() == QSize(1, 1), name     # at most the blank pixel
