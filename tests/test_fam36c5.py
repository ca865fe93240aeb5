"""The fam36c group of issue 36 (tests/fixtures/hf5_fam36c: Sarvam-30B `sarvam_moe`, Param2 `param2moe`, Sarvam-105B
`sarvam_mla`, made by transformers 5.25, which runs the first two as GLM-4.5 and the third as DeepSeek-V3): what
tests/test_hf_parity.py (35-token prompt), test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0) and
test_moe.py (quantized routing) do not already hold for every hf5 fixture.

- (Parity at every position of the 140-token and chat prompts: tests/test_hf_parity.py, over every fixture.)
- The greedy continuation equals transformers'.
- Sarvam's / Param2's stored names (as transformers 5.25 writes them back): the fused query_key_value split into q,
  k, v (weights and biases), the q / k layernorms, the router's expert_bias; the same weights under GLM's names read
  as they are; Param2's tied head.
- The remote-code config spelling (aliases, top-level RoPE keys, the keys transformers keeps but never reads) gives
  the same logits; aliases that disagree and remote keys away from every release's value are refused by name.
- transformers' defaults of each config class where they differ from the parent's.
- Sarvam-105B's remote config (head_dim = kv_lora_rank + qk_rope_head_dim, q_head_dim, rope_scaling deepseek_yarn)
  gives the same logits.
- A converted `.petit` file (GLM's / DeepSeek's names) reloads and runs the same numbers.
- GGUF (tests/fixtures/gguf5_fam36c): llama.cpp's bailingmoe2 conversion of Sarvam-30B's released block, read as
  sarvam_moe: llama.cpp's exact logits, greedy tokens and tokenizer; what the reader refuses by name.
"""
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.formats.safetensors import SafetensorsFile
from petit.models import get_family
from models import load_strict as _load, rel_err, write_f32_safetensors

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36c"
FAMILIES = ["sarvam_moe", "param2moe", "sarvam_mla"]
CASES = FAMILIES + ["sarvam_moe_gguf"]      # and Sarvam's released block (no biases): the GGUF file's source
F32_TOL = 1e-4


@pytest.mark.parametrize("case", CASES)
def test_greedy_continuation_equals_transformers(case):
    ref = np.load(DIR / case / "reference.npz")
    steps = petit.generate_tokens(_load(DIR / case), ref["input_ids"].tolist(), max_tokens=len(ref["greedy"]),
                                  sampler=petit.Sampler(0.0), stop_ids=[])
    assert [s.token for s in steps] == ref["greedy"].tolist()


def _raw(case, *names):
    st = SafetensorsFile(DIR / case / "model.safetensors")
    try:
        return {n: np.array(st.raw(n), dtype=np.float32) for n in names}
    finally:
        st.close()


def _f32(w, shape):
    return np.asarray(w.dequantize(), dtype=np.float32).reshape(shape)


def test_sarvams_stored_names_are_read_under_glms():
    p = "model.layers.1."
    raw = _raw("sarvam_moe", p + "attention.query_key_value.weight", p + "attention.query_key_value.bias",
               p + "attention.query_layernorm.weight", p + "mlp.gate.expert_bias", "model.word_embeddings.weight")
    model = _load(DIR / "sarvam_moe")
    cfg, L = model.config, model.net.layers[1]
    D, q, kv = cfg.hidden_size, cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    fused, bias = raw[p + "attention.query_key_value.weight"], raw[p + "attention.query_key_value.bias"]
    assert fused.shape == (q + 2 * kv, D)
    for w, b, (a, z) in ((L.q, L.q_b, (0, q)), (L.k, L.k_b, (q, q + kv)), (L.v, L.v_b, (q + kv, q + 2 * kv))):
        np.testing.assert_array_equal(_f32(w, (z - a, D)), fused[a:z])
        np.testing.assert_array_equal(np.asarray(b.a, dtype=np.float32), bias[a:z])
    np.testing.assert_array_equal(np.asarray(L.q_norm.w.a, dtype=np.float32),
                                  raw[p + "attention.query_layernorm.weight"])
    np.testing.assert_array_equal(np.asarray(L.moe.sel_bias.a, dtype=np.float32), raw[p + "mlp.gate.expert_bias"])
    np.testing.assert_array_equal(_f32(model.net.embed, (cfg.vocab_size, D)), raw["model.word_embeddings.weight"])
    assert model.net.layers[0].moe is None and L.moe.shared is not None and L.o_b is None


