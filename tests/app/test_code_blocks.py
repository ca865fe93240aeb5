"""Code blocks in replies: coloured by their language, each under a header with its language and a Copy link that
puts exactly the block's text on the clipboard; a link the model writes cannot pose as a Copy link."""
from PySide6.QtCore import QUrl, Qt
from PySide6.QtGui import QColor, QGuiApplication, QTextCursor

from app.chat.code_blocks import DARK, LIGHT, palette
from app.chat.markdown import MarkdownView
from pygments.token import Comment, Keyword, String

REPLY = ("Use this:\n\n```python\ndef greet(name):\n    return \"hi \" + name  # say it\n```\n\n"
         "and run:\n\n```sh\necho done\n```\n")


def _view(qtbot, text=REPLY):
    view = MarkdownView()
    qtbot.addWidget(view)
    view.resize(600, 400)
    view.show()
    view.show_markdown(text)
    return view


def _colour_at(view, word):
    position = view.toPlainText().index(word)
    c = QTextCursor(view.document())
    c.setPosition(position + 1)
    return c.charFormat().foreground().color()


def test_code_blocks_are_coloured_by_language_and_headed_with_copy(qtbot):
    view = _view(qtbot)
    assert view.toPlainText() == ("Use this:\npython  Copy\ndef greet(name):\n    return \"hi \" + name  # say it\n"
                                  "and run:\nsh  Copy\necho done")
    assert _colour_at(view, "return") == QColor(LIGHT[Keyword])
    assert _colour_at(view, "\"hi ") == QColor(LIGHT[String])
    assert _colour_at(view, "# say it") == QColor(LIGHT[Comment])
    assert view.code_blocks == ["def greet(name):\n    return \"hi \" + name  # say it", "echo done"]


def test_clicking_copy_puts_the_blocks_text_on_the_clipboard(qtbot):
    view = _view(qtbot)
    QGuiApplication.clipboard().setText("")
    rect = view.copy_link_rect(1)
    with qtbot.waitSignal(view.code_copied) as copied:
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert copied.args == [1]
    assert QGuiApplication.clipboard().text() == "echo done"
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.copy_link_rect(0).center())
    assert QGuiApplication.clipboard().text() == "def greet(name):\n    return \"hi \" + name  # say it"


def test_a_copy_link_written_by_the_model_is_plain_text(qtbot):
    view = _view(qtbot, "[grab](petit-copy:0000/0)\n\n```\nsecret\n```\n")
    assert view.toPlainText() == "grab\ncode  Copy\nsecret"
    QGuiApplication.clipboard().setText("unchanged")
    view._on_anchor(QUrl("petit-copy:0000/0"))          # even if such an address reached the view, wrong nonce
    assert QGuiApplication.clipboard().text() == "unchanged"


def test_the_dark_palette_colours_code_for_a_dark_background(qtbot, monkeypatch):
    monkeypatch.setitem(palette, "colours", DARK)
    view = _view(qtbot)
    assert _colour_at(view, "return") == QColor(DARK[Keyword])
