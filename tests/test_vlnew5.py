"""The vlnew group of issue 36 (tests/fixtures/hf5_vlnew: multimodal checkpoints whose language model is a text type
Petit did not run before, made by transformers 5.25's wrapper classes with a tiny tower, text-only prompts): what
tests/test_hf_parity.py (f32 at every position of the three prompts, greedy, q8_0 / q4_0 bounds),
test_verify_families.py and the app's chat test do not already hold.

- Each checkpoint says once that its tower is not run, and nothing else; a tensor outside its tower and text model,
  or a top-level key it does not know, is reported.
- The one-call forward plan equals the per-op path bit for bit (f32 and q8_0 weights, f32 and int8 caches).
- The text type alone (text_config with its own model_type, the text model's tensors under their own names) runs the
  same logits: that is how each `*_text` family is checked against transformers.
- Both spellings of a wrapper's names (as save_pretrained writes them and as transformers 5's modules name them).
- A converted `.petit` is a file of the text model (no tower tensor, no warning) with the same logits.
- Each family's own points (flat released configs, ties, refusals by name).
"""
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.loading.convert import convert
from petit.models import get_family
from models import TOWER_NOT_RUN, load_strict, rel_err, write_f32_safetensors
from test_moe_a5 import _read_safetensors
from test_plan import _assert_same
from test_wrap5 import _rewrite

DIR = Path(__file__).parent / "fixtures" / "hf5_vlnew"
CASES = ["paddleocr_vl", "ernie4_5_vl_moe", "glm_ocr", "hunyuan_vl", "hunyuan_vl_nobias", "granite4_vision", "granite_docling",
         "cosmos3_edge", "molmo2", "molmo2_post", "deepseek_ocr2",
         "deepseek_ocr2_mha", "hy_v4_vl"]
F32_TOL = 1e-4
# where each wrapper keeps its text model as save_pretrained writes it, and as transformers 5's modules name it
# ((stored prefix, module prefix), ...; the first pair whose stored prefix matches renames a tensor)
SPELLINGS = {
    "paddleocr_vl": (("model.", "model.language_model."), ("visual.", "model.visual."), ("mlp_AR.", "model.projector."),
                     ("lm_head.", "lm_head.")),
    "glm_ocr": (("model.language_model.", "language_model.model."), ("model.visual.", "visual."),
                ("lm_head.", "language_model.lm_head.")),
    "hunyuan_vl": (("model.", "model.language_model."), ("vit.", "model.vit.")),
    "deepseek_ocr2": (("model.sam_model.", "model.vision_tower.sam_model."), ("model.qwen2_model.",
                      "model.vision_tower.qwen2_model."), ("model.projector.", "model.multi_modal_projector."),
                      ("model.view_seperator", "model.view_separator"), ("model.", "model.language_model."),
                      ("lm_head.", "lm_head.")),
    "hy_v4_vl": (("model.", "model.language_model."), ("vit.", "model.vision_tower."), ("lm_head.", "lm_head.")),
    "cosmos3_edge": (("embed_tokens.", "model.language_model.embed_tokens."), ("norm.", "model.language_model.norm."),
                     ("model.", "model."), ("lm_head.", "lm_head.")) + tuple(
        (f"layers.{i}.{a}", f"model.language_model.layers.{i}.{b}") for i in range(3) for a, b in (
            ("self_attn.to_q.", "self_attn.q_proj."), ("self_attn.to_k.", "self_attn.k_proj."),
            ("self_attn.to_v.", "self_attn.v_proj."), ("self_attn.to_out.", "self_attn.o_proj."),
            ("mlp.up_proj.", "mlp.fc1."), ("mlp.down_proj.", "mlp.fc2."), ("", ""))),
    "granite4_vision": (("model.language_model.", "language_model.model."), ("model.", ""),
                        ("lm_head.", "language_model.lm_head.")),
}
# the text model's tensors as stored (besides lm_head.weight), and the tower's
TEXT_PREFIX = {"paddleocr_vl": "model.", "ernie4_5_vl_moe": "model.", "hunyuan_vl_nobias": "model.", "glm_ocr": "model.language_model.", "hunyuan_vl": "model.",
               "granite4_vision": "model.language_model.", "granite_docling": "model.text_model.",
               "cosmos3_edge": "", "molmo2": "model.", "molmo2_post": "model.",
               "deepseek_ocr2": "model.", "deepseek_ocr2_mha": "model.", "hy_v4_vl": "model."}
