"""The fam36q group of issue 36: llama.cpp architectures of families Petit runs, read from llama.cpp's own
conversion (tests/fixtures/gguf5_fam36q, its README says how), and the precise reasons of those left refused.

- hy_v3 (Hy3): llama.cpp's conversion of tests/fixtures/hf5_fam36h/hy_v3_gguf (the hy_v3 block without biases,
  which llama.cpp does not load), read as the hy_v3 family: as stored as close to llama.cpp's exact run as
  llama.cpp's own q8_0 run, the layers' kinds and routing the folder's, its refusals, `petit convert` and
  `petit verify` on it (test_gguf5_exact.py: decoded to f32, llama.cpp's exact logits, greedy tokens and tokenizer
  ids).
- codeshell (CodeShell) and baichuan (Baichuan-7B), remote-code models without a transformers class: llama.cpp's
  conversion of their layout written by hand from a transformers model of the family whose blocks they are
  (tests/fixtures/hf5_fam36q: starcoder2, llama), read as that family; the same checks, and baichuan's layer counts
  where llama.cpp runs another position encoding refused.
- The group's other architectures: refused with what they are (petit/models/refusals.py), named in the error.
"""
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from models import assert_as_close_as_llama_cpps_own_run, load_strict as _load, range_err

GGUF = Path(__file__).parent / "fixtures" / "gguf5_fam36q"
GGUF_MANIFEST = json.loads((GGUF / "manifest.json").read_text())["cases"]
GGUF_READ = sorted(c for c in GGUF_MANIFEST if (GGUF / c / "q8_0.gguf").is_file())
HY_FILE = GGUF / "hy_v3_gguf" / "q8_0.gguf"
HY_FOLDER = Path(__file__).parent / "fixtures" / "hf5_fam36h" / "hy_v3_gguf"
HY4_FOLDER = Path(__file__).parent / "fixtures" / "hf5_fam36m" / "hy_v4"
HF5 = Path(__file__).parent / "fixtures" / "hf5_fam36q"
SOURCE = {"codeshell": HF5 / "starcoder2_codeshell", "baichuan": HF5 / "llama_baichuan"}
# llama.cpp's GELU reads a table of f16 values (test_wrap5.GELU_TABLE): within 1e-3 of the range there
GELU_TABLE = {"codeshell"}
_scaled = range_err


def _gguf(case, weights=None):
    return _load(GGUF / case / "q8_0.gguf", weights=weights)      # as stored unless asked, without any warning


def test_gguf_cases_are_llama_cpps_architectures():
    assert GGUF_READ == ["baichuan", "bailing_hybrid", "codeshell", "hy_v3_gguf", "hy_v4"]
    assert {c: GGUF_MANIFEST[c]["architecture"] for c in GGUF_READ} == {
        "baichuan": "baichuan", "bailing_hybrid": "bailingmoe3", "codeshell": "codeshell", "hy_v3_gguf": "hy_v3",
        "hy_v4": "hy_v4"}


@pytest.mark.parametrize("case", GGUF_READ)
def test_gguf_as_stored_is_as_close_as_llama_cpps_own_run(case):
    """q8_0 as stored, against llama.cpp's exact run (its f32 compute on the same weights): hy_v3 measured 0.0235 of
    the range (llama.cpp's own q8_0 run 0.0214), codeshell 0.0065 (0.0063), baichuan 0.038 (0.042), hy_v4 0.227
    (0.227: routing and the indexer's choice flip under q8_0 in both), bailing_hybrid 0.367 (0.359: routing)."""
    model = _gguf(case)
    assert model.weight_type == "q8_0"
    assert_as_close_as_llama_cpps_own_run(model, np.load(GGUF / case / "q8_0.npz"), case in GELU_TABLE)


@pytest.mark.parametrize("case", sorted(SOURCE))
def test_gguf_of_a_remote_layout_is_the_family_model_it_was_written_from(case):
    """The file llama.cpp converted from the remote code's layout, read as the family: every matrix the family
    folder's to q8_0's step, the same config."""
    model, folder = _gguf(case, weights="f32"), _load(SOURCE[case])
    assert model.config.model_type == folder.config.model_type == {"codeshell": "starcoder2",
                                                                   "baichuan": "llama"}[case]
    for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "rope_theta", "tie_word_embeddings"):
        assert getattr(model.config, k) == getattr(folder.config, k), k
    heads = {"q": folder.config.num_attention_heads, "k": folder.config.num_key_value_heads}
    for a, b in zip(model.net.layers, folder.net.layers):
        for w in ("q", "k", "v", "o", "up", "down"):
            want = np.asarray(getattr(b, w).dequantize(), np.float32).reshape(getattr(b, w).shape[0], -1)
            if case == "baichuan" and w in heads:      # llama's files: each head's rows in adjacent-pair order
                want = want[np.arange(len(want)).reshape(heads[w], 2, -1).swapaxes(1, 2).reshape(-1)]
            got = np.asarray(getattr(a, w).dequantize(), np.float32).reshape(want.shape[0], -1)
            np.testing.assert_allclose(got, want, atol=np.abs(want).max() / 127, rtol=0)


