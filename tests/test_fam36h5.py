"""The fam36h group of issue 36 (tests/fixtures/hf5_fam36h, made by transformers 5.25): Hy3 (hy_v3), Dory and Ergo.
What tests/test_hf_parity.py (every position of the 35 / 140-token and chat prompts, the greedy continuation),
test_moe.py (routing-aware quantized bounds), test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0) and
test_ctx_shift.py do not already hold:

- The one-call plan equals the per-op path bit for bit (f32 and q8_0 weights, float32 and int8 caches).
- Hy3: what the family reads (per-head q / k norms, biases, the dense first layer, sigmoid + bias routing x
  router_scaling_factor over the sum + 1e-20, the ungated shared expert), the names transformers saves and its
  modules' read the same, its defaults (mlp_layer_types, num_local_experts, the shared width) and refusals by name.
- Dory: the loops unrolled into layers sharing weights (each pass its own cache rows), the three tensor layouts
  transformers reads (released two-block, what its save_pretrained writes, its modules') and both config layouts
  giving the same model, other section layouts (no input section, no recurrent layer, three passes) within 1e-5 of
  the float64 reference, the refusals by name.
- Ergo: kernels/moe.c's per-expert output norms (pt_moe.post_norm, sh_post_norm) against a float64 reference at odd
  sizes; what the family reads (gated residuals, NoPE full layers scaled by global_attention_scale, plain relu^2
  experts), the released names and its modules' read the same, the config's aliases, reports and refusals.
- A converted `.petit` file of each (f32, q8_0) reloads and runs the same numbers.
"""
import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from petit.models.families.moe import ergo, hy_v3

from petit.models.families.dense import dory, dory_config
from petit.models.blocks.decoder import Vec
from petit.models.families.moe.ergo_names import RENAMES, TRANSPOSED
from petit.models.blocks.moe import Moe
from petit.native import ffi
from models import load_strict as _load
from test_fam36e5 import _f32
from test_moe_a5 import _read_safetensors, _write_safetensors
from test_plan import _assert_same

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36h"
HY, DORY, ERGO = DIR / "hy_v3", DIR / "dory", DIR / "ergo"
FOLDERS = pytest.mark.parametrize("folder", [HY, DORY, ERGO], ids=["hy_v3", "dory", "ergo"])


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
@FOLDERS
def test_a_converted_file_is_the_model_it_was_converted_from(tmp_path, folder, weights):
    """`petit convert` writes what the loaded model runs on (the families' own readings of the released names, the
    split experts, Dory's unrolled layers' one copy of each tensor): loaded back, every logit the same."""
    from petit.loading.convert import convert
    convert(folder, tmp_path / "m.petit", weights).close()
    ids = np.load(folder / "reference_chat.npz")["input_ids"]
    np.testing.assert_array_equal(_load(tmp_path / "m.petit", weights).logits(ids), _load(folder, weights).logits(ids))


def _renamed(tmp_path, folder, rename) -> Path:
    """A copy of `folder` whose tensors are rename(name, array) -> (name, array): every one renamed or moved."""
    d = tmp_path / folder.name
    shutil.copytree(folder, d)
    raw = _read_safetensors(folder / "model.safetensors")
    renamed = dict(rename(k, v) for k, v in raw.items())
    assert len(renamed) == len(raw) and renamed.keys() != raw.keys()
    _write_safetensors(d / "model.safetensors", renamed)
    return d


def _same_logits(a, b):
    ids = np.load(b / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(a).logits(ids), _load(b).logits(ids))


@pytest.mark.parametrize("kv_type", ["f32", "int8"])
@pytest.mark.parametrize("weights", ["f32", "q8_0"])
@FOLDERS
def test_plan_equals_the_per_op_path(folder, weights, kv_type):
    import petit
    _assert_same(petit.load(folder, weights=weights), kv_type)


# ---- Hy3 ----

