"""A read-only text view that renders Markdown (Qt's GitHub-flavoured importer, code blocks shaded in the bundled
monospace font) and grows to fit its text, for one chat message.

The text is the model's, so it is not trusted: raw HTML is shown as the text it is, never interpreted; only http(s)
links stay links (any other scheme is plain text), and a click only reports the link (link_activated): the window
asks before opening it. Images are never loaded (no file, nothing else an image names is read).
"""
from PySide6.QtCore import QByteArray, Qt, QUrl, Signal
from PySide6.QtGui import QGuiApplication, QImage, QTextCharFormat, QTextCursor, QTextDocument, QTextFormat
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser

from app.chat.code_blocks import COPY_SCHEME, decorate, new_nonce, palette
from app.documents.citations import cited_number, link_citations
from app.fonts import MONO_FAMILY

MARKDOWN = QTextDocument.MarkdownFeature.MarkdownDialectGitHub | QTextDocument.MarkdownFeature.MarkdownNoHTML
LINK_SCHEMES = ("http", "https")
BLANK_IMAGE = QImage(1, 1, QImage.Format.Format_ARGB32)
BLANK_IMAGE.fill(0)


def is_web_link(url: QUrl) -> bool:
    return url.isValid() and url.scheme().lower() in LINK_SCHEMES and bool(url.host())


class MarkdownView(QTextBrowser):
    link_activated = Signal(QUrl)            # an http(s) link was clicked (it is not opened here)
    code_copied = Signal(int)                # the Copy link of code block N was clicked: its text is on the clipboard
    source_cited = Signal(int)               # a reply's "[n]" for its passage n was clicked

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setOpenExternalLinks(False)
        self.setOpenLinks(False)
        self.anchorClicked.connect(self._on_anchor)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction
                                     | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self.viewport().setAutoFillBackground(False)
        self.setStyleSheet("QTextBrowser { background: transparent; }")
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._source = ""
        self._nonce = new_nonce()
        self.code_blocks: list[str] = []     # the text of each fenced code block shown, for its Copy link
        self.citations: set[int] = set()     # the passage numbers whose "[n]" in the text become links

    @property
    def source_text(self) -> str:
        """The text as given (Markdown source or plain text)."""
        return self._source

    def show_markdown(self, text: str) -> None:
        self._source = text
        document = self.document()
        document.setMarkdown(text, MARKDOWN)
        batch = QTextCursor(document)
        batch.beginEditBlock()              # one layout for all the edits below, not one per edit
        try:
            shade_code(document)
            keep_web_links_only(document)
            images_as_text(document)
            self.code_blocks = decorate(document, self._nonce, [MONO_FAMILY, "monospace"])
            if self.citations:
                link_citations(document, self.citations, self._nonce)
        finally:
            batch.endEditBlock()
        self._fit()

    def show_plain(self, text: str) -> None:
        self._source = text
        self.code_blocks = []
        self.setPlainText(text)
        self._fit()

    def _fit(self, *_args) -> None:
        width = self.viewport().width()
        if self.document().textWidth() != width:      # setting it again would lay the whole text out again
            self.document().setTextWidth(width)
        height = int(self.document().size().height() + 0.999) + 2 * self.frameWidth()
        if height != self.height():
            self.setFixedHeight(height)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit()

    def loadResource(self, kind, _name):
        # nothing a reply names is ever read (a file, a relative path): images are replaced by their text once the
        # document is built, and until then get a blank pixel (for a null answer Qt would read the file itself)
        if kind == QTextDocument.ResourceType.ImageResource:
            return BLANK_IMAGE
        return QByteArray()

    def _on_anchor(self, url: QUrl) -> None:
        if url.scheme() == COPY_SCHEME:
            nonce, _, index = url.path().partition("/")
            if nonce == self._nonce and index.isdigit() and int(index) < len(self.code_blocks):
                QGuiApplication.clipboard().setText(self.code_blocks[int(index)])
                self.code_copied.emit(int(index))
        elif (n := cited_number(url, self._nonce)) is not None:
            self.source_cited.emit(n)
        elif is_web_link(url):
            self.link_activated.emit(url)

    def copy_link_rect(self, index: int):
        """Where code block `index`'s Copy link is drawn (viewport coordinates), for a click."""
        href = f"{COPY_SCHEME}:{self._nonce}/{index}"
        block = self.document().begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                fragment = it.fragment()
                if fragment.charFormat().anchorHref() == href:
                    c = QTextCursor(self.document())
                    c.setPosition(fragment.position() + 1)
                    return self.cursorRect(c)
                it += 1
            block = block.next()
        return None


def keep_web_links_only(document) -> None:
    """Turn every link whose scheme is not http(s) (javascript:, file:, a relative path...) into plain text."""
    spans = []
    block = document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            fmt = fragment.charFormat()
            if fmt.isAnchor() and not is_web_link(QUrl(fmt.anchorHref())):
                spans.append((fragment.position(), fragment.length(), fmt))
            it += 1
        block = block.next()
    for position, length, fmt in spans:          # changed after the walk: a change may merge fragments
        c = QTextCursor(document)
        c.setPosition(position)
        c.setPosition(position + length, QTextCursor.MoveMode.KeepAnchor)
        fmt.setAnchor(False)
        fmt.setAnchorHref("")
        fmt.setFontUnderline(False)
        fmt.clearForeground()
        c.setCharFormat(fmt)


def images_as_text(document) -> None:
    """Show every image as "[image: its alt text]" (never loaded: see MarkdownView.loadResource)."""
    images = []
    block = document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.charFormat().isImageFormat():
                fmt = fragment.charFormat()
                alt = fmt.stringProperty(QTextFormat.Property.ImageAltText) or fmt.toImageFormat().name()
                images.append((fragment.position(), fragment.length(), f"[image: {alt}]"))
            it += 1
        block = block.next()
    for position, length, text in reversed(images):      # from the end: earlier positions stay valid
        c = QTextCursor(document)
        c.setPosition(position)
        c.setPosition(position + length, QTextCursor.MoveMode.KeepAnchor)
        c.insertText(text, QTextCharFormat())


def shade_code(document) -> None:
    """Give fenced code blocks and inline code the monospace font and a light background."""
    mono = QTextCharFormat()
    mono.setFontFamilies([MONO_FAMILY, "monospace"])
    block = document.begin()
    while block.isValid():
        fmt = block.blockFormat()
        cursor = QTextCursor(block)
        if fmt.hasProperty(QTextFormat.Property.BlockCodeFence):
            fmt.setBackground(palette["background"])
            cursor.setBlockFormat(fmt)
            cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(mono)
        else:
            it = block.begin()
            while not it.atEnd():
                fragment = it.fragment()
                if fragment.charFormat().fontFixedPitch():
                    inline = QTextCharFormat(mono)
                    inline.setBackground(palette["background"])
                    c = QTextCursor(document)
                    c.setPosition(fragment.position())
                    c.setPosition(fragment.position() + fragment.length(), QTextCursor.MoveMode.KeepAnchor)
                    c.mergeCharFormat(inline)
                it += 1
        block = block.next()
