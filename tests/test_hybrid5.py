"""The hybrid group of issue 30 (tests/fixtures/hf5_hybrid: the state-space hybrids transformers 5 has natively):
what tests/test_hf_parity.py, test_verify_families.py and the app's chat test do not already hold for every hf5
fixture.

- Parity at every position of the 140-token prompt and the four-message chat (reference_long.npz,
  reference_chat.npz) in float32 within 1e-4 of each position's logit range, with the scan in its recurrent form
  and in its chunked form.
- The forward plan equals the per-op path bit for bit (tests/test_plan.py's check); token-by-token decode gives the
  prefill's logits.
- The session's cache reuse: a second turn reuses the first turn's tokens (a snapshot of the recurrent state at the
  turn's end) and answers as a fresh session would; a state goes back only to a snapshot.
- Each family's particulars (Bamba: the attention layers attn_layer_indices names, partial rotary, the gated norm per
  group, the time step limit written as transformers 5 writes infinity).
"""
import json
import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.generation.session import Params, Session
from petit.models.blocks.ssm import Mamba
from petit.native import ffi

from test_plan import CHUNKS, FRESH, _run
from models import load_strict as _load, rel_err

DIR = Path(__file__).parent / "fixtures" / "hf5_hybrid"
FOLDERS = {p.name: p for p in sorted(DIR.iterdir()) if (p / "reference.npz").is_file()}
CASES = sorted(FOLDERS)
F32_TOL = 1e-4


def _config(case: str) -> dict:
    return json.loads((FOLDERS[case] / "config.json").read_text())


@pytest.mark.parametrize("scan", ["recurrent", "chunked"])
@pytest.mark.parametrize("prompt", ["long", "chat"])
@pytest.mark.parametrize("case", CASES)
def test_long_and_chat_prompts_match_transformers_at_every_position(case, prompt, scan, monkeypatch):
    monkeypatch.setenv("PETIT_SCAN", scan)
    ref = np.load(FOLDERS[case] / f"reference_{prompt}.npz")
    assert len(ref["input_ids"]) >= (100 if prompt == "long" else 60)
    err = rel_err(_load(FOLDERS[case]).logits(ref["input_ids"]), ref["logits"])
    assert err.max() <= F32_TOL, f"{case} {prompt}: position {err.argmax()} off by {err.max():.2e} of the range"


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
@pytest.mark.parametrize("case", CASES)
def test_the_plan_equals_the_per_op_path(case, weights):
    """tests/test_plan.py's check on a hybrid cache: the logits and every layer's keys / values or conv / scan
    states, bit for bit, after a chunked prefill and decode steps."""
    model = _load(FOLDERS[case], weights)
    for chunks in (CHUNKS, FRESH):
        got, c_plan = _run(model, chunks, "f32", oracle=False)
        want, c_oracle = _run(model, chunks, "f32", oracle=True)
        assert np.isfinite(want).all() and np.array_equal(got, want), chunks
        for a, b in zip(c_plan.k + c_plan.v, c_oracle.k + c_oracle.v):
            assert np.array_equal(a, b), chunks


@pytest.mark.parametrize("case", CASES)
def test_decode_token_by_token_gives_the_prefills_logits(case):
    ref = np.load(FOLDERS[case] / "reference.npz")
    ids = ref["input_ids"].tolist()
    m = _load(FOLDERS[case])
    full = m.logits(ids)
    cache = m.new_cache(64)
    m.forward(ids[:10], cache)
    steps = [m.forward([t], cache) for t in ids[10:]]
    err = rel_err(np.array(steps), full[10:])
    assert err.max() <= 1e-5, f"{case}: position {10 + err.argmax()} off by {err.max():.2e}"


@pytest.mark.parametrize("case", CASES)
def test_a_second_turn_reuses_the_first_and_answers_as_a_fresh_session(case):
    m = _load(FOLDERS[case], "q8_0")
    s = Session(m, kv_type="f32")
    params = Params(max_tokens=6)                       # greedy
    messages = [{"role": "user", "content": "What is twelve plus seven?"}]
    first = list(s.reply(messages, params))
    reply = "".join(step.text for step in first)
    cached = len(s._cached)
    assert cached > 0 and s.cache.restorable(s.cache.pos) == s.cache.pos     # a snapshot at the turn's end
    messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "Say hello in French."}]
    second = list(s.reply(messages, params))
    fresh = list(Session(m, kv_type="f32", reuse_cache=False).reply(messages, params))
    assert second[-1].stats.reused_tokens > 0
    assert [x.text for x in second] == [x.text for x in fresh]


