"""The Ollama-compatible routes on a real `petit serve` with the bundled model: /api/chat and /api/generate as NDJSON
streams by default and one JSON object with `"stream": false`, in Ollama's field names; options mapped onto the
sampler; JSON format and tools; /api/tags, /api/show and /api/version; errors as `{"error": ...}`."""
import json
import os
import re
import threading

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

import petit  # noqa: E402
from petit import __version__  # noqa: E402
from petit.assets import default_model_path  # noqa: E402
from petit.generation.session import Session  # noqa: E402
from petit.server import Server  # noqa: E402
from petit.server.engine import ServerWorker  # noqa: E402

MODEL = default_model_path()
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
DURATIONS = ("total_duration", "prompt_eval_duration", "eval_duration")


@pytest.fixture(scope="module")
def server():
    server = Server(ServerWorker(MODEL, max_tokens=32), port=0).start()
    yield server
    server.stop()
    assert not any(t.name.startswith("petit-") and t.is_alive() for t in threading.enumerate())


@pytest.fixture
def http(server):
    with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=30) as c:
        yield c


@pytest.fixture(scope="module")
def prompt_len():
    session = Session(petit.load(MODEL))
    return lambda text: len(session.prompt_ids([{"role": "user", "content": text}]))


def timeless(obj: dict) -> dict:
    """The body without what varies from run to run (the time stamp and the durations), after checking them."""
    assert STAMP.match(obj["created_at"]), obj["created_at"]
    out = {k: v for k, v in obj.items() if k != "created_at"}
    for k in DURATIONS:
        if k in out:
            assert isinstance(out[k], int) and out.pop(k) >= 0
    return out


def lines(response) -> list:
    assert response.headers["content-type"] == "application/x-ndjson"
    return [json.loads(line) for line in response.iter_lines() if line]


def test_chat_is_one_object_without_streaming(http, prompt_len):
    r = http.post("/api/chat", json={"model": "default-q8_0", "stream": False,
                                     "messages": [{"role": "user", "content": "what is 12 plus 7?"}]})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert timeless(r.json()) == {"model": "default-q8_0", "message": {"role": "assistant", "content": "19"},
                                  "done_reason": "stop", "done": True, "load_duration": 0,
                                  "prompt_eval_count": prompt_len("what is 12 plus 7?"), "eval_count": 2}


def test_chat_streams_ndjson_by_default(http, prompt_len):
    with http.stream("POST", "/api/chat", json={"model": "default-q8_0:latest",
                                                "messages": [{"role": "user", "content": "count from 3 to 9"}]}) as r:
        got = [timeless(obj) for obj in lines(r)]
    pieces = ["3", " 4", " 5", " 6", " 7", " 8", " 9"]
    assert got[:-1] == [{"model": "default-q8_0:latest", "message": {"role": "assistant", "content": p},
                         "done": False} for p in pieces]
    assert got[-1] == {"model": "default-q8_0:latest", "message": {"role": "assistant", "content": ""},
                       "done_reason": "stop", "done": True, "load_duration": 0,
                       "prompt_eval_count": prompt_len("count from 3 to 9"), "eval_count": 8}


def test_generate_uses_the_template_and_raw_skips_it(http, prompt_len):
    r = http.post("/api/generate", json={"model": "default-q8_0", "prompt": "count from 3 to 9", "stream": False,
                                         "options": {"num_predict": 3}})
    assert timeless(r.json()) == {"model": "default-q8_0", "response": "3 4 5", "done_reason": "length",
                                  "done": True, "load_duration": 0,
                                  "prompt_eval_count": prompt_len("count from 3 to 9"), "eval_count": 3}
    raw = "<|im_start|>user\nwhat is 3 plus 4?<|im_end|>\n<|im_start|>assistant\n"
    with http.stream("POST", "/api/generate", json={"model": "default-q8_0", "prompt": raw, "raw": True}) as s:
        got = [timeless(obj) for obj in lines(s)]
    assert got[0] == {"model": "default-q8_0", "response": "7", "done": False}
    assert got[-1]["response"] == "" and got[-1]["done"] is True and got[-1]["done_reason"] == "stop"


def test_options_map_onto_the_sampler(http):
    def reply(options, text="count from 3 to 9"):
        r = http.post("/api/chat", json={"model": "default-q8_0", "stream": False, "options": options,
                                         "messages": [{"role": "user", "content": text}]})
        assert r.status_code == 200, r.text
        return r.json()["message"]["content"]
    assert reply({"stop": [" 6"]}) == "3 4 5"
    assert reply({"num_predict": 2}) == "3 4"
    sampled = [reply({"temperature": 1.5, "top_k": 40, "top_p": 0.9, "min_p": 0.01, "seed": 11,
                      "repeat_penalty": 1.1, "presence_penalty": 0.5, "frequency_penalty": 0.5,
                      "num_ctx": 4096, "num_thread": 2}, "name a colour") for _ in range(2)]
    assert sampled[0] == sampled[1]                  # the seed makes it reproducible; unused options are ignored
    assert reply({"num_predict": -1}) == "3 4 5 6 7 8 9"


