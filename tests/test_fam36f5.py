"""The fam36f group of issue 36 (tests/fixtures/hf5_fam36f: Emu3, GOT-OCR 2.0, Fuyu, Llama 3.2 Vision and
Phi-4-multimodal, made by transformers 5.25): what tests/test_hf_parity.py (f32 at every position of the three
prompts, greedy, q8_0 / q4_0 bounds), test_verify_families.py and the app's chat test do not already hold.

- Each checkpoint says once, in its own words, that its tower is not run, and nothing else; a tensor outside its
  tower and text model, or a top-level key it does not know, is reported.
- The one-call forward plan equals the per-op path bit for bit (f32 and q8_0 weights, f32 and int8 caches).
- Both spellings of a wrapper's names (as save_pretrained writes them and as transformers 5's modules name them).
- A converted `.petit` is a file of the text model (no tower tensor, no warning) with the same logits.
- Llama 3.2 Vision runs its self-attention layers alone, the j-th as layer j (its cross-attention layers never read),
  from the embedding's first vocab_size rows; its refusals by name.
- GOT-OCR 2.0 ties its head by the wrapper's key and runs a qwen2 text model only; Fuyu reads transformers 4's flat
  config as transformers 5.25 does; Phi-4-multimodal's flat config with its embedders' configs beside it.
"""
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.loading.convert import convert
from petit.models import get_family
from models import TOWER_NOT_RUN, load_strict, rel_err
from test_moe_a5 import _read_safetensors
from test_plan import _assert_same
from test_wrap5 import _other_spelling, _rewrite

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36f"
CASES = ["emu3", "got_ocr2", "fuyu", "mllama", "phi4_multimodal"]
F32_TOL = 1e-4
SAID = {
    "emu3": "config: emu3: the image tower (vqmodel: the VQ-VAE of vq_config) is not run; Petit runs the text model "
            "(text_config) alone, so images cannot be given",
    "got_ocr2": "config: got_ocr2: the vision tower (vision_config) is not run; Petit runs the text model (text_config) "
                "alone, so images cannot be given",
    "fuyu": "config: fuyu: the vision tower (vision_embed_tokens, the image patches' linear embedding) is not run; "
            "Petit runs the text model (text_config) alone, so images cannot be given",
    "mllama": "config: mllama: the vision tower (vision_config) is not run; Petit runs the text model (text_config) "
              "alone, so images cannot be given",
    "phi4_multimodal": "config: phi4_multimodal: the vision and audio tower (embed_tokens_extend: vision_config, "
                       "audio_config) is not run; Petit runs the text model alone, so images or audio cannot be "
                       "given"}
# a tower tensor of each, renamed in the reporting test
TOWER_TENSOR = {"emu3": "vqmodel.quantize.embedding.weight", "got_ocr2": "vision_tower.pos_embed",
                "fuyu": "vision_embed_tokens.bias", "mllama": "vision_model.class_embedding",
                "phi4_multimodal": "model.embed_tokens_extend.image_embed.global_img_feature_extensor"}


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


@pytest.mark.parametrize("case", CASES)
def test_each_says_once_that_its_tower_is_not_run(case):
    with pytest.warns(UserWarning) as caught:
        petit.load(DIR / case, weights="f32")
    assert [str(w.message) for w in caught] == [SAID[case]]


@pytest.mark.parametrize("case", CASES)
def test_a_tensor_outside_the_tower_and_the_text_model_is_reported(tmp_path, case):
    d = _rewrite(DIR / case, tmp_path / "m", lambda k: "model.speech_tower.x" if k == TOWER_TENSOR[case] else k)
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


def _emu3_spelling(k: str) -> str:
    """Emu3's names the other way: save_pretrained writes text_model.model.* / text_model.lm_head / vqmodel.*,
    transformers 5's modules are model.text_model.* / lm_head / model.vqmodel.*."""
    for a, b in (("text_model.model.", "model.text_model."), ("text_model.lm_head.", "lm_head."),
                 ("vqmodel.", "model.vqmodel.")):
        if k.startswith(a):
            return b + k[len(a):]
    raise AssertionError(k)


@pytest.mark.parametrize("case", ["emu3", "got_ocr2", "fuyu", "mllama"])
def test_a_wrapper_reads_both_spellings_of_its_names(tmp_path, case):
    d = _rewrite(DIR / case, tmp_path / "m", _emu3_spelling if case == "emu3" else _other_spelling)
    assert _err(_load(d), case) <= F32_TOL


