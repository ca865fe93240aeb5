"""The HTTP routes (Starlette): /v1/chat/completions, /v1/completions, /v1/models[/{id}], /health, and
/v1/embeddings (petit/server/embeddings.py).

A generation request is validated, queued on the engine, and answered only once the engine has either failed it
(an ordinary JSON error, whatever `stream` says) or produced its first token: a pre-generation failure is never a
half-sent stream. A failure after that ends the stream with a `data: {"error": ...}` event. While a request waits or
generates, the client's connection is watched: if it goes away, the job is cancelled at once.
"""
import asyncio
import hmac
import ipaddress
import time
from typing import NamedTuple

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from petit.server import constraints, schema, sse
from petit.server import tools as tool_formats
from petit.server.ollama import Ollama
from petit.server.transport import EventStream, Events, read_json
from petit.server.engine import Delta, Failed, Job
from petit.server.errors import invalid_value
from petit.server.schema import ApiError
from petit.generation.stop import check_stop_strings

MAX_BODY = 2 * 1024 * 1024


def error_response(e: ApiError) -> JSONResponse:
    return JSONResponse(e.body(), status_code=e.status, headers=e.headers)


# ---- security: Host / Origin checks and the API key ----
def _hostname(value: str) -> str:
    """The host part of a Host header or of an Origin's authority: "[::1]:8080" -> "::1", "a.b:80" -> "a.b"."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _is_ip(name: str):
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


class HostPolicy:
    """Which Host names a request may carry, against DNS rebinding: a web page whose name is made to resolve to
    127.0.0.1 still sends its own name as the Host. Allowed: "localhost", an IP address (a loopback one only when
    the server is bound to loopback), the bound host name, and the names given with --allowed-host ("*": any)."""

    def __init__(self, bind_host: str, allowed=()):
        self.bind = bind_host.strip("[]").lower()
        ip = _is_ip(self.bind)
        self.loopback = self.bind == "localhost" or (ip is not None and ip.is_loopback)
        self.names = {"localhost", self.bind} | {a.lower() for a in allowed}
        self.any = "*" in self.names

    def allows(self, hostname: str) -> bool:
        if self.any or hostname in self.names:
            return True
        ip = _is_ip(hostname)
        return ip is not None and (ip.is_loopback or not self.loopback)


class Guard:
    """ASGI middleware run before every route: the Host header (400), the Origin of a browser request (403: pages
    of other sites may not drive the server) and, when an API key is set, `Authorization: Bearer KEY` (401;
    /health is exempt)."""

    def __init__(self, app, hosts: HostPolicy, api_key: str | None = None):
        self.app, self.hosts, self.api_key = app, hosts, api_key

    def _check(self, scope) -> ApiError | None:
        headers = Headers(scope=scope)
        host = headers.get("host")
        if host is not None and not self.hosts.allows(_hostname(host)):
            return ApiError(400, f"Invalid Host header {host!r}: this server answers only to its own address "
                                 "(start it with --allowed-host NAME to add a name).", code="invalid_host")
        origin = headers.get("origin")           # "null" too: sandboxed frames of any site send it
        if origin is not None:
            authority = origin.split("://", 1)[-1].split("/", 1)[0]
            if not self.hosts.allows(_hostname(authority)):
                return ApiError(403, f"Requests from web pages of {origin} are not allowed.", code="invalid_origin")
        if self.api_key is not None and scope["path"] not in ("/health", "/v1/health"):
            auth = headers.get("authorization", "")
            scheme, _, token = auth.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self.api_key.encode()):
                return ApiError(401, "Incorrect API key provided: give it as 'Authorization: Bearer KEY'.",
                                code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            error = self._check(scope)
            if error is not None:
                await error_response(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)


# ---- the request log ----
class LoggedRequest(NamedTuple):
    """One HTTP request, once it has been answered (or its client went away: status None)."""
    client: str                  # the client's address ("-" when unknown)
    method: str
    path: str
    status: int | None
    duration_s: float


def request_line(r: LoggedRequest) -> str:
    """The log line of one request, as `petit serve --log-requests` prints it and the app's Server tab shows it:
    `127.0.0.1 GET /v1/models 200 1 ms` (`disconnected` for the status of a client that left first)."""
    status = r.status if r.status is not None else "disconnected"
    return f"{r.client} {r.method} {r.path} {status} {1000 * r.duration_s:.0f} ms"


class RequestLog:
    """ASGI middleware: after each HTTP request (whatever answered it, the Guard included),
    `on_request(LoggedRequest)`. It runs on the server's event loop: it must be quick."""

    def __init__(self, app, on_request):
        self.app, self.on_request = app, on_request

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0, status = time.perf_counter(), None

        async def send_logged(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)
        try:
            await self.app(scope, receive, send_logged)
        finally:
            client = (scope.get("client") or ("-",))[0]
            self.on_request(LoggedRequest(client, scope.get("method", "-"), scope.get("path", ""), status,
                                          time.perf_counter() - t0))