def test_a_json_format_is_enforced(http):
    schema = {"type": "object", "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 99}},
              "required": ["answer"], "additionalProperties": False}
    r = http.post("/api/chat", json={"model": "default-q8_0", "stream": False, "format": schema,
                                     "messages": [{"role": "user", "content": "what is 12 plus 7?"}]}).json()
    answer = json.loads(r["message"]["content"])
    assert set(answer) == {"answer"} and 0 <= answer["answer"] <= 99 and r["done_reason"] == "stop"
    r = http.post("/api/generate", json={"model": "default-q8_0", "stream": False, "format": "json",
                                         "prompt": "what is 12 plus 7?", "options": {"num_predict": 60}}).json()
    assert r["response"].startswith("{")


def test_an_empty_request_reports_the_model_loaded(http):
    r = http.post("/api/chat", json={"model": "default-q8_0", "messages": []})
    assert timeless(r.json()) == {"model": "default-q8_0", "message": {"role": "assistant", "content": ""},
                                  "done_reason": "load", "done": True}
    r = http.post("/api/generate", json={"model": "default-q8_0"})
    assert timeless(r.json()) == {"model": "default-q8_0", "response": "", "done_reason": "load", "done": True}


def test_tags_show_and_version(http):
    st = os.stat(MODEL)
    details = {"parent_model": "", "format": "petit", "family": "llama", "families": ["llama"],
               "parameter_size": "853.1K", "quantization_level": "Q8_0"}
    (m,) = http.get("/api/tags").json()["models"]
    assert re.fullmatch(r"[0-9a-f]{64}", m.pop("digest"))
    assert m.pop("modified_at").endswith("Z")
    assert m == {"name": "default-q8_0", "model": "default-q8_0", "size": st.st_size, "details": details}
    show = http.post("/api/show", json={"model": "default-q8_0"}).json()
    assert show["details"] == details and show["capabilities"] == ["completion", "tools"]
    assert show["model_info"] == {"general.architecture": "llama", "general.parameter_count": 853120,
                                  "llama.context_length": 128, "llama.block_count": 4, "llama.vocab_size": 512}
    assert show["parameters"] == "temperature 0.0\ntop_k 0\ntop_p 1.0\nnum_ctx 128"
    assert show["template"].startswith("{% for message in messages %}") and show["modelfile"] == ""
    assert http.get("/api/version").json() == {"version": __version__}


@pytest.mark.parametrize("path, body, status, message", [
    ("/api/chat", {"messages": [{"role": "user", "content": "hi"}]}, 400, "model is required"),
    ("/api/chat", {"model": "llama3", "messages": [{"role": "user", "content": "hi"}]}, 404,
     "model 'llama3' not found (this server serves 'default-q8_0')"),
    ("/api/show", {"model": "llama3"}, 404, "model 'llama3' not found (this server serves 'default-q8_0')"),
    ("/api/generate", {"model": "default-q8_0", "prompt": "x", "options": {"temperature": "hot"}}, 400,
     "option \"temperature\" must be a number, got 'hot'"),
    ("/api/generate", {"model": "default-q8_0", "prompt": "x", "options": {"num_predict": 0}}, 400,
     "option \"num_predict\" must be a positive integer, or -1 (no limit), got 0"),
    ("/api/generate", {"model": "default-q8_0", "prompt": "x", "options": {"seed": 1.5}}, 400,
     "option \"seed\" must be an integer, got 1.5"),
    ("/api/generate", {"model": "default-q8_0", "prompt": "x", "options": {"temperature": -1}}, 400,
     "Invalid value for 'temperature': temperature must be a finite number >= 0, got -1."),
    ("/api/generate", {"model": "default-q8_0", "prompt": "x", "format": "yaml"}, 400,
     "format must be \"json\" or a JSON schema, got 'yaml'"),
    ("/api/generate", {"model": "default-q8_0", "prompt": "x", "suffix": "y"}, 400,
     "suffix is not supported by this server"),
    ("/api/generate", {"model": "default-q8_0", "prompt": "x", "images": ["aGk="]}, 400,
     "images are not supported: this server serves a text-only model"),
    ("/api/chat", {"model": "default-q8_0", "stream": "yes", "messages": []}, 400, "stream must be a boolean, got 'yes'"),
    ("/api/chat", {"model": "default-q8_0", "messages": [{"role": "user", "content": "hello " * 200}]}, 400,
     None),
])
def test_errors_have_ollamas_shape(http, path, body, status, message):
    r = http.post(path, json=body)
    assert r.status_code == status and list(r.json()) == ["error"]
    if message is not None:
        assert r.json()["error"] == message
    else:
        assert r.json()["error"].startswith("This model's maximum context length is 128 tokens.")


def test_a_tool_call_has_ollamas_shape():
    """Ollama gives a call's arguments as an object, not as JSON text, and streams each call whole."""
    from petit.generation.session import Stats
    from petit.server.engine import Done
    from petit.server.ollama import _Reply
    text = 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    done = Done(text, "stop", {}, {}, stats=Stats(prompt_tokens=5, generated_tokens=9, decode_tokens_per_s=100.0))
    body = timeless(_Reply("m", "chat", 0.0, "hermes").whole(done))
    assert body == {"model": "m", "message": {"role": "assistant", "content": "Checking.\n", "tool_calls": [
        {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}, "done_reason": "stop",
        "done": True, "load_duration": 0, "prompt_eval_count": 5, "eval_count": 9}