@pytest.mark.parametrize("layers, how", [(40, "ALiBi \\(Baichuan-13B's\\)"), (31, "no position encoding at all")])
def test_gguf_baichuan_other_layer_counts_are_refused(layers, how):
    from petit.loading.gguf_fam36q5 import _baichuan
    with pytest.raises(ValueError, match=f"'baichuan.block_count' is {layers}: llama.cpp's baichuan then runs {how}"):
        _baichuan({}, lambda k: f"baichuan.{k}", {"num_hidden_layers": layers}, lambda n: False)


def test_gguf_hy_v3_is_the_folders_model():
    """The dense first layer and the routed ones, the routing and the shared expert's width from the metadata; every
    matrix the folder's to q8_0's step."""
    model, folder = _gguf("hy_v3_gguf", weights="f32"), _load(HY_FOLDER)
    cfg, want = model.config, folder.config
    for k in ("num_hidden_layers", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
              "num_shared_experts", "mlp_layer_types", "attention_bias", "mlp_bias", "head_dim"):
        assert getattr(cfg, k) == getattr(want, k), k
    assert cfg.mlp_layer_types == ["dense", "sparse", "sparse"]
    assert np.float32(cfg.router_scaling_factor) == np.float32(want.router_scaling_factor)
    for a, b in zip(model.net.layers, folder.net.layers):
        assert (a.moe is None) == (b.moe is None)
        if a.moe is not None:
            np.testing.assert_array_equal(np.asarray(a.moe.sel_bias.a), np.asarray(b.moe.sel_bias.a))
            assert a.moe.scoring == b.moe.scoring == "sigmoid"
            assert np.float32(a.moe.routed_scale) == np.float32(b.moe.routed_scale)


