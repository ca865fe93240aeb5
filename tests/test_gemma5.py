"""The gemma group of issue 30 (tests/fixtures/hf5_gemma: Gemma 3n and Gemma 4 as transformers 5 writes them): what
tests/test_hf_parity.py, test_verify_families.py and the app's chat test do not already hold for every hf5 fixture.

- Parity at every position of the two other prompts of each fixture: the 140-token one (far past the sliding window
  of 8) and the four-message chat, at f32 within 1e-4 of each position's logit range, as the 35-token prompt is held.
- The forward plan equals the per-op path bit for bit (tests/test_plan.py's check), float32 and int8 caches.
- Gemma 3n's kernels (kernels/altup.c): each against its plain scalar reference (the same bits) and against a
  float64 NumPy form of transformers' formula, at odd sizes.
- Gemma 4's particulars: per-layer heads, keys as values, the double-wide MLPs of the KV-sharing layers,
  layer_scalar, proportional RoPE, and its refusals (routed experts, the assistant draft model).
- The wrappers (`gemma3n`, `gemma4`) warn once that its towers are not run and reports their tensors as unused; the config's
  refusals name what is wrong.
"""
import json
import shutil
import statistics
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.native import Weight, ffi, lib

from test_plan import _assert_same

DIR = Path(__file__).parent / "fixtures" / "hf5_gemma"
FOLDERS = {p.name: p for p in sorted(DIR.iterdir()) if (p / "reference.npz").is_file()}
CASES = sorted(FOLDERS)
F32_TOL = 1e-4


def _load(folder, weights="f32"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return petit.load(folder, weights=weights)


def rel_err(got, ref):
    return np.abs(got - ref).max(axis=1) / (ref.max(axis=1) - ref.min(axis=1))


def _wrapper(root: Path, kind: str = "gemma3n") -> Path:
    """The gemma3n / gemma4 (ForConditionalGeneration) folder of the text case's model, as qwen3_5's is derived from
    qwen3_5_text's: the wrapper's config transformers wrote (<kind>.config.json), the language model's tensors under
    model.language_model. (the head tied), and stand-ins for the towers' tensors, which text never reads."""
    d = root / kind
    shutil.copytree(FOLDERS[kind + "_text"], d)
    shutil.copyfile(DIR / f"{kind}.config.json", d / "config.json")
    raw = (d / "model.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    head, data = json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])
    head = {("model.language_model." + k[len("model."):] if k.startswith("model.") else k): v for k, v in head.items()}
    rng = np.random.default_rng(3)
    for name, shape in (("model.vision_tower.timm_model.conv_stem.conv.weight", [8, 3, 3, 3]),
                        ("model.audio_tower.subsample_conv_projection.input_proj_linear.weight", [16, 32]),
                        ("model.embed_vision.embedding.weight", [8, 64]), ("model.embed_audio.embedding.weight", [8, 64])):
        a = rng.standard_normal(shape).astype(np.float32).tobytes()
        head[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(a)]}
        data += a
    text = json.dumps(head).encode()
    text += b" " * (-len(text) % 8)
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + bytes(data))
    return d


@pytest.fixture(scope="module", params=["gemma3n", "gemma4", "gemma4_unified"])
def wrapper(tmp_path_factory, request):
    return _wrapper(tmp_path_factory.mktemp(request.param), request.param)


def test_the_fixtures_are_there():
    assert CASES == ["gemma3n_llamacpp_text", "gemma3n_text", "gemma4_moe_text", "gemma4_text", "gemma4_unified_text"]
    for kind in ("gemma3n", "gemma4", "gemma4_unified"):
        assert json.loads((DIR / f"{kind}.config.json").read_text())["model_type"] == kind


@pytest.mark.parametrize("prompt", ["", "_long", "_chat"])
@pytest.mark.parametrize("case", CASES)
def test_every_prompt_matches_transformers_at_every_position(case, prompt):
    ref = np.load(FOLDERS[case] / f"reference{prompt}.npz")
    err = rel_err(_load(FOLDERS[case]).logits(ref["input_ids"]), ref["logits"])
    assert err.max() <= F32_TOL, f"{case}{prompt}: position {err.argmax()} off by {err.max():.2e} of the range"