@pytest.mark.parametrize("case", CASES)
def test_a_converted_file_is_a_file_of_the_text_model_with_the_same_logits(tmp_path, case):
    out = tmp_path / "m.petit"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        convert(DIR / case, out, "f32").close()
    m = load_strict(out)                    # the file has no tower: nothing to say
    assert m.config.model_type == case
    assert not any(part in n for n in m.tensors for part in ("vq", "vision", "projector", "extend", "cross_attn"))
    ids = np.load(DIR / case / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(m.logits(ids), _load(DIR / case).logits(ids))


# --- Llama 3.2 Vision ---

def test_mllama_runs_its_self_attention_layers_alone():
    raw = _read_safetensors(DIR / "mllama" / "model.safetensors")
    model = _load(DIR / "mllama")
    cfg = model.config
    assert cfg.num_hidden_layers == 5 and cfg.cross_attention_layers == [1, 3] and cfg.self_layers == [0, 2, 4]
    assert len(model.net.layers) == 3 and model.net.arch.vocab_size == 320
    for j, i in enumerate(cfg.self_layers):
        np.testing.assert_array_equal(model.net.layers[j].q.dequantize(),
                                      raw[f"language_model.model.layers.{i}.self_attn.q_proj.weight"])
    assert raw["language_model.model.embed_tokens.weight"].shape == (328, 64)
    np.testing.assert_array_equal(model.net.embed.dequantize(), raw["language_model.model.embed_tokens.weight"][:320])
    with pytest.raises(ValueError, match=r"token id\(s\) \[320\] out of range for a vocabulary of 320"):
        model.logits(np.array([1, 320]))        # the image token: only images use it


def test_mllama_keeps_transformers_defaults():
    cfg = get_family("mllama").Config.from_dict({"vocab_size": 100, "hidden_size": 256, "intermediate_size": 96,
                                                  "num_hidden_layers": 10, "num_attention_heads": 16})
    assert cfg.cross_attention_layers == [3, 8, 13, 18, 23, 28, 33, 38] and cfg.self_layers == [0, 1, 2, 4, 5, 6, 7, 9]
    assert (cfg.num_key_value_heads, cfg.rope_theta, cfg.rms_norm_eps, cfg.tie_word_embeddings) == (8, 5e5, 1e-5, False)


@pytest.mark.parametrize("text, message", [
    (dict(head_dim=32), "head_dim 32 is not hidden_size / num_attention_heads, which Llama 3.2 Vision's attention "
                        "always uses"),
    (dict(cross_attention_layers=[0, 1, 2, 3, 4]), "every layer is a cross-attention layer: a text-only prompt runs "
                                                    "none"),
    (dict(cross_attention_layers="1,3"), "cross_attention_layers must be a list of layer indices, got '1,3'"),
])
def test_mllama_refuses_by_name(text, message):
    d = _config("mllama")
    d["text_config"] = dict(d["text_config"], **text)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        with pytest.raises(ValueError, match=message):
            get_family("mllama").Config.from_dict(d)


# --- GOT-OCR 2.0, Fuyu, Phi-4-multimodal ---

def test_got_ocr2_ties_its_head_by_the_wrappers_key(tmp_path):
    assert "lm_head.weight" not in _load(DIR / "got_ocr2").tensors
    d = _rewrite(DIR / "got_ocr2", tmp_path / "m", config=_config("got_ocr2", tie_word_embeddings=False))
    with pytest.raises(ValueError, match="lm_head.weight"):      # untied by the wrapper: a head is then needed
        _load(d)


def test_got_ocr2_runs_a_qwen2_text_model_only():
    d = _config("got_ocr2")
    d["text_config"] = dict(d["text_config"], model_type="llama")
    with pytest.raises(ValueError, match="got_ocr2's text_config has model_type 'llama'; the got_ocr2 family runs a "
                                         "qwen2 text model"):
        get_family("got_ocr2").Config.from_dict(d)


def _fuyu_flat(**extra) -> dict:
    """The fixture's config as transformers 4 wrote FuyuConfig: the text model's keys at the top level."""
    d = _config("fuyu")
    text = d.pop("text_config")
    rope = text.pop("rope_parameters")
    del text["model_type"]
    return dict(d, **text, rope_theta=rope["rope_theta"], **extra)


@pytest.mark.parametrize("extra", [{}, {"partial_rotary_factor": 0.25}], ids=["flat", "flat_partial_ignored"])
def test_fuyu_reads_a_flat_config_as_transformers_does(tmp_path, extra):
    """transformers 5.25 hands only FuyuConfig's text keys to the text model, whose partial rotary factor is then
    0.5 whatever the file's top level says (checked against transformers for the flat case: 8e-6 of the logits)."""
    d = _rewrite(DIR / "fuyu", tmp_path / "m", config=_fuyu_flat(**extra))
    with pytest.warns(UserWarning, match=TOWER_NOT_RUN):
        m = petit.load(d, weights="f32")
    assert m.config.partial_rotary_factor == 0.5 and _err(m, "fuyu") <= F32_TOL


def test_fuyu_keeps_transformers_5_defaults():
    """PersimmonConfig's RoPE base in transformers 5.25 is 10000 (the released files state 25000)."""
    d = _fuyu_flat()
    del d["rope_theta"]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        cfg = get_family("fuyu").Config.from_dict(d)
    assert (cfg.rope_theta, cfg.partial_rotary_factor, cfg.qk_layernorm, cfg.tie_word_embeddings) == \
        (10000.0, 0.5, True, False)


def test_phi4_multimodal_runs_the_long_factors_past_its_original_positions():
    m = _load(DIR / "phi4_multimodal")
    cfg = m.config
    assert (cfg.original_max_position_embeddings, cfg.rotary_dim, cfg.tie_word_embeddings) == (64, 12, True)
    assert cfg.rope_scaling["rope_type"] == "longrope" and _err(m, "phi4_multimodal", "reference_long") <= F32_TOL
    d = {k: v for k, v in _config("phi4_multimodal").items() if k != "num_key_value_heads"}
    with pytest.warns(UserWarning, match=TOWER_NOT_RUN):     # its default is 8 kv heads (Phi-3's: one per head)
        with pytest.raises(ValueError, match="num_attention_heads 4 is not divisible by num_key_value_heads 8"):
            get_family("phi4_multimodal").Config.from_dict(d)
