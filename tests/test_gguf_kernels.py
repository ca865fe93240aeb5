"""Products of GGUF's block types with quantized activations (kernels/kern_gguf.h, and kern_x86_gguf.h for the x86 paths):
the plain C reference within float32 rounding of a float64 oracle over the decoded weights, and every SIMD path equal
to it bit for bit, over odd row counts, several super-blocks, 1-13 tokens, accumulation and 1-2 threads."""
from pathlib import Path

import numpy as np
import pytest

from petit import native as K
from petit.native import ISAS, lib

import oracles

BLOCKS = np.load(Path(__file__).parent / "fixtures" / "gguf_blocks" / "blocks.npz")
PATHS = [pytest.param(isa, marks=pytest.mark.skipif(not lib.pt_isa_supported(code),
                                                    reason=f"this CPU cannot run the {isa} path"))
         for isa, code in ISAS.items()]
TYPES = sorted(K.GGUF_DECODED)
KQ8 = {"q4_k", "q5_k", "q6_k"}


@pytest.fixture(autouse=True)
def restore_default_path():
    yield
    K.configure()


def _matrix(gguf_type: str, rows: int, supers: int) -> K.Weight:
    """rows x (supers x 256) values made of the fixture's random blocks (finite scales), a different run per row."""
    raw, values = BLOCKS[f"{gguf_type}_raw"], BLOCKS[f"{gguf_type}_values"]
    per_block = values.shape[1] // 3                     # the fixture holds 3 blocks per row
    blocks = raw.reshape(-1, raw.shape[1] // 3)          # [21 blocks, bytes]
    n = supers * 256 // per_block
    out = np.stack([np.concatenate([blocks[(r + i) % len(blocks)] for i in range(n)]) for r in range(rows)])
    return K.Weight(np.ascontiguousarray(out), gguf_type.lower(), (rows, supers * 256))


@pytest.mark.parametrize("gguf_type", TYPES)
def test_the_reference_is_the_float64_product_of_the_decoded_weights(gguf_type):
    K.configure(isa="scalar", threads=1)
    W = _matrix(gguf_type, 5, 2)
    x = np.random.default_rng(1).standard_normal((3, 512)).astype(np.float32)
    got = K.matmul(W, x)
    w = W.dequantize().astype(np.float64)
    # Q4_K, Q5_K and Q6_K take their activations as llama.cpp's Q8_K (one scale per 256 values), the others per 32
    q, d, _ = (oracles.quantize_act_k if gguf_type.lower() in KQ8 else oracles.quantize_act)(x)
    xq = q.astype(np.float64) * np.repeat(d, 32, axis=1)
    want = xq @ w.T
    bound = np.abs(xq) @ np.abs(w).T
    assert np.all(np.abs(got - want) <= 2e-5 * bound + 1e-6)


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("gguf_type", TYPES)
@pytest.mark.parametrize("threads", [1, 2])
def test_every_path_gives_the_references_bits(isa, gguf_type, threads):
    W = _matrix(gguf_type, 37, 3)
    rng = np.random.default_rng(2)
    # decode and a few sequences (row kernels), tiles of 8 rows x 8 tokens and what is left, a prefill's one chunk
    for T in (1, 2, 3, 4, 5, 8, 13, 85):
        x = rng.standard_normal((T, W.shape[1]), dtype=np.float32)
        y0 = rng.standard_normal((T, W.shape[0]), dtype=np.float32)
        K.configure(isa="scalar", threads=1)
        want, want_acc = K.matmul(W, x), K.matmul(W, x, out=y0.copy(), accumulate=True)
        K.configure(isa=isa, threads=threads)
        np.testing.assert_array_equal(K.matmul(W, x), want, err_msg=f"T={T}")
        np.testing.assert_array_equal(K.matmul(W, x, out=y0.copy(), accumulate=True), want_acc)



@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("gguf_type", TYPES)
@pytest.mark.parametrize("rows, supers", [(35, 100), (27, 330), (163, 100)])
def test_a_prefill_over_batches_of_unpacked_groups_gives_the_references_bits(isa, gguf_type, rows, supers):
    """kern_x86_gguf.h's prefill unpacks up to 768 KiB of groups of 8 rows and runs each tile of tokens through them
    all: rows wide enough that a batch holds 3 groups (35 rows: a batch of 3, one of 1, 3 rows left) or 1 (27 rows),
    85 tokens (whole tiles and 5 left), on 1 and 2 threads. 163 rows: chunks of 40 rows on one thread (5 groups: with
    AMX on, batches of 2 groups (1 pair), then an odd group the vectors do), of 16 on two (a pair), 3 rows left; AMX
    takes the pairs' 5 tiles of 16 tokens, the vectors the 5 tokens after them."""
    W = _matrix(gguf_type, rows, supers)
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((85, W.shape[1]), dtype=np.float32)
    K.configure(isa="scalar", threads=1)
    want = K.matmul(W, x)
    for threads in (1, 2):
        K.configure(isa=isa, threads=threads)
        np.testing.assert_array_equal(K.matmul(W, x), want, err_msg=f"threads={threads}")

def test_the_fast_types_are_the_paths_own():
    K.configure(isa="scalar")
    assert K.gguf_fast_types() == set()
    K.configure()
    x86 = K.info()["isa"] in ("avx2", "avxvnni", "avx512")
    # the K-quants run fastest as stored (from memory, as a model's decode reads them), and IQ4_XS as fast in half
    # the memory; the 32-value types have SIMD kernels too, but run faster decoded to q8_0
    # NEON (kern_neon_gguf.h) has SIMD kernels for every type and keeps the same ones as stored, by their memory
    assert K.gguf_fast_types() == ({"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"}
                                   if x86 or K.info()["isa"] == "neon" else set())
    assert K.gguf_simd_types() == ({"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "IQ4_XS"}
                                   if x86 or K.info()["isa"] == "neon" else set())


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("gguf_type", ["Q2_K", "Q3_K", "IQ4_XS"])
@pytest.mark.parametrize("rows, supers", [(3, 1), (8, 1), (9, 4), (21, 2)])
def test_the_kquant_kernels_give_the_references_bits_on_odd_sizes(isa, gguf_type, rows, supers):
    """kern_x86_kq2.h's kernels: fewer rows than a group of 8, exactly one group, one group and a row, groups and
    rows left over, one to four super-blocks; a decode, the small-T kernels (4 tokens at a time and the rest) and a
    prefill tile with tokens left over, split over 2 threads."""
    W = _matrix(gguf_type, rows, supers)
    rng = np.random.default_rng(rows * 10 + supers)
    for T in (1, 2, 5, 13):
        x = rng.standard_normal((T, W.shape[1]), dtype=np.float32) * rng.uniform(0.01, 10, (T, 1)).astype(np.float32)
        K.configure(isa="scalar", threads=1)
        want = K.matmul(W, x)
        K.configure(isa=isa, threads=2)
        np.testing.assert_array_equal(K.matmul(W, x), want, err_msg=f"T={T}")


def test_a_row_that_is_not_whole_blocks_is_refused():
    with pytest.raises(ValueError, match="a row of 300 values cannot be stored as q4_k: q4_k needs a positive "
                                         "multiple of 256 columns"):
        K.row_bytes("q4_k", 300)


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("gguf_type", ["Q4_K", "Q5_K"])
@pytest.mark.parametrize("supers", [128, 129])
def test_a_kquant_decode_past_the_stack_buffers_limit_gives_the_references_bits(isa, gguf_type, supers):
    """kern_x86_gguf.h's Q4_K / Q5_K decode lays a token's quants out by pairs of blocks on the stack for rows of up
    to K4_RELAY_MAX (32,768) values, and on the heap for a longer row (129 super-blocks: 33,024). Both give the
    reference's bits, on an odd row count (the last row alone) and two threads."""
    W = _matrix(gguf_type, 5, supers)
    x = np.random.default_rng(supers).standard_normal((1, W.shape[1]), dtype=np.float32)
    K.configure(isa="scalar", threads=1)
    want = K.matmul(W, x)
    for threads in (1, 2):
        K.configure(isa=isa, threads=threads)
        np.testing.assert_array_equal(K.matmul(W, x), want, err_msg=f"{threads} threads")


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("threads", [1, 2])
def test_a_q6_k_prefill_adds_in_16_bits_only_where_the_activations_allow_it(isa, threads):
    """The x86 Q6_K prefill tile adds a half-block's 4 vectors of products in 16-bit lanes where pt_q6_flags found a
    token's super-block small enough (63 x 520 fits int16), else 2 at a time. Tokens of one sign at full scale (all
    127: 8 products of the fixture's values overflow int16 in many lanes), a token at the bound (groups of exactly 520)
    and one past it (521), beside ordinary tokens, in tiles of 8 with tokens left over: the reference's bits."""
    W = _matrix("Q6_K", 19, 3)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((21, W.shape[1]), dtype=np.float32)
    x[1] = 1.0                                   # every quant 127: run in 16 bits, most lanes would wrap
    x[9, 256:512] = -2.0                          # one super-block of the other sign
    x[10] = np.abs(x[10]) + 3.0                   # every quant positive and large
    for row, top in ((12, 520), (13, 521)):       # quants exactly as written: one 127 sets the scale to 1
        q = np.zeros(W.shape[1], np.float32)
        for sb in range(W.shape[1] // 256):
            for half in range(16):
                for g in range(2):
                    at = [sb * 256 + 16 * half + 2 * g + 4 * k + l for k in range(4) for l in range(2)]
                    q[at] = [127, 127, 127, 127, top - 508, 0, 0, 0]
        x[row] = q
    K.configure(isa="scalar", threads=1)
    want = K.matmul(W, x)
    K.configure(isa=isa, threads=threads)
    np.testing.assert_array_equal(K.matmul(W, x), want)
