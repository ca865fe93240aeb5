"""The dsv4g group of issue 30: llama.cpp's `deepseek4` (DeepSeek-V4) files, read as the deepseek_v4 family
(petit/loading/gguf_dsv4g5.py), checked on tests/fixtures/gguf5_dsv4g/deepseek4: a file written by its generator with
gguf-py as llama.cpp's converter would from float weights (the converter reads only the release's MXFP4 / FP8
layout), from tests/fixtures/src_dsv4g/deepseek4 (a transformers-made DeepSeek-V4 with what llama.cpp's graph takes:
hc_mult 4, compression ratios 0 / 4 / 128, indexer heads of 64), quantized to q8_0 and run by llama.cpp 0.3.36.

- llama.cpp's run of the f32 file is transformers' (within 1e-6 of the range on the 35- and 140-token prompts, the
  latter closing a 128-token HCA window; its greedy tokens): no deliberate difference to follow.
- Petit on the q8_0 file decoded to float32 is llama.cpp's exact run of the same weights; as stored, as close as
  llama.cpp's own q8_0 run. The same with YaRN keys (deepseek4_yarn: the compressed layers' rope, as transformers
  reads the release's flat keys).
- The same file quantized to MXFP4 (the converter's type for the release's experts) read with the same values.
- The config read is the source's; what llama.cpp's deepseek4 does not take is refused."""
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from models import range_err, stored_errors

FIXTURES = Path(__file__).parent / "fixtures"
CASE = FIXTURES / "gguf5_dsv4g" / "deepseek4"
YARN = FIXTURES / "gguf5_dsv4g" / "deepseek4_yarn"        # the same weights, YaRN keys (the release's rope)
SRC = FIXTURES / "src_dsv4g" / "deepseek4"


def _gguf(weights=None, case=CASE):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # read without any "ignoring ..." report
        return petit.load(case / "q8_0.gguf", weights=weights)


@pytest.mark.parametrize("run, ref", [("f32.npz", "reference.npz"), ("f32_long.npz", "reference_long.npz")])
def test_llama_cpps_deepseek4_is_transformers(run, ref):
    """llama.cpp's exact run of the f32 file (not committed: its logits are) against transformers' on the same
    weights: measured 4e-7 / 8e-7 of the range, so Petit follows both."""
    got, want = np.load(CASE / run), np.load(SRC / ref)
    assert np.array_equal(got["input_ids"], want["input_ids"])
    assert range_err(got["logits"], want["logits"]) <= 2e-6
    if "greedy" in want:
        assert got["greedy"].tolist() == want["greedy"].tolist()


def test_llama_cpps_yarn_is_transformers():
    """rope.scaling.* (YaRN, factor 4 over 64 positions) on the 140-token prompt: llama.cpp ropes the compressed
    layers with it (attention factor 1), as transformers does the release's flat keys: 9e-7 of the range apart, where
    YaRN moves transformers' logits by 0.29."""
    got = np.load(YARN / "f32_long.npz")
    assert range_err(got["logits"], got["hf_logits"]) <= 2e-6
    assert range_err(got["hf_logits"], np.load(SRC / "reference_long.npz")["logits"]) >= 0.1


@pytest.mark.parametrize("case, npz", [(CASE, "q8_0.npz"), (CASE, "q8_0_long.npz"), (YARN, "q8_0_long.npz")])
def test_gguf_decoded_is_llama_cpps_exact_run(case, npz):
    ref = np.load(case / npz)
    model = _gguf(weights="f32", case=case)
    assert range_err(model.logits(ref["input_ids"]), ref["exact_logits"]) <= 1e-5
    if "exact_greedy" in ref:
        ids = list(ref["input_ids"])
        for want in ref["exact_greedy"]:
            ids.append(int(np.argmax(model.logits(np.array(ids))[-1])))
            assert ids[-1] == want


def test_gguf_as_stored_is_as_close_as_llama_cpps_own_run():
    model = _gguf()
    assert model.weight_type == "q8_0"
    err, theirs = stored_errors(model, np.load(CASE / "q8_0.npz"))
    assert err <= 1.5 * theirs, (err, theirs)


