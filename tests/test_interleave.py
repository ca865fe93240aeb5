"""Interleaved q8_0 / q4_0 matrices (kernels/interleave.c, petit/loading/interleave.py): the layout byte for byte
against a NumPy reading of its description, the round trip, products and lookups bit for bit equal to the plain
rows' on every path this CPU runs, and whole models whose logits do not change when the loader repacks them."""
import os
from pathlib import Path

import numpy as np
import pytest

import petit
from petit import native as K
from petit.assets import default_model_path
from petit.formats.petit_file import read_petit, write_petit
from petit.loading import interleave
from petit.native import ISAS, lib

import models

PATHS = [pytest.param(isa, marks=pytest.mark.skipif(not lib.pt_isa_supported(code),
                                                    reason=f"this CPU cannot run the {isa} path"))
         for isa, code in ISAS.items()]
HF = Path(__file__).parent / "fixtures" / "hf"
CASES = sorted(p.name for p in HF.iterdir() if (p / "reference.npz").is_file())


@pytest.fixture(autouse=True)
def restore_default_path():
    yield
    K.configure()


def _matrix(rows, cols, dtype, seed=0):
    rng = np.random.default_rng(seed + rows * 7 + cols)
    return K.Weight.from_float(rng.standard_normal((rows, cols), dtype=np.float32), dtype)


