"""`petit serve` over raw HTTP: every error with its exact status and body, the SSE framing byte by byte, a client
that disconnects mid-stream, concurrent clients, the bounded queue (429), the body limit (413), the API key (401),
the Host / Origin checks, 503 while loading, and failures before and during a stream."""
import json
import socket
import threading
import time
from contextlib import contextmanager

import numpy as np
import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

import petit  # noqa: E402
import petit.server.engine as engine_module  # noqa: E402
from petit.assets import default_model_path  # noqa: E402
from petit.generation.sample import Sampler  # noqa: E402
from petit.server import Server  # noqa: E402
from petit.server.engine import ServerWorker  # noqa: E402
from petit.generation.session import Session  # noqa: E402
from petit.server.tools import describe  # noqa: E402

MODEL = default_model_path()
CHATML = "<|im_start|>user\nwhat is 3 plus 4?<|im_end|>\n<|im_start|>assistant\n"
ANSWERS = {"what is 12 plus 7?": "19", "which is bigger, 2 or 16?": "16", "count from 3 to 9": "3 4 5 6 7 8 9",
           "what is the opposite of hot?": "cold"}
END = 511                                     # <|im_end|> in the bundled model
ENGINE_OPTIONS = ("max_queue", "template", "max_tokens", "max_batch", "max_cache_mib")


def _no_server_threads():
    return not any(t.name.startswith("petit-") and t.is_alive() for t in threading.enumerate())


@contextmanager
def serving(**options):
    engine_options = {"max_tokens": 32} | {k: options.pop(k) for k in list(options) if k in ENGINE_OPTIONS}
    server = Server(ServerWorker(MODEL, **engine_options), port=0, **options).start()
    try:
        yield server
    finally:
        server.stop()
        assert not server.alive


@pytest.fixture(scope="module")
def server():
    with serving(max_body=4096) as server:
        yield server
    assert _no_server_threads()


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server.url, timeout=10) as client:
        yield client


@pytest.fixture
def slow(monkeypatch):
    """Requests sample 10 ms a token and never end on their own: a reply lasts until max_tokens."""
    class Slow(Sampler):
        def __call__(self, logits, context_ids=None):
            time.sleep(0.01)
            logits = np.array(logits, copy=True)
            logits[END] = -np.inf
            return super().__call__(logits, context_ids)
    monkeypatch.setattr(engine_module, "Sampler", Slow)
    return monkeypatch


@pytest.fixture
def gate(monkeypatch):
    """Requests wait before each token until gate.set(): the test decides when the running reply moves on."""
    gate = threading.Event()

    class Gated(Sampler):
        def __call__(self, logits, context_ids=None):
            assert gate.wait(10)
            return super().__call__(logits, context_ids)
    monkeypatch.setattr(engine_module, "Sampler", Gated)
    yield gate
    gate.set()


def chat(text, **fields):
    return {"model": "m", "messages": [{"role": "user", "content": text}], **fields}


def error(message, param=None, code=None, type="invalid_request_error"):
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def raw_request(port, method, path, body=b"", headers=()) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json",
            f"Content-Length: {len(body)}", "Connection: close", *headers]
    s.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    return s


def read_until(s: socket.socket, marker: bytes) -> bytes:
    """What the server has sent up to and including `marker` (e.g. the first event of a stream)."""
    data = b""
    while marker not in data:
        chunk = s.recv(65536)
        assert chunk, data
        data += chunk
    return data


def read_response(s: socket.socket, data: bytes = b""):
    """(status, headers, body) of a whole response (the body de-chunked); `data`: what was read already."""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    if headers.get("transfer-encoding") == "chunked":
        out = b""
        while True:
            size, _, body = body.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            out, body = out + body[:n], body[n + 2:]
        body = out
    return int(lines[0].split()[1]), headers, body


