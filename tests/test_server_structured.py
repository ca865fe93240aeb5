"""Structured output (`response_format`) on a real `petit serve`: with a random-weight model, a Hugging Face
fixture and the bundled model, every reply parses as JSON and validates against its schema, streamed or not, chat or
completion; a reply cut by max_tokens says "length"; a schema the grammar engine cannot compile, or a malformed
response_format, is a 400 naming the problem."""
import json
import sys
import threading
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from petit.assets import default_model_path  # noqa: E402
from petit.server import Server  # noqa: E402
from petit.server.engine import ServerWorker  # noqa: E402
from models import TINY, write_model  # noqa: E402

FIX = Path(__file__).parent / "fixtures"
CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

SCHEMAS = {
    "person": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                                "age": {"type": "integer", "minimum": 0, "maximum": 120}},
               "required": ["name", "age"], "additionalProperties": False},
    "choice": {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]},
                                                "sure": {"type": "boolean"}},
               "required": ["colour", "sure"], "additionalProperties": False},
    "list": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 2,
             "maxItems": 4},
    "ref": {"$defs": {"p": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -9, "maximum": 9}},
                            "required": ["x"], "additionalProperties": False}},
            "type": "object", "properties": {"a": {"$ref": "#/$defs/p"}, "b": {"$ref": "#/$defs/p"}},
            "required": ["a", "b"], "additionalProperties": False},
    "either": {"anyOf": [{"type": "object", "properties": {"ok": {"const": True}}, "required": ["ok"],
                          "additionalProperties": False},
                         {"type": "object", "properties": {"code": {"type": "integer", "minimum": 100,
                                                                    "maximum": 599}},
                          "required": ["code"], "additionalProperties": False}]},
}


def start(path, **options):
    return Server(ServerWorker(str(path), **{"max_tokens": 64, **options}), port=0).start()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "tiny.petit"
    write_model(path, dict(TINY, max_position_embeddings=512), seed=3)
    server = start(path, template=CHATML)
    yield server
    server.stop()
    assert not any(t.name.startswith("petit-") and t.is_alive() for t in threading.enumerate())


def client_for(server):
    return openai.OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=60)


def json_schema(name, schema, strict=True):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": strict}}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_a_random_model_always_answers_valid_json(tiny, name):
    with client_for(tiny) as client:
        for seed in (0, 1, 2):
            r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}],
                                               temperature=1.0, seed=seed, max_tokens=200,
                                               response_format=json_schema(name, SCHEMAS[name]))
            c = r.choices[0]
            assert c.finish_reason == "stop", c.message.content
            jsonschema.validate(json.loads(c.message.content), SCHEMAS[name])


def test_json_object_mode_gives_an_object(tiny):
    with client_for(tiny) as client:
        for seed in (0, 1):
            r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], seed=seed,
                                               temperature=0.7, max_tokens=300,
                                               response_format={"type": "json_object"})
            if r.choices[0].finish_reason == "stop":
                assert isinstance(json.loads(r.choices[0].message.content), dict)
            else:                              # a free-form object may run past max_tokens: it was cut, and says so
                assert r.choices[0].finish_reason == "length" and r.choices[0].message.content.startswith("{")


def test_streamed_and_completion_replies_match_the_schema_too(tiny):
    schema = SCHEMAS["person"]
    with client_for(tiny) as client:
        chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "who?"}],
                                                     seed=5, temperature=1.0, stream=True,
                                                     response_format=json_schema("person", schema)))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert chunks[-1].choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(text), schema)
        whole = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "who?"}], seed=5,
                                               temperature=1.0, response_format=json_schema("person", schema))
        assert whole.choices[0].message.content == text           # the same seed, the same constrained draws
        r = client.completions.create(model="m", prompt="person:", seed=1, temperature=1.0, max_tokens=100,
                                      extra_body={"response_format": json_schema("person", schema)})
        assert r.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(r.choices[0].text), schema)


def test_a_reply_cut_by_max_tokens_says_length(tiny):
    with client_for(tiny) as client:
        r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], max_tokens=3,
                                           response_format=json_schema("person", SCHEMAS["person"]))
    c = r.choices[0]
    assert c.finish_reason == "length" and r.usage.completion_tokens == 3
    assert c.message.content.startswith("{")


