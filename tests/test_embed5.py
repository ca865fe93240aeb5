"""Embeddings (issue 35, first slice): BERT as a family of kind "encoder" over bidirectional attention, and
Qwen3-Embedding through the qwen3 family with last-token pooling, equal to sentence-transformers on the tiny random
fixtures of tests/fixtures/st_bert/ and st_qwen3/ (made by tests/fixtures/make_st_fixtures.py: each text's token
ids, final hidden states and the batch's sentence embeddings, plain and with the "query" prompt); the kernel's
bidirectional flag against a float64 reference at odd sizes on every kernel path; the settings sentence-transformers'
files give; `petit embed`; petit.embed."""
import json
import os
import shutil
import warnings

import numpy as np
import pytest

import petit
from petit import native as K
from petit.generation.embed import Embedder, pool
from petit.generation.embed_config import read_settings
from petit.native import lib
from tests import oracles
from tests.test_kernels import PATHS

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = {name: os.path.join(HERE, "fixtures", f"st_{name}") for name in ("bert", "qwen3")}


def reference(name):
    return np.load(os.path.join(FIX[name], "reference.npz"))


def texts(name):
    with open(os.path.join(FIX[name], "cases.json")) as f:
        return json.load(f)["texts"]


@pytest.fixture(scope="module", params=["bert", "qwen3"])
def f32(request):
    return request.param, Embedder.open(FIX[request.param], weights="f32")


