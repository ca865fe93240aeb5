"""The weight quantizers that search for the least squared error (kernels/quant_search.c): q4_0, Q5_0, Q4_K, Q5_K,
Q6_K in GGML's layouts (decoded by the C decoders and, independently, by the NumPy reference in trainer/reference),
never worse than GGML's plain q4_0 rounding on any block, and at most llama.cpp's own quantizers' error on trained
weights (tests/fixtures/quant_search: llama.cpp's RMSE recorded by make_quant_fixture.py, dev-only)."""
import json
from pathlib import Path

import numpy as np
import pytest

from petit import native as K
from petit.formats.petit_file import BLOCKS
from trainer.reference.petit_reader import _decode_block

FIX = Path(__file__).parent / "fixtures" / "quant_search"
TYPES = ("q4_0", "q5_0", "q4_k", "q5_k", "q6_k")


def heavy(rows, cols, seed=0):
    """Student-t values with a few outliers, scaled per row: what trained weights look like to a quantizer."""
    r = np.random.default_rng(seed)
    x = r.standard_t(4, (rows, cols)) * np.exp(r.normal(0, 0.5, (rows, 1))) * 0.02
    x[r.random((rows, cols)) < 0.002] *= 8
    return x.astype(np.float32)


def decode_ref(raw, dtype, shape):
    size, nb = BLOCKS[dtype]
    return _decode_block(np.asarray(raw).reshape(-1, nb), dtype).reshape(shape)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("shape", [(1, 256), (7, 768), (3, 1280)])
def test_layout_decodes_the_same_in_c_and_in_the_reference(dtype, shape):
    x = heavy(*shape, seed=shape[1])
    raw = K.quantize(x, dtype, search=True)
    assert raw.shape == (shape[0], K.row_bytes(dtype, shape[1]))
    got = K.dequantize(raw, dtype, shape)
    np.testing.assert_array_equal(got, decode_ref(raw, dtype, shape).astype(np.float32))
    # and it is the values: within a few steps of the block's grid
    rel = np.sqrt(np.mean((got - x) ** 2)) / np.sqrt(np.mean(x ** 2))
    assert rel < {"q4_0": 0.16, "q5_0": 0.085, "q4_k": 0.1, "q5_k": 0.052, "q6_k": 0.028}[dtype]   # 1.2x measured


@pytest.mark.parametrize("cols", [32, 96, 160])
def test_searched_q4_0_is_never_worse_than_ggml_on_any_block(cols):
    x = heavy(33, cols, seed=cols)
    plain = K.dequantize(K.quantize(x, "q4_0"), "q4_0", x.shape)
    found = K.dequantize(K.quantize(x, "q4_0", search=True), "q4_0", x.shape)
    err_plain = ((plain - x) ** 2).reshape(-1, 32).sum(1)
    err_found = ((found - x) ** 2).reshape(-1, 32).sum(1)
    assert (err_found <= err_plain).all()
    assert err_found.sum() < 0.97 * err_plain.sum()       # and clearly better overall


def test_the_plain_q4_0_stays_ggml_reference_rounding():
    x = heavy(4, 64)
    assert not np.array_equal(K.quantize(x, "q4_0"), K.quantize(x, "q4_0", search=True))


def test_at_most_llama_cpps_error_on_trained_weights():
    rows = np.load(FIX / "trained_rows.npz")
    theirs = json.loads((FIX / "llama_cpp_rmse.json").read_text())["rmse"]
    worst = {}
    for name in rows.files:
        x = rows[name]
        for dtype in TYPES:
            got = K.dequantize(K.quantize(x, dtype, search=True), dtype, x.shape).astype(np.float64)
            ours = float(np.sqrt(np.mean((got - x) ** 2)))
            worst[dtype] = max(worst.get(dtype, 0.0), ours / theirs[name][dtype])
    # measured: q4_0 0.95, q5_0 0.95, q4_k 0.985, q5_k 0.965, q6_k 0.96 of llama.cpp's RMSE at worst
    assert all(r <= 0.995 for r in worst.values()), worst


@pytest.mark.parametrize("dtype", TYPES)
def test_a_nan_is_named_not_quantized(dtype):
    x = heavy(3, 256)
    x[2, 100] = np.nan
    with pytest.raises(K.NonFiniteError, match=r"the weight at \[2, 100\] is nan"):
        K.quantize(x, dtype, search=True)


@pytest.mark.parametrize("dtype,cols", [("q4_k", 128), ("q6_k", 288), ("q5_0", 48)])
def test_rows_that_are_not_whole_blocks_are_refused(dtype, cols):
    with pytest.raises(ValueError, match=rf"cannot quantize a tensor of shape \(2, {cols}\) to {dtype}: a row of "
                                         rf"{cols} values cannot be stored as {dtype}"):
        K.quantize(np.zeros((2, cols), np.float32), dtype)


def test_an_all_zero_block_stays_zero():
    for dtype in TYPES:
        x = np.zeros((2, 256), np.float32)
        x[1, :32] = 1.0
        got = K.dequantize(K.quantize(x, dtype), dtype, x.shape)
        assert not got[0].any() and np.allclose(got[1, :32], 1.0, atol=0.02) and not got[1, 32:].any(), dtype