TOWER = {"paddleocr_vl": ("visual.", "mlp_AR."), "ernie4_5_vl_moe": ("model.vision_model.", "model.resampler_model."), "glm_ocr": ("model.visual.",), "hunyuan_vl": ("vit.",), "hunyuan_vl_nobias": ("vit.",),
         "granite4_vision": ("model.vision_tower.", "model.layerwise_projectors.", "model.spatial_projectors.",
                             "model.image_newline"),
         "granite_docling": ("model.vision_model.",), "cosmos3_edge": ("model.visual.", "model.projector."),
         "molmo2": ("model.vision_backbone.",), "molmo2_post": ("model.vision_backbone.",),
         "deepseek_ocr2": ("model.sam_model.", "model.qwen2_model.", "model.projector.", "model.view_seperator"),
         "deepseek_ocr2_mha": ("model.sam_model.", "model.qwen2_model.", "model.projector.", "model.view_seperator"),
         "hy_v4_vl": ("vit.",)}


def _load(folder, weights="f32"):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        return petit.load(folder, weights=weights)


def _config(case: str, **changes) -> dict:
    return dict(json.loads((DIR / case / "config.json").read_text()), **changes)


def _err(model, case, prompt="reference"):
    ref = np.load(DIR / case / f"{prompt}.npz")
    return rel_err(model.logits(ref["input_ids"]), ref["logits"]).max()


def _spelled(case):
    def rename(k):
        for a, b in SPELLINGS[case]:
            if k.startswith(a):
                return b + k[len(a):]
        raise AssertionError(k)
    return rename


@pytest.mark.parametrize("case", CASES)
def test_each_says_once_that_its_tower_is_not_run(case):
    with pytest.warns(UserWarning) as caught:
        petit.load(DIR / case, weights="f32")
    assert [str(w.message) for w in caught] == [
        f"config: {_config(case)['model_type']}: the vision tower (vision_config) is not run; Petit runs the text model (text_config) alone, "
        f"so images cannot be given"]


@pytest.mark.parametrize("case", CASES)
def test_a_tensor_outside_the_tower_and_the_text_model_is_reported(tmp_path, case):
    raw = _read_safetensors(DIR / case / "model.safetensors")
    one = min(k for k in raw if k.startswith(TOWER[case]))
    d = _rewrite(DIR / case, tmp_path / "m", lambda k: "model.speech_tower.x" if k == one else k)
    with pytest.warns(UserWarning, match="ignoring checkpoint tensor.s. the .* family does not use: "
                                         "model.speech_tower.x"):
        petit.load(d, weights="f32")


@pytest.mark.parametrize("case", CASES)
def test_a_top_level_key_it_does_not_know_is_reported(tmp_path, case):
    d = _rewrite(DIR / case, tmp_path / "m", config=_config(case, speech_config={"x": 1}))
    with pytest.warns(UserWarning, match="config: ignoring unknown key.s. speech_config"):
        petit.load(d, weights="f32")


@pytest.mark.parametrize("weights, kv", [("f32", "f32"), ("q8_0", "int8")])
@pytest.mark.parametrize("case", CASES)
def test_the_plan_equals_the_per_op_path(case, weights, kv):
    _assert_same(_load(DIR / case, weights), kv)


@pytest.mark.parametrize("case", CASES)
def test_the_text_type_alone_runs_the_same_logits(tmp_path, case):
    """The wrapper's text model as a checkpoint of its own type: text_config (model_type *_text), the text model's
    tensors under model.* / lm_head.weight, no tower."""
    raw = _read_safetensors(DIR / case / "model.safetensors")
    p = TEXT_PREFIX[case]
    text = {"model." + k[len(p):]: v for k, v in raw.items()
            if k.startswith(p) and not k.startswith(TOWER[case]) and k != "lm_head.weight"}
    text.update({k: v for k, v in raw.items() if k == "lm_head.weight"})
    d = tmp_path / "text"
    d.mkdir()
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (d / f).write_bytes((DIR / case / f).read_bytes())
    write_f32_safetensors(d / "model.safetensors", text)
    cfg = _config(case)
    (d / "config.json").write_text(json.dumps(dict(cfg["text_config"], tie_word_embeddings=cfg.get(
        "tie_word_embeddings", cfg["text_config"].get("tie_word_embeddings")))))
    m = load_strict(d)
    assert m.config.model_type == cfg["text_config"]["model_type"]
    for prompt in ("reference", "reference_long", "reference_chat"):
        assert _err(m, case, prompt) <= F32_TOL


@pytest.mark.parametrize("case", sorted(SPELLINGS))
def test_a_wrapper_reads_both_spellings_of_its_names(tmp_path, case):
    d = _rewrite(DIR / case, tmp_path / "m", _spelled(case))
    assert _err(_load(d), case) <= F32_TOL


