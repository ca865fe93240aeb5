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
from petit.models.families.wrappers import qwen4_exp
from petit.models.families.hybrid import qwen4_exp_text
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



def ngram_rows(ids, eos, n, H, mult, vocab, offset):
    """transformers' Qwen4ExpTextNGramEmbedding as written there: the token history shifted right by s, an eos in
    [t - s, t) or a start before t - s giving eos, then per order the XOR of int64 products and the floor modulo"""
    T, rows = len(ids), []
    for t in range(T):
        shifted = []
        for s in range(n):
            seg_start = max([j + 1 for j in range(t) if ids[j] == eos], default=0)
            shifted.append(ids[t - s] if t - s >= 0 and t - seg_start >= s else eos)
        out, h = [], 0
        for g in range(n):
            h ^= np.int64(shifted[g]).astype(np.uint64) * np.uint64(mult[g]) if g else \
                np.int64(shifted[0]).astype(np.uint64) * np.uint64(mult[0])
            if g:
                out += [offset[k] + int(np.int64(h.astype(np.int64))) % vocab[k] for k in range((g - 1) * H, g * H)]
        rows.append(out)
    return rows


def _tensor(a):
    from petit.native import Weight
    return Weight(np.ascontiguousarray(a, np.float32).view(np.uint8).reshape(a.shape[0], -1), "f32", a.shape)


