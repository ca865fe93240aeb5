"""The newdec group of issue 36 (tests/fixtures/hf5_newdec, made by transformers 5.25): what tests/test_hf_parity.py
(every position of the 35-token, 140-token and chat prompts; the greedy tokens; the quantized bounds), test_moe.py
(routing-aware bounds, plan = oracle, decode = prefill), test_verify_families.py (`petit verify` at f32 / q8_0 /
q4_0) do not already hold for every hf5 fixture.

- mistral4 and mistral3 over it (Mistral Small 4): what the family reads (the softmax router without a correction
  bias, groups, Llama 4's query scaling on the latent attention, in the plan too); partial_rotary_factor read as
  the rope part and refused otherwise; missing llama_4_scaling refused as transformers cannot run it.
- step3p7 over step3p5 (Step 3.7's language model): what the family reads (per-layer heads, sigmoid head gates,
  Gemma's norms, the scale, the clamps after the activation); the release's legacy config keys read as transformers
  reads them; a step3p5 folder runs the same numbers; the dense clamp, attention biases, other per-layer settings
  refused by name.
- GGUF (tests/fixtures/gguf5_newdec): llama.cpp's mistral4, step35 and muse-glimmer files as close as llama.cpp's
  own run, its exact logits with float32 activations, converted to .petit alike; what each reader takes from the
  metadata (mistral4's query scaling only with llama.cpp's keys), refusals by name.
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
ALL = [M4, M3M4, DIR / "step3p7", DIR / "step3p7_flash", DIR / "muse_glimmer"]
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


@pytest.mark.parametrize("folder", [M4, M3M4], ids=["mistral4", "mistral3_m4"])
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
    from petit.models.families.mla.mistral4 import Mistral4Config
    cfg = Mistral4Config.from_dict({"model_type": "mistral4"})
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.q_lora_rank, cfg.kv_lora_rank, cfg.n_routed_experts,
            cfg.num_experts_per_tok, cfg.first_k_dense_replace, cfg.routed_scaling_factor) == \
           (4096, 36, 1024, 256, 128, 4, 0, 1.0)
    assert cfg.rope_scaling["rope_type"] == "yarn" and cfg.rope_scaling["factor"] == 128.0
    assert cfg.llama_4_scaling == [0.1, 8192]


# --- Step 3.7's language model (step3p7 over step3p5) ---

STEP = DIR / "step3p7"


def test_step3p7_reads_laguna_with_steps_gates_norms_heads_and_clamps():
    m = _load(STEP)
    cfg, net = m.config, m.net
    assert (cfg.model_type, type(cfg).__name__, cfg.heads()) == ("step3p7", "Step3p7Config", [2, 4, 2])
    assert net.arch.attn_scale == pytest.approx(24 ** -0.5) and net.arch.num_attention_heads == 4
    assert [L.window for L in net.layers] == [8, 0, 8] and [L.rope.dim for L in net.layers] == [16, 8, 16]
    assert all(L.attn_gate_act == "sigmoid" and L.attn_gate.shape[0] == (L.heads or 4) for L in net.layers)
    assert net.layers[0].moe is None
    for i, L in enumerate(net.layers[1:], 1):
        moe = L.moe
        assert (moe.scoring, moe.routed_scale, moe.limit_after_act) == ("sigmoid", 1.5, True)
        assert (moe.swiglu_limit, moe.sh_swiglu_limit) == ([0.0, 0.0, 1.0][i], 1.0)
        assert moe.sel_bias is not None and moe.norm_topk


def _legacy_text_config(t: dict) -> dict:
    """The step3p7 fixture's text_config in the release's (remote code's) keys, as transformers reads them."""
    t = {k: v for k, v in t.items() if k not in ("rope_parameters", "per_layer_config", "mlp_layer_types",
                                                 "num_sliding_attention_heads", "num_key_value_heads",
                                                 "n_routed_experts", "num_experts_per_tok", "share_expert_dim")}
    types = t["layer_types"]
    return dict(t, rope_theta=[5e5 if k == "full_attention" else 1e4 for k in types] + [1e4],
                partial_rotary_factors=[0.5 if k == "full_attention" else 1.0 for k in types] + [1.0],
                layer_types=types + ["full_attention"], num_nextn_predict_layers=1, moe_layers_enum="1,2",
                attention_other_setting={"num_attention_heads": 2, "num_attention_groups": 2},
                num_attention_groups=2, moe_num_experts=8, moe_top_k=2, share_expert_dim=32,
                swiglu_limits=t["swiglu_limits"] + [0.0], swiglu_limits_shared=t["swiglu_limits_shared"] + [0.0])


def test_step3p7_reads_the_releases_legacy_keys_as_transformers_does(tmp_path):
    cfg = _config(STEP)
    d = _rewrite(STEP, tmp_path / "m", dict(cfg, text_config=_legacy_text_config(cfg["text_config"])))
    ids = np.load(STEP / "reference.npz")["input_ids"].tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        got = petit.load(d, weights="f32")
    assert got.config.heads() == [2, 4, 2] and got.config.mlp_layer_types == ["dense", "sparse", "sparse"]
    np.testing.assert_array_equal(got.logits(ids), _load(STEP).logits(ids))


def test_step3p5_is_the_text_model_alone(tmp_path):
    """A step3p5 folder (the text model's config at the top, the release's names) runs the wrapper's numbers."""
    cfg = _config(STEP)
    d = _rewrite(STEP, tmp_path / "m", dict(cfg["text_config"], architectures=["Step3p5ForCausalLM"]))
    ids = np.load(STEP / "reference.npz")["input_ids"].tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the tower's tensors, unknown to a text model, are reported
        got = petit.load(d, weights="f32")
    np.testing.assert_array_equal(got.logits(ids), _load(STEP).logits(ids))


@pytest.mark.parametrize("change, message", [
    ({"swiglu_limits_shared": [7.0, 1.0, 1.0]},
     r"swiglu_limits_shared\[0\] 7.0 clamps the dense layer 0's SwiGLU \(transformers' Step3p7MLP reads it there\), "
     r"which the step3p7 family does not run"),
    ({"attention_bias": True}, r"attention_bias true is not supported by the step3p7 family"),
    ({"per_layer_config": {"0": {"num_attention_heads": 2, "head_dim": 8}}},
     r"per_layer_config may give each layer its num_attention_heads only"),
])
def test_step3p7_refuses_what_it_cannot_run_exactly(tmp_path, change, message):
    cfg = _config(STEP)
    d = _rewrite(STEP, tmp_path / "m", dict(cfg, text_config=dict(cfg["text_config"], **change)))
    with pytest.raises(ValueError, match=message), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        petit.load(d, weights="f32")


# --- Muse Glimmer's language model (muse_glimmer over muse_glimmer_text) ---

GLIMMER = DIR / "muse_glimmer"


def test_muse_glimmer_reads_gemma2_with_glimmers_norms_gates_and_logits():
    m = _load(GLIMMER)
    cfg, net = m.config, m.net
    a = net.arch
    assert (cfg.model_type, cfg.types, cfg.layer_rope_theta) == (
        "muse_glimmer", ["sliding_attention", "sliding_attention", "full_attention"], [10000.0, 10000.0, 0])
    assert a.attn_scale == pytest.approx(3.0 / 4) and (a.logit_scale, a.logit_softcap) == (0.5, 20.0)
    assert a.embed_scale == 1.0 and net.embed_norm.w is None and net.final_norm.w is not None
    assert [L.window for L in net.layers] == [8, 8, 0] and net.layers[2].rope is None
    for L in net.layers:
        assert L.q_norm.w is None and L.k_norm.w is None and L.attn_gate.shape == (64, 64)
        assert (L.post_attn_norm.eps, L.post_mlp_norm.eps, L.attn_norm.eps) == (1e-6, 1e-6, 1e-5)


def test_muse_glimmer_text_is_the_text_model_alone(tmp_path):
    """A muse_glimmer_text folder (the text config at the top, the text model's names) runs the wrapper's numbers."""
    from models import write_f32_safetensors
    from test_moe_a5 import _read_safetensors
    d = tmp_path / "t"
    shutil.copytree(GLIMMER, d)
    src = _read_safetensors(GLIMMER / "model.safetensors")
    write_f32_safetensors(d / "model.safetensors", {
        n.replace("model.language_model.", "model."): a for n, a in src.items()
        if n.startswith("model.language_model.") or n == "lm_head.weight"})
    (d / "config.json").write_text(json.dumps(dict(_config(GLIMMER)["text_config"], model_type="muse_glimmer_text")))
    ids = np.load(GLIMMER / "reference.npz")["input_ids"].tolist()
    np.testing.assert_array_equal(_load(d).logits(ids), _load(GLIMMER).logits(ids))


@pytest.mark.parametrize("change, message", [
    ({"layer_rope_theta": [1e4, 0]}, r"layer_rope_theta must list 3 thetas >= 0 \(0: no RoPE\), got \[10000.0, 0\]"),
    ({"hidden_activation": "relu6"}, r"hidden_activation 'relu6' is not supported by the muse_glimmer family"),
])
def test_muse_glimmer_refuses_what_it_cannot_run(tmp_path, change, message):
    cfg = _config(GLIMMER)
    d = _rewrite(GLIMMER, tmp_path / "m", dict(cfg, text_config=dict(cfg["text_config"], **change)))
    with pytest.raises(ValueError, match=message), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        petit.load(d, weights="f32")


# --- GGUF: llama.cpp's own conversions of these folders (tests/fixtures/gguf5_newdec, its README says how) ---

GGUF = Path(__file__).parent / "fixtures" / "gguf5_newdec"
GGUF_CASES = GGUF_READ = ["mistral3_m4", "step3p7_flash", "muse_glimmer"]      # GGUF_READ: tests/test_gguf5_exact.py's
GGUF_MANIFEST = json.loads((GGUF / "manifest.json").read_text())["cases"]
GGUF_FAMILY = {"mistral3_m4": "mistral4", "step3p7_flash": "step3p5", "muse_glimmer": "muse_glimmer_text"}


def _gguf(case, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return petit.load(GGUF / case / "q8_0.gguf", **kw)


@pytest.mark.parametrize("case", GGUF_CASES)
def test_gguf_as_stored_is_as_close_as_llama_cpps_own_run(case):
    from models import assert_as_close_as_llama_cpps_own_run
    model = _gguf(case)
    assert model.weight_type == "q8_0" and model.config.model_type == GGUF_FAMILY[case]
    assert_as_close_as_llama_cpps_own_run(model, np.load(GGUF / case / "q8_0.npz"))


@pytest.mark.parametrize("case", GGUF_CASES)
def test_gguf_with_float32_activations_is_llama_cpps_exact_run(case):
    """The q8_0 weights decoded, run in float32: llama.cpp's exact logits of the same file at every position
    (measured 6.1e-7 / 2.1e-7 / 1.6e-7 of the range)."""
    from models import range_err
    ref = np.load(GGUF / case / "q8_0.npz")
    assert range_err(_gguf(case, weights="f32").logits(ref["input_ids"]), ref["exact_logits"]) <= 2e-6


@pytest.mark.parametrize("case", GGUF_CASES)
def test_gguf_converts_to_a_petit_file_with_the_same_logits(tmp_path, case):
    from petit.cli import main
    ref = np.load(GGUF / case / "q8_0.npz")
    assert main(["convert", str(GGUF / case / "q8_0.gguf"), "-o", str(tmp_path / "m.petit"), "--f32"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = petit.load(tmp_path / "m.petit").logits(ref["input_ids"])
    np.testing.assert_array_equal(got, _gguf(case, weights="f32").logits(ref["input_ids"]))


def _rewrite_gguf(tmp_path, case, drop=(), **add):
    from petit.formats.gguf import GGUFFile, write_gguf
    with GGUFFile(GGUF / case / "q8_0.gguf") as f:
        meta = {k: v for k, v in f.metadata.items() if k not in drop}
        meta.update(add)
        write_gguf(tmp_path / "x.gguf", meta, {n: (t.type, t.shape, np.array(f.raw(n))) for n, t in f.tensors.items()})
    return tmp_path / "x.gguf"


def test_gguf_mistral4_reads_what_llama_cpp_runs():
    """No attention.temperature_scale (llama.cpp's converter of Hugging Face folders writes none): no query
    scaling, as llama.cpp; softmax routing within groups, no selection bias, yarn's mscale."""
    m = _gguf("mistral3_m4", weights="f32")
    cfg = m.config
    assert cfg.llama_4_scaling == [0.0, 1] and all(L.temperature is None for L in m.net.layers)
    assert (cfg.n_group, cfg.topk_group, cfg.routed_scaling_factor, cfg.norm_topk_prob) == (2, 1, 1.5, True)
    assert cfg.rope_scaling["rope_type"] == "yarn" and cfg.rope_scaling["mscale_all_dim"] == pytest.approx(1.0)
    assert all(L.moe.sel_bias is None and L.moe.scoring == "softmax" for L in m.net.layers[1:])


def test_gguf_mistral4_with_the_temperature_keys_scales_its_queries(tmp_path):
    """A file with attention.temperature_scale / _length (conversion/mistral.py writes them): llama.cpp's scaling,
    floor(p / n) (offset 0), read as the family's llama_4_scaling; the folder's transformers logits then."""
    x = _rewrite_gguf(tmp_path, "mistral3_m4", **{"mistral4.attention.temperature_scale": np.float32(0.1),
                                                  "mistral4.attention.temperature_length": np.uint32(32)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = petit.load(x, weights="f32")
    assert m.config.llama_4_scaling == [pytest.approx(0.1), 32]
    assert all(L.temperature == (32.0, pytest.approx(0.1), 1) for L in m.net.layers)
    ref = np.load(M3M4 / "reference_long.npz")
    base = _gguf("mistral3_m4", weights="f32").logits(ref["input_ids"])
    got = m.logits(ref["input_ids"])
    assert np.abs(got[:32] - base[:32]).max() == 0 and np.abs(got[32:] - base[32:]).max() > 1e-3


def test_gguf_step35_reads_the_layers_heads_rope_and_clamps():
    m = _gguf("step3p7_flash", weights="f32")
    cfg, net = m.config, m.net
    assert cfg.heads() == [4, 2, 2] and cfg.types() == ["full_attention", "sliding_attention", "sliding_attention"]
    assert [L.rope.dim for L in net.layers] == [8, 16, 16] and not net.layers[0].rope.interleaved
    assert (cfg.swiglu_limits, cfg.swiglu_limits_shared) == ([0.0, 0.0, 1.0], [0.0, 1.0, 1.0])
    assert net.arch.attn_scale == pytest.approx(16 ** -0.5) and cfg.moe_router_scaling_factor == 1.5


def test_gguf_muse_glimmer_reads_the_stored_qk_norms():
    """q's norm holds qk_scale_factor (3) in every value, k's ones: read as weights, the family's factor 1."""
    m = _gguf("muse_glimmer", weights="f32")
    cfg, net = m.config, m.net
    assert (cfg.qk_scale_factor, cfg.post_norm_eps, cfg.rope_interleaved, cfg.layer_rope_theta) == (
        1.0, 1e-8, True, [10000.0, 10000.0, 0])
    assert net.arch.attn_scale == pytest.approx(0.25)
    assert all(L.q_norm.w is not None and L.k_norm.w is not None for L in net.layers)


@pytest.mark.parametrize("case, drop, message", [
    ("step3p7_flash", ("step35.expert_weights_norm",), r"'step35.expert_weights_norm' is absent or false: llama.cpp "
                                                       r"then does not renormalise"),
    ("muse_glimmer", ("muse-glimmer.attention.sliding_window_pattern",),
     r"'muse-glimmer.attention.sliding_window_pattern' should list a flag a layer"),
])
def test_gguf_refuses_what_llama_cpp_runs_otherwise(tmp_path, case, drop, message):
    x = _rewrite_gguf(tmp_path, case, drop=drop)
    with pytest.raises(ValueError, match=message):
        petit.load(x, weights="f32")
