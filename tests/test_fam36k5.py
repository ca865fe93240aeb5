"""The fam36k group of issue 36 (tests/fixtures/hf5_fam36k: Lara 4 Mini, made by transformers 5.25): what
tests/test_hf_parity.py (every position of the three prompts), test_moe.py (the quantized bounds where the routing
agrees), test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0) do not already
hold for every hf5 fixture.

- Lara: what the family reads (the layer kinds, plain norms, Qwen3's attention with its biases and no output gate,
  NoPE full layers, windows, softmax experts with an ungated shared expert), the released fused `in_proj` and
  `out_norm` and transformers' module names read the same, its defaults, the Qwen3-Next keys it reports, its
  refusals by name.
- The plan equals the per-op path bit for bit, and decode the prefill (the hybrids' check of tests/test_ssm.py).
- A converted `.petit` file reloads and runs the same numbers.
"""
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from petit.models.families.hybrid import lara_mini
from petit import load as petit_load
from models import converted_runs_the_same, load_strict as _load, rel_err
from test_moe_a5 import _read_safetensors, _write_safetensors
from test_ssm import decode_and_plan

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36k"
LARA = DIR / "lara_mini"
FOLDERS = pytest.mark.parametrize("folder", [LARA], ids=["lara_mini"])


@pytest.mark.parametrize("weights,scan", [("q8_0", "recurrent"), ("f32", "auto")])
@pytest.mark.parametrize("folder", [LARA], ids=["lara_mini"])
def test_the_plan_gives_the_oracles_bits_and_decode_the_prefills(folder, weights, scan, monkeypatch):
    """tests/test_ssm.py's check on a hybrid with experts (test_moe.py's plan test leaves the hybrids to their groups):
    the plan equals the per-op path bit for bit, token-by-token decode gives the prefill's logits within 1e-5."""
    monkeypatch.setenv("PETIT_SCAN", scan)
    decode_and_plan(folder, weights)


@pytest.mark.parametrize("folder", [LARA, DIR / "dots3_note_text"], ids=["lara_mini", "dots3_note_text"])
def test_converted_file_runs_the_same_numbers(tmp_path, folder):
    converted_runs_the_same(folder, tmp_path, np.load(folder / "reference.npz")["input_ids"])


# --- Lara 4 Mini ---

def _lara(**changes):
    d = json.loads((LARA / "config.json").read_text())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


def test_lara_reads_each_layers_kinds():
    model = _load(LARA)
    layers = model.net.layers
    kinds = json.loads((LARA / "config.json").read_text())["layer_types"]
    assert kinds == list(lara_mini.PERIOD)
    assert [L.mamba is not None for L in layers] == [True, False, True, False, False]
    assert [L.window for L in layers] == [0, 8, 0, 0, 8]
    assert layers[1].rope is layers[4].rope and layers[1].rope is not None and layers[3].rope is None   # NoPE
    assert layers[1].rope.dim == 16                                         # whole heads
    for L in (layers[1], layers[3], layers[4]):
        assert L.attn_gate is None and None not in (L.q_b, L.k_b, L.v_b, L.o_b, L.q_norm, L.k_norm)
    for L in layers:
        assert L.moe.scoring == "softmax" and L.moe.norm_topk and L.moe.top_k == 2 and len(L.moe.up) == 4
        assert L.moe.shared is not None and L.moe.shared_gate is None
    raw = _read_safetensors(LARA / "model.safetensors")
    for i, L in enumerate(layers):              # plain norms: the weights as stored (not 1 + w)
        np.testing.assert_array_equal(np.asarray(L.attn_norm.w.a), raw[f"model.layers.{i}.input_layernorm.weight"])
    np.testing.assert_array_equal(np.asarray(layers[0].mamba.norm_w, np.float32),
                                  raw["model.layers.0.linear_attn.out_norm.weight"])