@pytest.mark.parametrize("case", CASES)
def test_a_converted_file_is_a_file_of_the_text_model_with_the_same_logits(tmp_path, case):
    out = tmp_path / "m.petit"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        convert(DIR / case, out, "f32").close()
    m = load_strict(out)                    # the file has no tower: nothing to say
    assert m.config.model_type == _config(case)["model_type"]
    assert not any(n.startswith(TOWER[case]) or part in n for n in m.tensors
                   for part in ("visual", "projector", "vision", "vit.", "newline", "sam_model", "qwen2_model"))
    ids = np.load(DIR / case / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(m.logits(ids), _load(DIR / case).logits(ids))


# --- PaddleOCR-VL ---

def _flat(case: str) -> dict:
    """The fixture's config as PaddleOCR-VL's released config.json is written: the text model's keys at the top."""
    d = _config(case)
    text = {k: v for k, v in d.pop("text_config").items() if k != "model_type"}
    return dict(d, **text)


def test_paddleocr_vl_reads_its_released_flat_config(tmp_path):
    d = _rewrite(DIR / "paddleocr_vl", tmp_path / "m", config=_flat("paddleocr_vl"))
    with pytest.warns(UserWarning, match=TOWER_NOT_RUN):
        m = petit.load(d, weights="f32")
    assert m.config.head_dim == 16 and m.config.use_bias and _err(m, "paddleocr_vl") <= F32_TOL


@pytest.mark.parametrize("top, text, tied", [(None, None, True), (False, None, True), (False, False, False),
                                              (True, False, True)])
def test_paddleocr_vl_ties_its_head_as_its_config_class_does(top, text, tied):
    """PaddleOCRVLConfig ties by its own key (default true), or by text_config's (default true) when its own is
    false."""
    d = _config("paddleocr_vl")
    d.pop("tie_word_embeddings")
    d["text_config"] = {k: v for k, v in d["text_config"].items() if k != "tie_word_embeddings"}
    if top is not None:
        d["tie_word_embeddings"] = top
    if text is not None:
        d["text_config"]["tie_word_embeddings"] = text
    with pytest.warns(UserWarning, match=TOWER_NOT_RUN):
        assert get_family("paddleocr_vl").Config.from_dict(d).tie_word_embeddings is tied


def test_paddleocr_vl_keeps_transformers_defaults():
    cfg = get_family("paddleocr_vl_text").Config.from_dict({"vocab_size": 100, "hidden_size": 256,
                                                            "intermediate_size": 96, "num_hidden_layers": 2,
                                                            "num_attention_heads": 4})
    assert (cfg.head_dim, cfg.num_key_value_heads, cfg.rope_theta, cfg.rms_norm_eps, cfg.tie_word_embeddings,
            cfg.use_bias) == (128, 2, 5e5, 1e-5, True, False)


def test_paddleocr_vl_runs_a_paddleocr_vl_text_model_only():
    d = _config("paddleocr_vl")
    d["text_config"] = dict(d["text_config"], model_type="ernie4_5")
    with pytest.raises(ValueError, match="paddleocr_vl's text_config has model_type 'ernie4_5'; the paddleocr_vl "
                                         "family runs a paddleocr_vl_text model"):
        get_family("paddleocr_vl").Config.from_dict(d)


# --- GLM-OCR ---

def test_glm_ocr_keeps_transformers_defaults_and_reports_attention_bias():
    d = {"vocab_size": 100, "hidden_size": 256, "intermediate_size": 96, "num_hidden_layers": 2,
         "num_attention_heads": 8}
    cfg = get_family("glm_ocr_text").Config.from_dict(d)
    assert (cfg.head_dim, cfg.num_key_value_heads, cfg.partial_rotary_factor, cfg.rotary_dim, cfg.rms_norm_eps,
            cfg.attention_bias, cfg.tie_word_embeddings) == (32, 8, 1.0, 32, 1e-5, False, False)
    with pytest.warns(UserWarning, match=r"ignoring unknown key.s. attention_bias \(glm_ocr_text's attention has no "
                                         r"biases: not read\)"):
        assert not get_family("glm_ocr_text").Config.from_dict(dict(d, attention_bias=True)).attention_bias


@pytest.mark.parametrize("top, text, tied", [(None, None, False), (None, True, True), (True, False, True)])
def test_glm_ocr_ties_its_head_as_its_config_class_does(top, text, tied):
    d = _config("glm_ocr")
    d.pop("tie_word_embeddings")
    if top is not None:
        d["tie_word_embeddings"] = top
    if text is not None:
        d["text_config"] = dict(d["text_config"], tie_word_embeddings=text)
    with pytest.warns(UserWarning, match=TOWER_NOT_RUN):
        assert get_family("glm_ocr").Config.from_dict(d).tie_word_embeddings is tied


# --- HunyuanOCR ---

def _hunyuan(**rope) -> dict:
    d = _config("hunyuan_vl")
    d["text_config"] = dict(d["text_config"], rope_parameters=dict(d["text_config"]["rope_parameters"], **rope))
    return d


def test_hunyuan_vl_reads_the_releases_xdrope_spelling(tmp_path):
    d = _hunyuan(rope_type="xdrope", xdrope_section=[2, 3, 1, 2])
    del d["text_config"]["rope_parameters"]["mrope_section"]
    text = {k: v for k, v in d.pop("text_config").items() if k != "model_type"}
    flat = dict(d, **{k: v for k, v in text.items() if k != "rope_parameters"}, rope_scaling=text["rope_parameters"])
    folder = _rewrite(DIR / "hunyuan_vl", tmp_path / "m", config=flat)       # HunyuanOCR's flat config.json
    with pytest.warns(UserWarning, match=TOWER_NOT_RUN):
        m = petit.load(folder, weights="f32")
    assert m.config.mrope_section == [2, 3, 1, 2] and m.config.alpha == 50.0 and _err(m, "hunyuan_vl") <= F32_TOL


@pytest.mark.parametrize("rope, message", [
    (dict(mrope_section=None), r"hunyuan_vl_text needs rope_parameters.mrope_section \(its XD-RoPE sections\): "
                               r"transformers 5.25's HunYuanVLRotaryEmbedding cannot run without it"),
    (dict(mrope_section=[2, 2, 2]), r"mrope_section \[2, 2, 2\] must be whole numbers summing to head_dim / 2 \(8\)"),
    (dict(xdrope_section=[4, 2, 2]), r"has mrope_section \[2, 3, 1, 2\] and xdrope_section \[4, 2, 2\], which differ"),
    (dict(alpha=None), r"rope_type 'dynamic' without alpha: HunYuanVLRotaryEmbedding computes its frequencies once"),
])
def test_hunyuan_vl_refuses_by_name(rope, message):
    d = _hunyuan(**rope)
    d["text_config"]["rope_parameters"] = {k: v for k, v in d["text_config"]["rope_parameters"].items()
                                           if v is not None}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        with pytest.raises(ValueError, match=message):
            get_family("hunyuan_vl").Config.from_dict(d)


# --- Granite 4 Vision, Granite Docling ---

def test_granite_docling_keeps_its_text_configs_defaults():
    cfg = get_family("granite_docling_text").Config.from_dict({"vocab_size": 100, "hidden_size": 256,
                                                              "intermediate_size": 96, "num_hidden_layers": 2,
                                                              "num_attention_heads": 8})
    assert (cfg.num_key_value_heads, cfg.rms_norm_eps, cfg.tie_word_embeddings, cfg.embedding_multiplier,
            cfg.attention_multiplier, cfg.residual_multiplier, cfg.logits_scaling) == \
        (4, 1e-5, True, 12.0, 0.015625, 0.263, 4.0)


@pytest.mark.parametrize("case, top, tied", [("granite4_vision", None, False), ("granite_docling", None, True),
                                             ("granite_docling", False, False)])
def test_the_granite_wrappers_tie_by_their_own_key_alone(case, top, tied):
    d = _config(case)
    d.pop("tie_word_embeddings")
    if top is not None:
        d["tie_word_embeddings"] = top
    d["text_config"] = dict(d["text_config"], tie_word_embeddings=not tied)      # not read
    with pytest.warns(UserWarning, match=TOWER_NOT_RUN):
        assert get_family(case).Config.from_dict(d).tie_word_embeddings is tied


# --- ERNIE 4.5 VL ---

def test_ernie4_5_vl_moe_runs_the_text_experts_alone():
    """Text tokens reach experts 0 .. E-1 (the text ones) through the text router, stored transposed, and the text row
    of the correction bias; the vision experts and router are never read (x 3 in the fixture: no effect)."""
    raw = _read_safetensors(DIR / "ernie4_5_vl_moe" / "model.safetensors")
    m = _load(DIR / "ernie4_5_vl_moe")
    moe = m.net.layers[1].moe
    assert len(moe.gate) == 4 and m.net.layers[0].moe is None
    np.testing.assert_array_equal(moe.router.dequantize(), raw["model.layers.1.mlp.gate.weight"].T)
    np.testing.assert_array_equal(moe.sel_bias.a.reshape(-1),
                                  raw["model.layers.1.mlp.moe_statics.e_score_correction_bias"][0])


def test_ernie4_5_vl_moe_refuses_transformers_5_module_names(tmp_path):
    d = _rewrite(DIR / "ernie4_5_vl_moe", tmp_path / "m",
                 lambda k: k.replace("mlp.gate.weight_1", "mlp.vision_moe.gate.weight"))
    with pytest.raises(ValueError, match=r"model.layers.1.mlp.vision_moe.gate.weight is transformers 5's module name "
                                         r"for ERNIE 4.5 VL's experts"):
        _load(d)


@pytest.mark.parametrize("text, message", [
    (dict(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 5e5, "mrope_section": [3, 3, 2]}),
     "rope_type 'linear': ERNIE 4.5 VL's text model runs the default RoPE only"),
    (dict(moe_intermediate_size=32), r"moe_intermediate_size must be \[text, vision\] widths, got 32"),
    (dict(mlp_layer_types=["dense", "moe", "sparse"]), "mlp_layer_types must give each of the 3 layers"),
])
def test_ernie4_5_vl_moe_refuses_by_name(text, message):
    d = _config("ernie4_5_vl_moe")
    d["text_config"] = dict(d["text_config"], **text)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        with pytest.raises(ValueError, match=message):
            get_family("ernie4_5_vl_moe").Config.from_dict(d)


