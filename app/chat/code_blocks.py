"""Fenced code blocks in a rendered reply: syntax colours (Pygments, by the fence's language; none when it names no
language Pygments knows) and a header line above each block with its language and a Copy link. The link's address
carries a nonce made per view, so a link the model writes can never pass for one (the model's links are plain text
unless http(s) anyway). Lexing a block is cached by its text: while a reply streams only the growing block is lexed
again."""
import secrets
from functools import lru_cache

from PySide6.QtGui import QColor, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextFormat

from pygments.lexers import get_lexer_by_name
from pygments.token import Comment, Keyword, Name, Number, Operator, String
from pygments.util import ClassNotFound

COPY_SCHEME = "petit-copy"
LIGHT = {Keyword: "#0033b3", Name.Builtin: "#7a3e9d", Name.Function: "#00627a", Name.Class: "#00627a",
         String: "#067d17", Number: "#1750eb", Comment: "#8c8c8c", Operator: "#5c5c5c", Name.Decorator: "#9e880d"}
DARK = {Keyword: "#cc7832", Name.Builtin: "#b77fdb", Name.Function: "#ffc66d", Name.Class: "#ffc66d",
        String: "#6aab73", Number: "#6897bb", Comment: "#7a7e85", Operator: "#a9b7c6", Name.Decorator: "#bbb529"}
palette = {"colours": LIGHT, "background": QColor(0, 0, 0, 18)}     # the theme's (app.theme sets it)


def set_theme(mode: str) -> None:
    dark = mode == "dark"
    palette["colours"] = DARK if dark else LIGHT
    palette["background"] = QColor(255, 255, 255, 22) if dark else QColor(0, 0, 0, 18)


def new_nonce() -> str:
    return secrets.token_hex(8)


@lru_cache(maxsize=256)
def _spans(language: str, code: str) -> tuple:
    """((offset, length, token type), ...) of the tokens Pygments colours."""
    try:
        lexer = get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return ()
    out, offset = [], 0
    for ttype, value in lexer.get_tokens(code):
        out.append((offset, len(value), ttype))
        offset += len(value)
    return tuple(out)


def warm_up() -> None:
    """Import the lexers replies use most now, not in the middle of a streaming reply (the first Python block
    would otherwise cost ~50 ms of the GUI thread)."""
    for name in ("python", "bash", "json"):
        _spans(name, "x = 1")


def _colour(ttype):
    colours = palette["colours"]
    while ttype is not None:
        if ttype in colours:
            return colours[ttype]
        ttype = ttype.parent
    return None


def code_groups(document) -> list[tuple]:
    """(first block, block count, language, code text) of every fenced code block, in order."""
    groups, block = [], document.begin()
    while block.isValid():
        if block.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence):
            first, lines = block, []
            language = block.blockFormat().stringProperty(QTextFormat.Property.BlockCodeLanguage)
            while block.isValid() and block.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence):
                lines.append(block.text())
                block = block.next()
            groups.append((first, len(lines), language, "\n".join(lines)))
            continue
        block = block.next()
    return groups


def decorate(document, nonce: str, mono_families: list) -> list[str]:
    """Colour every code block and put its header (language, Copy) above it; returns the blocks' texts, in order,
    which the Copy links name by index."""
    groups = code_groups(document)
    for first, _count, language, code in groups:
        start = first.position()
        for offset, length, ttype in _spans(language.lower(), code) if language else ():
            colour = _colour(ttype)
            if colour is None:
                continue
            fmt = QTextCharFormat()
            fmt.setForeground(QColor(colour))
            c = QTextCursor(document)
            c.setPosition(start + offset)
            c.setPosition(start + offset + length, QTextCursor.MoveMode.KeepAnchor)
            c.mergeCharFormat(fmt)
    for index, (first, _count, language, _code) in reversed(list(enumerate(groups))):
        c = QTextCursor(first)
        code_format = first.blockFormat()
        c.insertBlock(code_format, first.charFormat())       # the code moves down; `first` becomes the header
        header = QTextCursor(document.findBlock(first.position()))
        header_format = QTextBlockFormat()
        header_format.setTopMargin(6)
        header.setBlockFormat(header_format)
        label = QTextCharFormat()
        label.setFontFamilies(mono_families)
        label.setForeground(QColor("#808080"))
        header.insertText(f"{language or 'code'}  ", label)
        link = QTextCharFormat()
        link.setAnchor(True)
        link.setAnchorHref(f"{COPY_SCHEME}:{nonce}/{index}")
        link.setFontUnderline(True)
        link.setForeground(QColor("#2a6fdb"))
        header.insertText("Copy", link)
    return [code for _f, _n, _l, code in groups]
