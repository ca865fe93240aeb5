"""Chat templates: a model's own Jinja template rendered exactly as Hugging Face transformers renders it.

transformers' semantics (`apply_chat_template`): message keys whose value is None are dropped (an OpenAI client
sends `"tool_calls": null`, which many templates cannot handle but treat as absent); then a sandboxed, immutable
Jinja environment with trim_blocks and lstrip_blocks, the loop-controls extension and the `{% generation %}` tag (its
body is rendered as is); `tojson` is `json.dumps(..., ensure_ascii=False)`; globals `raise_exception(message)` (an
error the template chooses, shown to the user) and `strftime_now(format)`; variables `messages`, `tools`,
`documents`, `add_generation_prompt` and the special tokens (`bos_token`, `eos_token`, ...).

A template is untrusted input (it comes with every downloaded model): the sandbox refuses attribute access to Python
internals, the environment is immutable, and a render is bounded. Its output may not pass `max_output` characters
(1 MiB), it may not run longer than `time_limit` seconds (2 s), and `*`, `**`, `+`, `~` and `range()` refuse, before
computing it, a result past those limits. The clock is checked in every loop iteration, operator, call, filter and
output chunk. Every failure, whatever Python raised inside the template, is a TemplateError naming what went wrong.
"""
import contextvars
import functools
import json
import time
from datetime import datetime
from functools import lru_cache

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import MAX_RANGE, ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

MAX_OUTPUT = 1 << 20    # characters a render may produce, and the most any one string or list in it may hold
TIME_LIMIT = 2.0        # seconds a render may take
MAX_INT_BITS = 1 << 16  # an integer result bigger than this is no chat template's business (and slow to print)
BUFFERED = 8            # text built in macros, {% set %} and call blocks: at most this many times max_output in all


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


class _Budget:
    """The limits of one render and its deadline."""

    def __init__(self, max_output: int, time_limit: float):
        self.max_output, self.time_limit = max_output, time_limit
        self.deadline = time.monotonic() + time_limit
        self.buffered, self.marks = 0, {}  # characters appended to any buffer; id(buffer) -> [buffer, items counted]

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise TemplateError(f"chat template took longer than the {self.time_limit:g}-second time limit to render "
                                f"(a runaway loop?)")

    def check_size(self, n: int, what: str) -> None:
        if n > self.max_output:
            raise TemplateError(f"chat template error: {what} would be {n} long, over the {self.max_output} "
                                f"output size limit")


_BUDGET: contextvars.ContextVar = contextvars.ContextVar("petit_chat_budget", default=None)


def _budget() -> _Budget | None:
    budget = _BUDGET.get()
    if budget is not None:
        budget.check_time()
    return budget


def _sized(x) -> bool:
    return isinstance(x, (str, list, tuple))


class _BoundLoopsAndJoins(NodeTransformer):
    """Routes every `for` loop's iterable and every `~` through the environment, where the budget is checked."""

    def visit_For(self, node):
        node = self.generic_visit(node)
        node.iter = nodes.Call(nodes.EnvironmentAttribute("bounded_iter"), [node.iter], [], None, None,
                               lineno=node.lineno)
        return node

    def visit_Concat(self, node):
        node = self.generic_visit(node)
        return nodes.Call(nodes.EnvironmentAttribute("bounded_join"), list(node.nodes), [], None, None,
                          lineno=node.lineno)


class _CountingCodeGenerator(CodeGenerator):
    """Output into a buffer (a macro's, a `{% set %}` block's, a call block's body) is counted as it is appended:
    such text reaches the render's output only at the end, too late for the output bound."""

    def visit_Output(self, node, frame):
        super().visit_Output(node, frame)
        if frame.buffer is not None:
            self.writeline(f"environment.count_buffer({frame.buffer})")