@pytest.mark.parametrize("n,H,dim", [(3, 2, 5), (2, 3, 1), (4, 1, 7)])
def test_the_ngram_rows_are_transformers_hashes_across_calls(n, H, dim):
    """ids with eos among them (a document boundary), in calls of 13, 1, 2 and 9 tokens (the last n - 1 ids kept),
    64-bit multipliers that wrap; the rows gathered from 3 shards of unequal size"""
    with np.errstate(over="ignore"):
        rng = np.random.default_rng(n * 10 + H)
        eos, vocab_ids = 2, 50
        ids = rng.integers(0, vocab_ids, 25).astype(np.int32)
        ids[[0, 6, 7, 15]] = eos
        mult = [int(m) for m in rng.integers(1, 1 << 62, n, dtype=np.int64) * 2 + 1]
        vocab = [int(v) for v in (97, 89, 83, 79, 73, 71, 67, 61, 59, 53, 47, 43)[:(n - 1) * H]]
        offset = np.cumsum([0] + vocab[:-1]).tolist()
        rows_total = sum(vocab) + 3
        table = rng.standard_normal((rows_total, dim)).astype(np.float32)
        cuts = [0, rows_total // 3, rows_total // 3 + 5, rows_total]
        shards = [_tensor(table[a:b]) for a, b in zip(cuts, cuts[1:])]
        keep = [np.asarray(mult, np.int64), np.asarray(vocab, np.int64), np.asarray(offset, np.int64),
                np.asarray(cuts, np.int64)]
        g = ffi.new("pt_ngram *")
        g.n, g.heads, g.dim, g.eos, g.n_shards = n, H, dim, eos, 3
        g.mult, g.vocab, g.offset, g.start = (ffi.cast("int64_t *", ffi.from_buffer(a)) for a in keep)
        sh = ffi.new("pt_tensor *[]", [w.c for w in shards])
        g.shards = sh
        want = np.asarray(ngram_rows(ids.tolist(), eos, n, H, mult, vocab, offset), np.int64)
        ctx, pos0 = np.zeros(max(n - 1, 1), np.float32), 0
        for T in (13, 1, 2, 9):
            got = np.zeros((T, (n - 1) * H), np.int64)
            part = np.ascontiguousarray(ids[pos0:pos0 + T])
            assert lib.pt_ngram_ids(g, I(part), T, F(ctx.copy()), pos0, ffi.cast("int64_t *", ffi.from_buffer(got))) == 0
            np.testing.assert_array_equal(got, want[pos0:pos0 + T])
            emb = np.zeros((T, (n - 1) * H * dim), np.float32)
            assert lib.pt_ngram_embed(g, I(part), T, F(ctx), pos0, F(emb)) == 0
            np.testing.assert_array_equal(emb, table[want[pos0:pos0 + T]].reshape(T, -1))
            pos0 += T


@pytest.mark.parametrize("T,n,D,K,dil", [(7, 3, 11, 4, 3), (1, 2, 5, 2, 2), (12, 4, 8, 3, 1)])
def test_the_ple_mix_is_the_gated_value_plus_its_dilated_conv_across_calls(T, n, D, K, dil):
    """pt_ple_mix and its double reference against numpy's transformers-as-written form (sign sqrt gate, grouped
    RMSNorm, causal conv with dilation, silu), over a prompt and then single tokens, the conv state carried"""
    rng = np.random.default_rng(T + n + D)
    L, W, eps = T + 3, n * D, 1e-6
    kn, qn = (rng.standard_normal((L, n, D)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((L, D)).astype(np.float32)
    nw = (1 + rng.normal(0, 0.2, (n, D))).astype(np.float32)
    cw = (rng.standard_normal((W, K)) / np.sqrt(K)).astype(np.float32)
    X0 = rng.standard_normal((L, W)).astype(np.float32)
    g = (kn.astype(np.float64) * qn).sum(-1) / np.sqrt(D)
    g = np.sign(g) * np.sqrt(np.maximum(np.abs(g), 1e-6))
    u = sigmoid(g)[:, :, None] * v[:, None, :]
    w = u / np.sqrt((u * u).mean(-1, keepdims=True) + eps) * nw
    w = np.concatenate([np.zeros(((K - 1) * dil, W)), w.reshape(L, W)])
    conv = sum(cw[:, k] * w[k * dil:k * dil + L] for k in range(K))
    want = X0 + u.reshape(L, W) + conv * sigmoid(conv)
    rec = ffi.new("pt_plemix *")
    rec.n, rec.D, rec.K, rec.dil, rec.eps, rec.norm_w, rec.conv_w = n, D, K, dil, eps, F(nw), F(cw)
    for fn in (lib.pt_ple_mix, lib.pt_ple_mix_ref):
        X, state, pos0 = X0.copy(), np.full(((K - 1) * dil, W), 7.0, np.float32), 0    # stale state: pos0 0 resets
        for step in (T, 1, 1, 1):
            part = X[pos0:pos0 + step]
            assert fn(rec, F(kn[pos0:pos0 + step].copy()), F(v[pos0:pos0 + step].copy()),
                      F(qn[pos0:pos0 + step].copy()), step, pos0, F(state), F(part)) == 0
            pos0 += step
        np.testing.assert_allclose(X, want, rtol=0, atol=2e-5 * np.abs(want).max())

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
    assert (bare.ple_embed_dim, bare.heads_per_ngram, bare.ngram_vocab_size_base, bare.seed) == (32, 8, 20_000_000, 1234)
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
    (dict(ple_layer_ids=[2]), "ple_layer_ids must be one-indexed linear_attention layers in 1..3, got [2]"),
    (dict(ple_layer_ids=[1], ple_embed_dim=60), "ple_embed_dim (60) a multiple of (ngram_size - 1) x heads_per_ngram"),
    (dict(ple_layer_ids=[1], eos_token_id=None), "PLE layers need eos_token_id"),
    (dict(ple_layer_ids=[1], ple_conv_kernel_size=5), "the PLE conv's state (2304 values"),
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



# --- PLE ---

PLE = DIR / "qwen4_exp_text_ple"


def _int64_buffers(path) -> dict:
    """The int64 tensors of a safetensors file, exactly (transformers' PLE buffers)."""
    raw = Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    head = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.int64)
            for k, v in head.items() if k != "__metadata__" and v["dtype"] == "I64"}


def test_the_hash_parameters_are_the_checkpoints_buffers():
    """transformers saves each PLE layer's multipliers, prime vocabularies and offsets (left unread: Petit derives
    them from the config); they are what Petit derives"""
    from petit.models.families.hybrid import qwen4_exp_ngram
    bufs = _int64_buffers(PLE / "model.safetensors")
    cfg = qwen4_exp_text.Config.from_dict(json.loads((PLE / "config.json").read_text()))
    for j, i in enumerate(cfg.ple_layer_ids):
        p = f"model.layers.{i - 1}.ple.ple_embedding."
        sizes, offsets, rows = qwen4_exp_ngram.vocabularies(cfg, j)
        assert bufs[p + "layer_multipliers"].tolist() == [m - (1 << 64) if m >> 63 else m
                                                          for m in qwen4_exp_ngram.multipliers(cfg, j)]
        assert bufs[p + "ngram_heads_vocab_sizes"].tolist() == sizes and bufs[p + "ngram_heads_offsets"].tolist() == offsets
        assert rows == (4096, 4224)[j]
    assert sizes[0] > 1000 and all(qwen4_exp_ngram._is_prime(v) for v in sizes)


def test_ple_greedy_plan_decode_and_the_converted_file(tmp_path):
    assert_greedy_equals_transformers(_load(PLE), PLE)
    decode_and_plan(PLE, "f32", "reference_long.npz", 256)
    converted_runs_the_same(PLE, tmp_path, np.load(PLE / "reference_long.npz")["input_ids"])


def test_ple_state_rewinds_with_the_recurrent_state():
    """a snapshot restores PLE's last ids and conv state with the DeltaNet's: continuing from it gives the same
    logits as the first time"""
    ids = np.load(PLE / "reference_long.npz")["input_ids"].tolist()
    m = _load(PLE)
    cache = m.new_cache(256)
    m.forward(ids[:50], cache)
    cache.snapshot()
    first = m.forward(ids[50:60], cache)
    cache.rewind(50)
    np.testing.assert_array_equal(m.forward(ids[50:60], cache), first)


def test_a_checkpoint_whose_hash_buffers_are_not_its_configs_is_refused(tmp_path):
    """transformers would hash with the checkpoint's buffers whatever the config's seed says; Petit derives them from
    the config, so it refuses the folder rather than hash otherwise"""
    import shutil
    d = tmp_path / "ple"
    shutil.copytree(PLE, d)
    cfg = json.loads((PLE / "config.json").read_text())
    (d / "config.json").write_text(json.dumps(dict(cfg, seed=1235)))
    with pytest.raises(ValueError, match="model.layers.0.ple.ple_embedding.layer_multipliers: the checkpoint's values "
                                         "are not those its config"):
        petit.load(d, weights="f32")