def test_bamba_reads_its_layout():
    cfg = _config("bamba")
    assert cfg["time_step_limit"] == [0.0, {"__float__": "Infinity"}]      # as transformers 5 writes infinity
    net = _load(FOLDERS["bamba"]).net
    attn = [i for i, L in enumerate(net.layers) if L.mamba is None]
    assert attn == cfg["attn_layer_indices"] == [1]
    assert net.layers[1].rope.dim == 8                   # half of each 16-wide head rotates
    mixers = [L.mamba for L in net.layers if L.mamba is not None]
    assert all(x.norm_groups == 2 and x.n_groups == 2 and x.dt_max == math.inf for x in mixers)


@pytest.mark.parametrize("change, message", [
    ({"attn_layer_indices": [4]}, r"attn_layer_indices must list layer indices below 4, got \[4\]"),
    ({"mamba_proj_bias": True}, "mamba_proj_bias true is not supported by the bamba family"),
    ({"mamba_n_heads": 6}, r"mamba_n_heads x mamba_d_head \(96\) must equal mamba_expand x hidden_size \(128\)"),
    ({"time_step_limit": [0.1]}, r"time_step_limit must be \[low, high\]"),
])
def test_bamba_refuses_what_it_cannot_run(tmp_path, change, message):
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["bamba"], d)
    (d / "config.json").write_text(json.dumps(dict(_config("bamba"), **change)))
    with pytest.raises(ValueError, match=message):
        petit.load(d, weights="f32")


def test_bamba_clamps_a_finite_time_step_limit(tmp_path):
    """A finite limit changes the logits (transformers clamps it over a prompt; its one-token decode step does not,
    so the fixture keeps the default): Petit clamps, in its prefill and its decode alike."""
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["bamba"], d)
    (d / "config.json").write_text(json.dumps(dict(_config("bamba"), time_step_limit=[0.0, 0.01])))
    ref = np.load(FOLDERS["bamba"] / "reference.npz")
    m = petit.load(d, weights="f32")
    got = m.logits(ref["input_ids"])
    assert rel_err(got, ref["logits"]).max() > 1e-2
    cache = m.new_cache(64)
    m.forward(ref["input_ids"][:-1].tolist(), cache)
    assert rel_err(m.forward(ref["input_ids"][-1:].tolist(), cache)[None], got[-1:]).max() <= 1e-5


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
def test_zamba2_holds_each_shared_block_once(weights):
    """Hybrid layers 1, 2 and 4 use blocks A, B, A (num_mem_blocks 2): the uses of A point at the same weights
    (nothing copied per use, quantized or not), each use has its own adapters and linear; every other layer keeps no
    KV rows."""
    m = _load(FOLDERS["zamba2"], weights)
    net = m.net
    uses = {i: L.shared for i, L in enumerate(net.layers) if L.shared is not None}
    assert sorted(uses) == _config("zamba2")["hybrid_layer_ids"] == [1, 2, 4]
    assert uses[1].block is uses[4].block is not uses[2].block
    assert uses[1].block.attn.q is uses[4].block.attn.q and uses[1].q_a is not uses[4].q_a
    assert len({id(u.linear) for u in uses.values()}) == 3
    # 5 mixers x (in_proj, out_proj), 2 blocks x 7, 3 uses x (linear, 3 x 2 attention adapters, the MLP's A and
    # its gate and up B), the tied head
    assert len(net.matrices()) == 5 * 2 + 2 * 7 + 3 * 10 + 1
    cache = m.new_cache(16)
    assert [a.shape for a in cache.k[:5]] == [(1,), (4, 16, 16), (4, 16, 16), (1,), (4, 16, 16)]


@pytest.mark.parametrize("change, message", [
    ({"add_bias_linear": True}, "add_bias_linear true is not supported by the zamba2 family"),
    ({"layers_block_type": ["mamba", "hybrid"]}, "layers_block_type must list 5 values"),
    ({"hybrid_layer_ids": [1, 2]}, r"hybrid_layer_ids \[1, 2\] is not what Zamba2 derives"),
    ({"num_key_value_heads": 2}, "use_shared_attention_adapter needs num_key_value_heads equal to"),
    ({"hidden_act": "xielu"}, "hidden_act 'xielu' is not supported by the zamba2 family"),
])
def test_zamba2_refuses_what_it_cannot_run(tmp_path, change, message):
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["zamba2"], d)
    (d / "config.json").write_text(json.dumps(dict(_config("zamba2"), **change)))
    with pytest.raises(ValueError, match=message):
        petit.load(d, weights="f32")