class _BoundedEnvironment(ImmutableSandboxedEnvironment):
    """transformers' sandbox, plus the per-render budget (a no-op outside `render_template`)."""

    intercepted_binops = frozenset({"*", "**", "+"})
    code_generator_class = _CountingCodeGenerator

    def _parse(self, source, name, filename):
        tree = _BoundLoopsAndJoins().visit(super()._parse(source, name, filename))
        tree.set_environment(self)
        return tree

    def call_binop(self, context, op, left, right):
        budget = _budget()
        if budget is not None:
            ints = type(left) is int and type(right) is int
            if op == "**" and ints and right > 0 and left.bit_length() * right > MAX_INT_BITS:
                raise TemplateError(f"chat template error: {left} ** {right} is too big a number")
            if op == "*" and ints and left.bit_length() + right.bit_length() > MAX_INT_BITS:
                raise TemplateError("chat template error: a product of two numbers is too big a number")
            if op == "*" and type(right) is int and _sized(left):
                budget.check_size(len(left) * right, "the result of '*'")
            if op == "*" and type(left) is int and _sized(right):
                budget.check_size(left * len(right), "the result of '*'")
            if op == "+" and _sized(left) and _sized(right):
                budget.check_size(len(left) + len(right), "the result of '+'")
        return self.binop_table[op](left, right)

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (jinja's own signature)
        budget = _budget()
        if budget is not None and _sized(getattr(__obj, "__self__", None)):
            # 'x'.ljust(10**9) and the like: refuse a width that alone passes the limit, before Python allocates it
            for a in (*args, *kwargs.values()):
                if type(a) is int:
                    budget.check_size(a, f"the result of {__obj.__name__}()")
        out = super().call(__context, __obj, *args, **kwargs)
        if budget is not None and _sized(out):
            budget.check_size(len(out), "a call's result")
        return out

    def bounded_iter(self, iterable):
        budget = _BUDGET.get()
        for item in iterable:
            if budget is not None:
                budget.check_time()
            yield item

    def bounded_join(self, *items):
        parts = [str(x) for x in items]
        budget = _budget()
        if budget is not None:
            budget.check_size(sum(map(len, parts)), "the result of '~'")
        return "".join(parts)

    def count_buffer(self, buf: list) -> None:
        budget = _budget()
        if budget is None:
            return
        mark = budget.marks.setdefault(id(buf), [buf, 0])  # holding `buf` keeps its id from being reused
        budget.buffered += sum(map(len, buf[mark[1]:]))
        mark[1] = len(buf)
        if budget.buffered > BUFFERED * budget.max_output:
            raise TemplateError(f"chat template builds more than {BUFFERED * budget.max_output} characters of text "
                                f"in macros and blocks ({BUFFERED} times the {budget.max_output}-character output "
                                f"size limit)")

    def concat(self, parts):
        """Joins a macro's, a `{% set %}` block's or a call block's output: bounded like the render's own."""
        parts = list(parts)
        budget = _budget()
        if budget is not None:
            n = sum(map(len, parts))
            if n > budget.max_output:
                raise _output_error(budget)
        return "".join(parts)


def _output_error(budget: _Budget) -> TemplateError:
    return TemplateError(f"chat template output is longer than the {budget.max_output}-character output size limit")


def _range(*args):
    rng = range(*args)
    budget = _budget()
    limit = MAX_RANGE if budget is None else min(MAX_RANGE, budget.max_output)
    if len(rng) > limit:
        raise TemplateError(f"chat template error: range() of {len(rng)} numbers is over the {limit}-number limit")
    return rng


def _bounded_filter(name: str, f):
    @functools.wraps(f)  # keeps jinja's pass_context / pass_eval_context marks
    def bounded(*args, **kwargs):
        budget = _budget()
        out = f(*args, **kwargs)
        if budget is not None and _sized(out):
            budget.check_size(len(out), f"the result of the '{name}' filter")
        return out
    return bounded


@lru_cache(maxsize=16)
def _compile(template: str) -> jinja2.Template:
    env = _BoundedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, loopcontrols])
    env.filters["tojson"] = _tojson
    env.filters = {name: _bounded_filter(name, f) for name, f in env.filters.items()}
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["range"] = _range
    try:
        return env.from_string(template)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateError(f"chat template syntax error at line {e.lineno}: {e.message}") from None


def _without_none(messages: list) -> list:
    """transformers' `apply_chat_template` drops each message's keys whose value is None (`content=None`,
    `tool_calls=None` from OpenAI clients) before rendering; the caller's messages are not modified."""
    return [{k: v for k, v in m.items() if v is not None} if isinstance(m, dict) else m for m in messages]


def render_template(template: str, messages: list, *, add_generation_prompt: bool = False, tools=None,
                    documents=None, max_output: int = MAX_OUTPUT, time_limit: float = TIME_LIMIT,
                    **special_tokens) -> str:
    """Render `messages` ([{"role": ..., "content": ...}, ...]) with a Jinja chat template.

    Args:
        template: the template text (tokenizer_config.json's chat_template, chat_template.jinja, or a .petit file's).
        messages: the conversation; not modified. Keys whose value is None count as absent, as in transformers.
        add_generation_prompt: end with the opening of an assistant turn.
        tools: tool (function) descriptions in the OpenAI JSON shape, or None.
        documents: retrieval documents, or None.
        max_output: the most characters the render may produce (and any one string or list in it may hold).
        time_limit: the most seconds the render may take.
        **special_tokens: bos_token, eos_token and any other variables the template reads.

    Raises:
        TemplateError: the template's own raise_exception message, a syntax error, a rendering error of any kind,
            or a limit passed (output size, time).
    """
    compiled = _compile(template)
    budget = _Budget(max_output, time_limit)
    token = _BUDGET.set(budget)
    try:
        out, n = [], 0
        for chunk in compiled.generate(messages=_without_none(messages), tools=tools, documents=documents,
                                       add_generation_prompt=add_generation_prompt, **special_tokens):
            n += len(chunk)
            if n > max_output:
                raise _output_error(budget)
            budget.check_time()
            out.append(chunk)
        return "".join(out)
    except TemplateError:
        raise
    except jinja2.TemplateError as e:
        raise TemplateError(f"chat template error: {e}") from None
    except RecursionError:
        raise TemplateError("chat template error: recursion too deep") from None
    except MemoryError:
        raise TemplateError("chat template error: out of memory (the template builds something too big)") from None
    except Exception as e:  # noqa: BLE001 - untrusted code: any failure inside it is the template's
        raise TemplateError(f"chat template error: {type(e).__name__}: {e}") from None
    finally:
        _BUDGET.reset(token)
