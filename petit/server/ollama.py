"""An Ollama-compatible surface beside the OpenAI one: /api/chat, /api/generate, /api/tags, /api/show, /api/version.

Ollama's shapes (its docs/api.md): replies stream as NDJSON (`application/x-ndjson`, one JSON object a line) unless
`"stream": false`; each line has `model`, `created_at` (RFC 3339, UTC), `message` (chat) or `response` (generate),
and `done`; the last line has `done: true`, `done_reason` ("stop" or "length") and the counts and durations
(nanoseconds): `total_duration`, `load_duration` (0: the model is loaded once, at start), `prompt_eval_count`,
`prompt_eval_duration`, `eval_count`, `eval_duration`. Errors are `{"error": "message"}` with the HTTP status the
OpenAI routes would give. The model name is the served id, with or without the `:latest` tag.

`options` maps onto the same sampling as the OpenAI fields: temperature, top_p, top_k, min_p, num_predict
(max tokens; -1 or -2: up to the context's end), seed, stop, repeat_penalty, presence_penalty, frequency_penalty.
Options Petit has no use for (num_ctx, num_thread, mirostat, ...) are ignored, as Ollama ignores the ones a runner
does not know. `format` is "json" or a JSON schema, enforced as response_format is.

Petit's `speculative` field (docs/server.md: {"draft": "lookup" | "model" | "none", "draft_max", "draft_min"}) is read
here as on the OpenAI routes, top level beside `options`; when a reply was decoded speculatively its last line adds
`draft_n` and `draft_n_accepted` (the names of the OpenAI routes' timings).
"""
import datetime
import hashlib
import json
import os
import time

from starlette.responses import JSONResponse, Response

from petit import __version__
from petit.server import schema
from petit.server import tools as tool_formats
from petit.server.engine import Delta, Failed
from petit.server.schema import ApiError
from petit.server.transport import EventStream, Events, read_json

NDJSON = "application/x-ndjson"
NUMBER_OPTIONS = {"temperature": "temperature", "top_p": "top_p", "min_p": "min_p",
                  "repeat_penalty": "repetition_penalty", "presence_penalty": "presence_penalty",
                  "frequency_penalty": "frequency_penalty"}
INT_OPTIONS = {"top_k": "top_k", "seed": "seed"}


def created_at() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _error(e: ApiError) -> JSONResponse:
    return JSONResponse({"error": e.message}, status_code=e.status, headers=e.headers)


def _bad(message: str) -> ApiError:
    return ApiError(400, message)