def test_a_checkpoint_under_glms_names_is_read_as_it_is(tmp_path):
    """The same weights stored under GLM-4.5's names (transformers' in-memory names: q / k / v apart) run the same
    numbers, bit for bit."""
    st = SafetensorsFile(DIR / "sarvam_moe" / "model.safetensors")
    try:
        stored = {n: np.array(st.raw(n), dtype=np.float32) for n in st.names()}
    finally:
        st.close()
    cfg = json.loads((DIR / "sarvam_moe" / "config.json").read_text())
    q, kv = cfg["num_attention_heads"] * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"]
    glm = {}
    for n, a in stored.items():
        n = n.replace("model.word_embeddings.", "model.embed_tokens.").replace(".attention.", ".self_attn.")
        n = n.replace(".dense.", ".o_proj.").replace("query_layernorm", "q_norm").replace("key_layernorm", "k_norm")
        n = n.replace("mlp.gate.expert_bias", "mlp.gate.e_score_correction_bias")
        if ".query_key_value." in n:
            for proj, part in zip(("q_proj", "k_proj", "v_proj"), np.split(a, [q, q + kv])):
                glm[n.replace("query_key_value", proj)] = part
        else:
            glm[n] = a
    assert "model.layers.1.self_attn.k_proj.bias" in glm and not any("query_key_value" in n for n in glm)
    folder = tmp_path / "glm_names"
    shutil.copytree(DIR / "sarvam_moe", folder)
    write_f32_safetensors(folder / "model.safetensors", glm)
    ids = np.load(DIR / "sarvam_moe" / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(folder).logits(ids), _load(DIR / "sarvam_moe").logits(ids))


def test_param2_ties_its_head_and_has_two_shared_experts():
    model = _load(DIR / "param2moe")
    cfg = model.config
    assert cfg.tie_word_embeddings and model.net.lm_head is model.net.embed
    assert cfg.n_shared_experts == 2 and model.net.layers[1].moe.shared[0].shape == (2 * cfg.moe_intermediate_size,
                                                                                  cfg.hidden_size)
    assert all(L.q_b is None for L in model.net.layers)


def _config(case, **changes):
    d = json.loads((DIR / case / "config.json").read_text())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


def _remote(case):
    """The fixture's config as the remote code writes it: its aliases, top-level RoPE keys and its own keys."""
    d = _config(case)
    d.update(num_experts=d.pop("n_routed_experts"), num_shared_experts=d.pop("n_shared_experts"),
             use_qkv_bias=d.pop("attention_bias"), num_mtp_layers=d.pop("num_nextn_predict_layers"))
    rope = d.pop("rope_parameters")
    d.update(rope_theta=rope["rope_theta"], partial_rotary_factor=rope["partial_rotary_factor"], rope_scaling=None,
             use_bias=False, use_rmsnorm=True, moe_router_enable_expert_bias=True, score_function="sigmoid",
             embedding_dropout=0.0, output_dropout=0.0, max_window_layers=d["num_hidden_layers"],
             attn_implementation="eager", router_dtype="fp32", mtp_loss_scaling_factor=0.0,
             moe_shared_expert_intermediate_size=d["num_shared_experts"] * d["moe_intermediate_size"])
    return d


def _same_logits(case, config, tmp_path):
    folder = tmp_path / case
    shutil.copytree(DIR / case, folder)
    (folder / "config.json").write_text(json.dumps(config))
    ref = np.load(DIR / case / "reference.npz")
    err = rel_err(_load(folder).logits(ref["input_ids"]), ref["logits"])       # no warning: every key read
    assert err.max() <= F32_TOL


@pytest.mark.parametrize("case", ["sarvam_moe", "param2moe"])
def test_the_remote_config_spelling_gives_the_same_logits(case, tmp_path):
    _same_logits(case, _remote(case), tmp_path)


@pytest.mark.parametrize("changes, message", [
    (dict(num_experts=7), "num_experts 7 and n_routed_experts 8 disagree"),
    (dict(num_shared_experts=2), "num_shared_experts 2 and n_shared_experts 1 disagree"),
    (dict(use_qkv_bias=False), "use_qkv_bias False and attention_bias True disagree"),
    (dict(use_bias=True), "use_bias True is not supported by the sarvam_moe family"),
    (dict(use_rmsnorm=False), "use_rmsnorm False"),
    (dict(moe_router_enable_expert_bias=False), "moe_router_enable_expert_bias False"),
    (dict(score_function="softmax"), "score_function 'softmax'"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(n_group=3), "n_group 3"),
    (dict(moe_shared_expert_intermediate_size=64), "moe_shared_expert_intermediate_size 64 is not n_shared_experts 1"),
])
def test_sarvam_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        get_family("sarvam_moe").Config.from_dict(_config("sarvam_moe", **changes))


@pytest.mark.parametrize("case", FAMILIES)
def test_unknown_keys_are_reported(case):
    with pytest.warns(UserWarning, match="use_flash_attn"):
        cfg = get_family(case).Config.from_dict(_config(case, use_flash_attn=True))
    assert cfg.unknown_keys == ["use_flash_attn"]


