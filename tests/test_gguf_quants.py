"""GGUF's other block types (kernels/gguf_quants.c) decode to the gguf package's own dequantization bit for bit:
random blocks of every type with its reference values (tests/fixtures/gguf_blocks, made by make_blocks.py), split
over threads or not; and a bad size is an error naming it."""
from pathlib import Path

import numpy as np
import pytest

from petit import native as K

BLOCKS = np.load(Path(__file__).parent / "fixtures" / "gguf_blocks" / "blocks.npz")


@pytest.fixture(autouse=True)
def restore_default_path():
    yield
    K.configure()


@pytest.mark.parametrize("gguf_type", sorted(K.GGUF_DECODED))
@pytest.mark.parametrize("threads", [1, 2])
def test_every_type_decodes_to_the_reference_bits(gguf_type, threads):
    K.configure(threads=threads)
    raw, want = BLOCKS[f"{gguf_type}_raw"], BLOCKS[f"{gguf_type}_values"]
    got = K.dequantize_gguf(raw, gguf_type, want.shape)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    # row by row gives the same (a matrix's rows are independent, so a slice of rows decodes alone)
    np.testing.assert_array_equal(K.dequantize_gguf(raw[2:5], gguf_type, (3, want.shape[1])), want[2:5])


def test_a_large_matrix_split_over_threads_gives_the_same_values():
    raw = np.tile(BLOCKS["Q4_K_raw"], (300, 1))
    K.configure(threads=1)
    one = K.dequantize_gguf(raw, "Q4_K", (raw.shape[0], 768))
    K.configure(threads=2)
    np.testing.assert_array_equal(K.dequantize_gguf(raw, "Q4_K", (raw.shape[0], 768)), one)


def test_bad_sizes_and_types_are_named():
    raw = BLOCKS["Q6_K_raw"]
    with pytest.raises(ValueError, match="a row of 100 values is not a whole number of Q6_K blocks"):
        K.dequantize_gguf(raw, "Q6_K", (7, 100))
    with pytest.raises(ValueError, match=r"4410 bytes do not hold a Q6_K tensor of shape \(8, 768\) \(5040 expected\)"):
        K.dequantize_gguf(raw, "Q6_K", (8, 768))
    with pytest.raises(ValueError, match="cannot decode GGUF type 'IQ2_XXS'"):
        K.dequantize_gguf(raw, "IQ2_XXS", (7, 768))


@pytest.mark.parametrize("gguf_type", K.EXACT_Q8)
def test_q5_0_and_iq4_nl_become_q8_0_with_exactly_their_values(gguf_type):
    """The gguf package's reference values again, from the q8_0 rows they are rewritten to at load."""
    raw, want = BLOCKS[f"{gguf_type}_raw"], BLOCKS[f"{gguf_type}_values"]
    q8 = K.gguf_to_q8_0(raw, gguf_type, want.shape)
    assert q8.shape == (want.shape[0], K.row_bytes("q8_0", want.shape[1]))
    np.testing.assert_array_equal(K.dequantize(q8, "q8_0", want.shape).view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError, match=r"Q4_1 values do not fit q8_0 exactly \(only Q5_0, IQ4_NL do\)"):
        K.gguf_to_q8_0(BLOCKS["Q4_1_raw"], "Q4_1", BLOCKS["Q4_1_values"].shape)


def test_a_q5_0_gguf_matrix_runs_on_exactly_its_values():
    import petit
    root = Path(__file__).parent / "fixtures" / "gguf" / "llama"
    from petit.formats.gguf import GGUFFile
    with GGUFFile(root / "q5_0.gguf") as f:
        t = f.tensors["blk.0.attn_v.weight"]
        want = K.dequantize_gguf(np.array(f.raw(t.name)), "Q5_0", t.shape)
    with pytest.warns(UserWarning, match="stored as Q5_0 were decoded at load and run as q8_0"):
        m = petit.load(root / "q5_0.gguf", repack=False)
    dtype, shape, raw = m.tensors["model.layers.0.self_attn.v_proj.weight"]
    assert dtype == "q8_0"
    np.testing.assert_array_equal(K.dequantize(np.asarray(raw), "q8_0", shape), want)