def test_hy_v3_reads_each_layers_kinds():
    model = _load(HY)
    layers = model.net.layers
    assert [L.moe is not None for L in layers] == [False, True, True]         # mlp_layer_types' default
    assert all(L.q_norm is not None and L.k_norm is not None and L.q_b is not None and L.o_b is not None
               for L in layers)
    assert layers[0].gate_b is not None                                        # mlp_bias
    raw = _read_safetensors(HY / "model.safetensors")
    for i, L in enumerate(layers[1:], 1):
        m = L.moe
        assert m.scoring == "sigmoid" and m.norm_topk and m.norm_eps == 1e-20 and m.routed_scale == 2.826
        assert m.shared is not None and m.shared_gate is None and m.shared_b is not None
        assert m.shared[0].shape == (64, 64)                                   # 2 shared experts of 32
        np.testing.assert_array_equal(m.sel_bias.a, raw[f"model.layers.{i}.mlp.expert_bias"])


MODULE_NAMES = {"mlp.router.gate.": "mlp.gate.", "mlp.expert_bias": "mlp.e_score_correction_bias",
                "mlp.shared_mlp.": "mlp.shared_experts."}


def test_hy_v3_module_names_read_the_same(tmp_path):
    """A checkpoint under transformers' module names (which it renames the saved ones to at load): the same logits,
    nothing left unused."""
    def rename(k, v):
        for saved, module in MODULE_NAMES.items():
            k = k.replace(saved, module)
        return k, v
    _same_logits(_renamed(tmp_path, HY, rename), HY)


def _config(folder, **changes):
    """The fixture's config.json with `changes` (a None drops the key)."""
    d = dict(json.loads((folder / "config.json").read_text()), **changes)
    return {k: v for k, v in d.items() if v is not None}


def _hy(**changes):
    return _config(HY, **changes)


def test_hy_v3_defaults_are_transformers():
    d = _hy(num_hidden_layers=4)
    del d["mlp_layer_types"]
    cfg = hy_v3.Config.from_dict(d)
    assert cfg.sparse() == [False, True, True, True]
    assert hy_v3.Config.from_dict({"model_type": "hy_v3"}).rope_theta == 11158840.0
    assert hy_v3.Config.from_dict(_hy(num_experts=None, num_local_experts=6)).num_experts == 6
    with pytest.raises(ValueError, match="num_local_experts 5 and num_experts 6 disagree"):
        hy_v3.Config.from_dict(_hy(num_local_experts=5))
    # no shared experts: transformers' `moe_intermediate_size * num_shared_experts or intermediate_size`
    assert hy_v3.Config.from_dict(_hy(num_shared_experts=0)).shared_width() == 96


def test_hy_v3_the_fp32_combine_switch_is_read_as_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hy_v3.Config.from_dict(_hy(enable_moe_fp32_combine=False)).unknown_keys == []


@pytest.mark.parametrize("changes, message", [
    (dict(hidden_act="gelu"), "hidden_act 'gelu' is not supported by the hy_v3 family"),
    (dict(mlp_layer_types=["dense", "sparse"]), "mlp_layer_types must list 3 values of dense / sparse"),
    (dict(mlp_layer_types=["dense", "moe", "sparse"]), "mlp_layer_types must list 3"),
    (dict(num_experts_per_tok=7), "exceeds num_experts"),
    (dict(num_shared_experts=-1), "num_shared_experts must be a non-negative integer"),
    (dict(router_scaling_factor=0), "router_scaling_factor must be a positive number"),
    (dict(mlp_bias="yes"), "mlp_bias must be true or false"),
])
def test_hy_v3_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        hy_v3.Config.from_dict(_hy(**changes))


# ---- Dory ----

def test_dory_unrolls_its_loops_into_layers_sharing_weights():
    model = _load(DORY)
    L = model.net.layers
    # layer 0, then layers 1-2 twice, then layer 3: six blocks, each its own cache rows
    assert len(L) == 6 and model.new_cache(8).layout[0] == 6
    for a, b in ((1, 3), (2, 4)):
        assert all(getattr(L[a], n) is getattr(L[b], n) for n in ("q", "k", "v", "o", "attn_gate", "gate", "up",
                                                                   "down"))
    assert L[1].q is not L[2].q and L[0].q is not L[5].q
    entries = [(x.pre_block.first, x.pre_block.loops) for x in L]
    assert entries == [(False, 0), (True, 1), (False, 0), (False, 1), (False, 0), (False, 0)]
    assert [x.window for x in L] == [8, 0, 8, 0, 8, 0] and all(x.norm_after_rope for x in L)
    assert model.net.arch.shortcut and model.net.logit_cols is not None