def _mxfp4(weights=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # "... stored as MXFP4 were decoded at load": the point here
        return petit.load(CASE / "mxfp4.gguf", weights=weights)


def test_gguf_mxfp4_decoded_is_llama_cpps_exact_run():
    """The f32 file quantized to MXFP4 by llama.cpp (every matrix: the converter's file type for the release, whose
    experts it writes MXFP4): ggml's blocks read as gpt_oss's MXFP4, the same values."""
    ref = np.load(CASE / "mxfp4.npz")
    model = _mxfp4(weights="f32")
    assert range_err(model.logits(ref["input_ids"]), ref["exact_logits"]) <= 1e-5
    ids = list(ref["input_ids"])
    for want in ref["exact_greedy"][:4]:
        ids.append(int(np.argmax(model.logits(np.array(ids))[-1])))
        assert ids[-1] == want


def test_gguf_mxfp4_blocks_become_q8_0_blocks_exactly():
    from petit.formats.gguf import GGUFFile
    from petit.loading.gguf import GGUFSource
    from petit.loading.gguf_archs import config_from_gguf
    from petit.native import dequantize
    f = GGUFFile(str(CASE / "mxfp4.gguf"))
    try:
        arch, cfg = config_from_gguf(f.metadata, "x", 320, f.tensors)
        src = GGUFSource(f, arch, cfg, None, set())
        for name in ("model.layers.1.ffn.experts.5.w2.weight", "model.layers.2.attn.wq_b.weight",
                     "model.layers.1.attn.wo_a.1.weight"):          # an expert, a matrix, a group's rows
            shape = src.info(name)[1]
            q8 = src.exact_q8(name)
            assert np.array_equal(dequantize(q8, "q8_0", shape), src.f32(name))
    finally:
        f.close()


def test_gguf_mxfp4_as_stored():
    """Run as q8_0 (the same values): at the median position within 1.5x llama.cpp's own MXFP4 run (measured 0.0087 /
    0.0084 of the range); one position of 35 flips a routing / indexer choice that llama.cpp's keeps (0.19), Petit's
    router, compressor gates and hyper-connection mixes reading float activations where llama.cpp rounds them to
    q8_0."""
    ref = np.load(CASE / "mxfp4.npz")
    model = _mxfp4()
    assert model.weight_type == "q8_0"
    ex, scale = ref["exact_logits"], np.ptp(ref["exact_logits"])
    ours = np.abs(model.logits(ref["input_ids"]) - ex).max(-1) / scale
    theirs = np.abs(ref["logits"] - ex).max(-1) / scale
    assert np.median(ours) <= 1.5 * np.median(theirs) and (ours > 0.05).sum() <= 1 and ours.max() <= 0.25


def test_gguf_reads_the_source_config_and_hash_table():
    model = _gguf(weights="f32")
    got, want = model.config, json.loads((SRC / "config.json").read_text())
    for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
              "q_lora_rank", "o_groups", "o_lora_rank", "moe_intermediate_size", "n_routed_experts",
              "num_experts_per_tok", "n_shared_experts", "routed_scaling_factor", "norm_topk_prob", "swiglu_limit",
              "sliding_window", "index_n_heads", "index_head_dim", "index_topk", "hc_mult", "hc_sinkhorn_iters",
              "hc_eps", "layer_types", "mlp_layer_types", "compress_rates", "compress_rope_theta", "rope_theta",
              "scoring_func", "partial_rotary_factor", "vocab_size"):
        assert getattr(got, k) == pytest.approx(want[k]), k
    table = petit.load(SRC, weights="f32").net.layers[0].moe.tid2eid      # the folder's int64 table
    assert np.array_equal(model.net.layers[0].moe.tid2eid, table)        # the file's int32 one, read exactly


def test_gguf_yarn_is_the_compressed_layers_rope():
    assert _gguf(weights="f32").config.compress_rope_scaling is None
    cfg = _gguf(weights="f32", case=YARN).config
    assert (cfg.rope_theta, cfg.compress_rope_theta) == (10000.0, 160000.0)
    assert cfg.compress_rope_scaling == {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                                         "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": 1.0}


