"""Documents (issue 35): reading text, Markdown, code, HTML and PDF files, the clear error of a file that cannot be
read, and the split into passages at paragraph, line and space boundaries with their line ranges and overlap."""
import pytest

from app.documents.chunks import split
from app.documents.readers import ReadError, Section, html_text, read_document
from tests.documents_pdf import make_pdf


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(path)


def test_text_markdown_and_code_are_read_as_they_are_with_unix_line_ends(tmp_path):
    assert read_document(write(tmp_path, "a.md", "# Title\r\n\r\nSome *text*.\r\n")) == [Section("# Title\n\nSome *text*.\n")]
    assert read_document(write(tmp_path, "b.py", "\ufeffdef f():\n    return 1\n")) == [Section("def f():\n    return 1\n")]
    assert read_document(write(tmp_path, "c.txt", "")) == [Section("")]


def test_html_keeps_the_visible_text_one_line_per_block_and_drops_scripts_and_styles(tmp_path):
    page = ("<html><head><title>Tea</title><style>p { color: red }</style><script>var x = '<p>no</p>';</script>"
            "</head><body><h1>Smoked   tea</h1><p>Grown in the <b>hills</b>.</p><ul><li>one</li><li>two &amp; three"
            "</li></ul></body></html>")
    assert html_text(page) == "Tea\n\nSmoked tea\n\nGrown in the hills.\n\none\n\ntwo & three"
    assert read_document(write(tmp_path, "t.html", page)) == [Section(html_text(page))]


def test_a_pdf_is_read_page_by_page_through_pypdf(tmp_path):
    path = write(tmp_path, "report.pdf", make_pdf([["First page line one", "line two"], [], ["The goats number 41"]]))
    sections = read_document(path)
    assert [s.page for s in sections] == [1, 3]             # the empty page is left out
    assert sections[0].text == "First page line one\nline two"
    assert sections[1].text == "The goats number 41"
    passages = split(sections)
    assert [(p.page, p.location) for p in passages] == [(1, "page 1, lines 1-2"), (3, "page 3, line 1")]


@pytest.mark.parametrize("name, data, message", [
    ("x.bin", b"abc", "x.bin: Petit does not read .bin files (text, Markdown, code, PDF and HTML only)"),
    ("README", b"abc", "README: Petit does not read extension-less files (text, Markdown, code, PDF and HTML only)"),
    ("bin.txt", b"ab\0cd", "bin.txt is not a text file (it holds binary data)"),
    ("latin.md", "café".encode("latin-1"), "latin.md is not UTF-8 text (byte 3 cannot be decoded)"),
])
def test_a_file_that_cannot_be_read_is_named_in_the_error(tmp_path, name, data, message):
    with pytest.raises(ReadError) as e:
        read_document(write(tmp_path, name, data))
    assert str(e.value) == message


def test_a_broken_pdf_and_a_missing_file_are_named(tmp_path):
    with pytest.raises(ReadError, match=r"^broken\.pdf is not a readable PDF: "):
        read_document(write(tmp_path, "broken.pdf", b"%PDF-1.4\nthis is not a pdf"))
    with pytest.raises(ReadError) as e:
        read_document(str(tmp_path / "gone.txt"))
    assert str(e.value) == "gone.txt cannot be read: No such file or directory"


def test_passages_end_at_paragraphs_and_share_a_short_boundary_paragraph():
    text = "aaaa\nbbbb\n\ncccc\n\ndddd dddd\n"
    passages = split([Section(text)], size=20, overlap=6)
    assert [(p.text, p.first_line, p.last_line) for p in passages] == [
        ("aaaa\nbbbb\n\ncccc", 1, 4), ("cccc\n\ndddd dddd", 4, 6)]
    assert [p.location for p in passages] == ["lines 1-4", "lines 4-6"]
    # without overlap nothing is repeated
    assert [p.text for p in split([Section(text)], size=20, overlap=0)] == ["aaaa\nbbbb\n\ncccc", "dddd dddd"]


def test_a_long_paragraph_is_cut_at_line_ends_and_a_long_line_at_spaces():
    paragraph = "one two three\nfour five\nsix"
    assert [(p.text, p.first_line, p.last_line) for p in split([Section(paragraph)], size=14, overlap=0)] == [
        ("one two three", 1, 1), ("four five\nsix", 2, 3)]
    line = "alpha beta gamma delta"
    assert [(p.text, p.first_line) for p in split([Section(line)], size=10, overlap=0)] == [
        ("alpha beta", 1), ("gamma", 1), ("delta", 1)]
    assert [p.text for p in split([Section("x" * 25)], size=10, overlap=0)] == ["x" * 10, "x" * 10, "x" * 5]


def test_a_whole_short_document_is_one_passage_and_bad_sizes_are_refused():
    assert [(p.text, p.location) for p in split([Section("\n\nOnly this.\n\n")])] == [("Only this.", "line 3")]
    assert split([Section("   \n\n")]) == []
    with pytest.raises(ValueError, match="size >= 1 and overlap >= 0, got size=0, overlap=5"):
        split([Section("x")], size=0, overlap=5)
