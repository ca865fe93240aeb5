"""GGUF files of the families added after tests/fixtures/gguf, made by llama.cpp's own converter and quantizer from
the Hugging Face fixtures (tests/fixtures/gguf_more, llama.cpp's logits beside each file; its README says how):

- the architectures Petit's GGUF reader knows (bloom, falcon in both layouts, mpt, starcoder, arcee, seed_oss,
  hunyuan-dense, glm4, nemotron, apertus, exaone4, chatglm, gpt-oss, olmo, olmo2 with a sliding window (OLMo 3),
  ernie4_5, bitnet (BitNet b1.58), deepseek2 (DeepSeek-V3 and DeepSeek-V2-Lite), llama4 (Llama 4's text model),
  glm4moe (GLM-4.5), hunyuan-moe, ernie4_5-moe, dbrx, gemma3, phi2, stablelm, olmo2, command-r, and the state-space
  and hybrid mamba (Mamba and Falcon-Mamba), mamba2, lfm2, granitehybrid, jamba, falcon-h1, nemotron_h, qwen3next)
  give llama.cpp's exact logits (its run on the file's weights in float32) when decoded to float32, within
  1e-5 of the logit range (1e-3 for the GELU families, whose GELU llama.cpp computes from an f16 table), with the
  same argmax and greedy tokens; run as stored (Q8_0, Q4_0) they stay within 1.5x llama.cpp's own distance from
  those exact logits;
- the tokenizer gives llama.cpp's ids;
- a state-space file converts to a .petit file that gives the same logits; writing GGUF for those families is
  refused by name;
- every other architecture is refused by name, with the ones the reader does support.
"""
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit

ROOT = Path(__file__).parent / "fixtures" / "gguf_more"
MANIFEST = json.loads((ROOT / "manifest.json").read_text())["cases"]
# llama.cpp's GELU reads a table of f16 values: within 1e-3 of the range there, 1e-5 elsewhere
GELU_TABLE = {"bloom", "falcon", "falcon_new_arch", "mpt", "gpt_bigcode", "gemma3_text_v305", "phi_ffn4x"}
SSM = {"mamba", "falcon_mamba", "mamba2", "lfm2", "granitemoehybrid", "jamba", "falcon_h1", "nemotron_h",
       "qwen3_next"}
VARIANTS = {"apertus", "exaone4", "glm", "gpt_oss"}
MOE = {"deepseek_v3", "deepseek_v2_lite", "llama4_text", "glm4_moe", "hunyuan_v1_moe_nobias", "ernie4_5_moe_nobias",
       "dbrx"}
# families of ../gguf/ in the shapes llama.cpp's converter and loader take (tests/fixtures/hf_gguf)
CONVERTER = {"gemma3_text_v305", "phi_ffn4x", "stablelm_noqk", "olmo2_untied", "cohere_noqk"}
# families of ../hf_more/ in those shapes (tests/fixtures/hf_gguf: make_more_fixtures.py --converter-cases): OLMo 3
# (llama.cpp's olmo2 with a sliding window), ERNIE 4.5, OLMo-1 and BitNet b1.58 (llama.cpp's bitnet: a silu MLP)
DENSE_TWINS = {"olmo3_untied", "ernie4_5_nobias", "olmo_nobias", "bitnet_online_silu"}
READ = (GELU_TABLE | {"arcee", "seed_oss", "hunyuan_v1_dense", "glm4", "nemotron"} | SSM | VARIANTS | MOE | CONVERTER
        | DENSE_TWINS)
FILES = sorted((case, p.name) for case in MANIFEST if (ROOT / case).is_dir()
               for p in (ROOT / case).glob("*.gguf") if p.with_suffix(".npz").exists())
REFUSED = sorted({case for case, _ in FILES} - READ)


