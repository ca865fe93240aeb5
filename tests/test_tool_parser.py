"""Tool-call formats without a model: which format a real template uses, the parser on exact strings of each format
(malformed output comes back as content, never an error; streamed piece by piece it settles the same), and the
conversation a template that ignores `tools` is given."""
import json
from pathlib import Path

import pytest

from petit.chat.template import render_template
from petit.server import features
from petit.server.tools import Call, CallArgs, CallStart, Content, ToolParser, describe, detect, parse

TEMPLATES = Path(__file__).parent / "fixtures" / "chat_templates"
ARGS = '{"city": "Paris", "days": 3}'


@pytest.mark.parametrize("name, expected", [
    ("Qwen-Qwen2.5-7B-Instruct.jinja", ("hermes", False)),
    ("Qwen-Qwen3-0.6B.jinja", ("hermes", False)),
    ("mistralai-Mistral-Nemo-Instruct-2407.jinja", ("mistral", False)),
    ("microsoft-Phi-3.5-mini-instruct.jinja", ("hermes", True)),
])
def test_the_format_comes_from_the_template(name, expected):
    assert detect((TEMPLATES / name).read_text()) == expected


def test_a_llama3_template_and_no_template():
    llama3 = ('{% if tools %}Respond in the format {"name": function name, "parameters": dictionary}{% endif %}'
              '<|start_header_id|>assistant<|end_header_id|>{{ "<|eot_id|>" }}')
    assert detect(llama3) == ("llama3", False)
    assert detect("{{ '<|python_tag|>' }}") == ("llama3", False)
    assert detect(None) == ("hermes", True)


@pytest.mark.parametrize("fmt, text, content, calls", [
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>',
     None, [Call("get_weather", ARGS)]),
    ("hermes", 'Let me look.\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n'
               '{"name": "b", "arguments": {"x": [1, 2]}}\n</tool_call>',
     "Let me look.\n", [Call("a", "{}"), Call("b", '{"x": [1, 2]}')]),
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\", \\"days\\": 3}"}',
     None, [Call("get_weather", ARGS)]),                    # no closing tag at the end; arguments as a JSON string
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": </tool_call>',
     '<tool_call>\n{"name": "get_weather", "arguments": {"city": </tool_call>', []),     # broken JSON: content
    ("hermes", '<tool_call>\n{"arguments": {}}\n</tool_call>', '<tool_call>\n{"arguments": {}}\n</tool_call>', []),
    ("hermes", "no call here <tool", "no call here <tool", []),
    ("llama3", '{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}', None,
     [Call("get_weather", ARGS)]),
    ("llama3", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}', None,
     [Call("get_weather", ARGS)]),
    ("llama3", '  {"name": "get_weather", "parameters": {"city": ', '  {"name": "get_weather", "parameters": {"city": ',
     []),
    ("llama3", 'It is {"name": "x"}', 'It is {"name": "x"}', []),
    ("mistral", '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]', None,
     [Call("get_weather", ARGS)]),
    ("mistral", 'Sure. [TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3}[TOOL_CALLS]now[ARGS]{}',
     "Sure. ", [Call("get_weather", ARGS), Call("now", "{}")]),
    ("mistral", '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city"', '[TOOL_CALLS][{"name": "get_weather", '
     '"arguments": {"city"', []),
    ("mistral", "plain [TOOL", "plain [TOOL", []),
])
def test_the_parser_on_exact_strings(fmt, text, content, calls):
    assert parse(fmt, text) == (content, calls)


@pytest.mark.parametrize("fmt, text", [
    ("hermes", 'Hi <tool_call>\n{"name": "a", "arguments": {"k": "</tool"}}\n</tool_call>\n<tool_call>\n{"bad"'),
    ("llama3", '{"name": "get_weather", "parameters": {"city": "Paris"}}'),
    ("mistral", 'x [TOOL_CALLS][{"name": "a", "arguments": {}}]'),
])
def test_streamed_one_character_at_a_time_it_settles_the_same(fmt, text):
    p = ToolParser(fmt)
    events = [e for ch in text for e in p.feed(ch)] + p.finish()
    content = "".join(e.text for e in events if isinstance(e, Content))
    calls = [e for e in events if isinstance(e, Call)]
    whole_content, whole_calls = parse(fmt, text)
    assert calls == whole_calls and content == (whole_content or "")