# --- Cosmos3 Edge ---

def test_cosmos3_edge_leaves_the_generators_tensors_unread(tmp_path):
    """transformers drops the release's image / action generator tensors (_COSMOS3_EDGE_DROPPED_GENERATOR_KEYS): they
    are accounted for, not reported; another unknown tensor is."""
    gen = {"time_embedder.linear_1.weight": "layers.0.input_layernorm.weight",
           "layers.1.mlp_moe_gen.up_proj.weight": "layers.1.mlp.up_proj.weight"}
    raw = _read_safetensors(DIR / "cosmos3_edge" / "model.safetensors")
    d = tmp_path / "m"
    d.mkdir()
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (d / f).write_bytes((DIR / "cosmos3_edge" / f).read_bytes())
    write_f32_safetensors(d / "model.safetensors", {**raw, **{k: raw[v] for k, v in gen.items()}})
    assert _err(_load(d), "cosmos3_edge") <= F32_TOL
    write_f32_safetensors(d / "model.safetensors", {**raw, "layers.1.mlp_gen.x": raw["norm.weight"]})
    with pytest.warns(UserWarning, match="ignoring checkpoint tensor.s. the .* family does not use: layers.1.mlp_gen.x"):
        petit.load(d, weights="f32")


@pytest.mark.parametrize("rope, message", [
    ({"rope_type": "linear", "factor": 2.0, "rope_theta": 1e8, "mrope_section": [3, 3, 2]},
     "rope_type 'linear': Cosmos3 Edge runs the default RoPE only"),
    ({"rope_type": "default", "rope_theta": 1e8, "mrope_section": [3, 3, 3]},
     r"mrope_section must be three sections summing to head_dim / 2 \(8\), got \[3, 3, 3\]"),
    ({"rope_type": "default", "rope_theta": 1e8}, r"summing to head_dim / 2 \(8\), got \[24, 20, 20\]"),
])
def test_cosmos3_edge_refuses_by_name(rope, message):
    d = _config("cosmos3_edge")
    d["text_config"] = dict(d["text_config"], rope_parameters=rope)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        with pytest.raises(ValueError, match=message):
            get_family("cosmos3_edge").Config.from_dict(d)