def _layout(plain: np.ndarray, rows: int, cols: int, dtype: str) -> np.ndarray:
    """The interleaved bytes as the layout comment of kernels/interleave.c describes them, built with NumPy."""
    bb = 34 if dtype == "q8_0" else 18
    nb = cols // 32
    blocks = plain.reshape(rows, nb, bb)
    groups = rows // 8 * 8
    g = blocks[:groups].reshape(rows // 8, 8, nb, bb).transpose(0, 2, 1, 3)      # [group, block, row, bytes]
    scales = g[..., :2].reshape(rows // 8, nb, 16)
    quants = g[..., 2:].reshape(rows // 8, nb, 8, (bb - 2) // 4, 4).transpose(0, 1, 3, 2, 4)   # [g, b, vector, lane]
    inter = np.concatenate([scales, quants.reshape(rows // 8, nb, 8 * (bb - 2))], axis=2)
    return np.concatenate([inter.reshape(-1), blocks[groups:].reshape(-1)])


@pytest.mark.parametrize("dtype", ["q8_0", "q4_0"])
@pytest.mark.parametrize("rows, cols", [(8, 32), (37, 96), (5, 64), (64, 160), (1000, 512)])
def test_the_layout_is_the_documented_one_and_converts_back_in_place_and_by_copy(dtype, rows, cols):
    W = _matrix(rows, cols, dtype)
    plain = W.raw.copy()
    copied = W.interleave(np.empty_like(plain))
    assert copied.interleaved and np.array_equal(W.raw, plain)            # a copy leaves the source alone
    assert np.array_equal(copied.raw.reshape(-1), _layout(plain, rows, cols, dtype))
    assert np.array_equal(copied.stored(), plain)
    in_place = K.Weight(plain.copy(), dtype, (rows, cols)).interleave()
    assert np.array_equal(in_place.raw, copied.raw)
    assert np.array_equal(in_place.stored(), plain)


@pytest.mark.parametrize("dtype", ["q8_0", "q4_0"])
def test_lookups_and_dequantization_read_the_interleaved_rows(dtype):
    W = _matrix(45, 96, dtype)
    X = W.interleave(np.empty_like(W.raw))
    assert np.array_equal(X.dequantize(), W.dequantize())
    ids = np.array([0, 7, 8, 39, 40, 44, 3], np.int32)       # in groups, at their edges, and in the plain rows after
    out = np.empty((len(ids), 96), np.float32)
    assert lib.pt_get_rows(X.c, K._ptr(ids, "int32_t *"), len(ids), K._out(out)) == 0
    assert np.array_equal(out, W.dequantize()[ids])


def test_only_q8_0_and_q4_0_are_interleaved_and_not_twice():
    with pytest.raises(ValueError, match="cannot be interleaved"):
        _matrix(16, 64, "f16").interleave(np.empty(16 * 128, np.uint8))
    X = _matrix(16, 64, "q8_0").interleave()
    with pytest.raises(ValueError, match="an interleaved q8_0 matrix cannot be interleaved"):
        X.interleave()
    with pytest.raises(ValueError, match="writable contiguous array of 1088 bytes"):
        _matrix(16, 64, "q8_0").interleave(np.empty(10, np.uint8))


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("dtype", ["q8_0", "q4_0"])
@pytest.mark.parametrize("rows, cols", [(8, 32), (37, 96), (203, 160)])
@pytest.mark.parametrize("threads", [1, 2])
def test_products_are_the_plain_scalar_kernels_bits(isa, dtype, rows, cols, threads):
    """Every token count a step meets: decode (1), a few sequences (2-7), tiles of 8 and what is left, and a prefill
    long enough to be cut into chunks of tokens (85); accumulating into y too. The plain rows on the same path too:
    from 16 tokens they are interleaved a group at a time into a buffer and run on the interleaved kernel."""
    W = _matrix(rows, cols, dtype)
    X = W.interleave(np.empty_like(W.raw))
    rng = np.random.default_rng(rows)
    for T in (1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 17, 85):
        x = rng.standard_normal((T, cols), dtype=np.float32)
        y0 = rng.standard_normal((T, rows), dtype=np.float32)
        K.configure(isa="scalar", threads=1)
        want, want_acc = K.matmul(W, x), K.matmul(W, x, out=y0.copy(), accumulate=True)
        K.configure(isa=isa, threads=threads)
        np.testing.assert_array_equal(K.matmul(X, x), want, err_msg=f"T={T}")
        np.testing.assert_array_equal(K.matmul(X, x, out=y0.copy(), accumulate=True), want_acc, err_msg=f"T={T}")
        np.testing.assert_array_equal(K.matmul(W, x), want, err_msg=f"plain, T={T}")
        np.testing.assert_array_equal(K.matmul(W, x, out=y0.copy(), accumulate=True), want_acc, err_msg=f"plain, T={T}")


def _logits(model, n=40):
    ids = np.random.default_rng(3).integers(0, model.vocab_size, n)
    cache = model.new_cache(n + 8)
    prefill = model.forward(ids[:n - 3], cache, all_logits=True)
    return np.concatenate([prefill] + [model.forward(ids[i:i + 1], cache)[None] for i in range(n - 3, n)])


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("weights", ["q8_0", "q4_0"])
def test_every_family_gives_the_same_logits_repacked(case, weights):
    plain = petit.load(HF / case, weights=weights, repack=False)
    packed = petit.load(HF / case, weights=weights, repack=True)
    assert not any(W.interleaved for W in plain.net.matrices())
    assert all(W.interleaved for W in packed.net.matrices() if W.shape[0] >= 8)
    np.testing.assert_array_equal(_logits(packed), _logits(plain))


@pytest.mark.parametrize("name", ["default-q8_0.petit", "default-q4_0.petit"])
@pytest.mark.parametrize("mmap", [True, False])
def test_a_repacked_file_runs_the_same_and_lets_go_of_its_pages(name, mmap):
    path = Path(default_model_path()).with_name(name)
    plain = petit.load(path, repack=False)
    packed = petit.load(path, repack=True, mmap=mmap)
    np.testing.assert_array_equal(_logits(packed), _logits(plain))
    mapping = packed._source._mm
    for W in packed.net.matrices():
        inside = np.shares_memory(W.raw, np.frombuffer(mapping, np.uint8))
        assert inside == (not mmap)          # mapped: copied out of the file; read into memory: rewritten there
    # what petit convert and petit verify write is the file's bytes, whatever the layout in memory
    f = read_petit(path)
    for tensor, (dtype, shape, raw) in packed.tensors.items():
        data = raw() if callable(raw) else raw
        assert np.array_equal(np.asarray(data).view(np.uint8).reshape(-1), f.raw(tensor)), tensor
    f.close()


def test_a_repacked_folder_writes_the_file_an_unpacked_one_writes(tmp_path):
    written = []
    for repack in (False, True):
        model = petit.load(HF / "qwen2", weights="q4_0", repack=repack)
        write_petit(tmp_path / f"{repack}.petit", {"config": model.config.to_dict()}, dict(model.tensors))
        written.append((tmp_path / f"{repack}.petit").read_bytes())
    assert written[0] == written[1]


def test_the_default_repacks_where_the_path_prefers_it(monkeypatch):
    K.configure(isa="scalar")
    assert not lib.pt_prefers_interleaved()
    assert not any(W.interleaved for W in petit.load(default_model_path()).net.matrices())
    K.configure()
    fast = K.info()["isa"] in ("avx2", "avxvnni", "avx512")
    assert bool(lib.pt_prefers_interleaved()) == fast
    assert all(W.interleaved == fast for W in petit.load(default_model_path()).net.matrices())


def test_a_model_repacked_for_a_simd_path_runs_on_the_scalar_one(tmp_path):
    models.write_model(tmp_path / "m.petit", dtype="q8_0", cfg=dict(models.TINY, vocab_size=301))
    plain = petit.load(tmp_path / "m.petit", repack=False)
    packed = petit.load(tmp_path / "m.petit", repack=True)
    K.configure(isa="scalar")
    np.testing.assert_array_equal(_logits(packed), _logits(plain))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux reports resident memory by kind")
def test_a_mapped_files_matrices_leave_the_resident_set_once_copied_out(tmp_path):
    cfg = dict(models.TINY, vocab_size=8000, hidden_size=512, intermediate_size=1536, num_attention_heads=8,
               num_key_value_heads=4, head_dim=64, num_hidden_layers=4)
    models.write_model(tmp_path / "m.petit", cfg=cfg, dtype="q8_0")
    embedding = 8000 * 512 // 32 * 34          # untied: looked up, never multiplied, so never repacked

    def rss_file_growth(repack):
        with open("/proc/self/status") as f:
            before = next(int(line.split()[1]) for line in f if line.startswith("RssFile:")) * 1024
        model = petit.load(tmp_path / "m.petit", repack=repack)      # the checksums read every tensor once
        model.logits([1, 2, 3])
        with open("/proc/self/status") as f:
            grown = next(int(line.split()[1]) for line in f if line.startswith("RssFile:")) * 1024 - before
        model.close()
        return grown

    rss_file_growth(True)                      # once first: whatever else the first load maps
    matrices = (tmp_path / "m.petit").stat().st_size - embedding
    assert rss_file_growth(False) > matrices   # run from the mapping, the matrices stay mapped and resident
    assert rss_file_growth(True) < embedding + matrices / 10


@pytest.mark.skipif(not K.prefers_interleaved(), reason="this kernel path runs stored rows as they are")
@pytest.mark.parametrize("path", [Path(default_model_path()).with_name("default-q8_0.petit"),
                                  Path(__file__).parent / "fixtures" / "gguf" / "qwen2" / "q8_0.gguf"])
def test_a_large_mapped_model_runs_its_stored_rows_unless_asked_to_copy_them(path, monkeypatch):
    """By default a mapped file's q8_0 / q4_0 matrices are copied into memory to be interleaved only up to COPY_MAX
    bytes in all (a 7B Q8_0 GGUF opened in 13.9 s copied, 1.2 s mapped, on the 2-core VM measured): past it they run
    from the file's own pages with the same logits, and repack=True still copies them."""
    small = petit.load(path)
    assert all(W.interleaved for W in small.net.matrices() if W.dtype == "q8_0" and W.shape[0] >= 8)
    monkeypatch.setattr(interleave, "COPY_MAX", 4096)
    large = petit.load(path)
    mapped = [W for W in large.net.matrices() if W.dtype == "q8_0"]
    assert mapped and not any(W.interleaved or W.raw.flags.writeable for W in mapped)
    forced = petit.load(path, repack=True)
    assert all(W.interleaved for W in forced.net.matrices() if W.dtype == "q8_0" and W.shape[0] >= 8)
    want = _logits(small)
    np.testing.assert_array_equal(_logits(large), want)
    np.testing.assert_array_equal(_logits(forced), want)
