"""The wrap group of issue 30 (tests/fixtures/hf5_wrap: the multimodal wrappers gemma3, mistral3, llama4 and the text
families that come with them): what tests/test_hf_parity.py, test_verify_families.py and the app's chat test do not
already hold for every hf5 fixture.

- (Parity at every position of the 140-token and chat prompts: tests/test_hf_parity.py, over every fixture.)
- The forward plan equals the per-op path.
- A wrapper says once that its tower is not run (one warning, its tower's tensors not listed one by one), reads the
  released checkpoints' spelling of the names as well as transformers 5's, and converts to a file of its text model.
- Each family's particulars (Gemma 3's wrapper does not soft-cap its logits, ...).
"""
import json
import shutil
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.loading.convert import convert

from models import TOWER_NOT_RUN, assert_as_close_as_llama_cpps_own_run
from test_plan import _assert_same

DIR = Path(__file__).parent / "fixtures" / "hf5_wrap"
FOLDERS = {p.name: p for p in sorted(DIR.iterdir()) if (p / "reference.npz").is_file()}
CASES = sorted(FOLDERS)
WRAPPERS = [c for c in CASES if "text_config" in json.loads((FOLDERS[c] / "config.json").read_text())]
F32_TOL = 1e-4


def _load(folder, weights="f32"):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a fixture loads without any "ignoring ..." report
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        return petit.load(folder, weights=weights)


def rel_err(got, ref):
    return np.abs(got - ref).max(axis=1) / (ref.max(axis=1) - ref.min(axis=1))


def _config(case: str) -> dict:
    return json.loads((FOLDERS[case] / "config.json").read_text())


def _err(model, folder, prompt="reference"):
    ref = np.load(folder / f"{prompt}.npz")
    return rel_err(model.logits(ref["input_ids"]), ref["logits"]).max()


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
@pytest.mark.parametrize("case", CASES)
def test_the_plan_equals_the_per_op_path(case, weights):
    _assert_same(_load(FOLDERS[case], weights), "f32")


def _rewrite(src: Path, dst: Path, rename=lambda k: k, config=None) -> Path:
    """A copy of a fixture folder with its tensors renamed (the safetensors header rewritten, the data as is) and its
    config.json replaced."""
    shutil.copytree(src, dst)
    raw = (src / "model.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    head = {(k if k == "__metadata__" else rename(k)): v for k, v in json.loads(raw[8:8 + n]).items()}
    text = json.dumps(head).encode()
    text += b" " * (-len(text) % 8)
    (dst / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])
    if config is not None:
        (dst / "config.json").write_text(json.dumps(config))
    return dst


@pytest.mark.parametrize("case", WRAPPERS)
def test_a_wrapper_says_once_that_its_tower_is_not_run(case):
    with pytest.warns(UserWarning) as caught:
        petit.load(FOLDERS[case], weights="f32")
    said = [str(w.message) for w in caught]
    assert len(said) == 1, said
    assert f"config: {_config(case)['model_type']}: the vision tower (vision_config) is not run; Petit runs the text model (text_config) " \
           f"alone, so images cannot be given" == said[0]


def _other_spelling(k: str) -> str:
    """A wrapper's tensor names the other way: save_pretrained (transformers 5.25, as the released checkpoints of
    transformers 4) writes the language model as its CausalLM module names it under language_model. and the tower
    without model.; the modules of transformers 5's wrapper class are named model.language_model.X / model.X."""
    for a, b in (("language_model.model.", "model.language_model."), ("language_model.lm_head.", "lm_head.")):
        if k.startswith(a):
            return b + k[len(a):]
        if k.startswith(b):
            return a + k[len(b):]
    return k[len("model."):] if k.startswith("model.") else "model." + k


@pytest.mark.parametrize("case", WRAPPERS)
def test_a_wrapper_reads_both_spellings_of_its_names(tmp_path, case):
    d = _rewrite(FOLDERS[case], tmp_path / "m", _other_spelling)
    assert _err(_load(d), d) <= F32_TOL


