"""The Llama forward pass against a float64 NumPy forward (tests/oracles.py), the decode cache, and loading.

Tolerances: f32 weights: |logit error| <= 1e-4 (float32 rounding over two layers). q8_0 / q4_0 weights: the oracle
runs on the same dequantized weights and rounds each matmul input to q8 blocks as the engine does, so the error
is float32 rounding plus a rare flipped activation rounding: <= 2e-3 of the largest |logit|. Cache reuse must
reproduce a full prefill to 1e-5.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import petit
from petit.formats.petit_file import read_petit, write_petit
from petit.native import dequantize

import models
import oracles

VARIANTS = {
    "gqa": {},
    "tied": {"tie_word_embeddings": True},
    "mha_interleaved": {"num_key_value_heads": 4, "rope_interleaved": True, "rope_theta": 500.0},
    "odd_sizes": {"hidden_size": 96, "intermediate_size": 160, "num_attention_heads": 6, "num_key_value_heads": 3,
                  "head_dim": 16, "num_hidden_layers": 3},
}


def _stored_weights(model) -> dict:
    """The weights exactly as the file stores them, decoded to float64 (norms as they are)."""
    f = model._source
    return {n: dequantize(f.raw(n), i.dtype, i.shape).astype(np.float64) if len(i.shape) == 2
            else f.array(n).astype(np.float64) for n, i in f.tensors.items()}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", ["f32", "f16", "q8_0", "q4_0"])
def test_logits_match_the_numpy_forward(tmp_path, variant, dtype):
    cfg = dict(models.TINY, **VARIANTS[variant])
    models.write_model(tmp_path / "m.petit", cfg, dtype=dtype, seed=len(variant))
    model = petit.load(tmp_path / "m.petit")
    ids = model.tokenizer.encode("hello world, the model reads this and says what comes next")
    got = model.logits(ids)
    assert got.shape == (len(ids), cfg["vocab_size"]) and got.dtype == np.float32
    quantized = dtype in ("q8_0", "q4_0")
    ref = oracles.llama_logits(_stored_weights(model), cfg, ids, quantized_acts=quantized)
    err = np.abs(got - ref).max()
    # quantized: the oracle rounds the activations to int8 as the engine does, but from float64 sums; where an
    # engine float32 sum lands an ulp on the other side of a rounding boundary, one int8 activation moves a step and
    # the logits follow by a few 1e-3 of their scale (worst seen: 3.4e-3, mha_interleaved q4_0 on avx2; 0 on most).
    # A real defect (a wrong RoPE, norm or block) moves them by tenths to whole units.
    bound = 1e-2 * np.abs(ref).max() if quantized else 1e-4
    assert err <= bound, f"{variant} {dtype}: max |error| {err:.3g} > {bound:.3g}"
    assert (got.argmax(axis=1) == ref.argmax(axis=1)).mean() >= 0.95


@pytest.mark.parametrize("dtype", ["f32", "q4_0"])
def test_decode_with_the_cache_equals_a_full_prefill(tmp_path, dtype):
    models.write_model(tmp_path / "m.petit", dtype=dtype)
    model = petit.load(tmp_path / "m.petit")
    ids = model.tokenizer.encode("one token at a time, then all of them at once")
    full = model.logits(ids)
    cache = model.new_cache(64)
    rows = [model.forward(ids[:7], cache, all_logits=True)]
    rows += [model.forward([t], cache)[None] for t in ids[7:]]
    np.testing.assert_allclose(np.concatenate(rows), full, rtol=0, atol=1e-5)
    # rewinding and replaying the tail reproduces the same rows
    cache.rewind(10)
    np.testing.assert_allclose(model.forward(ids[10:], cache, all_logits=True), full[10:], rtol=0, atol=1e-5)
    # chunked prefill (as logits() does for long inputs) changes nothing
    np.testing.assert_allclose(model.logits(ids, chunk=5), full, rtol=0, atol=1e-5)


@pytest.mark.parametrize("dtype", ["f32", "q8_0"])
def test_a_long_prompt_runs_in_pieces_with_the_bits_of_one_step(tmp_path, monkeypatch, dtype):
    """Model.forward runs a prompt longer than PREFILL_CHUNK in pieces (bounded scratch, so resident memory stays
    near weights + KV cache): the last logits and the cache are bit for bit those of one step, and an error in a
    later piece leaves the cache where it was."""
    models.write_model(tmp_path / "m.petit", dtype=dtype)
    model = petit.load(tmp_path / "m.petit")
    ids = model.tokenizer.encode("a prompt long enough to run in three pieces of seven tokens")
    assert len(ids) > 14
    whole = model.new_cache(64)
    want = model.forward(ids, whole)                 # one step: the default piece is 512 tokens
    monkeypatch.setattr(petit.model, "PREFILL_CHUNK", 7)
    pieces = model.new_cache(64)
    np.testing.assert_array_equal(model.forward(ids, pieces), want)
    assert pieces.pos == whole.pos == len(ids)
    np.testing.assert_array_equal(pieces.k[:, :, :len(ids)], whole.k[:, :, :len(ids)])
    np.testing.assert_array_equal(pieces.v[:, :, :len(ids)], whole.v[:, :, :len(ids)])
    # a bad id in the last piece: the error names it, and the two pieces before it are forgotten
    with pytest.raises(ValueError, match="out of range"):
        model.forward(ids[:16] + [10 ** 6], pieces)
    assert pieces.pos == len(ids)
    # a prompt that does not fit is refused whole, as before
    with pytest.raises(ValueError, match="context full"):
        model.forward(ids + ids, model.new_cache(len(ids)))


def test_logits_do_not_touch_a_generation_in_progress(tmp_path):
    models.write_model(tmp_path / "m.petit")
    model = petit.load(tmp_path / "m.petit")
    cache = model.new_cache(32)
    before = model.forward([1, 2, 3], cache)
    model.logits([9, 9, 9, 9])
    assert cache.pos == 3
    cache.rewind(2)
    np.testing.assert_array_equal(model.forward([3], cache), before)


def test_generation_is_greedy_by_default_and_stops_at_eos(tmp_path):
    models.write_model(tmp_path / "m.petit")
    model = petit.load(tmp_path / "m.petit")
    ids = model.tokenizer.encode("hello")
    steps = list(petit.generate_tokens(model, ids, max_tokens=12))
    assert len(steps) == 12 and steps[-1].finish_reason == "length"
    seq = list(ids)
    for s in steps:                  # each token is the argmax of the logits of the sequence so far
        assert s.token == int(model.logits(seq)[-1][: model.tokenizer.vocab_size].argmax())
        seq.append(s.token)
    tokens = [s.token for s in steps]
    i = next(i for i in range(1, 12) if tokens[i] not in tokens[:i])      # a token not generated before
    stopped = list(petit.generate_tokens(model, ids, max_tokens=12, stop_ids=[tokens[i]]))
    assert [s.token for s in stopped] == tokens[:i + 1] and stopped[-1].finish_reason == "stop"


def test_weights_converted_at_load_equal_a_file_stored_that_way(tmp_path):
    models.write_model(tmp_path / "f32.petit", dtype="f32")
    models.write_model(tmp_path / "q8.petit", dtype="q8_0")
    ids = [5, 6, 7, 8]
    converted = petit.load(tmp_path / "f32.petit", weights="q8_0")
    assert converted.weight_type == "q8_0"
    np.testing.assert_array_equal(converted.logits(ids), petit.load(tmp_path / "q8.petit").logits(ids))


def _rewrite(src, dst, meta_fn=None, tensors_fn=None):
    f = read_petit(src)
    meta = dict(f.metadata)
    tensors = {n: (i.dtype, i.shape, np.array(f.raw(n))) for n, i in f.tensors.items()}
    f.close()
    if meta_fn:
        meta_fn(meta)
    if tensors_fn:
        tensors_fn(tensors)
    write_petit(dst, meta, tensors)


@pytest.mark.parametrize("change,message", [
    (lambda m, t: m["config"].update(model_type="frobnicator"),
     r"unsupported model_type 'frobnicator': supported model types are afmoe, apertus, ([\w-]+, )+bloom, ([\w-]+, )+"
     r"llama, "),
    (lambda m, t: m["config"].update(model_type="baichuan"),
     r"unsupported model_type 'baichuan'; the closest family Petit runs is llama \(baichuan differs: fused W_pack, "
     r"ALiBi in the 13B\): supported model types are afmoe, apertus, "),
    (lambda m, t: m["config"].update(model_type="qwen3moe"),
     r"unsupported model_type 'qwen3moe'; the closest family Petit runs is qwen3_moe: supported model types are "),
    (lambda m, t: m["config"].update(rope_scaling={"type": "magic", "factor": 4.0}),
     r"rope_scaling type 'magic' is not supported \(supported: default, linear, dynamic, llama3, yarn, longrope\)"),
    (lambda m, t: m["config"].update(rope_scaling={"rope_type": "yarn", "factor": 4.0, "warp": 2}),
     r"rope_scaling yarn: unsupported key\(s\) warp"),
    (lambda m, t: m["config"].update(num_key_value_heads=3),
     r"num_attention_heads 4 is not divisible by num_key_value_heads 3"),
    (lambda m, t: m["config"].pop("hidden_size"), r"missing required field\(s\) hidden_size"),
    (lambda m, t: m["config"].update(num_key_value_heads=0), r"num_key_value_heads must be a positive integer, got 0"),
    (lambda m, t: m["config"].update(rope_theta="10000"), r"rope_theta must be a positive number, got '10000'"),
    (lambda m, t: m["config"].update(rms_norm_eps=-1.0), r"rms_norm_eps must be a positive number, got -1.0"),
    (lambda m, t: m["config"].update(tie_word_embeddings="no"), r"tie_word_embeddings must be true or false"),
    (lambda m, t: t.pop("model.layers.1.mlp.up_proj.weight"), r"tensor 'model.layers.1.mlp.up_proj.weight' is missing"),
    (lambda m, t: t.update({"model.norm.weight": ("f32", (32,), np.zeros(32, np.float32))}),
     r"tensor 'model.norm.weight' has shape \(32,\), expected \(64,\)"),
    (lambda m, t: t.update({"extra.weight": ("f32", (4,), np.zeros(4, np.float32))}), r"unexpected tensor\(s\) extra.weight"),
    (lambda m, t: m.pop("config"), r"'config' is missing"),
])
def test_bad_model_files_are_clear_errors(tmp_path, change, message):
    models.write_model(tmp_path / "good.petit")
    state = {}

    def meta_fn(m):
        state["m"] = m

    def tensors_fn(t):
        change(state["m"], t)

    _rewrite(tmp_path / "good.petit", tmp_path / "bad.petit", meta_fn=meta_fn, tensors_fn=tensors_fn)
    with pytest.raises(ValueError, match=message) as e:
        petit.load(tmp_path / "bad.petit")
    assert "bad.petit" in str(e.value)


def test_unknown_config_keys_are_reported(tmp_path):
    models.write_model(tmp_path / "good.petit")
    _rewrite(tmp_path / "good.petit", tmp_path / "m.petit", meta_fn=lambda m: m["config"].update(frobnicate=1))
    with pytest.warns(UserWarning, match="ignoring unknown key\\(s\\) frobnicate"):
        model = petit.load(tmp_path / "m.petit")
    assert model.config.unknown_keys == ["frobnicate"]


def test_bad_token_ids_are_rejected(tmp_path):
    models.write_model(tmp_path / "m.petit")
    model = petit.load(tmp_path / "m.petit")
    with pytest.raises(ValueError, match=r"token id\(s\) \[300\] out of range for a vocabulary of 300"):
        model.logits([1, 300])
    with pytest.raises(ValueError, match="1-D sequence of integers"):
        model.logits([[1, 2]])


@pytest.mark.parametrize("repack", [False, True])
def test_resident_memory_stays_close_to_the_file_size(tmp_path, repack):
    # a ~17 MB q8_0 model: after load and a forward pass, the process holds the weights once. Run as stored, they are
    # the file's pages and anonymous memory holds no copy; repacked for the CPU, the matrices are one anonymous copy
    # and their file pages are let go
    cfg = dict(models.TINY, vocab_size=4096, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
               num_attention_heads=8, num_key_value_heads=2, head_dim=64)
    path = tmp_path / "big.petit"
    models.write_model(path, cfg, dtype="q8_0")
    size = os.path.getsize(path)
    script = textwrap.dedent(f"""
        import petit
        def rss():
            d = dict(l.split(':', 1) for l in open('/proc/self/status') if l.startswith(('VmRSS', 'RssAnon', 'RssFile')))
            return {{k: int(v.split()[0]) * 1024 for k, v in d.items()}}
        import petit.native, petit.loading, petit.hf.tokenizer, numpy   # their libraries are file-backed RSS too
        before = rss()
        m = petit.load({str(path)!r}, repack={repack})
        m.logits(list(range(16)))
        after = rss()
        print(after['RssAnon'] - before['RssAnon'], after['RssFile'] - before['RssFile'])
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    anon, file_backed = map(int, out.split())
    assert file_backed <= size + 2**20, f"file-backed RSS grew by {file_backed} for a {size}-byte file"
    if repack:
        embedding = 4096 * 512 // 32 * 34          # untied: looked up, not repacked, mapped
        assert file_backed < embedding + 2**20, f"file-backed RSS grew by {file_backed}: the matrices stayed mapped"
        assert anon + file_backed < size + 3 * 2**20, f"RSS grew by {anon} + {file_backed} for a {size}-byte file"
    else:
        assert anon < 0.25 * size, f"anonymous RSS grew by {anon} bytes: the {size}-byte weights were copied"


