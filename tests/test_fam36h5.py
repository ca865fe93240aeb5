"""The fam36h group of issue 36 (tests/fixtures/hf5_fam36h, made by transformers 5.25): Hy3 (hy_v3). What
tests/test_hf_parity.py (every position of the 35 / 140-token and chat prompts), test_moe.py (routing-aware quantized
bounds, plan = per-op), test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0) and test_ctx_shift.py do not
already hold:

- The greedy continuation equals transformers'.
- Hy3: what the family reads (per-head q / k norms, biases, the dense first layer, sigmoid + bias routing x
  router_scaling_factor over the sum + 1e-20, the ungated shared expert), the names transformers saves and its
  modules' read the same, its defaults (mlp_layer_types, num_local_experts, the shared width) and refusals by name.
- A converted `.petit` file of each reloads and runs the same numbers.
"""
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from petit.models import hy_v3
from models import load_strict as _load
from test_moe_a5 import _read_safetensors, _write_safetensors

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36h"
HY = DIR / "hy_v3"
FOLDERS = pytest.mark.parametrize("folder", [HY], ids=["hy_v3"])


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