LAYOUTS = {
    # what transformers reads, from the names its save_pretrained writes (the fixture): its modules' and the released
    # checkpoints' two blocks a layer (LayerPairCollapse: layers.{2i}.mixer / attn_alpha, layers.{2i+1}.mixer /
    # mlp_alpha)
    "modules": lambda k: k.replace("backbone.embeddings.", "model.embed_tokens.").replace("backbone.", "model.")
    .replace(".g_proj.", ".gate_proj."),
    "released": lambda k: _released(k),
}


def _released(k):
    if not k.startswith("backbone.layers."):
        return k
    i, rest = k[len("backbone.layers."):].split(".", 1)
    i = int(i)
    if rest in ("lambda_1", "lambda_2"):
        return f"backbone.layers.{2 * i + (rest == 'lambda_2')}.{'attn_alpha' if rest == 'lambda_1' else 'mlp_alpha'}"
    block, leaf = rest.split(".", 1)
    return f"backbone.layers.{2 * i + (block == 'mlp')}.mixer.{leaf}"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_dory_reads_each_layout_transformers_reads(tmp_path, layout):
    _same_logits(_renamed(tmp_path, DORY, lambda k, v: (LAYOUTS[layout](k), v)), DORY)


def _dory(**changes):
    return _config(DORY, **changes)


def _modules_config():
    """The fixture's config in the modules' layout (one entry a layer, the counts halved): what DoryConfig holds."""
    d = _dory()
    d["layer_types"] = d["layer_types"][::2]
    for k in dory_config.COUNTS:
        d[k] //= 2
    return d


def test_dory_two_block_config_is_read_as_transformers_reads_it():
    saved = dory.Config.from_dict(_dory())          # save_pretrained writes the two-block layout
    assert saved.to_dict() == dory.Config.from_dict(_modules_config()).to_dict()
    assert (saved.num_hidden_layers, saved.n_input_layers, saved.n_recurrent_layers, saved.n_output_layers) == \
        (4, 1, 2, 1)
    d = _dory(num_hidden_layers=16)                 # defaults halved too (transformers' __post_init__)
    d["layer_types"] = ["sliding_attention", "mlp"] * 8
    for k in ("n_input_layers", "n_output_layers", "n_recurrent_layers"):
        d.pop(k)
    cfg = dory.Config.from_dict(d)
    assert (cfg.num_hidden_layers, cfg.n_input_layers, cfg.n_recurrent_layers, cfg.n_output_layers) == (8, 4, 0, 4)
    assert dory.Config.from_dict({"model_type": "dory"}).types()[:4] == ["sliding_attention"] * 3 + ["full_attention"]


@pytest.mark.parametrize("changes", [dict(n_input_layers=0, n_recurrent_layers=3), dict(n_recurrent_layers=0,
                                     n_output_layers=3), dict(n_recurrent_loops=3),
                                     dict(recurrent_kv_cache_mode="last_loop", n_recurrent_loops=1)])
def test_dory_other_sections_equal_the_float64_reference(tmp_path, changes):
    from petit.loading.convert import convert
    from trainer.reference import Reference
    d = tmp_path / "d"
    shutil.copytree(DORY, d)
    (d / "config.json").write_text(json.dumps(dict(_modules_config(), **changes)))
    out = tmp_path / "d.petit"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        convert(d, out, "f32").close()
        model = _load(out)
    ids = np.load(DORY / "reference_long.npz")["input_ids"]
    got, want = model.logits(ids), Reference(out).logits(ids)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    assert len(model.net.layers) == 4 + (changes.get("n_recurrent_loops", 2) - 1) * changes.get("n_recurrent_layers",
                                                                                                 2)


@pytest.mark.parametrize("changes, message", [
    (dict(recurrent_kv_cache_mode="last_loop"), "recurrent_kv_cache_mode 'last_loop' is not supported by the dory "
                                                "family: passes before the last attend over the last pass's cached"),
    (dict(recurrent_kv_cache_mode="both"), "recurrent_kv_cache_mode 'both'"),
    (dict(n_recurrent_layers=2, n_output_layers=2), "must equal num_hidden_layers"),
    (dict(n_recurrent_layers=0, n_output_layers=0, n_input_layers=4), "no layer after the recurrent section"),
    (dict(n_recurrent_loops=0), "n_recurrent_loops must be a positive integer"),
    (dict(n_input_layers=-1, n_recurrent_layers=4), "n_input_layers must be a non-negative integer"),
    (dict(hidden_act="xielu"), "hidden_act 'xielu' is not supported by the dory family"),
    (dict(layer_types=["full_attention"] * 3), "layer_types must list 4"),
])
def test_dory_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        dory.Config.from_dict(dict(_modules_config(), **changes))


