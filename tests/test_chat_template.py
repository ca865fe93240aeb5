"""Chat templates render exactly what transformers' apply_chat_template(..., tokenize=False) returned for ten real
templates (tests/fixtures/chat_templates/cases.json, produced with transformers 5.24 and jinja2 3.1.6, clock pinned
to 2025-06-15T12:00:00)."""
import copy
import json
import os
from datetime import datetime

import pytest

from petit import chat
from petit.chat import TemplateError, render_template

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
