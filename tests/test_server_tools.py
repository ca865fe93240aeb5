"""Tool calling end to end through the `openai` client: a random-weight model under tool_choice "required" or a named
function is constrained to a valid call, which comes back as OpenAI `tool_calls` (streamed as OpenAI streams them:
the id, type and name first, then the arguments; finish_reason "tool_calls"), in the formats of Qwen's, Mistral's
and a tool-less template; "auto" and "none" leave the reply free; results go back through the template."""
import json
import threading
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from petit.server import Server  # noqa: E402
from petit.server.engine import ServerWorker  # noqa: E402
from models import TINY, write_model  # noqa: E402

TEMPLATES = Path(__file__).parent / "fixtures" / "chat_templates"
QWEN = (TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()
MISTRAL = (TEMPLATES / "mistralai-Mistral-Nemo-Instruct-2407.jinja").read_text()
CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

# a Llama 3.1-style template (the real one is long): tools in the system turn, calls as {"name", "parameters"}
LLAMA3 = ("{% if tools %}{{ '<|start_header_id|>system<|end_header_id|>\\n\\nCall a function by replying "
          "{\"name\": function name, \"parameters\": dictionary}. Functions: ' }}{% for t in tools %}"
          "{{ t | tojson }}{% endfor %}{{ '<|eot_id|>' }}{% endif %}{% for m in messages %}"
          "{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' }}{% if m.tool_calls %}"
          "{% for c in m.tool_calls %}{{ {'name': c.function.name, 'parameters': c.function.arguments} | tojson }}"
          "{% endfor %}{% else %}{{ m['content'] }}{% endif %}{{ '<|eot_id|>' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
WEATHER = {"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo", "Lima"]},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
           "required": ["city", "days"], "additionalProperties": False}
CLOCK = {"type": "object", "properties": {"utc": {"type": "boolean"}}, "required": ["utc"],
         "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The forecast.",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "parameters": CLOCK}}]
SCHEMAS = {"get_weather": WEATHER, "get_time": CLOCK}
ASK = [{"role": "user", "content": "weather in Paris?"}]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("tools") / "tiny.petit"
    write_model(path, dict(TINY, max_position_embeddings=2048), seed=5)
    return path


def serving(path, template):
    return Server(ServerWorker(str(path), template=template, max_tokens=120), port=0).start()


@pytest.fixture(scope="module")
def qwen(model_path):
    server = serving(model_path, QWEN)
    yield server
    server.stop()
    assert not any(t.name.startswith("petit-") and t.is_alive() for t in threading.enumerate())


@pytest.fixture
def client(qwen):
    with openai.OpenAI(base_url=qwen.url, api_key="x", max_retries=0, timeout=60) as c:
        yield c


def check_calls(message, names=None):
    assert message.tool_calls, message.content
    for call in message.tool_calls:
        assert call.type == "function" and call.id.startswith("call_") and len(call.id) == 29
        assert names is None or call.function.name in names
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_required_makes_a_random_model_call_a_tool(client):
    for seed in (0, 1, 2):
        r = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="required", seed=seed,
                                           temperature=1.0, parallel_tool_calls=False)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls" and c.message.content is None and len(c.message.tool_calls) == 1
        check_calls(c.message, SCHEMAS)


def test_parallel_calls_are_all_valid(client):
    r = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="required", seed=4,
                                       temperature=1.0, max_tokens=400)
    if r.choices[0].finish_reason == "tool_calls":
        check_calls(r.choices[0].message, SCHEMAS)
        assert len({c.id for c in r.choices[0].message.tool_calls}) == len(r.choices[0].message.tool_calls)
    else:                                      # more calls than max_tokens holds: cut, and said so
        assert r.choices[0].finish_reason == "length"


def test_a_named_function_is_the_one_called(client):
    for seed in (0, 1):
        r = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, seed=seed, temperature=1.0,
                                           tool_choice={"type": "function", "function": {"name": "get_time"}},
                                           parallel_tool_calls=False)
        check_calls(r.choices[0].message, {"get_time"})


def test_a_streamed_call_comes_as_openai_streams_it(client):
    kwargs = dict(model="m", messages=ASK, tools=TOOLS, tool_choice="required", seed=7, temperature=1.0,
                  parallel_tool_calls=False)
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    calls = [d.tool_calls for d in deltas if d.tool_calls]
    head, *args = calls
    (h,) = head
    assert (h.index, h.type, h.function.arguments) == (0, "function", "") and h.id.startswith("call_")
    assert len(args) > 1 and all(part.id is None and part.function.name is None for (part,) in args)
    arguments = "".join(part.function.arguments for (part,) in args)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert not any(d.content for d in deltas)
    whole = client.chat.completions.create(**kwargs).choices[0].message.tool_calls[0]
    assert (h.function.name, arguments) == (whole.function.name, whole.function.arguments)


