"""An untied token embedding's rows come by pread from the file, never through its mapping (petit/loading/file_rows.py,
kernels/file_rows.c): a lookup maps nothing of the table into the process (on Linux 6.x each first touch of a mapped
row brought the page cache's whole folio, up to 2 MiB, into the resident set: ~320 MiB of a 7B model's 357 MiB
embedding for one 512-token prompt), and the rows' values are the mapped rows' bit for bit."""
import gc
import os
import sys

import numpy as np
import pytest

import petit
import petit.loading.file_rows as file_rows
from petit import native
from petit.native import lib

sys.path.insert(0, os.path.dirname(__file__))
from models import TINY, write_model  # noqa: E402

CFG = dict(TINY, vocab_size=6000, hidden_size=512, intermediate_size=256, num_attention_heads=8,
           num_key_value_heads=4, head_dim=64, num_hidden_layers=1)
pread_here = pytest.mark.skipif(not hasattr(os, "pread"), reason="no pread on this system: rows come by the mapping")


def _present_pages(a: np.ndarray) -> int:
    """How many of the pages wholly inside array `a`'s bytes are mapped into this process (/proc/self/pagemap)."""
    page = os.sysconf("SC_PAGE_SIZE")
    start = a.__array_interface__["data"][0]
    first, last = -(-start // page), (start + a.nbytes) // page          # whole pages only: a neighbour shares the ends
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(first * 8)
        entries = np.frombuffer(f.read((last - first) * 8), np.uint64)
    return int(((entries >> np.uint64(63)) & np.uint64(1)).sum())


def _load(path, by_file: bool, monkeypatch):
    if not by_file:
        monkeypatch.setattr(file_rows, "read_embedding_from_file", lambda net, source: False)
    model = petit.load(path, verify_checksums=False, repack=False)      # nothing reads the table at load
    monkeypatch.undo()
    return model


@pytest.fixture(scope="module")
def q8_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("rows") / "m.petit"
    write_model(path, CFG, dtype="q8_0")
    return path


@pread_here
@pytest.mark.skipif(not os.path.exists("/proc/self/pagemap"), reason="Linux tells which pages are mapped")
def test_looking_up_rows_maps_none_of_the_embedding(q8_file, monkeypatch):
    ids = list(range(0, 6000, 47))                                     # 128 rows spread over the table
    for by_file in (False, True):
        model = _load(q8_file, by_file, monkeypatch)
        table = model.net.embed.raw
        before = _present_pages(table)        # a few, mapped around the reads of its neighbours at load
        model.logits(ids)
        mapped = _present_pages(table) - before
        if by_file:
            assert mapped == 0, f"{mapped} pages of the embedding were mapped by lookups"
        else:           # the check can fail: through the mapping, every row looked up maps its page at least
            assert mapped >= len(ids) * 1088 // os.sysconf("SC_PAGE_SIZE")
        model.close()


@pread_here
@pytest.mark.parametrize("dtype", ["q8_0", "q4_0", "f16", "f32"])
def test_rows_read_from_the_file_are_the_mapped_rows(tmp_path, dtype, monkeypatch):
    write_model(tmp_path / "m.petit", dict(CFG, vocab_size=301, hidden_size=96, head_dim=12), dtype=dtype)
    ids = [0, 300, 7, 7, 150, 1]
    mapped = _load(tmp_path / "m.petit", False, monkeypatch)
    before = lib.pt_file_rows_count()
    by_file = _load(tmp_path / "m.petit", True, monkeypatch)
    assert lib.pt_file_rows_count() == before + 1
    np.testing.assert_array_equal(native.get_rows(by_file.net.embed, ids), native.get_rows(mapped.net.embed, ids))
    np.testing.assert_array_equal(by_file.logits(ids), mapped.logits(ids))
    with pytest.raises(ValueError, match="token ids out of range for a table of 301 rows"):
        native.get_rows(by_file.net.embed, [301])


@pread_here
def test_the_file_is_let_go_with_the_model(q8_file, monkeypatch):
    gc.collect()
    before, fds = lib.pt_file_rows_count(), len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0
    model = _load(q8_file, True, monkeypatch)
    assert lib.pt_file_rows_count() == before + 1
    model.logits([1, 2, 3])
    model.close()
    del model
    gc.collect()
    assert lib.pt_file_rows_count() == before
    if fds:
        assert len(os.listdir("/proc/self/fd")) == fds                # its file descriptor was closed


def test_a_tied_or_copied_embedding_is_read_as_before(tmp_path, monkeypatch):
    write_model(tmp_path / "tied.petit", dict(CFG, vocab_size=301, tie_word_embeddings=True), dtype="q8_0")
    gc.collect()
    before = lib.pt_file_rows_count()
    tied = petit.load(tmp_path / "tied.petit")                   # the LM head reads the table whole every step
    copied = petit.load(tmp_path / "tied.petit", mmap=False)     # in private memory: no file to read from
    assert lib.pt_file_rows_count() == before
    np.testing.assert_array_equal(tied.logits([1, 2, 300]), copied.logits([1, 2, 300]))