@pytest.mark.parametrize("case", WRAPPERS)
def test_a_wrapper_reports_a_tensor_outside_its_tower_and_text_model(tmp_path, case):
    raw = (FOLDERS[case] / "model.safetensors").read_bytes()
    one = min(k for k in json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]]) if "multi_modal_projector." in k)
    d = _rewrite(FOLDERS[case], tmp_path / "m", lambda k: "model.audio_tower.x" if k == one else k)
    with pytest.warns(UserWarning, match="ignoring checkpoint tensor.s. the .* family does not use: "
                                         "model.audio_tower.x"):
        petit.load(d, weights="f32")


@pytest.mark.parametrize("case", WRAPPERS)
def test_a_wrapper_reports_its_own_unknown_keys(tmp_path, case):
    d = _rewrite(FOLDERS[case], tmp_path / "m", config=dict(_config(case), audio_config={"x": 1}))
    with pytest.warns(UserWarning, match="config: ignoring unknown key.s. audio_config"):
        petit.load(d, weights="f32")


@pytest.mark.parametrize("case", WRAPPERS)
def test_a_converted_wrapper_is_a_file_of_its_text_model(tmp_path, case):
    out = tmp_path / "m.petit"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        convert(FOLDERS[case], out, "f32").close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # the file has no tower: nothing to say
        m = petit.load(out)
    assert m.config.model_type == _config(case)["model_type"] and not any("tower" in n or "projector" in n for n in m.tensors)
    assert _err(m, FOLDERS[case]) <= F32_TOL