def test_dory_two_block_layer_types_must_alternate():
    with pytest.raises(ValueError, match="must alternate an attention type and 'mlp'"):
        dory.Config.from_dict(_dory(layer_types=["sliding_attention", "mlp", "mlp", "full_attention"] * 2))


# ---- Ergo ----

def _ergo64(x, router, bias, experts, shared, norms, sh_norm, k, scale, eps, plain):
    """Ergo's MoE in float64: the top k of sigmoid(logits) + bias (ties: the lower expert), weighed by the sigmoids /
    (sum + 1e-20) x scale; each expert's relu^2 (plain) or SwiGLU output RMS-normed with its row of `norms`, summed;
    then the shared expert's, normed with sh_norm."""
    x = x.astype(np.float64)
    s = 1 / (1 + np.exp(-(x @ router.T.astype(np.float64))))
    top = np.argsort(-(s + bias), axis=1, kind="stable")[:, :k]
    w = np.take_along_axis(s, top, axis=1)
    w = w / (w.sum(axis=1, keepdims=True) + 1e-20) * scale
    rmsn = lambda v, g: v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * g          # noqa: E731

    def run(v, g, u, d):
        if plain:
            return (np.maximum(v @ u.T, 0) ** 2) @ d.T
        return ((v @ g.T) / (1 + np.exp(-(v @ g.T))) * (v @ u.T)) @ d.T
    out = np.stack([sum(w[t, j] * rmsn(run(x[t], *experts[top[t, j]]), norms[top[t, j]]) for j in range(k))
                    for t in range(len(x))])
    return out + rmsn(run(x, *shared), sh_norm), top


@pytest.mark.parametrize("T, E, k, D, F, plain", [(1, 3, 1, 17, 5, True), (11, 5, 2, 37, 13, True),
                                                  (7, 6, 3, 33, 9, False), (13, 7, 2, 19, 7, True)])
def test_expert_output_norms_equal_a_float64_reference_at_odd_sizes(T, E, k, D, F, plain):
    rng = np.random.default_rng(T * 1000 + E * 10 + k)
    router, rw = _f32(rng, E, D, 1.0 / np.sqrt(D))
    *experts, sh = ([_f32(rng, *shape, 1 / np.sqrt(shape[1])) for shape in ((F, D), (F, D), (D, F))]
                    for _ in range(E + 1))
    bias = (rng.standard_normal(E) * 0.5).astype(np.float32)
    norms, sh_norm = ((1 + 0.2 * rng.standard_normal(shape)).astype(np.float32) for shape in ((E, D), D))
    moe = Moe(rw, None if plain else [g[1] for g, _, _ in experts], [u[1] for _, u, _ in experts],
              [d[1] for _, _, d in experts], k, True, act="relu2" if plain else "silu", plain=plain,
              shared=(None if plain else sh[0][1], sh[1][1], sh[2][1]), scoring="sigmoid", sel_bias=Vec(bias),
              norm_eps=1e-20, routed_scale=2.5, post_norm=Vec(norms), sh_post_norm=Vec(sh_norm), post_norm_eps=1e-6)
    x = rng.standard_normal((T, D)).astype(np.float32)
    y = np.zeros((T, D), np.float32)
    assert moe.run(ffi.cast("float *", ffi.from_buffer(x)), T, ffi.cast("float *", ffi.from_buffer(y))) == 0
    want, top = _ergo64(x, router, bias.astype(np.float64), [tuple(m[0] for m in e) for e in experts],
                        tuple(m[0] for m in sh), norms, sh_norm, k, 2.5, 1e-6, plain)
    assert np.array_equal(moe.last_routing(T), np.sort(top, axis=1))
    np.testing.assert_allclose(y, want, rtol=0, atol=2e-5 * np.abs(want).max())


