"""The OpenAI-compatible HTTP API, as the chat uses it: list /v1/models, and stream /v1/chat/completions as
Server-Sent Events. No Qt here: the generation worker calls it on its own thread.

Every failure becomes a RemoteError whose message says what happened and what to do (a refused key, an unknown
model or URL, a rate limit with its Retry-After, a timeout, a rejected parameter, a stream that dropped); what
arrived before a failure is the caller's to keep. `abort()` (from any thread) shuts the connection's socket, so a
read blocked on a silent server returns at once.
"""
import json
import socket
import time
from dataclasses import dataclass

import httpx

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 120.0             # a slow model's first token may take long; a silent server gets this long
transport = None                 # an httpx transport to use instead of the network (the tests' scripted servers)
DEFAULT_SAMPLING = {"top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0}   # not OpenAI's: sent only when set


class RemoteError(Exception):
    """A sentence for the user; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


@dataclass
class Backend:
    base_url: str                # e.g. http://127.0.0.1:8080/v1 (the part before /models, /chat/completions)
    api_key: str | None = None
    name: str = ""


def client(backend: Backend, read_timeout: float | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {backend.api_key}"} if backend.api_key else {}
    timeout = httpx.Timeout(CONNECT_TIMEOUT, read=READ_TIMEOUT if read_timeout is None else read_timeout)
    return httpx.Client(base_url=backend.base_url.rstrip("/") + "/", headers=headers, timeout=timeout,
                        transport=transport)


def _server_message(response: httpx.Response) -> tuple[str, str | None]:
    """The error's message (and the parameter it names) from an OpenAI error body, else the body's text."""
    try:
        body = json.loads(response.read() or b"{}")
    except ValueError:
        body = None
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("detail") or "").strip(), err.get("param")
        if isinstance(err, str):
            return err, None
    text = response.text.strip()
    return text[:300], None


def status_error(response: httpx.Response, model: str = "") -> RemoteError:
    code = response.status_code
    message, param = _server_message(response)
    said = f": {message.rstrip('.')}" if message else ""
    where = str(response.request.url)
    if code in (401, 403):
        text = (f"the server refused the API key ({code}{said}). Check the backend's key in the Models tab")
    elif code == 404:
        text = (f"not found ({code}) at {where}{said}. Check the backend's base URL (it usually ends in /v1)"
                + (f" and that it serves the model {model!r}" if model else ""))
    elif code == 429:
        retry = response.headers.get("retry-after")
        text = f"the server is busy or rate-limited (429{said})" + (
            f"; it asks to retry in {retry} s" if retry else "; try again later")
    elif code in (400, 422):
        text = f"the server rejected the request ({code}{said})"
        if param:
            text += f"; the parameter it names: {param!r} (change that setting, or reset the settings)"
    elif code >= 500:
        text = f"the server failed ({code}{said})"
    else:
        text = f"unexpected answer {code} from {where}{said}"
    return RemoteError(text, code)


def _network_error(e: httpx.HTTPError, backend: Backend, read_timeout: float) -> RemoteError:
    if isinstance(e, httpx.ConnectTimeout):
        return RemoteError(f"could not connect to {backend.base_url} within {CONNECT_TIMEOUT:g} s")
    if isinstance(e, httpx.TimeoutException):
        return RemoteError(f"the server at {backend.base_url} stopped answering (nothing for {read_timeout:g} s)")
    if isinstance(e, httpx.ConnectError):
        return RemoteError(f"could not reach {backend.base_url}: {e or 'connection refused'}")
    if isinstance(e, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return RemoteError(f"the connection to {backend.base_url} dropped: {e or type(e).__name__}")
    return RemoteError(f"{backend.base_url}: {e or type(e).__name__}")


def list_models(backend: Backend, report=None) -> list[str]:
    """The model ids /v1/models lists (sorted)."""
    try:
        with client(backend, read_timeout=30.0) as c:
            r = c.get("models")
            if r.status_code != 200:
                raise status_error(r)
            body = r.json()
    except httpx.HTTPError as e:
        raise _network_error(e, backend, 30.0) from None
    except ValueError:
        raise RemoteError(f"{backend.base_url}models did not answer with JSON: is this an OpenAI-compatible "
                          "endpoint?") from None
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise RemoteError(f"{backend.base_url}models answered without a model list")
    return sorted(str(m["id"]) for m in data if isinstance(m, dict) and m.get("id"))


def request_body(model: str, messages: list, options: dict) -> dict:
    """The chat completion request for the chat's options (app.settings.values.session_options)."""
    s = options["sampler"]
    body = {"model": model, "messages": messages, "stream": True, "stream_options": {"include_usage": True},
            "max_tokens": options["max_tokens"], "temperature": s["temperature"], "top_p": s["top_p"],
            "frequency_penalty": s["frequency_penalty"], "presence_penalty": s["presence_penalty"]}
    if s.get("seed") is not None:
        body["seed"] = s["seed"]
    if options.get("tools"):                 # the MCP servers' tools (app/tools)
        body["tools"] = options["tools"]
        body["tool_choice"] = options.get("tool_choice") or "auto"
    for key, default in DEFAULT_SAMPLING.items():
        if s.get(key) not in (None, default):
            body[key] = s[key]
    return body


class ChatStream:
    """One streamed reply: iterate for text deltas; then `finish_reason`, `usage` and the timings are set."""

    def __init__(self, backend: Backend, body: dict):
        self.backend, self.body = backend, body
        self.finish_reason: str | None = None
        self.usage: dict = {}
        self.tool_calls: list = []   # the reply's calls, OpenAI-shaped, their streamed pieces joined
        self.chunks = 0
        self.started = time.perf_counter()
        self.first_token_at: float | None = None
        self.ended_at: float | None = None
        self._socket = None
        self._aborted = False

    def abort(self) -> None:
        """End the stream from any thread (a blocked read returns at once)."""
        self._aborted = True
        sock = self._socket
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _trace(self, event: str, info: dict) -> None:
        """httpcore's trace hook: the socket, as soon as it is connected, so Stop works before the first byte."""
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info.get("return_value")
            self._socket = stream.get_extra_info("socket") if stream is not None else None
            if self._aborted:
                self.abort()

    @property
    def aborted(self) -> bool:
        return self._aborted

    def __iter__(self):
        try:
            with client(self.backend) as c, c.stream("POST", "chat/completions", json=self.body,
                                                     extensions={"trace": self._trace}) as r:
                if r.status_code != 200:
                    raise status_error(r, self.body["model"])
                yield from self._events(r)
        except httpx.HTTPError as e:
            if self._aborted:
                return
            raise _network_error(e, self.backend, READ_TIMEOUT) from None
        finally:
            self.ended_at = time.perf_counter()
            self._socket = None

    def _events(self, r: httpx.Response):
        done = False
        for line in r.iter_lines():
            if self._aborted:
                return
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            try:
                chunk = json.loads(data)
            except ValueError:
                raise RemoteError(f"the server sent a line that is not JSON mid-reply: {data[:120]!r}") from None
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):
                err = chunk["error"]
                raise RemoteError("the server reported an error mid-reply: "
                                  + str(err.get("message") if isinstance(err, dict) else err))
            if isinstance(chunk.get("usage"), dict):
                self.usage = chunk["usage"]
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                text = delta.get("content") or choice.get("text") or ""
                if text:
                    if self.first_token_at is None:
                        self.first_token_at = time.perf_counter()
                    self.chunks += 1
                    yield text
                for piece in delta.get("tool_calls") or []:
                    self._add_call_piece(piece)
                if choice.get("finish_reason"):
                    self.finish_reason = choice["finish_reason"]
        if not done and self.finish_reason is None and not self._aborted:
            raise RemoteError(f"the server at {self.backend.base_url} closed the stream before the reply ended")

    def _add_call_piece(self, piece: dict) -> None:
        """A streamed piece of a tool call: the call at `index` is started (its id, name) or its arguments grow."""
        if not isinstance(piece, dict):
            return
        index = piece.get("index", len(self.tool_calls))
        while len(self.tool_calls) <= index:
            self.tool_calls.append({"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
        call, fn = self.tool_calls[index], piece.get("function") or {}
        call["id"] = piece.get("id") or call["id"]
        call["function"]["name"] += fn.get("name") or ""
        call["function"]["arguments"] += fn.get("arguments") or ""

    def stats(self) -> dict:
        """The reply's figures as the local engine's Stats name them (the speed measured here)."""
        generated = int(self.usage.get("completion_tokens") or self.chunks)
        end = self.ended_at or time.perf_counter()
        out = {"finish_reason": self.finish_reason or ("cancelled" if self._aborted else "stop"),
               "generated_tokens": generated, "prompt_tokens": int(self.usage.get("prompt_tokens") or 0)}
        if self.first_token_at is not None:
            out["time_to_first_token"] = self.first_token_at - self.started
            decoding = end - self.first_token_at
            if decoding > 0 and generated > 1:
                out["decode_tokens_per_s"] = (generated - 1) / decoding
        return out