def _load(case, name, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return petit.load(ROOT / case / name, **kw)


def _scaled(got, exact):
    return np.abs(got - exact).max() / (exact.max() - exact.min())


def test_the_fixtures_are_there():
    assert {c for c, _ in FILES} >= READ
    assert all((c, "q8_0.gguf") in FILES for c in READ)


@pytest.mark.parametrize("case, name", [f for f in FILES if f[0] in READ])
def test_decoded_to_float_the_logits_are_llama_cpps_exact_ones(case, name):
    ref = np.load(ROOT / case / name.replace(".gguf", ".npz"))
    got = _load(case, name, weights="f32").logits(ref["input_ids"])
    assert _scaled(got, ref["exact_logits"]) <= (1e-3 if case in GELU_TABLE else 1e-5)
    assert np.array_equal(got.argmax(1), ref["exact_logits"].argmax(1))


@pytest.mark.parametrize("case, name", [f for f in FILES if f[0] in READ])
def test_as_stored_the_logits_are_as_close_as_llama_cpps_own(case, name):
    ref = np.load(ROOT / case / name.replace(".gguf", ".npz"))
    got = _load(case, name).logits(ref["input_ids"])
    err, theirs = _scaled(got, ref["exact_logits"]), _scaled(ref["logits"], ref["exact_logits"])
    assert err <= 1.5 * theirs, (err, theirs)


@pytest.mark.parametrize("case", sorted(READ))
def test_greedy_tokens_are_llama_cpps(case):
    ref = np.load(ROOT / case / "q8_0.npz")
    model = _load(case, "q8_0.gguf", weights="f32")
    cache = model.new_cache()
    logits = model.forward(ref["input_ids"], cache)
    out = []
    for _ in range(len(ref["exact_greedy"])):
        out.append(int(np.argmax(logits)))
        logits = model.forward([out[-1]], cache)
    assert out == ref["exact_greedy"].tolist()


@pytest.mark.parametrize("case", sorted(READ))
def test_tokenizer_gives_llama_cpps_ids(case):
    model = _load(case, "q8_0.gguf")
    for t in MANIFEST[case]["tokenize"]:
        assert model.tokenizer.encode(t["text"]) == t["llama_cpp"], t["text"]


@pytest.mark.parametrize("case", REFUSED or ["made-up-arch"])
def test_an_architecture_the_reader_does_not_know_is_refused_by_name(tmp_path, case):
    """Every llama.cpp file here is read: with none left, a file relabelled as an architecture no reader knows (an
    invented name: llama.cpp's xverse, the stand-in before, is read since issue 36's fam36r group) stands in."""
    if case in MANIFEST:
        arch, path = MANIFEST[case]["architecture"], ROOT / case / "q8_0.gguf"
    else:
        arch, path = case, _rewrite(tmp_path, "glm", meta_change={"general.architecture": case})
    with pytest.raises(ValueError) as e:
        petit.load(path)
    assert str(e.value).startswith(f"{path}: architecture '{arch}' is not supported by "
                                   f"Petit's GGUF reader (supported: "), str(e.value)
    assert "bloom" in str(e.value) and "chatglm" in str(e.value) and "mpt" in str(e.value)


@pytest.mark.parametrize("case", ["falcon", "bloom", "mpt", "glm4", *sorted(SSM), *sorted(VARIANTS), *sorted(MOE),
                                  *sorted(DENSE_TWINS)])
def test_a_family_read_but_not_written_is_refused_by_convert_and_nothing_is_left(tmp_path, case, capsys):
    from petit.cli import main
    src = Path(__file__).parent.parent / MANIFEST[case]["hf_case"]
    assert main(["convert", str(src), "-o", str(tmp_path / "m.gguf")]) == 1
    err = capsys.readouterr().err
    family = json.loads((src / "config.json").read_text())["model_type"]       # deepseek_v2_lite: deepseek_v2
    assert err.startswith(f"petit convert: error: {src}: Petit reads GGUF files of the {family} family but does not "
                          f"write them yet (it writes the cohere, cohere2, gemma, "), err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("case", ["mamba2", "lfm2", "falcon_h1", "qwen3_next", "apertus"])
def test_a_state_space_file_converts_to_a_petit_file_with_the_same_logits(tmp_path, case):
    """(and apertus: its xIELU parameters, metadata in the file, become the family's tensors, run as llama.cpp)"""
    from petit.cli import main
    ref = np.load(ROOT / case / "q8_0.npz")
    assert main(["convert", str(ROOT / case / "q8_0.gguf"), "-o", str(tmp_path / "m.petit"), "--f32"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = petit.load(tmp_path / "m.petit").logits(ref["input_ids"])
    assert _scaled(got, ref["exact_logits"]) <= 1e-5


def _rewrite(tmp_path, case, meta_change=None, tensor_change=None):
    """A copy of the case's q8_0 file with some metadata (None: key removed) or tensor values changed."""
    from petit.formats.gguf import GGUFFile, write_gguf
    with GGUFFile(ROOT / case / "q8_0.gguf") as f:
        meta = dict(f.metadata)
        for k, v in (meta_change or {}).items():
            if v is None:
                del meta[k]
            else:
                meta[k] = v
        tensors = {}
        for name, t in f.tensors.items():
            raw = np.array(f.raw(name))
            if tensor_change and name in tensor_change:
                raw = tensor_change[name](raw.view(np.float32)).astype(np.float32).view(np.uint8)
            tensors[name] = (t.type, t.shape, raw)
        write_gguf(tmp_path / "x.gguf", meta, tensors)
    return tmp_path / "x.gguf"


@pytest.mark.parametrize("case, change, message", [
    ("mamba", {"mamba.ssm.inner_size": None}, "metadata 'mamba.ssm.inner_size' is missing: it should be a number"),
    ("mamba2", {"mamba2.ssm.inner_size": 100}, "metadata 'mamba2.ssm.inner_size' (100) is not a multiple of "
                                               "'mamba2.embedding_length' (64), which Petit's families require"),
    ("lfm2", {"lfm2.attention.head_count_kv": np.array([0, 2], np.uint32)},
     "metadata 'lfm2.attention.head_count_kv' is [0, 2]: it should hold one number for each of the 4 layers"),
    ("qwen3_next", {"qwen3next.attention.recurrent_layers": None},
     "metadata 'qwen3next.attention.recurrent_layers' is missing: it should hold true / false for each of the 3 "
     "layers"),
    ("apertus", {"xielu.beta": None}, "metadata 'xielu.beta' is missing: it should hold one number for each of the 2 "
                                      "layers"),
    ("apertus", {"apertus.rope.dimension_count": 8}, "metadata 'apertus.rope.dimension_count' is not the head size "
                                                     "(16): llama.cpp's apertus rotates whole heads"),
    ("exaone4", {"exaone4.rope.dimension_count": 8}, "metadata 'exaone4.rope.dimension_count' is not the head size "
                                                     "(16): llama.cpp's exaone4 rotates whole heads"),
    ("gpt_oss", {"gpt-oss.attention.sliding_window": None}, "metadata 'gpt-oss.attention.sliding_window' is "
                                                            "missing: llama.cpp's gpt-oss requires it"),
    ("gpt_oss", {"gpt-oss.rope.freq_base_swa": 10000.0}, "metadata 'gpt-oss.rope.freq_base_swa' differs from "
                                                         "'gpt-oss.rope.freq_base': the gpt_oss family has one RoPE "
                                                         "base"),
    ("olmo3_untied", {"olmo2.attention.sliding_window": "8"}, "metadata 'olmo2.attention.sliding_window' is '8': it "
                                                              "should be a number"),
    ("olmo3_untied", {"olmo2.attention.sliding_window_pattern": np.array([True])},
     "metadata 'olmo2.attention.sliding_window_pattern' is [True]: it should hold true / false for each of the 2 "
     "layers"),
    ("olmo_nobias", {"olmo.attention.layer_norm_epsilon": np.float32(1e-6)},
     "metadata 'olmo.attention.layer_norm_epsilon' is 1e-06: the olmo family's LayerNorm eps is fixed at 1e-5, where "
     "llama.cpp's olmo would take this one"),
    ("olmo_nobias", {"olmo.rope.dimension_count": 8}, "metadata 'olmo.rope.dimension_count' is not the head size "
                                                      "(16): llama.cpp's olmo rotates whole heads"),
    ("ernie4_5_nobias", {"ernie4_5.rope.dimension_count": 8}, "metadata 'ernie4_5.rope.dimension_count' is not the "
                                                              "head size (16): llama.cpp's ernie4_5 rotates whole "
                                                              "heads"),
    ("bitnet_online_silu", {"bitnet.rope.dimension_count": 8}, "metadata 'bitnet.rope.dimension_count' is not the "
                                                               "head size (16): llama.cpp's bitnet rotates whole "
                                                               "heads"),
    ("deepseek_v3", {"deepseek2.attention.kv_lora_rank": None},
     "metadata 'deepseek2.attention.kv_lora_rank' is missing: llama.cpp's deepseek2 requires it"),
    ("deepseek_v3", {"deepseek2.expert_gating_func": np.uint32(3)},
     "metadata 'deepseek2.expert_gating_func' is 3: Petit runs softmax (1) and sigmoid (2)"),
    ("deepseek_v3", {"deepseek2.rope.scaling.yarn_log_multiplier": None},
     "metadata 'deepseek2.rope.scaling.yarn_log_multiplier' is missing: Petit runs deepseek2's YaRN with it only"),
    ("deepseek_v2_lite", {"deepseek2.attention.temperature_scale": np.float32(0.1)},
     "metadata 'deepseek2.attention.temperature_scale' is set: Petit does not run deepseek2's query temperature "
     "(Mistral-Large)"),
    ("deepseek_v2_lite", {"deepseek2.expert_gating_func": np.uint32(4)},
     "metadata 'deepseek2.expert_gating_func' is 4: Petit runs softmax (1) and sigmoid (2)"),
    ("llama4_text", {"llama4.interleave_moe_layer_step": None},
     "metadata 'llama4.interleave_moe_layer_step' is missing: Petit's llama4 needs a positive number"),
    ("llama4_text", {"llama4.expert_feed_forward_length": np.uint32(0)},
     "metadata 'llama4.expert_feed_forward_length' is 0: Petit's llama4 needs a positive number"),
    ("llama4_text", {"llama4.rope.freq_base_swa": np.float32(10000.0)},
     "metadata 'llama4.rope.freq_base_swa' differs from 'llama4.rope.freq_base': the llama4_text family has one RoPE "
     "base"),
    ("llama4_text", {"llama4.attention.sliding_window_pattern": "x"},
     "metadata 'llama4.attention.sliding_window_pattern' is 'x': it should be a layer period or true / false for each "
     "layer"),
    ("glm4_moe", {"glm4moe.expert_gating_func": np.uint32(1)},
     "metadata 'glm4moe.expert_gating_func' is 1: Petit's glm4_moe family runs the sigmoid (2) only"),
    # issue 36, the qwenvl group: GLM-4.5V's sections are read now (tests/test_qwenvl5.py); four sizes, as llama.cpp
    ("glm4_moe", {"glm4moe.rope.dimension_sections": np.array([2, 1, 1], np.int32)},
     "metadata 'glm4moe.rope.dimension_sections' is [2, 1, 1]: llama.cpp reads four section sizes"),
    ("glm4_moe", {"glm4moe.expert_shared_count": None},
     "metadata 'glm4moe.expert_shared_count' is missing: llama.cpp's glm4moe requires it"),
    ("glm4_moe", {"glm4moe.nextn_predict_layers": np.uint32(3)},
     "metadata 'glm4moe.nextn_predict_layers' (3) should be below 'glm4moe.block_count' (3)"),
    ("hunyuan_v1_moe_nobias", {"hunyuan-moe.expert_shared_feed_forward_length": np.uint32(64)},
     "metadata 'hunyuan-moe.expert_shared_feed_forward_length' (64) differs from 'hunyuan-moe.feed_forward_length' "
     "(32): the hunyuan_v1_moe family's shared MLP is as wide as its experts"),
    ("ernie4_5_moe_nobias", {"ernie4_5-moe.interleave_moe_layer_step": np.uint32(2)},
     "metadata 'ernie4_5-moe.interleave_moe_layer_step' is 2: Petit runs llama.cpp's ernie4_5-moe with experts in "
     "every layer from 'ernie4_5-moe.leading_dense_block_count' on (1)"),
    ("ernie4_5_moe_nobias", {"ernie4_5-moe.interleave_moe_layer_step": None},
     "metadata 'ernie4_5-moe.interleave_moe_layer_step' is missing: llama.cpp's ernie4_5-moe requires it"),
    ("ernie4_5_moe_nobias", {"ernie4_5-moe.expert_shared_feed_forward_length": np.uint32(48)},
     "metadata 'ernie4_5-moe.expert_shared_feed_forward_length' (48) is not a multiple of "
     "'ernie4_5-moe.expert_feed_forward_length' (32), which the ernie4_5_moe family requires"),
    ("dbrx", {"dbrx.attention.layer_norm_epsilon": np.float32(1e-6)},
     "metadata 'dbrx.attention.layer_norm_epsilon' is 1e-06: the dbrx family's LayerNorms have 1e-5"),
    ("dbrx", {"dbrx.attention.clamp_kqv": None},
     "metadata 'dbrx.attention.clamp_kqv' is missing: llama.cpp's dbrx requires it"),
    ("dbrx", {"dbrx.rope.dimension_count": np.uint32(8)},
     "metadata 'dbrx.attention.key_length' (16) and 'dbrx.rope.dimension_count' (8) should both be "
     "'dbrx.embedding_length' / 'dbrx.attention.head_count' (16), as the dbrx family has them"),
    ("dbrx", {"dbrx.rope.scaling.type": "linear", "dbrx.rope.scaling.factor": np.float32(2.0)},
     "metadata 'dbrx.rope.scaling.type' is set: the dbrx family runs unscaled RoPE"),
])
def test_a_gguf_file_with_bad_metadata_is_a_clear_error(tmp_path, case, change, message):
    path = _rewrite(tmp_path, case, meta_change=change)
    with pytest.raises(ValueError) as e:
        petit.load(path)
    assert str(e.value) == f"{path}: {message}"


def test_a_mamba_file_whose_a_is_not_negative_is_a_clear_error(tmp_path):
    path = _rewrite(tmp_path, "mamba2", tensor_change={"blk.1.ssm_a": lambda a: -a})
    with pytest.raises(ValueError) as e:
        petit.load(path)
    assert str(e.value) == (f"{path}: tensor 'blk.1.ssm_a': Mamba's A must be negative and finite (llama.cpp stores "
                            f"it as -exp(A_log))")


@pytest.mark.parametrize("case", sorted(READ))
def test_petit_verify_passes_on_each_file_read(case):
    """The independent float64 reference models these files as Petit reads them (llama.cpp's conventions included:
    Mamba-2's and Granite 4.0-H's gated norm per group), so `petit verify` finds no fault in a correct engine."""
    from trainer.verify import verify
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = verify(str(ROOT / case / "q8_0.gguf"), n=2)
    assert r["pass"], (case, r["failures"])


def test_apertus_xielu_runs_as_llama_cpp_computes_it_not_as_transformers(monkeypatch):
    """llama.cpp takes xIELU's softplus in float32; transformers rounds a_p and a_n to bfloat16, which puts the logits
    5.4e-4 of their range from llama.cpp's exact ones on this file (llama.cpp's f32 file is 5.5e-4 from
    transformers'): the file runs with xielu_bf16 off."""
    import dataclasses

    from petit.loading.gguf_archs import ARCHS
    ref = np.load(ROOT / "apertus" / "q8_0.npz")
    model = _load("apertus", "q8_0.gguf", weights="f32")
    assert model.config.xielu_bf16 is False
    assert _scaled(model.logits(ref["input_ids"]), ref["exact_logits"]) <= 1e-6
    extra = ARCHS["apertus"].extra
    monkeypatch.setitem(ARCHS, "apertus", dataclasses.replace(ARCHS["apertus"], extra=lambda meta, key, cfg, has: (
        extra(meta, key, cfg, has), cfg.update(xielu_bf16=True))))
    rounded = _load("apertus", "q8_0.gguf", weights="f32").logits(ref["input_ids"])
    assert 3e-4 < _scaled(rounded, ref["exact_logits"]) < 1e-3


def test_exaone4_local_global_layers_only_for_llama_cpps_64_layer_model():
    """llama.cpp runs EXAONE 4's sliding / NoPE-full layers only for 64 layers (the 32B model): window
    `sliding_window` (else 4096), pattern `sliding_window_pattern` (an array, or every n-th layer full, else every 4th);
    any other depth runs every layer full with RoPE, as the fixture's file (2 layers, window 8) does."""
    from petit.formats.gguf import GGUFFile
    from petit.loading.gguf_archs import config_from_gguf
    from petit.models.families.dense.exaone4 import Config
    with GGUFFile(ROOT / "exaone4" / "q8_0.gguf") as f:
        meta, tensors = dict(f.metadata), dict(f.tensors)
    cfg = Config.from_dict(config_from_gguf(meta, "x", 320, tensors)[1])
    assert cfg.sliding_window is None and cfg.types == ["full_attention"] * 2
    deep = dict(meta, **{"exaone4.block_count": 64})
    pattern = np.array([i % 3 != 1 for i in range(64)])
    cfg = config_from_gguf(dict(deep, **{"exaone4.attention.sliding_window_pattern": pattern}), "x", 320, tensors)[1]
    assert cfg["sliding_window"] == 8
    assert Config.from_dict(cfg).types == ["sliding_attention" if s else "full_attention" for s in pattern]
    del deep["exaone4.attention.sliding_window_pattern"], deep["exaone4.attention.sliding_window"]
    cfg = config_from_gguf(deep, "x", 320, tensors)[1]
    assert cfg["sliding_window"] == 4096
    assert Config.from_dict(cfg).types == ["full_attention" if i % 4 == 3 else "sliding_attention" for i in range(64)]
    cfg = config_from_gguf(dict(deep, **{"exaone4.attention.sliding_window_pattern": np.uint32(2)}), "x", 320,
                           tensors)[1]
    assert cfg["layer_types"][:4] == ["sliding_attention", "full_attention"] * 2
    with pytest.raises(ValueError, match=r"x: metadata 'exaone4.attention.sliding_window_pattern' is \[True, False\]: "
                                         r"it should hold true / false for each of the 64 layers"):
        config_from_gguf(dict(meta, **{"exaone4.block_count": 64}), "x", 320, tensors)


def test_gpt_oss_yarn_runs_as_llama_cpp_computes_it_not_as_the_config_says(monkeypatch):
    """llama.cpp rounds YaRN's correction range to whole dimensions (ggml_rope_yarn_corr_dims floors and ceils it);
    gpt-oss's config has truncate false, as transformers then computes it: read as the config would say, the
    logits are 0.010 of their range from llama.cpp's exact ones on this file (on the f32 file, 0.073, where a routing
    choice flips: all of llama.cpp's distance from transformers'), so the file runs with truncate true."""
    import dataclasses

    from petit.loading.gguf_archs import ARCHS
    ref = np.load(ROOT / "gpt_oss" / "q8_0.npz")
    model = _load("gpt_oss", "q8_0.gguf", weights="f32")
    assert model.config.rope_scaling["truncate"] is True and model.config.layer_types[:2] == [
        "sliding_attention", "full_attention"]
    assert _scaled(model.logits(ref["input_ids"]), ref["exact_logits"]) <= 1e-5
    extra = ARCHS["gpt-oss"].extra
    monkeypatch.setitem(ARCHS, "gpt-oss", dataclasses.replace(ARCHS["gpt-oss"], extra=lambda meta, key, cfg, has: (
        extra(meta, key, cfg, has), cfg["rope_scaling"].update(truncate=False))))
    untruncated = _load("gpt_oss", "q8_0.gguf", weights="f32").logits(ref["input_ids"])
    assert _scaled(untruncated, ref["exact_logits"]) > 5e-3


def test_deepseek2_routes_as_llama_cpp_does_not_as_deepseek_v3s_config():
    """A deepseek2 file without `expert_gating_func` (transformers saves no scoring_func for DeepSeek-V3, so the
    converter writes none) runs the router's softmax in llama.cpp, where transformers' DeepSeek-V3 takes the sigmoid:
    that is all of llama.cpp's 0.49 of the range from transformers on this file. The choice stays on the scores plus
    exp_probs_b, limited to the best groups by their two best scores, renormalised (expert_weights_norm) and scaled by
    expert_weights_scale. With the sigmoid the logits are 0.51 of their range from llama.cpp's."""
    from petit.formats.gguf import GGUFFile
    from petit.loading.gguf_archs import config_from_gguf
    ref = np.load(ROOT / "deepseek_v3" / "q8_0.npz")
    model = _load("deepseek_v3", "q8_0.gguf", weights="f32")
    c = model.config
    assert (c.scoring_func, c.norm_topk_prob, c.routed_scaling_factor, c.n_group, c.topk_group) == (
        "softmax", True, 2.5, 4, 2)
    assert _scaled(model.logits(ref["input_ids"]), ref["exact_logits"]) <= 1e-5
    with GGUFFile(ROOT / "deepseek_v3" / "q8_0.gguf") as f:
        meta, tensors = dict(f.metadata), dict(f.tensors)
    sig = config_from_gguf(dict(meta, **{"deepseek2.expert_gating_func": np.uint32(2)}), "x", 320, tensors)[1]
    assert sig["scoring_func"] == "sigmoid"
    bare = {k: v for k, v in meta.items() if k not in ("deepseek2.expert_weights_norm", "deepseek2.expert_weights_scale",
                                                        "deepseek2.expert_group_count")}
    cfg = config_from_gguf(bare, "x", 320, tensors)[1]
    assert (cfg["norm_topk_prob"], cfg["routed_scaling_factor"], cfg["n_group"], cfg["topk_group"]) == (
        False, 1.0, 1, 1)
    import dataclasses

    from petit.loading.gguf_archs import ARCHS
    extra = ARCHS["deepseek2"].extra
    try:
        ARCHS["deepseek2"] = dataclasses.replace(ARCHS["deepseek2"], extra=lambda meta, key, cfg, has: (
            extra(meta, key, cfg, has), cfg.update(scoring_func="sigmoid")))
        sigmoid = _load("deepseek_v3", "q8_0.gguf", weights="f32").logits(ref["input_ids"])
    finally:
        ARCHS["deepseek2"] = dataclasses.replace(ARCHS["deepseek2"], extra=extra)
    assert _scaled(sigmoid, ref["exact_logits"]) > 0.3           # 0.51 (the Hugging Face folder with softmax: 6.7e-7)


def test_deepseek_v2_lite_runs_as_llama_cpp_does_not_as_transformers_v2(monkeypatch):
    """DeepSeek-V2-Lite's file (no q_lora_rank: one attn_q, no exp_probs_b; 26 layers, the count at which llama.cpp
    reads it) runs with llama.cpp's softmax scale, (nope + rope)^-0.5 x mscale(4, 0.707)^2, which transformers' V2
    leaves out: without it the logits are 0.34 of their range from llama.cpp's exact ones (0.10 from transformers'),
    and with V2's group score (the best expert, not the best two) 0.008."""
    from petit.models.blocks import deepseek_common as dc
    ref = np.load(ROOT / "deepseek_v2_lite" / "q8_0.npz")
    model = _load("deepseek_v2_lite", "q8_0.gguf", weights="f32")
    c = model.config
    assert (c.q_lora_rank, c.scoring_func, c.norm_topk_prob, c.routed_scaling_factor, c.n_group, c.topk_group,
            c.first_k_dense_replace, c.num_hidden_layers) == (None, "softmax", False, 2.5, 4, 2, 24, 26)
    assert _scaled(model.logits(ref["input_ids"]), ref["exact_logits"]) <= 1e-5
    build = dc.build
    for change, low in ((dict(yarn_mscale=False), 0.3), (dict(group_score="max"), 5e-3)):
        monkeypatch.setattr(dc, "build", lambda cfg, t, change=change, **kw: build(cfg, t, **{**kw, **change}))
        got = _load("deepseek_v2_lite", "q8_0.gguf", weights="f32").logits(ref["input_ids"])
        assert _scaled(got, ref["exact_logits"]) > low, change


def test_a_deepseek_v2_lite_file_without_its_query_is_a_clear_error(tmp_path):
    from petit.formats.gguf import GGUFFile, write_gguf
    with GGUFFile(ROOT / "deepseek_v2_lite" / "q8_0.gguf") as f:
        tensors = {n: (t.type, t.shape, np.array(f.raw(n))) for n, t in f.tensors.items() if n != "blk.0.attn_q.weight"}
        write_gguf(tmp_path / "x.gguf", dict(f.metadata), tensors)
    with pytest.raises(ValueError) as e:
        petit.load(tmp_path / "x.gguf")
    assert str(e.value) == (f"{tmp_path / 'x.gguf'}: metadata 'deepseek2.attention.q_lora_rank' is missing, and the "
                            f"file has no 'blk.0.attn_q.weight' (DeepSeek-V2-Lite's query)")


def test_llama4_runs_with_llama_cpps_constants_not_the_configs(monkeypatch):
    """llama.cpp's llama4 chunks attention by 8192 tokens and tunes the NoPE layers' query temperature with a floor
    scale of 8192 whatever the original config said (the converter writes neither); the fixture's config has chunks
    of 8 and a floor scale of 4, which is all of llama.cpp's 0.51 of the range from transformers (Petit on the
    Hugging Face folder with 8192 for both: 3.3e-7 from llama.cpp's f32 file). With the config's values the logits are
    0.46 of their range from llama.cpp's exact ones, without the q / k norm (llama.cpp keeps it but for 128 experts)
    further still."""
    import dataclasses

    from petit.loading.gguf_archs import ARCHS
    ref = np.load(ROOT / "llama4_text" / "q8_0.npz")
    model = _load("llama4_text", "q8_0.gguf", weights="f32")
    c = model.config
    assert (c.attention_chunk_size, c.floor_scale, c.attn_scale, c.no_rope_layers, c.use_qk_norm, c.moe_layers,
            c.intermediate_size, c.intermediate_size_mlp) == (8192, 8192, 0.1, [1, 1, 1, 0], True, [1, 3], 32, 96)
    assert c.layer_types == ["chunked_attention"] * 3 + ["full_attention"]
    extra = ARCHS["llama4"].extra
    for change in (dict(attention_chunk_size=8, floor_scale=4), dict(use_qk_norm=False)):
        monkeypatch.setitem(ARCHS, "llama4", dataclasses.replace(ARCHS["llama4"], extra=lambda m, k, cfg, h, ch=change: (
            extra(m, k, cfg, h), cfg.update(ch))))
        got = _load("llama4_text", "q8_0.gguf", weights="f32").logits(ref["input_ids"])
        assert _scaled(got, ref["exact_logits"]) > 0.3, change


def test_llama4_past_its_fixed_chunk_is_llama_cpps(tmp_path, monkeypatch):
    """An 8,300-token prompt crosses llama.cpp's fixed chunk (8,192) and the NoPE layers' temperature step (floor
    scale 8,192): at positions 8,188-8,299 Petit gives llama.cpp's exact logits (make_llama4_long.py: the fixture's
    file with its context raised to 8,448, run by llama.cpp on F32 weights and an F32 KV cache), and as stored stays
    as close to them as llama.cpp's own q8_0 run. With both constants at 16,384 the positions before the steps do not
    move and the ones after do (the temperature steps at position 8,191, floor((p + 1) / 8192), the chunk at 8,192):
    the chunk and the temperature are what the comparison checks there."""
    import dataclasses

    from petit.loading.gguf_archs import ARCHS
    ref = np.load(ROOT / "llama4_text" / "long.npz")
    ids, at, exact = ref["input_ids"].astype(np.int64), ref["positions"], ref["exact_logits"]
    path = _rewrite(tmp_path, "llama4_text", {"llama4.context_length": np.uint32(8448)})

    def run(**kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return petit.load(path, **kw).logits(ids)[at]

    got = run(weights="f32")
    assert _scaled(got, exact) <= 1e-5
    assert np.array_equal(got.argmax(1), exact.argmax(1))
    assert _scaled(run(), exact) <= 1.5 * _scaled(ref["logits"], exact)
    extra = ARCHS["llama4"].extra
    monkeypatch.setitem(ARCHS, "llama4", dataclasses.replace(ARCHS["llama4"], extra=lambda m, k, cfg, h: (
        extra(m, k, cfg, h), cfg.update(attention_chunk_size=16384, floor_scale=16384))))
    unchunked = run(weights="f32")
    before = at < 8191
    assert np.array_equal(unchunked[before], got[before])
    assert _scaled(unchunked[~before], exact[~before]) > 0.1


def test_llama4_keys_pick_what_llama_cpp_runs():
    from petit.formats.gguf import GGUFFile
    from petit.loading.gguf_archs import config_from_gguf
    with GGUFFile(ROOT / "llama4_text" / "q8_0.gguf") as f:
        meta, tensors = dict(f.metadata), dict(f.tensors)
    maverick = config_from_gguf(dict(meta, **{"llama4.expert_count": 128}), "x", 320, tensors)[1]
    assert not maverick["use_qk_norm"]
    full = config_from_gguf(dict(meta, **{"llama4.attention.sliding_window": 0}), "x", 320, tensors)[1]
    assert (full["attention_chunk_size"], full["no_rope_layers"], full["layer_types"],
            full["attn_temperature_tuning"]) == (None, [1] * 4, ["full_attention"] * 4, False)
    window = config_from_gguf(dict(meta, **{"llama4.attention.sliding_window": 8}), "x", 320, tensors)[1]
    assert window["attention_chunk_size"] == 8192                  # llama.cpp overrides any other window
    two = config_from_gguf(dict(meta, **{"llama4.attention.sliding_window_pattern": 2}), "x", 320,
                           tensors)[1]
    assert two["layer_types"] == ["chunked_attention", "full_attention"] * 2 and two["no_rope_layers"] == [1, 1, 1, 0]


def test_olmo3_runs_its_sliding_layers_and_yarn_as_llama_cpp(monkeypatch):
    """llama.cpp's converter writes OLMo 3 as olmo2 with `attention.sliding_window` and a per-layer pattern; with a
    window llama.cpp runs the sliding layers with plain RoPE and only the full layers with YaRN, as transformers'
    Olmo 3 does (llama.cpp's f32 file is 3.3e-7 of the range from transformers'): Petit's olmo3 family. Read as OLMo 2
    (every layer full, YaRN everywhere) the logits are 0.41 of their range from llama.cpp's exact ones; with YaRN
    on the sliding layers too, 0.17."""
    import dataclasses

    import petit.models.families.dense.olmo3 as olmo3
    from petit.formats.gguf import GGUFFile
    from petit.loading.gguf_archs import ARCHS, config_from_gguf
    ref = np.load(ROOT / "olmo3_untied" / "q8_0.npz")
    model = _load("olmo3_untied", "q8_0.gguf", weights="f32")
    c = model.config
    assert (c.model_type, c.sliding_window, c.types, c.rope_scaling["rope_type"]) == (
        "olmo3", 8, ["sliding_attention", "full_attention"], "yarn")
    assert _scaled(model.logits(ref["input_ids"]), ref["exact_logits"]) <= 1e-5
    with GGUFFile(ROOT / "olmo3_untied" / "q8_0.gguf") as f:
        meta, tensors = dict(f.metadata), dict(f.tensors)
    bare = {k: v for k, v in meta.items() if k != "olmo2.attention.sliding_window_pattern"}
    deep = config_from_gguf(dict(bare, **{"olmo2.block_count": 8}), "x", 320, tensors)[1]
    assert deep["layer_types"] == ["full_attention" if i % 4 == 3 else "sliding_attention" for i in range(8)]
    for window in (None, 0):                       # no window: OLMo 2
        cut = {k: v for k, v in bare.items() if k != "olmo2.attention.sliding_window"}
        if window is not None:
            cut["olmo2.attention.sliding_window"] = np.uint32(window)
        cfg = config_from_gguf(cut, "x", 320, tensors)[1]
        assert cfg["model_type"] == "olmo2" and "layer_types" not in cfg and "sliding_window" not in cfg
    ignored = config_from_gguf(dict(meta, **{"olmo2.rope.freq_base_swa": np.float32(10000.0)}), "x", 320, tensors)[1]
    assert ignored["rope_theta"] == 500000.0       # llama.cpp's olmo2 reads the key but rotates with freq_base
    extra = ARCHS["olmo2"].extra
    monkeypatch.setitem(ARCHS, "olmo2", dataclasses.replace(ARCHS["olmo2"], extra=lambda m, k, cfg, h: (
        extra(m, k, cfg, h), cfg.update(model_type="olmo2"), cfg.pop("layer_types"), cfg.pop("sliding_window"))))
    assert _scaled(_load("olmo3_untied", "q8_0.gguf", weights="f32").logits(ref["input_ids"]),
                   ref["exact_logits"]) > 0.3
    monkeypatch.setitem(ARCHS, "olmo2", dataclasses.replace(ARCHS["olmo2"], extra=extra))
    rope = olmo3.default_rope
    monkeypatch.setattr(olmo3, "default_rope", lambda cfg, **kw: rope(cfg))
    assert _scaled(_load("olmo3_untied", "q8_0.gguf", weights="f32").logits(ref["input_ids"]),
                   ref["exact_logits"]) > 0.1


@pytest.mark.parametrize("case, tensor, why", [
    ("olmo_nobias", "blk.0.attn_output.bias", "llama.cpp's olmo has no o_proj bias, and the olmo family biases q, k, "
                                              "v and o together"),
    ("olmo_nobias", "blk.0.attn_q.bias", "llama.cpp's olmo has no o_proj bias, and the olmo family biases q, k, v and "
                                         "o together"),
    ("ernie4_5_nobias", "blk.0.ffn_up.bias", "llama.cpp's ernie4_5 has no MLP biases and does not add o_proj's"),
    ("ernie4_5_nobias", "blk.0.attn_output.bias", "llama.cpp's ernie4_5 has no MLP biases and does not add o_proj's"),
])
def test_a_bias_llama_cpp_does_not_run_as_the_family_would_is_refused_by_name(tmp_path, case, tensor, why):
    """llama.cpp's olmo refuses an o_proj bias and applies q / k / v ones; its ernie4_5 refuses MLP biases and
    loads but never adds an o_proj bias: no biased file of either runs in llama.cpp as the Petit family's one bias
    switch would run it, so the reader names the tensor instead of running something else."""
    from petit.formats.gguf import GGUFFile, write_gguf
    with GGUFFile(ROOT / case / "q8_0.gguf") as f:
        tensors = {n: (t.type, t.shape, np.array(f.raw(n))) for n, t in f.tensors.items()}
        meta = dict(f.metadata)
    n = 96 if tensor.startswith("blk.0.ffn_") else 64
    tensors[tensor] = ("F32", (n,), np.zeros(n, np.float32).view(np.uint8))
    write_gguf(tmp_path / "x.gguf", meta, tensors)
    with pytest.raises(ValueError) as e:
        petit.load(tmp_path / "x.gguf")
    arch = meta["general.architecture"]
    assert str(e.value) == f"{tmp_path / 'x.gguf'}: tensor '{tensor}' is not run by Petit's {arch} reader: {why}"


def test_glm4moe_skips_the_multi_token_prediction_layers_as_llama_cpp_does(tmp_path):
    """llama.cpp's converter appends GLM-4.5's multi-token-prediction layers (`nextn_predict_layers`, counted in
    `block_count`), which llama.cpp's decoder does not run: a file with one more layer said to be such a layer (a
    copy of the last, which would change the logits if it ran) gives the file's logits exactly."""
    from petit.formats.gguf import GGUFFile, write_gguf
    ref = np.load(ROOT / "glm4_moe" / "q8_0.npz")
    with GGUFFile(ROOT / "glm4_moe" / "q8_0.gguf") as f:
        meta = dict(f.metadata, **{"glm4moe.block_count": np.uint32(4), "glm4moe.nextn_predict_layers": np.uint32(1)})
        tensors = {n: (t.type, t.shape, np.array(f.raw(n))) for n, t in f.tensors.items()}
    tensors.update({n.replace("blk.2.", "blk.3."): v for n, v in tensors.items() if n.startswith("blk.2.")})
    write_gguf(tmp_path / "x.gguf", meta, tensors)
    got = petit.load(tmp_path / "x.gguf", weights="f32").logits(ref["input_ids"])
    assert np.array_equal(got, _load("glm4_moe", "q8_0.gguf", weights="f32").logits(ref["input_ids"]))
    assert _scaled(got, ref["exact_logits"]) <= 1e-5
    meta["glm4moe.nextn_predict_layers"] = np.uint32(0)         # the same file run with 4 layers: not llama.cpp's
    write_gguf(tmp_path / "y.gguf", meta, tensors)
    assert _scaled(petit.load(tmp_path / "y.gguf", weights="f32").logits(ref["input_ids"]),
                   ref["exact_logits"]) > 0.01


def test_glm4moe_keys_pick_what_llama_cpp_runs():
    """Without the routing keys, llama.cpp's defaults: no groups, no renormalisation, a scale of 1; without
    rope.dimension_count, RoPE on the whole head; q / k norms and biases as the tensors say."""
    from petit.formats.gguf import GGUFFile
    from petit.loading.gguf_archs import config_from_gguf
    with GGUFFile(ROOT / "glm4_moe" / "q8_0.gguf") as f:
        meta, tensors = dict(f.metadata), dict(f.tensors)
    cfg = config_from_gguf(meta, "x", 320, tensors)[1]
    assert (cfg["n_group"], cfg["topk_group"], cfg["norm_topk_prob"], cfg["routed_scaling_factor"]) == (4, 2, True, 2.5)
    assert (cfg["partial_rotary_factor"], cfg["use_qk_norm"], cfg["attention_bias"]) == (0.5, True, True)
    assert (cfg["first_k_dense_replace"], cfg["n_shared_experts"], cfg["moe_intermediate_size"]) == (1, 1, 32)
    bare = {k: v for k, v in meta.items() if k.split(".", 1)[-1] not in (
        "expert_weights_norm", "expert_weights_scale", "expert_group_count", "expert_group_used_count",
        "rope.dimension_count", "expert_gating_func", "leading_dense_block_count")}
    cfg = config_from_gguf(bare, "x", 320, {k: v for k, v in tensors.items() if "_norm." not in k
                                            or not k.split(".")[-2].startswith(("attn_q", "attn_k"))})[1]
    assert (cfg["n_group"], cfg["topk_group"], cfg["norm_topk_prob"], cfg["routed_scaling_factor"]) == (1, 1, False, 1.0)
    assert (cfg["partial_rotary_factor"], cfg["use_qk_norm"], cfg["first_k_dense_replace"]) == (1.0, False, 0)


def _with_tensors(tmp_path, case, add=(), drop=()):
    """A copy of the case's q8_0 file with F32 tensors added ({name: float32 array}) or some left out."""
    from petit.formats.gguf import GGUFFile, write_gguf
    with GGUFFile(ROOT / case / "q8_0.gguf") as f:
        meta = dict(f.metadata)
        tensors = {n: (t.type, t.shape, np.array(f.raw(n))) for n, t in f.tensors.items() if n not in drop}
    for n, a in dict(add).items():
        tensors[n] = ("F32", a.shape, np.ascontiguousarray(a, np.float32).view(np.uint8))
    write_gguf(tmp_path / "x.gguf", meta, tensors)
    return tmp_path / "x.gguf"


def test_hunyuan_moe_runs_q_k_v_biases_without_an_output_bias_as_llama_cpp_does(tmp_path):
    """llama.cpp's hunyuan-moe loads q / k / v biases when the file has them and never an attn_output.bias: biases
    of a constant c on k change nothing (softmax), on v they add o_proj's c-row sums to the output, and a file with
    an attn_output.bias is refused (llama.cpp refuses it too)."""
    ref = np.load(ROOT / "hunyuan_v1_moe_nobias" / "q8_0.npz")
    plain = _load("hunyuan_v1_moe_nobias", "q8_0.gguf", weights="f32").logits(ref["input_ids"])
    zeros = {f"blk.{i}.attn_{x}.bias": np.zeros(64 if x == "q" else 32, np.float32) for i in range(2) for x in "qkv"}
    got = petit.load(_with_tensors(tmp_path, "hunyuan_v1_moe_nobias", zeros), weights="f32").logits(ref["input_ids"])
    assert np.array_equal(got, plain)
    shifted = dict(zeros, **{f"blk.{i}.attn_v.bias": np.full(32, 0.5, np.float32) for i in range(2)})
    got = petit.load(_with_tensors(tmp_path, "hunyuan_v1_moe_nobias", shifted), weights="f32").logits(ref["input_ids"])
    assert _scaled(got, plain) > 1e-3                       # the v bias is read (no o bias absorbs it)
    path = _with_tensors(tmp_path, "hunyuan_v1_moe_nobias", dict(zeros, **{"blk.0.attn_output.bias": np.zeros(64)}))
    with pytest.raises(ValueError) as e:
        petit.load(path)
    assert str(e.value) == (f"{path}: tensor 'blk.0.attn_output.bias' is not loaded by llama.cpp's hunyuan-moe (it "
                            f"refuses such a file), and Petit does not run it either")


def test_ernie_moe_without_its_selection_bias_chooses_on_the_probabilities(tmp_path):
    """`exp_probs_b` is optional in llama.cpp's ernie4_5-moe: without it the choice is made on the probabilities, as
    with a zero bias; and the chosen weights' sum is clamped at llama.cpp's 2^-14, not transformers' 1e-12."""
    ref = np.load(ROOT / "ernie4_5_moe_nobias" / "q8_0.npz")
    names = ("blk.1.exp_probs_b.bias", "blk.2.exp_probs_b.bias")
    zero = petit.load(_rewrite(tmp_path, "ernie4_5_moe_nobias", tensor_change={n: np.zeros_like for n in names}),
                      weights="f32").logits(ref["input_ids"])
    (tmp_path / "x.gguf").unlink()
    bare = petit.load(_with_tensors(tmp_path, "ernie4_5_moe_nobias", drop=names), weights="f32")
    assert np.array_equal(bare.logits(ref["input_ids"]), zero)
    assert _scaled(zero, ref["exact_logits"]) > 1e-3       # the file's bias counts
    assert bare.config.moe_norm_min == 2.0 ** -14 and bare.config.moe_num_shared_experts == 2


def test_dbrx_clamps_q_k_v_by_the_files_key():
    """clamp_kqv 2.0 is the fixture's clip_qkv: with it off the logits move (so the clamp is read and acts)."""
    import dataclasses

    from petit.loading.gguf_archs import ARCHS
    ref = np.load(ROOT / "dbrx" / "q8_0.npz")
    extra = ARCHS["dbrx"].extra
    ARCHS["dbrx"] = dataclasses.replace(ARCHS["dbrx"], extra=lambda m, k, cfg, h: (
        extra(m, k, cfg, h), cfg["attn_config"].update(clip_qkv=None)))
    try:
        free = _load("dbrx", "q8_0.gguf", weights="f32").logits(ref["input_ids"])
    finally:
        ARCHS["dbrx"] = dataclasses.replace(ARCHS["dbrx"], extra=extra)
    assert _scaled(free, ref["exact_logits"]) > 1e-3


@pytest.mark.parametrize("tensor", ["blk.0.attn_q.scale", "blk.0.ffn_down.scale"])
def test_a_bitnet_projection_scale_is_refused_by_name(tmp_path, tensor):
    """llama.cpp's bitnet multiplies a projection's output by its optional `.scale` tensor, which its converter never
    writes: the reader names one instead of running the file without it."""
    from petit.formats.gguf import GGUFFile, write_gguf
    with GGUFFile(ROOT / "bitnet_online_silu" / "q8_0.gguf") as f:
        tensors = {n: (t.type, t.shape, np.array(f.raw(n))) for n, t in f.tensors.items()}
        meta = dict(f.metadata)
    tensors[tensor] = ("F32", (1,), np.full(1, 0.5, np.float32).view(np.uint8))
    write_gguf(tmp_path / "x.gguf", meta, tensors)
    with pytest.raises(ValueError) as e:
        petit.load(tmp_path / "x.gguf")
    assert str(e.value) == (f"{tmp_path / 'x.gguf'}: tensor '{tensor}' is not run by Petit's bitnet reader: llama.cpp "
                            "multiplies the projection's output by it, and llama.cpp's converter writes none")


def test_bitnet_runs_as_llama_cpp_runs_it_not_as_transformers(monkeypatch):
    """llama.cpp's bitnet computes silu(gate) * up and leaves the projections' inputs in float: the file is read so
    (within 1e-5 of llama.cpp's exact logits), where transformers' int8 activations, or its relu², are far off."""
    import dataclasses

    from petit.loading.gguf_archs import ARCHS
    ref = np.load(ROOT / "bitnet_online_silu" / "q8_0.npz")
    model = _load("bitnet_online_silu", "q8_0.gguf", weights="f32")
    c = model.config
    assert (c.model_type, c.hidden_act, c.activation_quant, c.tie_word_embeddings) == ("bitnet", "silu", False, True)
    assert _scaled(model.logits(ref["input_ids"]), ref["exact_logits"]) <= 1e-5
    extra = ARCHS["bitnet"].extra
    for change in (dict(activation_quant=True), dict(hidden_act="relu2")):
        monkeypatch.setitem(ARCHS, "bitnet", dataclasses.replace(ARCHS["bitnet"], extra=lambda m, k, cfg, h, ch=change: (
            extra(m, k, cfg, h), cfg.update(ch))))
        assert _scaled(_load("bitnet_online_silu", "q8_0.gguf", weights="f32").logits(ref["input_ids"]),
                       ref["exact_logits"]) > 1e-3, change