def test_ergo_reads_each_layers_kinds():
    model = _load(ERGO)
    layers = model.net.layers
    assert [L.window for L in layers] == [8, 0, 8, 0]
    assert layers[0].rope is layers[2].rope and layers[0].rope.interleaved and layers[1].rope is None   # NoPE
    assert [L.moe is not None for L in layers] == [False, True, True, True] and layers[0].gate is None
    assert model.net.arch.act == "relu2" and model.net.lm_head is not model.net.embed
    raw = _read_safetensors(ERGO / "model.safetensors")
    for i, L in enumerate(layers):
        p = f"layers.{i}."
        q = raw[p + "attention.q_norm.weight"] * (np.float32(1.5 ** 0.5) if i % 2 else 1)    # global_attention_scale
        np.testing.assert_allclose(L.q_norm.w.a, q, rtol=1e-6)
        g = raw[p + "post_attention_residual.scale"].astype(np.float64)
        b = 1 / (1 + np.exp(-g))
        np.testing.assert_allclose(L.post_attn_norm.w.a, raw[p + "post_attention_norm.weight"] * b, rtol=1e-6)
        np.testing.assert_allclose(L.resid_alpha[0].a, np.sqrt(1 + b) / np.sqrt(1 + np.exp(g)), rtol=1e-6)
        if L.moe is not None:
            m = L.moe
            assert m.plain and m.act == "relu2" and m.gate is None and m.scoring == "sigmoid" and m.norm_topk
            assert m.routed_scale == pytest.approx(8 ** 0.5) and m.post_norm.a.shape == (6, 64)
            np.testing.assert_array_equal(m.router.raw.view(np.float32).reshape(6, 64),
                                          raw[p + "feed_forward.gate_kernel"].T)


def _modules(k: str) -> str:
    for pat, rep in RENAMES:
        k = re.sub(pat, rep, k)
    return k


def test_ergo_module_names_read_the_same(tmp_path):
    """A checkpoint under transformers' module names (the router and the shared expert [out, in], the experts still
    3-D): the same logits, nothing left unused."""
    d = _renamed(tmp_path, ERGO, lambda k, v: (_modules(k), np.ascontiguousarray(v.T) if k.endswith(TRANSPOSED) else v))
    raw = _read_safetensors(d / "model.safetensors")
    assert all(k.startswith(("model.", "lm_head.")) for k in raw) and raw["model.layers.1.mlp.experts.up_proj"].ndim == 3
    _same_logits(d, ERGO)


def _ergo(**changes):
    return _config(ERGO, **changes)


def test_ergo_defaults_and_aliases_are_transformers():
    d = _ergo(num_hidden_layers=8)
    for k in ("layer_types", "mlp_layer_types", "global_attention_every_n_layers"):
        del d[k]
    cfg = ergo.Config.from_dict(d)
    assert cfg.types() == ["sliding_attention"] * 3 + ["full_attention"] + ["sliding_attention"] * 3 + \
        ["full_attention"]
    assert cfg.sparse() == [False] + [True] * 7 and cfg.head_dim == 16 and cfg.intermediate_size == 96
    d = _ergo(local_attention_window=16)
    del d["sliding_window"]
    assert ergo.Config.from_dict(d).sliding_window == 16
    assert ergo.Config.from_dict(_ergo(head_dim=16)).head_dim == 16        # hidden / heads: the same, not reported


@pytest.mark.parametrize("key, value", [("tie_word_embeddings", True), ("intermediate_size", 4096),
                                        ("hidden_act", "silu")])
def test_ergo_keys_it_does_not_read_are_reported(key, value):
    with pytest.warns(UserWarning, match=f"{key} \\(not read by Ergo"):
        cfg = ergo.Config.from_dict(_ergo(**{key: value}))
    assert not cfg.tie_word_embeddings and cfg.intermediate_size == 96 and key not in cfg.to_dict()


@pytest.mark.parametrize("changes, message", [
    (dict(head_dim=32), "head_dim 32: transformers' Ergo uses hidden_size / num_attention_heads"),
    (dict(num_experts_per_tok=7), "exceeds num_experts"),
    (dict(mlp_layer_types=["dense"] * 3), "mlp_layer_types must list 4"),
    (dict(global_attention_scale=0), "global_attention_scale must be a positive number"),
    (dict(global_attention_every_n_layers=0), "global_attention_every_n_layers must be a positive integer"),
    (dict(local_attention_window=16), "local_attention_window 16 and sliding_window 8 disagree"),
    (dict(shared_intermediate_size=0), "shared_intermediate_size must be a positive integer"),
])
def test_ergo_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        ergo.Config.from_dict(_ergo(**changes))
