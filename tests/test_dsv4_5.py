"""The dsv4 group of issue 30 (tests/fixtures/hf5_dsv4: DeepSeek-V4, made by transformers 5.25; the engine's family
petit/models/families/mla/deepseek_v4.py). The shared tests (test_hf_parity, test_moe, test_verify_families, the app's chat) run
the fixture too; here:

- trainer/reference/deepseek_v4_f64.py, the float64 definition (hyper-connections with Sinkhorn, sliding-window +
  compressed sparse / heavily compressed attention with sinks, the Lightning indexer, hash and sqrtsoftplus routing,
  clamped SwiGLU experts, YaRN on the compress rope), equals transformers at every position of the three prompts
  (and of reference_yarn.npz) and continues the prompt as transformers' greedy decoding does.
- The engine equals transformers on the three prompts and the YaRN case; decode in steps of any size, a rewound
  cache and a batch equal one pass; the release's config spelling reads as transformers folds it; unknown keys are
  reported, bad values and an int8 cache refused by name.
- kernels/hc.c, compress.c and dsv4_attn.c against their scalar references at odd sizes and against the float64
  definition; the plan's per-sequence steps (kernels/dsv4_plan.c) against the definition in steps of any size.
"""
import json
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.native import ffi, lib
from trainer.reference import deepseek_v4_f64 as ref64

DIR = Path(__file__).parent / "fixtures" / "hf5_dsv4"
FOLDER = DIR / "deepseek_v4"
TOL = 1e-5          # of each position's logit range; measured 5.6e-7 / 7.3e-7 / 8.6e-7 (prompt / long / chat)


def rel_err(got, ref):
    return np.abs(got - ref).max(axis=1) / (ref.max(axis=1) - ref.min(axis=1))


@pytest.mark.parametrize("name", ["reference", "reference_long", "reference_chat"])
def test_float64_definition_equals_transformers_at_every_position(name):
    z = np.load(FOLDER / f"{name}.npz")
    got = ref64.logits(FOLDER, z["input_ids"])
    assert got.shape == z["logits"].shape
    err = rel_err(got, z["logits"].astype(np.float64))
    assert err.max() <= TOL, (name, float(err.max()), int(err.argmax()))
    assert (got.argmax(1) == z["logits"].argmax(1)).all()


def test_float64_definition_continues_the_prompt_as_transformers_greedy():
    z = np.load(FOLDER / "reference.npz")
    ids, out = [int(t) for t in z["input_ids"]], []
    for _ in range(len(z["greedy"])):
        out.append(int(ref64.logits(FOLDER, ids + out)[-1].argmax()))
    assert out == [int(t) for t in z["greedy"]]


def test_the_fixture_exercises_every_block_kind():
    """Prompts longer than the window and the compression rates, more compressed entries than the indexer keeps,
    hash and learned routing, more than one residual stream: so a definition missing any of them fails above."""
    cfg = json.loads((FOLDER / "config.json").read_text())
    n = len(np.load(FOLDER / "reference.npz")["input_ids"])
    assert set(cfg["layer_types"]) == {"sliding_attention", "compressed_sparse_attention",
                                       "heavily_compressed_attention"}
    assert set(cfg["mlp_layer_types"]) == {"hash_moe", "moe"} and cfg["scoring_func"] == "sqrtsoftplus"
    assert n > 2 * cfg["sliding_window"] and n // cfg["compress_rates"]["compressed_sparse_attention"] > cfg["index_topk"]
    assert n // cfg["compress_rates"]["heavily_compressed_attention"] >= 2 and cfg["hc_mult"] > 1
    feats = json.loads((DIR / "cases.json").read_text())["cases"]["deepseek_v4"]["feature_checks"]
    assert all(f["max_abs_logit_diff"] > 1e-3 for f in feats) and len(feats) >= 8


@pytest.fixture(scope="module")
def model():
    return petit.load(FOLDER, weights="f32")


@pytest.mark.parametrize("name", ["reference", "reference_long", "reference_chat"])
def test_the_engine_equals_transformers_at_every_position(model, name):
    z = np.load(FOLDER / f"{name}.npz")
    err = rel_err(model.logits(z["input_ids"]), z["logits"])
    assert err.max() <= 1e-4, (name, float(err.max()), int(err.argmax()))


def _steps(model, ids, splits, cache=None):
    """The logits of ids run as consecutive steps of the given sizes over one cache."""
    cache = cache or model.new_cache(len(ids))
    out, at = [], 0
    for n in splits:
        part = np.empty((n, model.vocab_size), np.float32)
        model.net.forward(list(ids[at:at + n]), cache, part)
        out.append(part)
        at += n
    return np.concatenate(out), cache


@pytest.mark.parametrize("splits", [[1] * 40, [5, 1, 1, 1, 12, 1, 19], [7, 9, 24], [39, 1]])
def test_prefill_then_decode_equals_the_whole_prompt(model, splits):
    """The window's keys, the compressors' raw rows and the entries of the windows closed so far are in the cache:
    steps of any sizes (across the CSA's 4 and the HCA's 8 token windows and the sliding window of 8) give the
    logits of one pass."""
    ids = np.load(FOLDER / "reference_long.npz")["input_ids"][:40]
    whole, _ = _steps(model, ids, [40])
    got, _ = _steps(model, ids, splits)
    assert np.abs(got - whole).max() <= 1e-5 * np.ptp(whole), float(np.abs(got - whole).max())


@pytest.mark.parametrize("back_to", [0, 13, 16, 23])
def test_a_rewound_cache_runs_on_as_a_fresh_one(model, back_to):
    """Sessions' prefix reuse and speculative rollback move the cache back: the entries of windows not closed at
    that position are written again when the new tokens close them."""
    ids = np.load(FOLDER / "reference_long.npz")["input_ids"]
    other = ids[60:100]
    want, _ = _steps(model, np.concatenate([ids[:back_to], other]), [back_to + 40] if back_to else [40])
    _, cache = _steps(model, ids, [30])
    cache.rewind(back_to)
    got, _ = _steps(model, other, [3, 1, 36], cache)
    assert np.abs(got - want[back_to:]).max() <= 1e-5 * np.ptp(want), float(np.abs(got - want[back_to:]).max())