# --- Molmo2 ---

def test_molmo2_reads_the_first_vocab_size_rows_of_its_split_embedding():
    raw = _read_safetensors(DIR / "molmo2" / "model.safetensors")
    emb = np.concatenate([raw["model.transformer.wte.embedding"], raw["model.transformer.wte.new_embedding"]])
    assert emb.shape == (328, 64)
    m = _load(DIR / "molmo2")
    np.testing.assert_array_equal(m.net.embed.dequantize(), emb[:320])
    with pytest.raises(ValueError, match=r"token id\(s\) \[320\] out of range for a vocabulary of 320"):
        m.logits(np.array([1, 320]))        # an image token: only images use it


def test_molmo2_keeps_transformers_defaults():
    cfg = get_family("molmo2_text").Config.from_dict({"vocab_size": 100, "hidden_size": 256, "intermediate_size": 96,
                                                      "num_hidden_layers": 2, "num_attention_heads": 8,
                                                      "qkv_bias": True, "layer_norm_eps": 1e-5})
    assert (cfg.head_dim, cfg.num_key_value_heads, cfg.additional_vocab_size, cfg.qk_norm_type, cfg.norm_after,
            cfg.rope_scaling_layers, cfg.attention_bias, cfg.rms_norm_eps, cfg.tie_word_embeddings) == \
        (128, 8, 128, "qwen3", False, [0, 1], True, 1e-5, False)
    with pytest.raises(ValueError, match="qk_norm_type must be 'qwen3' or 'olmo', got 'llama'"):
        get_family("molmo2_text").Config.from_dict({"vocab_size": 100, "hidden_size": 256, "intermediate_size": 96,
                                                    "num_hidden_layers": 2, "num_attention_heads": 8,
                                                    "qk_norm_type": "llama"})


