"""The moe_b group of issue 30 (tests/fixtures/hf5_moe_b: mixtures of experts transformers 5 added): what
tests/test_hf_parity.py (35-token prompt, greedy), test_moe.py (the routing-aware quantized bounds, routers float, a
decode step reading only the chosen experts), test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0) and the
app's chat test do not already hold for every hf5 fixture.

- (Parity at every position of the 140-token and chat prompts: tests/test_hf_parity.py, over every fixture.)
- The forward plan equals the per-op path bit for bit on these families' blocks (tests/test_plan.py's check).
- Each family's particulars: what it reads (the routing's selection bias, scale, renormalisation) and what it
  refuses by name.
"""
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit

from test_plan import CHUNKS, FRESH, _run
from models import load_strict as _load, rel_err

DIR = Path(__file__).parent / "fixtures" / "hf5_moe_b"
FOLDERS = {p.name: p for p in sorted(DIR.iterdir()) if (p / "reference.npz").is_file()}
CASES = sorted(FOLDERS)
F32_TOL = 1e-4


def _config(case: str) -> dict:
    return json.loads((FOLDERS[case] / "config.json").read_text())


def _variant(tmp_path, case, **change) -> Path:
    d = tmp_path / case
    shutil.copytree(FOLDERS[case], d)
    (d / "config.json").write_text(json.dumps(dict(_config(case), **change)))
    return d


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
@pytest.mark.parametrize("case", CASES)
def test_the_plan_equals_the_per_op_path(case, weights):
    """tests/test_plan.py's check, for the hybrid caches too (a list of per-layer states instead of one array)."""
    model = _load(FOLDERS[case], weights)
    for chunks in (CHUNKS, FRESH):
        got, c_plan = _run(model, chunks, "f32", oracle=False)
        want, c_oracle = _run(model, chunks, "f32", oracle=True)
        assert np.isfinite(want).all() and np.array_equal(got, want), chunks
        def states(c):
            return [*c.k, *c.v] if isinstance(c.k, list) else [c.k, c.v]
        assert all(np.array_equal(a, b) for a, b in zip(states(c_plan), states(c_oracle), strict=True))


# --- lfm2_moe ---

def test_lfm2_moe_reads_its_routing():
    """Layer 0 dense (num_dense_layers 1), the others experts on sigmoid scores with the expert_bias buffer as the
    selection bias, renormalised over sum + 1e-6 and scaled by 2.5; layers 1 and 3 attention, 0 and 2 convs."""
    net = _load(FOLDERS["lfm2_moe"]).net
    assert [L.moe is None for L in net.layers] == [True, False, False, False]
    assert [L.mamba is not None for L in net.layers] == [True, False, True, False]
    for L in net.layers[1:]:
        m = L.moe
        assert (m.scoring, m.routed_scale, m.norm_topk, m.norm_eps, m.top_k) == ("sigmoid", 2.5, True, 1e-6, 2)
        assert m.sel_bias is not None and np.abs(m.sel_bias.a).max() > 0.01