def test_transformers_module_names_read_the_same(tmp_path):
    """The linear attention under transformers' module names (in_proj split into in_proj_qkv / _z / _b / _a, the gated
    norm as `norm`): the same logits, nothing left unused."""
    d = tmp_path / "l"
    shutil.copytree(LARA, d)
    raw = _read_safetensors(LARA / "model.safetensors")
    cfg = json.loads((LARA / "config.json").read_text())
    kd = cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"]
    vd, hv = cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"], cfg["linear_num_value_heads"]
    out = {}
    for k, v in raw.items():
        if k.endswith("linear_attn.in_proj.weight"):
            a = k[:-len("in_proj.weight")]
            cuts = np.cumsum([2 * kd + vd, vd, hv])
            for part, x in zip(np.split(v, cuts), ("qkv", "z", "b", "a")):
                out[f"{a}in_proj_{x}.weight"] = part
        else:
            out[k.replace("linear_attn.out_norm.", "linear_attn.norm.")] = v
    assert not any("in_proj.weight" in k or "out_norm" in k for k in out)
    _write_safetensors(d / "model.safetensors", out)
    ids = np.load(LARA / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(d).logits(ids), _load(LARA).logits(ids))


def test_lara_defaults_are_transformers():
    d = _lara(num_hidden_layers=7)
    del d["layer_types"]
    cfg = lara_mini.Config.from_dict(d)
    assert cfg.types == [lara_mini.PERIOD[i % 5] for i in range(7)]
    assert cfg.sparse == [True] * 7 and cfg.rotary_dim == cfg.head_dim
    bare = lara_mini.Config.from_dict({"model_type": "lara_mini"})
    assert (bare.hidden_size, bare.num_hidden_layers, bare.num_experts, bare.num_experts_per_tok) == (1024, 34, 128, 4)
    assert bare.tie_word_embeddings and bare.sliding_window == 512


@pytest.mark.parametrize("key, value", [("intermediate_size", 4096), ("mlp_only_layers", [0]),
                                        ("decoder_sparse_step", 2), ("full_attention_interval", 2)])
def test_qwen3_next_keys_are_reported_and_not_read(key, value):
    with pytest.warns(UserWarning, match=f"ignoring unknown key\\(s\\) {key} \\(Lara 4 Mini's class does not read"):
        cfg = lara_mini.Config.from_dict(_lara(**{key: value}))
    assert cfg.unknown_keys == [key] and key not in cfg.to_dict()
    assert cfg.types == list(lara_mini.PERIOD) and cfg.sparse == [True] * 5


@pytest.mark.parametrize("changes, message", [
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(layer_types=["full_attention"] * 4), "layer_types must list 5"),
    (dict(layer_types=["linear_attention", "chunked_attention"] + ["full_attention"] * 3), "layer_types must list 5"),
    (dict(num_experts_per_tok=5), "exceeds num_experts"),
    (dict(rope_parameters=dict(rope_type="default", rope_theta=1e4, partial_rotary_factor=0.5)),
     "partial_rotary_factor 0.5 .* rotates whole heads"),
    (dict(sliding_window=0), "sliding_window must be a positive integer"),
    (dict(linear_num_value_heads=3), "linear_num_value_heads 3 is not a multiple"),
])
def test_lara_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        lara_mini.Config.from_dict(_lara(**changes))


# --- Dots 3 Note Preview ---

DOTS, DOTS_TEXT = DIR / "dots3_note", DIR / "dots3_note_text"
DOTS_FOLDERS = pytest.mark.parametrize("folder", [DOTS_TEXT, DOTS], ids=["dots3_note_text", "dots3_note"])


def _dots(**changes):
    d = json.loads((DOTS_TEXT / "config.json").read_text())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


def _quiet(folder, weights="f32"):
    """petit.load with every warning an error but the tower's."""
    import petit
    from models import TOWER_NOT_RUN
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        return petit.load(folder, weights=weights)


