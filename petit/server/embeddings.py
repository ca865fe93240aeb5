"""Embeddings over HTTP (issue 35): OpenAI's `POST /v1/embeddings` and Ollama's `POST /api/embed`, answered by the
embedding model `petit serve CHAT --embedding-model EMB` serves beside the chat model (petit/generation/embed.py).

OpenAI's request: `input` a string, a list of strings, a list of token ids or a list of token id lists (ids are run
as given, no special tokens added); `model` (optional: absent means the embedding model; the chat model's id or
any other name is refused, see below); `encoding_format` "float" (default) or "base64" (the little-endian float32
bytes); `dimensions` (Matryoshka: the first N values, normalized again); `user` (ignored); and Petit's own
`prompt_name` (a prompt of the model's folder, such as "query"). The answer: {"object": "list", "data":
[{"object": "embedding", "index", "embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}}.

Ollama's: `model`, `input` (a string or a list of strings), `truncate` (default true: texts longer than the model's
max_seq_length are cut; false: refused), `dimensions`; the answer {"model", "embeddings", "total_duration",
"load_duration", "prompt_eval_count"}. Vectors are normalized as the model's folder says (sentence-transformers'
Normalize), for both.

Decided (issue 35): a request for embeddings from a server without an embedding model, or naming the chat model,
is a 400 (`model_not_embedding`) that says how to serve one; an unknown model name is a 404 (`model_not_found`).
"""
import asyncio
import base64
import os
import threading
import time

import numpy as np
from starlette.responses import JSONResponse

from petit.server.errors import ApiError, invalid_type, invalid_value
from petit.server.transport import read_json


class EmbeddingService:
    """The served embedding model: loaded by `load()` (the command line does it before listening), used by one
    request at a time."""

    def __init__(self, path: str, weights: str | None = None, model_id: str | None = None):
        self.path, self.weights = path, weights
        self.model_id = model_id or os.path.basename(os.path.normpath(path))
        self.embedder = None
        self._lock = threading.Lock()

    def load(self) -> "EmbeddingService":
        from petit.generation.embed import Embedder
        with self._lock:
            if self.embedder is None:
                self.embedder = Embedder.open(self.path, weights=self.weights)
        return self

    def run(self, texts, ids, prompt_name, truncate: bool = True) -> tuple[np.ndarray, int]:
        """(vectors [n, dim], tokens run) of texts (strings) or ids (token id lists)."""
        emb = self.load().embedder
        with self._lock:
            if ids is None:
                prompt = emb.prompt(prompt_name)
                seqs = [emb.tokenize(prompt + t) for t in texts]
                if not truncate:
                    for i, t in enumerate(texts):
                        n = len(emb.model.tokenizer.hf_encode(prompt + t, add_special_tokens=True))
                        if n > emb.max_length:
                            raise ValueError(f"input {i} has {n} tokens, more than the model's maximum of "
                                             f"{emb.max_length} (truncate is false)")
                skip = 0 if emb.settings.include_prompt else emb._prompt_length(prompt)
                return emb.embed_ids(seqs, skip=skip), sum(map(len, seqs))
            if prompt_name is not None:
                raise ValueError("prompt_name applies to text inputs, not token ids")
            return emb.embed_ids(ids), sum(map(len, ids))


def _inputs(value) -> tuple[list | None, list | None]:
    """(texts, None) or (None, token id lists) of OpenAI's `input`."""
    def is_ids(v):
        return isinstance(v, list) and v and all(isinstance(t, int) and not isinstance(t, bool) for t in v)
    if isinstance(value, str):
        value = [value]
    elif is_ids(value):
        return None, [value]
    if not isinstance(value, list) or not value:
        raise invalid_type("input", "a string, an array of strings or an array of token ids (not empty)", value)
    if all(isinstance(v, str) for v in value):
        if any(not v for v in value):
            raise invalid_value("input", "an input string must not be empty.")
        return value, None
    if all(is_ids(v) for v in value):
        return None, value
    raise invalid_value("input", "expected strings, or token id arrays (not empty), not a mix.")


