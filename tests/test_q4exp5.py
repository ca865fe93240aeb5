"""The q4exp group of issue 36 (tests/fixtures/hf5_q4exp: Qwen4-Exp's text model and its multimodal wrapper, made by
transformers 5.25): what tests/test_hf_parity.py (every position of the three prompts, the quantized bounds) and
test_verify_families.py (`petit verify`) do not already hold.

- The two kernels of the family (kernels/hc.c's pt_q4x_mix, kernels/qsa.c's pt_qsa_index) against float64
  definitions written from transformers' modeling file, and against their scalar references, at odd sizes and
  across calls (the index keys kept in the cache slot).
- The greedy continuation equals transformers'; the plan equals the per-op path bit for bit, token-by-token decode
  the prefill; the QSA indexer does choose (a query past budget + ratio positions reads fewer).
- The wrapper: its logits equal transformers' whole class, and its load says once that the vision tower is not run.
- What the family reads, its defaults (transformers'), its refusals by name; a converted file runs the same.
"""
import json
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.models import qwen4_exp, qwen4_exp_text
from petit.native import ffi, lib
from models import assert_greedy_equals_transformers, assert_the_plan_equals_the_per_op_path, converted_runs_the_same
from models import load_strict as _load, load_wrapper_saying_the_tower_is_not_run
from test_ssm import decode_and_plan

DIR = Path(__file__).parent / "fixtures" / "hf5_q4exp"
TEXT, WRAP = DIR / "qwen4_exp_text", DIR / "qwen4_exp"
F = lambda a: ffi.cast("float *", ffi.from_buffer(a))       # noqa: E731
I = lambda a: ffi.cast("int32_t *", ffi.from_buffer(a))     # noqa: E731


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@pytest.mark.parametrize("T,n,D", [(5, 3, 17), (1, 2, 1), (9, 16, 33)])
@pytest.mark.parametrize("last", [False, True])
def test_the_gated_mix_is_the_mean_of_the_gated_streams(T, n, D, last):
    """x = mean_j sigmoid(g_j) hn_j, post = 2 sigmoid(z) (transformers' Qwen4ExpTextGatedResidual after its matmuls)"""
    rng = np.random.default_rng(T * n + D)
    hn, g = (rng.standard_normal((T, n, D)).astype(np.float32) * 3 for _ in range(2))
    z = rng.standard_normal((T, n)).astype(np.float32) * 4
    want_x = (sigmoid(g.astype(np.float64)) * hn).mean(1)
    for fn in (lib.pt_q4x_mix, lib.pt_q4x_mix_ref):
        x, post = np.empty((T, D), np.float32), z.copy()
        assert fn(F(hn), F(g), T, n, D, F(x), ffi.NULL if last else F(post)) == 0
        np.testing.assert_allclose(x, want_x, rtol=0, atol=1e-6 * np.abs(want_x).max())
        np.testing.assert_allclose(post, z if last else 2 * sigmoid(z.astype(np.float64)), rtol=1e-6, atol=1e-7)
    assert lib.pt_q4x_mix(F(hn), F(g), T, 17, D, F(x), ffi.NULL) == -1      # more streams than kernels/hc.c holds


def rope_half(x, pos, rot, theta=10000.0):
    """rotate-half RoPE on the first `rot` values of x [..., d] at position pos"""
    h = rot // 2
    ang = pos * theta ** (-np.arange(h) * 2.0 / rot)
    c, s = np.cos(ang), np.sin(ang)
    y = x.astype(np.float64).copy()
    y[..., :h], y[..., h:rot] = x[..., :h] * c - x[..., h:rot] * s, x[..., h:rot] * c + x[..., :h] * s
    return y


def qsa_f64(iq, keys, w, eps, block, top_k, rot, pos0):
    """transformers' Qwen4ExpTextQSAIndexer._select_tokens as blocks: per query (iq [T][H][d], roped) over the keys
    of positions 0 .. pos0 + t"""
    out = []
    for t in range(len(iq)):
        n = pos0 + t + 1
        nb = n // block
        chosen = list(range(nb))
        if nb > top_k:
            pooled = keys[:nb * block].astype(np.float64).reshape(nb, block, -1).mean(1)
            kb = pooled / np.sqrt((pooled ** 2).mean(-1, keepdims=True) + eps) * (1.0 + w)
            kb = np.stack([rope_half(kb[b], b * block, rot) for b in range(nb)])
            sc = np.maximum(iq[t].astype(np.float64) @ kb.T, 0).sum(0) / np.sqrt(keys.shape[1])
            chosen = sorted(np.argsort(-sc, kind="stable")[:top_k].tolist())
        out.append(chosen + ([nb] if n % block else []))
    return out