def test_zamba2_legacy_layer_names_read_the_same(tmp_path):
    """transformers 4's "mamba" for "linear_attention" (Zyphra's released configs): the same model."""
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["zamba2"], d)
    cfg = _config("zamba2")
    cfg["layers_block_type"] = ["mamba" if t == "linear_attention" else t for t in cfg["layers_block_type"]]
    (d / "config.json").write_text(json.dumps(cfg))
    ref = np.load(d / "reference.npz")
    assert rel_err(_load(d).logits(ref["input_ids"]), ref["logits"]).max() <= F32_TOL


# --- GGUF: llama.cpp's own conversion of the bamba folder (tests/fixtures/gguf5_hybrid, its README says how) ---

GGUF = Path(__file__).parent / "fixtures" / "gguf5_hybrid"
GGUF_MANIFEST = json.loads((GGUF / "manifest.json").read_text())["cases"]
GGUF_READ = ["bamba"]


def _gguf(case, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # read without any "ignoring ..." report
        return petit.load(GGUF / case / "q8_0.gguf", **kw)


def _scaled(got, exact):
    return np.abs(got - exact).max() / (exact.max() - exact.min())


@pytest.mark.parametrize("case", GGUF_READ)
def test_gguf_as_stored_is_as_close_as_llama_cpps_own_run(case):
    ref = np.load(GGUF / case / "q8_0.npz")
    model = _gguf(case)
    assert model.weight_type == "q8_0"
    err, theirs = _scaled(model.logits(ref["input_ids"]), ref["exact_logits"]), _scaled(ref["logits"],
                                                                                         ref["exact_logits"])
    assert err <= 1.5 * theirs, (err, theirs)


def test_gguf_bamba_is_read_as_the_file_says():
    """llama.cpp's converter writes Bamba as granitehybrid with RoPE over the whole head (it has no key for
    BambaConfig's hard-coded half): Petit follows the file, i.e. llama.cpp's model, not transformers'."""
    model = _gguf("bamba", weights="f32")
    net, folder = model.net, _load(FOLDERS["bamba"]).net
    assert model.config.model_type == "bamba" and model.config.attn_layer_indices == [1]
    assert net.layers[1].rope.dim == 16 and net.layers[1].rope.interleaved and folder.layers[1].rope.dim == 8
    assert all(L.mamba.norm_groups == 2 for L in net.layers if L.mamba is not None)
    assert GGUF_MANIFEST["bamba"]["files"]["f32.gguf"]["exact_vs_transformers"]["rel"] > 0.1


@pytest.mark.parametrize("case", GGUF_READ)
def test_gguf_converts_to_a_petit_file_with_the_same_logits(tmp_path, case):
    from petit.cli import main
    from trainer.reference import Reference
    ref = np.load(GGUF / case / "q8_0.npz")
    assert main(["convert", str(GGUF / case / "q8_0.gguf"), "-o", str(tmp_path / "m.petit"), "--f32"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = petit.load(tmp_path / "m.petit").logits(ref["input_ids"])
    assert _scaled(got, ref["exact_logits"]) <= 1e-5
    # the float64 reference models the file too (the whole-head rotation on pairs)
    assert _scaled(Reference(tmp_path / "m.petit").logits(ref["input_ids"]), ref["exact_logits"]) <= 1e-5


def test_olmo_hybrid_reads_its_layout():
    """The Hub's names (attention_layer_norm, feedforward_layer_norm, q / k / v_conv1d: transformers renames them when
    it loads) joined and renamed when read; beta doubled (allow_neg_eigval); the attention layer post-normed with
    its q / k norms over the whole projection and no RoPE (rope_theta null)."""
    cfg = _config("olmo_hybrid")
    assert cfg["rope_parameters"]["rope_theta"] is None
    model = _load(FOLDERS["olmo_hybrid"])
    net = model.net
    assert model.config.use_rope is False and net.layers[1].rope is None
    assert [L.mamba is not None for L in net.layers] == [True, False, True, True]
    assert all(L.mamba.beta_scale == 2.0 and L.mamba.eps == 1e-5 for L in net.layers if L.mamba is not None)
    att = net.layers[1]
    assert att.attn_norm is None and att.post_attn_norm is not None and att.post_mlp_norm is not None
    assert not net.arch.qk_norm_per_head


def test_olmo_hybrid_without_neg_eigval_or_with_rope_is_another_model(tmp_path):
    """linear_allow_neg_eigval false (beta = sigmoid(b)) and a rope_theta each change the logits."""
    ref = np.load(FOLDERS["olmo_hybrid"] / "reference.npz")
    base = _load(FOLDERS["olmo_hybrid"]).logits(ref["input_ids"])
    for change in ({"linear_allow_neg_eigval": False}, {"rope_parameters": {"rope_type": "default",
                                                                            "rope_theta": 10000.0}}):
        d = tmp_path / str(len(list(tmp_path.iterdir())))
        shutil.copytree(FOLDERS["olmo_hybrid"], d)
        (d / "config.json").write_text(json.dumps(dict(_config("olmo_hybrid"), **change)))
        assert rel_err(_load(d).logits(ref["input_ids"]), base).max() > 1e-2, change


@pytest.mark.parametrize("change, message", [
    ({"linear_num_value_heads": 8}, "linear_num_key_heads 4 differs from linear_num_value_heads 8"),
    ({"attention_bias": True}, "attention_bias true is not supported by the olmo_hybrid family"),
    ({"layer_types": ["linear_attention"] * 3}, "layer_types must list 4 values"),
])
def test_olmo_hybrid_refuses_what_it_cannot_run(tmp_path, change, message):
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["olmo_hybrid"], d)
    (d / "config.json").write_text(json.dumps(dict(_config("olmo_hybrid"), **change)))
    with pytest.raises(ValueError, match=message):
        petit.load(d, weights="f32")


@pytest.mark.parametrize("T", [1, 7, 19])
def test_the_delta_rules_beta_scale_against_float64(T):
    """kernels/deltanet.c with pt_mamba.beta_scale 2 (OLMo Hybrid) at odd sizes, both scan forms, carried across
    calls, against test_ssm's float64 Gated DeltaNet with beta doubled."""
    from petit.native import Weight

    from test_ssm import _deltanet_f64
    rng = np.random.default_rng(T)
    D, Hk, Hv, dk, dv, K = 24, 3, 3, 5, 7, 3
    kd, vd = Hk * dk, Hv * dv
    cw = 2 * kd + vd
    p = {"in_proj": rng.normal(0, 0.4, (2 * kd + 2 * vd + 2 * Hv, D)), "conv_w": rng.normal(0, 0.5, (cw, K)),
         "A": -np.exp(rng.uniform(-1, 1, Hv)), "dt_bias": rng.normal(0, 0.5, Hv), "norm_w": rng.normal(1, 0.2, dv),
         "out_proj": rng.normal(0, 0.4, (D, vd))}
    x = rng.normal(0, 1, (2 * T, D))

    def f32(a):
        a = np.ascontiguousarray(a, np.float32)
        return Weight(a.view(np.uint8).reshape(a.shape[0], -1), "f32", a.shape)
    for scan in ("recurrent", "chunked"):
        m = Mamba(f32(p["in_proj"]), p["conv_w"].astype(np.float32), None, None, None,
                  p["dt_bias"].astype(np.float32), p["A"].astype(np.float32), np.zeros(Hv, np.float32),
                  f32(p["out_proj"]), dk, K, 1, eps=1e-5, version=4, n_heads=Hv, n_groups=Hk,
                  norm_w=p["norm_w"].astype(np.float32), beta_scale=2.0, scan=scan)
        conv = np.zeros(m.state_shapes[0], np.float32)
        S = np.zeros(m.state_shapes[1], np.float32)
        c64, S64 = conv.astype(np.float64), S.astype(np.float64)
        for part in (x[:T], x[T:]):                         # two calls: the state carried
            y = np.zeros((T, D), np.float32)
            xs = np.ascontiguousarray(part, np.float32)
            assert m.run(ffi.cast("float *", ffi.from_buffer(xs)), T, ffi.cast("float *", ffi.from_buffer(conv)),
                         ffi.cast("float *", ffi.from_buffer(S)), ffi.cast("float *", ffi.from_buffer(y))) == 0
            want, c64, S64 = _deltanet_f64(dict(p, beta_scale=2.0), part, c64, S64, Hk, Hv, dk, dv, 1e-5)
            np.testing.assert_allclose(y, want, rtol=0, atol=2e-4 * np.abs(want).max(), err_msg=scan)


def test_minimax_runs_lightning_attention_as_the_ssd_scan():
    """The lightning layers are Mamba-2 mixers with the time step clamped to 1, A = -slope, one group per head, no
    D, the norm then a sigmoid gate (pt_mamba norm_mode 3); the rates are those the file holds; DeepNorm's alpha per
    layer, the streams' norms after each add (the next layer's input_layernorm after the MoE's)."""
    cfg = _config("minimax")
    net = _load(FOLDERS["minimax"]).net
    kinds = ["linear_attention" if L.mamba is not None else "full_attention" for L in net.layers]
    assert kinds == cfg["layer_types"] == ["full_attention", "linear_attention"] * 2
    for i, L in enumerate(net.layers):
        assert L.resid_alpha == (1.68, 1.68) and L.resid_attn_norm is not None
        assert (L.resid_mlp_norm is None) == (i == 3)
        if L.mamba is not None:
            m = L.mamba
            assert (m.dt_min, m.dt_max, m.norm_mode, m.n_groups, m.n_heads) == (1.0, 1.0, 3, 4, 4)
            assert not m.D.any() and np.allclose(-m.A, petit.models.families.hybrid.minimax.slopes(net_cfg := _load(
                FOLDERS["minimax"]).config, i)) and net_cfg.block_size == 16
    assert net.embed_norm is not None


def test_minimax_lightning_against_float64_at_odd_sizes():
    """The mixer (kernels/ssm.c, its SSD scan in both forms) against the lightning recurrence in float64 over
    odd sizes, carried across two calls."""
    from petit.native import Weight
    for T, H, hd, D in ((1, 3, 5, 12), (7, 2, 9, 20), (19, 5, 3, 16)):
        rng = np.random.default_rng(T)
        di = H * hd
        Wq = rng.normal(0, 0.5, (3 * di, D))              # rows [q_h | k_h | v_h] per head, as qkv_proj's
        Wg, Wo, nw = rng.normal(0, 0.5, (di, D)), rng.normal(0, 0.5, (D, di)), rng.normal(1, 0.2, di)
        s = rng.uniform(0.05, 0.9, H)
        w = Wq.reshape(H, 3, hd, D)
        inp = np.concatenate([Wg, w[:, 2].reshape(-1, D), w[:, 1].reshape(-1, D), w[:, 0].reshape(-1, D),
                              np.zeros((H, D))]).astype(np.float32)

        def f32(a):
            a = np.ascontiguousarray(a, np.float32)
            return Weight(a.view(np.uint8).reshape(a.shape[0], -1), "f32", a.shape)
        conv_w = np.zeros((3 * di, 2), np.float32)
        conv_w[:, 1] = 1
        x = rng.normal(0, 1, (2 * T, D))
        for scan in ("recurrent", "chunked"):
            m = Mamba(f32(inp), conv_w, None, None, None, np.zeros(H, np.float32), -s.astype(np.float32),
                      np.zeros(H, np.float32), f32(Wo), hd, 2, 1, eps=1e-6, version=2, n_heads=H, n_groups=H,
                      norm_w=nw.astype(np.float32), dt_min=1.0, dt_max=1.0, norm_mode=3, scan=scan)
            conv = np.zeros(m.state_shapes[0], np.float32)
            st = np.zeros(m.state_shapes[1], np.float32)
            S = np.zeros((H, hd, hd))
            for part in (x[:T], x[T:]):
                y = np.zeros((T, D), np.float32)
                xs = np.ascontiguousarray(part, np.float32)
                assert m.run(ffi.cast("float *", ffi.from_buffer(xs)), T, ffi.cast("float *", ffi.from_buffer(conv)),
                             ffi.cast("float *", ffi.from_buffer(st)), ffi.cast("float *", ffi.from_buffer(y))) == 0
                qkv = part @ Wq.T
                qkv = (qkv / (1 + np.exp(-qkv))).reshape(T, H, 3, hd)
                o = np.empty((T, H, hd))
                for t in range(T):
                    S = np.exp(-s)[:, None, None] * S + qkv[t, :, 1, :, None] * qkv[t, :, 2, None, :]
                    o[t] = np.einsum("hi,hij->hj", qkv[t, :, 0], S)
                o = o.reshape(T, di)
                o = o / np.sqrt((o * o).mean(-1, keepdims=True) + 1e-6) * nw
                g = part @ Wg.T
                want = (o / (1 + np.exp(-g))) @ Wo.T
                np.testing.assert_allclose(y, want, rtol=0, atol=2e-4 * np.abs(want).max(), err_msg=f"{scan} {T}")


@pytest.mark.parametrize("change, message", [
    ({"layer_types": ["full_attention"] * 3}, "layer_types must list 4 values"),
    ({"mlp_alpha_factor": "big"}, "mlp_alpha_factor must be a number"),
    ({"hidden_act": "xielu"}, "hidden_act 'xielu' is not supported by the minimax family"),
])
def test_minimax_refuses_what_it_cannot_run(tmp_path, change, message):
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["minimax"], d)
    (d / "config.json").write_text(json.dumps(dict(_config("minimax"), **change)))
    with pytest.raises(ValueError, match=message):
        petit.load(d, weights="f32")


def _kda_f64(p, x, conv, S, H, dk, eps, lower_bound=0.0):
    """Kimi Delta Attention in float64 (transformers' recurrent_kimi_delta_attention with its conv, l2norm, forget
    gate and sigmoid-gated norm) from a state (conv [3 H dk, K-1], S [H, dk, dk]); in_proj rows q | k | v | g | b | f.
    lower_bound < 0: Ling 3's bounded forget gate lower_bound sigmoid(exp(A_log) (f + dt_bias)) (issue 36, fam36m)."""
    T, w = len(x), H * dk
    zx = x @ p["in_proj"].T
    qkv, g_out, b, f = zx[:, :3 * w], zx[:, 3 * w:4 * w], zx[:, 4 * w:4 * w + H], zx[:, 4 * w + H:]
    K = p["conv_w"].shape[1]
    hist = np.concatenate([conv.T, qkv], axis=0)
    u = np.stack([(hist[t:t + K] * p["conv_w"].T).sum(0) for t in range(T)])
    u = u / (1 + np.exp(-u))
    q, k, v = (u[:, j * w:(j + 1) * w].reshape(T, H, dk) for j in range(3))
    q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6) / np.sqrt(dk)
    k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    beta = 1 / (1 + np.exp(-b))
    g = p["A"][:, None] * np.logaddexp(0, f + p["dt_bias"]).reshape(T, H, dk)
    if lower_bound < 0:
        g = lower_bound / (1 + np.exp(p["A"][:, None] * (f + p["dt_bias"]).reshape(T, H, dk)))
    o = np.empty((T, H, dk))
    for t in range(T):
        S = S * np.exp(g[t])[:, :, None]
        delta = (v[t] - np.einsum("hij,hi->hj", S, k[t])) * beta[t][:, None]
        S = S + k[t][:, :, None] * delta[:, None, :]
        o[t] = np.einsum("hij,hi->hj", S, q[t])
    o = o / np.sqrt((o * o).mean(-1, keepdims=True) + eps) * p["norm_w"]
    o = o.reshape(T, w) / (1 + np.exp(-g_out))
    return o @ p["out_proj"].T, hist[-(K - 1):].T, S


