"""The fam36o group of issue 36 (tests/fixtures/hf5_fam36o: HRM-Text, made by transformers 5.25): what
tests/test_hf_parity.py (every position of the three prompts, the quantized bounds) and test_verify_families.py
(`petit verify` at f32 / q8_0 / q4_0) do not already hold.

- The greedy continuation equals transformers'; the plan equals the per-op path bit for bit; decode, a chunked
  prefill and a batch give the whole prompt's logits.
- The unrolled passes: each stack's weights shared by its passes, each pass its own KV rows, the cycles' entries.
- What the family reads, its defaults (transformers'), transformers' two config forms (num_hidden_layers the
  stack's count, or the passes' with num_layers_per_stack), the keys it accepts without reading, its refusals.
- A converted `.petit` file reloads and runs the same numbers.
- GGUF (tests/fixtures/gguf5_fam36o): llama.cpp's hrm_text conversion of the block without biases (hrm_text_gguf),
  read as this family: as stored as close to llama.cpp's exact run as llama.cpp's own q8_0 run, the stacks and
  passes the folder's, its refusals, `petit convert` and `petit verify` on it (test_gguf5_exact.py: decoded to f32,
  llama.cpp's exact logits, greedy tokens and tokenizer ids).
"""
import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.models.families.dense import hrm_text
from models import (assert_a_batch_gives_each_sequence_its_own_logits,
                    assert_decoding_and_a_chunked_prefill_equal_the_whole, assert_greedy_equals_transformers,
                    assert_the_plan_equals_the_per_op_path, converted_runs_the_same, load_strict as _load,
                    range_err)

HRM = Path(__file__).parent / "fixtures" / "hf5_fam36o" / "hrm_text"


def _cfg(**changes):
    d = json.loads((HRM / "config.json").read_text())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


def _copy(tmp_path, **changes) -> Path:
    d = tmp_path / "hrm"
    shutil.copytree(HRM, d)
    (d / "config.json").write_text(json.dumps(_cfg(**changes)))
    return d


def test_greedy_continuation_equals_transformers():
    assert_greedy_equals_transformers(_load(HRM), HRM)


@pytest.mark.parametrize("kv", ["f32", "int8"])
def test_the_plan_gives_the_per_op_paths_bits(kv):
    assert_the_plan_equals_the_per_op_path(_load(HRM), kv)


def test_decode_a_chunked_prefill_and_a_batch_give_the_whole_prompts_logits():
    model = _load(HRM)
    ids = np.load(HRM / "reference_long.npz")["input_ids"]
    assert_decoding_and_a_chunked_prefill_equal_the_whole(model, ids)
    assert_a_batch_gives_each_sequence_its_own_logits(model, ids)


def test_converted_file_runs_the_same_numbers(tmp_path):
    converted_runs_the_same(HRM, tmp_path, np.load(HRM / "reference.npz")["input_ids"])


