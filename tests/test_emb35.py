"""Embedding encoders of issue 35 beyond BERT (the emb35 group): XLM-RoBERTa / RoBERTa (bge-m3, multilingual-e5),
equal to sentence-transformers on the tiny random folder tests/fixtures/st_xlm_roberta/ (made by
tests/fixtures/make_st_fixtures.py: CLS pooling + Normalize, e5's prompts, a French and a Japanese text, references
encoded as one padded batch); its positions read from row pad_token_id + 1 on; its config's checks."""
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


def reference():
    return np.load(os.path.join(XLMR, "reference.npz"))


def texts():
    with open(os.path.join(XLMR, "cases.json")) as f:
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