def wait_for(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


# ---- errors: status and exact body, decided before any byte of a stream ----
@pytest.mark.parametrize("body, status, expected", [
    (b'{"messages": [', 400, None),
    (b'[' * 3000, 400, None),                     # deeper than Python's recursion limit
    (b'{"messages": "\xff"}', 400, None),          # not UTF-8
    (b'[1, 2]', 400, error("The request body must be a JSON object.", code="invalid_json")),
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', 400, None),
    (json.dumps(chat("hi", temperature="hot")).encode(), 400,
     error("Invalid type for 'temperature': expected a number, but got a string instead.", "temperature",
           "invalid_type")),
    (json.dumps(chat("hi", stream="true")).encode(), 400,
     error("Invalid type for 'stream': expected a boolean, but got a string instead.", "stream", "invalid_type")),
    (json.dumps(chat("hi", n=2)).encode(), 400,
     error("Invalid value for 'n': only n=1 is supported (one choice per request), got 2.", "n", "invalid_value")),
    (json.dumps(chat("hi", max_tokens=0)).encode(), 400,
     error("Invalid value for 'max_tokens': expected an integer >= 1, got 0.", "max_tokens", "invalid_value")),
    (json.dumps(chat("hi", stop=[1])).encode(), 400,
     error("Invalid type for 'stop': expected a string or an array of strings, but got an array instead.", "stop",
           "invalid_type")),
    (json.dumps(chat("hi", stop=[f"s{i}" for i in range(65)])).encode(), 400,
     error("Invalid value for 'stop': 65 stop strings given; at most 64 are supported.", "stop", "invalid_value")),
    (json.dumps(chat("hi", stop=["ok", "x" * 1001])).encode(), 400,
     error("Invalid value for 'stop': stop string 1 is 1001 characters long; at most 1000 are supported.", "stop",
           "invalid_value")),
    (json.dumps(chat("hi", temperature=-1)).encode(), 400,
     error("Invalid value for 'temperature': temperature must be a finite number >= 0, got -1.", "temperature",
           "invalid_value")),
    (json.dumps(chat("hi", top_k=-1, stream=True)).encode(), 400,
     error("Invalid value for 'top_k': top_k must be an int >= 0 (0 = off), got -1.", "top_k", "invalid_value")),
    (json.dumps({"model": "m"}).encode(), 400,
     error("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")),
    (json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}).encode(),
     400, error("Invalid value for 'messages': the last message must have role 'user' (or 'tool', a tool's result), "
                "got 'assistant'.", "messages", "invalid_value")),
    (json.dumps({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})
     .encode(), 400, error("Invalid value for 'messages[0].content[0]': only text content parts ({\"type\": \"text\", "
                           "\"text\": ...}) are supported, got type 'image_url'.", "messages[0].content[0]",
                           "invalid_value")),
    (json.dumps({"messages": [{"role": "robot", "content": "hi"}]}).encode(), 400,
     error("Invalid value for 'messages[0].role': expected one of system, developer, user, assistant, tool, function, "
           "got 'robot'.", "messages[0].role", "invalid_value")),
])
def test_bad_chat_requests_get_openai_errors(server, body, status, expected):
    code, headers, raw = read_response(raw_request(server.port, "POST", "/v1/chat/completions", body))
    assert (code, headers["content-type"]) == (status, "application/json")
    got = json.loads(raw)
    if expected is None:                          # a JSON syntax error: the parser's words, our shape
        assert got["error"]["message"].startswith("We could not parse the JSON body of your request (")
        assert {k: v for k, v in got["error"].items() if k != "message"} == \
            {"type": "invalid_request_error", "param": None, "code": "invalid_json"}
    else:
        assert got == expected


@pytest.mark.parametrize("body, expected", [
    ({"prompt": ["a", "b"]}, error("Invalid value for 'prompt': expected a string or an array of exactly one string "
                                   "(one prompt per request; token-id prompts are not supported).", "prompt",
                                   "invalid_value")),
    ({"prompt": ""}, error("Invalid value for 'prompt': the prompt is empty: give at least one character to "
                           "continue.", "prompt", "invalid_value")),
    ({"prompt": 7}, error("Invalid type for 'prompt': expected a string or an array of one string, but got an "
                          "integer instead.", "prompt", "invalid_type")),
])
def test_bad_completion_requests_get_openai_errors(client, body, expected):
    r = client.post("/completions", json=body)
    assert (r.status_code, r.json()) == (400, expected)


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_longer_than_the_context(client, stream):
    text = "hello " * 60
    n = len(Session(petit.load(MODEL)).prompt_ids([{"role": "user", "content": text}]))
    r = client.post("/chat/completions", json=chat(text, stream=stream))
    assert (r.status_code, r.headers["content-type"]) == (400, "application/json")
    assert r.json() == error(f"This model's maximum context length is 128 tokens. However, your messages resulted in "
                             f"{n} tokens (at most 127 fit, to leave room for the reply). Please reduce the length of "
                             f"the messages.", "messages", "context_length_exceeded")
    r = client.post("/completions", json={"prompt": text * 2, "stream": stream})
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    assert r.json()["error"]["param"] == "prompt"
    assert client.post("/chat/completions", json=chat("what is 12 plus 7?")).json()["choices"][0]["message"] == \
        {"role": "assistant", "content": "19"}      # and the engine carries on


