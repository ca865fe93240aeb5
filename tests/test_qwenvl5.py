"""The qwenvl group of issue 36 (tests/fixtures/hf5_qwenvl: the language models of Qwen2-VL, Qwen2.5-VL, Qwen3-VL,
Qwen3-VL-MoE, GLM-4.1V, GLM-4.5V, GLM-4.6V and GLM-GA, made by their transformers 5.25 wrapper classes): what
tests/test_hf_parity.py (f32 at every position of the three prompts, greedy, q8_0 / q4_0 bounds), test_moe.py and
test_verify_families.py do not already hold.

- Each checkpoint says once that its vision tower is not run, and nothing else.
- The released files' layouts: Qwen2-VL's and Qwen2.5-VL's flat config of transformers 4 (rope type "mrope") with
  model.* / visual.* names; Qwen3-VL-MoE's experts stored transposed.
- The text families under their own model_types (a flat text-only checkpoint) give the wrapper's logits, and a
  converted `.petit` is a file of the text model with the same logits.
- The head tied as each wrapper's transformers class ties it; M-RoPE's keys read; refusals and reports by name.
- GLM-4.6V / GLM-GA run the text model transformers' AutoModel builds from text_config (glm4v_text or
  glm4v_moe_text), their experts 3-D as save_pretrained writes them; GLM-4.5V's one tensor per expert.
"""
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.loading.convert import convert
from petit.models import cosmos3_omni, get_family
from models import TOWER_NOT_RUN, load_strict, rel_err, write_f32_safetensors
from test_moe_a5 import _read_safetensors

DIR = Path(__file__).parent / "fixtures" / "hf5_qwenvl"
CASES = ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "glm4v", "glm4v_moe", "glm46v", "glmga", "cosmos3_omni"]
F32_TOL = 1e-4
P = "model.language_model."


def _load(folder, weights="f32"):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        return petit.load(folder, weights=weights)


def _config(case: str) -> dict:
    return json.loads((DIR / case / "config.json").read_text())


def _err(model, case, prompt="reference"):
    ref = np.load(DIR / case / f"{prompt}.npz")
    return rel_err(model.logits(ref["input_ids"]), ref["logits"]).max()


def _write(case: str, dst: Path, config: dict, rename=lambda k, a: {k: a}) -> Path:
    """A copy of a fixture folder with its config replaced and its tensors passed through `rename(name, array) ->
    {name: array}` (an empty dict drops one)."""
    shutil.copytree(DIR / case, dst)
    out = {}
    for k, a in _read_safetensors(DIR / case / "model.safetensors").items():
        out |= rename(k, a)
    write_f32_safetensors(dst / "model.safetensors", out)
    (dst / "config.json").write_text(json.dumps(config))
    return dst


@pytest.mark.parametrize("case", CASES)
def test_each_says_once_that_its_vision_tower_is_not_run(case):
    with pytest.warns(UserWarning) as caught:
        petit.load(DIR / case, weights="f32")
    assert [str(w.message) for w in caught] == [
        f"config: {case}: the vision tower (vision_config) is not run; Petit runs the text model (text_config) alone, "
        f"so images cannot be given"]


def _v5_names(k, a):
    """transformers 5's module names of a Qwen2-VL / Qwen2.5-VL checkpoint, which save_pretrained writes as the
    releases are (model.*, visual.*, lm_head.weight): model.language_model.*, model.visual.*."""
    if k.startswith("visual."):
        return {"model." + k: a}
    return {P + k[len("model."):]: a} if k.startswith("model.") else {k: a}


@pytest.mark.parametrize("case", ["qwen2_vl", "qwen2_5_vl"])
def test_qwen2_vl_reads_transformers_5_names(tmp_path, case):
    d = _write(case, tmp_path / "m", _config(case), _v5_names)
    assert any(k.startswith(P) for k in _read_safetensors(d / "model.safetensors"))
    assert _err(_load(d), case) <= F32_TOL


