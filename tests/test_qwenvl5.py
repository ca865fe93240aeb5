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
- The one-call forward plan equals the per-op path bit for bit (f32 and q8_0 weights, f32 and int8 caches).
- llama.cpp's GLM-4.1V / GLM-4.5V files (tests/fixtures/gguf5_qwenvl: glm4 / glm4moe with M-RoPE sections; GLM-4.1V's
  q / k rows permuted to halves by its converter, put back by Petit), as stored against llama.cpp's own run, `petit
  verify`, a converted file; test_gguf5_exact.py holds them decoded to llama.cpp's exact logits.
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
from petit.models import get_family
from petit.models.families.wrappers import cosmos3_omni
from petit.models.blocks import qwen_vl
from models import TOWER_NOT_RUN, load_strict, range_err, rel_err, write_f32_safetensors
from test_moe_a5 import _read_safetensors
from test_plan import _assert_same

DIR = Path(__file__).parent / "fixtures" / "hf5_qwenvl"
GGUF = Path(__file__).parent / "fixtures" / "gguf5_qwenvl"
GGUF_MANIFEST = json.loads((GGUF / "manifest.json").read_text())["cases"]
GGUF_READ = sorted(c for c in GGUF_MANIFEST if (GGUF / c / "q8_0.gguf").is_file())
GGUF_FAMILY = {"glm4v": ("glm4", "glm4v_text"), "glm4v_moe": ("glm4moe", "glm4_moe")}    # arch, family
_scaled = range_err
CASES = ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "glm4v", "glm4v_moe", "glm46v", "glmga", "cosmos3_omni",
         "qwen2_5_omni_thinker", "qwen3_omni_moe_thinker"]
THINKERS = ("qwen2_5_omni_thinker", "qwen3_omni_moe_thinker")
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
    if case in THINKERS:
        said = (f"config: {case}: the vision and audio tower (vision_config, audio_config) is not run; Petit runs the "
                f"text model (text_config) alone, so images, video or audio cannot be given")
    else:
        said = (f"config: {case}: the vision tower (vision_config) is not run; Petit runs the text model (text_config) "
                f"alone, so images cannot be given")
    assert [str(w.message) for w in caught] == [said]


@pytest.mark.parametrize("weights, kv", [("f32", "f32"), ("q8_0", "int8")])
@pytest.mark.parametrize("case", CASES)
def test_the_plan_equals_the_per_op_path(case, weights, kv):
    _assert_same(_load(DIR / case, weights), kv)


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
    return {} if k.startswith(("visual.", "model.visual.", "audio_tower.") + cosmos3_omni.TOWER) else {k: a}


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
    assert not any("visual" in n or "audio" in n for n in m.tensors)
    ids = np.load(DIR / case / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(m.logits(ids), _load(DIR / case).logits(ids))


def test_qwen3_vl_moe_reads_the_released_transposed_experts(tmp_path):
    """The releases store down_proj [E, inter, hidden] (and gate_up_proj [E, hidden, 2 x inter]); transformers
    transposes each tensor whose shape is not its module's, and so does Petit (the fixture's gate_up_proj is square:
    as transformers, Petit reads it as it is)."""
    def transposed(k, a):
        return {k: np.ascontiguousarray(a.transpose(0, 2, 1)) if k.endswith("experts.down_proj") else a}
    m = _load(_write("qwen3_vl_moe", tmp_path / "m", _config("qwen3_vl_moe"), transposed))
    assert _err(m, "qwen3_vl_moe") <= F32_TOL


class _Fused:
    """A checkpoint of one layer's 3-D experts (E 2, F 3, D 4)."""

    def __init__(self, gate_up, down):
        self.t = {"model.layers.0.mlp.experts.gate_up_proj": gate_up, "model.layers.0.mlp.experts.down_proj": down}

    def __contains__(self, n):
        return n in self.t

    def info(self, n):
        return "f32", self.t[n].shape

    def f32(self, n):
        return self.t[n]


@pytest.mark.parametrize("flip", [(False, False), (True, True), (True, False), (False, True)])
def test_fused_experts_are_split_in_either_layout(flip):
    rng = np.random.default_rng(0)
    gu, dn = rng.standard_normal((2, 6, 4)).astype(np.float32), rng.standard_normal((2, 4, 3)).astype(np.float32)
    ckpt = _Fused(gu.transpose(0, 2, 1).copy() if flip[0] else gu, dn.transpose(0, 2, 1).copy() if flip[1] else dn)
    got = {k: e[1]() for k, e in qwen_vl.fused_experts(ckpt, [0], 2, 3, 4, transposable=True).items()}
    p = "model.layers.0.mlp.experts.1."
    np.testing.assert_array_equal(got[p + "gate_proj.weight"], gu[1, :3])
    np.testing.assert_array_equal(got[p + "up_proj.weight"], gu[1, 3:])
    np.testing.assert_array_equal(got[p + "down_proj.weight"], dn[1])
    if any(flip):
        with pytest.raises(ValueError, match="has shape .*, not \\[2, "):
            qwen_vl.fused_experts(ckpt, [0], 2, 3, 4, transposable=False)


def test_qwen3_vl_moe_reads_num_local_experts_and_always_renormalises():
    cfg = _load(DIR / "qwen3_vl_moe").config
    assert "num_local_experts" in _config("qwen3_vl_moe")["text_config"]       # transformers 5's name
    assert (cfg.num_experts, cfg.num_experts_per_tok, cfg.norm_topk_prob) == (8, 2, True)
    with pytest.warns(UserWarning, match=r"ignoring unknown key\(s\) norm_topk_prob \(qwen3_vl_moe has no sliding "
                                         r"window and always renormalises: not read\), sliding_window"):
        cfg = _from("qwen3_vl_moe", norm_topk_prob=False, sliding_window=16)
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


# --- the Omni thinkers ---

@pytest.mark.parametrize("case", THINKERS)
def test_a_thinker_reads_the_full_releases_names(tmp_path, case):
    """Qwen2.5-Omni's and Qwen3-Omni's released checkpoints hold the thinker under thinker.* (beside the talker, which
    is another model_type); transformers' conversion drops the prefix, and so does Petit."""
    m = _load(_write(case, tmp_path / "m", _config(case), lambda k, a: {"thinker." + k: a}))
    assert _err(m, case) <= F32_TOL


def test_thinkers_tie_their_head_by_their_own_key():
    assert _config("qwen2_5_omni_thinker")["text_config"]["tie_word_embeddings"] is True
    assert _from("qwen2_5_omni_thinker").tie_word_embeddings is False
    assert _from("qwen3_omni_moe_thinker", tie_word_embeddings=True).tie_word_embeddings is False


def test_qwen3_omni_reads_norm_topk_prob_and_no_window():
    assert _from("qwen3_omni_moe_thinker", norm_topk_prob=False).norm_topk_prob is False    # read (Qwen3-VL-MoE's not)
    with pytest.warns(UserWarning, match=r"ignoring unknown key\(s\) sliding_window \(qwen3_omni_moe_thinker's "
                                         r"attention has no sliding window: not read\)"):
        assert _from("qwen3_omni_moe_thinker", sliding_window=8).types() == ["full_attention"] * 3
    d = _config("qwen3_omni_moe_thinker")["text_config"]["rope_parameters"]
    assert _from("qwen3_omni_moe_thinker", rope_parameters=dict(d, interleaved=True)).mrope_section == [2, 3, 3]


@pytest.mark.parametrize("full, thinker, speech", [("qwen2_5_omni", "qwen2_5_omni_thinker", "token2wav"),
                                                   ("qwen3_omni_moe", "qwen3_omni_moe_thinker", "code2wav")])
def test_a_full_omni_release_runs_its_thinkers_text_model(tmp_path, full, thinker, speech):
    """Qwen2.5-Omni's and Qwen3-Omni's releases: the thinker under thinker_config and thinker.*, the talker and the
    vocoder beside it (not run, said once; their tensors accounted for). The thinker's logits (transformers 5.25:
    Qwen2_5OmniForConditionalGeneration / Qwen3OmniMoeForConditionalGeneration built from such a folder, its
    `thinker` gives the thinker fixture's logits within 4.8e-6)."""
    th = _config(thinker)
    cfg = {"model_type": full, "thinker_config": th, "talker_config": {"hidden_size": 8},
           f"{speech}_config": {"dim": 8}, "enable_audio_output": True}

    def rename(k, a):
        return {"thinker." + k: a} | ({"talker.model.embed_tokens.weight": a[:2]} if k == "lm_head.weight" else {})
    d = _write(thinker, tmp_path / "m", cfg, rename)
    with pytest.warns(UserWarning) as caught:
        m = petit.load(d, weights="f32")
    assert [str(w.message) for w in caught] == [
        f"config: {full}: the speech output (talker_config, {speech}_config) is not run; Petit runs the thinker's "
        f"text model alone, so replies cannot be spoken",
        f"config: {full}: the vision and audio tower (vision_config, audio_config) is not run; Petit runs the text "
        f"model (text_config) alone, so images, video or audio cannot be given"]
    ref = np.load(DIR / thinker / "reference.npz")
    assert rel_err(m.logits(ref["input_ids"]), ref["logits"]).max() <= F32_TOL
    out = tmp_path / "m.petit"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert(d, out, "f32").close()
    assert load_strict(out).config.model_type == full


# --- llama.cpp's GLM-4.1V / GLM-4.5V files ---

def _gguf(case, weights=None):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # read without any "ignoring ..." report
        return petit.load(GGUF / case / "q8_0.gguf", weights=weights)


def test_gguf_cases_are_llama_cpps_glm_files_with_mrope_sections():
    assert GGUF_READ == sorted(GGUF_FAMILY)
    for case, (arch, family) in GGUF_FAMILY.items():
        m = GGUF_MANIFEST[case]
        assert m["architecture"] == arch and m["hf_case"] == f"tests/fixtures/hf5_qwenvl/{case}"
        assert m["gguf_metadata"][f"{arch}.rope.dimension_sections"] == [2, 1, 1, 0]
        cfg = _gguf(case, weights="f32").config
        want = _from(case)
        assert cfg.model_type == family and getattr(cfg, "mrope_section", [2, 1, 1]) == [2, 1, 1]
        for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                  "partial_rotary_factor", "rope_theta", "rms_norm_eps", "attention_bias", "tie_word_embeddings"):
            assert getattr(cfg, k) == pytest.approx(getattr(want, k)), k


@pytest.mark.parametrize("case", sorted(GGUF_FAMILY))
def test_gguf_as_stored_is_as_close_as_llama_cpps_own_run(case):
    """Within 1.5x of llama.cpp's own q8_0 run at every position but one of GLM-4.5V's: its position 25, where the
    int8 activations flip a sigmoid routing choice (its top-2 logit margins are 3.5e-3 at the smallest), 0.101 of the range
    (llama.cpp's run 0.007 there; Petit's other positions 0.004-0.015, llama.cpp's 0.005-0.015)."""
    ref = np.load(GGUF / case / "q8_0.npz")
    m = _gguf(case)
    assert m.weight_type == "q8_0"
    err = np.abs(m.logits(ref["input_ids"]) - ref["exact_logits"]).max(axis=1) / np.ptp(ref["exact_logits"])
    theirs = range_err(ref["logits"], ref["exact_logits"])
    flips = 1 if case == "glm4v_moe" else 0
    assert np.sort(err)[len(err) - 1 - flips] <= 1.5 * theirs and err.max() <= 0.12, (err, theirs)


def _glm4_config(arch, sections):
    from petit.loading.gguf_archs import ARCHS
    meta = {} if sections is None else {f"{arch}.rope.dimension_sections": sections}
    cfg = {"model_type": "glm4" if arch == "glm4" else "glm4_moe", "num_hidden_layers": 3, "head_dim": 16,
           "partial_rotary_factor": 0.5, "num_attention_heads": 4}
    if arch == "glm4moe":                      # the glm4moe reader's own keys
        meta.update({f"{arch}.expert_feed_forward_length": 32, f"{arch}.expert_shared_count": 1})
    ARCHS[arch].extra(meta, lambda k: f"{arch}.{k}", cfg, lambda n: n != "blk.0.attn_q_norm.weight")
    return cfg, ARCHS[arch].cfg_fixes(cfg) if ARCHS[arch].cfg_fixes else {}


@pytest.mark.parametrize("sections, family", [(None, "glm4"), ([0, 0, 0, 0], "glm4"), ([4, 0, 0, 0], "glm4"),
                                              ([2, 1, 1, 0], "glm4v_text")])
def test_gguf_glm4_is_glm4v_when_llama_cpp_runs_its_mrope(sections, family):
    """llama.cpp runs M-RoPE (and its converter permuted q / k) when the first two sections are non-zero
    (llama_hparams::use_mrope); otherwise the file is GLM-4's, its rows as they are."""
    cfg, fixes = _glm4_config("glm4", sections)
    assert cfg["model_type"] == family and bool(fixes) == (family == "glm4v_text")


def test_gguf_glm4v_puts_the_rotary_rows_back_in_pairs():
    """The inverse of the converter's normal_to_neox: each head's rotary rows 0, 2, 4 ... were moved before 1, 3, 5 ...
    (the 8 rotary rows of a 16-row head here; rows 8-15 not rotated stay)."""
    _, fixes = _glm4_config("glm4", [2, 1, 1, 0])
    head = np.arange(16, dtype=np.float32)
    stored = np.concatenate([head[:8][0::2], head[:8][1::2], head[8:]])           # normal_to_neox of one head
    w = np.stack([stored, stored + 100])[:, :, None].repeat(3, 2).reshape(32, 3)  # two heads, 3 columns
    got = fixes["attn_q.weight"].values(w)
    np.testing.assert_array_equal(got[:16, 0], head)
    np.testing.assert_array_equal(got[16:, 2], head + 100)
    np.testing.assert_array_equal(fixes["attn_k.bias"].values(stored), head)


def test_gguf_glm4moe_reads_glm_4_5vs_sections():
    """GLM-4.5V's file is glm4moe's with sections (rotate-half either way, q / k norms when stored): the same config."""
    with_sections, _ = _glm4_config("glm4moe", [2, 1, 1, 0])
    assert with_sections == _glm4_config("glm4moe", None)[0] and with_sections["model_type"] == "glm4_moe"


def test_gguf_converts_to_a_petit_file_with_the_same_logits(tmp_path):
    from petit.cli import main
    f = GGUF / "glm4v" / "q8_0.gguf"
    ref = np.load(f.with_suffix(".npz"))
    assert main(["convert", str(f), "-o", str(tmp_path / "m.petit"), "--f32"]) == 0
    m = load_strict(tmp_path / "m.petit")
    assert m.config.model_type == "glm4v_text"
    assert np.abs(m.logits(ref["input_ids"]) - _gguf("glm4v", weights="f32").logits(ref["input_ids"])).max() <= 1e-5


@pytest.mark.parametrize("case", sorted(GGUF_FAMILY))
def test_petit_verify_passes_on_the_gguf_file(capsys, case):
    from petit.cli import main
    assert main(["verify", str(GGUF / case / "q8_0.gguf"), "-n", "4"]) == 0, capsys.readouterr().out
