"""Embedding encoders of issue 35 beyond BERT (the emb35 group), equal to sentence-transformers on tiny random
folders made by tests/fixtures/make_st_fixtures.py (references encoded as one right-padded batch):
- XLM-RoBERTa / RoBERTa (bge-m3, multilingual-e5) on tests/fixtures/st_xlm_roberta/ (CLS pooling + Normalize, e5's
  prompts, a French and a Japanese text); its positions read from row pad_token_id + 1 on; its config's checks.
- ModernBERT (gte-modernbert, modernbert-embed) on tests/fixtures/st_modernbert/ (mean pooling + Normalize, nomic's
  prompts; sliding layers of local_attention 8, which the longer texts reach past). The kernel's bidirectional
  sliding window is checked against float64 in tests/test_embed5.py.
- NomicBERT (nomic-embed-text v1 / v1.5) on tests/fixtures/st_nomic_bert/ (mean pooling + Normalize, nomic's
  prompts; the released tensor names, which transformers 5.25 saves)."""
import json
import os
import warnings

import numpy as np
import pytest

import petit
from petit.generation.embed import Embedder
from tests.test_embed5 import cosines

HERE = os.path.dirname(os.path.abspath(__file__))
XLMR = os.path.join(HERE, "fixtures", "st_xlm_roberta")
MB = os.path.join(HERE, "fixtures", "st_modernbert")
NB = os.path.join(HERE, "fixtures", "st_nomic_bert")


def reference(folder=XLMR):
    return np.load(os.path.join(folder, "reference.npz"))


def texts(folder=XLMR):
    with open(os.path.join(folder, "cases.json")) as f:
        return json.load(f)["texts"]


@pytest.fixture(scope="module")
def f32():
    return Embedder.open(XLMR, weights="f32")


def test_token_ids_and_hidden_states_equal_sentence_transformers(f32):
    """<s> ... </s> around the Unigram pieces; every token's final state within 1e-4 of the states' range (measured:
    2.4e-7) and at cosine >= 0.99999."""
    ref = reference()
    ids = [f32.tokenize(t) for t in texts()]
    assert ids == [ref[f"ids_{i}"].tolist() for i in range(len(ids))]
    assert all(i[0] == 0 and i[-1] == 2 for i in ids)
    for i, states in enumerate(f32.model.hidden_states(ids)):
        want = ref[f"tokens_{i}"]
        assert cosines(states, want).min() >= 0.99999
        assert np.abs(states - want).max() <= 1e-4 * np.ptp(want)


@pytest.mark.parametrize("weights,bound", [("f32", 0.99999), ("q8_0", 0.999)])
def test_sentence_embeddings_equal_sentence_transformers(weights, bound):
    """The 7 texts embedded as one batch by sentence-transformers (right-padded to the longest, 58 tokens; the
    padding's position ids are padding_idx), plain and with the "query: " prompt, CLS-pooled and normalized: cosine
    >= 0.99999 and every component within 1e-5 in f32 (measured: 1.5e-7), cosine >= 0.999 at q8_0 (measured
    0.99993)."""
    emb = Embedder.open(XLMR, weights=weights)
    ref = reference()
    plain, query = emb.embed(texts()), emb.embed(texts(), prompt_name="query")
    assert plain.shape == ref["plain"].shape == (7, 64)
    assert cosines(plain, ref["plain"]).min() >= bound
    assert cosines(query, ref["query"]).min() >= bound
    if weights == "f32":
        assert np.abs(plain - ref["plain"]).max() <= 1e-5 and np.abs(query - ref["query"]).max() <= 1e-5
    np.testing.assert_allclose(np.linalg.norm(plain, axis=1), 1.0, atol=1e-5)


def test_the_positions_start_past_the_padding_id(f32):
    """The position table is the checkpoint's rows 2..65 (pad_token_id 1) plus token type 0's row: 64 positions of
    the 66, the model's context."""
    from pathlib import Path
    from tests.test_moe_a5 import _read_safetensors
    w = _read_safetensors(Path(XLMR) / "model.safetensors")
    table = w["embeddings.position_embeddings.weight"]
    model = f32.model
    assert model.context_length == 64
    np.testing.assert_array_equal(model.net.pos_embed, table[2:] + w["embeddings.token_type_embeddings.weight"][0])