def test_gguf_hy_v4_is_the_folders_model():
    """The hyper-connections, clamp, router and indexer from the file's metadata: the folder's config (the logits,
    llama.cpp's within 4.8e-7 of the range, hold the tensors: test_gguf5_exact.py)."""
    model, folder = _gguf("hy_v4", weights="f32"), _load(HY4_FOLDER)
    for k in ("hc_mult", "hc_magnitude", "hc_eps", "swiglu_limit", "indexer_types", "index_topk", "index_n_heads",
              "index_head_dim", "routed_scaling_factor", "n_routed_experts", "kv_lora_rank", "q_lora_rank",
              "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "first_k_dense_replace", "scoring_func"):
        want = getattr(folder.config, k)
        got = getattr(model.config, k)
        assert (np.float32(got) == np.float32(want)) if isinstance(want, float) else got == want, (k, got, want)


def test_gguf_bailingmoe3_is_the_folders_ling3():
    """Ling 3 as llama.cpp writes it: the layer kinds from the key / value head counts, KDA's full-rank gates, the
    bounded forget gate, the grouped router and each layer's clamps, the folder's config."""
    model, folder = _gguf("bailing_hybrid", weights="f32"), _load(HF5.parent / "hf5_fam36m" / "bailing_hybrid")
    for k in ("layer_types", "mlp_layer_types", "num_expert_group", "topk_group", "num_experts", "num_shared_experts",
              "moe_intermediate_size", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
              "kda_safe_gate", "kda_lower_bound", "head_dim", "short_conv_kernel_size", "moe_renormalize"):
        assert getattr(model.config, k) == getattr(folder.config, k), k
    for k in ("expert_swiglu_limit_list", "share_expert_swiglu_limit_list", "routed_scaling_factor"):
        np.testing.assert_array_equal(np.float32(getattr(model.config, k)), np.float32(getattr(folder.config, k)))


def test_gguf_bailingmoe3_refuses_the_unbounded_forget_gate():
    from petit.loading.gguf_fam36q5 import _bailingmoe3
    with pytest.raises(ValueError, match="'bailingmoe3.kda.safe_gate' is absent or false: llama.cpp's bailingmoe3"):
        _bailingmoe3({}, lambda k: f"bailingmoe3.{k}", {"num_hidden_layers": 2}, lambda n: False)


def test_gguf_hy_v4_refuses_a_clamp_per_layer():
    from petit.loading.gguf_fam36q5 import _hy_v4
    with pytest.raises(ValueError, match="'hy_v4.swiglu_clamp_exp' is \\[1.0, 2.0\\]: the hy_v4 family clamps every"):
        _hy_v4({"hy_v4.swiglu_clamp_exp": [1.0, 2.0]}, lambda k: f"hy_v4.{k}", {}, lambda n: False)


def _meta(**changes):
    meta = {"expert_gating_func": 2, "expert_weights_norm": True, "expert_weights_scale": 2.5,
            "expert_feed_forward_length": 32, "expert_shared_feed_forward_length": 64}
    meta.update(changes)
    return {f"hy_v3.{k}": v for k, v in meta.items() if v is not None}


def _hy(meta, has=lambda n: n.startswith("blk.1."), **cfg):
    from petit.loading.gguf_fam36q5 import _hy_v3
    cfg = dict(cfg, num_hidden_layers=3)
    _hy_v3(meta, lambda k: f"hy_v3.{k}", cfg, has)
    return cfg


def test_gguf_hy_v3_config_from_the_metadata():
    cfg = _hy(_meta())
    assert (cfg["num_shared_experts"], cfg["router_scaling_factor"], cfg["mlp_layer_types"]) == (
        2, 2.5, ["dense", "sparse", "dense"])
    cfg = _hy(_meta(nextn_predict_layers=1, expert_weights_scale=None, expert_shared_feed_forward_length=None))
    assert (cfg["num_hidden_layers"], cfg["num_shared_experts"], cfg["router_scaling_factor"]) == (2, 1, 1.0)


@pytest.mark.parametrize("changes, message", [
    (dict(expert_gating_func=1), "'hy_v3.expert_gating_func' is 1: Petit's hy_v3 family routes on the sigmoid"),
    (dict(expert_weights_norm=False), "'hy_v3.expert_weights_norm' is absent or false: llama.cpp then does not "
                                      "renormalise the chosen experts' weights, which the hy_v3 family always does"),
    (dict(), "'hy_v3.rope.dimension_count' is not the head size: llama.cpp's hy_v3 rotates whole heads"),
    (dict(expert_shared_feed_forward_length=48), "\\(48\\) is not a multiple of 'hy_v3.expert_feed_forward_length'"),
    (dict(expert_feed_forward_length=None), "'hy_v3.expert_feed_forward_length' is missing: llama.cpp's hy_v3"),
])
def test_gguf_hy_v3_refuses_what_the_family_does_not_run(changes, message):
    with pytest.raises(ValueError, match=message):
        _hy(_meta(**changes), **({} if changes else {"partial_rotary_factor": 0.5}))


def test_gguf_hy_v3_without_a_selection_bias_chooses_on_the_sigmoids():
    from petit.loading.gguf_fam36q5 import _zero_bias
    cfg = {"num_experts": 6, "mlp_layer_types": ["dense", "sparse", "sparse"]}
    got = _zero_bias({}, cfg, lambda n: n == "blk.2.exp_probs_b")
    assert list(got) == ["model.layers.1.mlp.e_score_correction_bias"]
    np.testing.assert_array_equal(got["model.layers.1.mlp.e_score_correction_bias"], np.zeros(6, np.float32))


@pytest.mark.parametrize("case", GGUF_READ)
def test_gguf_converts_to_a_petit_file_with_the_same_logits(tmp_path, case):
    from petit.cli import main
    path = GGUF / case / "q8_0.gguf"
    ref = np.load(path.with_suffix(".npz"))
    assert main(["convert", str(path), "-o", str(tmp_path / "m.petit"), "--f32"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = petit.load(tmp_path / "m.petit").logits(ref["input_ids"])
    assert _scaled(got, ref["exact_logits"]) <= (1e-3 if case in GELU_TABLE else 1e-5)


@pytest.mark.parametrize("weights", [None, "f32", "q4_0"])
@pytest.mark.parametrize("case", GGUF_READ)
def test_petit_verify_passes_on_the_gguf_file(capsys, case, weights):
    """The engine on the file's weights (as stored q8_0, decoded to f32, requantized to q4_0) equals the float64
    reference of its family on the same weights."""
    from petit.cli import main
    args = ["verify", str(GGUF / case / "q8_0.gguf"), "-n", "4"] + (["--weights", weights] if weights else [])
    assert main(args) == 0, capsys.readouterr().out


# (deepseek2-ocr and hunyuan_vl were refused here until the vlnew group read them: tests/test_vlnew5.py)
@pytest.mark.parametrize("arch", ["arctic", "bailingmoe", "chameleon", "cogvlm", "deci", "deepseek", "dots3note",
                                  "glm5-next", "gptj", "graniteswitch", "grok", "grovemoe"])
def test_the_groups_other_architectures_are_refused_with_their_reason(arch):
    from petit.loading.gguf_archs import ARCHS, unsupported
    from petit.models.refusals import NOT_YET
    assert arch not in ARCHS
    assert unsupported(arch) == f"architecture {arch!r} is not read by Petit yet: {NOT_YET['gguf:' + arch]}"
    assert "not read yet" not in NOT_YET["gguf:" + arch]