def test_speculative_decoding_rolls_back_to_the_plain_greedy_tokens(model):
    """Drafts accepted and rejected in every round (the plain greedy tokens with the third of each round's drafts
    wrong): every rejection rewinds the cache into the middle of a compression window, and the tokens stay the
    plain greedy loop's."""
    from petit.generation.session import Stats
    from petit.generation.speculative import Speculation, generate_speculative
    ids = [int(t) for t in np.load(FOLDER / "reference_long.npz")["input_ids"][:50]]
    kw = dict(max_tokens=24, sampler=petit.Sampler(0.0), stop_ids=[])
    plain = [s.token for s in petit.generate_tokens(model, ids, **kw)]

    class TwoRight:
        name = "two right"

        def draft(self, context, n):
            d = list(plain[len(context) - len(ids):][:n])
            if len(d) > 2:
                d[2] = (d[2] + 1) % model.vocab_size
            return d

    stats = Stats()
    spec = [s.token for s in generate_speculative(model, ids, Speculation(TwoRight(), draft_max=5), stats=stats,
                                                  **kw)]
    assert spec == plain
    assert stats.accepted_tokens >= 8 and stats.drafted_tokens - stats.accepted_tokens >= 4


def test_a_batch_gives_each_sequence_its_own_logits(model):
    z = np.load(FOLDER / "reference_long.npz")["input_ids"]
    a, b = list(z[:21]), list(z[50:83])
    ca, cb = model.new_cache(64), model.new_cache(64)
    out = np.empty((2, model.vocab_size), np.float32)
    model.net.forward_batch([(a, ca, 1), (b, cb, 1)], out)
    model.net.forward_batch([([5], ca, 1), ([9], cb, 1)], out)
    wa, wb = model.logits(a + [5])[-1], model.logits(b + [9])[-1]
    assert np.abs(out[0] - wa).max() <= 1e-5 * np.ptp(wa) and np.abs(out[1] - wb).max() <= 1e-5 * np.ptp(wb)


def test_an_int8_cache_is_refused_by_name_and_sessions_keep_float32(model):
    from petit.cache import KVCache
    with pytest.raises(ValueError, match=r"deepseek_v4 keeps its compressors' state .* \(float32 caches only\)"):
        model.new_cache(8, kv_type="int8")
    a = model.net.arch
    cache = KVCache(len(model.net.layers), 1, 8, a.head_dim, "int8", True)
    with pytest.raises(ValueError, match=r"deepseek_v4 keeps its compressors' state .* \(float32 caches only\)"):
        model.net.forward([3, 4], cache, np.empty((1, model.vocab_size), np.float32))
    q = petit.load(FOLDER, weights="q8_0")
    assert petit.Session(q).cache.kv_type == "f32"


def _with_config(tmp_path, edit):
    """A copy of the fixture in tmp_path (made) with its config.json edited by edit(dict)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    for f in FOLDER.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((FOLDER / "config.json").read_text())
    edit(cfg)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path


def test_yarn_on_the_compress_rope_equals_transformers(tmp_path):
    """reference_yarn.npz (make_dsv4_yarn.py): transformers' logits with the released config's flat YaRN keys,
    which its config puts on the compressed layers' rope with attention_factor 1; the engine reads that spelling."""
    z = np.load(FOLDER / "reference_yarn.npz")
    rp = json.loads(str(z["rope_parameters"]))
    flat = {k: v for k, v in rp["compress"].items() if k not in ("rope_theta", "partial_rotary_factor",
                                                                  "attention_factor")}
    folder = _with_config(tmp_path, lambda c: c.update(rope_parameters=flat))
    err = rel_err(petit.load(folder, weights="f32").logits(z["input_ids"]), z["logits"])
    assert err.max() <= 1e-4, float(err.max())
    nested = _with_config(tmp_path / "nested", lambda c: c.update(rope_parameters=rp))
    assert rel_err(ref64.logits(nested, z["input_ids"]), z["logits"]).max() <= TOL       # measured 7.2e-7


def test_the_released_spelling_reads_as_transformers_folds_it(tmp_path):
    """compress_ratios per layer, compress_rate_csa / _hca, num_hash_layers, qk_rope_head_dim: the checkpoint's keys
    transformers' config turns into layer_types, compress_rates, mlp_layer_types and the rope width."""
    def legacy(c):
        for k in ("layer_types", "compress_rates", "mlp_layer_types", "partial_rotary_factor"):
            c.pop(k)
        c["rope_parameters"] = {"rope_theta": 10000.0}
        c.update(compress_ratios=[0, 4, 128], compress_rate_hca=8, num_hash_layers=1, qk_rope_head_dim=8)
    m = petit.load(_with_config(tmp_path, legacy), weights="f32")
    z = np.load(FOLDER / "reference.npz")
    assert rel_err(m.logits(z["input_ids"]), z["logits"]).max() <= 1e-4


def test_unknown_keys_are_reported_and_bad_values_refused(tmp_path):
    with pytest.warns(UserWarning, match="ignoring unknown key.*rope_parameters.compress.foo.*shiny"):
        petit.load(_with_config(tmp_path / "a", lambda c: (c.update(shiny=1),
                                                           c["rope_parameters"]["compress"].update(foo=2))))
    bad = {"layer_types": ["sliding_attention"] * 2 + ["full_attention"], "o_groups": 3,
           "num_key_value_heads": 2, "hc_mult": 17, "scoring_func": "softmax"}
    for key, value in bad.items():
        with pytest.raises(ValueError, match=key.split("_")[0]):
            petit.load(_with_config(tmp_path / key, lambda c: c.update({key: value})))
    with pytest.raises(ValueError, match="rope_type 'longrope' is not supported by deepseek_v4"):
        petit.load(_with_config(tmp_path / "r", lambda c: c["rope_parameters"]["compress"].update(
            rope_type="longrope")))


