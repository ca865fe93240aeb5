"""Small random-weight models written as .petit files, for tests. Deterministic for a given seed. And the index of
the transformers fixture folders the family tests share."""
import functools
import warnings
from pathlib import Path

import numpy as np

from petit.formats.petit_file import write_petit
from petit.models.families.dense.llama import LlamaConfig, tensor_shapes
from petit.native import ffi, quantize
from petit.tokenizer import bytes_to_unicode

TINY = dict(model_type="llama", vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-5, rope_theta=10000.0,
            rope_interleaved=False, max_position_embeddings=128, tie_word_embeddings=False)


def byte_tokenizer(vocab_size: int) -> dict:
    """256 byte tokens, a few merges, and the ChatML specials; padded with merge tokens up to vocab_size."""
    b2u = bytes_to_unicode()
    vocab = [b2u[b] for b in range(256)]
    merges = []
    for left, right in [("h", "e"), ("l", "l"), ("he", "ll"), ("o", "Ġ"), ("t", "h"), ("Ġ", "w")]:
        merges.append([left, right])
        vocab.append(left + right)
    specials = ["<|im_start|>", "<|im_end|>"]
    vocab += specials
    if len(vocab) > vocab_size:
        raise ValueError("vocab_size too small for the test tokenizer")
    return {"type": "bpe", "vocab": vocab, "merges": merges, "special_tokens": specials, "bos_token": None,
            "eos_token": "<|im_end|>", "unk_token": None, "add_bos": False}