def test_roberta_is_the_same_family_and_a_converted_file_runs_the_same(tmp_path):
    """model_type roberta (all-roberta-large-v1, all-distilroberta-v1) is RobertaModel, the same blocks: the folder
    relabelled gives the same states bit for bit; petit convert writes the shifted position table."""
    import shutil
    from petit.loading.convert import convert
    folder = tmp_path / "roberta"
    shutil.copytree(XLMR, folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(cfg, model_type="roberta",
                                                        architectures=["RobertaModel"])))
    ref = reference()
    ids = [ref[f"ids_{i}"] for i in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # every tensor read, no key ignored
        a = petit.load(XLMR, weights="f32")
        b = petit.load(folder, weights="f32")
    assert a.kind == b.kind == "encoder"
    assert all(np.array_equal(x, y) for x, y in zip(a.hidden_states(ids), b.hidden_states(ids)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert(XLMR, tmp_path / "x.petit", "q8_0").close()
    c, d = petit.load(XLMR), petit.load(tmp_path / "x.petit")
    assert d.kind == "encoder" and d.context_length == 64
    assert all(np.array_equal(x, y) for x, y in zip(c.hidden_states(ids), d.hidden_states(ids)))


@pytest.mark.parametrize("changes,message", [
    ({"pad_token_id": 65}, r"config: pad_token_id 65 must be an integer in 0\.\.max_position_embeddings - 2 \(64\): "
                           r"positions start at pad_token_id \+ 1"),
    ({"pad_token_id": None}, "config: pad_token_id None must be an integer"),
    ({"is_decoder": True}, r"config: is_decoder true \(a causal BERT \(BertLMHeadModel\)\) is not supported"),
    ({"position_embedding_type": "relative_key"}, "position_embedding_type 'relative_key' is not supported"),
])
def test_config_refusals(changes, message):
    cfg = json.load(open(os.path.join(XLMR, "config.json")))
    with pytest.raises(ValueError, match=message):
        petit.models.get_family("xlm-roberta").Config.from_dict(dict(cfg, **changes))


def test_the_server_embeds_with_xlm_roberta():
    """POST /v1/embeddings with st_xlm_roberta as the server's embedding model: the Embedder's vectors bit for bit
    through JSON, the usage its token counts, within cosine 0.99999 of sentence-transformers'."""
    pytest.importorskip("httpx")
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    import httpx
    from petit.server.embeddings import EmbeddingService
    from tests.test_embed5_server import floats, serve
    service = EmbeddingService(XLMR, weights="f32").load()
    emb, some = service.embedder, texts()[4:]
    want, n = emb.embed(some), [len(emb.tokenize(t)) for t in some]
    server = serve(service)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=60) as c:
            r = c.post("/v1/embeddings", json={"model": "st_xlm_roberta", "input": some})
    finally:
        server.stop()
    assert r.status_code == 200
    assert r.json() == {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": floats(v)}
                                                   for i, v in enumerate(want)],
                        "model": "st_xlm_roberta", "usage": {"prompt_tokens": sum(n), "total_tokens": sum(n)}}
    assert n == [8, 10, 3]
    assert cosines(want, reference()["plain"][4:]).min() >= 0.99999


# ---- ModernBERT ----
@pytest.fixture(scope="module")
def mb32():
    return Embedder.open(MB, weights="f32")


def test_modernbert_states_and_embeddings_equal_sentence_transformers(mb32):
    """Token ids ([CLS] ... [SEP]), every token's final state (after final_norm) within 1e-4 of the states' range
    (measured: 4.3e-7) at cosine >= 0.99999; the batch's embeddings, plain and with "search_query: ", mean-pooled
    and normalized: cosine >= 0.99999, every component within 1e-5 (measured: 1 - 2e-13, 1.9e-7)."""
    ref = reference(MB)
    ids = [mb32.tokenize(t) for t in texts(MB)]
    assert ids == [ref[f"ids_{i}"].tolist() for i in range(len(ids))]
    assert max(map(len, ids)) > 4 * 5                 # the long text reaches far past the sliding layers' 4
    for i, states in enumerate(mb32.model.hidden_states(ids)):
        want = ref[f"tokens_{i}"]
        assert cosines(states, want).min() >= 0.99999
        assert np.abs(states - want).max() <= 1e-4 * np.ptp(want)
    plain, query = mb32.embed(texts(MB)), mb32.embed(texts(MB), prompt_name="query")
    for got, want in ((plain, ref["plain"]), (query, ref["query"])):
        assert got.shape == want.shape == (5, 64)
        assert cosines(got, want).min() >= 0.99999 and np.abs(got - want).max() <= 1e-5


def test_modernbert_at_q8_0_and_converted():
    """q8_0: cosine >= 0.999 (measured: 0.99962); a converted .petit file gives the folder's states bit for bit."""
    from petit.loading.convert import convert
    emb = Embedder.open(MB, weights="q8_0")
    assert cosines(emb.embed(texts(MB)), reference(MB)["plain"]).min() >= 0.999
    import tempfile
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert(MB, os.path.join(d, "m.petit"), "q8_0").close()
        ids = [reference(MB)[f"ids_{i}"] for i in range(4)]
        b = petit.load(os.path.join(d, "m.petit"))
        assert b.kind == "encoder"
        assert all(np.array_equal(x, y) for x, y in zip(emb.model.hidden_states(ids), b.hidden_states(ids)))


def test_modernbert_layers_window_and_refusals(mb32, tmp_path):
    """Layers full, sliding, sliding, full; a sliding layer's window is local_attention // 2 + 1 = 5 in Petit's terms
    (|i - j| <= 4); every tensor read, no key ignored; the same folder with local_attention 1000 gives states far from
    sentence-transformers' (the window is what the reference holds)."""
    layers = mb32.model.net.layers
    assert [L.window for L in layers] == [0, 5, 5, 0] and all(L.bidirectional for L in layers)
    assert [L.rope.base for L in layers] == [160000.0, 10000.0, 10000.0, 160000.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        petit.load(MB, weights="f32")
    import shutil
    folder = tmp_path / "mb"
    shutil.copytree(MB, folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(cfg, local_attention=1000)))
    ref = reference(MB)
    wide = petit.load(folder, weights="f32").hidden_states([ref["ids_3"]])[0]
    assert np.abs(wide - ref["tokens_3"]).max() > 0.1 * np.ptp(ref["tokens_3"])
    family = petit.models.get_family("modernbert")
    with pytest.raises(ValueError, match=r"config: sliding_window 9 is not local_attention // 2 \(8 // 2\)"):
        family.Config.from_dict(dict(cfg, sliding_window=9))
    scaled = {t: dict(p, rope_type="linear", factor=2.0) for t, p in cfg["rope_parameters"].items()}
    with pytest.raises(ValueError, match="scaling of the sliding layers. RoPE is not supported by the modernbert family"):
        family.Config.from_dict(dict(cfg, rope_parameters=scaled))


# ---- NomicBERT ----
@pytest.mark.parametrize("weights,bound", [("f32", 0.99999), ("q8_0", 0.999)])
def test_nomic_bert_equals_sentence_transformers(weights, bound):
    """Token ids, every token's final state within 1e-4 of the range (measured: 2.7e-7) in f32, and the batch's
    embeddings plain and with "search_query: ": cosine >= 0.99999 and every component within 1e-5 in f32 (measured:
    1 - 3e-14, 7.5e-8), >= 0.999 at q8_0 (measured: 0.99989)."""
    emb = Embedder.open(NB, weights=weights)
    ref = reference(NB)
    ids = [emb.tokenize(t) for t in texts(NB)]
    assert ids == [ref[f"ids_{i}"].tolist() for i in range(len(ids))]
    if weights == "f32":
        for i, states in enumerate(emb.model.hidden_states(ids)):
            want = ref[f"tokens_{i}"]
            assert cosines(states, want).min() >= 0.99999
            assert np.abs(states - want).max() <= 1e-4 * np.ptp(want)
    for got, want in ((emb.embed(texts(NB)), ref["plain"]), (emb.embed(texts(NB), prompt_name="query"), ref["query"])):
        assert got.shape == want.shape == (5, 64)
        assert cosines(got, want).min() >= bound
        if weights == "f32":
            assert np.abs(got - want).max() <= 1e-5


def test_nomic_bert_reads_every_released_tensor_and_refuses_scaling(tmp_path):
    """Wqkv split, fc11 / fc12 / fc2, norm1 / norm2, emb_ln: every tensor read, no key ignored; the word embedding is
    word + token type 0; rope_scaling refused."""
    from pathlib import Path
    from tests.test_moe_a5 import _read_safetensors
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = petit.load(NB, weights="f32")
    assert model.kind == "encoder" and model.context_length == 128
    w = _read_safetensors(Path(NB) / "model.safetensors")
    assert "encoder.layers.0.attn.Wqkv.weight" in w and "emb_ln.weight" in w
    np.testing.assert_array_equal(
        model.net.embed.dequantize(),
        w["embeddings.word_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0])
    cfg = json.load(open(os.path.join(NB, "config.json")))
    with pytest.raises(ValueError, match="rope_scaling .* is not supported by the nomic_bert family"):
        petit.models.get_family("nomic_bert").Config.from_dict(
            dict(cfg, rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 1000.0}))


@pytest.mark.parametrize("folder,prefix,extra", [
    (XLMR, "roberta.", {"lm_head.dense.weight": (64, 64)}),
    (MB, "model.", {"head.dense.weight": (64, 64), "head.norm.weight": (64,), "decoder.bias": (180,)}),
])
def test_a_task_models_checkpoint_reads_the_same(tmp_path, folder, prefix, extra):
    """A checkpoint saved from the masked-LM class (XLMRobertaForMaskedLM's `roberta.`, ModernBertForMaskedLM's
    `model.`) gives the base model's states bit for bit; ModernBERT's head is left unread without a word, RoBERTa's
    LM head reported unused."""
    from tests.models import renamed_copy
    from tests.test_moe_a5 import _read_safetensors, _write_safetensors
    copy = renamed_copy(folder, tmp_path, rename=lambda k: prefix + k)
    raw = _read_safetensors(copy / "model.safetensors")
    _write_safetensors(copy / "model.safetensors", {**raw, **{k: np.ones(s, np.float32) for k, s in extra.items()}})
    ids = [reference(folder)[f"ids_{i}"] for i in range(4)]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = petit.load(copy, weights="f32").hidden_states(ids)
    assert all(np.array_equal(x, y) for x, y in zip(got, petit.load(folder, weights="f32").hidden_states(ids)))
    said = " ".join(str(m.message) for m in w)
    assert ("lm_head.dense.weight" in said) == (prefix == "roberta.") and "head.norm" not in said
