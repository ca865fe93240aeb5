"""Every family's config from a config.json that gives only the required keys: the defaults it falls back to (each
family keeps transformers' own, which differ per family) and the fields it accepts must stay what they were.

`fixtures/model_config_defaults.json` was written by `resolved()` below from the family dataclasses as they were
before the families shared `DecoderConfig` (commit d00db4c), and is not regenerated from the code under test: a
default that moves, a field a family gains or loses (a key it would then accept or warn about), or a derived value
that changes (`act`, `rotary_dim`, ...) fails here. Values are compared by `repr`, so 10000 (int) is not 10000.0.
"""
import dataclasses
import json
import warnings
from pathlib import Path

import pytest

from petit.models import MODEL_TYPES, MULTIMODAL_ROWS, get_family

EXPECTED = Path(__file__).parent / "fixtures" / "model_config_defaults.json"

# the required keys only; 32 heads of 64 because StableLM's default num_key_value_heads is 32 (heads must divide by it)
MINIMAL = {"vocab_size": 1000, "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 4,
           "num_attention_heads": 32}
MINIMAL_GPT2 = {"vocab_size": 1000, "n_embd": 2048, "n_layer": 4, "n_head": 32}
MINIMAL_SSM = {"vocab_size": 1000, "hidden_size": 2048, "num_hidden_layers": 4}     # Mamba: no attention, no MLP
# Mamba-2's default heads (128 x 64) need hidden_size 4096 (its default) at expand 2
MINIMALS = {"gpt2": MINIMAL_GPT2, "mamba": MINIMAL_SSM, "falcon_mamba": MINIMAL_SSM,
            "mamba2": dict(MINIMAL_SSM, hidden_size=4096),
            "granitemoehybrid": dict(MINIMAL, layer_types=["mamba", "attention", "mamba", "mamba"]),
            # GPT-2's names (GPT-J, CodeGen, GPT-BigCode), GPT-Neo's (24 layers: its default attention_types), BLOOM's,
            # MPT's and OPT's (its ffn_dim)
            "gptj": MINIMAL_GPT2, "codegen": MINIMAL_GPT2, "gpt_bigcode": MINIMAL_GPT2,
            "gpt_neo": {"vocab_size": 1000, "hidden_size": 2048, "num_layers": 24, "num_heads": 32},
            "falcon": {k: MINIMAL[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")},
            "bloom": {"vocab_size": 1000, "hidden_size": 2048, "n_layer": 4, "n_head": 32},
            "mpt": {"vocab_size": 1000, "d_model": 2048, "n_heads": 32, "n_layers": 4},
            "dbrx": {"vocab_size": 1000, "d_model": 2048, "n_heads": 16, "n_layers": 4},
            "opt": {"vocab_size": 1000, "hidden_size": 2048, "ffn_dim": 5632, "num_hidden_layers": 4,
                    "num_attention_heads": 32},
            "openai-gpt": MINIMAL_GPT2,         # issue 36, the fam36a group: GPT-2's names
            "xglm": {"vocab_size": 1000, "d_model": 2048, "ffn_dim": 5632, "num_layers": 4, "attention_heads": 32},
            "biogpt": {k: MINIMAL[k] for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                               "num_attention_heads")},
            "bitnet": dict(MINIMAL, hidden_size=2560, num_attention_heads=20),   # its default 5 kv heads
            "nemotron_h": dict(MINIMAL_SSM, hybrid_override_pattern="M-*M"),    # the block pattern is required
            "internlm2": dict(MINIMAL, bias=False),      # its remote config's default bias true is refused
            # issue 30, the gemma group: Gemma 3n's default 15 KV-sharing layers need more than 4 layers
            "gemma3n_text": dict(MINIMAL, num_kv_shared_layers=2), "gemma3n": dict(MINIMAL, num_kv_shared_layers=2),
            # issue 30, the moe_b group: LFM2-MoE's layer_types has no default
            "lfm2_moe": dict(MINIMAL, layer_types=["conv", "conv", "full_attention", "conv"])}
# issue 30, moe_a: Qwen3.5-MoE reads no intermediate_size (every layer routes; the key would be reported)
MINIMALS.update({t: {k: v for k, v in MINIMAL.items() if k != "intermediate_size"}
                 for t in ("qwen3_5_moe_text", "qwen3_5_moe")})
# issue 30, the hybrid group: Zamba2's default layer pattern is 54 layers long
MINIMALS.update({"zamba2": dict(MINIMAL, layers_block_type=["mamba", "hybrid", "mamba", "hybrid"])})
MINIMALS["dots1"] = dict(MINIMAL, n_routed_experts=8, num_experts_per_tok=2)     # no default expert count
MINIMALS["rwkv7"] = MINIMAL_SSM                        # fla's config: num_heads, no num_attention_heads
MINIMALS["rwkv"] = MINIMAL_SSM                         # RWKV-4: no heads
# issue 30, the dsv4 group: DeepSeek-V4 reads no intermediate_size (its experts' width is moe_intermediate_size)
MINIMALS["deepseek_v4"] = {k: v for k, v in MINIMAL.items() if k != "intermediate_size"}
# issue 36, fam36b: GPT-NeoX-Japanese derives its MLP width from intermediate_multiple_size
MINIMALS["gpt_neox_japanese"] = {k: v for k, v in MINIMAL.items() if k != "intermediate_size"}
MINIMALS["mellum"] = MINIMAL                             # Mellum: Qwen3-MoE's names
MINIMALS["ctrl"] = MINIMAL_GPT2                         # CTRL: GPT-2's names, its MLP width dff (default 8192)
# issue 36, fam36e: Kolibri 1 reads no intermediate_size (every layer routes; the key would be reported)
MINIMALS["kolibri1"] = {k: v for k, v in MINIMAL.items() if k != "intermediate_size"}
# issue 36, fam36c: GLM-4.5's and DeepSeek-V3's keys (their 32 default heads of 64 fit MINIMAL)
MINIMALS.update(dict.fromkeys(("sarvam_moe", "param2moe", "sarvam_mla"), MINIMAL))
# issue 36, fam36i: Cohere Compass's RoPE is keyed by layer type (transformers builds no model without it)
MINIMALS["cohere_compass_text"] = dict(MINIMAL, rope_parameters={"full_attention": None})
# issue 36, fam36h: Dory's default 8 input and 8 output layers need more than 4 layers
MINIMALS["dory"] = dict(MINIMAL, n_input_layers=1, n_output_layers=1)
# Ergo's dense MLPs read first_dense_intermediate_size (intermediate_size would be reported)
MINIMALS["ergo"] = {k: v for k, v in MINIMAL.items() if k != "intermediate_size"}
# issue 36, fam36g: A.X-K1's default 64 kv heads (unused by its latent attention) must divide the 32 heads
MINIMALS["axk1"] = dict(MINIMAL, num_key_value_heads=32)
MINIMALS["laguna"] = MINIMAL                            # Laguna: Qwen2-MoE's keys and its own
MINIMALS["zaya"] = {k: v for k, v in MINIMAL.items() if k != "intermediate_size"}    # no dense MLP: it would be reported
# issue 36, fam36k: Lara 4 Mini reads no intermediate_size (every layer routes; the key would be reported)
MINIMALS["lara_mini"] = {k: v for k, v in MINIMAL.items() if k != "intermediate_size"}
# issue 36, fam36k: Dots 3's latent attention wants as many kv heads as heads (its default 128 kv heads)
MINIMALS.update(dict.fromkeys(("dots3_note_text", "dots3_note"), dict(MINIMAL, num_key_value_heads=32)))
# issue 36, fam36n: xLSTM reads no attention heads or intermediate_size (its own num_heads, ffn_proj_factor)
MINIMALS["xlstm"] = MINIMAL_SSM
MINIMALS["inkling_text"] = MINIMAL       # issue 36, fam36l: Inkling's keys (its 8 kv heads and swa 64 / 16 fit MINIMAL)
MINIMALS["inkling2_text"] = MINIMAL      # Inkling 2 reads intermediate_size as its experts' width (transformers' alias)
MINIMALS["inkling2_loop_text"] = dict(MINIMAL, num_hidden_layers=24)    # its default loop: layers 6-17
MINIMALS["hrm_text"] = MINIMAL           # issue 36, fam36o: num_hidden_layers the stack's (4), rewritten to the passes'
# issue 36, the q4exp group: Qwen4-Exp reads no intermediate_size (every layer routes), and its attention layer (the
# 4th by default) needs the QSA indexer's fields
MINIMALS.update({t: dict({k: v for k, v in MINIMAL.items() if k != "intermediate_size"}, indexer_n_heads=4,
                         indexer_kv_heads=1, indexer_head_dim=128, indexer_budget=2048, indexer_compress_ratio=4)
                 for t in ("qwen4_exp_text", "qwen4_exp")})
# issue 36, the qwenvl group: Qwen2-VL's default mrope_section [16, 24, 24] splits heads of 128 (MINIMAL's are 64)
MINIMALS.update({t: dict(MINIMAL, rope_parameters={"rope_type": "default", "mrope_section": [8, 12, 12]})
                 for t in ("qwen2_vl_text", "qwen2_vl", "qwen2_5_vl_text", "qwen2_5_vl", "qwen2_5_omni_text",
                           "qwen2_5_omni_thinker", "qwen2_5_omni")})
# GLM-4.5V's default [8, 12, 12] splits 64 rotary dims: MINIMAL's 64-wide heads at partial_rotary_factor 0.5 rotate 32
MINIMALS.update({t: dict(MINIMAL, rope_parameters={"rope_type": "default", "mrope_section": [4, 6, 6]})
                 for t in ("glm4v_moe_text", "glm4v_moe")})
# issue 36, the vlnew group: transformers runs HunyuanOCR's text model only with its XD-RoPE sections
MINIMALS.update(dict.fromkeys(("hunyuan_vl_text", "hunyuan_vl"), dict(MINIMAL, rope_parameters={
    "rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 8, 8, 8]})))
# Kosmos-2's language model: fairseq's names
MINIMALS.update(dict.fromkeys(("kosmos_2_text_model", "kosmos-2"), {"vocab_size": 1000, "embed_dim": 2048,
                                                                    "ffn_dim": 5632, "layers": 4,
                                                                    "attention_heads": 32}))
# DeepSeek-OCR-2's text config has no default top k or layer kinds (transformers builds no model without them)
MINIMALS.update(dict.fromkeys(("deepseek_ocr2_text", "deepseek_ocr2"), dict(
    MINIMAL, num_experts_per_tok=6, mlp_layer_types=["dense", "sparse", "sparse", "sparse"])))


def declared(model_type: str) -> dict:
    """{field: repr(its declared default)}, "required" for a field without one (a default of None is derived by
    _validate, so the built config alone would not show it)."""
    out = {}
    for f in dataclasses.fields(get_family(model_type).Config):
        if f.default is not dataclasses.MISSING:
            out[f.name] = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = repr(f.default_factory())
        else:
            out[f.name] = "required"
    return dict(sorted(out.items()))


def resolved(model_type: str) -> dict:
    """{"required": the keys from_dict insists on, "declared": the declared defaults, and of the config built from
    the minimal dict, "fields": its dataclass fields (what to_dict writes) and "derived": the other attributes
    _validate sets}, values as repr strings."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # the minimal dict must not hit an "ignoring unknown key" report
        cfg = get_family(model_type).Config.from_dict(dict(MINIMALS.get(model_type, MINIMAL)))
    fields = cfg.to_dict()
    derived = {k: v for k, v in vars(cfg).items() if k not in fields and k != "unknown_keys"}
    assert cfg.unknown_keys == []
    return {"required": list(type(cfg)._REQUIRED), "declared": declared(model_type),
            "fields": {k: repr(v) for k, v in sorted(fields.items())},
            "derived": {k: repr(v) for k, v in sorted(derived.items())}}


# the rows of the multimodal table (issue 36) have their text family's config, which the table holds
FAMILIES = sorted(set(MODEL_TYPES) - set(MULTIMODAL_ROWS))


def test_the_table_covers_every_family():
    assert sorted(json.loads(EXPECTED.read_text(encoding="utf-8"))) == FAMILIES


@pytest.mark.parametrize("model_type", FAMILIES)
def test_defaults_and_fields_unchanged(model_type):
    want = json.loads(EXPECTED.read_text(encoding="utf-8"))[model_type]
    got = resolved(model_type)
    assert got["required"] == want["required"]
    assert got["declared"] == want["declared"]
    assert sorted(got["fields"]) == sorted(want["fields"]), "the fields the family accepts changed"
    assert got["fields"] == want["fields"]
    assert got["derived"] == want["derived"]


def test_llama_tensor_shapes_list_every_tensor_the_builder_reads(tmp_path):
    """tests/models.py writes a model from tensor_shapes; with every bias switched on, the engine must load it (no
    tensor missing, none left over) and run the gate bias too."""
    import petit
    from petit.models.families.dense.llama import LlamaConfig, tensor_shapes
    from tests.models import TINY, write_model
    cfg = dict(TINY, attention_bias=True, mlp_bias=True)
    _, weights = write_model(tmp_path / "m.petit", cfg)
    assert set(weights) == set(tensor_shapes(LlamaConfig.from_dict(cfg)))
    model = petit.load(tmp_path / "m.petit", weights="f32")
    try:
        assert model.net.layers[0].gate_b.a.tolist() == weights["model.layers.0.mlp.gate_proj.bias"].tolist()
        assert sorted(model.tensors) == sorted(weights)
    finally:
        model.close()


@pytest.mark.parametrize("model_type", ["llama", "granite", "olmo2", "smollm3"])
def test_every_family_on_llamaconfig_honours_rope_interleaved(model_type, tmp_path):
    """Petit's own rope_interleaved key is a field of every family built on LlamaConfig; Granite, OLMo 2 and
    SmolLM3 inherited it and ignored it (the review's appendix)."""
    import shutil

    import petit
    case = {"llama": "llama", "granite": "granite", "olmo2": "olmo2", "smollm3": "smollm3"}[model_type]
    folder = tmp_path / case
    shutil.copytree(Path(__file__).parent / "fixtures" / "hf" / case, folder)
    config = json.loads((folder / "config.json").read_text())
    config["rope_interleaved"] = True
    (folder / "config.json").write_text(json.dumps(config))
    model = petit.load(folder, weights="f32")
    ropes = [layer.rope for layer in model.net.layers if layer.rope is not None]
    assert ropes and all(r.interleaved for r in ropes)