def _dimensions(value, dim: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_type("dimensions", "an integer", value)
    if not 1 <= value <= dim:
        raise invalid_value("dimensions", f"must be between 1 and the model's {dim}, got {value}.")
    return value


def shorten(vectors: np.ndarray, n: int | None) -> np.ndarray:
    """The first n values of each vector, normalized again (Matryoshka models); all of them when n is None."""
    if n is None or n == vectors.shape[1]:
        return vectors
    out = np.ascontiguousarray(vectors[:, :n])
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


class EmbeddingRoutes:
    def __init__(self, service: EmbeddingService | None, chat_id: str, max_body: int):
        self.service, self.chat_id, self.max_body = service, chat_id, max_body

    def _check_model(self, name, required: bool = False) -> None:
        if name is None and not required:
            name = self.service.model_id if self.service else self.chat_id
        if not isinstance(name, str) or not name:
            raise invalid_type("model", "a string", name)
        base = name.removesuffix(":latest")
        if self.service is not None and base == self.service.model_id:
            return
        if base == self.chat_id:
            hint = (f"this server embeds with '{self.service.model_id}'" if self.service else
                    "this server has no embedding model: start it with `petit serve CHAT --embedding-model EMB`")
            raise ApiError(400, f"The model '{name}' is a chat model, not an embedding model; {hint}.",
                           param="model", code="model_not_embedding")
        if self.service is None:
            raise ApiError(400, "This server has no embedding model: start it with `petit serve CHAT "
                                "--embedding-model EMB`.", param="model", code="model_not_embedding")
        raise ApiError(404, f"The model '{name}' does not exist (this server embeds with "
                            f"'{self.service.model_id}').", param="model", code="model_not_found")

    async def _run(self, texts, ids, prompt_name, truncate=True):
        try:
            return await asyncio.to_thread(self.service.run, texts, ids, prompt_name, truncate)
        except ValueError as e:
            raise ApiError(400, str(e), code="invalid_value") from None

    async def openai(self, request):
        try:
            body = await read_json(request, self.max_body)
            self._check_model(body.get("model"))
            texts, ids = _inputs(body.get("input"))
            fmt = body.get("encoding_format", "float")
            if fmt not in ("float", "base64"):
                raise invalid_value("encoding_format", f"must be 'float' or 'base64', got {fmt!r}.")
            prompt_name = body.get("prompt_name")
            if prompt_name is not None and not isinstance(prompt_name, str):
                raise invalid_type("prompt_name", "a string", prompt_name)
            n = _dimensions(body.get("dimensions"), self.service.load().embedder.dimension)
            vectors, tokens = await self._run(texts, ids, prompt_name)
        except ApiError as e:
            return JSONResponse(e.body(), status_code=e.status, headers=e.headers)
        vectors = shorten(vectors, n).astype("<f4")
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(v.tobytes()).decode() if fmt == "base64" else [float(x) for x in v]}
                for i, v in enumerate(vectors)]
        return JSONResponse({"object": "list", "data": data, "model": self.service.model_id,
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    async def ollama(self, request):
        t0 = time.perf_counter_ns()
        try:
            body = await read_json(request, self.max_body)
            self._check_model(body.get("model"), required=True)
            value = body.get("input")
            texts = [value] if isinstance(value, str) else value
            if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
                raise ApiError(400, "input must be a string or a list of strings, not empty")
            truncate = body.get("truncate", True)
            if not isinstance(truncate, bool):
                raise ApiError(400, "truncate must be true or false")
            n = _dimensions(body.get("dimensions"), self.service.load().embedder.dimension)
            vectors, tokens = await self._run(texts, None, None, truncate)
        except ApiError as e:
            return JSONResponse({"error": e.message}, status_code=e.status, headers=e.headers)
        vectors = shorten(vectors, n)
        return JSONResponse({"model": body["model"], "embeddings": [[float(x) for x in v] for v in vectors],
                             "total_duration": time.perf_counter_ns() - t0, "load_duration": 0,
                             "prompt_eval_count": tokens})