def test_freed_heap_memory_goes_back_to_the_system():
    """glibc keeps freed memory below a block still in use at the top of its heap: what a GGUF vocabulary's strings
    took while its tokenizer was built stayed resident (60 MiB of Qwen2.5's 151k tokens). trim_heap hands it back."""
    script = textwrap.dedent("""
        import gc
        from petit.native import trim_heap
        def anon():
            return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('RssAnon')) * 1024
        junk = [bytes(1000) + bytes([i % 256]) for i in range(100000)]     # 100 MB in 1 kB blocks
        top = bytes(2000) + b'x'                                             # in use above them
        del junk
        gc.collect()
        held = anon()
        print(trim_heap(), held - anon())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    if out[0] != "True":
        pytest.skip("this C library has no malloc_trim")
    assert int(out[1]) > 80 * 2**20, f"trim_heap gave back {int(out[1])} bytes of 100 MB freed"


def test_every_load_trims_the_heap_even_when_it_fails(tmp_path, monkeypatch):
    import petit.loading
    calls = []
    monkeypatch.setattr(petit.loading, "trim_heap", lambda: calls.append(1))
    path = tmp_path / "m.petit"
    models.write_model(path, models.TINY)
    petit.load(path)
    (tmp_path / "bad.petit").write_bytes(b"PETIT" + bytes(20))
    with pytest.raises(ValueError, match="bad.petit"):
        petit.load(tmp_path / "bad.petit")
    assert calls == [1, 1]


def test_a_cache_made_for_another_model_is_refused(tmp_path):
    models.write_model(tmp_path / "a.petit")
    models.write_model(tmp_path / "b.petit", dict(models.TINY, num_key_value_heads=4, head_dim=32, hidden_size=128))
    a, b = petit.load(tmp_path / "a.petit"), petit.load(tmp_path / "b.petit")
    with pytest.raises(ValueError, match="was not made for this model"):
        b.forward([1], a.new_cache())
    cache = a.new_cache(8)
    with pytest.raises(ValueError, match="cache position -2 outside 0..8"):
        cache.pos = -2


def test_two_threads_sharing_one_model_get_correct_logits(tmp_path):
    import threading
    models.write_model(tmp_path / "m.petit", dtype="q8_0")
    model = petit.load(tmp_path / "m.petit")
    inputs = [[1, 2, 3, 4, 5, 6], [7, 8, 9]]
    expected = [model.logits(ids) for ids in inputs]
    wrong = [0, 0]

    def work(i):
        for _ in range(20):
            wrong[i] += not np.array_equal(model.logits(inputs[i]), expected[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert wrong == [0, 0]


def test_a_forked_child_can_run_the_model(tmp_path):
    # multiprocessing forks on Linux: the child has no pool workers and must restart its own, not hang
    models.write_model(tmp_path / "m.petit", dtype="q8_0")
    script = textwrap.dedent(f"""
        import os, sys, numpy as np, petit
        from petit.native import Weight, matmul
        m = petit.load({str(tmp_path / "m.petit")!r})
        expected = m.logits([1, 2, 3])
        W = Weight.from_float(np.ones((1024, 1024), np.float32), "q8_0")
        pid = os.fork()
        if pid == 0:
            ok = np.array_equal(m.logits([1, 2, 3]), expected) and matmul(W, np.ones(1024, np.float32))[0] > 0
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PETIT_THREADS="2"))
    assert r.stdout.strip() == "0", r.stderr
