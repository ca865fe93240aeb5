"""Chat templates render exactly what transformers' apply_chat_template(..., tokenize=False) returned for ten real
templates (tests/fixtures/chat_templates/cases.json, produced with transformers 5.24 and jinja2 3.1.6, clock pinned
to 2025-06-15T12:00:00)."""
import copy
import json
import os
from datetime import datetime

import pytest

from petit.chat import template as chat
from petit.chat.template import TemplateError, render_template

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "chat_templates")
with open(os.path.join(HERE, "cases.json"), encoding="utf-8") as f:
    CASES = json.load(f)


def _all_cases():
    for name, spec in CASES["templates"].items():
        for case in spec["cases"]:
            yield pytest.param(name, spec, case, id=f"{name}:{case['name']}")


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch):
    monkeypatch.setattr(chat, "_now", lambda: datetime(2025, 6, 15, 12, 0, 0))


@pytest.mark.parametrize("name,spec,case", list(_all_cases()))
def test_renders_exactly_as_transformers(name, spec, case):
    with open(os.path.join(HERE, spec["file"]), encoding="utf-8") as f:
        template = f.read()
    messages = CASES["conversations"][case["conversation"]]
    before = copy.deepcopy(messages)
    tools = CASES["tools"][case["tools"]] if case["tools"] else None
    if case["ok"]:
        got = render_template(template, messages, add_generation_prompt=case["add_generation_prompt"], tools=tools,
                              **spec["template_kwargs"])
        assert got == case["expected"]
    else:
        with pytest.raises(TemplateError, match=case.get("error", "")):
            render_template(template, messages, add_generation_prompt=case["add_generation_prompt"], tools=tools,
                            **spec["template_kwargs"])
    assert messages == before


def test_raise_exception_shows_the_templates_own_message():
    t = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}ok"
    with pytest.raises(TemplateError, match="^System role not supported$"):
        render_template(t, [{"role": "system", "content": "x"}])
    assert render_template(t, [{"role": "user", "content": "x"}]) == "ok"


def test_the_sandbox_refuses_python_internals_and_syntax_errors_name_the_line():
    with pytest.raises(TemplateError, match="chat template error"):
        render_template("{{ messages.__class__.__mro__[1].__subclasses__() }}", [])
    with pytest.raises(TemplateError, match="syntax error at line 2"):
        render_template("ok\n{% if %}", [])


def test_generation_tag_and_tojson():
    t = "{% for m in messages %}{% generation %}{{ m['content'] | tojson }}{% endgeneration %}{% endfor %}"
    assert render_template(t, [{"role": "assistant", "content": "héllo \"x\""}]) == '"héllo \\"x\\""'


# --- None-valued keys: transformers' apply_chat_template drops them before rendering ------------------------------

def _with_nones(messages):
    """What an OpenAI client sends back: the same turns with null-valued keys (an assistant turn without tool calls
    carries "tool_calls": null, "function_call": null, "refusal": null)."""
    out = []
    for m in messages:
        extra = {"tool_calls": None, "function_call": None, "refusal": None} if m["role"] == "assistant" else {}
        out.append({**m, "name": None, **extra})
    return out


@pytest.mark.parametrize("name,spec,case", [p for p in _all_cases() if p.values[2]["ok"]])
def test_none_valued_keys_render_as_if_absent(name, spec, case):
    # transformers 5.24's apply_chat_template drops every message key whose value is None
    # (_normalize_chat_messages), so its text for these messages is the committed text for the same turns
    with open(os.path.join(HERE, spec["file"]), encoding="utf-8") as f:
        template = f.read()
    messages = _with_nones(CASES["conversations"][case["conversation"]])
    before = copy.deepcopy(messages)
    tools = CASES["tools"][case["tools"]] if case["tools"] else None
    got = render_template(template, messages, add_generation_prompt=case["add_generation_prompt"], tools=tools,
                          **spec["template_kwargs"])
    assert got == case["expected"]
    assert messages == before


def test_gpt_oss_template_with_a_null_tool_calls_assistant_turn():
    # gpt-oss's template reads message.tool_calls[0] whenever the key exists: with None it failed in Petit
    # ("None has no element 0") while transformers renders the turn as a plain assistant message
    spec = CASES["templates"]["openai-gpt-oss-120b.jinja"]
    with open(os.path.join(HERE, spec["file"]), encoding="utf-8") as f:
        template = f.read()
    messages = [{"role": "user", "content": "Hi!"},
                {"role": "assistant", "content": "Hello! How can I help?", "tool_calls": None},
                {"role": "user", "content": "Tell me a joke."}]
    expected = next(c["expected"] for c in spec["cases"] if c["name"] == "user_assistant_user+gen")
    assert render_template(template, messages, add_generation_prompt=True, **spec["template_kwargs"]) == expected
    assert expected.count("<|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|end|>") == 1


# --- a render is bounded: output size, time, and every failure a TemplateError ------------------------------------

LIMIT = "1048576 output size limit"
BOUNDED = {
    "100 MB string": ("{{ 'a' * 10**8 }}",
                      f"chat template error: the result of '*' would be 100000000 long, over the {LIMIT}"),
    "output": ("{% for i in range(200) %}{{ 'a' * 10000 }}{% endfor %}",
               "chat template output is longer than the 1048576-character output size limit"),
    "macro buffer": ("{% macro m() %}{% for i in range(100000) %}{{ 'a' * 10000 }}{% endfor %}{% endmacro %}"
                     "{% set x = m() %}ok",
                     "chat template builds more than 8388608 characters of text in macros and blocks (8 times the "
                     "1048576-character output size limit)"),
    "doubling ~": ("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                   f"chat template error: the result of '~' would be 2097152 long, over the {LIMIT}"),
    "ljust": ("{{ 'a'.ljust(10**9) }}", f"chat template error: the result of ljust() would be 1000000000 long, over "
                                         f"the {LIMIT}"),
    "range": ("{{ range(10**9) | length }}",
              "chat template error: range() of 1000000000 numbers is over the 100000-number limit"),
    "huge number": ("{{ 2 ** (2 ** 30) }}", "chat template error: 2 ** 1073741824 is too big a number"),
    "TypeError": ("{{ 'a' + none }}",
                  'chat template error: TypeError: can only concatenate str (not "NoneType") to str'),
    "recursion": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "chat template error: recursion too deep"),
}


@pytest.mark.parametrize("case", BOUNDED)
def test_a_render_is_bounded_and_fails_with_a_template_error(case):
    template, message = BOUNDED[case]
    with pytest.raises(TemplateError) as e:
        render_template(template, [])
    assert str(e.value) == message


def test_a_runaway_loop_hits_the_time_limit():
    # 9 million iterations without output: only the clock stops it (the limit is made small to keep the test quick)
    t = "{% for i in range(3000) %}{% for j in range(3000) %}{% endfor %}{% endfor %}"
    with pytest.raises(TemplateError) as e:
        render_template(t, [], time_limit=0.05)
    assert str(e.value) == "chat template took longer than the 0.05-second time limit to render (a runaway loop?)"