@DOTS_FOLDERS
def test_dots3_reads_each_layers_attention(folder):
    """Indexed layers of 4 heads, rows of rope 16 + latent 32 + the indexer's 64; sliding ones of 2 heads, rows of
    16 + 64, within the window; each layer's own scale, k_pe norm and head gates."""
    layers = _quiet(folder).net.layers
    assert [L.mla.heads for L in layers] == [4, 4, 2, 2] and [L.mla.row for L in layers] == [112, 112, 80, 80]
    assert [L.mla.dsa is not None for L in layers] == [True, True, False, False]
    assert [L.window for L in layers] == [0, 0, 8, 8] and all(L.rope.interleaved for L in layers)
    assert [L.rope.base for L in layers] == [1e6, 1e6, 1e4, 1e4]
    assert [L.mla.scale for L in layers] == [48 ** -0.5] * 2 + [80 ** -0.5] * 2
    assert all(L.mla.k_pe_norm is not None and L.mla.gate.shape == (L.mla.heads, 64) for L in layers)
    assert [L.moe is not None for L in layers] == [False, True, True, True]
    for L in layers[1:]:
        assert L.moe.scoring == "sigmoid" and (L.moe.n_group, L.moe.topk_group) == (2, 1) and L.moe.routed_scale == 2.0
        assert L.moe.shared[0].shape == (64, 64)            # n_shared_experts 2 x shared_experts_intermediate_size 32
    raw = _read_safetensors(DOTS_TEXT / "model.safetensors") if folder == DOTS_TEXT else None
    if raw is not None:                       # the latent norms scaled by sqrt(hidden / rank), their eps rms_norm_eps
        m = layers[2].mla
        np.testing.assert_allclose(m.kv_norm.w.a, raw["model.layers.2.self_attn.kv_a_layernorm.weight"] * 1.0,
                                   rtol=1e-6)
        np.testing.assert_allclose(m.q_a_norm.w.a, raw["model.layers.2.self_attn.q_a_layernorm.weight"] * 1.0,
                                   rtol=1e-6)
        assert layers[0].mla.kv_norm.eps == 1e-5
        np.testing.assert_allclose(layers[0].mla.kv_norm.w.a,
                                   raw["model.layers.0.self_attn.kv_a_layernorm.weight"] * 2 ** 0.5, rtol=1e-6)


@pytest.mark.parametrize("kv", ["f32", "int8"])
@pytest.mark.parametrize("weights", ["f32", "q8_0"])
def test_dots3_plan_equals_the_oracle_and_decode_the_prefill(weights, kv):
    """Layers of other heads and rows than the cache's widest (the sliding layers' 80 of 112): the one-call plan
    equals the per-op path bit for bit, with a float32 and an int8 cache, and token-by-token decode gives the
    prefill's logits."""
    m = _quiet(DOTS_TEXT, weights)
    ids = np.load(DOTS_TEXT / "reference.npz")["input_ids"]
    a, b = (np.empty((len(ids), m.vocab_size), np.float32) for _ in range(2))
    m.net.forward(ids.tolist(), m.new_cache(64, kv_type=kv), a)
    m.net.forward(ids.tolist(), m.new_cache(64, kv_type=kv), b, oracle=True)
    np.testing.assert_array_equal(a, b)
    cache = m.new_cache(64, kv_type=kv)
    steps = np.stack([m.forward([int(t)], cache) for t in ids])
    np.testing.assert_allclose(steps, a, rtol=0, atol=(1e-5 if kv == "f32" else 2e-2) * float(np.ptp(a)))


def test_dots3_released_flat_config_runs_the_same(tmp_path):
    """The released config.json: the language model's keys at the top level beside vision_config / audio_config (as
    Dots3NoteConfig reads it), the checkpoint as saved: the same logits, the towers said once not to run."""
    d = tmp_path / "d"
    shutil.copytree(DOTS, d)
    cfg = json.loads((DOTS / "config.json").read_text())
    flat = {k: v for k, v in cfg.pop("text_config").items() if k != "model_type"}
    (d / "config.json").write_text(json.dumps(dict(cfg, **flat)))
    with pytest.warns(UserWarning, match=r"dots3_note: the vision and audio tower .* is not run"):
        model = petit_load(d, weights="f32")
    ref = np.load(DOTS / "reference.npz")
    assert rel_err(model.logits(ref["input_ids"]), ref["logits"]).max() <= 1e-4


def test_dots3_legacy_keys_read_as_transformers_reads_them(tmp_path):
    """The remote-code keys (swa_*, swa_rope_theta, rope_theta, sliding_window_size, moe_shared_expert_
    intermediate_size, first_k_dense_replace; layer_types and per_layer_config left to their defaults) describe the
    fixture's model: the same logits."""
    d = tmp_path / "d"
    shutil.copytree(DOTS_TEXT, d)
    cfg = _dots(layer_types=None, per_layer_config=None, mlp_layer_types=None, rope_parameters=None, sliding_window=None,
                shared_experts_intermediate_size=None, rope_theta=1e6, swa_rope_theta=1e4, sliding_window_size=8,
                moe_shared_expert_intermediate_size=32, first_k_dense_replace=1, swa_num_attention_heads=2,
                swa_num_key_value_heads=2, swa_q_lora_rank=64, swa_kv_lora_rank=64, swa_head_dim=80,
                swa_qk_nope_head_dim=64, swa_v_head_dim=32)
    (d / "config.json").write_text(json.dumps(cfg))
    ids = np.load(DOTS_TEXT / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(d).logits(ids), _load(DOTS_TEXT).logits(ids))