def test_a_call_is_given_out_as_soon_as_it_closes():
    p = ToolParser("hermes")
    assert p.feed("Checking <tool_") == [Content("Checking ")]          # held back: it may open a call
    assert p.feed('call>\n{"name": "a", "arguments": {}}\n</tool_call') == []
    assert p.feed(">\n") == [Call("a", "{}")]
    assert p.finish() == []


def test_assistant_calls_and_tool_results_go_back_into_the_template():
    """OpenAI sends a call's arguments as JSON text; templates write them with tojson, so they get the object."""
    messages = [{"role": "user", "content": "weather in Paris?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'}]
    text = render_template((TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(),
                           [features.template_message(m) for m in messages], add_generation_prompt=True)
    assert text.endswith('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": '
                         '"Paris"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{"temp": 21}\n'
                         '</tool_response><|im_end|>\n<|im_start|>assistant\n')


def test_a_template_without_tools_gets_them_in_its_system_prompt():
    tools = [{"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}]
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "time?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "now", "arguments": "{}"}}]},
                {"role": "tool", "content": "12:00"}]
    out = describe(messages, tools)
    assert out[0]["role"] == "system" and out[0]["content"].startswith("Be brief.\n\n# Tools\n")
    assert "<tools>\n" + json.dumps(tools[0]) + "\n</tools>" in out[0]["content"]
    assert out[2] == {"role": "assistant", "content": '<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>'}
    assert out[1:2] + out[3:] == messages[1:2] + messages[3:]
    assert describe(messages[1:2], tools)[0]["content"].startswith("# Tools\n")


def test_a_stream_gives_a_call_out_piece_by_piece():
    p = ToolParser("hermes", incremental=True)
    assert p.feed("Sure.<tool_call>\n") == [Content("Sure.")]
    assert p.feed('{"name": "get_weather", "arguments": {"ci') == [CallStart("get_weather"), CallArgs('{"ci')]
    assert p.feed('ty": "}"') == [CallArgs('ty": "}"')]                     # a brace inside a string
    assert p.feed("}}\n</tool_") == [CallArgs("}")]
    assert p.feed("call>\n<tool_call>\n") == []
    assert p.feed('{"arguments": {}, "name": "b"}\n</tool_call>') == [Call("b", "{}")]   # another order: whole
    assert p.finish() == []
    cut = ToolParser("hermes", incremental=True)
    assert cut.feed('<tool_call>\n{"name": "a", "arguments": {"x": [1') == [CallStart("a"), CallArgs('{"x": [1')]
    assert cut.finish() == []                   # cut by the reply's end: the call stays as far as it came


def stream(fmt, pieces):
    p = ToolParser(fmt, incremental=True)
    return [e for piece in pieces for e in p.feed(piece)] + p.finish()


def test_llama3_and_mistral_calls_stream_piece_by_piece_too():
    assert stream("llama3", ['<|python_tag|>{"name": "get_weather", ', '"parameters": {"city": "Pa', 'ris"}}']) == [
        CallStart("get_weather"), CallArgs('{"city": "Pa'), CallArgs('ris"}')]
    assert stream("mistral", ['Ok [TOOL_', 'CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "argu',
                              'ments": {}}]']) == [
        Content("Ok "), CallStart("a"), CallArgs('{"x": 1}'), CallStart("b"), CallArgs("{}")]
    assert stream("mistral", ['[TOOL_CALLS]a[ARGS]{"x": ', '1}[TOOL_CALLS]b[ARGS]{}']) == [
        CallStart("a"), CallArgs('{"x": '), CallArgs("1}"), CallStart("b"), CallArgs("{}")]
    # not the usual opening: read whole at the end, as without streaming
    assert stream("llama3", ['{"parameters": {}, "name": "a"}']) == [Call("a", "{}")]
    assert stream("llama3", ["[1, 2, 3]"]) == [Content("[1, 2, 3]")]
    assert stream("mistral", ["[TOOL_CALLS]", "oops"]) == [Content("[TOOL_CALLS]oops")]
    # text after the calls is content
    assert stream("mistral", ['[TOOL_CALLS][{"name": "a", "arguments": {}}] done']) == [
        CallStart("a"), CallArgs("{}"), Content("done")]