def test_auto_and_none_leave_the_reply_free(client, qwen):
    r = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, temperature=0, max_tokens=16)
    assert r.choices[0].finish_reason in ("stop", "length") and r.choices[0].message.tool_calls is None
    with httpx.Client(base_url=qwen.url, timeout=60) as c:
        auto = c.post("/chat/completions", json={"messages": ASK, "tools": TOOLS, "temperature": 0,
                                                 "max_tokens": 16}).json()
        none = c.post("/chat/completions", json={"messages": ASK, "tools": TOOLS, "tool_choice": "none",
                                                 "temperature": 0, "max_tokens": 16}).json()
        bare = c.post("/chat/completions", json={"messages": ASK, "temperature": 0, "max_tokens": 16}).json()
    assert auto["usage"]["prompt_tokens"] > none["usage"]["prompt_tokens"] == bare["usage"]["prompt_tokens"]
    assert none["choices"][0]["message"] == bare["choices"][0]["message"]     # "none": the tools are not shown
    with httpx.Client(base_url=qwen.url, timeout=60) as c:                    # some clients always send these
        empty = c.post("/chat/completions", json={"messages": ASK, "tools": [], "tool_choice": "auto",
                                                  "temperature": 0, "max_tokens": 16}).json()
    assert empty["choices"][0]["message"] == bare["choices"][0]["message"]


def test_the_results_go_back_and_the_model_answers(client):
    first = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="required", seed=1,
                                           temperature=1.0, parallel_tool_calls=False).choices[0].message
    call = first.tool_calls[0]
    follow = ASK + [first.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": call.id, "content": '{"forecast": "sun"}'}]
    r = client.chat.completions.create(model="m", messages=follow, tools=TOOLS, temperature=0, max_tokens=8)
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens_details.cached_tokens > 0          # the first request's prompt is reused


@pytest.mark.parametrize("template, check_id", [(MISTRAL, lambda i: len(i) == 9 and i.isalnum()),
                                                (LLAMA3, lambda i: i.startswith("call_")),
                                                (CHATML, lambda i: i.startswith("call_"))])
def test_mistral_llama3_and_tool_less_templates(model_path, template, check_id):
    server = serving(model_path, template)
    try:
        with openai.OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=60) as c:
            r = c.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="required", seed=2,
                                          temperature=1.0, parallel_tool_calls=False)
            message = r.choices[0].message
            assert r.choices[0].finish_reason == "tool_calls"
            (call,) = message.tool_calls
            assert check_id(call.id)
            jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
            chunks = list(c.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="required",
                                                    seed=2, temperature=1.0, parallel_tool_calls=False, stream=True))
            (head,), *parts = [ch.choices[0].delta.tool_calls for ch in chunks if ch.choices[0].delta.tool_calls]
            assert check_id(head.id) and head.function.name == call.function.name and len(parts) > 1
            assert "".join(part.function.arguments for (part,) in parts) == call.function.arguments
            assert chunks[-1].choices[0].finish_reason == "tool_calls"
            follow = ASK + [message.model_dump(exclude_none=True),
                            {"role": "tool", "tool_call_id": call.id, "content": "sun"}]
            again = c.chat.completions.create(model="m", messages=follow, tools=TOOLS, max_tokens=4)
            assert again.choices[0].finish_reason in ("stop", "length")
    finally:
        server.stop()


def error(message, param, code="invalid_value", type="invalid_request_error"):
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


@pytest.mark.parametrize("fields, expected", [
    ({"tool_choice": "required"}, error("Invalid value for 'tool_choice': 'tool_choice' is only allowed when "
                                        "'tools' are specified.", "tool_choice")),
    ({"tools": TOOLS, "tool_choice": "always"},
     error("Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or an object naming a function, got "
           "'always'.", "tool_choice")),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     error("Invalid value for 'tool_choice': the function 'nope' is not among 'tools'.", "tool_choice")),
    ({"tools": [{"type": "retrieval"}]}, error("Invalid value for 'tools[0].type': only 'function' tools are "
                                               "supported, got 'retrieval'.", "tools[0].type")),
    ({"tools": [{"type": "function", "function": {"description": "x"}}]},
     error("Missing required parameter: 'tools[0].function.name'.", "tools[0].function.name",
           "missing_required_parameter")),
    ({"tools": [{"type": "function", "function": {"name": "a.b"}}]},
     error("Invalid value for 'tools[0].function.name': expected a name of at most 64 letters, digits, underscores "
           "and dashes, got 'a.b'.", "tools[0].function.name")),
    ({"tools": TOOLS + TOOLS[:1]}, error("Invalid value for 'tools[2].function.name': the name 'get_weather' is given "
                                         "to two tools.", "tools[2].function.name")),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "nonsense"}}}],
      "tool_choice": "required"},
     error("Invalid schema for the parameters of function 'f': Invalid type: nonsense", "tools[0].function.parameters",
           "invalid_json_schema")),
    ({"tools": TOOLS, "response_format": {"type": "json_object"}},
     error("Invalid value for 'response_format': a JSON response format cannot be combined with tools (give "
           "tool_choice 'none', or no tools).", "response_format")),
    ({"tools": TOOLS, "parallel_tool_calls": "yes"},
     error("Invalid type for 'parallel_tool_calls': expected a boolean, but got a string instead.",
           "parallel_tool_calls", "invalid_type")),
])
def test_bad_tool_fields_are_400s(qwen, fields, expected):
    with httpx.Client(base_url=qwen.url, timeout=30) as c:
        r = c.post("/chat/completions", json={"messages": ASK, **fields})
    assert (r.status_code, r.json()) == (400, expected)