@pytest.mark.parametrize("T, lower_bound", [(1, 0.0), (7, 0.0), (19, 0.0), (5, -5.0), (13, -2.0)])
def test_kimi_delta_attention_against_float64(T, lower_bound):
    """kernels/deltanet.c's kda_head (pt_mamba.kda) at odd sizes, carried across two calls, against float64; and with
    Ling 3's bounded forget gate (pt_mamba.kda_lower_bound, issue 36 fam36m)."""
    from petit.native import Weight
    rng = np.random.default_rng(T + 100)
    D, H, dk, K = 22, 3, 5, 3
    w = H * dk
    p = {"in_proj": rng.normal(0, 0.4, (4 * w + H + w, D)), "conv_w": rng.normal(0, 0.5, (3 * w, K)),
         "A": -np.exp(rng.uniform(-1, 1, H)), "dt_bias": rng.normal(0, 0.5, w), "norm_w": rng.normal(1, 0.2, dk),
         "out_proj": rng.normal(0, 0.4, (D, w))}

    def f32(a):
        a = np.ascontiguousarray(a, np.float32)
        return Weight(a.view(np.uint8).reshape(a.shape[0], -1), "f32", a.shape)
    m = Mamba(f32(p["in_proj"]), p["conv_w"].astype(np.float32), None, None, None, p["dt_bias"].astype(np.float32),
              p["A"].astype(np.float32), np.zeros(H, np.float32), f32(p["out_proj"]), dk, K, 1, eps=1e-5, version=4,
              n_heads=H, n_groups=H, norm_w=p["norm_w"].astype(np.float32), kda=1, kda_lower_bound=lower_bound)
    conv, S = np.zeros(m.state_shapes[0], np.float32), np.zeros(m.state_shapes[1], np.float32)
    c64, S64 = conv.astype(np.float64), S.astype(np.float64)
    x = rng.normal(0, 1, (2 * T, D))
    for part in (x[:T], x[T:]):
        y = np.zeros((T, D), np.float32)
        xs = np.ascontiguousarray(part, np.float32)
        assert m.run(ffi.cast("float *", ffi.from_buffer(xs)), T, ffi.cast("float *", ffi.from_buffer(conv)),
                     ffi.cast("float *", ffi.from_buffer(S)), ffi.cast("float *", ffi.from_buffer(y))) == 0
        want, c64, S64 = _kda_f64(p, part, c64, S64, H, dk, 1e-5, lower_bound)
        np.testing.assert_allclose(y, want, rtol=0, atol=2e-4 * np.abs(want).max())
        np.testing.assert_allclose(S, S64, rtol=0, atol=2e-4 * np.abs(S64).max())


