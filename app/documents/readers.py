"""Reading a document's text: plain text, Markdown and code by extension, PDF through pypdf (page by page), HTML
through the standard library's parser (scripts and styles dropped). A file that cannot be read raises ReadError
naming the file and why; the caller goes on with the others."""
import os
from dataclasses import dataclass
from html.parser import HTMLParser

TEXT_EXTENSIONS = frozenset("""
.txt .text .md .markdown .rst .org .adoc .tex .csv .tsv .json .jsonl .yaml .yml .toml .ini .cfg .conf .log
.py .pyi .c .h .cc .cpp .hpp .cxx .rs .go .java .kt .js .mjs .ts .tsx .jsx .rb .php .swift .m .cs .scala .lua .r
.jl .sh .bash .zsh .fish .ps1 .sql .css .scss .xml .svg .vue .dart .zig .hs .ml .ex .exs .erl .clj .el .vim
""".split())
HTML_EXTENSIONS = frozenset({".html", ".htm", ".xhtml"})
PDF_EXTENSIONS = frozenset({".pdf"})
MAX_BYTES = 20 << 20          # a bigger file is refused: an index is no place for it


class ReadError(ValueError):
    """A document that cannot be read; the message names the file."""


@dataclass
class Section:
    """A run of a document's text: the whole file, or one page of a PDF (page counts from 1)."""
    text: str
    page: int | None = None


def readable(path: str) -> bool:
    """Whether `path`'s extension is one the readers know."""
    ext = os.path.splitext(path)[1].lower()
    return ext in TEXT_EXTENSIONS or ext in HTML_EXTENSIONS or ext in PDF_EXTENSIONS


def read_document(path: str) -> list[Section]:
    """The text of the document at `path`, as sections. Raises ReadError."""
    name = os.path.basename(path)
    ext = os.path.splitext(path)[1].lower()
    if not readable(path):
        raise ReadError(f"{name}: Petit does not read {ext or 'extension-less'} files (text, Markdown, code, PDF "
                        "and HTML only)")
    try:
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            raise ReadError(f"{name} is {size / (1 << 20):.1f} MB; a document can be at most {MAX_BYTES >> 20} MB")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ReadError(f"{name} cannot be read: {e.strerror or e}") from None
    if ext in PDF_EXTENSIONS:
        return read_pdf(data, name)
    text = decode_text(data, name)
    if ext in HTML_EXTENSIONS:
        text = html_text(text)
    return [Section(text)]


def decode_text(data: bytes, name: str) -> str:
    """UTF-8 text with Unix line ends; ReadError for binary data or another encoding."""
    if b"\0" in data:
        raise ReadError(f"{name} is not a text file (it holds binary data)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ReadError(f"{name} is not UTF-8 text (byte {e.start} cannot be decoded)") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_pdf(data: bytes, name: str) -> list[Section]:
    """A PDF's text, one section per page (pages without text are left out)."""
    import io

    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError:
        raise ReadError(f"{name}: reading PDF files needs the pypdf package (pip install pypdf)") from None
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ReadError(f"{name} is an encrypted PDF; Petit cannot read it")
        pages = [page.extract_text() or "" for page in reader.pages]
    except ReadError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError) as e:
        raise ReadError(f"{name} is not a readable PDF: {e}") from None
    return [Section(t.replace("\r\n", "\n").rstrip(), page=i) for i, t in enumerate(pages, 1) if t.strip()]


BLOCKS = frozenset("p div section article header footer main nav aside li ul ol table tr h1 h2 h3 h4 h5 h6 pre "
                   "blockquote br hr dt dd figcaption title".split())


class _TextParser(HTMLParser):
    """Collects an HTML page's visible text; a block element starts a new line."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style", "noscript", "template"):
            self._skip += 1
        elif tag in BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in ("script", "style", "noscript", "template"):
            self._skip = max(self._skip - 1, 0)
        elif tag in BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def html_text(html: str) -> str:
    """The visible text of an HTML page: one line per block, spaces collapsed, paragraphs apart."""
    parser = _TextParser()
    parser.feed(html)
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.parts).split("\n")]
    out: list[str] = []
    for line in lines:
        if line:
            out.append(line)
        elif out and out[-1]:
            out.append("")
    return "\n".join(out).strip("\n")