# ---- routes ----
class Api:
    def __init__(self, engine, model_id: str, created: int, max_body: int = MAX_BODY):
        self.engine, self.model_id, self.created, self.max_body = engine, model_id, created, max_body
        self.embedding_id = None          # the embedding model served beside (issue 35), listed after the chat model
        self.embeddings = None            # its EmbeddingService (petit/server/embeddings.py)

    def _model(self, name: str | None = None) -> dict:
        return {"id": name or self.model_id, "object": "model", "created": self.created, "owned_by": "petit"}

    async def models(self, request):
        extra = [self._model(self.embedding_id)] if self.embedding_id else []
        return JSONResponse({"object": "list", "data": [self._model()] + extra})

    async def model(self, request):
        name = request.path_params["model_id"]
        if self.embedding_id is not None and name == self.embedding_id:
            return JSONResponse(self._model(name))
        if name != self.model_id:
            return error_response(ApiError(404, f"The model '{name}' does not exist.", param="model",
                                           code="model_not_found"))
        return JSONResponse(self._model())

    async def lora_adapters(self, request):
        """llama.cpp's GET /lora-adapters: the adapters `--lora` loaded, by id, with the scale each runs at when a
        request says nothing (the first one's; the others 0)."""
        default = self.engine.default_adapter
        return JSONResponse([{"id": i, "path": path, "scale": default[1] if default and default[0] == i else 0.0}
                             for i, (path, _) in enumerate(self.engine.adapter_files)])

    async def health(self, request):
        engine = self.engine
        if engine.state == "loading":
            return error_response(ApiError(503, "The model is loading.", code="model_loading",
                                           headers={"Retry-After": "1"}))
        if engine.state != "ready" or not engine.alive:
            return error_response(ApiError(503, "The engine is not running.", code="unavailable"))
        return JSONResponse({"status": "ok", "model": self.model_id, "busy": engine.busy, "queued": engine.queued})

    async def chat(self, request):
        return await self._generate(request, schema.parse_chat)

    async def completions(self, request):
        return await self._generate(request, schema.parse_completion)

    def check_loading(self) -> None:
        """503 while the model loads, before the body is read: the client retries anyway."""
        if self.engine.state == "loading":
            raise ApiError(503, "The model is loading; retry shortly.", code="model_loading",
                           headers={"Retry-After": "1"})

    async def prepare(self, req) -> tuple:
        """The request's Sampler and compiled grammar (None for none), checked against the model; ApiError if not."""
        if req.stop is not None:
            try:                                      # the caps every caller of StopStrings gets, as a 400 here
                check_stop_strings(req.stop)
            except ValueError as e:
                raise invalid_value("stop", f"{e}.") from None
        if self.engine.state != "ready":              # submit() answers 503
            return None, None
        sampler = self.engine.make_sampler(req.sampling)
        self.engine.check_speculative(req.speculative)
        self.engine.check_lora(req.lora)
        constraints.check_bias(self.engine, req.logit_bias)
        grammar = None
        if req.response_format is not None or req.tool_choice not in ("none", "auto"):
            grammar = await asyncio.to_thread(constraints.grammar_for, self.engine, req)
        return sampler, grammar

    def make_job(self, req, emit, sampler, grammar) -> Job:
        tools = req.tools if req.tool_choice != "none" else None
        return Job(req.kind, emit, sampler, req.max_tokens or self.engine.max_tokens,
                   self.engine.stop if req.stop is None else req.stop, messages=req.messages, prompt=req.prompt,
                   stream=req.stream, logprobs=req.logprobs, top_logprobs=req.top_logprobs,
                   logit_bias=req.logit_bias, grammar=grammar, tools=tools, speculative=req.speculative,
                   lora=req.lora)

    async def _generate(self, request, parse):
        try:
            self.check_loading()
            req = parse(await read_json(request, self.max_body))
            sampler, grammar = await self.prepare(req)
        except ApiError as e:
            return error_response(e)
        events = Events(request)
        job = self.make_job(req, events.emit, sampler, grammar)
        tools = job.tools
        handed_over = False
        try:
            self.engine.submit(job)
            first = await events.next()
            if first is None:                         # the client left before anything was produced
                return Response(status_code=499)
            if isinstance(first, Failed):
                return error_response(first.error)
            shapes = sse.Shapes(req.kind, self.model_id, req.include_usage, req.logprobs)
            tool_format = self.engine.tool_format[0] if tools else None
            if req.stream:
                handed_over = True
                return EventStream(self._stream(events, shapes, first, tool_format),
                                    on_close=lambda: (job.cancel(), events.close()))
            text, calls, finish = first.text, [], first.finish_reason
            if tool_format is not None:
                text, found = tool_formats.parse(tool_format, first.text)
                calls = [(tool_formats.call_id(tool_format), c) for c in found]
                finish = "tool_calls" if calls and finish == "stop" else finish
            return JSONResponse(shapes.response(text, finish, first.usage, first.timings, first.logprobs, calls))
        except ApiError as e:
            return error_response(e)
        finally:
            if not handed_over:
                job.cancel()                           # a no-op once the job is done
                events.close()

    @staticmethod
    async def _stream(events, shapes, ev, tool_format=None):
        opening = shapes.first()
        if opening is not None:
            yield opening
        parser = tool_formats.ToolParser(tool_format, incremental=True) if tool_format else None
        calls = 0

        def pieces(settled, logprobs):
            """The chunks of what the tool parser settled: content deltas and calls (a call's index is calls - 1)."""
            nonlocal calls
            for e in settled:
                if isinstance(e, (tool_formats.Call, tool_formats.CallStart)):
                    yield shapes.tool_call_head(calls, tool_formats.call_id(tool_format), e.name)
                    calls += 1
                    if isinstance(e, tool_formats.Call):
                        yield shapes.tool_call_args(calls - 1, e.arguments)
                elif isinstance(e, tool_formats.CallArgs):
                    yield shapes.tool_call_args(calls - 1, e.text)
                elif e.text:
                    yield shapes.delta(e.text, logprobs)
                    logprobs = None
            if logprobs:                               # tokens held back by the parser: their logprobs go now
                yield shapes.delta("", logprobs)
        while ev is not None:                          # None: the client has gone
            if isinstance(ev, Delta):
                if parser is not None:
                    for chunk in pieces(parser.feed(ev.text), ev.logprobs):
                        yield chunk
                elif ev.text or ev.logprobs:
                    yield shapes.delta(ev.text, ev.logprobs)
            elif isinstance(ev, Failed):
                yield sse.event(ev.error.body())
                return
            else:
                finish = ev.finish_reason
                if parser is not None:
                    for chunk in pieces(parser.finish(), None):
                        yield chunk
                    finish = "tool_calls" if calls and finish == "stop" else finish
                yield shapes.finish(finish, ev.pending)
                if shapes.include_usage:
                    yield shapes.usage(ev.usage)
                yield sse.DONE
                return
            ev = await events.next()


