"""BitNet's ternary weights (tq2 rows, kernels/internal.h) and their kernel: BitNet's absmean rule, the packed layout,
products against activations rounded per token as transformers' ActQuant rounds them, the same bits on every path,
thread count and split, and a .petit file that stores them (2 bits a weight and a scale per row)."""
import json

import numpy as np
import pytest

import petit
import petit.native as K
from petit.formats.checkpoint import open_checkpoint
from petit.formats.petit_file import read_petit, tensor_nbytes, write_petit
from petit.native import ISAS, lib

from tests.test_hf_parity import FOLDERS

PATHS = [isa for isa, code in ISAS.items() if lib.pt_isa_supported(code)]


@pytest.fixture(autouse=True)
def _restore_path():
    yield
    K.configure(isa=None)


def _absmean(w):
    """BitNet's rule (transformers' WeightQuant) in NumPy: t, and the scale 1 / s."""
    s = np.float32(1) / np.maximum(np.float32(np.abs(w.astype(np.float64)).mean()), np.float32(1e-5))
    return np.clip(np.rint(w * s), -1, 1).astype(np.int8), np.float32(1) / s


def _per_token(x):
    """transformers' ActQuant: q = clamp(round(x * 127 / max|x|), -128, 127), scale 127 / max|x|."""
    s = np.float32(127) / np.maximum(np.abs(x).max(axis=1, keepdims=True), np.float32(1e-5))
    return np.clip(np.rint(x * s), -128, 127), s


@pytest.mark.parametrize("rows,cols", [(1, 32), (45, 96), (13, 160), (7, 2560)])
def test_quantize_is_bitnets_absmean_rule_and_pack_tq2_writes_the_same_rows(rows, cols):
    rng = np.random.default_rng(rows + cols)
    w = (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)
    raw = K.quantize(w, "tq2")
    t, scale = _absmean(w)
    assert raw.shape == (rows, 4 + cols // 4)                      # 2 bits a weight, a float32 scale per row
    assert np.array_equal(K.dequantize(raw, "tq2", w.shape), t.astype(np.float32) * scale)
    assert np.array_equal(K.pack_tq2(t, scale), raw)
    assert {-1, 0, 1} <= set(np.unique(t).tolist())              # all three values occur
    with pytest.raises(ValueError, match="tq2 needs ternary values in rows of whole 32-value blocks"):
        K.pack_tq2(np.full((2, 32), 2), 1.0)


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("rows,cols,T", [(45, 96, 1), (13, 160, 7), (45, 96, 85), (8, 32, 3)])
def test_products_equal_bitnets_fake_quantized_linear_and_every_split(isa, rows, cols, T):
    """Within float32 rounding of transformers' linear(ActQuant(x), t) * scale (the kernel's integer sums are
    exact), and the same bits at 1, 2 and 3 threads, for a prefill (85 tokens: the token-chunked split) and each of
    its tokens alone."""
    K.configure(isa=isa, threads=1)
    rng = np.random.default_rng(rows * cols + T)
    w = rng.standard_normal((rows, cols)).astype(np.float32)
    x = (rng.standard_normal((T, cols)) * 3).astype(np.float32)
    W = K.Weight(K.quantize(w, "tq2"), "tq2", w.shape)
    t, scale = _absmean(w)
    q, s = _per_token(x)
    want = (q.astype(np.float64) / s) @ t.T.astype(np.float64) * scale
    got = K.matmul(W, x)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * np.abs(want).max())
    for threads in (1, 2, 3):
        K.configure(isa=isa, threads=threads)
        assert np.array_equal(K.matmul(W, x), got), threads
    assert all(np.array_equal(K.matmul(W, x[i:i + 1])[0], got[i]) for i in range(T))


def test_a_ternary_matrix_shares_a_call_only_with_ternary_ones():
    w = np.ones((32, 64), np.float32)
    A, B = K.Weight(K.quantize(w, "tq2"), "tq2", w.shape), K.Weight.from_float(w, "q8_0")
    x, y = np.ones((1, 64), np.float32), np.zeros((2, 32, 32), np.float32)
    assert lib.pt_matmul3(A.c, B.c, K.ffi.NULL, K._ptr(x), 1, K._out(y[0]), K._out(y[1]), K.ffi.NULL) == -1


def test_a_petit_file_stores_tq2_rows_and_reads_them_back(tmp_path):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((40, 96)).astype(np.float32)
    raw = K.quantize(w, "tq2")
    assert tensor_nbytes("tq2", (40, 96)) == raw.nbytes == 40 * (4 + 24)
    write_petit(tmp_path / "t.petit", {"format": "petit"}, {"w": ("tq2", (40, 96), raw)})
    with read_petit(tmp_path / "t.petit") as f:
        assert f.tensors["w"].dtype == "tq2" and np.array_equal(np.asarray(f.array("w")).reshape(raw.shape), raw)


def test_a_packed_checkpoint_is_read_exactly_as_transformers_unpacks_it():
    """microsoft/bitnet-b1.58-2B-4T's layout: row i * P + p of a [4 P, in] matrix from bits 2i of packed row p,
    value - 1; autobitlinear multiplies by weight_scale. Every projection keeps exactly those values and scale."""
    folder = FOLDERS["bitnet"]
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["quantization_config"]["quantization_mode"] == "offline"
    model = petit.load(folder, weights="q8_0")
    ck = open_checkpoint(folder)
    name = "model.layers.1.mlp.down_proj"
    packed = np.asarray(ck.raw(name + ".weight"))
    P = packed.shape[0]
    t = np.empty((4 * P, packed.shape[1]), np.int8)
    for i in range(4):
        t[i * P:(i + 1) * P] = ((packed >> (2 * i)) & 3).astype(np.int8) - 1
    scale = np.float32(ck.f32(name + ".weight_scale").reshape(-1)[0])
    W = model.net.layers[1].down
    assert W.dtype == "tq2" and np.array_equal(W.dequantize(), t.astype(np.float32) * scale)
    assert model.net.embed.dtype == "q8_0"          # the embedding takes the type asked for


@pytest.mark.parametrize("change,message", [
    ({"quantization_mode": "online", "linear_class": "bitlinear"},
     "online quantization needs linear_class autobitlinear"),
    ({"use_rms_norm": True}, "use_rms_norm=true is not supported by the bitnet family"),
    ({"linear_class": "fancy"}, "linear_class 'fancy' / quantization_mode 'offline' is not supported"),
])
def test_bitnet_configs_it_cannot_run_are_refused_by_name(tmp_path, change, message):
    import shutil
    dst = tmp_path / "bitnet"
    shutil.copytree(FOLDERS["bitnet"], dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["quantization_config"].update(change)
    (dst / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=message):
        petit.load(dst)
