"""Embeddings over HTTP (issue 35): OpenAI's /v1/embeddings and Ollama's /api/embed on a real server serving the
bundled chat model with tests/fixtures/st_bert/ beside it (`petit serve CHAT --embedding-model EMB`); exact bodies
(the vectors are the Embedder's own, bit for bit through JSON); and the 400 a server without an embedding model
gives."""
import base64
import os
import threading

import numpy as np
import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from petit.assets import default_model_path  # noqa: E402
from petit.server import Server  # noqa: E402
from petit.server.embeddings import EmbeddingService  # noqa: E402
from petit.server.engine import ServerWorker  # noqa: E402
from petit.server.ollama import _size  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BERT = os.path.join(HERE, "fixtures", "st_bert")
CHAT = os.path.splitext(os.path.basename(default_model_path()))[0]
TEXTS = ["The quick brown fox jumps over the lazy dog.", "hello"]


def serve(embeddings):
    return Server(ServerWorker(default_model_path(), max_tokens=8), port=0, embeddings=embeddings).start()


@pytest.fixture(scope="module")
def service():
    return EmbeddingService(BERT, weights="f32").load()


@pytest.fixture(scope="module")
def http(service):
    server = serve(service)
    with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=60) as c:
        yield c
    server.stop()
    assert not any(t.name.startswith("petit-") and t.is_alive() for t in threading.enumerate())


def floats(v):
    return [float(x) for x in v]


def test_openai_embeddings_of_a_string_and_a_list(http, service):
    emb = service.embedder
    want = emb.embed(TEXTS)
    tokens = [len(emb.tokenize(t)) for t in TEXTS]
    r = http.post("/v1/embeddings", json={"model": "st_bert", "input": TEXTS[0]})
    assert r.status_code == 200
    assert r.json() == {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": floats(want[0])}],
                        "model": "st_bert", "usage": {"prompt_tokens": tokens[0], "total_tokens": tokens[0]}}
    r = http.post("/embeddings", json={"input": TEXTS})       # no model: the embedding model; no /v1 prefix
    assert r.json() == {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": floats(v)}
                                                   for i, v in enumerate(want)],
                        "model": "st_bert", "usage": {"prompt_tokens": sum(tokens), "total_tokens": sum(tokens)}}


def test_the_embedding_model_is_listed_after_the_chat_model(http, service):
    models = http.get("/v1/models").json()["data"]
    assert [m["id"] for m in models] == [CHAT, "st_bert"]
    assert http.get("/v1/models/st_bert").json() == models[1]
    tags = http.get("/api/tags").json()["models"]
    assert [t["name"] for t in tags] == [CHAT, "st_bert"]
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(BERT) for n in names)
    assert {k: v for k, v in tags[1].items() if k not in ("modified_at", "digest")} == {
        "name": "st_bert", "model": "st_bert", "size": size,
        "details": {"parent_model": "", "format": "safetensors", "family": "bert", "families": ["bert"],
                    "parameter_size": _size(service.embedder.model.n_params), "quantization_level": "F32"}}


def test_base64_dimensions_prompts_and_token_ids(http, service):
    emb = service.embedder
    r = http.post("/v1/embeddings", json={"model": "st_bert", "input": TEXTS, "encoding_format": "base64",
                                          "dimensions": 8})
    got = np.stack([np.frombuffer(base64.b64decode(d["embedding"]), "<f4") for d in r.json()["data"]])
    short = emb.embed(TEXTS)[:, :8]
    np.testing.assert_array_equal(got, (short / np.linalg.norm(short, axis=1, keepdims=True)).astype("<f4"))
    r = http.post("/v1/embeddings", json={"model": "st_bert", "input": "hello", "prompt_name": "query"})
    assert r.json()["data"][0]["embedding"] == floats(emb.embed("hello", prompt_name="query")[0])
    ids = [emb.tokenize(t) for t in TEXTS]
    r = http.post("/v1/embeddings", json={"model": "st_bert", "input": ids})
    assert [d["embedding"] for d in r.json()["data"]] == [floats(v) for v in emb.embed(TEXTS)]
    r = http.post("/v1/embeddings", json={"model": "st_bert", "input": ids[1]})
    assert r.json()["data"][0]["embedding"] == floats(emb.embed(TEXTS[1])[0])
    assert r.json()["usage"] == {"prompt_tokens": len(ids[1]), "total_tokens": len(ids[1])}


