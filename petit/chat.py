"""Chat templates: a model's own Jinja template rendered exactly as Hugging Face transformers renders it.

transformers' semantics (`render_jinja_template`): a sandboxed, immutable Jinja environment with trim_blocks and
lstrip_blocks, the loop-controls extension and the `{% generation %}` tag (its body is rendered as is); `tojson`
is `json.dumps(..., ensure_ascii=False)`; globals `raise_exception(message)` (an error the template chooses, shown to
the user) and `strftime_now(format)`; variables `messages`, `tools`, `documents`, `add_generation_prompt` and the
special tokens (`bos_token`, `eos_token`, ...). A template is untrusted input: the sandbox refuses attribute access
to Python internals, and the environment is immutable.
"""
import json
from datetime import datetime
from functools import lru_cache

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class TemplateError(ValueError):
    """A chat template failed to render; the message is the template's own (e.g. "System role not supported")
    or names the template error and its line."""


class _GenerationTag(Extension):
    """`{% generation %} ... {% endgeneration %}` marks the assistant's tokens for training masks; rendering keeps
    the body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body).set_lineno(lineno)


def _raise_exception(message):
    raise TemplateError(str(message))


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _now() -> datetime:
    return datetime.now()


def _strftime_now(fmt: str) -> str:
    return _now().strftime(fmt)


@lru_cache(maxsize=16)
def _compile(template: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_GenerationTag, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(template)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateError(f"chat template syntax error at line {e.lineno}: {e.message}") from None


def render_template(template: str, messages: list, *, add_generation_prompt: bool = False, tools=None,
                    documents=None, **special_tokens) -> str:
    """Render `messages` ([{"role": ..., "content": ...}, ...]) with a Jinja chat template.

    Args:
        template: the template text (tokenizer_config.json's chat_template, chat_template.jinja, or a .petit file's).
        messages: the conversation; not modified.
        add_generation_prompt: end with the opening of an assistant turn.
        tools: tool (function) descriptions in the OpenAI JSON shape, or None.
        documents: retrieval documents, or None.
        **special_tokens: bos_token, eos_token and any other variables the template reads.

    Raises:
        TemplateError: the template's own raise_exception message, a syntax error, or a rendering error.
    """
    compiled = _compile(template)
    try:
        return compiled.render(messages=messages, tools=tools, documents=documents,
                               add_generation_prompt=add_generation_prompt, **special_tokens)
    except TemplateError:
        raise
    except jinja2.TemplateError as e:
        raise TemplateError(f"chat template error: {e}") from None