@pytest.mark.parametrize("case", CASES)
def test_greedy_continuation_equals_transformers(case):
    ref = np.load(FOLDERS[case] / "reference.npz")
    model = _load(FOLDERS[case])
    ids = [int(t) for t in ref["input_ids"]]
    cache = model.new_cache(64)
    logits = np.empty((1, model.vocab_size), np.float32)
    model.net.forward(np.array(ids, np.int32), cache, logits)
    got = []
    for _ in range(len(ref["greedy"])):
        got.append(int(logits[0].argmax()))
        model.net.forward(np.array(got[-1:], np.int32), cache, logits)
    assert got == ref["greedy"].tolist()


@pytest.mark.parametrize("kv_type", ["f32", "int8"])
@pytest.mark.parametrize("weights", ["f32", "q8_0"])
@pytest.mark.parametrize("case", CASES)
def test_the_plan_equals_the_per_op_path(case, weights, kv_type):
    _assert_same(_load(FOLDERS[case], weights), kv_type)


def test_the_model_reads_each_layers_pieces():
    net = _load(FOLDERS["gemma3n_text"]).net
    assert [L.window for L in net.layers] == [8, 8, 0, 8, 0]
    assert [L.rope.base for L in net.layers] == [1e4, 1e4, 1e6, 1e4, 1e6]
    assert [L.kv_source for L in net.layers] == [0, 1, 2, 1, 2]           # layers 3, 4 share layer 1's and 2's
    assert [L.k is None for L in net.layers] == [False, False, False, True, True]
    assert [L.up.shape[0] for L in net.layers] == [96, 64, 96, 32, 96]
    assert net.layers[0].sparsity == net.layers[1].sparsity == pytest.approx(1.6448536, abs=1e-6)
    assert [L.sparsity for L in net.layers[2:]] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("prompt", ["", "_long", "_chat"])
def test_the_wrapper_runs_its_language_model(wrapper, prompt):
    ref = np.load(wrapper / f"reference{prompt}.npz")
    err = rel_err(_load(wrapper).logits(ref["input_ids"]), ref["logits"])
    assert err.max() <= F32_TOL, f"gemma3n{prompt}: position {err.argmax()} off by {err.max():.2e} of the range"


def test_the_wrapper_warns_once_and_reports_the_towers_tensors(wrapper, tmp_path):
    kind = wrapper.name
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = petit.load(wrapper, weights="f32")
    said = [str(w.message) for w in caught]
    towers = [m for m in said if "not run" in m]
    assert len(towers) == 1 and "vision_config / audio_config" in towers[0], said
    assert not any("ignoring unknown key" in m for m in said), said
    unused = [m for m in said if "does not use" in m]
    assert len(unused) == 1 and "model.audio_tower.subsample_conv_projection" in unused[0], said
    ids = np.load(wrapper / "reference.npz")["input_ids"]
    assert np.array_equal(model.logits(ids), _load(FOLDERS[kind + "_text"]).logits(ids))
    out = tmp_path / "g.petit"                          # converted: a file of the language model
    from petit.loading.convert import convert
    with pytest.warns(UserWarning):
        convert(wrapper, out, "f32").close()
    again = petit.load(out)
    assert again.config.model_type == kind and np.array_equal(again.logits(ids), model.logits(ids))


def _config(case):
    return json.loads((FOLDERS[case] / "config.json").read_text())


@pytest.mark.parametrize("change, message", [
    ({"num_kv_shared_layers": 3}, r"layer 2 \(full_attention\) shares the keys and values of an earlier "
                                  r"full_attention layer, but layers 0..1 have none"),
    ({"activation_sparsity_pattern": [0.95, 0.0]}, "activation_sparsity_pattern must list 5 values in"),
    ({"altup_active_idx": 4}, r"altup_active_idx must be in 0..3"),
    ({"intermediate_size": [128, 96]}, "intermediate_size must be a positive integer or a list of 5"),
    ({"attention_bias": True}, "attention_bias=true is not supported by gemma3n"),
])
def test_gemma3n_refuses_what_it_cannot_run(tmp_path, change, message):
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["gemma3n_text"], d)
    (d / "config.json").write_text(json.dumps(dict(_config("gemma3n_text"), **change)))
    with pytest.raises(ValueError, match=message):
        petit.load(d, weights="f32")