def test_kimi_linear_reads_its_layout():
    """The Hub's names (block_sparse_moe for every MLP, q / k / v_conv1d, the forget gate's low-rank f_a / f_b and the
    output gate's g_a / g_b joined into in_proj); the latent attention rotates nothing."""
    net = _load(FOLDERS["kimi_linear"]).net
    assert [L.mamba is not None for L in net.layers] == [True, False, True, True]
    assert all(L.mamba.kda == 1 for L in net.layers if L.mamba is not None)
    assert net.layers[1].mla is not None and net.layers[1].rope is None
    assert net.layers[0].moe is None and all(L.moe is not None for L in net.layers[1:])
    assert all(L.moe.scoring == "sigmoid" and L.moe.routed_scale == 2.446 for L in net.layers[1:])


def test_kimi_linear_reads_the_hubs_dense_mlp_name(tmp_path):
    """The Hub's checkpoints name the first layer's dense MLP `mlp.*` (llama.cpp's converter expects it so); transformers
    5.25 writes it back under `block_sparse_moe.*` (its conversion mapping renames every layer's): both read the same."""
    from test_dense5 import _rename_tensors
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["kimi_linear"], d)
    _rename_tensors(FOLDERS["kimi_linear"] / "model.safetensors", d / "model.safetensors",
                    lambda k: k.replace("layers.0.block_sparse_moe.", "layers.0.mlp."))
    ref = np.load(d / "reference.npz")
    model = _load(d)
    assert "model.layers.0.mlp.gate_proj.weight" in model.tensors
    assert rel_err(model.logits(ref["input_ids"]), ref["logits"]).max() <= F32_TOL