MINIMAL = {"vocab_size": 1000, "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 4,
           "num_attention_heads": 32}


def _defaults(case):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return get_family(case).Config.from_dict(dict(MINIMAL))


def test_sarvam_moe_keeps_transformers_defaults():
    """SarvamMoEConfig's, where GLM-4.5's differ (partial_rotary_factor 0.5, theta, no q / k norms, 8 kv heads...)."""
    s = _defaults("sarvam_moe")
    assert (s.partial_rotary_factor, s.rotary_dim, s.rope_theta, s.use_qk_norm, s.head_dim) == (1.0, 64, 8e6, True, 64)
    assert (s.num_key_value_heads, s.n_routed_experts, s.num_experts_per_tok, s.n_shared_experts) == (4, 128, 6, 1)
    assert (s.routed_scaling_factor, s.rms_norm_eps, s.tie_word_embeddings) == (2.5, 1e-6, False)


def test_param2moe_keeps_transformers_defaults():
    p = _defaults("param2moe")
    assert (p.rope_theta, p.tie_word_embeddings, p.num_key_value_heads, p.n_routed_experts) == (5e5, True, 8, 64)
    assert (p.n_shared_experts, p.moe_intermediate_size, p.max_position_embeddings) == (2, 2048, 32768)
    assert (p.partial_rotary_factor, p.use_qk_norm, p.routed_scaling_factor) == (1.0, True, 2.5)


def test_sarvam_mla_keeps_transformers_defaults():
    """SarvamMLAConfig's: no low-rank query, routing over all experts, DeepSeek-V3's latent sizes."""
    m = _defaults("sarvam_mla")
    assert (m.q_lora_rank, m.n_group, m.topk_group, m.n_routed_experts, m.first_k_dense_replace) == (None, 1, 1, 128, 1)
    assert (m.num_key_value_heads, m.head_dim, m.kv_lora_rank, m.moe_intermediate_size) == (32, 64, 512, 2048)


def test_sarvam_105b_remote_config_gives_the_same_logits(tmp_path):
    d = _config("sarvam_mla")
    rope = d.pop("rope_parameters")
    d.update(head_dim=d["kv_lora_rank"] + d["qk_rope_head_dim"], q_head_dim=d.pop("qk_head_dim"),
             num_experts=d.pop("n_routed_experts"), num_shared_experts=d.pop("n_shared_experts"),
             rope_theta=rope.pop("rope_theta"), rope_scaling=dict(rope, type="deepseek_yarn"))
    d["moe_shared_expert_intermediate_size"] = d["num_shared_experts"] * d["moe_intermediate_size"]
    del d["rope_scaling"]["rope_type"]
    _same_logits("sarvam_mla", d, tmp_path)


@pytest.mark.parametrize("changes, message", [
    (dict(q_head_dim=40), "q_head_dim 40 is not qk_nope_head_dim 32 \\+ qk_rope_head_dim 16"),
    (dict(num_experts=7), "num_experts 7 and n_routed_experts 8 disagree"),
    (dict(moe_shared_expert_intermediate_size=16), "moe_shared_expert_intermediate_size 16"),
    (dict(rope_interleave=False), "rope_interleave false"),
])
def test_sarvam_mla_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        get_family("sarvam_mla").Config.from_dict(_config("sarvam_mla", **changes))


@pytest.mark.parametrize("case", CASES)
def test_converted_file_runs_the_same_numbers(case, tmp_path):
    from petit.cli import main
    out = tmp_path / "m.petit"
    assert main(["convert", str(DIR / case), "-o", str(out), "--f32"]) == 0
    ids = np.load(DIR / case / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(out).logits(ids), _load(DIR / case).logits(ids))


# --- GGUF: llama.cpp's own conversion of Sarvam-30B (tests/fixtures/gguf5_fam36c, its README says how) ---

GGUF = Path(__file__).parent / "fixtures" / "gguf5_fam36c"
GGUF_MANIFEST = json.loads((GGUF / "manifest.json").read_text())["cases"]
GGUF_READ = sorted(c for c in GGUF_MANIFEST if (GGUF / c / "q8_0.gguf").is_file())


