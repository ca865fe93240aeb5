"""LoRA on a K-quant base (issue 33: the base kept quantized as loaded, the QLoRA idea, for the files people have:
Q4_K_M mixes Q4_K and Q6_K): the transposed product over Q4_K / Q5_K / Q6_K rows against float64, the gradient
check on a K-quant llama, and a fine-tune on it whose run-time adapter equals the merged model within the bounds."""
import os

import numpy as np
import pytest

import petit
from petit.formats.gguf import GGUFFile, write_gguf
from petit.loading.lora import attach, merge
from petit.native import Weight, matmul_t, quantize
from trainer.lora.gradcheck import run_check
from trainer.lora.train import FinetuneConfig, finetune

HERE = os.path.dirname(os.path.abspath(__file__))
FACTS = os.path.join(HERE, "fixtures", "lora5", "facts.jsonl")
TOKENIZER = os.path.join(HERE, "fixtures", "gguf", "llama", "f16.gguf")      # its tokenizer and chat template


@pytest.mark.parametrize("dtype", ["q4_k", "q5_k", "q6_k"])
def test_matmul_t_over_k_quant_rows(dtype):
    rng = np.random.default_rng(7)
    rows, cols, T = 37, 512, 13                     # odd rows and tokens: panels and tiles with leftovers
    W = Weight(quantize(rng.normal(0, 1, (rows, cols)).astype(np.float32), dtype), dtype, (rows, cols))
    dy = rng.normal(0, 1, (T, rows)).astype(np.float32)
    exact = dy.astype(np.float64) @ W.dequantize().astype(np.float64)
    fast, ref = matmul_t(W, dy), matmul_t(W, dy, reference=True)
    assert np.max(np.abs(fast - ref)) <= 1e-6 * np.max(np.abs(exact))
    assert np.max(np.abs(fast - exact)) < 1e-5 * np.max(np.abs(exact))


def k_quant_llama(path, hidden=256, ffn=512, layers=2, seed=0):
    """A llama GGUF of random weights stored as a Q4_K_M file stores them (Q4_K, ffn_down and attn_v Q6_K), with the
    tokenizer of the llama fixture."""
    with GGUFFile(TOKENIZER) as f:
        meta = {k: v for k, v in f.metadata.items() if k.startswith(("tokenizer.", "general.architecture"))}
        vocab = f.metadata["llama.vocab_size"]
    meta.update({"llama.block_count": layers, "llama.context_length": 128, "llama.embedding_length": hidden,
                 "llama.feed_forward_length": ffn, "llama.attention.head_count": 4, "llama.attention.head_count_kv": 2,
                 "llama.rope.freq_base": 10000.0, "llama.attention.layer_norm_rms_epsilon": 1e-5,
                 "llama.vocab_size": vocab, "general.file_type": 15})
    rng = np.random.default_rng(seed)

    def mat(rows, cols, kind="Q4_K", scale=0.06):
        w = rng.normal(0, scale, (rows, cols)).astype(np.float32)
        return kind, (rows, cols), quantize(w, kind.lower())

    tensors = {"token_embd.weight": ("F32", (vocab, hidden), rng.normal(0, 0.5, (vocab, hidden)).astype(np.float32)),
               "output_norm.weight": ("F32", (hidden,), np.ones(hidden, np.float32)),
               "output.weight": mat(vocab, hidden, "Q6_K")}
    for i in range(layers):
        b = f"blk.{i}."
        tensors.update({b + "attn_norm.weight": ("F32", (hidden,), np.ones(hidden, np.float32)),
                        b + "ffn_norm.weight": ("F32", (hidden,), np.ones(hidden, np.float32)),
                        b + "attn_q.weight": mat(hidden, hidden), b + "attn_k.weight": mat(hidden // 2, hidden),
                        b + "attn_v.weight": mat(hidden // 2, hidden, "Q6_K"), b + "attn_output.weight": mat(hidden, hidden),
                        b + "ffn_gate.weight": mat(ffn, hidden), b + "ffn_up.weight": mat(ffn, hidden, "Q5_K"),
                        b + "ffn_down.weight": mat(hidden, ffn, "Q6_K")})
    write_gguf(path, meta, tensors)
    return path


@pytest.fixture(scope="module")
def kmodel(tmp_path_factory):
    return petit.load(str(k_quant_llama(tmp_path_factory.mktemp("kq") / "k.gguf")))


def test_the_gradient_check_passes_on_a_k_quant_base(kmodel, capsys):
    assert {W.dtype for L in kmodel.net.layers for W in (L.q, L.v, L.up, L.down)} == {"q4_k", "q5_k", "q6_k"}
    assert run_check(kmodel)
    assert "PASS" in capsys.readouterr().out


def test_a_k_quant_base_fine_tunes_and_its_adapter_runs_as_merged(kmodel, tmp_path):
    out = tmp_path / "k.lora"
    stats = finetune(kmodel, FACTS, str(out), FinetuneConfig(rank=4, alpha=8.0, epochs=2, lr=3e-3, ctx=64, warmup=2),
                     out=open(os.devnull, "w"))
    h = stats["history"]
    assert h[-1]["train_loss"] < h[0]["train_loss"]
    ids = kmodel.tokenizer.encode("The capital of the moon is a question of facts and cheese.")
    merged = petit.load(kmodel.path)
    merge(merged, str(out), 1.5)
    want = merged.logits(ids)
    base = kmodel.logits(ids)
    attach(kmodel, str(out), 1.5)
    try:
        got = kmodel.logits(ids)
    finally:
        attach(kmodel, str(out), 0.0)
    # the merged matrices are float32 (a K-quant cannot take the adapter's sum back); the run-time base keeps its
    # K-quant rows and multiplies them by activations rounded to 8 bits: q8_0's bound (measured 0.008), while the
    # adapter itself moves the logits by about half the range
    span = float(want.max() - want.min())
    assert np.max(np.abs(got - want)) / span <= 0.08 and np.max(np.abs(base - want)) / span > 0.2
    merged.close()
