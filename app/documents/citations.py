"""The "[1]", "[2]" a reply writes for the passages it was given, made links in its text: a click shows that
passage under the reply, as the links under it do (issue 35).

Only numbers of passages the reply was given become links, only in its prose (never inside code), and only by this
pass, after the Markdown is rendered: a link the model writes itself keeps no scheme but http(s)
(app.chat.markdown.keep_web_links_only), and these carry the view's nonce, so a reply cannot forge one.
"""
import re

from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor, QTextFormat

CITE_SCHEME = "petit-cite"
CITATION = re.compile(r"\[(\d{1,3})\]")


def link_citations(document, numbers, nonce: str) -> list[int]:
    """Make every "[n]" of `document`'s prose with n in `numbers` a link to f"{CITE_SCHEME}:{nonce}/{n}"; returns
    the numbers linked, in reading order."""
    spans = []
    block = document.begin()
    while block.isValid():
        if not block.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence):
            it = block.begin()
            while not it.atEnd():
                fragment = it.fragment()
                fmt = fragment.charFormat()
                if not fmt.fontFixedPitch() and not fmt.isAnchor() and not fmt.isImageFormat():
                    for m in CITATION.finditer(fragment.text()):
                        if int(m.group(1)) in numbers:
                            spans.append((fragment.position() + m.start(), m.end() - m.start(), int(m.group(1)), fmt))
                it += 1
        block = block.next()
    for position, length, n, fmt in spans:        # changed after the walk: a change splits fragments
        link = QTextCharFormat(fmt)
        link.setAnchor(True)
        link.setAnchorHref(f"{CITE_SCHEME}:{nonce}/{n}")
        link.setFontUnderline(True)
        link.setForeground(QColor("#2a6fdb"))
        c = QTextCursor(document)
        c.setPosition(position)
        c.setPosition(position + length, QTextCursor.MoveMode.KeepAnchor)
        c.setCharFormat(link)
    return [n for _, _, n, _ in spans]


def cited_number(url, nonce: str) -> int | None:
    """The passage number a citation link `url` (a QUrl) names, or None when it is not one of this view's."""
    if url.scheme() != CITE_SCHEME:
        return None
    got, _, n = url.path().partition("/")
    return int(n) if got == nonce and n.isdigit() else None