def test_molmo2_runs_a_stored_head_that_differs_from_the_embeddings():
    """molmo2_post's wrapper ties, but its stored head differs from the embeddings: transformers keeps it, so does
    Petit."""
    assert _config("molmo2_post")["tie_word_embeddings"] is True
    m = _load(DIR / "molmo2_post")
    assert not m.config.tie_word_embeddings and _err(m, "molmo2_post") <= F32_TOL


# --- refused ---

@pytest.mark.parametrize("model_type, what", [
    ("voxtral_realtime", "VoxtralRealtimeModel.forward requires audio at every call"),
    ("voxtral_realtime_text", "every layer scales its MLP input by 1 \\+ ada_rms_norm\\(t_cond\\)"),
])
def test_a_checkpoint_without_a_text_only_path_is_refused_by_name(model_type, what):
    with pytest.raises(ValueError, match=f"unsupported model_type '{model_type}'; the closest family Petit runs is "
                                         f"mistral \\({model_type} differs: .*{what}"):
        get_family(model_type)


@pytest.mark.parametrize("model_type", ["unlimited_ocr", "unlimited_ocr_text"])
def test_unlimited_ocr_is_refused_for_its_reference_sliding_attention(model_type):
    with pytest.raises(ValueError, match=f"the closest family Petit runs is deepseek_ocr2_text \\({model_type} "
                                         f"differs: .*reference sliding attention.*Petit's windows have no such "
                                         f"prefix"):
        get_family(model_type)


# --- DeepSeek-OCR-2 ---

def test_deepseek_ocr2_reads_heads_and_layer_kinds_as_its_config_class_does():
    d = {"vocab_size": 100, "hidden_size": 256, "intermediate_size": 96, "num_hidden_layers": 2,
         "num_attention_heads": 8, "num_experts_per_tok": 2, "mlp_layer_types": ["dense", "sparse"]}
    cfg = get_family("deepseek_ocr2_text").Config.from_dict(d)
    assert (cfg.head_dim, cfg.n_routed_experts, cfg.n_shared_experts, cfg.moe_intermediate_size, cfg.topk_method,
            cfg.routed_scaling_factor) == (32, 64, 2, 1407, "greedy", 1.0)
    with pytest.warns(UserWarning, match=r"head_dim \(deepseek_ocr2_text's heads are hidden_size / "
                                         r"num_attention_heads: not read\)"):
        assert get_family("deepseek_ocr2_text").Config.from_dict(dict(d, head_dim=64)).head_dim == 32
    with pytest.raises(ValueError, match="mlp_layer_types must give each of the 2 layers 'dense' or 'sparse' "
                                         "\\(DeepseekOcr2TextConfig has no default\\), got None"):
        get_family("deepseek_ocr2_text").Config.from_dict({k: v for k, v in d.items() if k != "mlp_layer_types"})


# --- HY-V4 VL ---

def test_hy_v4_vl_keeps_its_text_configs_defaults_and_latent_eps():
    cfg = get_family("hy_v4_vl_text").Config.from_dict({"vocab_size": 100})
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.q_lora_rank, cfg.index_n_heads,
            cfg.moe_intermediate_size, cfg.mrope_section) == (6144, 78, 64, 2048, 32, 2048, [12, 10, 10])
    m = _load(DIR / "hy_v4_vl")
    assert m.config.latent_norm_eps == m.config.rms_norm_eps == 1e-5
    with pytest.raises(ValueError, match=r"mrope_section must be three sections \(time, height, width\) summing to "
                                         r"qk_rope_head_dim / 2 \(32\), got \[12, 10, 12\]"):
        get_family("hy_v4_vl_text").Config.from_dict({"vocab_size": 100, "rope_parameters": {
            "rope_type": "default", "rope_theta": 1e4, "mrope_section": [12, 10, 12]}})


# --- Kosmos-2 ---