async def _http_error(request, exc: HTTPException):
    if exc.status_code == 404:
        e = ApiError(404, f"Unknown request URL: {request.method} {request.url.path}. This server answers "
                          "/v1/chat/completions, /v1/completions, /v1/models, /v1/embeddings, /health and Ollama's "
                          "/api/chat, /api/generate, /api/tags, /api/show, /api/version and /api/embed.",
                     code="unknown_url")
    elif exc.status_code == 405:
        e = ApiError(405, f"Method {request.method} is not allowed on {request.url.path}.",
                     code="method_not_allowed")
    else:
        e = ApiError(exc.status_code, str(exc.detail))
    return error_response(e)


async def _internal_error(request, exc: Exception):
    return error_response(ApiError(500, f"internal error: {type(exc).__name__}: {exc}"))


def create_app(engine, *, model_id: str, created: int, api_key: str | None = None, hosts: HostPolicy | None = None,
               max_body: int = MAX_BODY, request_log=None, embeddings=None):
    """The ASGI application for one engine: the routes behind the Guard, behind the RequestLog when `request_log`
    (a callable taking a LoggedRequest) is given. `embeddings`: the EmbeddingService of an embedding model served
    beside the chat model (petit/server/embeddings.py), or None (the embedding routes then answer 400)."""
    from petit.server.embeddings import EmbeddingRoutes
    api = Api(engine, model_id, created, max_body)
    api.embedding_id = embeddings.model_id if embeddings is not None else None
    api.embeddings = embeddings
    emb = EmbeddingRoutes(embeddings, model_id, max_body)
    routes = []
    for prefix in ("/v1", ""):                        # some clients are configured without the /v1
        routes += [Route(f"{prefix}/chat/completions", api.chat, methods=["POST"]),
                   Route(f"{prefix}/completions", api.completions, methods=["POST"]),
                   Route(f"{prefix}/models", api.models, methods=["GET"]),
                   Route(f"{prefix}/models/{{model_id:path}}", api.model, methods=["GET"]),
                   Route(f"{prefix}/health", api.health, methods=["GET"]),
                   Route(f"{prefix}/embeddings", emb.openai, methods=["POST"])]
    routes.append(Route("/lora-adapters", api.lora_adapters, methods=["GET"]))    # llama.cpp's server's
    ollama = Ollama(api)
    routes += [Route("/api/chat", ollama.chat, methods=["POST"]),
               Route("/api/generate", ollama.generate, methods=["POST"]),
               Route("/api/tags", ollama.tags, methods=["GET"]),
               Route("/api/show", ollama.show, methods=["POST"]),
               Route("/api/version", ollama.version, methods=["GET"]),
               Route("/api/embed", emb.ollama, methods=["POST"])]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error, Exception: _internal_error})
    guarded = Guard(app, hosts or HostPolicy("127.0.0.1"), api_key)
    return guarded if request_log is None else RequestLog(guarded, request_log)