class Ollama:
    """The /api routes, over the same engine (and the same checks and jobs) as the OpenAI routes of `api`."""

    def __init__(self, api):
        self.api, self.engine = api, api.engine

    # ---- the model ----
    def _name(self, body: dict, required: bool = True) -> str:
        name = body.get("model", body.get("name"))
        if name is None and not required:
            return self.api.model_id
        if not isinstance(name, str) or not name:
            raise _bad("model is required")
        if name not in (self.api.model_id, self.api.model_id + ":latest"):
            raise ApiError(404, f"model '{name}' not found (this server serves '{self.api.model_id}')")
        return name

    def _details(self) -> dict:
        model = self.engine.model
        config = model.metadata.get("config")
        family = (config.get("model_type") if isinstance(config, dict) else None) or \
            getattr(model.config, "model_type", None) or "unknown"
        return {"parent_model": "", "format": "petit", "family": family, "families": [family],
                "parameter_size": _size(model.n_params), "quantization_level": str(model.weight_type).upper()}

    def _file(self) -> dict:
        path = self.engine.path
        st = os.stat(path)
        modified = datetime.datetime.fromtimestamp(st.st_mtime, datetime.timezone.utc)
        # an identity of this version of the file (its name, size and time), not a hash of its bytes
        digest = hashlib.sha256(f"{os.path.abspath(path)}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()
        return {"modified_at": modified.isoformat().replace("+00:00", "Z"), "size": st.st_size, "digest": digest}

    async def tags(self, request):
        service = getattr(self.api, "embeddings", None)
        extra = [_embedding_tag(service)] if service is not None else []
        if self.engine.state != "ready":
            return JSONResponse({"models": extra})
        f = self._file()
        return JSONResponse({"models": [{"name": self.api.model_id, "model": self.api.model_id, **f,
                                         "details": self._details()}] + extra})

    async def show(self, request):
        try:
            self.api.check_loading()
            body = await _body(request, self.api.max_body)
            self._name(body)
        except ApiError as e:
            return _error(e)
        model, engine = self.engine.model, self.engine
        params = [f"{k} {v}" for k, v in (("temperature", engine.sampler.temperature),
                                          ("top_k", engine.sampler.top_k), ("top_p", engine.sampler.top_p),
                                          ("num_ctx", engine.n_ctx_effective))]
        params += [f"stop {json.dumps(s)}" for s in engine.stop]
        family = self._details()["family"]
        capabilities = ["completion"] + (["tools"] if engine.has_chat else [])
        return JSONResponse({
            "modelfile": "", "parameters": "\n".join(params),
            "template": engine._chat.template if engine.has_chat else "",
            "details": self._details(),
            "model_info": {"general.architecture": family, "general.parameter_count": model.n_params,
                           f"{family}.context_length": engine.n_ctx_effective,
                           f"{family}.block_count": model.n_layers, f"{family}.vocab_size": model.vocab_size},
            "capabilities": capabilities, "modified_at": self._file()["modified_at"]})

    async def version(self, request):
        return JSONResponse({"version": __version__})

    # ---- generation ----
    async def chat(self, request):
        return await self._run(request, "chat")

    async def generate(self, request):
        return await self._run(request, "generate")

    def _openai_body(self, body: dict) -> dict:
        """The request's fields in the OpenAI names parse_chat / parse_completion check."""
        out = {"stream": body.get("stream", True)}
        options = body.get("options") or {}
        if not isinstance(options, dict):
            raise _bad("options must be an object")
        for name, key in {**NUMBER_OPTIONS, **INT_OPTIONS}.items():
            value = options.get(name)
            if value is None:
                continue
            ints = name in INT_OPTIONS
            if isinstance(value, bool) or not isinstance(value, int if ints else (int, float)):
                raise _bad(f"option \"{name}\" must be {'an integer' if ints else 'a number'}, got {value!r}")
            out[key] = value
        predict = options.get("num_predict")
        if predict is not None:
            if isinstance(predict, bool) or not isinstance(predict, int) or predict == 0 or predict < -2:
                raise _bad(f"option \"num_predict\" must be a positive integer, or -1 (no limit), got {predict!r}")
            out["max_tokens"] = predict if predict > 0 else self.engine.n_ctx_effective
        if options.get("stop") is not None:
            out["stop"] = options["stop"]
        if body.get("speculative") is not None:
            out["speculative"] = body["speculative"]
        fmt = body.get("format")
        if fmt == "json":
            out["response_format"] = {"type": "json_object"}
        elif isinstance(fmt, dict):
            out["response_format"] = {"type": "json_schema", "json_schema": {"name": "format", "schema": fmt}}
        elif fmt not in (None, ""):
            raise _bad(f"format must be \"json\" or a JSON schema, got {fmt!r}")
        return out

    def _parse(self, body: dict, route: str):
        """(the request as a GenerationRequest, or None for a bare load request)."""
        out = self._openai_body(body)
        if body.get("images"):
            raise _bad("images are not supported: this server serves a text-only model")
        if route == "chat":
            messages = body.get("messages")
            if not messages:
                return None
            for i, m in enumerate(messages if isinstance(messages, list) else []):
                if isinstance(m, dict) and m.get("images"):
                    raise _bad(f"messages[{i}].images: images are not supported: this server serves a text-only model")
            out.update(messages=messages, tools=body.get("tools"))
            return schema.parse_chat(out)
        prompt = body.get("prompt")
        if prompt in (None, ""):
            return None
        for name in ("suffix", "template"):
            if body.get(name):
                raise _bad(f"{name} is not supported by this server")
        system = body.get("system")
        if body.get("raw") or not self.engine.has_chat:
            return schema.parse_completion({**out, "prompt": prompt})
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        return schema.parse_chat({**out, "messages": messages})

    async def _run(self, request, route: str):
        t0 = time.perf_counter()
        try:
            self.api.check_loading()
            body = await _body(request, self.api.max_body)
            name = self._name(body)
            stream = body.get("stream", True)
            if not isinstance(stream, bool):
                raise _bad(f"stream must be a boolean, got {stream!r}")
            req = self._parse(body, route)
            if req is None:                        # an empty request loads the model, which is loaded already
                head = {"model": name, "created_at": created_at()}
                head.update({"message": {"role": "assistant", "content": ""}} if route == "chat" else {"response": ""})
                return JSONResponse({**head, "done_reason": "load", "done": True})
            sampler, grammar = await self.api.prepare(req)
        except ApiError as e:
            return _error(e)
        events = Events(request)
        job = self.api.make_job(req, events.emit, sampler, grammar)
        fmt = self.engine.tool_format[0] if job.tools else None
        reply = _Reply(name, route, t0, fmt)
        handed_over = False
        try:
            self.engine.submit(job)
            first = await events.next()
            if first is None:
                return Response(status_code=499)
            if isinstance(first, Failed):
                return _error(first.error)
            if stream:
                handed_over = True
                return EventStream(reply.lines(events, first), on_close=lambda: (job.cancel(), events.close()),
                                    media_type=NDJSON)
            return JSONResponse(reply.whole(first))
        except ApiError as e:
            return _error(e)
        finally:
            if not handed_over:
                job.cancel()
                events.close()


class _Reply:
    """The bodies of one Ollama reply."""

    def __init__(self, model: str, route: str, t0: float, tool_format: str | None):
        self.model, self.route, self.t0, self.tool_format = model, route, t0, tool_format

    def _head(self, text: str, calls=None) -> dict:
        out = {"model": self.model, "created_at": created_at()}
        if self.route == "chat":
            message = {"role": "assistant", "content": text}
            if calls:
                message["tool_calls"] = [{"function": {"name": c.name, "arguments": json.loads(c.arguments)}}
                                         for c in calls]
            out["message"] = message
        else:
            out["response"] = text
        return out

    def _final(self, done, text: str, calls=None) -> dict:
        s = done.stats
        eval_s = (s.generated_tokens - 1) / s.decode_tokens_per_s if s.decode_tokens_per_s > 0 else 0.0
        return {**self._head(text, calls), "done_reason": done.finish_reason, "done": True,
                "total_duration": int((time.perf_counter() - self.t0) * 1e9), "load_duration": 0,
                "prompt_eval_count": s.prompt_tokens, "prompt_eval_duration": int(s.time_to_first_token * 1e9),
                "eval_count": s.generated_tokens, "eval_duration": int(eval_s * 1e9),
                **({"draft_n": s.drafted_tokens, "draft_n_accepted": s.accepted_tokens} if s.target_passes else {})}

    def whole(self, done) -> dict:
        text, calls = done.text, []
        if self.tool_format is not None:
            content, calls = tool_formats.parse(self.tool_format, done.text)
            text = content or ""
        return self._final(done, text, calls)

    @staticmethod
    def _line(obj) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"

    async def lines(self, events, ev):
        parser = tool_formats.ToolParser(self.tool_format) if self.tool_format else None

        def settled(events_):
            for e in events_:
                if isinstance(e, tool_formats.Call):
                    yield self._line({**self._head("", [e]), "done": False})
                elif e.text:
                    yield self._line({**self._head(e.text), "done": False})
        while ev is not None:
            if isinstance(ev, Delta):
                if parser is not None:
                    for line in settled(parser.feed(ev.text)):
                        yield line
                elif ev.text:
                    yield self._line({**self._head(ev.text), "done": False})
            elif isinstance(ev, Failed):
                yield self._line({"error": ev.error.message})
                return
            else:
                if parser is not None:
                    for line in settled(parser.finish()):
                        yield line
                yield self._line(self._final(ev, ""))
                return
            ev = await events.next()


def _embedding_tag(service) -> dict:
    """/api/tags' entry of the embedding model served beside (issue 35): a folder, its size the files' sum, or a GGUF
    file."""
    model, path = service.embedder.model, os.path.abspath(service.path)
    gguf = os.path.isfile(path)
    stats = [os.stat(path)] if gguf else [os.stat(os.path.join(d, n)) for d, _, names in os.walk(path) for n in names]
    mtime = max((st.st_mtime_ns for st in stats), default=0)
    size = sum(st.st_size for st in stats)
    digest = hashlib.sha256(f"{path}:{size}:{mtime}".encode()).hexdigest()
    modified = datetime.datetime.fromtimestamp(mtime / 1e9, datetime.timezone.utc)
    family = model.config.model_type
    return {"name": service.model_id, "model": service.model_id,
            "modified_at": modified.isoformat().replace("+00:00", "Z"), "size": size, "digest": digest,
            "details": {"parent_model": "", "format": "gguf" if gguf else "safetensors", "family": family,
                        "families": [family],
                        "parameter_size": _size(model.n_params),
                        "quantization_level": str(model.weight_type).upper()}}


async def _body(request, limit: int) -> dict:
    return await read_json(request, limit)


def _size(n: int) -> str:
    """A parameter count as Ollama writes it: 8.0B, 494.0M, 4.6K."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)