def _kosmos2_folder(d: Path) -> Path:
    """The kosmos_2_text_model fixture as a Kosmos-2 checkpoint (Kosmos2ForConditionalGeneration's layout: the text
    model under text_model.model.*, a tower tensor beside it). transformers' generate of such a checkpoint runs its
    text model without an image, to the bit the text fixture's logits and greedy tokens (checked when this group was
    written: Kosmos2ForConditionalGeneration built on the fixture's weights, saved and reloaded)."""
    src = DIR / "kosmos_2_text_model"
    raw = _read_safetensors(src / "model.safetensors")
    d.mkdir()
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (d / f).write_bytes((src / f).read_bytes())
    tensors = {"text_model." + k: v for k, v in raw.items()}
    tensors["vision_model.model.post_layernorm.weight"] = np.ones(16, np.float32)
    write_f32_safetensors(d / "model.safetensors", tensors)
    text = {k: v for k, v in json.loads((src / "config.json").read_text()).items()
            if k not in ("architectures", "transformers_version", "dtype")}
    (d / "config.json").write_text(json.dumps({
        "model_type": "kosmos-2", "architectures": ["Kosmos2ForConditionalGeneration"], "text_config": text,
        "vision_config": {"model_type": "kosmos_2_vision_model", "hidden_size": 16}, "latent_query_num": 4,
        "tie_word_embeddings": True}))
    return d


def test_kosmos_2_runs_its_language_model_for_text(tmp_path):
    d = _kosmos2_folder(tmp_path / "k2")
    with pytest.warns(UserWarning) as caught:
        m = petit.load(d, weights="f32")
    assert [str(w.message) for w in caught] == [
        "config: kosmos-2: the vision tower (vision_config) is not run; Petit runs the text model (text_config) "
        "alone, so images cannot be given"]
    for prompt in ("reference", "reference_long", "reference_chat"):
        assert _err(m, "kosmos_2_text_model", prompt) <= F32_TOL
    out = tmp_path / "k2.petit"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        convert(d, out, "f32").close()
    c = load_strict(out)
    assert c.config.model_type == "kosmos-2" and not any("vision" in n for n in c.tensors)
    assert _err(c, "kosmos_2_text_model") <= F32_TOL


def test_kosmos_2_text_model_reads_its_positions_from_the_pad_id():
    """Row p + 1 + pad_token_id of fairseq's table: another pad id moves every position."""
    m = load_strict(DIR / "kosmos_2_text_model")
    assert m.config.pad_token_id == 0 and _err(m, "kosmos_2_text_model") <= F32_TOL
    cfg = get_family("kosmos_2_text_model").Config.from_dict(dict(_config("kosmos_2_text_model"), pad_token_id=1))
    table = get_family("kosmos_2_text_model").sinusoids(cfg)
    np.testing.assert_array_equal(table[:-1], np.asarray(m.net.pos_embed)[1:])
    with pytest.raises(ValueError, match="pad_token_id must be a token id"):
        get_family("kosmos_2_text_model").Config.from_dict(dict(_config("kosmos_2_text_model"), pad_token_id=None))


# --- GGUF: llama.cpp's hunyuan_vl and deepseek2-ocr (tests/fixtures/gguf5_vlnew, petit/loading/gguf_vlnew5.py) ---

GGUF = Path(__file__).parent / "fixtures" / "gguf5_vlnew"
GGUF_MANIFEST = json.loads((GGUF / "manifest.json").read_text())["cases"]
GGUF_READ = sorted(c for c in GGUF_MANIFEST if (GGUF / c / "q8_0.gguf").is_file())
# llama.cpp's loader bakes the NTK alpha into the base in float32 (powf), transformers (and Petit) in float64: its
# exact f32 run is 1.9e-4 of the range from transformers' logits; Petit's reading is held to 1.5 x that gap
EXACT_BOUND = {c: 1.5 * GGUF_MANIFEST[c]["files"]["f32.gguf"]["exact_vs_transformers"]["rel"]
               for c in GGUF_READ if c.startswith("hunyuan_vl")}
GGUF_FAMILY = {"hunyuan_vl_nobias": ("hunyuan_vl", "hunyuan_vl_text"), "deepseek_ocr2_mha": ("deepseek2-ocr",
                                                                                             "deepseek_ocr2_text")}


def _scaled(got, exact):          # test_gguf5_exact.py's measure: a share of the whole range
    return float(np.abs(got - exact).max() / (exact.max() - exact.min()))


def _gguf(case, weights=None):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return petit.load(GGUF / case / "q8_0.gguf", weights=weights)


def test_gguf_cases_are_llama_cpps_architectures_of_the_text_families():
    assert GGUF_READ == sorted(GGUF_FAMILY)
    for case, (arch, family) in GGUF_FAMILY.items():
        assert GGUF_MANIFEST[case]["architecture"] == arch
        assert GGUF_MANIFEST[case]["hf_case"] == f"tests/fixtures/hf5_vlnew/{case}"
        assert _gguf(case, weights="f32").config.model_type == family