ADD = {"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("extra", [{"tools": [ADD], "tool_choice": "required"}, {"tools": [ADD]}])
def test_a_prompt_whose_tools_do_not_fit_the_context_is_a_400_too(client, stream, extra):
    """The bundled model's template ignores `tools`, so Petit describes them in the system prompt (434 tokens): a
    short question does not fit its 128-token context with them. Said as OpenAI says it, not a 500."""
    ask = [{"role": "user", "content": "what is 12 plus 7?"}]
    session = Session(petit.load(MODEL))
    n, n_tools = len(session.prompt_ids(ask)), len(session.prompt_ids(describe(ask, [ADD])))
    r = client.post("/chat/completions", json={"messages": ask, "stream": stream, **extra})
    assert (r.status_code, r.json()) == (400, error(
        f"This model's maximum context length is 128 tokens. However, your messages resulted in {n_tools} tokens "
        f"({n} in the messages, {n_tools - n} in the functions; at most 127 fit, to leave room for the reply). Please "
        f"reduce the length of the messages or functions.", "messages", "context_length_exceeded"))


@pytest.mark.parametrize("format", [{"type": "json_object"},
                                    {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}])
def test_a_prompt_longer_than_the_context_with_a_response_format_is_a_400(client, format):
    text = "hello " * 60
    n = len(Session(petit.load(MODEL)).prompt_ids([{"role": "user", "content": text}]))
    r = client.post("/chat/completions", json=chat(text, response_format=format))
    assert (r.status_code, r.json()["error"]["code"]) == (400, "context_length_exceeded")
    assert f"your messages resulted in {n} tokens (at most 127 fit" in r.json()["error"]["message"]


def test_a_reply_that_fills_the_context_ends_with_length(client, slow):
    text = "hello " * 38
    n = len(Session(petit.load(MODEL)).prompt_ids([{"role": "user", "content": text}]))
    assert 120 < n < 127                          # a few tokens of room left in the 128-token context
    r = client.post("/chat/completions", json=chat(text, max_tokens=100)).json()
    assert r["choices"][0]["finish_reason"] == "length"
    assert (r["usage"]["prompt_tokens"], r["usage"]["completion_tokens"]) == (n, 128 - n)


def test_unknown_urls_methods_and_models(client):
    r = client.get("/nope")
    assert (r.status_code, r.json()) == (404, error(
        "Unknown request URL: GET /v1/nope. This server answers /v1/chat/completions, /v1/completions, /v1/models, "
        "/v1/embeddings, /health and Ollama's /api/chat, /api/generate, /api/tags, /api/show, /api/version and "
        "/api/embed.", code="unknown_url"))
    r = client.get("/chat/completions")
    assert (r.status_code, r.json()) == (405, error("Method GET is not allowed on /v1/chat/completions.",
                                                    code="method_not_allowed"))
    r = client.get("/models/gpt-4")
    assert (r.status_code, r.json()) == (404, error("The model 'gpt-4' does not exist.", "model", "model_not_found"))
    m = client.get("/models/default-q8_0").json()
    assert m == {"id": "default-q8_0", "object": "model", "created": m["created"], "owned_by": "petit"}
    assert client.get("/models").json() == {"object": "list", "data": [m]}


def test_health(client):
    assert client.get("/health").json() == {"status": "ok", "model": "default-q8_0", "busy": False, "queued": 0}


def test_the_body_size_limit(server, client):
    big = json.dumps(chat("x" * 5000)).encode()
    too_large = error("The request body is larger than the limit of 4096 bytes.", code="request_too_large")
    r = client.post("/chat/completions", content=big, headers={"content-type": "application/json"})
    assert (r.status_code, r.json()) == (413, too_large)

    def chunks():                                 # no Content-Length: counted as it arrives
        for i in range(0, len(big), 1000):
            yield big[i:i + 1000]
    r = client.post("/chat/completions", content=chunks(), headers={"content-type": "application/json"})
    assert (r.status_code, r.json()) == (413, too_large)
    assert client.post("/chat/completions", json=chat("what is 12 plus 7?")).status_code == 200


# ---- streaming ----
def test_sse_framing_byte_by_byte(server, client):
    client.post("/chat/completions", json=chat("what is 12 plus 7?"))      # the cache now shares 3 tokens
    assert not server.engine.busy          # its session was idle again before the answer went out
    body = json.dumps(chat("count from 3 to 9", stream=True, stream_options={"include_usage": True})).encode()
    status, headers, raw = read_response(raw_request(server.port, "POST", "/v1/chat/completions", body))
    assert status == 200
    assert headers["content-type"] == "text/event-stream; charset=utf-8"
    assert headers["cache-control"] == "no-cache" and headers["transfer-encoding"] == "chunked"
    first = json.loads(raw.split(b"\n\n")[0][len(b"data: "):])
    rid, created = first["id"], first["created"]
    assert rid.startswith("chatcmpl-") and len(rid) == len("chatcmpl-") + 32

    def chunk(delta, finish="null"):
        return (f'data: {{"id":"{rid}","object":"chat.completion.chunk","created":{created},"model":"default-q8_0",'
                f'"system_fingerprint":"petit-0.1.0","choices":[{{"index":0,"delta":{delta},"logprobs":null,'
                f'"finish_reason":{finish}}}],"usage":null}}\n\n')
    usage = (f'data: {{"id":"{rid}","object":"chat.completion.chunk","created":{created},"model":"default-q8_0",'
             f'"system_fingerprint":"petit-0.1.0","choices":[],"usage":{{"prompt_tokens":13,"completion_tokens":8,'
             f'"total_tokens":21,"prompt_tokens_details":{{"cached_tokens":3}}}}}}\n\n')
    words = ["3", " 4", " 5", " 6", " 7", " 8", " 9"]
    expected = (chunk('{"role":"assistant","content":""}') + "".join(chunk(f'{{"content":"{w}"}}') for w in words)
                + chunk("{}", '"stop"') + usage + "data: [DONE]\n\n")
    assert raw.decode() == expected


def test_a_stream_without_usage_has_no_usage_fields(client):
    with client.stream("POST", "/completions", json={"prompt": CHATML, "stream": True}) as r:
        raw = r.read().decode()
    events = raw.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    chunks = [json.loads(e[len("data: "):]) for e in events[:-2]]
    assert all("usage" not in c and c["object"] == "text_completion" for c in chunks)
    assert [(c["choices"][0]["text"], c["choices"][0]["finish_reason"]) for c in chunks] == [("7", None), ("", "stop")]


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_disconnects_stops_the_generation_at_once(server, slow, stream):
    engine = server.engine
    done = engine.jobs_done
    body = json.dumps(chat("what is 12 plus 7?", stream=stream, max_tokens=100)).encode()
    s = raw_request(server.port, "POST", "/v1/chat/completions", body)
    if stream:
        assert read_until(s, b"\n\n\r\n").startswith(b"HTTP/1.1 200 OK")     # the reply has started
    else:
        wait_for(lambda: engine.busy)
        time.sleep(0.05)
    s.close()
    wait_for(lambda: engine.jobs_done == done + 1 and not engine.busy)
    assert engine.last_stats.finish_reason == "cancelled" and engine.last_stats.generated_tokens < 60
    slow.undo()
    r = httpx.post(server.url + "/chat/completions", json=chat("what is 12 plus 7?"), timeout=10).json()
    assert r["choices"][0]["message"]["content"] == "19"       # the next request decodes cleanly
    assert r["usage"]["prompt_tokens_details"]["cached_tokens"] == 13


def test_a_failure_before_the_first_token_is_a_json_error_and_during_a_stream_an_error_event(server, monkeypatch):
    class Failing(Sampler):
        calls = 0

        def __call__(self, logits, context_ids=None):
            Failing.calls += 1
            if Failing.calls > self.after:
                raise RuntimeError("boom")
            return super().__call__(logits, context_ids)
    monkeypatch.setattr(engine_module, "Sampler", Failing)
    boom = {"error": {"message": "internal error: RuntimeError: boom", "type": "server_error", "param": None,
                      "code": None}}
    Failing.after = 0
    r = httpx.post(server.url + "/chat/completions", json=chat("count from 3 to 9", stream=True), timeout=10)
    assert (r.status_code, r.headers["content-type"], r.json()) == (500, "application/json", boom)
    Failing.calls, Failing.after = 0, 3
    r = httpx.post(server.url + "/chat/completions", json=chat("count from 3 to 9", stream=True), timeout=10)
    events = r.text.split("\n\n")
    assert r.status_code == 200 and events[-1] == ""
    assert [json.loads(e[6:])["choices"][0]["delta"] for e in events[:4]] == \
        [{"role": "assistant", "content": ""}, {"content": "3"}, {"content": " 4"}, {"content": " 5"}]
    assert events[4] == "data: " + json.dumps(boom, separators=(",", ":")) and len(events) == 6
    monkeypatch.undo()
    r = httpx.post(server.url + "/chat/completions", json=chat("count from 3 to 9"), timeout=10)
    assert r.json()["choices"][0]["message"]["content"] == "3 4 5 6 7 8 9"


# ---- many clients, one engine ----
def test_concurrent_clients_each_get_their_full_answer(server):
    jobs = [(q, stream) for q in ANSWERS for stream in (False, True)] + [(None, False), (None, True)]
    results = [None] * len(jobs)
    barrier = threading.Barrier(len(jobs))

    def text(choice):
        return choice["text"] if "text" in choice else choice.get("message", choice.get("delta"))["content"]

    def run(i, question, stream):
        with httpx.Client(base_url=server.url, timeout=10) as c:
            barrier.wait(10)
            if question is None:
                r = c.post("/completions", json={"prompt": CHATML, "stream": stream})
            else:
                r = c.post("/chat/completions", json=chat(question, stream=stream))
            if not stream:
                results[i] = text(r.json()["choices"][0])
                return
            assert r.text.endswith("\n\ndata: [DONE]\n\n")
            events = [json.loads(e[6:]) for e in r.text.split("\n\n")[:-2]]
            results[i] = "".join(text(e["choices"][0]) for e in events if e["choices"][0]["finish_reason"] is None)
    threads = [threading.Thread(target=run, args=(i, q, s)) for i, (q, s) in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert results == [ANSWERS[q] if q else "7" for q, _ in jobs]


def _stream_text(url, path, body) -> str:
    """The text of a streamed reply, from its events."""
    with httpx.Client(base_url=url, timeout=20) as c:
        r = c.post(path, json={**body, "stream": True})
    assert r.status_code == 200 and r.text.endswith("\n\ndata: [DONE]\n\n"), r.text
    text = ""
    for e in r.text.split("\n\n")[:-2]:
        choice = json.loads(e[6:])["choices"][0]
        text += choice["text"] if "text" in choice else choice["delta"].get("content", "")
    return text


def test_concurrent_streams_decode_together_and_each_gets_the_text_it_gets_alone(monkeypatch):
    """Three streamed requests (two greedy chats, one seeded sampled completion), 40 tokens each with the end of
    turn masked, answered alone one after another and then at once: each gets the same text, and the engine ran
    them in shared steps. For the second round the engine admits nothing until all three have arrived, so they
    start together (no timing involved): one step prefills the three prompts, 39 more decode them."""
    class NoEnd(Sampler):
        def __call__(self, logits, context_ids=None):
            logits = np.array(logits, copy=True)
            logits[END] = -np.inf
            return super().__call__(logits, context_ids)
    monkeypatch.setattr(engine_module, "Sampler", NoEnd)
    requests = [("/chat/completions", chat("what is 12 plus 7?", max_tokens=40)),
                ("/chat/completions", chat("count from 3 to 9", max_tokens=40)),
                ("/completions", {"prompt": CHATML, "max_tokens": 40, "temperature": 0.8, "seed": 5})]
    with serving(max_tokens=40) as server:
        engine = server.engine
        alone = [_stream_text(server.url, path, body) for path, body in requests]
        assert (engine.largest_batch, engine.shared_steps) == (1, 0)
        admit = engine._admit
        engine._admit = lambda: admit() if engine.queued >= len(requests) else None     # under the engine's lock
        together = [None] * len(requests)

        def run(i):
            together[i] = _stream_text(server.url, *requests[i])
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
        for t in threads:
            t.start()
        wait_for(lambda: engine.busy)
        engine._admit = admit
        for t in threads:
            t.join(30)
        assert together == alone
        assert all(len(text) > 20 for text in alone) and len(set(alone)) == 3
        assert (engine.largest_batch, engine.shared_steps) == (3, 40)


@pytest.mark.parametrize("limits, running", [({"max_batch": 2}, 2), ({"max_cache_mib": 0}, 1)])
def test_jobs_beyond_the_batch_cap_or_the_cache_budget_wait_in_the_queue(gate, limits, running):
    """max_batch caps the jobs generating together; a KV-cache budget too small for more than one cache leaves
    one. The rest wait in the queue (health reports them) and are answered once a reply ends."""
    questions = ["what is 12 plus 7?", "which is bigger, 2 or 16?", "what is the opposite of hot?"]
    with serving(**limits) as server:
        engine, answers = server.engine, {}

        def ask(question):
            r = httpx.post(server.url + "/chat/completions", json=chat(question), timeout=10)
            answers[question] = r.json()["choices"][0]["message"]["content"]
        threads = [threading.Thread(target=ask, args=(q,)) for q in questions]
        try:
            for t in threads:
                t.start()
            wait_for(lambda: len(engine._active) == running and engine.queued == len(questions) - running)
            health = httpx.get(server.url.removesuffix("/v1") + "/health", timeout=10).json()
            assert (health["busy"], health["queued"]) == (True, len(questions) - running)
        finally:
            gate.set()
            for t in threads:
                t.join(10)
        assert answers == {q: ANSWERS[q] for q in questions}
        assert engine.slots == running


def test_a_full_queue_answers_429_and_the_queue_is_first_come_first_served(gate, monkeypatch):
    served, run = [], engine_module.ServerWorker._run

    def recording_run(self, job):                      # the order the engine takes the jobs in
        served.append(job.messages[-1]["content"])
        return run(self, job)
    monkeypatch.setattr(engine_module.ServerWorker, "_run", recording_run)
    with serving(max_queue=2, max_batch=1) as server:       # one at a time: the others wait in the queue
        engine, finished = server.engine, []

        def ask(name, question):
            r = httpx.post(server.url + "/chat/completions", json=chat(question), timeout=10)
            finished.append((name, r.status_code, r.json()["choices"][0]["message"]["content"]))
        threads = []
        try:
            for name, question in (("first", "what is 12 plus 7?"), ("second", "which is bigger, 2 or 16?"),
                                   ("third", "what is the opposite of hot?")):
                threads.append(threading.Thread(target=ask, args=(name, question)))
                threads[-1].start()
                wait_for(lambda: engine.busy and engine.queued == len(threads) - 1)
            health = httpx.get(server.url.removesuffix("/v1") + "/health", timeout=10).json()
            assert (health["busy"], health["queued"]) == (True, 2)
            r = httpx.post(server.url + "/chat/completions", json=chat("hi"), timeout=10)
            assert (r.status_code, r.headers["retry-after"], r.json()) == (429, "1", error(
                "The server is busy: 2 requests are already waiting (the queue holds 2). Retry shortly.",
                code="rate_limit_exceeded", type="requests"))
        finally:
            gate.set()
            for t in threads:
                t.join(10)
        # first come, first served, on the engine's side (the clients' threads may record their answers in any order)
        assert served == ["what is 12 plus 7?", "which is bigger, 2 or 16?", "what is the opposite of hot?"]
        assert sorted(finished) == [("first", 200, "19"), ("second", 200, "16"), ("third", 200, "cold")]


def test_a_client_that_leaves_while_queued_is_skipped(gate, capfd):
    with serving(max_batch=1) as server:
        engine = server.engine
        first = threading.Thread(target=httpx.post, args=(server.url + "/chat/completions", ),
                                 kwargs={"json": chat("hi", max_tokens=3), "timeout": 10})
        first.start()
        wait_for(lambda: engine.busy)
        second = raw_request(server.port, "POST", "/v1/chat/completions", json.dumps(chat("hi")).encode())
        try:
            wait_for(lambda: engine.queued == 1)
            job = engine._waiting[0]
        finally:
            second.close()
        wait_for(lambda: job.cancelled)                      # the server has noticed (and may drop it already)
        gate.set()
        first.join(10)
        wait_for(lambda: not engine.busy and engine.queued == 0)
        assert engine.jobs_done == 1                         # the second job never ran
    # leaving is no error of the server's (a cancelled wait for the first event once raised InvalidStateError)
    assert "Exception in ASGI application" not in capfd.readouterr().err


def test_stopping_ends_the_reply_in_progress_and_answers_the_queue_503(slow):
    server = Server(ServerWorker(MODEL, max_tokens=100, max_batch=1), port=0).start()
    try:
        running = raw_request(server.port, "POST", "/v1/chat/completions",
                              json.dumps(chat("hi", stream=True)).encode())
        started = read_until(running, b"\n\n\r\n")
        waiting = []
        thread = threading.Thread(target=lambda: waiting.append(
            httpx.post(server.url + "/chat/completions", json=chat("hi"), timeout=10)))
        thread.start()
        wait_for(lambda: server.engine.queued == 1)
        server.stop()
        thread.join(10)
        unavailable = error("The server is shutting down.", code="unavailable", type="server_error")
        assert (waiting[0].status_code, waiting[0].json()) == (503, unavailable)
        status, _, body = read_response(running, started)
        assert status == 200 and body.endswith(b"data: " + json.dumps(unavailable, separators=(",", ":")).encode()
                                               + b"\n\n")
    finally:
        server.stop()
    assert not server.alive


# ---- safe by default ----
def test_the_api_key_is_required_when_set():
    with serving(api_key="sekret") as server:
        url = server.url + "/models"
        wrong = error("Incorrect API key provided: give it as 'Authorization: Bearer KEY'.", code="invalid_api_key")
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic sekret"}):
            r = httpx.get(url, headers=headers, timeout=10)
            assert (r.status_code, r.headers["www-authenticate"], r.json()) == (401, "Bearer", wrong)
        assert httpx.get(url, headers={"Authorization": "Bearer sekret"}, timeout=10).status_code == 200
        assert httpx.get(server.url.removesuffix("/v1") + "/health", timeout=10).status_code == 200


def test_any_key_is_accepted_by_default(client):
    assert client.get("/models", headers={"Authorization": "Bearer whatever"}).status_code == 200


def test_foreign_host_headers_and_origins_are_refused(server, client):
    for host in ("evil.example", "evil.example:8080", "localhost.evil.example", "192.168.1.20"):
        r = client.get("/models", headers={"Host": host})
        assert (r.status_code, r.json()) == (400, error(
            f"Invalid Host header {host!r}: this server answers only to its own address (start it with "
            "--allowed-host NAME to add a name).", code="invalid_host"))
    for host in ("localhost", f"localhost:{server.port}", f"127.0.0.1:{server.port}", "[::1]:8080"):
        assert client.get("/models", headers={"Host": host}).status_code == 200
    r = client.post("/chat/completions", json=chat("hi"), headers={"Origin": "https://evil.example"})
    assert (r.status_code, r.json()) == (403, error("Requests from web pages of https://evil.example are not "
                                                    "allowed.", code="invalid_origin"))
    assert client.get("/models", headers={"Origin": "null"}).status_code == 403      # a sandboxed frame
    assert client.get("/models", headers={"Origin": f"http://localhost:{server.port}"}).status_code == 200


def test_connections_are_tcp_nodelay(server):
    # asyncio sets TCP_NODELAY only on sockets whose proto is TCP; without it each keep-alive response waited ~40 ms
    # for the client's delayed ACK between its headers and its body
    # (the latency itself is bench/bench_server.py's business, not a timed assertion here)
    assert server.sock.proto == socket.IPPROTO_TCP


def test_allowed_hosts_extend_the_check():
    with serving(allowed_hosts=["mybox"]) as server:
        r = httpx.get(server.url + "/models", headers={"Host": "mybox:1234"}, timeout=10)
        assert r.status_code == 200


def test_the_request_log_gets_every_request_the_guard_included():
    logged = []
    with serving(api_key="k", request_log=logged.append) as server:
        key = {"Authorization": "Bearer k"}
        assert httpx.get(server.url + "/models", headers=key, timeout=10).status_code == 200
        assert httpx.get(server.url + "/models", timeout=10).status_code == 401
        assert httpx.post(server.url + "/chat/completions", json=chat("what is 12 plus 7?"), headers=key,
                          timeout=10).json()["choices"][0]["message"]["content"] == "19"
        assert httpx.get(server.url.removesuffix("/v1") + "/nowhere", headers=key, timeout=10).status_code == 404
    assert [(r.client, r.method, r.path, r.status) for r in logged] == [
        ("127.0.0.1", "GET", "/v1/models", 200), ("127.0.0.1", "GET", "/v1/models", 401),
        ("127.0.0.1", "POST", "/v1/chat/completions", 200), ("127.0.0.1", "GET", "/nowhere", 404)]
    assert all(r.duration_s >= 0 for r in logged)


def test_the_request_line():
    from petit.server.app import LoggedRequest, request_line
    assert request_line(LoggedRequest("::1", "POST", "/v1/completions", 200, 0.0123)) == \
        "::1 POST /v1/completions 200 12 ms"
    assert request_line(LoggedRequest("-", "GET", "/health", None, 2.0)) == "- GET /health disconnected 2000 ms"


# ---- faults ----
def test_503_while_the_model_loads():
    gate = threading.Event()

    class SlowLoad(ServerWorker):
        def _load(self):
            gate.wait(10)
            super()._load()
    server = Server(SlowLoad(MODEL), port=0).start(wait_ready=False)
    try:
        loading = error("The model is loading; retry shortly.", code="model_loading", type="server_error")
        r = httpx.post(server.url + "/chat/completions", json=chat("hi"), timeout=10)
        assert (r.status_code, r.headers["retry-after"], r.json()) == (503, "1", loading)
        r = httpx.get(server.url.removesuffix("/v1") + "/health", timeout=10)
        assert (r.status_code, r.json()["error"]["code"]) == (503, "model_loading")
        gate.set()
        assert server.engine.wait_ready(10)
        r = httpx.post(server.url + "/chat/completions", json=chat("what is 12 plus 7?"), timeout=10)
        assert r.json()["choices"][0]["message"]["content"] == "19"
    finally:
        gate.set()
        server.stop()
    assert not server.alive


def test_a_template_error_is_a_400_before_any_stream():
    from petit.chat.formats import get_format
    with serving(template=get_format("gemma")) as server:
        body = {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]}
        for stream in (False, True):
            r = httpx.post(server.url + "/chat/completions", json=body | {"stream": stream}, timeout=10)
            assert (r.status_code, r.headers["content-type"], r.json()) == \
                (400, "application/json", error("System role not supported", "messages", "template_error"))


def test_a_model_without_template_serves_completions_only(tmp_path):
    import models
    models.write_model(tmp_path / "tiny.petit")
    server = Server(ServerWorker(tmp_path / "tiny.petit", max_tokens=5), port=0).start()
    try:
        r = httpx.post(server.url + "/chat/completions", json=chat("hi"), timeout=10)
        assert (r.status_code, r.json()) == (400, error(
            "This model has no chat template (or the server runs with --format raw): use /v1/completions.",
            "messages", "no_chat_template"))
        r = httpx.post(server.url + "/completions", json={"prompt": "hello", "max_tokens": 5}, timeout=10).json()
        assert r["usage"]["completion_tokens"] <= 5 and r["model"] == "tiny"
    finally:
        server.stop()
    assert not server.alive


def test_a_runaway_or_broken_template_is_a_400_not_a_500():
    # range(10**9) raised OverflowError inside Jinja's sandbox, which escaped as a 500; now every template failure is
    # a TemplateError, answered as the template errors are
    template = "{% if messages[0].content == 'huge' %}{{ range(10**9) | length }}{% endif %}{{ 'x' + none }}"
    with serving(template=template) as server:
        r = httpx.post(server.url + "/chat/completions", json=chat("huge"), timeout=10)
        assert (r.status_code, r.json()) == (400, error(
            "chat template error: range() of 1000000000 numbers is over the 100000-number limit", "messages",
            "template_error"))
        r = httpx.post(server.url + "/chat/completions", json=chat("hi"), timeout=10)
        assert (r.status_code, r.json()) == (400, error(
            'chat template error: TypeError: can only concatenate str (not "NoneType") to str', "messages",
            "template_error"))