@pytest.mark.parametrize("case", ["gemma3n_text", "gemma4_text"])
def test_a_batch_gives_each_sequence_the_bits_it_gets_alone(case):
    """Several sequences in one step (tests/test_batch.py's check): the per-layer inputs read each token's id, the
    AltUp streams and the shared KV slots each sequence's own rows; the per-op path runs the same batch."""
    from test_batch import _assert_same_caches, _batched, _model_batch, _oracle_batch, _solo, _tokens
    model = _load(FOLDERS[case], "q8_0")
    tokens = _tokens(model)
    for kv_type in ("f32", "int8"):
        alone = _solo(model, tokens, kv_type)
        for run in (_model_batch, _oracle_batch):
            for (want, c_alone), (got, c_batch) in zip(alone, _batched(model, tokens, kv_type, run)):
                assert np.isfinite(want).all() and np.array_equal(got, want)
                _assert_same_caches(c_batch, c_alone)


def test_gemma4_reads_each_layers_pieces():
    net = _load(FOLDERS["gemma4_text"]).net
    assert [L.window for L in net.layers] == [8, 8, 0, 8, 0]
    assert [L.heads for L in net.layers] == [(16, 2), (16, 2), (32, 1), (16, 2), (32, 1)]
    assert [L.kv_source for L in net.layers] == [0, 1, 2, 1, 2]
    assert [(L.k is None, L.v is None, L.k_eq_v) for L in net.layers] == [
        (False, False, False), (False, False, False), (False, True, True), (True, True, False), (True, True, True)]
    assert [L.up.shape[0] for L in net.layers] == [64, 64, 64, 128, 128]      # the shared layers' double-wide MLPs
    assert all(0.6 <= L.scalar <= 1.4 and L.scalar != 1.0 for L in net.layers)
    full = net.layers[2].rope
    inv, _ = full.inv_freq(8)
    assert full.dim == 32 and np.count_nonzero(inv) == 4 and inv[0] == 1.0     # 0.25 x 32 / 2 pairs turn
    assert (net.arch.head_dim, net.arch.num_key_value_heads) == (32, 2)       # the cache slots fit every layer


def test_gemma4_moe_reads_its_experts_folded_as_the_kernel_runs_them():
    """Each expert split from the 3-D gate_up_proj / down_proj, down x its per_expert_scale; the router folded onto
    the experts' normed input and kept float32 at q8_0 (a router stays unquantized)."""
    from petit.formats.checkpoint import open_checkpoint
    folder = FOLDERS["gemma4_moe_text"]
    ckpt = open_checkpoint(folder)
    sd = {n: ckpt.f32(n) for n in ckpt.names() if ".layers.1." in n}
    net = _load(folder, "q8_0").net
    moe = net.layers[1].moe
    assert moe.top_k == 2 and len(moe.gate) == 4 and moe.router.dtype == "f32"
    p = "model.layers.1."
    k = sd[p + "router.scale"].astype(np.float64) / 8.0 / sd[p + "pre_feedforward_layernorm_2.weight"]
    want = sd[p + "router.proj.weight"] * k[None, :]
    assert np.allclose(moe.router.dequantize(), want, rtol=1e-6, atol=1e-7)
    f32 = _load(folder).net.layers[1].moe
    down3 = sd[p + "experts.down_proj"][3] * sd[p + "router.per_expert_scale"][3]
    assert np.allclose(f32.down[3].dequantize(), down3, rtol=1e-6, atol=0)
    assert np.array_equal(f32.up[2].dequantize(), sd[p + "experts.gate_up_proj"][2, 32:])


def test_gemma4_unified_has_no_per_layer_inputs():
    net = _load(FOLDERS["gemma4_unified_text"]).net
    assert net.ple_width == 0 and all(L.ple_gate is None for L in net.layers)
    assert [L.heads for L in net.layers] == [(16, 2), (16, 2), (32, 1), (16, 2), (32, 1)]
    assert [L.kv_source for L in net.layers] == [0, 1, 2, 1, 2]


def _config4():
    return json.loads((FOLDERS["gemma4_text"] / "config.json").read_text())