@pytest.mark.parametrize("case", ["qwen2_vl", "qwen2_5_vl"])
def test_qwen2_vl_reads_the_released_flat_config(tmp_path, case):
    """transformers 4's files: the text model's keys at the top level beside vision_config, M-RoPE as rope_scaling
    {"type": "mrope", "mrope_section"} with a top-level rope_theta (the fixture's names are the releases' already)."""
    d = _config(case)
    text = d.pop("text_config")
    rope = text.pop("rope_parameters")
    del text["model_type"]
    flat = dict(d, **text, vision_token_id=151654, rope_theta=rope["rope_theta"],
                rope_scaling={"type": "mrope", "mrope_section": rope["mrope_section"]})
    m = _load(_write(case, tmp_path / "m", flat))
    assert m.config.mrope_section == [2, 3, 3] and m.config.rope_scaling is None
    assert _err(m, case) <= F32_TOL and _err(m, case, "reference_long") <= F32_TOL


def _text_only(k, a):
    if k.startswith(P):
        return {"model." + k[len(P):]: a}
    if k.startswith(("layers.", "embed_tokens.", "norm.")):       # Cosmos 3 Omni's release names
        return {cosmos3_omni.module_name(k): a}
    return {} if k.startswith(("visual.", "model.visual.") + cosmos3_omni.TOWER) else {k: a}


@pytest.mark.parametrize("case", CASES)
def test_the_text_family_runs_the_wrappers_logits(tmp_path, case):
    """The text model alone, under its own model_type (text_config flat, model.* names, the wrapper's head)."""
    d = _config(case)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        text = dict(d["text_config"], tie_word_embeddings=get_family(case).Config.from_dict(d).tie_word_embeddings)
    m = _load(_write(case, tmp_path / "m", text, _text_only))
    assert m.config.model_type == d["text_config"]["model_type"]
    assert _err(m, case) <= F32_TOL and _err(m, case, "reference_chat") <= F32_TOL


@pytest.mark.parametrize("case", CASES)
def test_a_converted_file_is_a_file_of_the_text_model_with_the_same_logits(tmp_path, case):
    out = tmp_path / "m.petit"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        convert(DIR / case, out, "f32").close()
    m = load_strict(out)                    # the file has no tower: nothing to say
    section = _config(case)["text_config"]["rope_parameters"]["mrope_section"]
    assert m.config.model_type == case and m.config.mrope_section == section
    assert not any("visual" in n for n in m.tensors)
    ids = np.load(DIR / case / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(m.logits(ids), _load(DIR / case).logits(ids))


def test_qwen3_vl_moe_reads_the_released_transposed_experts(tmp_path):
    """The releases store gate_up_proj [E, hidden, 2 x inter] and down_proj [E, inter, hidden]; transformers
    transposes a tensor whose shape is not its module's, and so does Petit."""
    def transposed(k, a):
        return {k: np.ascontiguousarray(a.transpose(0, 2, 1)) if ".mlp.experts." in k else a}
    m = _load(_write("qwen3_vl_moe", tmp_path / "m", _config("qwen3_vl_moe"), transposed))
    assert _err(m, "qwen3_vl_moe") <= F32_TOL


def test_qwen3_vl_moe_reads_num_local_experts_and_always_renormalises():
    cfg = _load(DIR / "qwen3_vl_moe").config
    assert "num_local_experts" in _config("qwen3_vl_moe")["text_config"]       # transformers 5's name
    assert (cfg.num_experts, cfg.num_experts_per_tok, cfg.norm_topk_prob) == (8, 2, True)
    d = _config("qwen3_vl_moe")
    d["text_config"] = dict(d["text_config"], norm_topk_prob=False, sliding_window=16)
    with pytest.warns(UserWarning, match=r"ignoring unknown key\(s\) norm_topk_prob \(qwen3_vl_moe has no sliding "
                                         r"window and always renormalises: not read\), sliding_window"):
        cfg = get_family("qwen3_vl_moe").Config.from_dict(d)
    assert cfg.norm_topk_prob is True and cfg.types() == ["full_attention"] * 3


def _from(case, **text):
    d = _config(case)
    d["text_config"] = dict(d["text_config"], **text)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        return get_family(case).Config.from_dict(d)


def test_the_head_is_tied_as_each_wrapper_ties_it():
    """Qwen2-VL / Qwen2.5-VL: the wrapper's tie_word_embeddings or text_config's (its __post_init__ forwards a true
    one); Qwen3-VL / Qwen3-VL-MoE: the wrapper's alone."""
    assert _from("qwen2_vl").tie_word_embeddings is False
    assert _from("qwen2_vl", tie_word_embeddings=True).tie_word_embeddings is True
    assert _from("qwen2_5_vl").tie_word_embeddings is True                     # the wrapper's own true
    assert "lm_head.weight" not in _load(DIR / "qwen2_5_vl").tensors
    assert _from("qwen3_vl", tie_word_embeddings=True).tie_word_embeddings is False
    assert _config("qwen3_vl_moe")["text_config"]["tie_word_embeddings"] is True
    assert _from("qwen3_vl_moe").tie_word_embeddings is False


@pytest.mark.parametrize("case, text, message", [
    ("qwen2_vl", dict(rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 4]}),
     r"mrope_section \[2, 3, 4\] sums to 9, not head_dim / 2 = 8: transformers splits a head's rotary frequencies "
     r"by it and cannot run this config"),
    ("qwen2_vl", dict(rope_parameters={"rope_type": "default", "rope_theta": 1e6}),      # default [16, 24, 24]
     r"mrope_section \[16, 24, 24\] sums to 64, not head_dim / 2 = 8"),
    ("qwen2_vl", dict(head_dim=32), r"head_dim 32 is not hidden_size // num_attention_heads \(16\), which "
                                    r"qwen2_vl's attention uses whatever head_dim says"),
    ("qwen3_vl", dict(rope_parameters={"rope_type": "magic", "rope_theta": 5e5, "mrope_section": [2, 3, 3]}),
     r"rope_parameters type 'magic' is not supported \(supported: default, linear, dynamic, llama3, yarn, "),
    ("qwen3_vl", dict(rope_parameters={"rope_type": "default", "rope_theta": 5e5, "mrope_section": "2,3,3"}),
     r"mrope_section must be a list of non-negative integers, got '2,3,3'"),
    ("qwen3_vl", dict(model_type="qwen3_vl_moe_text"),
     r"qwen3_vl's text_config has model_type 'qwen3_vl_moe_text'; the qwen3_vl family runs a qwen3_vl_text text "
     r"model"),
])
def test_refusals_by_name(case, text, message):
    with pytest.raises(ValueError, match=message):
        _from(case, **text)


