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
from pathlib import Path

import numpy as np
import pytest

from petit.models import lara_mini
from models import converted_runs_the_same, load_strict as _load
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


@FOLDERS
def test_converted_file_runs_the_same_numbers(tmp_path, folder):
    converted_runs_the_same(folder, tmp_path / "m.petit")


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