def test_the_reference_refuses_what_it_does_not_define(tmp_path):
    for f in FOLDER.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((FOLDER / "config.json").read_text())
    cfg["rope_parameters"]["main"].update(rope_type="yarn", factor=4.0)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="rope_type 'yarn' \\(main\\) not in this reference"):
        ref64.load(tmp_path)


def _ptr(a):
    return ffi.cast("float *", ffi.from_buffer(a)) if a is not None else ffi.NULL


def _hc_pre(fn_c, X, fn, base, scale, iters, head, eps=1e-6, norm_eps=1e-6):
    T, n, D = X.shape
    x_out, post, comb = np.zeros((T, D), np.float32), np.zeros((T, n), np.float32), np.zeros((T, n, n), np.float32)
    rc = fn_c(_ptr(X), _ptr(fn), _ptr(base), _ptr(scale), T, n, D, iters, eps, norm_eps, head, _ptr(x_out),
              _ptr(None if head else post), _ptr(None if head else comb))
    return rc, x_out, post, comb


def _hc_case(T, n, D, head, seed):
    rng = np.random.default_rng(seed)
    M = n if head else (2 + n) * n
    X = rng.standard_normal((T, n, D)).astype(np.float32)
    fn = (rng.standard_normal((M, n * D)) * 1.2 / np.sqrt(n * D)).astype(np.float32)
    base = (rng.standard_normal(M) * 0.5).astype(np.float32)
    scale = (1 + rng.standard_normal(1 if head else 3) * 0.2).astype(np.float32)
    return X, fn, base, scale