def test_a_hugging_face_tokenizer_and_the_bundled_model():
    schema = {"type": "object", "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 99}},
              "required": ["answer"], "additionalProperties": False}
    for path in (FIX / "hf" / "qwen3", default_model_path()):
        server = start(path)
        try:
            with client_for(server) as client:
                r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "what is 12 plus 7?"}],
                                                   response_format=json_schema("answer", schema))
            assert r.choices[0].finish_reason == "stop", (path, r.choices[0].message.content)
            jsonschema.validate(json.loads(r.choices[0].message.content), schema)
        finally:
            server.stop()


def error(message, param, code="invalid_value"):
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


@pytest.mark.parametrize("fmt, expected", [
    (json_schema("bad", {"type": "nonsense"}),
     error("Invalid schema for response_format 'bad': Invalid type: nonsense", "response_format.json_schema.schema",
           "invalid_json_schema")),
    (json_schema("bad", {"type": "string", "pattern": "(("}),
     error("Invalid schema for response_format 'bad': regex parse error:\n    ((\n     ^\nerror: unclosed group",
           "response_format.json_schema.schema", "invalid_json_schema")),
    ({"type": "xml"}, error("Invalid value for 'response_format.type': expected one of 'text', 'json_object', "
                            "'json_schema', got 'xml'.", "response_format.type")),
    ({"type": "json_schema"}, error("Missing required parameter: 'response_format.json_schema'.",
                                    "response_format.json_schema", "missing_required_parameter")),
    ({"type": "json_schema", "json_schema": {"schema": {}}},
     error("Missing required parameter: 'response_format.json_schema.name'.", "response_format.json_schema.name",
           "missing_required_parameter")),
    ({"type": "json_schema", "json_schema": {"name": "a b"}},
     error("Invalid value for 'response_format.json_schema.name': expected a name of at most 64 letters, digits, "
           "underscores and dashes, got 'a b'.", "response_format.json_schema.name")),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": []}},
     error("Invalid type for 'response_format.json_schema.schema': expected an object, but got an array instead.",
           "response_format.json_schema.schema", "invalid_type")),
    ("json", error("Invalid type for 'response_format': expected an object, but got a string instead.",
                   "response_format", "invalid_type")),
])
def test_bad_response_formats_are_400s(tiny, fmt, expected):
    with httpx.Client(base_url=tiny.url, timeout=30) as c:
        r = c.post("/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                              "response_format": fmt})
    assert (r.status_code, r.json()) == (400, expected)


def test_a_text_response_format_changes_nothing(tiny):
    with httpx.Client(base_url=tiny.url, timeout=30) as c:
        body = {"messages": [{"role": "user", "content": "hi"}], "temperature": 0, "max_tokens": 8}
        plain = c.post("/chat/completions", json=body).json()["choices"][0]["message"]["content"]
        text = c.post("/chat/completions", json={**body, "response_format": {"type": "text"}}).json()
    assert text["choices"][0]["message"]["content"] == plain


def test_without_the_grammar_engine_the_server_says_so(tiny, monkeypatch):
    monkeypatch.setitem(sys.modules, "llguidance", None)            # as if it were not installed
    with httpx.Client(base_url=tiny.url, timeout=30) as c:
        r = c.post("/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                              "response_format": {"type": "json_object"}})
        assert (r.status_code, r.json()) == (501, {"error": {
            "message": "This server cannot enforce 'response_format': constrained decoding needs the llguidance "
                       "package, which is not installed: pip install llguidance.",
            "type": "server_error", "param": "response_format", "code": "grammar_engine_missing"}})
        assert c.post("/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                 "max_tokens": 2}).status_code == 200


def test_constrained_replies_in_one_batch_are_those_they_get_alone(tiny):
    """Each reply has its own grammar state: four sent at once (decoded in shared steps while they overlap) match
    their schemas and equal what the same seeds give one at a time."""
    names = sorted(SCHEMAS)[:4]

    def ask(name):
        with client_for(tiny) as client:
            r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": name}], seed=9,
                                               temperature=1.0, max_tokens=200,
                                               response_format=json_schema(name, SCHEMAS[name]))
            return r.choices[0].message.content
    alone = {name: ask(name) for name in names}
    together, threads = {}, [threading.Thread(target=lambda n=n: together.__setitem__(n, ask(n))) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert together == alone
    for name, text in together.items():
        jsonschema.validate(json.loads(text), SCHEMAS[name])