def test_dots3_defaults_are_transformers():
    from petit.models.families.mla import dots3_note_text
    cfg = dots3_note_text.Config.from_dict({"model_type": "dots3_note_text"})
    assert cfg.layer_types == ["indexed_attention" if i < 2 or i % 4 == 1 else "sliding_attention" for i in range(46)]
    assert cfg.mlp_layer_types == ["dense"] + ["sparse"] * 45
    assert cfg.layer_dims(0) == (128, 128, 64, 128, 512, 1024) and cfg.layer_dims(2) == (64, 192, 64, 128, 1024, 1024)
    assert (cfg.rope_theta, cfg.swa_rope_theta, cfg.sliding_window, cfg.routed_scaling_factor) == (8e7, 5e4, 512, 1.0)
    off = dots3_note_text.Config.from_dict({"model_type": "dots3_note_text", "num_hidden_layers": 4,
                                            "use_dsa": False, "use_sliding_window": False})
    assert off.layer_types == ["full_attention"] * 4 and off.per_layer_config == {}


@pytest.mark.parametrize("changes, message", [
    (dict(rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0}), "rope_type 'yarn'"),
    (dict(per_layer_config={"2": {"sliding_window": 4}}), "per_layer_config of layer 2 sets sliding_window"),
    (dict(per_layer_config={"2": {"num_attention_heads": 2}}), "gives sliding_attention layers different sizes"),
    (dict(per_layer_config={"2": {"num_attention_heads": 2}, "3": {"num_attention_heads": 2}}),
     "num_key_value_heads must equal num_attention_heads"),
    (dict(head_dim=44, qk_rope_head_dim=30), "rotate int\\(head_dim x qk_rope_head_dim / head_dim\\) = 29"),
    (dict(latent_norm_eps=1e-6), "latent_norm_eps"),
    (dict(layer_types=["indexed_attention", "full_attention"] + ["sliding_attention"] * 2, rope_parameters={
        k: {"rope_type": "default", "rope_theta": t} for k, t in (("indexed_attention", 1e6), ("full_attention", 1e5),
                                                                  ("sliding_attention", 1e4))}), "other thetas"),
    (dict(attention_bias=True), "attention_bias"),
    (dict(layer_types=["indexed_attention", "chunked_attention", "sliding_attention", "sliding_attention"]),
     "layer_types must list 4"),
])
def test_dots3_bad_configs_are_refused_by_name(changes, message):
    from petit.models.families.mla import dots3_note_text
    with pytest.raises(ValueError, match=message):
        dots3_note_text.Config.from_dict(_dots(**changes))


def test_a_converted_dots3_note_file_is_a_file_of_the_language_model(tmp_path):
    from petit.loading.convert import convert
    from models import TOWER_NOT_RUN
    out = tmp_path / "d.petit"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        convert(DOTS, out, "f32").close()
    m = _load(out)                          # the file has no tower: nothing to say
    assert m.config.model_type == "dots3_note"
    assert not any(part in n for n in m.tensors for part in ("vision", "audio"))
    ids = np.load(DOTS / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(m.logits(ids), _quiet(DOTS).logits(ids))


def test_dots3_layers_of_narrower_rows_are_not_context_shifted():
    """A shift moves each layer's rows as the cache's width: layers whose latent rows are narrower (Dots 3's full
    layers beside its sliding ones) re-prefill instead, saying why (the indexed ones already do)."""
    from petit.generation.ctx_shift import shift_refusal
    m = _quiet(DOTS_TEXT)
    assert "sparse attention indexer" in shift_refusal(m, m.new_cache(64))
    for L in m.net.layers[:2]:
        L.mla.dsa = None                    # as full layers: rows of 16 + 32 in a cache of the sliding ones' 80
    assert shift_refusal(m, m.new_cache(64)) == "layer 0's latent rows are narrower than the cache's (its layers' " \
                                                "rows differ)"