def test_kimi_linear_reads_the_hubs_config_spelling(tmp_path):
    """Moonshot's config.json spells the KDA sizes and the layer kinds in `linear_attn_config` (1-indexed layer lists)
    and uses KimiLinearConfig's other names (num_local_experts, n_shared_experts, ...): the same model, no warning."""
    cfg = _config("kimi_linear")
    hub = {k: v for k, v in cfg.items() if k not in ("layer_types", "mlp_layer_types", "linear_head_dim",
                                                     "linear_num_heads", "linear_conv_kernel_dim", "num_experts",
                                                     "num_shared_experts", "num_experts_per_token")}
    hub.update(linear_attn_config={"full_attn_layers": [2], "kda_layers": [1, 3, 4], "head_dim": 16, "num_heads": 4,
                                   "short_conv_kernel_size": 4},
               first_k_dense_replace=1, num_local_experts=4, n_shared_experts=1, num_experts_per_tok=2)
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["kimi_linear"], d)
    (d / "config.json").write_text(json.dumps(hub))
    ref = np.load(d / "reference.npz")
    assert rel_err(_load(d).logits(ref["input_ids"]), ref["logits"]).max() <= F32_TOL
    hub["num_experts"] = 8
    (d / "config.json").write_text(json.dumps(hub))
    with pytest.raises(ValueError, match="num_local_experts 4 and num_experts 8 .the same setting. differ"):
        petit.load(d, weights="f32")