@pytest.mark.parametrize("case, text, reported", [
    ("qwen2_vl", dict(rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3],
                                       "mrope_interleaved": True}), r"rope_parameters.mrope_interleaved"),
    ("qwen3_vl", dict(sliding_window=8, use_sliding_window=True),
     r"sliding_window \(qwen3_vl's attention has no sliding window: not read\), use_sliding_window \(qwen3_vl's "),
])
def test_keys_transformers_does_not_read_are_reported(case, text, reported):
    """Qwen2-VL reads no mrope_interleaved (Qwen3-VL's); Qwen3-VL's attention has no sliding window."""
    with pytest.warns(UserWarning, match="ignoring unknown key.s. " + reported):
        cfg = _from(case, **text)
    assert cfg.types() == ["full_attention"] * 3


def test_mrope_sections_change_nothing_for_text(tmp_path):
    """The fixtures' no-effect checks show it on transformers (other sections: the same logits); in Petit the
    sections are read and kept, and the logits are those of plain RoPE."""
    d = _config("qwen3_vl")
    d["text_config"]["rope_parameters"] = dict(d["text_config"]["rope_parameters"], mrope_section=[1, 1, 6])
    m = _load(_write("qwen3_vl", tmp_path / "m", d))
    assert m.config.mrope_section == [1, 1, 6] and _err(m, "qwen3_vl") <= F32_TOL


# --- GLM-4.1V, GLM-4.5V, GLM-4.6V, GLM-GA ---

def test_glm46v_runs_the_text_model_its_text_config_names():
    """GLM-4.6V's fixture holds a glm4v_moe_text model (its experts 3-D: no conversion splits them), GLM-GA's a
    glm4v_text one (text_config's default type); a converted file keeps the type as text_model_type."""
    moe, dense = _load(DIR / "glm46v"), _load(DIR / "glmga")
    assert type(moe.config).__name__ == "Glm46VMoeConfig" and moe.config.text_model_type == "glm4v_moe_text"
    assert type(dense.config).__name__ == "GlmgaConfig" and dense.config.text_model_type == "glm4v_text"
    assert any(n.endswith("mlp.experts.gate_up_proj") for n in _read_safetensors(DIR / "glm46v" /
                                                                                    "model.safetensors"))
    assert sum(L.moe is not None for L in moe.net.layers) == 2 and all(L.moe is None for L in dense.net.layers)
    d = _config("glmga")
    del d["text_config"]["model_type"]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        assert get_family("glmga").Config.from_dict(d).text_model_type == "glm4v_text"