def random_weights(cfg: dict, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    W = {}
    known = {k: v for k, v in cfg.items() if k in LlamaConfig.__dataclass_fields__}   # tests may add unknown keys
    for name, shape in tensor_shapes(LlamaConfig.from_dict(known)).items():
        if name.endswith("norm.weight"):
            W[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            W[name] = (rng.standard_normal(shape) * (0.5 / np.sqrt(shape[-1]))).astype(np.float32)
    W["model.embed_tokens.weight"] *= 20     # embeddings of a useful size
    return W


def write_model(path, cfg: dict | None = None, dtype: str = "f32", seed: int = 0, tokenizer: dict | None = None):
    """Write a random model; returns (cfg, float weights as stored after quantization round trip)."""
    cfg = dict(TINY if cfg is None else cfg)
    W = random_weights(cfg, seed)
    tensors = {}
    for name, w in W.items():
        if w.ndim == 1:
            tensors[name] = ("f32", w.shape, w)
        else:
            tensors[name] = (dtype, w.shape, quantize(w, dtype))
    tok = tokenizer if tokenizer is not None else byte_tokenizer(cfg["vocab_size"])
    meta = {"format": "petit", "config": cfg, "tokenizer": tok, "quantization": {"weights": dtype}}
    if tokenizer is False:
        del meta["tokenizer"]
    write_petit(path, meta, tensors)
    return cfg, W


class ShortRope:
    """Wraps a layer's RoPE so its tables stop short at two positions: the C rope op refuses a step that goes past
    them, which is how the plan and batch tests make a kernel fail inside a layer."""

    def __init__(self, rope):
        self.dim, self.interleaved, self.rope = rope.dim, rope.interleaved, rope

    def tables(self, seq_len):
        cos, sin = self.rope.tables(seq_len)
        return cos[:2], sin[:2]




# transformers fixtures made ahead of their family (tests/fixtures/hf_moe_more): Petit refuses them by name
# (tests/test_hf_parity.py checks it); the parity and verify tests leave them out until the family lands
PENDING_FIXTURES = frozenset()   # issue 30: phimoe (moe_a), jetmoe and deepseek_v4 (the dsv4 group) run
# families whose fixture is another's folder rearranged by the test that uses it: a released Qwen3.5 folder (qwen3_5)
# is qwen3_5_text's model under text_config and model.language_model. names (tests/test_ssm.py builds it)
DERIVED_FIXTURES = {"qwen3_5": "qwen3_5_text",
                    # issue 30, moe_a: hf5_moe_a/qwen3_5_moe holds transformers' wrapper (tests/test_moe_a5.py)
                    "qwen3_5_moe": "qwen3_5_moe_text",
                    # issue 30, the gemma group: tests/test_gemma5.py derives the released (multimodal) folders
                    "gemma3n": "gemma3n_text", "gemma4": "gemma4_text", "gemma4_unified": "gemma4_unified_text",
                    # issue 36, q4exp: hf5_q4exp/qwen4_exp holds transformers' wrapper (tests/test_q4exp5.py)
                    "qwen4_exp": "qwen4_exp_text",
                    # issue 36, vlnew: each text type is run by its wrapper's fixture (hf5_vlnew, tests/test_vlnew5.py)
                    "paddleocr_vl_text": "paddleocr_vl", "glm_ocr_text": "glm_ocr", "hunyuan_vl_text": "hunyuan_vl",
                    "granite4_vision_text": "granite4_vision", "granite_docling_text": "granite_docling",
                    "ernie4_5_vl_moe_text": "ernie4_5_vl_moe", "cosmos3_edge_text": "cosmos3_edge",
                    "molmo2_text": "molmo2", "deepseek_ocr2_text": "deepseek_ocr2",
                    "hy_v4_vl_text": "hy_v4_vl", "kosmos-2": "kosmos_2_text_model",
                    # the qwenvl and newdec groups: likewise (hf5_qwenvl, hf5_newdec)
                    "qwen2_vl_text": "qwen2_vl", "qwen2_5_vl_text": "qwen2_5_vl", "qwen3_vl_text": "qwen3_vl",
                    "qwen3_vl_moe_text": "qwen3_vl_moe", "glm4v_text": "glm4v", "glm4v_moe_text": "glm4v_moe",
                    "step3p5": "step3p7", "muse_glimmer_text": "muse_glimmer",
                    # the Omni text models by their thinkers' fixtures; the full releases derived from those
                    # (tests/test_qwenvl5.py builds them)
                    "qwen2_5_omni_text": "qwen2_5_omni_thinker", "qwen3_omni_moe_text": "qwen3_omni_moe_thinker",
                    "qwen2_5_omni": "qwen2_5_omni_thinker", "qwen3_omni_moe": "qwen3_omni_moe_thinker"}

FIXTURES = Path(__file__).parent / "fixtures"


def case_folders(dirs) -> dict:
    """{case: folder} of every case under the fixture folders `dirs` that has transformers' reference logits
    (reference.npz), the pending ones left out."""
    return {p.name: p for d in dirs for p in sorted(d.iterdir())
            if (p / "reference.npz").is_file() and p.name not in PENDING_FIXTURES}


# the families added with transformers 5 (issue 30 on), one folder per group: tests/fixtures/hf5_<group>/<case>, each
# made by its group's generator script. Every test that runs all families (parity, verify, the app's chat) takes
# them from here, so a new group needs no test edit to be held to the same bounds.
HF5_DIRS = sorted(d for d in FIXTURES.glob("hf5_*") if d.is_dir())
HF5_FOLDERS = case_folders(HF5_DIRS)
# the one warning a multimodal wrapper's folder gives (gemma3, mistral3, llama4: petit/models/blocks/wrapper.py): its tower
# is not run. The tests that load every fixture with warnings as errors let this one through.
TOWER_NOT_RUN = r"config: \w+: the .* tower .* is not run"


@functools.cache
def has_experts(folder) -> bool:
    """Whether the model in `folder` routes tokens to experts in any layer (a mixture of experts, or a hybrid with
    expert layers): those families are held to tests/test_moe.py's routing-aware bounds when quantized."""
    import petit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = petit.load(folder, weights="f32")
    return any(layer.moe is not None for layer in model.net.layers)


def routing_choices(model, T: int) -> list:
    """Each routing layer's choices per token of the last step's T tokens, read from its records: the experts (sorted),
    and the positions or key blocks an indexer attends to (tests/test_moe.py, tests/test_gpu.py compare them)."""
    out = []
    for layer in model.net.layers:
        if layer.moa_router is not None:    # JetMoE's attention experts route too (issue 30, the jetmoe group)
            out.append(layer.moa_last_routing(T))
        if layer.sparse is not None:        # MiniMax-M3's indexer chooses key blocks (issue 36, fam36i)
            out.append(layer.sparse.last_choice(T))
        if layer.moe is not None:
            k = layer.moe.top_k
            sel = np.frombuffer(ffi.buffer(layer.moe._c.sel, T * k * 4), np.int32).reshape(T, k)
            out.append(np.sort(sel, axis=1))
        v4 = getattr(layer, "v4", None)         # DeepSeek-V4's CSA indexer (issue 30, the dsv4 group)
        if v4 is not None and v4.index is not None:
            out.append(v4.index.last_choice(T))
        d = layer.mla.dsa if layer.mla is not None else None
        if d is not None and not d.shared:  # DeepSeek Sparse Attention's indexer routes too: the positions each
            out.append(d.last_choice(T))    # query attends to (issue 30, mla group)
    return out


def load_strict(folder, weights: str = "f32"):
    """petit.load with every warning an error: a fixture loads without any "ignoring ..." report."""
    import petit
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return petit.load(folder, weights=weights)


def write_f32_safetensors(path, tensors: dict) -> None:
    """A float32 safetensors file of `tensors` (name -> array), written without the safetensors package."""
    import json
    import struct
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, "<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def converted_runs_the_same(folder, tmp_path, ids) -> None:
    """`petit convert --f32` of a fixture folder writes a file that loads without a warning and gives the folder's
    logits for `ids` bit for bit (issue 36: one check the group test files share)."""
    from petit.cli import main
    out = Path(tmp_path) / "converted.petit"
    assert main(["convert", str(folder), "-o", str(out), "--f32"]) == 0
    np.testing.assert_array_equal(load_strict(out).logits(ids), load_strict(folder).logits(ids))


def rel_err(got, ref):
    """Each position's worst logit error as a share of that position's reference range."""
    return np.abs(got - ref).max(axis=1) / (ref.max(axis=1) - ref.min(axis=1))


def range_err(got, exact) -> float:
    """The worst logit error over every position as a share of the reference's whole range (the GGUF groups'
    measure against llama.cpp's exact logits)."""
    return float(np.abs(got - exact).max() / (exact.max() - exact.min()))


def q8_0_errors(model, ref) -> tuple[float, float]:
    """A GGUF group's q8_0 file as stored (`model`, its weights q8_0) against llama.cpp's exact logits in `ref` (its
    q8_0.npz), and llama.cpp's own q8_0 run against the same: (Petit's range error, llama.cpp's)."""
    assert model.weight_type == "q8_0"
    return stored_errors(model, ref)


def stored_errors(model, ref) -> tuple[float, float]:
    """A GGUF file as stored, run by Petit, and llama.cpp's own run of it (`ref`: its q8_0.npz), both against
    llama.cpp's exact run on the same weights: (Petit's range error, llama.cpp's)."""
    return range_err(model.logits(ref["input_ids"]), ref["exact_logits"]), range_err(ref["logits"], ref["exact_logits"])


def assert_as_close_as_llama_cpps_own_run(model, ref, gelu_table: bool = False) -> None:
    """stored_errors within 1.5x of llama.cpp's own run; 1e-3 more where llama.cpp's GELU reads a table of f16
    values."""
    err, theirs = stored_errors(model, ref)
    assert err <= 1.5 * theirs + (1e-3 if gelu_table else 0.0), (err, theirs)


def assert_greedy_equals_transformers(model, folder) -> None:
    """Every step of reference.npz's greedy continuation, each token the argmax of the prompt so far (strict: no
    near-tie allowance, unlike tests/test_hf_parity.py's)."""
    ref = np.load(Path(folder) / "reference.npz")
    ids = list(ref["input_ids"])
    for want in ref["greedy"]:
        got = int(np.argmax(model.logits(np.array(ids))[-1]))
        assert got == want
        ids.append(got)


def load_wrapper_saying_the_tower_is_not_run(folder, model_type: str, tol: float = 1e-4):
    """A released multimodal folder whose text model Petit runs (Qwen3.5-MoE's, Qwen4-Exp's): its load says once
    that the vision tower is not run and lists the tower's tensors as unused, and its logits are transformers' whole
    class's (reference_wrapper.npz) on the three prompts within `tol` of the range. Returns the model."""
    import pytest

    import petit
    with pytest.warns(UserWarning) as caught:
        m = petit.load(folder, weights="f32")
    said = [str(w.message) for w in caught]
    assert sum("vision tower (vision_config) is not run" in s for s in said) == 1, said
    assert any(f"ignoring checkpoint tensor(s) the {model_type} family does not use: model.visual." in s for s in said)
    assert m.config.model_type == model_type
    ref = np.load(Path(folder) / "reference_wrapper.npz")
    for p in ("", "long_", "chat_"):
        err = rel_err(m.logits(ref[p + "input_ids"]), ref[p + "logits"])
        assert err.max() <= tol, (p, err.max())
    return m


def assert_a_batch_gives_each_sequence_its_own_logits(model, ids) -> None:
    """A 40-token prefill beside a decode step (after 30 tokens) in one forward_batch: each sequence's logits are
    bit for bit those it gets alone (issue 36's families whose ops run over the step's stacked rows)."""
    alone = []
    for part in (ids[:40], ids[40:41]):
        cache = model.new_cache(64)
        if len(part) == 1:
            model.forward(ids[:30], cache)
        alone.append(model.forward(part, cache, all_logits=True))
    a, b = model.new_cache(64), model.new_cache(64)
    model.forward(ids[:30], b)
    got = model.forward_batch([(ids[:40], a), (ids[40:41], b)], all_logits=True)
    for g, w in zip(got, alone):
        np.testing.assert_array_equal(g, w)


def assert_decoding_and_a_chunked_prefill_equal_the_whole(model, ids) -> None:
    """The logits of `ids` in chunks of 13, and of a 90-token prefill then one token at a time, within 1e-5 of the
    whole sequence's (issue 36's families with a state or a cache of their own)."""
    whole = model.logits(ids)
    assert rel_err(model.logits(ids, chunk=13), whole).max() <= 1e-5
    cache = model.new_cache(len(ids))
    steps = [model.forward(ids[:90], cache)] + [model.forward(ids[i:i + 1], cache) for i in range(90, len(ids))]
    assert rel_err(np.stack(steps), whole[89:]).max() <= 1e-5


def assert_the_plan_equals_the_per_op_path(model, kv: str = "f32") -> None:
    """test_plan.py's chunked and fresh runs: the one-call plan's logits and cache (a HybridCache's list of KV and
    state arrays too) bit for bit the per-op path's."""
    from test_plan import CHUNKS, FRESH, _run
    for chunks in (CHUNKS, FRESH):
        got, c_plan = _run(model, chunks, kv, oracle=False)
        want, c_oracle = _run(model, chunks, kv, oracle=True)
        assert np.isfinite(want).all() and np.array_equal(got, want), chunks
        assert all(np.array_equal(x, y) for x, y in zip(*(list(c.k) + list(c.v) for c in (c_plan, c_oracle))))


def assert_a_converted_file_runs_the_same_numbers(folder, tmp_path) -> None:
    """`petit convert --q8` of a folder, reloaded with every warning an error: the folder's q8_0 logits bit for bit."""
    import petit
    from petit.cli import main
    out = tmp_path / "m.petit"
    assert main(["convert", str(folder), "-o", str(out), "--q8"]) == 0
    ids = np.load(Path(folder) / "reference.npz")["input_ids"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(load_strict(out, "q8_0").logits(ids), petit.load(folder, weights="q8_0").logits(ids))


def renamed_copy(folder, dest, rename=lambda k: k, change=lambda k, a: a, drop=()) -> Path:
    """A copy of a fixture folder in `dest`, its tensors renamed / changed / dropped."""
    import shutil
    from test_moe_a5 import _read_safetensors, _write_safetensors
    d = Path(dest) / Path(folder).name
    shutil.copytree(folder, d)
    raw = _read_safetensors(Path(folder) / "model.safetensors")
    _write_safetensors(d / "model.safetensors", {rename(k): change(k, a) for k, a in raw.items() if k not in drop})
    return d
