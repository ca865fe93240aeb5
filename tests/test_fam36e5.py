"""The fam36e group of issue 36 (tests/fixtures/hf5_fam36e: Kolibri 1 and Flint, made by transformers 5.25): what
tests/test_hf_parity.py (35-token prompt, greedy), test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0),
test_moe.py and the app's chat test do not already hold for every hf5 fixture.

- (Parity at every position of the 140-token and chat prompts: tests/test_hf_parity.py, over every fixture.)
- The greedy continuation equals transformers'.
- kernels/moe.c's choice on the logits plus the bias (pt_moe.bias_logits, Kolibri 1) against a float64 reference at
  odd sizes, and that it is not DeepSeek-V3's choice on sigmoid + bias.
- What the family reads (NoPE full layers, windows, the four norms, experts with a shared expert in every layer, the
  bias under either of its names), both spellings of the expert count, what it reports and refuses by name.
- Flint: NoPE full layers, windows, the sinks under either name, dense and sparse layers, sigmoid routing with an
  ungated shared expert; its defaults and refusals.
- A converted `.petit` file of each reloads and runs the same numbers.
"""
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from petit.models.families.moe import flint, kolibri1
from petit.models.blocks.decoder import Vec
from petit.models.blocks.moe import Moe
from petit.native import Weight, ffi
from models import assert_greedy_equals_transformers, load_strict as _load
from test_moe_a5 import _read_safetensors, _write_safetensors

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36e"
KOLIBRI, FLINT = DIR / "kolibri1", DIR / "flint"
FOLDERS = pytest.mark.parametrize("folder", [KOLIBRI, FLINT], ids=["kolibri1", "flint"])


@FOLDERS
def test_greedy_continuation_equals_transformers(folder):
    assert_greedy_equals_transformers(_load(folder), folder)


def _f32(rng, rows, cols, scale):
    a = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
    return a, Weight(a.view(np.uint8).reshape(-1), "f32", (rows, cols))


def _kolibri64(x, router, bias, experts, shared, k, norm):
    """Kolibri 1's MoE in float64: the top k of logits + bias (ties: the lower expert), each weighed by the sigmoid
    of its logit (over their sum with norm), its SwiGLU output summed; then the shared expert's, ungated."""
    x = x.astype(np.float64)
    lg = x @ router.T.astype(np.float64)
    top = np.argsort(-(lg + bias), axis=1, kind="stable")[:, :k]
    w = 1 / (1 + np.exp(-np.take_along_axis(lg, top, axis=1)))
    w = w / w.sum(axis=1, keepdims=True) if norm else w
    swiglu = lambda v, g, u, d: ((v @ g.T) / (1 + np.exp(-(v @ g.T))) * (v @ u.T)) @ d.T    # noqa: E731
    out = np.stack([sum(w[t, j] * swiglu(x[t], *experts[top[t, j]]) for j in range(k)) for t in range(len(x))])
    return out + swiglu(x, *shared), top


@pytest.mark.parametrize("T, E, k, D, F, norm", [(1, 3, 1, 17, 5, False), (11, 5, 2, 37, 13, True),
                                                 (7, 6, 3, 33, 9, False), (13, 7, 2, 19, 7, True)])
def test_choice_on_logits_plus_bias_equals_a_float64_reference_at_odd_sizes(T, E, k, D, F, norm):
    rng = np.random.default_rng(T * 1000 + E * 10 + k)
    router, rw = _f32(rng, E, D, 3.0 / np.sqrt(D))
    mats = [(_f32(rng, F, D, 1 / np.sqrt(D)), _f32(rng, F, D, 1 / np.sqrt(D)), _f32(rng, D, F, 1 / np.sqrt(F)))
            for _ in range(E + 1)]
    bias = rng.standard_normal(E).astype(np.float32)
    experts, sh = mats[:E], mats[E]
    moe = Moe(rw, [g[1] for g, _, _ in experts], [u[1] for _, u, _ in experts], [d[1] for _, _, d in experts], k,
              norm, shared=tuple(m[1] for m in sh), scoring="sigmoid", sel_bias=Vec(bias), bias_logits=True)
    x = rng.standard_normal((T, D)).astype(np.float32)
    y = np.zeros((T, D), np.float32)
    assert moe.run(ffi.cast("float *", ffi.from_buffer(x)), T, ffi.cast("float *", ffi.from_buffer(y))) == 0
    want, top = _kolibri64(x, router, bias.astype(np.float64), [tuple(m[0] for m in e) for e in experts],
                           tuple(m[0] for m in sh), k, norm)
    assert np.array_equal(moe.last_routing(T), np.sort(top, axis=1))
    np.testing.assert_allclose(y, want, rtol=0, atol=2e-5 * np.abs(want).max())