def test_gguf_hunyuan_vl_is_read_as_the_text_family():
    got = _gguf("hunyuan_vl_nobias", weights="f32").config
    want = _config("hunyuan_vl_nobias")["text_config"]
    assert got.model_type == "hunyuan_vl_text" and not got.attention_bias and got.tie_word_embeddings
    assert (got.mrope_section, got.alpha, got.rope_theta) == (want["rope_parameters"]["mrope_section"], 50.0, 1e4)
    for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
              "vocab_size", "rms_norm_eps", "head_dim"):
        assert getattr(got, k) == pytest.approx(want[k]), k


def test_gguf_hunyuan_vl_decoded_is_transformers_model():
    """Decoded to float32, the file's q8_0 weights run within 1e-4 of transformers' logits (its float64 base), where
    llama.cpp's own exact run is 1.9e-4 away (test_gguf5_exact.py holds Petit to llama.cpp's within 1.5 x that)."""
    m = _gguf("hunyuan_vl_nobias", weights="f32")
    ref = np.load(DIR / "hunyuan_vl_nobias" / "reference.npz")
    assert rel_err(m.logits(ref["input_ids"]), ref["logits"]).max() <= 0.05       # q8_0 weights
    z = np.load(GGUF / "hunyuan_vl_nobias" / "q8_0.npz")
    assert _scaled(m.logits(z["input_ids"]), z["exact_logits"]) <= EXACT_BOUND["hunyuan_vl_nobias"]


@pytest.mark.parametrize("case", sorted(GGUF_FAMILY))
def test_gguf_as_stored_is_as_close_as_llama_cpps_own_run(case):
    from models import q8_0_errors
    err, theirs = q8_0_errors(_gguf(case), np.load(GGUF / case / "q8_0.npz"))
    assert err <= 1.5 * theirs, (err, theirs)


def test_gguf_deepseek2_ocr_is_read_as_deepseek_ocr2_text():
    """The file's language model is the source folder's: Llama's attention (as many key / value heads as heads), one
    leading dense layer, 4 experts of 32 with top 2 x 1.5, one shared expert; decoded to float32 it runs transformers'
    logits within 1e-4 of the range where llama.cpp's q8_0 weights allow (test_gguf5_exact.py: llama.cpp's exact
    logits within 1e-5)."""
    m = _gguf("deepseek_ocr2_mha", weights="f32")
    got, want = m.config, _config("deepseek_ocr2_mha")["text_config"]
    assert (got.mlp_layer_types, got.n_routed_experts, got.num_experts_per_tok, got.n_shared_experts,
            got.moe_intermediate_size, got.routed_scaling_factor, got.topk_method) == \
        (want["mlp_layer_types"], 4, 2, 1, 32, 1.5, "greedy")
    for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
              "vocab_size", "rms_norm_eps", "rope_theta", "tie_word_embeddings"):
        assert getattr(got, k) == pytest.approx(want.get(k, want["rope_parameters"]["rope_theta"]
                                                           if k == "rope_theta" else None)), k


@pytest.mark.parametrize("meta, heads, has, message", [
    ({"deepseek2-ocr.expert_weights_norm": True}, 4, (), "expert_weights_norm' is true"),
    ({"deepseek2-ocr.expert_gating_func": 2}, 4, (), "expert_gating_func' is 2: DeepSeek-OCR routes on a softmax"),
    ({}, 2, (), "builds a key / value head per query head"),
    ({}, 4, ("blk.1.exp_probs_b.bias",), "a selection bias"),
    ({}, 4, ("blk.0.attn_q.bias",), "attention biases: llama.cpp's deepseek2-ocr adds no o_proj bias"),
])
def test_gguf_deepseek2_ocr_refuses_by_name(meta, heads, has, message):
    from petit.loading.gguf_archs import ARCHS
    meta = {"deepseek2-ocr.leading_dense_block_count": 1, "deepseek2-ocr.expert_feed_forward_length": 32, **meta}
    cfg = {"num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": heads}
    with pytest.raises(ValueError, match=message):
        ARCHS["deepseek2-ocr"].extra(meta, lambda k: f"deepseek2-ocr.{k}", cfg, lambda n: n in has)


@pytest.mark.parametrize("meta, has, message", [
    ({}, (), "rope.dimension_sections' is missing: llama.cpp's hunyuan_vl requires it"),
    ({"hunyuan_vl.rope.dimension_sections": [2, 3, 1, 2]}, ("blk.0.attn_q.bias",),
     "attention biases: llama.cpp's hunyuan_vl loads none"),
])
def test_gguf_hunyuan_vl_refuses_by_name(meta, has, message):
    from petit.loading.gguf_archs import ARCHS
    with pytest.raises(ValueError, match=message):
        ARCHS["hunyuan_vl"].extra(meta, lambda k: f"hunyuan_vl.{k}", {}, lambda n: n in has)
