"""Llama 4's text model beyond f32 parity with transformers (tests/test_hf_parity.py, tests/fixtures/hf_moe/llama4_text):
chunked attention and the temperature-tuned NoPE queries in C against float64 over odd sizes and positions past
several chunks, and quantized loads equal to the float64 reference of the same file."""
from pathlib import Path

import numpy as np
import pytest

import petit
from petit import native
from petit.loading.convert import convert
from trainer.reference import Reference, ops

FIX = Path(__file__).parent / "fixtures" / "hf_moe" / "llama4_text"


@pytest.mark.parametrize("T,H,KV,hd,pos0,chunk,temperature", [
    (1, 4, 2, 16, 0, 8, None), (37, 4, 1, 24, 0, 8, None), (5, 2, 2, 40, 300, 64, None), (9, 6, 3, 8, 250, 16, None),
    (37, 4, 2, 16, 0, 0, (4.0, 0.1)), (3, 2, 1, 16, 2045, 0, (2048.0, 0.1)), (11, 2, 1, 32, 100, 0, (3.0, 0.5))])
def test_chunks_and_temperature_are_the_formulas(T, H, KV, hd, pos0, chunk, temperature):
    rng = np.random.default_rng(T + pos0)
    n = pos0 + T
    q = rng.standard_normal((T, H, hd)).astype(np.float32)
    k, v = (rng.standard_normal((n, KV, hd)).astype(np.float32) for _ in range(2))
    kc, vc = (np.ascontiguousarray(a.transpose(1, 0, 2)) for a in (k, v))
    got = native.attention(q, kc, vc, pos0, hd ** -0.5, 0.0, 0, None, chunk, temperature)
    qq = np.zeros((n, H, hd))
    qq[pos0:] = q
    want = ops.attention(qq, k.astype(np.float64), v.astype(np.float64), hd ** -0.5, 0.0, 0, None, chunk,
                         temperature).reshape(n, H, hd)[pos0:]
    np.testing.assert_allclose(got, want, rtol=0, atol=3e-6)
    if chunk and (pos0 + T - 1) // chunk > 0:          # the chunk really hides the keys before it
        assert np.abs(got - native.attention(q, kc, vc, pos0, hd ** -0.5)).max() > 1e-3


def test_a_chunk_below_zero_is_refused():
    q = np.zeros((1, 2, 8), np.float32)
    c = np.zeros((1, 4, 8), np.float32)
    with pytest.raises(ValueError, match="chunk -8"):
        native.attention(q, c, c, 0, 0.3, 0.0, 0, None, -8)


@pytest.mark.parametrize("weights", ["q8_0", "q4_0"])
def test_a_quantized_load_is_the_reference_of_its_own_file(tmp_path, weights):
    """The float64 reference of the same .petit file with int8-rounded activations, as the engine computes
    (measured: within 1.2e-7 of the range at q8_0; at q4_0 one position's routing tips, 0.0026 there)."""
    path = tmp_path / f"{weights}.petit"
    convert(FIX, path, weights).close()
    ids = np.load(FIX / "reference.npz")["input_ids"]
    got = petit.load(path).logits(ids)
    ref = Reference(path, round_activations=True)
    try:
        want = ref.logits(ids)
    finally:
        ref.close()
    err = np.abs(got - want).max(axis=1) / np.ptp(want)
    assert np.median(err) <= 1e-5 and (err > 1e-4).sum() <= 2 and err.max() <= 0.01