def cosines(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


# ---- the kernel: bidirectional attention ----
@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("T,pos0,H,KV,hd,window", [
    (1, 0, 3, 3, 12, 0), (7, 0, 6, 2, 20, 0), (37, 0, 5, 1, 36, 0), (5, 4, 4, 2, 8, 0), (70, 0, 2, 2, 80, 0),
    (300, 0, 2, 1, 16, 0),
    # issue 35, emb35: a window (ModernBERT's local layers): 65 is local_attention 128's, across attention blocks
    (1, 0, 3, 3, 12, 2), (7, 0, 6, 2, 20, 3), (37, 0, 5, 1, 36, 9), (5, 4, 4, 2, 8, 2), (150, 0, 2, 2, 16, 65),
    (300, 0, 2, 1, 16, 129), (40, 0, 2, 2, 8, 100)])
def test_bidirectional_attention_sees_the_whole_call(isa, T, pos0, H, KV, hd, window):
    """Every query reads every position 0..pos0+T-1 (those after it too), none past them; under a window of w only
    those within w - 1 of it on either side (a window wider than the call: the whole call); against float64, at odd
    head sizes and lengths across attention blocks (300 > two blocks), float and int8 caches."""
    K.configure(isa=isa)
    rng = np.random.default_rng(T + 31 * hd + 7 * window)
    n_ctx = pos0 + T + 3
    q = rng.standard_normal((T, H, hd)).astype(np.float32)
    kc = rng.standard_normal((KV, n_ctx, hd)).astype(np.float32)
    vc = rng.standard_normal((KV, n_ctx, hd)).astype(np.float32)
    kc[:, pos0 + T:] = 1e4                            # positions past the call must not be read
    scale = hd ** -0.5
    want = oracles.attention(q, kc, vc, pos0, scale, window=window, bidirectional=True)
    got = K.attention(q, kc, vc, pos0, scale, window=window, bidirectional=True)
    np.testing.assert_allclose(got, want, rtol=0, atol=5e-5)
    if T > 1:                                         # not the causal answer
        assert np.abs(K.attention(q, kc, vc, pos0, scale, window=window) - want).max() > 1e-3
    if T > window > 0:                                # nor the whole call's
        assert np.abs(K.attention(q, kc, vc, pos0, scale, bidirectional=True) - want).max() > 1e-3
    k8 = np.clip(np.round(kc[:, :pos0 + T] * 40), -127, 127).astype(np.int8)
    v8 = np.clip(np.round(vc[:, :pos0 + T] * 40), -127, 127).astype(np.int8)
    k8 = np.concatenate([k8, np.full((KV, 3, hd), 127, np.int8)], 1)
    v8 = np.concatenate([v8, np.zeros((KV, 3, hd), np.int8)], 1)
    ks, vs = np.full((KV, n_ctx), 1 / 40, np.float32), np.full((KV, n_ctx), 1 / 40, np.float32)
    ks[:, pos0 + T:] = 1e4
    out = np.empty_like(q)
    P = lambda a, t="float *": K.ffi.cast(t, K.ffi.from_buffer(a))     # noqa: E731
    assert lib.pt_attention_q8(P(q), P(k8, "int8_t *"), P(ks), P(v8, "int8_t *"), P(vs), n_ctx, T, H, KV, hd,
                               pos0, scale, 0.0, window, K.attn_extra(bidirectional=True), P(out)) == 0
    want8 = oracles.attention(q, k8.astype(np.float32) * ks[..., None], v8.astype(np.float32) * vs[..., None],
                              pos0, scale, window=window, bidirectional=True)
    np.testing.assert_allclose(out, want8, rtol=0, atol=5e-5)


# ---- parity with sentence-transformers ----
def test_token_ids_are_sentence_transformers(f32):
    """The texts tokenized as sentence-transformers feeds them: special tokens added ([CLS] ... [SEP]; Qwen3's final
    <|endoftext|>), truncated to max_seq_length with the special tokens kept (st_qwen3's long text: 155 -> 128)."""
    name, emb = f32
    ref = reference(name)
    for i, text in enumerate(texts(name)):
        n = ref[f"tokens_{i}"].shape[0]
        ids = emb.tokenize(text)
        assert len(ids) == n
        full = ref[f"ids_{i}"].tolist()
        assert ids == (full if len(full) == n else full[:n - 1] + full[-1:])


def test_hidden_states_equal_sentence_transformers_in_f32(f32):
    """Every token's final state (BertModel / Qwen3Model's last_hidden_state): cosine >= 0.9999 and at most 1e-4
    of the states' range off."""
    name, emb = f32
    ref = reference(name)
    ids = [emb.tokenize(t) for t in texts(name)]
    for i, states in enumerate(emb.model.hidden_states(ids)):
        want = ref[f"tokens_{i}"]
        assert cosines(states, want).min() >= 0.9999
        assert np.abs(states - want).max() <= 1e-4 * np.ptp(want)


@pytest.mark.parametrize("weights,bound", [("f32", 0.9999), ("q8_0", 0.999)])
@pytest.mark.parametrize("name", ["bert", "qwen3"])
def test_sentence_embeddings_equal_sentence_transformers(name, weights, bound):
    """The batch's embeddings, plain and with the "query" prompt (e5's "query: ", Qwen3-Embedding's instruction),
    pooled (mean / last token) and normalized as the folder says: cosine >= 0.9999 in f32, >= 0.999 at q8_0."""
    emb = Embedder.open(FIX[name], weights=weights)
    ref = reference(name)
    plain, query = emb.embed(texts(name)), emb.embed(texts(name), prompt_name="query")
    assert plain.shape == ref["plain"].shape and plain.dtype == np.float32
    assert cosines(plain, ref["plain"]).min() >= bound
    assert cosines(query, ref["query"]).min() >= bound
    np.testing.assert_allclose(np.linalg.norm(plain, axis=1), 1.0, atol=1e-5)


def test_a_batch_gives_each_text_what_it_gets_alone():
    emb = Embedder.open(FIX["bert"], weights="q8_0")
    both = emb.embed(texts("bert")[:3])
    for i, t in enumerate(texts("bert")[:3]):
        assert np.array_equal(emb.embed(t)[0], both[i])


def test_steps_hold_at_most_32_texts_and_4096_tokens():
    from petit.generation.embed import batches
    assert batches([10] * 70) == [(0, 32), (32, 64), (64, 70)]
    assert batches([3000, 1000, 97, 5000, 1, 4096]) == [(0, 2), (2, 3), (3, 4), (4, 5), (5, 6)]
    assert batches([]) == []


def test_petit_embed_and_the_command_line(capsys):
    from petit.cli.commands import main
    ref = reference("bert")
    v = petit.embed(FIX["bert"], texts("bert")[:2], query=True, weights="f32")
    assert cosines(v, ref["query"][:2]).min() >= 0.9999
    assert main(["embed", FIX["bert"], texts("bert")[0], "hello", "--query", "--json", "--weights", "f32"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dimension"] == 64 and out["prompt"] == "query: " and len(out["embeddings"]) == 2
    assert cosines(out["embeddings"][0], ref["query"][0]) >= 0.9999
    assert out["tokens"] == sum(len(Embedder.open(FIX["bert"]).tokenize("query: " + t))
                                for t in (texts("bert")[0], "hello"))
    assert main(["embed", FIX["bert"], "hello", "--weights", "f32"]) == 0
    line = capsys.readouterr().out.split("\n")[0].split()
    assert len(line) == 64 and cosines([float(x) for x in line], ref["plain"][2]) >= 0.9999


def test_every_pooling_mode_and_include_prompt_equal_sentence_transformers(tmp_path):
    """st_bert's query embeddings with sentence-transformers' Pooling set to cls + max and weightedmean +
    mean_sqrt_len_tokens without the prompt's tokens, lasttoken with them, mean without them (references modes_<i>
    of make_st_fixtures.py), written into the folder's 1_Pooling/config.json: cosine >= 0.9999 in f32."""
    folder = _copy(tmp_path)
    with open(os.path.join(FIX["bert"], "cases.json")) as f:
        modes = json.load(f)["modes"]
    ref = reference("bert")
    model = petit.load(folder, weights="f32")
    for i, (mode, include) in enumerate(modes):
        (folder / "1_Pooling" / "config.json").write_text(json.dumps({"embedding_dimension": 64,
                                                                      "pooling_mode": mode,
                                                                      "include_prompt": include}))
        got = Embedder(model, read_settings(str(folder), 64, "encoder")).embed(texts("bert"), prompt_name="query")
        assert got.shape == ref[f"modes_{i}"].shape
        assert cosines(got, ref[f"modes_{i}"]).min() >= 0.9999, (mode, include)


def test_a_converted_encoder_runs_the_same(tmp_path):
    """petit convert writes what bert runs on (the position table with token type 0 folded in): the .petit file is
    an encoder with the folder's states bit for bit."""
    from petit.loading.convert import convert
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert(FIX["bert"], tmp_path / "b.petit", "q8_0").close()
    a, b = petit.load(FIX["bert"]), petit.load(tmp_path / "b.petit")
    ids = [reference("bert")[f"ids_{i}"] for i in range(3)]
    assert b.kind == "encoder"
    assert all(np.array_equal(x, y) for x, y in zip(a.hidden_states(ids), b.hidden_states(ids)))


# ---- pooling and settings ----
def test_pooling_modes_as_sentence_transformers_computes_them():
    x = np.arange(12, dtype=np.float32).reshape(4, 3) ** 1.5
    assert np.array_equal(pool(x, ("cls",)), x[0])
    assert np.array_equal(pool(x, ("lasttoken",)), x[-1])
    np.testing.assert_allclose(pool(x, ("mean", "max")), np.concatenate([x.mean(0), x.max(0)]), rtol=1e-6)
    np.testing.assert_allclose(pool(x, ("mean_sqrt_len_tokens",)), x.sum(0) / 2, rtol=1e-6)
    w = np.arange(1, 5, dtype=np.float64)[:, None]
    np.testing.assert_allclose(pool(x, ("weightedmean",)), (x * w).sum(0) / w.sum(), rtol=1e-6)
    # include_prompt false: the prompt's 2 tokens left out; weightedmean keeps the remaining tokens' weights
    np.testing.assert_allclose(pool(x, ("mean", "cls"), skip=2), np.concatenate([x[2:].mean(0), x[2]]), rtol=1e-6)
    np.testing.assert_allclose(pool(x, ("weightedmean",), skip=2), (x[2:] * w[2:]).sum(0) / w[2:].sum(), rtol=1e-6)


def _copy(tmp_path, name="bert"):
    out = tmp_path / name
    shutil.copytree(FIX[name], out)
    return out


def test_settings_read_both_spellings_of_the_pooling_config(tmp_path):
    folder = _copy(tmp_path)
    s = read_settings(str(folder), 64, "encoder")
    assert (s.pooling, s.normalize, s.include_prompt, s.prompts["query"]) == (("mean",), True, True, "query: ")
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 64, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False,
         "pooling_mode_max_tokens": True, "include_prompt": False}))
    s = read_settings(str(folder), 64, "encoder")
    assert s.pooling == ("cls", "max") and not s.include_prompt
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"embedding_dimension": 64,
                                                                  "pooling_mode": "median"}))
    with pytest.raises(ValueError, match="pooling_mode 'median' is not one of"):
        read_settings(str(folder), 64, "encoder")