def test_glm_heads_are_tied_as_each_wrapper_ties_them():
    """GLM-4.1V / GLM-4.5V: the wrapper's tie_word_embeddings or text_config's (forwarded); GLM-4.6V / GLM-GA: the
    wrapper's alone."""
    assert _from("glm4v").tie_word_embeddings is False
    assert _from("glm4v", tie_word_embeddings=True).tie_word_embeddings is True
    assert _from("glm4v_moe", tie_word_embeddings=True).tie_word_embeddings is True
    assert _from("glm46v", tie_word_embeddings=True).tie_word_embeddings is False
    assert _from("glmga").tie_word_embeddings is True and "lm_head.weight" not in _load(DIR / "glmga").tensors


GLM_ROPE = {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}


@pytest.mark.parametrize("case, text, message", [
    ("glm4v", dict(rope_parameters=dict(GLM_ROPE, mrope_section=[2, 3, 3])),
     r"mrope_section \[2, 3, 3\] sums to 8, not rotary_dim / 2 = 4"),
    ("glm4v_moe", dict(rope_parameters=GLM_ROPE), r"mrope_section \[8, 12, 12\] sums to 32, not rotary_dim / 2 = 4"),
    ("glm4v", dict(head_dim=32), r"head_dim 32 is not hidden_size // num_attention_heads \(16\)"),
    ("glm46v", dict(model_type="qwen3_vl_text"), r"glm46v's text_config has model_type 'qwen3_vl_text'; the glm46v "
                                                 r"family runs a text model of 'glm4v_text' / 'glm4v_moe_text'"),
])
def test_glm_refusals_by_name(case, text, message):
    with pytest.raises(ValueError, match=message):
        _from(case, **text)


@pytest.mark.parametrize("case, text, reported", [
    ("glm4v", dict(attention_bias=False), r"attention_bias \(glm4v's q / k / v always have biases: not read\)"),
    ("glm4v_moe", dict(use_qk_norm=True), r"use_qk_norm \(glm4v_moe's attention has no q / k norms: not read\)"),
])
def test_glm_keys_transformers_does_not_read_are_reported(case, text, reported):
    with pytest.warns(UserWarning, match="ignoring unknown key.s. " + reported):
        cfg = _from(case, **text)
    assert cfg.attention_bias is True and not getattr(cfg, "use_qk_norm", False)


def test_glm4v_moe_reads_num_local_experts():
    cfg = _from("glm4v_moe", num_local_experts=8)       # transformers' attribute_map: n_routed_experts
    assert cfg.n_routed_experts == 8


# --- Cosmos 3 Omni ---

def _cosmos_v5(k, a):
    """transformers 5's module names of Cosmos 3 Omni's release names (its conversion mapping's renaming)."""
    name = cosmos3_omni.module_name(k)
    if name.startswith("model."):
        return {P + name[len("model."):]: a}
    return {"model.visual." + k: a} if k.startswith(cosmos3_omni.TOWER) else {k: a}


def _cosmos_older(k, a):
    """The older releases' names: the text model at the top with Qwen3-VL's attention names (no Diffusers' ones)."""
    name = cosmos3_omni.module_name(k)
    return {name[len("model."):] if name.startswith("model.") else name: a}


@pytest.mark.parametrize("rename", [_cosmos_v5, _cosmos_older], ids=["transformers5", "older_release"])
def test_cosmos3_omni_reads_each_spelling_of_its_names(tmp_path, rename):
    assert "layers.0.self_attn.to_q.weight" in _read_safetensors(DIR / "cosmos3_omni" / "model.safetensors")
    m = _load(_write("cosmos3_omni", tmp_path / "m", _config("cosmos3_omni"), rename))
    assert _err(m, "cosmos3_omni") <= F32_TOL


def test_cosmos3_omni_runs_a_qwen3_vl_text_model_only():
    with pytest.raises(ValueError, match="cosmos3_omni's text_config has model_type 'qwen3_vl_moe_text'; the "
                                         "cosmos3_omni family runs a qwen3_vl_text text model"):
        _from("cosmos3_omni", model_type="qwen3_vl_moe_text")