@pytest.mark.parametrize("change, message", [
    ({"enable_moe_block": True, "num_experts": 4, "top_k_experts": 5, "moe_intermediate_size": 32},
     r"top_k_experts 5 is above num_experts 4"),
    ({"num_kv_shared_layers": 5}, r"a draft model \(Gemma 4's assistant\) that reads its target model's KV cache"),
    ({"per_layer_config": {"2": {"head_dim": 32, "num_key_value_heads": 1, "sliding_window": 4}}},
     r"per_layer_config\['2'\] must give a layer in 0..4 head_dim / num_key_value_heads"),
    ({"rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                          "full_attention": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6}}},
     r"rope_parameters.full_attention: a 'yarn' RoPE with factor is not supported by gemma4"),
    ({"vocab_size_per_layer_input": 256}, "transformers reads embed_tokens_per_layer at every input id"),
    ({"layer_types": ["sliding_attention"] * 5}, "the last layer must be full_attention"),
])
def test_gemma4_refuses_what_it_cannot_run(tmp_path, change, message):
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["gemma4_text"], d)
    (d / "config.json").write_text(json.dumps(dict(_config4(), **change)))
    with pytest.raises(ValueError, match=message):
        petit.load(d, weights="f32")


# ---- GGUF: llama.cpp's own conversion of gemma4_text (tests/fixtures/gguf5_gemma, its README says how) ----

GGUF = Path(__file__).parent / "fixtures" / "gguf5_gemma"
GGUF_TOL = 1e-3     # llama.cpp's GELU reads an f16 table: 3.8e-4 of the range from transformers, 3.9e-4 from Petit


