"""The fam36h group of issue 36 (tests/fixtures/hf5_fam36h, made by transformers 5.25): Hy3 (hy_v3) and Dory. What
tests/test_hf_parity.py (every position of the 35 / 140-token and chat prompts), test_moe.py (routing-aware quantized
bounds, plan = per-op), test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0) and test_ctx_shift.py do not
already hold:

- The greedy continuation equals transformers'.
- Hy3: what the family reads (per-head q / k norms, biases, the dense first layer, sigmoid + bias routing x
  router_scaling_factor over the sum + 1e-20, the ungated shared expert), the names transformers saves and its
  modules' read the same, its defaults (mlp_layer_types, num_local_experts, the shared width) and refusals by name.
- Dory: the loops unrolled into layers sharing weights (each pass its own cache rows), the one-call plan equal to
  the per-op path bit for bit, the three tensor layouts transformers reads (released two-block, what its
  save_pretrained writes, its modules') and both config layouts giving the same model, other section layouts (no
  input section, no recurrent layer, three passes) within 1e-5 of the float64 reference, the refusals by name.
- A converted `.petit` file of each reloads and runs the same numbers.
"""
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from petit.models import dory, hy_v3
from models import load_strict as _load
from test_moe_a5 import _read_safetensors, _write_safetensors
from test_plan import _assert_same

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36h"
HY, DORY = DIR / "hy_v3", DIR / "dory"
FOLDERS = pytest.mark.parametrize("folder", [HY, DORY], ids=["hy_v3", "dory"])


@FOLDERS
def test_greedy_continuation_equals_transformers(folder):
    ref = np.load(folder / "reference.npz")
    model = _load(folder)
    ids = list(ref["input_ids"])
    for want in ref["greedy"]:
        got = int(np.argmax(model.logits(np.array(ids))[-1]))
        assert got == want
        ids.append(got)


@FOLDERS
def test_converted_file_runs_the_same_numbers(tmp_path, folder):
    from petit.cli import main
    out = tmp_path / "m.petit"
    assert main(["convert", str(folder), "-o", str(out), "--f32"]) == 0
    ids = np.load(folder / "reference.npz")["input_ids"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(_load(out).logits(ids), _load(folder).logits(ids))


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
    d = tmp_path / "h"
    shutil.copytree(HY, d)
    raw = _read_safetensors(HY / "model.safetensors")
    renamed = {}
    for k, v in raw.items():
        for saved, module in MODULE_NAMES.items():
            k = k.replace(saved, module)
        renamed[k] = v
    assert len(renamed) == len(raw) and not any(s in k for k in renamed for s in MODULE_NAMES)
    _write_safetensors(d / "model.safetensors", renamed)
    ids = np.load(HY / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(d).logits(ids), _load(HY).logits(ids))


def _hy(**changes):
    d = json.loads((HY / "config.json").read_text())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


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
    d = tmp_path / "d"
    shutil.copytree(DORY, d)
    raw = _read_safetensors(DORY / "model.safetensors")
    renamed = {LAYOUTS[layout](k): v for k, v in raw.items()}
    assert len(renamed) == len(raw) and renamed.keys() != raw.keys()
    _write_safetensors(d / "model.safetensors", renamed)
    ids = np.load(DORY / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(d).logits(ids), _load(DORY).logits(ids))


def _dory(**changes):
    d = json.loads((DORY / "config.json").read_text())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


def _modules_config():
    """The fixture's config in the modules' layout (one entry a layer, the counts halved): what DoryConfig holds."""
    d = _dory()
    d["layer_types"] = d["layer_types"][::2]
    for k in dory.COUNTS:
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