def test_the_bias_in_logit_space_chooses_otherwise_than_deepseek_v3s_on_sigmoids():
    D = 4
    router = np.zeros((3, D), np.float32)
    router[:, 0] = [4.0, 2.0, 0.0]                  # logits 4, 2, 0 for x = e0: sigmoids 0.982, 0.881, 0.5
    rw = Weight(router.view(np.uint8).reshape(-1), "f32", router.shape)
    mats = [tuple(_f32(np.random.default_rng(e), *s, 0.3)[1] for s in ((2, D), (2, D), (D, 2))) for e in range(3)]
    bias = Vec(np.array([0.0, 1.5, 0.0], np.float32))
    x = np.eye(1, D, dtype=np.float32)
    picks = {}
    for bias_logits in (True, False):
        moe = Moe(rw, [m[0] for m in mats], [m[1] for m in mats], [m[2] for m in mats], 1, False,
                  scoring="sigmoid", sel_bias=bias, bias_logits=bias_logits)
        y = np.zeros((1, D), np.float32)
        assert moe.run(ffi.cast("float *", ffi.from_buffer(x)), 1, ffi.cast("float *", ffi.from_buffer(y))) == 0
        picks[bias_logits] = int(moe.last_routing(1)[0, 0])
    # logit space: 4 > 2 + 1.5, expert 0; DeepSeek-V3's sigmoid space: 0.982 < 0.881 + 1.5, expert 1
    assert picks == {True: 0, False: 1}


def test_kolibri_reads_each_layers_kinds():
    model = _load(KOLIBRI)
    layers = model.net.layers
    assert [L.window for L in layers] == [8, 0, 8]
    assert layers[0].rope is layers[2].rope and layers[0].rope is not None and layers[1].rope is None   # NoPE
    assert all(L.moe is not None and L.moe.bias_logits and L.moe.scoring == "sigmoid" for L in layers)
    assert all(L.moe.shared is not None and L.moe.shared_gate is None and not L.moe.norm_topk for L in layers)
    assert all(None not in (L.attn_norm, L.post_attn_norm, L.mlp_norm, L.post_mlp_norm, L.q_norm, L.k_norm)
               for L in layers)
    raw = _read_safetensors(KOLIBRI / "model.safetensors")
    for i, L in enumerate(layers):
        np.testing.assert_array_equal(np.asarray(L.moe.sel_bias.a, np.float32),
                                      raw[f"model.layers.{i}.moe.router.expert_bias"])
        np.testing.assert_array_equal(np.asarray(L.post_mlp_norm.w.a, np.float32),
                                      raw[f"model.layers.{i}.post_ffn_norm.weight"])


MODULE_NAMES = {"moe.router.expert_bias": "mlp.gate.e_score_correction_bias",
                "post_attn_norm": "post_self_attn_layernorm", "post_ffn_norm": "post_mlp_layernorm"}


def test_transformers_module_names_read_the_same(tmp_path):
    """A checkpoint under transformers' module names (which it renames the saved ones to at load): the same logits,
    nothing left unused."""
    d = tmp_path / "k"
    shutil.copytree(KOLIBRI, d)
    raw = _read_safetensors(KOLIBRI / "model.safetensors")
    renamed = {}
    for k, v in raw.items():
        for saved, module in MODULE_NAMES.items():
            k = k.replace(saved, module)
        renamed[k] = v
    assert len(renamed) == len(raw) and not any(s in k for k in renamed for s in MODULE_NAMES)
    _write_safetensors(d / "model.safetensors", renamed)
    ids = np.load(KOLIBRI / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(d).logits(ids), _load(KOLIBRI).logits(ids))


def _kolibri(**changes):
    d = json.loads((KOLIBRI / "config.json").read_text())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


def test_kolibri_takes_either_spelling_of_the_expert_count():
    assert kolibri1.Config.from_dict(_kolibri(num_local_experts=None, num_experts=6)).num_experts == 6
    with pytest.raises(ValueError, match="num_experts 5 and num_local_experts 6 differ"):
        kolibri1.Config.from_dict(_kolibri(num_experts=5))


def test_default_layer_types_are_every_fifth_layer_full():
    d = _kolibri(num_hidden_layers=10)
    del d["layer_types"]
    assert kolibri1.Config.from_dict(d).types() == (["sliding_attention"] * 4 + ["full_attention"]) * 2