def test_gguf_tokenizer_is_the_sources():
    """The vocabulary the generator copied (llama.cpp's conversion of the same tokenizer) encodes the source's
    prompts to its ids."""
    tok = _gguf(weights="f32").tokenizer
    cases = json.loads((SRC.parent / "cases.json").read_text())
    assert tok.encode(cases["prompt_text"]) == cases["input_ids"]
    assert tok.encode(cases["chat_text"]) == cases["chat_input_ids"]


def _extra(**meta):
    from petit.loading.gguf_archs import ARCHS
    meta = {("attention." if k == "compress_ratios" else "") + k: v for k, v in meta.items()}
    base = {"attention.compress_ratios": [0, 4, 128], "expert_gating_func": 4, "hash_layer_count": 1,
            "swiglu_clamp_exp": [2.0] * 3, "swiglu_clamp_shexp": [2.0] * 3}
    full = {f"deepseek4.{k}": v for k, v in {**base, **meta}.items() if v is not None}
    for k in ("attention.q_lora_rank", "attention.sliding_window", "expert_feed_forward_length", "expert_shared_count",
              "attention.indexer.head_count", "attention.indexer.key_length", "attention.indexer.top_k",
              "attention.output_group_count", "attention.output_lora_rank", "hyper_connection.count",
              "hyper_connection.sinkhorn_iterations"):
        full.setdefault(f"deepseek4.{k}", 4)
    for k in ("expert_weights_scale", "attention.compress_rope_freq_base", "hyper_connection.epsilon"):
        full.setdefault(f"deepseek4.{k}", 1.0)
    cfg = {"num_hidden_layers": 3, "intermediate_size": 32}
    ARCHS["deepseek4"].extra(full, lambda k: f"deepseek4.{k}", cfg, lambda n: True)
    return cfg


def test_gguf_layer_kinds_from_compress_ratios():
    cfg = _extra()
    assert cfg["layer_types"] == ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"]
    assert cfg["mlp_layer_types"] == ["hash_moe", "moe", "moe"] and "intermediate_size" not in cfg


@pytest.mark.parametrize("meta, message", [
    ({"compress_ratios": [0, 8, 128]}, r"'deepseek4.attention.compress_ratios' is \[0, 8, 128\]: llama.cpp's "
                                        r"deepseek4 takes one of 0 / 4 / 128 for each of the 3 layers"),
    ({"compress_ratios": [0, 4]}, r"compress_ratios' is \[0, 4\]"),
    ({"expert_gating_func": 2}, r"'deepseek4.expert_gating_func' is 2: llama.cpp's deepseek4 takes sqrtsoftplus"),
    ({"swiglu_clamp_exp": [2.0, 3.0, 2.0]}, "clamps every layer's experts and shared expert at one positive limit"),
    ({"swiglu_clamp_shexp": [0.0] * 3}, "clamps every layer's experts and shared expert at one positive limit"),
])
def test_gguf_refuses_what_the_family_does_not_run(meta, message):
    with pytest.raises(ValueError, match=message):
        _extra(**meta)


def test_gguf_converts_to_a_petit_file_with_the_same_logits(tmp_path):
    from petit.cli import main
    ref = np.load(CASE / "q8_0.npz")
    assert main(["convert", str(CASE / "q8_0.gguf"), "-o", str(tmp_path / "m.petit"), "--f32"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = petit.load(tmp_path / "m.petit").logits(ref["input_ids"])
    assert np.abs(got - _gguf(weights="f32").logits(ref["input_ids"])).max() <= 1e-5


@pytest.mark.parametrize("path", [CASE / "q8_0.gguf", CASE / "mxfp4.gguf", YARN / "q8_0.gguf"],
                         ids=["q8_0", "mxfp4", "yarn"])
def test_petit_verify_passes_on_the_gguf_file(capsys, path):
    """The engine on the file's weights as stored equals the family's float64 reference."""
    from petit.cli import main
    assert main(["verify", str(path), "-n", "4"]) == 0, capsys.readouterr().out
