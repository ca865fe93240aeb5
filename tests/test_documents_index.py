"""Documents (issue 35): the index follows the files (a file is read again only when it changed, removed files
go, a file that cannot be read is named and the others are indexed), passages get vectors of the chosen embedding
model once (again when the model changes), and the BM25 / cosine rankings and their reciprocal-rank fusion."""
import os

import numpy as np
import pytest

from app.documents.index import DocumentIndex
from app.documents.retrieve import QueryEmbedder, fuse, match_expression, search, vector_ranking

ST_BERT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "st_bert")


@pytest.fixture
def folder(tmp_path):
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.md").write_text("# Alpha\n\nThe alpha reactor runs on Tuesdays.\n")
    (docs / "b.txt").write_text("Beta notes.\n\nThe beta bridge is 41 metres long.\n")
    (docs / "sub" / "c.py").write_text("def gamma():\n    return 'gamma'\n")
    (docs / ".hidden.md").write_text("never indexed")
    (docs / "image.png").write_bytes(b"\x89PNG")
    return docs


@pytest.fixture
def index(tmp_path):
    ix = DocumentIndex(str(tmp_path / "documents.sqlite3"))
    yield ix
    ix.close()


def counts(result):
    return (result.added, result.updated, result.unchanged, result.removed)


def test_a_folder_is_indexed_and_read_again_only_when_a_file_changed(folder, index):
    index.add_root(str(folder))
    assert [os.path.relpath(p, folder) for p in index.files()] == ["a.md", "b.txt", os.path.join("sub", "c.py")]
    assert counts(index.sync()) == (3, 0, 0, 0)
    assert index.passage_count() == 3
    ids = [r[0] for r in index.conn.execute("SELECT id FROM passages ORDER BY id")]
    assert counts(index.sync()) == (0, 0, 3, 0)
    os.utime(folder / "a.md", (1, 1))                 # touched, same content: not read again
    assert counts(index.sync()) == (0, 0, 3, 0)
    assert [r[0] for r in index.conn.execute("SELECT id FROM passages ORDER BY id")] == ids
    (folder / "b.txt").write_text("Beta notes.\n\nThe beta bridge is 52 metres long now.\n")
    assert counts(index.sync()) == (0, 1, 2, 0)
    assert [h.text for h in search(index, "How long is the beta bridge?", k=1)] == [
        "Beta notes.\n\nThe beta bridge is 52 metres long now."]
    assert index.bm25(match_expression("41"), 5) == []          # the old text is gone from the FTS table
    (folder / "sub" / "c.py").unlink()
    assert counts(index.sync()) == (0, 0, 2, 1)
    assert [os.path.basename(d.path) for d in index.documents()] == ["a.md", "b.txt"]
    index.remove_root(str(folder))
    assert counts(index.sync()) == (0, 0, 0, 2)
    assert index.passage_count() == 0 and index.conn.execute("SELECT COUNT(*) FROM passages_fts").fetchone()[0] == 0


def test_a_file_that_cannot_be_read_is_reported_and_the_others_are_indexed(folder, index):
    (folder / "broken.txt").write_bytes(b"\0\1\2")
    index.add_root(str(folder))
    result = index.sync()
    assert counts(result) == (3, 0, 0, 0)
    assert result.errors == ["broken.txt is not a text file (it holds binary data)"]
    assert {os.path.basename(d.path): (d.passages, d.error) for d in index.documents()} == {
        "a.md": (1, ""), "b.txt": (1, ""), "c.py": (1, ""),
        "broken.txt": (0, "broken.txt is not a text file (it holds binary data)")}
    assert counts(index.sync()) == (0, 0, 4, 0)                  # not read again until it changes
    (folder / "broken.txt").write_text("Fixed now.\n")
    assert counts(index.sync()) == (0, 1, 3, 0) and index.sync().errors == []


def test_single_files_and_missing_roots(folder, index, tmp_path):
    index.add_root(str(folder / "a.md"))
    index.add_root(str(folder / "a.md"))                         # once only
    assert counts(index.sync()) == (1, 0, 0, 0)
    with pytest.raises(ValueError, match=r"nowhere: no such file or folder$"):
        index.add_root(str(tmp_path / "nowhere"))


def test_passages_are_embedded_once_and_again_when_the_model_changes(folder, index):
    import petit
    embedder = QueryEmbedder(petit.Embedder.open(ST_BERT, weights="f32"))
    index.add_root(str(folder))
    reports = []
    result = index.sync(embedder, "st_bert", report=reports.append)
    assert result.embedded == 3 and reports[-1] == {"phase": "embedding", "done": 3, "total": 3, "name": ""}
    assert [r for r in reports if r["phase"] == "reading"][0] == {"phase": "reading", "done": 0, "total": 3,
                                                                  "name": "a.md"}
    ids, matrix = index.vectors()
    assert matrix.shape == (3, 64) and matrix.dtype == np.float32
    assert index.sync(embedder, "st_bert").embedded == 0
    # each stored vector is its passage's: the passage's own text ranks it first
    for pid in ids:
        text = index.passage(int(pid))["text"]
        assert vector_ranking(index, embedder.embed([text])[0], 3)[0] == pid
    assert index.sync(embedder, "another model").embedded == 3
    assert index.sync(None, "").embedded == 0 and len(index.vectors()[0]) == 0    # BM25 only: vectors dropped
    assert [h.path for h in search(index, "the beta bridge", k=1, embedder=embedder)] == [str(folder / "b.txt")]


def test_cancelling_keeps_what_was_done(folder, index):
    index.add_root(str(folder))
    seen = []
    result = index.sync(report=seen.append, cancelled=lambda: len(seen) >= 1)
    assert result.cancelled and counts(result) == (1, 0, 0, 0)
    assert counts(index.sync()) == (2, 0, 1, 0)


def test_score_fusion_and_the_fts_query_of_a_question():
    bm25 = [(1, 8.0), (2, 4.0), (3, 2.0)]
    assert fuse(bm25, None) == [(1, 1.0), (2, 0.5), (3, 0.25)]
    # the cosine counts as much as BM25 over the best one's score; a passage BM25 missed comes in by similarity
    assert fuse(bm25, {1: 0.0, 2: 0.9, 3: 0.1, 4: 0.8}, pool=2) == [
        (2, 0.5 * 0.5 + 0.5 * 0.9), (1, 0.5), (4, 0.4), (3, 0.5 * 0.25 + 0.5 * 0.1)]
    # similarities that hardly differ (a model that cannot tell the passages apart) leave BM25's order
    assert [pid for pid, _ in fuse(bm25, {1: 0.96, 2: 0.99, 3: 0.97})] == [1, 2, 3]
    assert fuse([], {5: 0.5, 6: 0.7}) == [(6, 0.35), (5, 0.25)]
    assert match_expression('What is "the" (AND) OR NEAR alpha-beta of the reactor?') == (
        '"near" OR "alpha" OR "beta" OR "reactor"')
    assert match_expression("what is it?") == ""


def test_punctuation_in_a_question_never_breaks_the_search(folder, index):
    index.add_root(str(folder))
    index.sync()
    assert [os.path.basename(h.path) for h in search(index, 'alpha* "reactor" (NOT) ^ -- ?', k=1)] == ["a.md"]
    assert search(index, "???", k=3) == []