def test_unsupported_modules_and_non_embedding_models_are_refused(tmp_path):
    folder = _copy(tmp_path)
    modules = json.loads((folder / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    modules[-1]["idx"] = 3
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ValueError, match="module 'sentence_transformers.models.Dense' is not supported yet"):
        read_settings(str(folder), 64, "encoder")
    (folder / "modules.json").unlink()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = read_settings(str(folder), 64, "encoder")       # sentence-transformers' default for a bare encoder
    assert s.pooling == ("mean",) and not s.normalize and "mean pooling" in str(w[0].message)
    with pytest.raises(ValueError, match="not an embedding model"):
        read_settings(str(folder), 64, "decoder")
    with pytest.raises(ValueError, match="not an embedding model"):
        Embedder.open(os.path.join(HERE, "fixtures", "hf", "qwen3"))


def test_an_encoder_has_no_logits(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # every tensor read (BertModel's pooler left unread on purpose), no key
        model = petit.load(FIX["bert"], weights="f32")     # ignored
    assert model.kind == "encoder" and petit.load(FIX["qwen3"], weights="f32").kind == "decoder"
    with pytest.raises(ValueError, match="is an encoder .an embedding model.: it has no next-token logits"):
        model.logits([2, 5, 3])
    with pytest.raises(ValueError, match="no prompt named 'passage'"):
        Embedder(model, read_settings(FIX["bert"], 64, "encoder")).embed("x", prompt_name="passage")
    folder = _copy(tmp_path)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(cfg, is_decoder=True)))
    with pytest.raises(ValueError, match=r"is_decoder true \(a causal BERT \(BertLMHeadModel\)\) is not supported"):
        petit.load(folder)