@pytest.mark.parametrize("T,n,D,iters", [(1, 1, 1, 1), (3, 3, 7, 20), (5, 4, 33, 3), (2, 5, 65, 7), (4, 7, 9, 1)])
def test_hc_pre_equals_its_scalar_reference_and_the_definition_at_odd_sizes(T, n, D, iters):
    X, fn, base, scale = _hc_case(T, n, D, False, T * 100 + n * 10 + D)
    rc, x, post, comb = _hc_pre(lib.pt_hc_pre, X, fn, base, scale, iters, 0)
    rc_ref, x_r, post_r, comb_r = _hc_pre(lib.pt_hc_pre_ref, X, fn, base, scale, iters, 0)
    assert rc == rc_ref == 0
    for got, want in ((x, x_r), (post, post_r), (comb, comb_r)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    x64, post64, comb64 = ref64.hyper(X.astype(np.float64), fn.astype(np.float64), base.astype(np.float64),
                                      scale.astype(np.float64), n, iters, 1e-6, 1e-6)
    for got, want in ((x_r, x64), (post_r, post64), (comb_r, comb64)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(comb.sum(1), 1.0, atol=1e-4)      # Sinkhorn's last step: columns sum to 1
    if iters >= 20:                                              # and the rows close to it
        np.testing.assert_allclose(comb.sum(2), 1.0, atol=1e-2)


@pytest.mark.parametrize("T,n,D", [(1, 1, 1), (3, 3, 7), (2, 4, 65), (5, 7, 9)])
def test_the_hyper_head_equals_its_scalar_reference_and_the_definition(T, n, D):
    X, fn, base, scale = _hc_case(T, n, D, True, T + n + D)
    rc, x, _, _ = _hc_pre(lib.pt_hc_pre, X, fn, base, scale, 1, 1)
    rc_ref, x_r, _, _ = _hc_pre(lib.pt_hc_pre_ref, X, fn, base, scale, 1, 1)
    assert rc == rc_ref == 0
    np.testing.assert_allclose(x, x_r, rtol=2e-5, atol=2e-6)
    X64 = X.astype(np.float64)
    pre = ref64.sigmoid(ref64.rms(X64.reshape(T, -1)) @ fn.T.astype(np.float64) * scale[0] + base) + 1e-6
    np.testing.assert_allclose(x_r, (pre[:, :, None] * X64).sum(1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("T,n,D", [(1, 1, 1), (3, 3, 7), (2, 4, 65), (5, 7, 9)])
def test_hc_post_equals_its_scalar_reference_and_the_definition(T, n, D):
    rng = np.random.default_rng(T * 7 + n * 3 + D)
    X = rng.standard_normal((T, n, D)).astype(np.float32)
    y = rng.standard_normal((T, D)).astype(np.float32)
    post = rng.random((T, n)).astype(np.float32) * 2
    comb = rng.random((T, n, n)).astype(np.float32)
    outs = []
    for f in (lib.pt_hc_post, lib.pt_hc_post_ref):
        out = np.zeros_like(X)
        assert f(_ptr(X), _ptr(y), _ptr(post), _ptr(comb), T, n, D, _ptr(out)) == 0
        outs.append(out)
    np.testing.assert_allclose(outs[0], outs[1], rtol=2e-5, atol=2e-6)
    want = post[:, :, None] * y[:, None, :] + np.einsum("sjk,sjd->skd", comb.astype(np.float64), X)
    np.testing.assert_allclose(outs[1], want, rtol=1e-5, atol=1e-6)


def test_hc_kernels_refuse_bad_arguments():
    X, fn, base, scale = _hc_case(2, 3, 5, False, 1)
    for f in (lib.pt_hc_pre, lib.pt_hc_pre_ref):
        assert _hc_pre(f, X, fn, base, scale, 0, 0)[0] == -1                     # no Sinkhorn round
        x = np.zeros((2, 5), np.float32)
        assert f(_ptr(X), _ptr(fn), _ptr(base), _ptr(scale), 2, 3, 5, 3, 1e-6, 1e-6, 0, _ptr(x), ffi.NULL,
                 ffi.NULL) == -1                                                   # a layer's weights need post / comb
        assert f(_ptr(X), _ptr(fn), _ptr(base), _ptr(scale), 2, 17, 5, 3, 1e-6, 1e-6, 1, _ptr(x), ffi.NULL,
                 ffi.NULL) == -1                                                   # more streams than HC_MAX
    y, post, comb = np.zeros((2, 5), np.float32), np.zeros((2, 3), np.float32), np.zeros((2, 3, 3), np.float32)
    for f in (lib.pt_hc_post, lib.pt_hc_post_ref):
        assert f(_ptr(X), _ptr(y), _ptr(post), _ptr(comb), 2, 3, 5, _ptr(X)) == -1   # in place


def _pool(f, kv, gate, ape, m, d, overlap, prev=None):
    n_win = len(kv) // m
    out = np.zeros((n_win, d), np.float32)
    pk, pg = (None, None) if prev is None else prev
    rc = f(_ptr(kv), _ptr(gate), _ptr(ape), n_win, m, d, overlap, _ptr(pk), _ptr(pg), _ptr(out))
    return rc, out


@pytest.mark.parametrize("overlap", [0, 1])
@pytest.mark.parametrize("n_win,m,d", [(1, 1, 1), (3, 4, 7), (5, 3, 33), (2, 8, 65), (4, 5, 9)])
def test_pool_equals_its_scalar_reference_and_the_definition_at_odd_sizes(n_win, m, d, overlap):
    rng = np.random.default_rng(n_win * 1000 + m * 100 + d + overlap)
    w = (2 if overlap else 1) * d
    kv, gate = (rng.standard_normal((n_win * m + 2, w)).astype(np.float32) for _ in range(2))   # 2 tokens left over
    gate *= 3
    ape = rng.standard_normal((m, w)).astype(np.float32)
    rc, got = _pool(lib.pt_dsv4_pool, kv, gate, ape, m, d, overlap)
    rc_ref, want = _pool(lib.pt_dsv4_pool_ref, kv, gate, ape, m, d, overlap)
    assert rc == rc_ref == 0
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(want, ref64.pool(kv.astype(np.float64), gate.astype(np.float64),
                                                ape.astype(np.float64), m, d, overlap), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("split", [1, 2, 3])
def test_pool_in_two_calls_with_the_kept_state_equals_one_call(split):
    """CSA's state across calls (a prefill then more tokens): the last pooled window's first d channels of kv and of
    gate + ape; the windows after it then pool exactly as in one call."""
    rng = np.random.default_rng(split)
    m, d, n_win = 4, 5, 4
    kv, gate = (rng.standard_normal((n_win * m, 2 * d)).astype(np.float32) for _ in range(2))
    ape = rng.standard_normal((m, 2 * d)).astype(np.float32)
    whole = _pool(lib.pt_dsv4_pool, kv, gate, ape, m, d, 1)[1]
    a = split * m
    first = _pool(lib.pt_dsv4_pool, kv[:a], gate[:a], ape, m, d, 1)[1]
    prev = (np.ascontiguousarray(kv[a - m:a, :d]), np.ascontiguousarray((gate[a - m:a] + ape)[:, :d]))
    for f in (lib.pt_dsv4_pool, lib.pt_dsv4_pool_ref):
        rc, second = _pool(f, np.ascontiguousarray(kv[a:]), np.ascontiguousarray(gate[a:]), ape, m, d, 1, prev)
        assert rc == 0
        np.testing.assert_allclose(np.concatenate([first, second]), whole, rtol=2e-5, atol=2e-6)
    # without the state the first window of the second call pools its own tokens only: not the same entry
    assert not np.allclose(_pool(lib.pt_dsv4_pool, np.ascontiguousarray(kv[a:]), np.ascontiguousarray(gate[a:]), ape,
                                 m, d, 1)[1][0], whole[split])


def test_pool_refuses_bad_arguments():
    kv = gate = np.zeros((8, 6), np.float32)
    ape = np.zeros((4, 6), np.float32)
    half = np.zeros((4, 3), np.float32)
    for f in (lib.pt_dsv4_pool, lib.pt_dsv4_pool_ref):
        assert _pool(f, kv, gate, ape, 4, 3, 2)[0] == -1                      # overlap is 0 or 1
        assert _pool(f, kv, gate, ape, 4, 3, 1, (half, None))[0] == -1        # prev kv without prev gate
        out = np.zeros((2, 3), np.float32)
        assert f(_ptr(kv), _ptr(gate), _ptr(ape), 2, 0, 3, 1, ffi.NULL, ffi.NULL, _ptr(out)) == -1   # m 0


@pytest.mark.parametrize("name", ["reference", "reference_long", "reference_chat"])
def test_the_csa_indexer_is_the_dsa_index_kernel_over_the_closed_windows(name):
    """V4's Lightning indexer scores the compressed entries as DeepSeek-V3.2's does its cached keys (sum over heads of
    w relu(q . k), scaled): kernels/dsa.c's pt_dsa_index, called for each query with pos0 the last closed window
    ((t + 1) // m - 1), chooses what the float64 definition does on the fixture's CSA layer, at every position of the
    three prompts (ties to the earlier entry in both)."""
    c, W = ref64.load(FOLDER)
    i = c["layer_types"].index("compressed_sparse_attention")
    p, m = f"model.layers.{i}.attn.", c["compress_rates"]["compressed_sparse_attention"]
    nh, d, rd, k = c["index_n_heads"], c["index_head_dim"], c["qk_rope_head_dim"], c["index_topk"]
    theta, eps = c["rope_parameters"]["compress"]["rope_theta"], c["rms_norm_eps"]
    ids = np.load(FOLDER / f"{name}.npz")["input_ids"]
    x = _attention_input(c, W, ids, i)
    qr = ref64.rms(x @ W[p + "wq_a.weight"].T, W[p + "q_norm.weight"], eps)
    S = len(ids)
    seen = np.arange(S // m)[None, :] < (np.arange(S)[:, None] + 1) // m
    want = ref64.indexer(x, qr, W, p + "indexer.", c, m, theta, seen)
    K = ref64.compress(x, W, p + "indexer.compressor.", m, d, True, theta, rd, eps).astype(np.float32)
    q = ref64.rope((qr @ W[p + "indexer.wq_b.weight"].T).reshape(S, nh, d), np.arange(S), theta, rd).astype(np.float32)
    w = (x @ W[p + "indexer.weights_proj.weight"].T).astype(np.float32)
    sel, n_sel = np.zeros(k, np.int32), np.zeros(1, np.int32)
    for t in range(S):
        got = np.zeros(len(K), bool)
        last = (t + 1) // m - 1
        if last >= 0:
            rc = lib.pt_dsa_index(_ptr(q[t:t + 1].copy()), _ptr(w[t:t + 1].copy()), ffi.from_buffer(K), ffi.NULL, 0,
                                  d, 0, len(K), 1, last, nh, d, d ** -0.5, nh ** -0.5, k,
                                  ffi.cast("int32_t *", ffi.from_buffer(sel)),
                                  ffi.cast("int32_t *", ffi.from_buffer(n_sel)))
            assert rc == 0
            got[sel[:n_sel[0]]] = True
        assert (got == want[t]).all(), (name, t, np.flatnonzero(got), np.flatnonzero(want[t]))


def _attention_input(c, W, ids, layer):
    """The normed block input of `layer`'s attention, running the float64 definition's layers before it."""
    n, eps, hce = c["hc_mult"], c["rms_norm_eps"], c["hc_eps"]
    X = np.repeat(W["model.embed_tokens.weight"][ids][:, None, :], n, 1)
    for i, kind in enumerate(c["layer_types"]):
        p = f"model.layers.{i}."
        for part in ("attn", "ffn"):
            x, post, comb = ref64.hyper(X, W[p + f"hc_{part}_fn"], W[p + f"hc_{part}_base"],
                                        W[p + f"hc_{part}_scale"], n, c["hc_sinkhorn_iters"], hce, eps)
            x = ref64.rms(x, W[p + f"{part}_norm.weight"], eps)
            if i == layer:
                return x
            y = (ref64.attention(x, W, p + "attn.", c, kind, len(ids)) if part == "attn"
                 else ref64.moe(x, W, p + "ffn.", c, c["mlp_layer_types"][i], ids))
            X = post[:, :, None] * y[:, None, :] + np.einsum("sjk,sjd->skd", comb, X)
    raise ValueError(layer)


def _i32(a):
    return ffi.cast("int32_t *", ffi.from_buffer(a)) if a is not None else ffi.NULL


def _attend(f, q, kv, C, m, sel, n_sel, pos0, window, scale, sinks):
    T, H, hd = q.shape
    out = np.zeros_like(q)
    cap = sel.shape[1] if sel is not None else 0
    rc = f(_ptr(q), _ptr(kv), len(kv), _ptr(C), 0 if C is None else len(C), m, _i32(sel), _i32(n_sel), cap, T, pos0,
           H, hd, window, scale, _ptr(sinks), _ptr(out))
    return rc, out


def _mask(T, pos0, n_ctx, window, n_c, m, sel, n_sel):
    p = pos0 + np.arange(T)[:, None]
    s = np.arange(n_ctx)[None, :]
    win = (s <= p) & (p - s < window)
    comp = np.zeros((T, n_c), bool)
    if m and sel is None:
        comp = np.arange(n_c)[None, :] < (p + 1) // m
    elif m:
        for t in range(T):
            comp[t, sel[t, :n_sel[t]]] = True
    return np.concatenate([win, comp], 1)


@pytest.mark.parametrize("mode", ["window", "hca", "csa"])
@pytest.mark.parametrize("T,pos0,H,hd,window,m", [(1, 0, 1, 1, 1, 2), (5, 3, 3, 7, 4, 3), (9, 0, 2, 33, 5, 4),
                                                   (3, 20, 5, 65, 8, 4)])
def test_dsv4_attention_equals_its_scalar_reference_and_the_definition_at_odd_sizes(mode, T, pos0, H, hd, window, m):
    rng = np.random.default_rng(T * 31 + pos0 + hd)
    n_ctx = pos0 + T
    q = rng.standard_normal((T, H, hd)).astype(np.float32)
    kv = rng.standard_normal((n_ctx, hd)).astype(np.float32)
    sinks = rng.standard_normal(H).astype(np.float32)
    n_c = n_ctx // m
    C = rng.standard_normal((max(n_c, 1), hd)).astype(np.float32) if mode != "window" else None
    sel = n_sel = None
    if mode == "csa":                           # a random choice of 2 among each query's closed windows
        sel, n_sel = np.zeros((T, 2), np.int32), np.zeros(T, np.int32)
        for t in range(T):
            closed = (pos0 + t + 1) // m
            pick = np.sort(rng.permutation(closed)[:2])
            sel[t, :len(pick)], n_sel[t] = pick, len(pick)
    mm = 0 if mode == "window" else m
    scale = hd ** -0.5
    rc, got = _attend(lib.pt_dsv4_attention, q, kv, C, mm, sel, n_sel, pos0, window, scale, sinks)
    rc_ref, want = _attend(lib.pt_dsv4_attention_ref, q, kv, C, mm, sel, n_sel, pos0, window, scale, sinks)
    assert rc == rc_ref == 0
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    keys = kv if C is None else np.concatenate([kv, C[:n_c]])
    mask = _mask(T, pos0, n_ctx, window, n_c if C is not None else 0, mm, sel, n_sel)
    np.testing.assert_allclose(want, ref64.attend(q.astype(np.float64), keys.astype(np.float64), mask,
                                                  sinks.astype(np.float64), scale), rtol=1e-5, atol=1e-6)


def test_dsv4_attention_token_by_token_equals_the_whole_prompt():
    rng = np.random.default_rng(7)
    T, H, hd, window, m = 13, 3, 9, 5, 4
    q = rng.standard_normal((T, H, hd)).astype(np.float32)
    kv = rng.standard_normal((T, hd)).astype(np.float32)
    C = rng.standard_normal((T // m, hd)).astype(np.float32)
    sinks = rng.standard_normal(H).astype(np.float32)
    whole = _attend(lib.pt_dsv4_attention, q, kv, C, m, None, None, 0, window, 0.3, sinks)[1]
    for t in range(T):
        rc, one = _attend(lib.pt_dsv4_attention, q[t:t + 1].copy(), kv[:t + 1].copy(), C, m, None, None, t, window,
                          0.3, sinks)
        assert rc == 0 and np.allclose(one[0], whole[t], rtol=1e-6, atol=1e-7), t


def test_dsv4_attention_refuses_bad_arguments():
    q, kv, sinks = np.zeros((2, 1, 3), np.float32), np.zeros((2, 3), np.float32), np.zeros(1, np.float32)
    C = np.zeros((1, 3), np.float32)
    for f in (lib.pt_dsv4_attention, lib.pt_dsv4_attention_ref):
        assert _attend(f, q, kv, None, 2, None, None, 0, 4, 1.0, sinks)[0] == -1         # entries without C
        assert _attend(f, q, kv, C, 1, None, None, 0, 4, 1.0, sinks)[0] == -1            # 2 closed windows, 1 entry
        sel, n_sel = np.array([[0], [0]], np.int32), np.array([1, 1], np.int32)
        assert _attend(f, q, kv, C, 2, sel, n_sel, 0, 4, 1.0, sinks)[0] == -1             # query 0: window 0 open
        assert _attend(f, q, kv, None, 0, None, None, 1, 4, 1.0, sinks)[0] == -1         # past the cache


@pytest.mark.parametrize("kind", ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"])
def test_dsv4_attention_on_the_fixture_equals_the_definition(kind):
    """Each fixture layer's attention core on the long prompt: q, the K = V rows and the compressed entries from the
    float64 definition, the CSA choice from pt_dsa_index; kernels/dsv4_attn.c then equals the definition's attend."""
    c, W = ref64.load(FOLDER)
    i = c["layer_types"].index(kind)
    p, eps, H, d, rd = f"model.layers.{i}.attn.", c["rms_norm_eps"], c["num_attention_heads"], c["head_dim"], \
        c["qk_rope_head_dim"]
    ids = np.load(FOLDER / "reference_long.npz")["input_ids"]
    S, x = len(ids), _attention_input(c, W, ids, i)
    theta = c["rope_parameters"]["main" if kind == "sliding_attention" else "compress"]["rope_theta"]
    pos = np.arange(S)
    qr = ref64.rms(x @ W[p + "wq_a.weight"].T, W[p + "q_norm.weight"], eps)
    q = ref64.rope(ref64.rms((qr @ W[p + "wq_b.weight"].T).reshape(S, H, d), eps=eps), pos, theta, rd)
    kv = ref64.rope(ref64.rms(x @ W[p + "wkv.weight"].T, W[p + "norm.weight"], eps), pos, theta, rd)
    m = c["compress_rates"].get(kind, 0)
    C, sel, n_sel = None, None, None
    keys, mask = kv, _mask(S, 0, S, c["sliding_window"], 0, 0, None, None)
    if m:
        C = ref64.compress(x, W, p + "compressor.", m, d, kind == "compressed_sparse_attention", theta, rd, eps)
        seen = np.arange(len(C))[None, :] < (pos[:, None] + 1) // m
        if kind == "compressed_sparse_attention":
            seen = seen & ref64.indexer(x, qr, W, p + "indexer.", c, m, theta, seen)
            k = c["index_topk"]
            sel, n_sel = np.zeros((S, k), np.int32), seen.sum(1).astype(np.int32)
            for t in range(S):
                sel[t, :n_sel[t]] = np.flatnonzero(seen[t])
        keys, mask = np.concatenate([kv, C]), np.concatenate([mask, seen], 1)
    want = ref64.attend(q, keys, mask, W[p + "attn_sink"], d ** -0.5)
    f32 = lambda a: None if a is None else np.ascontiguousarray(a, np.float32)  # noqa: E731
    rc, got = _attend(lib.pt_dsv4_attention, f32(q), f32(kv), f32(C), m, sel, n_sel, 0, c["sliding_window"],
                      d ** -0.5, f32(W[p + "attn_sink"]))
    assert rc == 0
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max(), float(np.abs(got - want).max())


def _moe_block(c, W, p, kind):
    from petit.models.blocks.moe import Moe
    from petit.native import Weight
    E, f = c["n_routed_experts"], lambda n: Weight.from_float(np.ascontiguousarray(W[n], np.float32), "f32")
    ex = [f"{p}experts.{e}." for e in range(E)]
    return Moe(router=f(p + "gate.weight"), gate=[f(q + "w1.weight") for q in ex], up=[f(q + "w3.weight") for q in ex],
               down=[f(q + "w2.weight") for q in ex], top_k=c["num_experts_per_tok"], norm_topk=True,
               shared=tuple(f(p + f"shared_experts.{w}.weight") for w in ("w1", "w3", "w2")),
               scoring="sqrtsoftplus", routed_scale=c["routed_scaling_factor"], norm_eps=1e-20,
               sel_bias=None, swiglu_limit=c["swiglu_limit"],
               tid2eid=W[p + "gate.tid2eid"].astype(np.int32) if kind == "hash_moe" else None)


@pytest.mark.parametrize("layer", [0, 1])
def test_moe_c_runs_v4s_hash_and_sqrtsoftplus_routing_with_the_clamp(layer):
    """kernels/moe.c with scoring 3 (sqrt(softplus)), experts forced by tid2eid (layer 0) or the top 2 (layer 1) and
    the SwiGLU clamp, on the fixture's MoE input of the long prompt: the float64 definition's output within 1e-5
    of its scale; and the clamp binds (the fixture's limit 2 is below the largest pre-activations)."""
    c, W = ref64.load(FOLDER)
    kind = c["mlp_layer_types"][layer]
    p = f"model.layers.{layer}.ffn."
    ids = np.load(FOLDER / "reference_long.npz")["input_ids"]
    x = _ffn_input(c, W, ids, layer)
    want = ref64.moe(x, W, p, c, kind, ids)
    moe = _moe_block(c, W, p, kind)
    T = len(ids)
    x32, y = np.ascontiguousarray(x, np.float32), np.zeros((T, x.shape[1]), np.float32)
    if kind == "hash_moe":
        moe.route_tokens(ids)
    assert moe.run(_ptr(x32), T, _ptr(y)) == 0
    assert np.abs(y - want).max() <= 1e-5 * np.abs(want).max(), float(np.abs(y - want).max())
    routed = moe.last_routing(T)
    if kind == "hash_moe":
        assert (routed == np.sort(W[p + "gate.tid2eid"][ids], 1)).all()
    assert np.abs(x @ W[p + "shared_experts.w1.weight"].T).max() > c["swiglu_limit"]
    no_clamp = ref64.moe(x, W, p, dict(c, swiglu_limit=1e9), kind, ids)
    assert np.abs(no_clamp - want).max() > 1e-3 * np.abs(want).max()


def test_hash_routing_refuses_tokens_outside_its_table():
    c, W = ref64.load(FOLDER)
    moe = _moe_block(c, W, "model.layers.0.ffn.", "hash_moe")
    with pytest.raises(ValueError, match="outside the hash table's 320 rows"):
        moe.route_tokens([3, 320])
    with pytest.raises(ValueError, match="routes by its router"):
        _moe_block(c, W, "model.layers.1.ffn.", "moe").route_tokens([3])


def _ffn_input(c, W, ids, layer):
    """The normed MLP input of `layer`, running the float64 definition up to it."""
    n, eps, hce = c["hc_mult"], c["rms_norm_eps"], c["hc_eps"]
    X = np.repeat(W["model.embed_tokens.weight"][ids][:, None, :], n, 1)
    for i, kind in enumerate(c["layer_types"]):
        p = f"model.layers.{i}."
        for part in ("attn", "ffn"):
            x, post, comb = ref64.hyper(X, W[p + f"hc_{part}_fn"], W[p + f"hc_{part}_base"],
                                        W[p + f"hc_{part}_scale"], n, c["hc_sinkhorn_iters"], hce, eps)
            x = ref64.rms(x, W[p + f"{part}_norm.weight"], eps)
            if i == layer and part == "ffn":
                return x
            y = (ref64.attention(x, W, p + "attn.", c, kind, len(ids)) if part == "attn"
                 else ref64.moe(x, W, p + "ffn.", c, c["mlp_layer_types"][i], ids))
            X = post[:, :, None] * y[:, None, :] + np.einsum("sjk,sjd->skd", comb, X)
    raise ValueError(layer)


# ---- the plan's per-sequence steps (kernels/dsv4_plan.c), over the cache regions, in steps of any size ----

def _table(theta, rd, n):
    """A RoPE table record over float32 cos / sin [n][rd / 2] (kept alive with it)."""
    ang = np.arange(n)[:, None] * theta ** (-np.arange(0, rd, 2) / rd)
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    t = ffi.new("pt_rope_table *")
    t.cos, t.sin, t.n_pos = _ptr(cos), _ptr(sin), n
    return t, (cos, sin)


@pytest.mark.parametrize("overlap", [0, 1])
@pytest.mark.parametrize("m,d,rd,splits", [(4, 13, 6, [1] * 9 + [6, 2]), (3, 7, 2, [5, 11, 1]), (8, 33, 8, [17])])
def test_pool_step_in_any_steps_equals_the_definitions_entries(m, d, rd, splits, overlap):
    """The raw rows stored per position and each window pooled when its last token comes: the entries of the
    float64 definition (pool, kv norm, rope at the window's first position), whatever the step sizes."""
    rng = np.random.default_rng(m * 100 + d + overlap)
    S, W, theta = sum(splits), (2 if overlap else 1) * d, 160000.0
    kv, gate = (rng.standard_normal((S, W)).astype(np.float32) for _ in range(2))
    ape, norm_w = rng.standard_normal((m, W)).astype(np.float32), (1 + rng.standard_normal(d) * 0.2).astype(np.float32)
    raw_kv, raw_gate, entries = np.zeros((S, W), np.float32), np.zeros((S, W), np.float32), np.zeros((S, d), np.float32)
    t, keep = _table(theta, rd, S)
    at = 0
    for n in splits:
        assert lib.pt_dsv4_pool_step(_ptr(kv[at:at + n].copy()), _ptr(gate[at:at + n].copy()), _ptr(ape),
                                     _ptr(norm_w), 1e-6, n, at, m, d, overlap, rd, t, _ptr(raw_kv), _ptr(raw_gate),
                                     _ptr(entries), S) == 0
        at += n
    want = ref64.pool(kv.astype(np.float64), gate.astype(np.float64), ape.astype(np.float64), m, d, overlap)
    want = ref64.rope(ref64.rms(want, norm_w.astype(np.float64)), np.arange(len(want)) * m, theta, rd)
    np.testing.assert_allclose(entries[:S // m], want, rtol=1e-4, atol=2e-5)
    assert not entries[S // m:].any()                  # no entry for the window still open
    t.n_pos = S - 1                                    # a table short of the step's last position
    assert lib.pt_dsv4_pool_step(_ptr(kv[:1].copy()), _ptr(gate[:1].copy()), _ptr(ape), _ptr(norm_w), 1e-6, 1,
                                 S - 1, m, d, overlap, rd, t, _ptr(raw_kv), _ptr(raw_gate), _ptr(entries), S) == -1


@pytest.mark.parametrize("T,pos0,H,hd,rd,window,m", [(1, 0, 1, 5, 2, 1, 0), (3, 17, 3, 9, 4, 4, 4),
                                                     (7, 6, 2, 16, 8, 5, 3), (1, 30, 5, 11, 6, 8, 8)])
def test_attend_step_equals_the_definition_with_its_ropes(T, pos0, H, hd, rd, window, m):
    """q and the new keys roped on their last rd values, the keys stored at their positions, attention over the
    window and every closed window's entry with sinks, the output's rope slice rotated back at minus its
    position: the float64 definition's attention (HCA's, or the window alone with m 0)."""
    rng = np.random.default_rng(T * 1000 + pos0 * 10 + H)
    n_ctx, theta = pos0 + T + 3, 10000.0
    q, kv = rng.standard_normal((T, H, hd)).astype(np.float32), rng.standard_normal((T, hd)).astype(np.float32)
    keys = np.zeros((n_ctx, hd), np.float32)
    keys[:pos0] = ref64.rope(rng.standard_normal((pos0, hd)), np.arange(pos0), theta, rd)
    entries = rng.standard_normal((n_ctx, hd)).astype(np.float32)
    sinks, out = rng.standard_normal(H).astype(np.float32), np.zeros((T, H, hd), np.float32)
    t, keep = _table(theta, rd, n_ctx)
    assert lib.pt_dsv4_attend_step(_ptr(q.copy()), _ptr(kv.copy()), _ptr(sinks), T, pos0, H, hd, rd, window,
                                   hd ** -0.5, m, ffi.NULL, ffi.NULL, 1, t, _ptr(keys), _ptr(entries) if m else
                                   ffi.NULL, n_ctx, _ptr(out)) == 0
    pos = pos0 + np.arange(T)
    np.testing.assert_allclose(keys[pos0:pos0 + T], ref64.rope(kv.astype(np.float64), pos, theta, rd), rtol=1e-5,
                               atol=1e-5)
    allk = keys[:pos0 + T].astype(np.float64)
    mask = (np.arange(pos0 + T)[None] <= pos[:, None]) & (pos[:, None] - np.arange(pos0 + T)[None] < window)
    if m:
        n_c = (pos0 + T) // m
        allk = np.concatenate([allk, entries[:n_c]])
        mask = np.concatenate([mask, np.arange(n_c)[None] < (pos[:, None] + 1) // m], 1)
    qr = ref64.rope(q.astype(np.float64), pos, theta, rd)
    want = ref64.rope(ref64.attend(qr, allk, mask, sinks.astype(np.float64), hd ** -0.5), pos, theta, rd, sign=-1.0)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("T,H,m,csa", [(1, 4, 4, False), (9, 3, 4, True), (6, 5, 0, False)])
def test_attend_step_runs_each_token_and_head_as_the_kernel_does(T, H, m, csa):
    """The step hands each (token, head) to the pool: without rope (rd 0) its output is pt_dsv4_attention's over the
    whole step, bit for bit (CSA: over each query's chosen entries)."""
    rng = np.random.default_rng(T * 10 + H)
    hd, pos0, window, cap = 7, 11, 6, 3
    n_ctx = pos0 + T
    q, kv = rng.standard_normal((T, H, hd)).astype(np.float32), rng.standard_normal((T, hd)).astype(np.float32)
    keys = rng.standard_normal((n_ctx, hd)).astype(np.float32)
    entries, sinks = rng.standard_normal((n_ctx, hd)).astype(np.float32), rng.standard_normal(H).astype(np.float32)
    sel, n_sel = np.zeros((T, cap), np.int32), np.zeros(T, np.int32)
    for t in range(T):
        n = min(cap, (pos0 + t + 1) // 4)
        sel[t, :n], n_sel[t] = rng.choice((pos0 + t + 1) // 4, n, replace=False), n
    s, ns = (_i32(sel), _i32(n_sel)) if csa else (ffi.NULL, ffi.NULL)
    t_, keep = _table(1e4, 2, n_ctx)
    got, want = np.zeros((T, H, hd), np.float32), np.zeros((T, H, hd), np.float32)
    assert lib.pt_dsv4_attend_step(_ptr(q.copy()), _ptr(kv), _ptr(sinks), T, pos0, H, hd, 0, window, 0.3, m, s, ns,
                                   cap, t_, _ptr(keys), _ptr(entries) if m else ffi.NULL, n_ctx, _ptr(got)) == 0
    assert lib.pt_dsv4_attention(_ptr(q), _ptr(keys), n_ctx, _ptr(entries) if m else ffi.NULL, n_ctx if m else 0, m,
                                 s, ns, cap, T, pos0, H, hd, window, 0.3, _ptr(sinks), _ptr(want)) == 0
    assert (got == want).all()


def test_hash_route_copies_each_tokens_experts_and_refuses_an_id_outside_its_table():
    table = np.arange(12, dtype=np.int32).reshape(6, 2)
    ids, forced = np.array([5, 0, 3], np.int32), np.zeros((3, 2), np.int32)
    i32 = lambda a: ffi.cast("int32_t *", ffi.from_buffer(a))          # noqa: E731
    assert lib.pt_hash_route(i32(ids), 3, i32(table), 6, 2, i32(forced)) == 0
    assert (forced == table[ids]).all()
    assert lib.pt_hash_route(i32(np.array([6], np.int32)), 1, i32(table), 6, 2, i32(forced)) == -2