def _gguf(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # read without any "ignoring ..." report
        return petit.load(GGUF / "gemma4_text" / "q8_0.gguf", **kw)


def _scaled(got, exact):
    return np.abs(got - exact).max() / (exact.max() - exact.min())


def test_gguf_gemma4_decoded_to_float_is_llama_cpps_run_but_its_gelu_table():
    ref = np.load(GGUF / "gemma4_text" / "q8_0.npz")
    got = _gguf(weights="f32").logits(ref["input_ids"])
    assert _scaled(got, ref["exact_logits"]) <= GGUF_TOL
    assert np.array_equal(got.argmax(1), ref["exact_logits"].argmax(1))


def test_gguf_gemma4_as_stored_is_as_close_as_llama_cpps_own_run():
    ref = np.load(GGUF / "gemma4_text" / "q8_0.npz")
    model = _gguf()
    assert model.weight_type == "q8_0"
    err, theirs = _scaled(model.logits(ref["input_ids"]), ref["exact_logits"]), _scaled(ref["logits"],
                                                                                         ref["exact_logits"])
    assert err <= 1.5 * theirs, (err, theirs)


def test_gguf_gemma4_greedy_tokens_are_llama_cpps():
    ref = np.load(GGUF / "gemma4_text" / "q8_0.npz")
    model = _gguf(weights="f32")
    cache = model.new_cache()
    logits = model.forward(ref["input_ids"], cache)
    out = []
    for _ in range(len(ref["exact_greedy"])):
        out.append(int(np.argmax(logits)))
        logits = model.forward([out[-1]], cache)
    assert out == ref["exact_greedy"].tolist()


def test_gguf_gemma4_reads_what_the_folder_holds():
    """The same layers as the Hugging Face folder: heads, KV sources, keys as values, double-wide MLPs, the scalars
    (layer_output_scale), and the full layers' RoPE as llama.cpp's rope_freqs divisors (4 of 16 pairs turn)."""
    net, hf = _gguf(weights="f32").net, _load(FOLDERS["gemma4_text"]).net
    for a, b in zip(net.layers, hf.layers):
        assert (a.heads, a.kv_source, a.k_eq_v, a.window, a.up.shape) == (b.heads, b.kv_source, b.k_eq_v, b.window,
                                                                         b.up.shape)
        assert a.scalar == b.scalar and (a.v is None) == (b.v is None) and (a.k is None) == (b.k is None)
    inv, _ = net.layers[2].rope.inv_freq(8)
    want, _ = hf.layers[2].rope.inv_freq(8)
    assert np.array_equal(inv[:4], want[:4]) and (inv[4:] < 1e-30).all() and (want[4:] == 0).all()
    assert net.ple_width == hf.ple_width == 32


# ---- GGUF: llama.cpp's own conversion of gemma3n_llamacpp_text (its gemma3n architecture, with the shapes llama.cpp
# hard-codes: 256 per-layer inputs a layer, LAuReL rank 64, sparsity in layers 0..9, keys and values in 0..19) ----

G3N = GGUF / "gemma3n_llamacpp_text"
# llama.cpp's GELU reads an f16 table: Petit reading the file decoded to float32 is 2.0e-4 of the range from
# llama.cpp's exact run (every argmax equal); 1e-3 allowed as for gemma4 (5 times the measured value)
G3N_TOL = 1e-3


def _g3n(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # read without any "ignoring ..." report
        return petit.load(G3N / "q8_0.gguf", **kw)


def test_gguf_gemma3n_decoded_to_float_is_llama_cpps_run_but_its_gelu_table():
    ref = np.load(G3N / "q8_0.npz")
    got = _g3n(weights="f32").logits(ref["input_ids"])
    assert _scaled(got, ref["exact_logits"]) <= G3N_TOL
    assert np.array_equal(got.argmax(1), ref["exact_logits"].argmax(1))


def test_gguf_gemma3n_as_stored_is_as_close_as_llama_cpps_own_run():
    ref = np.load(G3N / "q8_0.npz")
    model = _g3n()
    assert model.weight_type == "q8_0"
    err, theirs = _scaled(model.logits(ref["input_ids"]), ref["exact_logits"]), _scaled(ref["logits"],
                                                                                         ref["exact_logits"])
    assert err <= 1.5 * theirs, (err, theirs)


def test_gguf_gemma3n_greedy_tokens_are_llama_cpps():
    ref = np.load(G3N / "q8_0.npz")
    model = _g3n(weights="f32")
    cache = model.new_cache()
    logits = model.forward(ref["input_ids"], cache)
    out = []
    for _ in range(len(ref["exact_greedy"])):
        out.append(int(np.argmax(logits)))
        logits = model.forward([out[-1]], cache)
    assert out == ref["exact_greedy"].tolist()


def test_gguf_gemma3n_reads_what_the_folder_holds_but_llama_cpps_sparsity_cutoff():
    """The same layers, streams and per-layer inputs as the Hugging Face folder; the sparse layers' multiplier is
    llama.cpp's 1.6448533 over the unbiased std, i.e. x sqrt(64 / 63) over the biased one transformers takes."""
    net, hf = _g3n(weights="f32").net, _load(FOLDERS["gemma3n_llamacpp_text"]).net
    assert (net.n_streams, net.ple_width, net.laurel_rank) == (hf.n_streams, hf.ple_width, hf.laurel_rank) == \
        (4, 256, 64)
    for a, b in zip(net.layers, hf.layers, strict=True):
        assert (a.kv_source, a.window, a.up.shape) == (b.kv_source, b.window, b.up.shape)
        assert b.sparsity == pytest.approx(1.6448536, abs=1e-6)
        assert a.sparsity == pytest.approx(1.6448533535 * np.sqrt(64 / 63), abs=1e-6)


def _g3n_meta(n=22, **change):
    meta = {"gemma3n.altup.num_inputs": 4, "gemma3n.altup.active_idx": 0,
            "gemma3n.activation_sparsity_scale": np.array([1.6448536] * 10 + [0.0] * (n - 10), np.float32),
            "gemma3n.attention.shared_kv_layers": max(0, n - 20),
            "gemma3n.attention.sliding_window_pattern": np.array([(i + 1) % 5 != 0 for i in range(n)]),
            "gemma3n.attention.sliding_window": 512, "gemma3n.embedding_length_per_layer_input": 256,
            "gemma3n.final_logit_softcapping": 30.0}
    meta.update({f"gemma3n.{k}": v for k, v in change.items()})
    return meta


def _g3n_cfg(meta, n=22):
    from petit.loading.gguf_gemma5 import _gemma3n
    cfg = {"num_hidden_layers": n, "intermediate_size": 8192, "vocab_size": 320}
    _gemma3n(meta, lambda k: f"gemma3n.{k}", cfg, lambda name: True)
    return cfg


def test_gguf_gemma3n_config_is_llama_cpps_hard_coded_one():
    """Past 20 layers llama.cpp's KV rule is transformers' sharing; past 10 no sparsity."""
    cfg = _g3n_cfg(_g3n_meta())
    assert cfg["num_kv_shared_layers"] == 2 and cfg["activation_sparsity_pattern"][10:] == [0.0] * 12
    assert statistics.NormalDist().inv_cdf(cfg["activation_sparsity_pattern"][0]) == \
        pytest.approx(1.6448533535 * np.sqrt(8192 / 8191), rel=1e-9)


@pytest.mark.parametrize("change, message", [
    ({"activation_sparsity_scale": np.array([1.6448536] * 12 + [0.0] * 10, np.float32)}, "first 10 layers"),
    ({"attention.shared_kv_layers": 5}, "first 20 layers"),
    ({"attention.sliding_window_pattern": np.array([True] * 22)}, "not sliding then full"),
    ({"altup.num_inputs": 2}, "4 AltUp streams"),
])
def test_gguf_gemma3n_refuses_a_file_llama_cpp_would_run_otherwise(change, message):
    with pytest.raises(ValueError, match=message):
        _g3n_cfg(_g3n_meta(**change))


# ---- the kernels, at odd sizes ----

def _fp(a):
    return ffi.cast("float *", ffi.from_buffer(a))


def _altup(rng, n, D, stride, active, scale=True):
    keep = {"router_norm": 1 + 0.2 * rng.standard_normal(D), "router": rng.standard_normal((n, D)) / np.sqrt(D),
            "pred": rng.standard_normal((n * n, n)), "corr": rng.standard_normal((n, n)),
            "out_scale": 1 + 0.2 * rng.standard_normal(D)}
    keep = {k: np.ascontiguousarray(v, np.float32) for k, v in keep.items()}
    r = ffi.new("pt_altup *")
    r.n, r.hidden, r.stride, r.active, r.eps = n, D, stride, active, 1e-6
    r.router_norm, r.router, r.pred, r.corr = (_fp(keep[k]) for k in ("router_norm", "router", "pred", "corr"))
    r.out_scale = _fp(keep["out_scale"]) if scale else ffi.NULL
    return r, keep


def _modalities(x, k, D):
    x = x.astype(np.float64)
    r = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * k["router_norm"] / D
    return np.tanh(r @ k["router"].T.astype(np.float64))


@pytest.mark.parametrize("n, D, T, active", [(4, 37, 5, 0), (3, 19, 1, 2), (5, 65, 3, 1)])
def test_altup_predict_and_correct_kernels(n, D, T, active):
    rng = np.random.default_rng(n * 100 + D)
    cap = T + 2                                          # streams `cap` rows apart, as the scratch holds them
    rec, k = _altup(rng, n, D, cap * D, active)
    x = np.zeros((n, cap, D), np.float32)
    x[:, :T] = rng.standard_normal((n, T, D))
    outs = []
    for fn in (lib.pt_altup_predict, lib.pt_altup_predict_ref):
        pred, act = np.zeros_like(x), np.zeros((T, D), np.float32)
        assert fn(rec, _fp(x), T, _fp(pred), _fp(act)) == 0
        outs.append((pred, act))
    assert np.array_equal(outs[0][0], outs[1][0]) and np.array_equal(outs[0][1], outs[1][1])
    pred, act = outs[0]
    m = _modalities(x[active, :T], k, D)
    c = (m @ k["pred"].T.astype(np.float64)).reshape(T, n, n)
    want = np.stack([x[j, :T] + sum(c[:, j, i][:, None] * x[i, :T] for i in range(n)) for j in range(n)])
    assert np.abs(pred[:, :T] - want).max() <= 1e-5 * np.abs(want).max()
    assert np.array_equal(act, pred[active, :T])

    y = rng.standard_normal((T, D)).astype(np.float32)
    outs = []
    for fn in (lib.pt_altup_correct, lib.pt_altup_correct_ref):
        new, scaled = np.zeros_like(x), np.zeros((T, D), np.float32)
        assert fn(rec, _fp(pred), _fp(y), T, _fp(new), _fp(scaled)) == 0
        outs.append((new, scaled))
    assert np.array_equal(outs[0][0], outs[1][0]) and np.array_equal(outs[0][1], outs[1][1])
    new, scaled = outs[0]
    cc = _modalities(y, k, D) @ k["corr"].T.astype(np.float64) + 1.0
    want = np.stack([(y - pred[active, :T]) * cc[:, j][:, None] + pred[j, :T] for j in range(n)])
    assert np.abs(new[:, :T] - want).max() <= 1e-5 * np.abs(want).max()
    assert np.allclose(scaled, new[active, :T] * k["out_scale"], rtol=1e-6, atol=0)
    bad, _ = _altup(rng, 17, D, cap * D, 0)
    assert lib.pt_altup_predict(bad, _fp(x), T, _fp(pred), ffi.NULL) == -1


@pytest.mark.parametrize("dtype", ["f32", "q8_0"])
@pytest.mark.parametrize("L, P, T, V", [(4, 8, 7, 11), (3, 13, 2, 5)])
def test_per_layer_input_kernel(L, P, T, V, dtype):
    rng = np.random.default_rng(L * P)
    cols = L * P
    table = rng.standard_normal((V, cols)).astype(np.float32)
    if dtype == "q8_0" and cols % 32:
        pytest.skip("q8_0 rows need whole 32-value blocks")
    W = Weight.from_float(table, dtype)
    ids = np.array(rng.integers(0, V + 4, T), np.int32)             # some outside the table: row 0
    proj = rng.standard_normal((T, cols)).astype(np.float32)
    w = (1 + 0.2 * rng.standard_normal(P)).astype(np.float32)
    cap = T + 1
    outs = []
    for fn in (lib.pt_ple, lib.pt_ple_ref):
        y, row = np.zeros((L, cap, P), np.float32), np.zeros(cols, np.float32)
        assert fn(W.c, ffi.cast("int32_t *", ffi.from_buffer(ids)), T, _fp(proj), L, P, _fp(w), 1e-6, 0.125, 2.5,
                  0.70710677, _fp(row), _fp(y), cap * P) == 0
        outs.append(y)
    assert np.array_equal(outs[0], outs[1])
    dec = W.dequantize().astype(np.float64)
    p = proj.astype(np.float64).reshape(T, L, P) * 0.125
    normed = p / np.sqrt((p * p).mean(-1, keepdims=True) + 1e-6) * w
    want = (normed + dec[np.where(ids < V, ids, 0)].reshape(T, L, P) * 2.5) * 0.70710677
    assert np.abs(outs[0][:, :T].transpose(1, 0, 2) - want).max() <= 1e-5 * np.abs(want).max()


@pytest.mark.parametrize("width, T", [(37, 3), (129, 1), (5, 4)])
def test_gemma_rows_kernel(width, T):
    rng = np.random.default_rng(width)
    streams, cap = 3, T + 2
    x = rng.standard_normal((streams, cap, width)).astype(np.float32)
    y0 = (rng.standard_normal((T, width)) * 3).astype(np.float32)
    mult = float(np.float32(statistics.NormalDist().inv_cdf(0.95)))
    y64, x64 = y0.astype(np.float64), x[0, :T].astype(np.float64)
    cut = y64.mean(-1, keepdims=True) + y64.std(-1, keepdims=True) * mult
    mag = np.sqrt((x64 ** 2).mean(-1, keepdims=True)) / np.sqrt(np.maximum((y64 ** 2).mean(-1, keepdims=True), 1e-5))
    want = {0: np.maximum(y64 - cut, 0), 1: y64 * mag, 2: (y64 + x64) / np.sqrt(2),
            3: x[:, :T].astype(np.float64).mean(0), 4: y64 * 0.8125}
    scale = {0: mult, 1: 1.0, 2: float(np.sqrt(2)), 3: 1.0, 4: 0.8125}
    for mode in range(5):
        outs = []
        for fn in (lib.pt_gemma_rows, lib.pt_gemma_rows_ref):
            y = y0.copy()
            assert fn(mode, _fp(y), _fp(x), T, width, scale[mode], streams, cap * width) == 0
            outs.append(y)
        assert np.array_equal(outs[0], outs[1]), mode
        assert np.abs(outs[0] - want[mode]).max() <= 1e-5 * max(np.abs(want[mode]).max(), 1e-3), mode
        if mode == 0 and width > 30:        # a top-k: most values cut to 0, a few kept
            assert 0 < (outs[0] > 0).sum() < outs[0].size / 2
    y = y0.copy()
    assert lib.pt_gemma_rows(5, _fp(y), _fp(x), T, width, 1.0, 1, 0) == -1
    assert lib.pt_gemma_rows(3, _fp(y), _fp(x), T, width, 1.0, 0, 0) == -1