def test_intermediate_size_is_reported_and_not_read():
    with pytest.warns(UserWarning, match=r"intermediate_size \(Kolibri 1 has no dense MLP"):
        cfg = kolibri1.Config.from_dict(_kolibri(intermediate_size=4096))
    assert cfg.intermediate_size == cfg.shared_expert_intermediate_size == 64
    assert "intermediate_size" not in cfg.to_dict()


def test_unknown_keys_are_reported():
    with pytest.warns(UserWarning, match="attention_bias"):
        cfg = kolibri1.Config.from_dict(_kolibri(attention_bias=True))
    assert cfg.unknown_keys == ["attention_bias"]


@pytest.mark.parametrize("changes, message", [
    (dict(sliding_window=None), "sliding_window null"),
    (dict(sliding_window=0, layer_types=["full_attention"] * 3), "sliding_window must be a positive integer"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(layer_types=["full_attention"] * 2), "layer_types must list 3"),
    (dict(num_experts_per_tok=7), "exceeds num_experts"),
    (dict(shared_expert_intermediate_size=0), "shared_expert_intermediate_size"),
])
def test_bad_configs_are_refused_by_name(changes, message):
    d = _kolibri(**changes)
    if "sliding_window" in changes and changes["sliding_window"] is None:
        d["sliding_window"] = None
    with pytest.raises(ValueError, match=message):
        kolibri1.Config.from_dict(d)


@FOLDERS
def test_converted_file_runs_the_same_numbers(tmp_path, folder):
    from petit.cli import main
    out = tmp_path / "k.petit"
    assert main(["convert", str(folder), "-o", str(out), "--f32"]) == 0
    ids = np.load(folder / "reference.npz")["input_ids"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(_load(out).logits(ids), _load(folder).logits(ids))


def test_flint_reads_each_layers_kinds():
    model = _load(FLINT)
    layers = model.net.layers
    assert [L.window for L in layers] == [8, 0, 8]
    assert layers[0].rope is layers[2].rope and layers[0].rope is not None and layers[1].rope is None   # NoPE
    assert [L.moe is not None for L in layers] == [False, True, True]       # mlp_only_layers [0]
    for L in layers[1:]:
        assert L.moe.scoring == "sigmoid" and not L.moe.bias_logits and L.moe.sel_bias is None and L.moe.norm_topk
        assert L.moe.shared is not None and L.moe.shared_gate is None
    raw = _read_safetensors(FLINT / "model.safetensors")
    for i, L in enumerate(layers):
        np.testing.assert_array_equal(np.asarray(L.sinks.a, np.float32),
                                      raw[f"model.layers.{i}.self_attn.softmax_offset"])


def test_flint_module_name_of_the_sinks_reads_the_same(tmp_path):
    d = tmp_path / "f"
    shutil.copytree(FLINT, d)
    raw = _read_safetensors(FLINT / "model.safetensors")
    _write_safetensors(d / "model.safetensors", {k.replace("softmax_offset", "sinks"): v for k, v in raw.items()})
    ids = np.load(FLINT / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(d).logits(ids), _load(FLINT).logits(ids))


def _flint(**changes):
    d = json.loads((FLINT / "config.json").read_text())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


def test_flint_defaults_are_transformers():
    d = _flint(num_hidden_layers=10)
    for k in ("layer_types", "mlp_only_layers"):
        del d[k]
    cfg = flint.Config.from_dict(d)
    assert cfg.types() == ["full_attention" if i in (0, 1, 5, 9) else "sliding_attention" for i in range(10)]
    assert cfg.mlp_only_layers == [0, 1]


def test_flint_reports_qwen_keys_it_does_not_have():
    with pytest.warns(UserWarning, match="use_sliding_window"):
        cfg = flint.Config.from_dict(_flint(use_sliding_window=True))
    assert cfg.unknown_keys == ["use_sliding_window"]


@pytest.mark.parametrize("changes, message", [
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(layer_types=["full_attention"] * 2), "layer_types must list 3"),
    (dict(num_experts_per_tok=7), "exceeds num_experts"),
    (dict(mlp_only_layers=[True]), "mlp_only_layers"),
    (dict(attention_bias="yes"), "attention_bias"),
])
def test_flint_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        flint.Config.from_dict(_flint(**changes))


def test_flint_without_a_sliding_window_is_refused():
    d = _flint()
    d["sliding_window"] = None
    with pytest.raises(ValueError, match="sliding_window null"):
        flint.Config.from_dict(d)