@pytest.mark.parametrize("body,status,error", [
    ({"model": CHAT, "input": "x"}, 400, {"message": f"The model '{CHAT}' is a chat model, not an embedding model; "
                                                     "this server embeds with 'st_bert'.",
                                          "type": "invalid_request_error", "param": "model",
                                          "code": "model_not_embedding"}),
    ({"model": "text-embedding-3-small", "input": "x"}, 404,
     {"message": "The model 'text-embedding-3-small' does not exist (this server embeds with 'st_bert').",
      "type": "invalid_request_error", "param": "model", "code": "model_not_found"}),
    ({"input": ""}, 400, {"message": "Invalid value for 'input': an input string must not be empty.",
                          "type": "invalid_request_error", "param": "input", "code": "invalid_value"}),
    ({"input": []}, 400, {"message": "Invalid type for 'input': expected a string, an array of strings or an array "
                                     "of token ids (not empty), but got an array instead.",
                          "type": "invalid_request_error", "param": "input", "code": "invalid_type"}),
    ({"input": "x", "encoding_format": "int8"}, 400,
     {"message": "Invalid value for 'encoding_format': must be 'float' or 'base64', got 'int8'.",
      "type": "invalid_request_error", "param": "encoding_format", "code": "invalid_value"}),
    ({"input": "x", "dimensions": 65}, 400,
     {"message": "Invalid value for 'dimensions': must be between 1 and the model's 64, got 65.",
      "type": "invalid_request_error", "param": "dimensions", "code": "invalid_value"}),
    ({"input": [[1, 2, 999]]}, 400,
     {"message": "token id(s) [999] out of range for a vocabulary of 180", "type": "invalid_request_error",
      "param": None, "code": "invalid_value"}),
])
def test_openai_errors(http, body, status, error):
    r = http.post("/v1/embeddings", json=body)
    assert (r.status_code, r.json()) == (status, {"error": error})


def test_ollama_embed(http, service):
    emb = service.embedder
    r = http.post("/api/embed", json={"model": "st_bert", "input": TEXTS})
    body = r.json()
    assert isinstance(body.pop("total_duration"), int)
    assert body == {"model": "st_bert", "embeddings": [floats(v) for v in emb.embed(TEXTS)], "load_duration": 0,
                    "prompt_eval_count": sum(len(emb.tokenize(t)) for t in TEXTS)}
    long = "hello " * 80
    r = http.post("/api/embed", json={"model": "st_bert:latest", "input": long})
    assert r.status_code == 200 and r.json()["embeddings"][0] == floats(emb.embed(long)[0])   # cut to 64 tokens
    r = http.post("/api/embed", json={"model": "st_bert", "input": long, "truncate": False})
    # "hello" is 5 word pieces of the tiny vocabulary (h ##e ##l ##l ##o): 80 x 5 + [CLS] + [SEP]
    assert (r.status_code, r.json()) == (400, {"error": "input 0 has 402 tokens, more than the model's maximum of "
                                                        "64 (truncate is false)"})
    r = http.post("/api/embed", json={"input": "x"})
    assert (r.status_code, r.json()) == (400, {"error": "Invalid type for 'model': expected a string, but got null "
                                                        "instead."})


def test_a_server_without_an_embedding_model_says_how_to_get_one():
    server = serve(None)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=30) as c:
            r = c.post("/v1/embeddings", json={"input": "x"})
            hint = "this server has no embedding model: start it with `petit serve CHAT --embedding-model EMB`"
            assert (r.status_code, r.json()) == (400, {"error": {
                "message": f"The model '{CHAT}' is a chat model, not an embedding model; {hint}.",
                "type": "invalid_request_error", "param": "model", "code": "model_not_embedding"}})
            r = c.post("/api/embed", json={"model": "nomic-embed-text", "input": "x"})
            assert (r.status_code, r.json()) == (400, {"error": "This server has no embedding model: start it with "
                                                                "`petit serve CHAT --embedding-model EMB`."})
    finally:
        server.stop()


@pytest.mark.parametrize("folder,message", [
    (os.path.join(HERE, "fixtures", "hf", "qwen3"), "not an embedding model (no sentence-transformers modules.json"),
    (os.path.join(HERE, "fixtures", "st_bert", "model.safetensors"), "embeddings are read from a Hugging Face folder"),
])
def test_petit_serve_checks_the_embedding_model_before_listening(capsys, folder, message):
    from petit.cli.commands import main
    assert main(["serve", "-m", default_model_path(), "--embedding-model", folder, "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("petit serve: error: ") and message in err and "listening" not in err
