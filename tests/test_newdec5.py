"""The newdec group of issue 36 (tests/fixtures/hf5_newdec, made by transformers 5.25): what tests/test_hf_parity.py
(every position of the 35-token, 140-token and chat prompts; the greedy tokens; the quantized bounds), test_moe.py
(routing-aware bounds, plan = oracle, decode = prefill), test_verify_families.py (`petit verify` at f32 / q8_0 /
q4_0) do not already hold for every hf5 fixture.

- mistral4 and mistral3 over it (Mistral Small 4): what the family reads (the softmax router without a correction
  bias, groups, Llama 4's query scaling on the latent attention, in the plan too); partial_rotary_factor read as
  the rope part and refused otherwise; missing llama_4_scaling refused as transformers cannot run it.
- A converted `.petit` file of each reloads and runs the same numbers; the plan is the per-op path bit for bit.
"""
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from models import TOWER_NOT_RUN
from test_plan import _assert_same

DIR = Path(__file__).parent / "fixtures" / "hf5_newdec"
M4, M3M4 = DIR / "mistral4", DIR / "mistral3_m4"
ALL = [M4, M3M4]
FOLDERS = pytest.mark.parametrize("folder", ALL, ids=[p.name for p in ALL])


def _load(folder, weights="f32"):
    """petit.load with every warning an error but the wrapper's one (its tower is not run)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        return petit.load(folder, weights=weights)


@FOLDERS
def test_converted_file_runs_the_same_numbers(tmp_path, folder):
    """tests/models.py's converted_runs_the_same, the wrapper's tower warning let through on the folder."""
    from petit.cli import main
    out, ids = tmp_path / "converted.petit", np.load(folder / "reference.npz")["input_ids"]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        assert main(["convert", str(folder), "-o", str(out), "--f32"]) == 0
    np.testing.assert_array_equal(_load(out).logits(ids), _load(folder).logits(ids))


@FOLDERS
@pytest.mark.parametrize("weights, kv_type", [("f32", "f32"), ("q8_0", "int8")])
def test_the_plan_is_the_per_op_path_bit_for_bit(folder, weights, kv_type):
    """tests/test_plan.py's check over this group's fixtures: the latent attention's query scaling rides the plan."""
    _assert_same(_load(folder, weights), kv_type)


def _rewrite(folder, dest, config):
    shutil.copytree(folder, dest)
    (dest / "config.json").write_text(json.dumps(config))
    return dest


def _config(folder):
    return json.loads((folder / "config.json").read_text())


@FOLDERS
def test_mistral4_reads_deepseek_v3_with_a_softmax_router_and_scaled_queries(folder):
    m = _load(folder)
    cfg, net = m.config, m.net
    assert (cfg.llama_4_scaling, cfg.n_group, cfg.topk_group) == ([0.1, 32], 2, 1)
    assert all(L.temperature == (32.0, 0.1, 1) and L.mla is not None for L in net.layers)
    assert net.layers[0].moe is None
    for L in net.layers[1:]:
        moe = L.moe
        assert (moe.scoring, moe.group_score, moe.n_group, moe.topk_group, moe.routed_scale) == \
               ("softmax", "top2_sum", 2, 1, 1.5)
        assert moe.sel_bias is None and moe.norm_topk
    if folder == M3M4:
        assert (cfg.model_type, cfg.text_model_type, type(cfg).__name__) == ("mistral3", "mistral4", "Mistral3M4Config")


def test_mistral4_without_query_scaling_changes_the_logits(tmp_path):
    cfg = _config(M4)
    rp = dict(cfg["rope_parameters"], llama_4_scaling_beta=0.0)
    d = _rewrite(M4, tmp_path / "m", dict(cfg, rope_parameters=rp))
    ids = np.load(M4 / "reference_long.npz")["input_ids"].tolist()
    want = np.load(M4 / "reference_long.npz")["logits"]
    m = petit.load(d, weights="f32")
    assert all(L.temperature is None for L in m.net.layers)
    assert np.abs(m.logits(ids) - want).max() > 1e-2


@pytest.mark.parametrize("rope, message", [
    ({"partial_rotary_factor": 0.5},
     r"partial_rotary_factor 0.5 rotates 24 of each head's 48 dims; the mistral4 family rotates the latent "
     r"attention's rope part, qk_rope_head_dim 16 \(partial_rotary_factor 16/48\)"),
    ({"llama_4_scaling_beta": None},
     r"mistral4 scales its queries by rope_parameters' llama_4_scaling_beta and original_max_position_embeddings "
     r"\(> 0\); this config gives \[None, 32\]"),
])
def test_mistral4_refuses_what_it_cannot_run_exactly(tmp_path, rope, message):
    cfg = _config(M4)
    rp = {k: v for k, v in dict(cfg["rope_parameters"], **rope).items() if v is not None}
    d = _rewrite(M4, tmp_path / "m", dict(cfg, rope_parameters=rp))
    with pytest.raises(ValueError, match=message):
        petit.load(d, weights="f32")


def test_mistral4_defaults_are_mistral_small_4s():
    from petit.models.mistral4 import Mistral4Config
    cfg = Mistral4Config.from_dict({"model_type": "mistral4"})
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.q_lora_rank, cfg.kv_lora_rank, cfg.n_routed_experts,
            cfg.num_experts_per_tok, cfg.first_k_dense_replace, cfg.routed_scaling_factor) == \
           (4096, 36, 1024, 256, 128, 4, 0, 1.0)
    assert cfg.rope_scaling["rope_type"] == "yarn" and cfg.rope_scaling["factor"] == 128.0
    assert cfg.llama_4_scaling == [0.1, 8192]
