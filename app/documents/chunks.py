"""Splitting a document into passages: about `size` characters each, cut at paragraph boundaries (blank lines),
else at line ends, else (a single very long line) at a space; consecutive passages share their boundary paragraph
or line when it is at most `overlap` characters, so a fact that straddles a cut is whole in one of them. Each
passage keeps where it came from: its first and last line (counted from 1 in the file, or in the PDF page) and
the page."""
from dataclasses import dataclass

from app.documents.readers import Section

SIZE = 800
OVERLAP = 200


@dataclass
class Passage:
    text: str
    first_line: int
    last_line: int
    page: int | None = None

    @property
    def location(self) -> str:
        return location_text(self.first_line, self.last_line, self.page)


def location_text(first_line: int, last_line: int, page: int | None = None) -> str:
    """Where a passage is: 'lines 3-9', 'line 4', 'page 2, lines 1-5'."""
    lines = f"line {first_line}" if first_line == last_line else f"lines {first_line}-{last_line}"
    return f"page {page}, {lines}" if page is not None else lines


@dataclass
class _Unit:
    """A paragraph, a line or a piece of a line, with its line range."""
    text: str
    first: int
    last: int


def _paragraphs(text: str) -> list[_Unit]:
    units, lines, start = [], [], 0
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip():
            if not lines:
                start = number
            lines.append(line.rstrip())
        elif lines:
            units.append(_Unit("\n".join(lines), start, number - 1))
            lines = []
    if lines:
        units.append(_Unit("\n".join(lines), start, start + len(lines) - 1))
    return units


def _fit(unit: _Unit, size: int) -> list[_Unit]:
    """A unit cut into units of at most `size` characters: a paragraph by lines, a line at spaces (or anywhere)."""
    if len(unit.text) <= size:
        return [unit]
    if unit.first != unit.last:
        out = []
        for i, line in enumerate(unit.text.split("\n")):
            out += _fit(_Unit(line, unit.first + i, unit.first + i), size)
        return out
    out, text = [], unit.text
    while len(text) > size:
        cut = text.rfind(" ", 0, size + 1)
        cut = cut if cut > 0 else size
        out.append(_Unit(text[:cut].rstrip(), unit.first, unit.first))
        text = text[cut:].lstrip()
    if text:
        out.append(_Unit(text, unit.first, unit.first))
    return out


def split(sections: list[Section], size: int = SIZE, overlap: int = OVERLAP) -> list[Passage]:
    """The passages of a document's sections, in order."""
    if size < 1 or overlap < 0:
        raise ValueError(f"a passage needs size >= 1 and overlap >= 0, got size={size}, overlap={overlap}")
    passages = []
    for section in sections:
        units = [piece for u in _paragraphs(section.text) for piece in _fit(u, size)]
        current: list[_Unit] = []
        for unit in units:
            if current and sum(len(u.text) + 2 for u in current) + len(unit.text) > size:
                passages.append(_passage(current, section.page))
                tail = current[-1]
                current = [tail] if len(tail.text) <= overlap and len(tail.text) + 2 + len(unit.text) <= size \
                    else []
            current.append(unit)
        if current:
            passages.append(_passage(current, section.page))
    return passages


def _passage(units: list[_Unit], page: int | None) -> Passage:
    """The units joined as they stood: pieces of one line by a space, lines of one paragraph by a line end,
    paragraphs by a blank line."""
    text = units[0].text
    for before, unit in zip(units, units[1:]):
        gap = unit.first - before.last
        text += (" " if gap == 0 else "\n" if gap == 1 else "\n\n") + unit.text
    return Passage(text, units[0].first, units[-1].last, page)