def _gguf(case, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # read without any "ignoring ..." report
        return petit.load(GGUF / case / "q8_0.gguf", **kw)


def _scaled(got, exact):
    return np.abs(got - exact).max() / (exact.max() - exact.min())


def test_gguf_cases_are_the_architectures_llama_cpp_has():
    assert GGUF_READ == ["sarvam_moe_gguf"]         # llama.cpp 0.3.36 converts no Param2, no Sarvam-105B
    assert GGUF_MANIFEST["sarvam_moe_gguf"]["architecture"] == "bailingmoe2"


@pytest.mark.parametrize("case", GGUF_READ)
def test_gguf_as_stored_is_as_close_as_llama_cpps_own_run(case):
    ref = np.load(GGUF / case / "q8_0.npz")
    model = _gguf(case)
    assert model.weight_type == "q8_0"
    err, theirs = _scaled(model.logits(ref["input_ids"]), ref["exact_logits"]), _scaled(ref["logits"],
                                                                                         ref["exact_logits"])
    assert err <= 1.5 * theirs, (err, theirs)
    assert all(L.moe.router.dtype == "f32" for L in model.net.layers if L.moe is not None)


def test_gguf_bailingmoe2_reads_the_folders_block():
    """The fused attn_qkv split into the folder's q / k / v (to q8_0's step), its layers, router and shared expert;
    the selection bias as the converter centred it (the same choice)."""
    net, cfg = _gguf("sarvam_moe_gguf", weights="f32").net, _gguf("sarvam_moe_gguf", weights="f32").config
    folder = _load(DIR / "sarvam_moe_gguf")
    assert (cfg.model_type, cfg.first_k_dense_replace, cfg.n_shared_experts, cfg.partial_rotary_factor) == \
        ("sarvam_moe", 1, 1, 1.0)
    D = cfg.hidden_size
    for a, b in zip(net.layers, folder.net.layers):
        for w in ("q", "k", "v", "o"):
            rows = getattr(b, w).shape[0]
            want = _f32(getattr(b, w), (rows, -1))
            np.testing.assert_allclose(_f32(getattr(a, w), (rows, -1)), want, atol=np.abs(want).max() / 127, rtol=0)
        assert (a.moe is None) == (b.moe is None) and a.q_b is None
    for a, b in zip(net.layers[1:], folder.net.layers[1:]):
        assert (a.moe.scoring, a.moe.routed_scale, a.moe.norm_topk, a.moe.top_k) == ("sigmoid", 2.5, True, 2)
        bias, want = np.asarray(a.moe.sel_bias.a), np.asarray(b.moe.sel_bias.a)
        np.testing.assert_allclose(bias, want - want.mean(), atol=1e-6)
        assert a.moe.shared[0].shape == (cfg.moe_intermediate_size, D)


def _meta(**changes):
    meta = {"bailingmoe2.expert_gating_func": 2, "bailingmoe2.expert_feed_forward_length": 32,
            "bailingmoe2.expert_shared_count": 1, "bailingmoe2.leading_dense_block_count": 1}
    meta.update({f"bailingmoe2.{k}": v for k, v in changes.items()})
    return {k: v for k, v in meta.items() if v is not None}


@pytest.mark.parametrize("changes, message", [
    (dict(expert_gating_func=1), "expert_gating_func' is 1: Petit's sarvam_moe family runs the sigmoid"),
    (dict(expert_gating_func=None), "expert_gating_func' is missing: llama.cpp's bailingmoe2 requires it"),
    (dict(expert_shared_feed_forward_length=64), "expert_shared_feed_forward_length' \\(64\\) differs"),
    (dict(nextn_predict_layers=3), "nextn_predict_layers' \\(3\\) should be below"),
])
def test_gguf_bailingmoe2_refuses_what_the_family_does_not_run(changes, message):
    from petit.loading.gguf_fam36c5 import _bailingmoe2
    cfg = {"num_hidden_layers": 3, "head_dim": 16}
    with pytest.raises(ValueError, match=message):
        _bailingmoe2(_meta(**changes), lambda k: f"bailingmoe2.{k}", cfg, lambda n: True)


def test_gguf_bailingmoe2_skips_the_mtp_layers_and_reads_groups():
    from petit.loading.gguf_fam36c5 import _bailingmoe2
    cfg = {"num_hidden_layers": 5, "head_dim": 16}
    _bailingmoe2(_meta(nextn_predict_layers=1, expert_group_count=4, expert_group_used_count=2,
                       expert_weights_scale=0.0), lambda k: f"bailingmoe2.{k}", cfg, lambda n: True)
    assert (cfg["num_hidden_layers"], cfg["n_group"], cfg["topk_group"], cfg["routed_scaling_factor"]) == (4, 4, 2, 1.0)


@pytest.mark.parametrize("case", GGUF_READ)
def test_gguf_converts_to_a_petit_file_with_the_same_logits(tmp_path, case):
    from petit.cli import main
    ref = np.load(GGUF / case / "q8_0.npz")
    assert main(["convert", str(GGUF / case / "q8_0.gguf"), "-o", str(tmp_path / "m.petit"), "--f32"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = petit.load(tmp_path / "m.petit").logits(ref["input_ids"])
    assert _scaled(got, ref["exact_logits"]) <= 1e-5