def test_the_passes_share_their_stacks_weights_and_keep_their_own_keys():
    model = _load(HRM)
    layers = model.net.layers
    assert len(layers) == 12 and model.new_cache(8).k.shape[0] == 12      # 2 x (2 + 1) passes x 2 layers
    order = ["L", "L", "H"] * 2
    for u, L in enumerate(layers):
        first = layers[[s for s in range(0, 12, 2) if order[s // 2] == order[u // 2]][0] + u % 2]
        assert L.q is first.q and L.attn_gate is first.attn_gate and L.down is first.down
        assert L.attn_norm.w is None and L.attn_gate_b is not None
    assert layers[0].q is not layers[4].q
    kinds = [L.pre_block.kind if L.pre_block else None for L in layers]
    assert kinds == ["first", None, "low", None, "high", None, "low_after_high", None, "low", None, "high", None]
    assert model.net.final_norm.w is None and model.net.arch.embed_scale == 2.0
    assert model.net.lm_head is not model.net.embed


def test_defaults_are_transformers():
    bare = hrm_text.Config.from_dict({"model_type": "hrm_text"})
    assert (bare.vocab_size, bare.hidden_size, bare.intermediate_size, bare.num_attention_heads) == \
        (151808, 1536, 4096, 12)
    assert (bare.num_layers_per_stack, bare.num_hidden_layers, bare.H_cycles, bare.L_cycles) == (16, 128, 2, 3)
    assert (bare.head_dim, bare.num_key_value_heads, bare.embedding_scale, bare.rope_theta) == (128, 12, 50.0, 1e4)
    assert bare.prefix_lm and not bare.tie_word_embeddings and not bare.attention_bias


def test_the_stacks_count_alone_reads_as_transformers_first_construction(tmp_path):
    """A config with num_hidden_layers the stack's count and no num_layers_per_stack (transformers' first
    construction, a legacy checkpoint) is the same model."""
    d = _copy(tmp_path, num_hidden_layers=2, num_layers_per_stack=None)
    cfg = hrm_text.Config.from_dict(_cfg(num_hidden_layers=2, num_layers_per_stack=None))
    assert (cfg.num_layers_per_stack, cfg.num_hidden_layers) == (2, 12)
    ids = np.load(HRM / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(d).logits(ids), _load(HRM).logits(ids))


def test_what_is_accepted_and_not_read(tmp_path):
    """prefix_lm (a mask transformers builds only from a caller's token_type_ids) and L_bp_cycles (training) change
    nothing; num_key_value_heads, which transformers' HRM-Text does not read, is reported."""
    ids = np.load(HRM / "reference.npz")["input_ids"]
    want = _load(HRM).logits(ids)
    d = _copy(tmp_path, prefix_lm=False, L_bp_cycles=[1, 1])
    np.testing.assert_array_equal(_load(d).logits(ids), want)
    with pytest.warns(UserWarning, match=r"ignoring unknown key\(s\) num_key_value_heads \(HRM-Text's attention has "
                                         r"a key / value head per query head: not read\)"):
        cfg = hrm_text.Config.from_dict(_cfg(num_key_value_heads=2))
    assert cfg.num_key_value_heads == 4


def test_the_embedding_scale_defaults_to_the_inverse_initializer_range():
    assert hrm_text.Config.from_dict(_cfg(embedding_scale=None, initializer_range=0.25)).embedding_scale == 4.0
    assert hrm_text.Config.from_dict(_cfg(initializer_range=0.25)).embedding_scale == 2.0


@pytest.mark.parametrize("changes, message", [
    (dict(H_cycles=0), "config: H_cycles must be a positive integer, got 0"),
    (dict(L_cycles=0), "config: L_cycles must be a positive integer, got 0"),
    (dict(num_layers_per_stack=0), "config: num_layers_per_stack must be a positive integer, got 0"),
    (dict(embedding_scale=-1.0), "config: embedding_scale must be a positive number, got -1.0"),
    (dict(embedding_scale=None, initializer_range=0.0), "config: initializer_range must be a positive number when "
                                                        "embedding_scale is not given"),
    (dict(H_cycles=3), "config: num_hidden_layers 12 is fewer than the passes' layers, 18 (num_layers_per_stack 2 x "
                       "H_cycles 3 x (L_cycles 2 + 1)): transformers' cache has no slot for the later passes"),
    (dict(hidden_act="tanh"), "config: hidden_act 'tanh' is not supported by the hrm_text family"),
    (dict(prefix_lm="yes"), "config: prefix_lm must be true or false"),
])
def test_refusals_name_what_is_not_supported(changes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        hrm_text.Config.from_dict(_cfg(**changes))


def _module_names(folder, dest, drop_biases=False) -> Path:
    """A copy of the fixture with transformers' module names (q / k / v / gate_proj, gate_proj / up_proj, self_attn.
    o_proj), as its conversion mapping splits the released fused tensors; the biases dropped on request."""
    from test_moe_a5 import _read_safetensors, _write_safetensors
    d = Path(dest) / "modules"
    shutil.copytree(folder, d)
    out = {}
    for k, a in _read_safetensors(folder / "model.safetensors").items():
        if k.endswith("attn.gqkv_proj.weight"):
            p = k[:-len("attn.gqkv_proj.weight")] + "self_attn."
            out.update((p + n + "_proj.weight", c) for n, c in zip(("gate", "q", "k", "v"), np.split(a, 4)))
        elif k.endswith("mlp.gate_up_proj.weight"):
            p = k[:-len("gate_up_proj.weight")]
            out.update((p + n + "_proj.weight", c) for n, c in zip(("gate", "up"), np.split(a, 2)))
        elif not (drop_biases and k.endswith(".bias")):
            out[k.replace(".attn.o_proj.", ".self_attn.o_proj.")] = a
    _write_safetensors(d / "model.safetensors", out)
    if drop_biases:
        (d / "config.json").write_text(json.dumps(_cfg(attention_bias=False)))
    return d


def test_transformers_module_names_read_as_the_released_layout(tmp_path):
    ids = np.load(HRM / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(_module_names(HRM, tmp_path)).logits(ids), _load(HRM).logits(ids))


def _zeroed(tmp_path, which):
    """A copy of the fixture with z_L_init, the attention output gates (gqkv's first quarter and gate_proj's bias)
    or every bias zeroed."""
    from test_moe_a5 import _read_safetensors, _write_safetensors
    d = tmp_path / which
    shutil.copytree(HRM, d)
    out = _read_safetensors(HRM / "model.safetensors")
    for k, a in out.items():
        a = out[k] = a.copy()
        if which == "z_L_init" and k.endswith("z_L_init") or which == "bias" and k.endswith(".bias") or \
                which == "gates" and k.endswith("self_attn.gate_proj.bias"):
            a[:] = 0.0
        elif which == "gates" and k.endswith("attn.gqkv_proj.weight"):
            a[:len(a) // 4] = 0.0
    _write_safetensors(d / "model.safetensors", out)
    return d


def _feature_check(label: str) -> float:
    checks = json.loads((HRM.parent / "cases.json").read_text())["cases"]["hrm_text"]["feature_checks"]
    return next(c["max_abs_logit_diff"] for c in checks if c["switched_off"] == label)


VARIANTS = {"rms_norm_eps 1e-6": lambda p: _copy(p, rms_norm_eps=1e-6),
            "embedding_scale 1 (not 1 / initializer_range)": lambda p: _copy(p, embedding_scale=1.0),
            "H_cycles 1": lambda p: _copy(p, H_cycles=1),
            "L_cycles 1": lambda p: _copy(p, L_cycles=1),
            "z_L_init zeroed": lambda p: _zeroed(p, "z_L_init"),
            "attention output gates zeroed (sigmoid 1/2)": lambda p: _zeroed(p, "gates"),
            "all biases zeroed": lambda p: _zeroed(p, "bias")}


@pytest.mark.parametrize("label", list(VARIANTS))
def test_each_feature_switched_off_moves_the_logits_as_in_transformers(tmp_path, label):
    """cases.json's feature checks (transformers' max |logit change| on the prompt, 4 decimals) replayed: the
    variant's logits move by the same amount from the reference, so Petit computes the variant too (the cycle
    counts, the scale, the initial state, the gates, the biases)."""
    want = _feature_check(label)
    ref = np.load(HRM / "reference.npz")
    got = np.abs(_load(VARIANTS[label](tmp_path)).logits(ref["input_ids"]) - ref["logits"]).max()
    assert abs(got - want) <= 2e-4


def test_without_attention_biases_no_bias_is_read(tmp_path):
    """attention_bias false (transformers' default, the release's): no q / k / v / o / gate bias is asked for, and the
    logits move as transformers' with the biases zeroed (cases.json)."""
    model = _load(_module_names(HRM, tmp_path, drop_biases=True))
    assert all(getattr(L, b) is None for L in model.net.layers for b in ("q_b", "k_b", "v_b", "o_b", "attn_gate_b"))
    ref = np.load(HRM / "reference.npz")
    got = np.abs(model.logits(ref["input_ids"]) - ref["logits"]).max()
    assert abs(got - _feature_check("all biases zeroed")) <= 2e-4


# --- GGUF: llama.cpp's own conversion of HRM-Text (tests/fixtures/gguf5_fam36o, its README says how) ---

GGUF = Path(__file__).parent / "fixtures" / "gguf5_fam36o"
GGUF_MANIFEST = json.loads((GGUF / "manifest.json").read_text())["cases"]
GGUF_READ = sorted(c for c in GGUF_MANIFEST if (GGUF / c / "q8_0.gguf").is_file())
GGUF_FILE = GGUF / "hrm_text_gguf" / "q8_0.gguf"


def _gguf(case, weights=None):
    return _load(GGUF / case / "q8_0.gguf", weights=weights)      # as stored unless asked, without any warning


_scaled = range_err


def test_gguf_case_is_llama_cpps_hrm_text():
    assert GGUF_READ == ["hrm_text_gguf"]
    assert GGUF_MANIFEST["hrm_text_gguf"]["architecture"] == "hrm_text"


def test_gguf_as_stored_is_as_close_as_llama_cpps_own_run():
    """q8_0 as stored, against llama.cpp's exact run (its f32 compute on the same weights): measured 0.0099 of the
    range, llama.cpp's own q8_0 run 0.0084."""
    ref = np.load(GGUF_FILE.with_suffix(".npz"))
    model = _gguf("hrm_text_gguf")
    assert model.weight_type == "q8_0"
    err, theirs = _scaled(model.logits(ref["input_ids"]), ref["exact_logits"]), _scaled(ref["logits"],
                                                                                         ref["exact_logits"])
    assert err <= 1.5 * theirs, (err, theirs)


def test_gguf_reads_the_folders_stacks_and_passes():
    """Blocks 0..1 are L_module's layers, 2..3 H_module's (to q8_0's step of the folder's matrices), run in the
    folder's 12 passes' layers, with z_L_init, the embedding scale and the cycle counts from the metadata."""
    model, folder = _gguf("hrm_text_gguf", weights="f32"), _load(HRM.parent / "hrm_text_gguf")
    cfg = model.config
    assert (cfg.num_layers_per_stack, cfg.H_cycles, cfg.L_cycles, cfg.num_hidden_layers, cfg.embedding_scale,
            cfg.attention_bias, cfg.prefix_lm) == (2, 2, 2, 12, 2.0, False, True)
    assert len(model.net.layers) == len(folder.net.layers) == 12
    for a, b in zip(model.net.layers, folder.net.layers):
        assert (a.pre_block is None) == (b.pre_block is None)
        if a.pre_block is not None:
            assert a.pre_block.kind == b.pre_block.kind
            np.testing.assert_array_equal(np.asarray(a.pre_block.z0.a), np.asarray(b.pre_block.z0.a))
        for w in ("q", "k", "v", "o", "attn_gate", "gate", "up", "down"):
            rows = getattr(b, w).shape[0]
            want = np.asarray(getattr(b, w).dequantize(), np.float32).reshape(rows, -1)
            got = np.asarray(getattr(a, w).dequantize(), np.float32).reshape(rows, -1)
            np.testing.assert_allclose(got, want, atol=np.abs(want).max() / 127, rtol=0)
    assert model.net.layers[0].q is model.net.layers[2].q and model.net.layers[4].q is model.net.layers[10].q


def _meta(**changes):
    meta = {"hrm_text.hrm.layers_per_stack": 2, "hrm_text.hrm.h_cycles": 2, "hrm_text.hrm.l_cycles": 2}
    meta.update({f"hrm_text.{k}": v for k, v in changes.items()})
    return {k: v for k, v in meta.items() if v is not None}


@pytest.mark.parametrize("changes, kv, bias, message", [
    ({}, 2, False, "'hrm_text.attention.head_count_kv' \\(2\\) differs from 'hrm_text.attention.head_count' \\(4\\)"),
    ({}, 4, True, "q / k / v biases without the output gate's and o_proj's \\(llama.cpp's hrm_text loads none\\)"),
    (dict(**{"hrm.h_cycles": None}), 4, False, "'hrm_text.hrm.h_cycles' is missing: llama.cpp's hrm_text requires"),
])
def test_gguf_hrm_text_refuses_what_the_family_does_not_run(changes, kv, bias, message):
    from petit.loading.gguf_fam36o5 import _hrm_text
    cfg = {"num_attention_heads": 4, "num_key_value_heads": kv}
    with pytest.raises(ValueError, match=message):
        _hrm_text(_meta(**changes), lambda k: f"hrm_text.{k}", cfg, lambda n: bias)


def test_gguf_without_an_embedding_scale_runs_unscaled_as_llama_cpp():
    from petit.loading.gguf_fam36o5 import _hrm_text
    cfg = {"num_attention_heads": 4, "num_key_value_heads": 4}
    _hrm_text(_meta(), lambda k: f"hrm_text.{k}", cfg, lambda n: False)
    assert (cfg["embedding_scale"], cfg["prefix_lm"], "num_key_value_heads" in cfg) == (1.0, False, False)


def test_gguf_converts_to_a_petit_file_with_the_same_logits(tmp_path):
    from petit.cli import main
    ref = np.load(GGUF_FILE.with_suffix(".npz"))
    assert main(["convert", str(GGUF_FILE), "-o", str(tmp_path / "m.petit"), "--f32"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = petit.load(tmp_path / "m.petit").logits(ref["input_ids"])
    assert _scaled(got, ref["exact_logits"]) <= 1e-5


@pytest.mark.parametrize("weights", [None, "f32", "q4_0"])
def test_petit_verify_passes_on_the_gguf_file(capsys, weights):
    """The engine on the file's weights (as stored q8_0, decoded to f32, requantized to q4_0) equals the float64
    reference (trainer/reference/families/fam36o5.py) on the same weights."""
    from petit.cli import main
    args = ["verify", str(GGUF_FILE), "-n", "4"] + (["--weights", weights] if weights else [])
    assert main(args) == 0, capsys.readouterr().out
