"""The fam36i group of issue 36 (tests/fixtures/hf5_fam36i, made by transformers 5.25): what tests/test_hf_parity.py
(every position of the 35-token, 140-token and chat prompts; the greedy tokens; the quantized bounds), test_moe.py (routing-aware
bounds, plan = oracle, decode = prefill), test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0) do not
already hold for every hf5 fixture.

- aria_text: the experts read from either spelling of the 3-D tensors (Aria's fc1 / fc2, transformers' gate_up_proj /
  down_proj) give the same numbers; what the family reads (every layer routed, softmax over the chosen logits,
  the shared experts' width and biases); its refusals by name.
- cohere_compass_text: RoPE rotate-half in the layer types rope_parameters gives one (NoPE where null), windows in
  the sliding layers, the parallel block, logit_scale; rope_parameters read as transformers reads it (dangling
  top-level entries dropped, the M-RoPE keys left) and refused where transformers builds no model.
- A converted `.petit` file of each reloads and runs the same numbers.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from petit.models import aria_text, cohere_compass_text
from models import converted_runs_the_same, load_strict as _load
from test_moe_a5 import _read_safetensors, _write_safetensors

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36i"
ARIA, COMPASS = DIR / "aria_text", DIR / "cohere_compass_text"
ALL = [ARIA, COMPASS]
FOLDERS = pytest.mark.parametrize("folder", ALL, ids=[p.name for p in ALL])


@FOLDERS
def test_converted_file_runs_the_same_numbers(tmp_path, folder):
    converted_runs_the_same(folder, tmp_path, np.load(folder / "reference.npz")["input_ids"])


def _config(folder, **changes):
    d = json.loads((folder / "config.json").read_text())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


# ---- aria_text ----

def test_aria_reads_every_layer_as_experts_with_shared_ones():
    model = _load(ARIA)
    raw = _read_safetensors(ARIA / "model.safetensors")
    for i, L in enumerate(model.net.layers):
        m = L.moe
        assert m is not None and m.scoring == "softmax" and m.norm_topk and m.top_k == 2 and len(m.up) == 6
        assert m.shared[0].shape == (64, 64) and m.shared_gate is None and m.shared_b is not None      # 2 x 32
        fc1 = raw[f"model.layers.{i}.mlp.experts.fc1.weight"]                                         # [E, D, 2F]
        np.testing.assert_array_equal(np.frombuffer(m.up[3].raw, np.float32).reshape(32, 64), fc1[3][:, 32:].T)
        np.testing.assert_array_equal(np.asarray(m.shared_b[0].a),
                                      raw[f"model.layers.{i}.mlp.shared_experts.gate_proj.bias"])


def test_aria_reads_transformers_module_names_the_same(tmp_path):
    """The experts under transformers' names (experts.gate_up_proj / down_proj, the layout unchanged): the same
    logits, nothing left unused."""
    d = tmp_path / "a"
    shutil.copytree(ARIA, d)
    raw = _read_safetensors(ARIA / "model.safetensors")
    renamed = {k.replace("experts.fc1.weight", "experts.gate_up_proj").replace("experts.fc2.weight",
                                                                              "experts.down_proj"): v
               for k, v in raw.items()}
    assert sum("gate_up_proj" in k for k in renamed) == 3
    _write_safetensors(d / "model.safetensors", renamed)
    ids = np.load(ARIA / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(d).logits(ids), _load(ARIA).logits(ids))


def test_aria_reports_unknown_keys():
    with pytest.warns(UserWarning, match="moe_aux_loss"):
        cfg = aria_text.Config.from_dict(_config(ARIA, moe_aux_loss=0.1))
    assert cfg.unknown_keys == ["moe_aux_loss"]


@pytest.mark.parametrize("changes, message", [
    (dict(moe_topk=7), r"moe_topk \(7\) exceeds moe_num_experts \(6\)"),
    (dict(moe_num_shared_experts=0), "moe_num_shared_experts must be a positive integer"),
    (dict(hidden_act="gelu"), "hidden_act 'gelu' is not supported by the aria_text family"),
    (dict(mlp_bias="yes"), "mlp_bias must be true or false"),
])
def test_aria_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        aria_text.Config.from_dict(_config(ARIA, **changes))


# ---- cohere_compass_text ----

def test_compass_reads_each_layers_kinds():
    net = _load(COMPASS).net
    assert [L.window for L in net.layers] == [8, 0, 8]
    r = net.layers[0].rope
    assert r is net.layers[2].rope and net.layers[1].rope is None and not r.interleaved and r.dim == 16
    assert net.arch.parallel and net.arch.logit_scale == 0.25 and net.lm_head is net.embed
    assert all(L.mlp_norm is None and L.attn_norm.kind == "layer" and L.attn_norm.b is None for L in net.layers)


def test_compass_drops_dangling_rope_keys_as_transformers_does(tmp_path):
    """The released config's rope_parameters beside its per-layer-type entries (transformers pops them)."""
    d = tmp_path / "c"
    shutil.copytree(COMPASS, d)
    cfg = json.loads((COMPASS / "config.json").read_text())
    cfg["rope_parameters"].update(rope_theta=1.0, rope_type="default")
    (d / "config.json").write_text(json.dumps(cfg))
    ids = np.load(COMPASS / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(d).logits(ids), _load(COMPASS).logits(ids))


def _compass(**changes):
    return _config(COMPASS, **changes)


def test_compass_defaults_are_transformers():
    d = _compass(logit_scale=None, num_hidden_layers=4, rope_parameters={"full_attention": {"rope_theta": 1e4}})
    del d["layer_types"]
    cfg = cohere_compass_text.Config.from_dict(d)
    assert cfg.types() == ["full_attention"] * 4 and cfg.logit_scale == 1.0 and cfg.rope_layer_types == [
        "full_attention"] and cfg.rope_theta == 1e4
    assert cohere_compass_text.Config.from_dict(cfg.to_dict()) == cfg       # a converted file's config


ROPE = {"rope_type": "default", "rope_theta": 5e4}


@pytest.mark.parametrize("changes, message", [
    (dict(rope_parameters=ROPE), "rope_parameters must be keyed by layer type"),
    (dict(rope_parameters=None), r"rope_parameters \(keyed by layer type\) is missing"),
    (dict(rope_parameters={"sliding_attention": ROPE}), "no entry for the layer type.s. full_attention"),
    (dict(rope_parameters={"sliding_attention": ROPE, "full_attention": dict(ROPE, rope_theta=1e6)}),
     "different RoPEs; the cohere_compass_text family uses one RoPE for all its layers"),
    (dict(head_dim=32), r"head_dim 32 is not hidden_size // num_attention_heads \(16\)"),
    (dict(sliding_window=0), "sliding layers need a positive sliding_window"),
])
def test_compass_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        cohere_compass_text.Config.from_dict(_compass(**changes))
