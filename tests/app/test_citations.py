"""A reply's "[1]" for a passage it was given is a link in its text (issue 35): a click shows that passage under
the reply. Only the numbers of its passages, only in prose (not code), and a link the model writes with the
citation scheme stays plain text."""
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QTextCursor

from app.chat.message_widget import MessageWidget
from app.chat.store import Message
from app.documents.citations import CITE_SCHEME

SOURCES = [{"n": 1, "name": "choir.md", "location": "line 1", "path": "/docs/choir.md", "text": "Thursdays."},
           {"n": 2, "name": "goats.txt", "location": "lines 3-4", "path": "/docs/goats.txt", "text": "41 goats."}]
REPLY = ("The choir sings on Thursdays [1], and Odile keeps 41 goats [2]. See also [3] and `x[1]`, "
         f"[forged]({CITE_SCHEME}:0/1).\n\n```\nitems[2]\n```\n")


def _links(view) -> list:
    """(text, href) of every link in the rendered document but the code block's Copy, in reading order."""
    found, block = [], view.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isAnchor() and it.fragment().text() != "Copy":
                found.append((it.fragment().text(), fmt.anchorHref()))
            it += 1
        block = block.next()
    return found


def _widget(qtbot, meta):
    w = MessageWidget(Message("assistant", REPLY, meta), "m")
    qtbot.addWidget(w)
    w.resize(700, 400)
    w.show()
    qtbot.waitExposed(w)
    return w


def _click(qtbot, view, at: int) -> None:
    cursor = QTextCursor(view.document())
    cursor.setPosition(at)
    rect = view.cursorRect(cursor)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(rect.center().x() + 2, rect.center().y()))


def test_a_replys_citations_link_to_its_passages(qtbot):
    w = _widget(qtbot, {"model": "m", "sources": SOURCES})
    nonce = w.body._nonce
    assert _links(w.body) == [("[1]", f"{CITE_SCHEME}:{nonce}/1"), ("[2]", f"{CITE_SCHEME}:{nonce}/2")]
    assert "[forged]" not in w.body.document().toPlainText() and "forged" in w.body.document().toPlainText()
    assert not w.sources.passage.isVisibleTo(w)
    text = w.body.document().toPlainText()
    _click(qtbot, w.body, text.index("[2]") + 1)                  # a real click on the "[2]" in the text
    assert w.sources.shown == 2 and w.sources.passage.isVisibleTo(w)
    assert w.sources.passage.text() == "[2] /docs/goats.txt, lines 3-4\n\n41 goats."
    _click(qtbot, w.body, text.index("[1]") + 1)
    assert w.sources.shown == 1 and w.sources.passage.text().startswith("[1] /docs/choir.md, line 1")


def test_without_sources_brackets_stay_text_and_links_follow_the_meta(qtbot):
    w = _widget(qtbot, {"model": "m"})
    assert _links(w.body) == []
    w.set_meta({"model": "m", "sources": SOURCES[:1]})            # the sources arrive: the text is drawn again
    assert [text for text, _ in _links(w.body)] == ["[1]"]
    w.set_meta({"model": "m"})
    assert _links(w.body) == []