@pytest.mark.parametrize("change, changed", [
    ({"routed_scaling_factor": 1.0}, True), ({"norm_topk_prob": False}, True), ({"use_expert_bias": False}, True),
])
def test_lfm2_moe_routing_settings_change_the_logits(tmp_path, change, changed):
    """Each setting is read: switched off, the logits move away from transformers' (which the fixture holds)."""
    ref = np.load(FOLDERS["lfm2_moe"] / "reference.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # use_expert_bias false leaves expert_bias unused (reported)
        got = petit.load(_variant(tmp_path, "lfm2_moe", **change), weights="f32").logits(ref["input_ids"])
    assert (rel_err(got, ref["logits"]).max() > 1e-2) == changed


@pytest.mark.parametrize("change, message", [
    ({"layer_types": None}, r"layer_types must list 4 values of conv / full_attention \(lfm2_moe has no default\)"),
    ({"num_dense_layers": 5}, r"num_dense_layers must be an integer in \[0, 4\], got 5"),
    ({"conv_bias": True}, "conv_bias true is not supported by the lfm2_moe family"),
    ({"num_experts_per_tok": 9}, r"num_experts_per_tok \(9\) exceeds num_experts \(8\)"),
])
def test_lfm2_moe_refuses_what_it_cannot_run(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        petit.load(_variant(tmp_path, "lfm2_moe", **change), weights="f32")


def test_lfm2_moe_reads_liquidais_tie_embedding_key(tmp_path):
    cfg = _config("lfm2_moe")
    cfg["tie_embedding"] = cfg.pop("tie_word_embeddings")
    d = _variant(tmp_path, "lfm2_moe")
    (d / "config.json").write_text(json.dumps(cfg))
    ref = np.load(d / "reference.npz")
    assert rel_err(_load(d).logits(ref["input_ids"]), ref["logits"]).max() <= F32_TOL


# --- exaone_moe ---

def test_exaone_moe_reads_its_layers_and_routing():
    """Layers 0-2 slide with RoPE, layer 3 global without (NoPE); layer 0 dense; the others DeepSeek-V3's routing:
    sigmoid, e_score_correction_bias, the best 1 of 2 groups by their best two, x 2.5, a shared expert."""
    net = _load(FOLDERS["exaone_moe"]).net
    assert [L.window for L in net.layers] == [8, 8, 8, 0]
    assert [L.rope is None for L in net.layers] == [False, False, False, True]
    assert [L.moe is None for L in net.layers] == [True, False, False, False]
    for L in net.layers[1:]:
        m = L.moe
        assert (m.scoring, m.group_score, m.n_group, m.topk_group, m.routed_scale) == ("sigmoid", "top2_sum", 2, 1, 2.5)
        assert m.shared is not None and m.shared_gate is None and np.abs(m.sel_bias.a).max() > 0.01


def test_exaone_moe_reads_the_bias_under_the_routers_name_too(tmp_path):
    """`mlp.gate.e_score_correction_bias` (transformers' name in memory) as well as the Hub's `mlp.` one."""
    from test_dense5 import _rename_tensors
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["exaone_moe"], d)
    _rename_tensors(FOLDERS["exaone_moe"] / "model.safetensors", d / "model.safetensors",
                    lambda k: k.replace("mlp.e_score_correction_bias", "mlp.gate.e_score_correction_bias"))
    ref = np.load(d / "reference.npz")
    assert rel_err(_load(d).logits(ref["input_ids"]), ref["logits"]).max() <= F32_TOL


@pytest.mark.parametrize("change, message", [
    ({"n_group": 3}, r"8 experts in n_group 3 groups, topk_group 1: the groups must be equal"),
    ({"mlp_layer_types": ["dense", "moe", "sparse", "sparse"]}, "mlp_layer_types must list 4 values of dense / sparse"),
    ({"num_shared_experts": -1}, "num_shared_experts must be a non-negative integer"),
])
def test_exaone_moe_refuses_what_it_cannot_run(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        petit.load(_variant(tmp_path, "exaone_moe", **change), weights="f32")


# --- GGUF: llama.cpp's own conversions of these folders (tests/fixtures/gguf5_moe_b, its README says how) ---

GGUF = Path(__file__).parent / "fixtures" / "gguf5_moe_b"
GGUF_MANIFEST = json.loads((GGUF / "manifest.json").read_text())["cases"]
GGUF_READ = sorted(c for c in GGUF_MANIFEST if (GGUF / c / "q8_0.gguf").is_file())


def _gguf(case, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # read without any "ignoring ..." report
        return petit.load(GGUF / case / "q8_0.gguf", **kw)


def _scaled(got, exact):
    return np.abs(got - exact).max() / (exact.max() - exact.min())


def test_gguf_cases_are_the_families_llama_cpp_has():
    assert GGUF_READ == ["afmoe", "exaone_moe", "lfm2_moe", "minimax_m2", "nemotron_h_moe"]


@pytest.mark.parametrize("case", GGUF_READ)
def test_gguf_as_stored_is_as_close_as_llama_cpps_own_run(case):
    ref = np.load(GGUF / case / "q8_0.npz")
    model = _gguf(case)
    assert model.weight_type == "q8_0"
    err, theirs = _scaled(model.logits(ref["input_ids"]), ref["exact_logits"]), _scaled(ref["logits"],
                                                                                         ref["exact_logits"])
    assert err <= 1.5 * theirs, (err, theirs)
    assert all(L.moe.router.dtype == "f32" for L in model.net.layers if L.moe is not None)


def test_gguf_lfm2moe_runs_as_llama_cpp_reads_it():
    """The folder's layers, experts and selection bias; no routed_scaling_factor (llama.cpp reads none), so the file
    runs as llama.cpp runs it, not as the folder does."""
    net = _gguf("lfm2_moe", weights="f32").net
    folder = _load(FOLDERS["lfm2_moe"]).net
    assert [L.moe is None for L in net.layers] == [L.moe is None for L in folder.layers]
    for a, b in zip(net.layers[1:], folder.layers[1:]):
        assert a.moe.scoring == "sigmoid" and a.moe.routed_scale == 1.0 and b.moe.routed_scale == 2.5
        assert np.array_equal(a.moe.sel_bias.a, b.moe.sel_bias.a)


def test_gguf_exaone_moe_reads_the_pattern_and_the_groups():
    net = _gguf("exaone_moe", weights="f32").net
    assert [L.window for L in net.layers] == [8, 8, 8, 0]
    assert [L.rope is None for L in net.layers] == [False, False, False, True]
    m = net.layers[1].moe
    assert (m.n_group, m.topk_group, m.routed_scale, m.norm_topk, m.shared is not None) == (2, 1, 2.5, True, True)


@pytest.mark.parametrize("case", GGUF_READ)
def test_gguf_converts_to_a_petit_file_with_the_same_logits(tmp_path, case):
    from petit.cli import main
    ref = np.load(GGUF / case / "q8_0.npz")
    assert main(["convert", str(GGUF / case / "q8_0.gguf"), "-o", str(tmp_path / "m.petit"), "--f32"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = petit.load(tmp_path / "m.petit").logits(ref["input_ids"])
    assert _scaled(got, ref["exact_logits"]) <= 1e-5


# --- minimax_m2 ---

def test_minimax_m2_reads_its_attention_and_routing():
    net = _load(FOLDERS["minimax_m2"]).net
    for L in net.layers:
        assert L.rope.dim == 8 and L.q_norm.w.a.shape == (64,) and L.k_norm.w.a.shape == (32,)
        m = L.moe
        assert (m.scoring, m.norm_topk, m.routed_scale, m.shared, m.top_k) == ("sigmoid", True, 1.0, None, 2)
        assert np.abs(m.sel_bias.a).max() > 0.01


def test_minimax_m2_reads_the_released_rotary_dim(tmp_path):
    """MiniMax-M2's config.json says rotary_dim 64 of head_dim 128, not partial_rotary_factor: the same logits."""
    cfg = _config("minimax_m2")
    cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": 5000000.0}
    d = _variant(tmp_path, "minimax_m2", rope_parameters=cfg["rope_parameters"], rotary_dim=8)
    ref = np.load(d / "reference.npz")
    assert rel_err(_load(d).logits(ref["input_ids"]), ref["logits"]).max() <= F32_TOL
    with pytest.raises(ValueError, match="rotary_dim 17 must be a positive integer up to head_dim 16"):
        petit.load(_variant(tmp_path / "x", "minimax_m2", rotary_dim=17), weights="f32")


# --- flex_olmo ---

def test_flex_olmo_reads_olmo2s_block_over_olmoes_experts():
    net = _load(FOLDERS["flex_olmo"]).net
    for L in net.layers:
        assert L.attn_norm is None and L.mlp_norm is None and L.post_attn_norm is not None
        assert L.post_mlp_norm is not None and L.q_norm.w.a.shape == (64,)
        assert (L.moe.scoring, L.moe.norm_topk, L.moe.top_k, len(L.moe.gate)) == ("softmax", False, 2, 8)


def test_flex_olmo_refuses_what_it_cannot_run(tmp_path):
    with pytest.raises(ValueError, match="mlp_bias true is not supported by the flex_olmo family"):
        petit.load(_variant(tmp_path, "flex_olmo", mlp_bias=True), weights="f32")
    with pytest.raises(ValueError, match="clip_qkv 8.0 is not supported"):
        petit.load(_variant(tmp_path / "x", "flex_olmo", clip_qkv=8.0), weights="f32")


# --- nemotron_h with experts (Nemotron 3 Nano's E blocks) ---

def test_nemotron_h_reads_its_expert_blocks():
    net = _load(FOLDERS["nemotron_h_moe"]).net
    assert [L.moe is not None for L in net.layers] == [False, True, False, True]
    for L in (net.layers[1], net.layers[3]):
        m = L.moe
        assert m.plain and m.gate is None and m.shared[0] is None and m.act == "relu2"
        assert (m.scoring, m.group_score, m.n_group, m.topk_group, m.routed_scale) == ("sigmoid", "top2_sum", 2, 1, 2.5)
        assert np.abs(m.sel_bias.a).max() > 0.01


def test_nemotron_h_reads_a_folder_without_num_hidden_layers():
    """transformers 5.25 writes none for nemotron_h (its layers_block_type's length)."""
    assert "num_hidden_layers" not in _config("nemotron_h_moe")
    assert len(_load(FOLDERS["nemotron_h_moe"]).net.layers) == 4


@pytest.mark.parametrize("change, message", [
    ({"moe_latent_size": 16}, r"moe_latent_size 16 \(latent projections around the experts\) is not supported"),
    ({"n_group": 3}, "n_routed_experts 8 in n_group 3 groups"),
])
def test_nemotron_h_refuses_what_it_cannot_run(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        petit.load(_variant(tmp_path, "nemotron_h_moe", **change), weights="f32")


@pytest.mark.parametrize("dtype", ["f32", "q8_0"])
@pytest.mark.parametrize("T, E, k, D, F, S", [(1, 5, 2, 33, 17, 0), (7, 9, 3, 65, 31, 47), (13, 6, 1, 32, 96, 19)])
def test_plain_experts_kernel_equals_a_scalar_reference(T, E, k, D, F, S, dtype):
    """kernels/moe.c's plain experts (no gate: down(act(up x)), Nemotron-H) against numpy at odd sizes: the routing
    (sigmoid, a selection bias, renormalised, scaled), each chosen expert, a plain shared expert; at q8_0 against
    the dequantized matrices (the kernels round the activations to 8 bits too: a looser bound)."""
    from petit.models.blocks.decoder import Vec, fptr
    from petit.models.blocks.moe import Moe
    from petit.native import Weight, dequantize
    rng = np.random.default_rng(T * 100 + E)
    if dtype != "f32":                          # q8_0 rows are whole 32-value blocks: odd row counts only
        D, F, S = (-(-v // 32) * 32 for v in (D, F, S))

    def mat(r, c, dt):
        return Weight.from_float((rng.standard_normal((r, c)) / np.sqrt(c)).astype(np.float32), dt)

    def deq(w):
        return dequantize(np.asarray(w.raw), w.dtype, w.shape).astype(np.float64)

    def relu2_mlp(up, down, v):
        return deq(down) @ np.maximum(deq(up) @ v, 0.0) ** 2

    x = rng.standard_normal((T, D)).astype(np.float32)
    router = mat(E, D, "f32")
    ups, downs = [mat(F, D, dtype) for _ in range(E)], [mat(D, F, dtype) for _ in range(E)]
    shared = (None, mat(S, D, dtype), mat(D, S, dtype)) if S else None
    bias = (rng.standard_normal(E) * 0.1).astype(np.float32)
    m = Moe(router, None, ups, downs, k, True, "relu2", shared, plain=True)
    m.scoring, m.routed_scale, m.sel_bias = "sigmoid", 2.5, Vec(bias)
    y = np.zeros((T, D), np.float32)
    assert m.run(fptr(x), T, fptr(y)) == 0

    s = 1.0 / (1.0 + np.exp(-(x.astype(np.float64) @ deq(router).T)))
    want = np.zeros((T, D))
    for t in range(T):
        top = np.argsort(-(s[t] + bias), kind="stable")[:k]
        for e, w in zip(top, s[t, top] / s[t, top].sum() * 2.5):
            want[t] += w * relu2_mlp(ups[e], downs[e], x[t].astype(np.float64))
        if S:
            want[t] += relu2_mlp(shared[1], shared[2], x[t].astype(np.float64))
    tol = 1e-5 if dtype == "f32" else 3e-2
    assert np.abs(y - want).max() <= tol * np.abs(want).max()
    assert m.matrices_used == 2 * len(np.unique(m.last_routing(T))) + (2 if S else 0)


def test_gguf_nemotron_h_moe_reads_the_expert_blocks():
    net = _gguf("nemotron_h_moe", weights="f32").net
    folder = _load(FOLDERS["nemotron_h_moe"]).net
    assert [L.moe is not None for L in net.layers] == [False, True, False, True]
    for a, b in zip(net.layers, folder.layers):
        if a.moe is not None:
            assert a.moe.plain and (a.moe.n_group, a.moe.topk_group, a.moe.routed_scale) == (2, 1, 2.5)
            assert np.array_equal(a.moe.sel_bias.a, b.moe.sel_bias.a)


# --- afmoe ---

def test_afmoe_reads_its_blocks_and_routing():
    net = _load(FOLDERS["afmoe"]).net
    assert net.arch.embed_scale == 8.0                  # mup_enabled: sqrt(64)
    assert [L.window for L in net.layers] == [8, 0, 8]
    assert [L.rope is None for L in net.layers] == [False, True, False]
    assert [L.moe is None for L in net.layers] == [True, False, False]
    for L in net.layers:
        assert L.attn_gate is not None and None not in (L.attn_norm, L.post_attn_norm, L.mlp_norm, L.post_mlp_norm)
    m = net.layers[1].moe
    assert (m.scoring, m.norm_topk, m.routed_scale, m.shared is not None) == ("sigmoid", True, 2.5, True)


@pytest.mark.parametrize("change, message", [
    ({"attention_bias": True}, "attention_bias true is not supported by the afmoe family"),
    ({"num_dense_layers": -1}, "num_dense_layers must be a non-negative integer"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu' is not supported by the afmoe family"),
])
def test_afmoe_refuses_what_it_cannot_run(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        petit.load(_variant(tmp_path, "afmoe", **change), weights="f32")


def test_gguf_afmoe_runs_llama_cpps_sliding_pattern():
    """The file has no pattern key, so llama.cpp's 3 sliding : 1 full (all three layers sliding here), not the folder's
    1 : 1 (its logits are 0.31 of their range from transformers' for that); the rest as the folder's."""
    net = _gguf("afmoe", weights="f32").net
    assert [L.window for L in net.layers] == [8, 8, 8]
    assert [L.rope is None for L in net.layers] == [False, False, False]
    assert net.arch.embed_scale == 8.0 and all(L.attn_gate is not None for L in net.layers)
    m = net.layers[1].moe
    assert (m.scoring, m.norm_topk, m.routed_scale, m.shared is not None) == ("sigmoid", True, 2.5, True)


# --- minicpm5_moe ---

def test_minicpm5_moe_splits_the_query_and_its_gate():
    """q_gate_proj (written back as self_attn.q_proj, [heads x 2 x head_dim]) read as the query and the gate; the
    file's tensor is used whole (no row left unread)."""
    model = _load(FOLDERS["minicpm5_moe"])
    net = model.net
    assert all(L.attn_gate is not None and L.attn_gate.shape == (64, 64) and L.q.shape == (64, 64)
               for L in net.layers)
    assert [L.moe is None for L in net.layers] == [True, False, False]
    m = net.layers[1].moe
    assert (m.scoring, m.n_group, m.topk_group, m.routed_scale, m.shared is not None) == ("sigmoid", 2, 1, 3.66, True)


@pytest.mark.parametrize("change, message", [
    ({"use_gated_attention": False}, "use_gated_attention false is not supported by the minicpm5_moe family"),
    ({"attention_bias": True}, "attention_bias true is not supported by the minicpm5_moe family"),
])
def test_minicpm5_moe_refuses_what_it_cannot_run(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        petit.load(_variant(tmp_path, "minicpm5_moe", **change), weights="f32")


# --- lfm3 ---

def test_lfm3_reads_its_layers():
    """[conv, sliding, full, conv]; the per-head gate read as each row repeated head_dim times; the conv's output
    normed before its add (post_operator_norm); the full layer's proportional RoPE: 4 of 8 pairs turn."""
    from petit.models.families.hybrid.lfm3 import ProportionalRope
    net = _load(FOLDERS["lfm3"]).net
    assert [L.mamba is not None for L in net.layers] == [True, False, False, True]
    assert [L.window for L in net.layers] == [0, 8, 0, 0]
    assert net.layers[0].mixer_norm is not None and net.layers[3].mixer_norm is not None
    full, local = net.layers[2].rope, net.layers[1].rope
    assert isinstance(full, ProportionalRope) and not isinstance(local, ProportionalRope)
    inv, _ = full.inv_freq(8)
    assert inv.shape == (8,) and np.all(inv[:4] > 0) and np.all(inv[4:] == 0) and local.base == 1e4
    gate = np.asarray(net.layers[1].attn_gate.raw).view(np.float32).reshape(64, 64)
    assert all(np.array_equal(gate[h * 16], gate[h * 16 + j]) for h in range(4) for j in range(16))


@pytest.mark.parametrize("change, message", [
    ({"rope_parameters": {"full_attention": {"rope_type": "linear", "rope_theta": 1e6, "factor": 2.0},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}},
     "rope_parameters.full_attention rope_type 'linear' is not supported by the lfm3 family"),
    ({"conv_bias": True}, "conv_bias true is not supported by the lfm3 family"),
    ({"layer_types": ["conv", "mamba", "full_attention", "conv"]}, "layer_types must list 4 values"),
])
def test_lfm3_refuses_what_it_cannot_run(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        petit.load(_variant(tmp_path, "lfm3", **change), weights="f32")