def test_gemma3_does_not_soft_cap_its_logits(tmp_path):
    """Gemma3ForConditionalGeneration computes lm_head(h) whatever text_config's final_logit_softcapping says
    (transformers' no-effect check in cases.json); gemma3_text with the same config caps them."""
    cfg = _config("gemma3")
    d = _rewrite(FOLDERS["gemma3"], tmp_path / "m", config=dict(cfg, text_config=dict(
        cfg["text_config"], final_logit_softcapping=5.0)))
    assert _err(_load(d), d) <= F32_TOL
    ref = np.load(d / "reference.npz")
    text = _rewrite(FOLDERS["gemma3"], tmp_path / "t", lambda k: k.replace("language_model.model.", "model.").replace("language_model.lm_head", "lm_head"),
                    config=dict(cfg["text_config"], final_logit_softcapping=5.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # the tower's tensors, which gemma3_text does not know
        capped = petit.load(text, weights="f32").logits(ref["input_ids"])
    assert np.abs(capped).max() < 5.0 < np.abs(ref["logits"]).max()


@pytest.mark.parametrize("T, pos0, H, KV, hd, n_floor", [(7, 0, 3, 1, 5, 3.0), (13, 0, 4, 2, 9, 4.0),
                                                        (5, 11, 6, 3, 7, 6.0), (1, 23, 2, 2, 3, 8.0)])
def test_the_temperature_at_p_kernel_equals_a_float64_reference(T, pos0, H, KV, hd, n_floor):
    """Ministral 3's query scaling, floor(p / n) (temp_at_p), at odd sizes and past the first position; and Llama
    4's floor((p + 1) / n) still where the flag is off (each differs from the other at these positions)."""
    from petit.native import attention
    from trainer.reference.ops import attention as ref_attention
    rng = np.random.default_rng(T * 100 + pos0)
    n = pos0 + T
    q64, k64, v64 = (rng.standard_normal((n, h, hd)) for h in (H, KV, KV))
    kc = np.ascontiguousarray(k64.transpose(1, 0, 2), np.float32)
    vc = np.ascontiguousarray(v64.transpose(1, 0, 2), np.float32)
    outs = {}
    for at_p in (1, 0):
        temp = (n_floor, 0.7, at_p)
        got = attention(q64[pos0:].astype(np.float32), kc, vc, pos0, hd ** -0.5, temperature=temp)
        want = ref_attention(q64, k64, v64, hd ** -0.5, 0.0, 0, temperature=temp).reshape(n, H, hd)[pos0:]
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())
        outs[at_p] = got
    assert np.abs(outs[1] - outs[0]).max() > 1e-3


def test_ministral3_scales_its_queries_by_position():
    net = _load(FOLDERS["ministral3"]).net
    assert all(L.temperature == (16.0, 0.1, 1) for L in net.layers)


@pytest.mark.parametrize("rope, message", [
    ({"rope_type": "yarn", "rope_theta": 1e6, "factor": 16.0, "original_max_position_embeddings": 16},
     r"ministral3 scales its queries by rope_parameters' llama_4_scaling_beta and original_max_position_embeddings "
     r"\(> 0\); this config gives \[None, 16\]"),
    ({"rope_type": "default", "rope_theta": 1e6, "llama_4_scaling_beta": 0.1},
     r"this config gives \[0.1, None\]"),
])
def test_ministral3_refuses_what_transformers_cannot_run(tmp_path, rope, message):
    d = _rewrite(FOLDERS["ministral3"], tmp_path / "m", config=dict(_config("ministral3"), rope_parameters=rope))
    with pytest.raises(ValueError, match=message):
        petit.load(d, weights="f32")


def test_ministral3_reads_the_query_scaling_beside_a_default_rope(tmp_path):
    """transformers reads llama_4_scaling_beta / original_max_position_embeddings whatever the rope_type (the
    fixture's feature check "RoPE without yarn" runs it): Petit too, the RoPE then unscaled."""
    rope = {"rope_type": "default", "rope_theta": 1e6, "llama_4_scaling_beta": 0.1, "original_max_position_embeddings": 16}
    d = _rewrite(FOLDERS["ministral3"], tmp_path / "m", config=dict(_config("ministral3"), rope_parameters=rope))
    m = _load(d)
    assert m.config.rope_scaling is None and m.config.llama_4_scaling == [0.1, 16]
    assert all(L.temperature == (16.0, 0.1, 1) for L in m.net.layers)


def test_mistral3_ties_its_head_by_the_wrappers_config_unless_the_checkpoint_stores_one(tmp_path):
    """transformers ties Mistral3ForConditionalGeneration's head by the wrapper's tie_word_embeddings (default true),
    whatever text_config says; but from_pretrained keeps a stored head that differs from the embeddings (it warns and
    does not tie). So without the top-level key: the stored head is read (the fixture's logits); without a stored
    head as well: tied."""
    cfg = _config("mistral3")
    assert cfg["tie_word_embeddings"] is False and cfg["text_config"]["tie_word_embeddings"] is False
    no_key = {k: v for k, v in cfg.items() if k != "tie_word_embeddings"}
    d = _rewrite(FOLDERS["mistral3"], tmp_path / "m", config=no_key)
    m = _load(d)
    assert m.net.lm_head is not m.net.embed and _err(m, d) <= F32_TOL
    d = _rewrite(FOLDERS["mistral3"], tmp_path / "t", lambda k: "vision_tower.dropped" if k.endswith("lm_head.weight")
                 else k, config=no_key)
    net = _load(d).net
    assert net.lm_head is net.embed


@pytest.mark.parametrize("case, text_type, family", [("mistral3", "ministral3", "Mistral3Config"),
                                                     ("mistral3_small", "mistral", "Mistral3SmallConfig")])
def test_mistral3_runs_the_text_model_its_text_config_names(tmp_path, case, text_type, family):
    m = _load(FOLDERS[case])
    assert m.config.text_model_type == text_type and type(m.config).__name__ == family
    cfg = _config(case)
    d = _rewrite(FOLDERS[case], tmp_path / "m", config=dict(cfg, text_config=dict(cfg["text_config"],
                                                                                  model_type="llama")))
    with pytest.raises(ValueError, match="mistral3's text_config has model_type 'llama'; the mistral3 family runs a "
                                         "text model of 'ministral3' / 'mistral' / 'mistral4'"):
        petit.load(d, weights="f32")


# --- GGUF: llama.cpp's own conversions of these folders (tests/fixtures/gguf5_wrap, its README says how) ---

GGUF = Path(__file__).parent / "fixtures" / "gguf5_wrap"
GGUF_MANIFEST = json.loads((GGUF / "manifest.json").read_text())["cases"]
GGUF_READ = sorted(GGUF_MANIFEST)
# llama.cpp's GELU reads a table of f16 values (tests/test_gguf_more.py's GELU_TABLE): within 1e-3 of the range
GELU_TABLE = {"gemma3"}


def _gguf(case, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a file of the text model: nothing to report
        return petit.load(GGUF / case / "q8_0.gguf", **kw)


def _scaled(got, exact):
    return np.abs(got - exact).max() / (exact.max() - exact.min())


@pytest.mark.parametrize("case", GGUF_READ)
def test_gguf_as_stored_is_as_close_as_llama_cpps_own_run(case):
    model = _gguf(case)
    assert model.weight_type == "q8_0"
    assert_as_close_as_llama_cpps_own_run(model, np.load(GGUF / case / "q8_0.npz"), case in GELU_TABLE)


@pytest.mark.parametrize("case", ["ministral3", "mistral3"])
def test_gguf_mistral3_reads_the_query_scaling_and_yarn(case):
    """llama.cpp's mistral3: beta from attention.temperature_scale, the floor from the yarn original context, floor(p
    / n) (offset 0); the folder's values."""
    model = _gguf(case, weights="f32")
    assert model.config.model_type == "ministral3" and model.config.llama_4_scaling == [pytest.approx(0.1), 16]
    assert all(L.temperature == (16.0, pytest.approx(0.1), 1) for L in model.net.layers)
    s = model.config.rope_scaling
    assert s["rope_type"] == "yarn" and s["factor"] == 16.0 and (s["mscale"], s["mscale_all_dim"]) == (1.0, 1.0)
    assert model.net.layers[0].rope.interleaved


def test_gguf_mistral3_without_the_temperature_key_runs_unscaled_queries(tmp_path):
    """A Mistral Small file (no attention.temperature_scale): no query scaling, as llama.cpp."""
    from petit.formats.gguf import GGUFFile, write_gguf
    with GGUFFile(GGUF / "mistral3" / "q8_0.gguf") as f:
        meta = {k: v for k, v in f.metadata.items() if k != "mistral3.attention.temperature_scale"}
        write_gguf(tmp_path / "x.gguf", meta, {n: (t.type, t.shape, np.array(f.raw(n))) for n, t in f.tensors.items()})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = petit.load(tmp_path / "x.gguf", weights="f32")
    assert model.config.llama_4_scaling == [0.0, 16] and all(L.temperature is None for L in model.net.layers)
    ref = np.load(GGUF / "mistral3" / "q8_0.npz")
    assert _scaled(model.logits(ref["input_ids"]), ref["exact_logits"]) > 1e-3      # the key mattered


@pytest.mark.parametrize("case", GGUF_READ)
def test_gguf_converts_to_a_petit_file_with_the_same_logits(tmp_path, case):
    from petit.cli import main
    ref = np.load(GGUF / case / "q8_0.npz")
    assert main(["convert", str(GGUF / case / "q8_0.gguf"), "-o", str(tmp_path / "m.petit"), "--f32"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = petit.load(tmp_path / "m.petit").logits(ref["input_ids"])
    assert _scaled(got, ref["exact_logits"]) <= (1e-3 if case in GELU_TABLE else 1e-5)


# the keys of a released EXAONE 3.5 config.json (LGAI-EXAONE/EXAONE-3.5-*): ExaoneConfig's aliases of Llama's
EXAONE_RELEASED = {"num_hidden_layers": "num_layers", "rms_norm_eps": "layer_norm_epsilon",
                   "hidden_act": "activation_function"}


def test_exaone_reads_the_released_configs_keys(tmp_path):
    cfg = {EXAONE_RELEASED.get(k, k): v for k, v in _config("exaone").items()}
    cfg.update(architectures=["ExaoneForCausalLM"], embed_dropout=0.0)
    d = _rewrite(FOLDERS["exaone"], tmp_path / "m", config=cfg)
    m = _load(d)
    assert m.config.num_hidden_layers == 2 and m.config.rms_norm_eps == 1e-5 and _err(m, d) <= F32_TOL


def test_exaone_refuses_an_alias_that_disagrees(tmp_path):
    d = _rewrite(FOLDERS["exaone"], tmp_path / "m", config=dict(_config("exaone"), num_layers=3))
    with pytest.raises(ValueError, match="config: num_layers 3 and num_hidden_layers 2 disagree"):
        petit.load(d, weights="f32")


def test_exaone_reads_its_own_tensor_names_and_llamas(tmp_path):
    """The fixture holds EXAONE's names (transformer.h.N.attn.attention.q_proj, ...), as save_pretrained writes
    them; the same tensors under Llama's names are read too, and every tensor is used either way."""
    from petit.models.families.dense.exaone import llama_name
    m = _load(FOLDERS["exaone"])
    assert "model.layers.1.mlp.gate_proj.weight" in m.tensors
    d = _rewrite(FOLDERS["exaone"], tmp_path / "m", llama_name)
    assert _err(_load(d), d) <= F32_TOL


def test_solar_open_routes_every_layer_with_llamas_attention():
    net = _load(FOLDERS["solar_open"]).net
    assert all(L.moe is not None and L.q_norm is None and L.rope.dim == 16 for L in net.layers)


@pytest.mark.parametrize("key, value", [("first_k_dense_replace", 1), ("use_qk_norm", True)])
def test_solar_open_reports_glm4_moe_keys_it_does_not_have(tmp_path, key, value):
    """transformers' SolarOpenConfig makes these an AttributeError: a config.json that sets one runs as if it did
    not (the fixture's logits), and the key is reported."""
    d = _rewrite(FOLDERS["solar_open"], tmp_path / "m", config=dict(_config("solar_open"), **{key: value}))
    with pytest.warns(UserWarning, match=f"config: ignoring unknown key.s. {key} .solar_open has none"):
        m = petit.load(d, weights="f32")
    assert _err(m, d) <= F32_TOL


def test_solar_open_reads_num_local_experts_and_refuses_a_partial_rotary(tmp_path):
    cfg = _config("solar_open")
    d = _rewrite(FOLDERS["solar_open"], tmp_path / "m", config=dict(
        {k: v for k, v in cfg.items() if k != "n_routed_experts"}, num_local_experts=8))
    assert _err(_load(d), d) <= F32_TOL
    (d / "config.json").write_text(json.dumps(dict(cfg, rope_parameters=dict(cfg["rope_parameters"],
                                                                              partial_rotary_factor=0.5))))
    with pytest.raises(ValueError, match="partial_rotary_factor 0.5 is not supported by the solar_open family"):
        petit.load(d, weights="f32")


def test_gemma3_reads_a_transformers_4_text_config(tmp_path):
    """A released Gemma 3 folder (transformers 4.5x) spells text_config's RoPE as rope_theta, rope_local_base_freq
    and rope_scaling, and its layers by sliding_window_pattern: the same model, the same logits."""
    cfg = _config("gemma3")
    text = {k: v for k, v in cfg["text_config"].items() if k not in ("rope_parameters", "layer_types")}
    text.update(rope_theta=1e6, rope_local_base_freq=1e4, rope_scaling={"rope_type": "linear", "factor": 8.0},
                sliding_window_pattern=2)
    d = _rewrite(FOLDERS["gemma3"], tmp_path / "m", config=dict(cfg, text_config=text))
    assert _err(_load(d), d) <= F32_TOL


def test_llama4_ties_its_head_by_text_config(tmp_path):
    """Llama4ForConditionalGeneration's language model is a Llama4ForCausalLM of text_config: the wrapper's own
    tie_word_embeddings ties nothing (checked in transformers 5.25), so true there still reads the stored head."""
    cfg = _config("llama4")
    assert cfg["text_config"]["tie_word_embeddings"] is False
    d = _rewrite(FOLDERS["llama4"], tmp_path / "m", config=dict(cfg, tie_word_embeddings=True))
    m = _load(d)
    assert m.net.lm_head is not m.net.embed and _err(m, d) <= F32_TOL