@pytest.mark.parametrize("H,d,block,top_k,rot", [(3, 7 * 2, 3, 2, 6), (1, 5, 5, 1, 0), (8, 16, 4, 4, 8)])
def test_the_qsa_indexer_chooses_transformers_blocks_across_calls(H, d, block, top_k, rot):
    """prompts of 37 positions then 1, 2 and 11 more (the keys kept in the slot), odd head sizes"""
    rng = np.random.default_rng(H + d + block)
    n_ctx, eps = 64, 1e-6
    w = rng.normal(0, 0.2, d).astype(np.float32)
    ang = np.arange(n_ctx)[:, None] * 10000.0 ** (-np.arange(max(rot // 2, 1)) * 2.0 / max(rot, 1))
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    keys = rng.standard_normal((n_ctx, d)).astype(np.float32)
    caches = [np.zeros((n_ctx, d), np.float32) for _ in range(2)]
    pos0 = 0
    for T in (37, 1, 2, 11):
        iq = rng.standard_normal((T, H, d)).astype(np.float32)
        want = qsa_f64(iq, keys, w, eps, block, top_k, rot, pos0)
        for fn, cache in zip((lib.pt_qsa_index, lib.pt_qsa_index_ref), caches):
            sel, n_sel = np.full((T, top_k + 1), -1, np.int32), np.zeros(T, np.int32)
            assert fn(F(iq), F(keys[pos0:pos0 + T]), F(cache), F(w), eps, n_ctx, T, pos0, H, d, block, top_k, rot,
                      F(cos), F(sin), n_ctx, I(sel), I(n_sel)) == 0
            assert [sel[t, :n_sel[t]].tolist() for t in range(T)] == want
            np.testing.assert_array_equal(cache[:pos0 + T], keys[:pos0 + T])
        pos0 += T
    bad = np.zeros(1, np.float32)
    assert lib.pt_qsa_index(F(bad), F(bad), F(bad), F(bad), eps, 4, 5, 0, 1, 1, 1, 1, 0, ffi.NULL, ffi.NULL, 0,
                            I(np.zeros(2, np.int32)), I(np.zeros(5, np.int32))) == -1        # past the context


# --- the model: the fixtures of transformers 5.25 ---

def test_greedy_continuation_equals_transformers():
    assert_greedy_equals_transformers(_load(TEXT), TEXT)


def test_the_plan_gives_the_oracles_bits_and_decode_the_prefills():
    """the long prompt (140 positions: the indexer chooses from position 19 on) whole, op by op, token by token"""
    decode_and_plan(TEXT, "f32", "reference_long.npz", 256)


def test_at_q8_0_the_plan_gives_the_oracles_bits():
    """(token-by-token decode is not held to the prefill at q8_0, as it is not for qwen3_5_moe_text, whose long
    prompt decodes 1.8e-2 of the range from its q8_0 prefill: a one-token step's q8_0 products round otherwise than
    a prefill's; here 4.4e-3 at worst, with the same expert and QSA choices at every position)"""
    assert_the_plan_equals_the_per_op_path(petit.load(TEXT, weights="q8_0"))


def test_the_indexer_chooses_four_blocks_and_the_last_incomplete_one():
    """indexer_budget 16 / compress ratio 4: a query at position p reads min(p + 1 // 4, 4) complete blocks, plus
    the incomplete one; past the first 20 positions fewer positions than it sees"""
    ids = np.load(TEXT / "reference_long.npz")["input_ids"]
    m = _load(TEXT)
    m.logits(ids)
    choice = m.net.layers[1].sparse.last_choice(len(ids))
    n_sel = (choice >= 0).sum(axis=1)
    assert n_sel.tolist() == [min((p + 1) // 4, 4) + ((p + 1) % 4 != 0) for p in range(len(ids))]
    for p in (len(ids) - 2, len(ids) - 1):       # 34 complete blocks and 3 positions of the 35th; 35 complete ones
        got = choice[p, :n_sel[p]].tolist()
        assert got == sorted(set(got)) and len(got) == 4 + (p % 4 != 3) and got[-1] <= p // 4
    assert choice[-2, 4] == 34 and choice[-1, 3] < 35 and choice[-1, 4] == -1


def test_a_released_qwen4_exp_folder_runs_its_text_model_and_says_the_tower_is_not_run():
    """transformers' own Qwen4ExpForConditionalGeneration folder (a one-block vision tower beside the text model of
    the qwen4_exp_text case): the logits of that class on the three prompts, one warning about the tower."""
    m = load_wrapper_saying_the_tower_is_not_run(WRAP, "qwen4_exp")
    assert m.config.hc_count == 3


def test_converted_files_run_the_same_numbers(tmp_path):
    converted_runs_the_same(TEXT, tmp_path, np.load(TEXT / "reference.npz")["input_ids"])
    from petit.loading.convert import convert
    ids = np.load(WRAP / "reference_wrapper.npz")["input_ids"]
    with pytest.warns(UserWarning):
        convert(WRAP, tmp_path / "w.petit", "f32").close()
        m = petit.load(WRAP, weights="f32")
    again = _load(tmp_path / "w.petit")
    assert again.config.model_type == "qwen4_exp"
    np.testing.assert_array_equal(again.logits(ids), m.logits(ids))


# --- the config ---

def _cfg(**changes):
    d = json.loads((TEXT / "config.json").read_text())
    d.update(changes)
    return d


def test_what_the_family_reads():
    m = _load(TEXT)
    net, cfg = m.net, m.config
    assert cfg.types == ["linear_attention", "indexed_attention", "linear_attention"] and cfg.norm_topk_prob
    assert net.n == 3 and net.mixer.inject is None and all(g.inject.shape == (3, 192) for p in net.hc for g in p)
    assert net.final_norm is None and net.arch.cache_slots == 4 and net.arch.state_layers == (0, 2)
    q = net.layers[1].sparse
    assert (q.n_idx, q.dim, q.block, q.top_k, q.slot, q.rope.dim) == (8, 16, 4, 4, 3, 8)


def test_defaults_are_transformers():
    """the sizes are required (as every family's); the rest is transformers' Qwen4ExpTextConfig's"""
    bare = qwen4_exp_text.Config.from_dict({"model_type": "qwen4_exp_text", "vocab_size": 64, "hidden_size": 32,
                                            "num_hidden_layers": 3, "num_attention_heads": 2})
    assert bare.types == ["linear_attention"] * 3 and (bare.head_dim, bare.num_key_value_heads) == (256, 2)
    assert (bare.hc_count, bare.hc_lowrank, bare.num_experts, bare.num_experts_per_tok) == (4, 320, 512, 10)
    assert bare.norm_topk_prob and bare.ple_layer_ids == [] and bare.ngram_size == 3 and bare.rms_norm_eps == 1e-6
    with pytest.raises(ValueError, match="attention layers need the QSA indexer's indexer_n_heads"):
        qwen4_exp_text.Config.from_dict({"model_type": "qwen4_exp_text", "vocab_size": 64, "hidden_size": 32,
                                         "num_hidden_layers": 4, "num_attention_heads": 2})


@pytest.mark.parametrize("key, value", [("number_of_conv_states", 1), ("split_ngram_parts", 8), ("seed", 7)])
def test_keys_transformers_writes_are_accepted(key, value):
    assert qwen4_exp_text.Config.from_dict(_cfg(**{key: value})).unknown_keys == []


def test_full_attention_is_read_as_indexed_and_the_wrapper_config_flattens():
    cfg = qwen4_exp_text.Config.from_dict(_cfg(layer_types=["linear_attention", "full_attention", "linear_attention"]))
    assert cfg.types[1] == "indexed_attention"
    with pytest.warns(UserWarning, match="the vision tower"):
        w = qwen4_exp.Config.from_dict(json.loads((WRAP / "config.json").read_text()))
    assert w.model_type == "qwen4_exp" and w.indexer_budget == 16 and w.unknown_keys == []


@pytest.mark.parametrize("changes, message", [
    (dict(ple_layer_ids=[1]), "ple_layer_ids [1] are not supported yet (the hashed n-gram Per-Layer Embeddings"),
    (dict(output_gate_type="sigmoid"), "output_gate_type 'sigmoid' is not supported"),
    (dict(hc_count=1), "hc_count must be an integer in 2..16, got 1"),
    (dict(hc_count=17), "hc_count must be an integer in 2..16, got 17"),
    (dict(indexer_budget=None), "attention layers need the QSA indexer's indexer_budget"),
    (dict(indexer_budget=18), "indexer_budget must be a multiple of indexer_compress_ratio"),
    (dict(indexer_kv_heads=2), "indexer_kv_heads must be 1"),
    (dict(indexer_head_dim=4), "indexer_head_dim 4 must be at least the 8 rotated values"),
])
def test_refusals_name_what_is_not_supported(changes, message):
    with pytest.raises(ValueError, match=message.replace("(", "\\(").replace(")", "\\)").replace("[", "\\[")
                       .replace("]", "\\]")):
        qwen4_exp_text.Config.from_dict(_cfg(**changes))
