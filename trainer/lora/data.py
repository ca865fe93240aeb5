"""The fine-tuning data: a JSONL file of OpenAI-style chats ({"messages": [{"role": ..., "content": ...}, ...]}) or
texts ({"text": ...}), or plain text lines (a line that is not a JSON object is a text).

A chat is rendered with the model's own chat template, and the loss counts only the assistant's tokens: each
assistant turn is the difference between the template's render of the conversation up to it with the generation
prompt (what the model is shown when it answers) and the render that includes it (its text and end-of-turn marks).
Each piece is tokenized on its own, so the tokens a turn is trained on are those the model generates after that
prompt. A template that renders earlier turns differently once a later one is added (Qwen 3's drops the reasoning
of old turns) cannot be cut so: its chat becomes one example per assistant turn, the conversation up to that turn.
A text trains on every token."""
from __future__ import annotations

import json

import numpy as np

from petit.chat.template import render_template


class RewritesHistory(ValueError):
    """The chat template renders earlier turns differently once a later turn is added."""


class Example:
    """One sequence: ids [n] and which of them the loss counts (weights[j] for predicting ids[j], j >= 1)."""

    def __init__(self, ids, weights, line: int):
        self.ids = np.asarray(ids, np.int32)
        self.weights = np.asarray(weights, np.float32)
        self.line = line

    @property
    def n_loss(self) -> int:
        return int(self.weights[1:].sum())


def _special_tokens(model) -> dict:
    tok = model.tokenizer
    names = {"bos_token": tok.bos_token or "", "eos_token": tok.eos_token or ""}
    names.update({k: v for k, v in model.metadata.get("special_tokens", {}).items() if isinstance(v, str)})
    return names


def chat_segments(template: str, messages: list, special: dict) -> list[tuple[str, bool]]:
    """The rendered conversation as (text, trained) pieces, in order; trained pieces are the assistant turns.

    Raises ValueError when the template renders an earlier part differently once a turn is added (then the pieces
    cannot be told apart)."""
    def render(msgs, gen):
        return render_template(template, msgs, add_generation_prompt=gen, **special)

    pieces, done = [], ""
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        prompt, full = render(messages[:i], True), render(messages[:i + 1], False)
        if not full.startswith(prompt):
            raise ValueError(f"the chat template renders assistant turn {i} after a prompt that is not the "
                             f"conversation's render with the generation prompt, so its tokens cannot be told apart")
        if not prompt.startswith(done):
            raise RewritesHistory(f"the chat template renders the conversation before assistant turn {i} differently "
                             f"once the turn is added, so its tokens cannot be told apart")
        pieces += [(prompt[len(done):], False), (full[len(prompt):], True)]
        done = full
    if not pieces:
        raise ValueError("a chat without an assistant message has nothing to train on")
    rest = render(messages, False)
    if rest.startswith(done) and len(rest) > len(done):
        pieces.append((rest[len(done):], False))
    return pieces


def _check_messages(messages, where: str) -> None:
    if not isinstance(messages, list) or not messages:
        raise ValueError(f"{where}: \"messages\" must be a non-empty list")
    for j, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise ValueError(f"{where}: message {j} must be an object with string \"role\" and \"content\"")


def _template(model, template):
    template = template or model.metadata.get("chat_template")
    if not template:
        raise ValueError("this model has no chat template, so chats cannot be rendered (give plain texts)")
    return template


def _encode(model, pieces) -> tuple[list[int], list[float]]:
    tok, ids, weights = model.tokenizer, [], []
    for j, (text, trained) in enumerate(pieces):
        part = tok.encode(text) if j == 0 else tok.encode(text, add_bos=False)
        ids += part
        weights += [1.0 if trained else 0.0] * len(part)
    return ids, weights


def encode_chat(model, messages: list, template: str | None = None) -> tuple[list[int], list[float]]:
    """(ids, weights) of one chat: weight 1 on the assistant turns' tokens."""
    return _encode(model, chat_segments(_template(model, template), messages, _special_tokens(model)))


def encode_last_turn(model, messages: list, template: str | None = None) -> tuple[list[int], list[float]]:
    """(ids, weights) of a chat ending with an assistant turn, only that turn trained."""
    template, special = _template(model, template), _special_tokens(model)
    prompt = render_template(template, messages[:-1], add_generation_prompt=True, **special)
    full = render_template(template, messages, **special)
    if not full.startswith(prompt):
        raise ValueError(f"the chat template renders assistant turn {len(messages) - 1} after a prompt that is not "
                         f"the conversation's render with the generation prompt, so its tokens cannot be told apart")
    return _encode(model, [(prompt, False), (full[len(prompt):], True)])


def chat_examples(model, messages: list) -> list[tuple[list[int], list[float]]]:
    """[(ids, weights)]: the chat as one sequence, or, when its template rewrites earlier turns, one sequence per
    assistant turn (the conversation up to it, that turn trained)."""
    try:
        return [encode_chat(model, messages)]
    except RewritesHistory:
        return [encode_last_turn(model, messages[:i + 1]) for i, m in enumerate(messages) if m["role"] == "assistant"]


def encode_text(model, text: str) -> tuple[list[int], list[float]]:
    tok = model.tokenizer
    ids = tok.encode(text, add_bos=tok.adds_bos)
    return ids, [1.0] * len(ids)


def read_examples(path: str, model, ctx: int) -> list[Example]:
    """Every example of the file, cut to ctx + 1 tokens; examples with no token to learn are skipped.

    Raises ValueError naming the file and line of a bad record; OSError when the file cannot be read."""
    if model.tokenizer is None:
        raise ValueError("this model has no tokenizer, so it cannot read training text")
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            where = f"{path}:{n}"
            record = None
            if line.lstrip().startswith("{"):
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
            if record is None:
                seqs = [encode_text(model, line)]
            elif not isinstance(record, dict):
                raise ValueError(f"{where}: a JSON line must be an object")
            elif "messages" in record:
                _check_messages(record["messages"], where)
                try:
                    seqs = chat_examples(model, record["messages"])
                except ValueError as e:
                    raise ValueError(f"{where}: {e}") from None
            elif isinstance(record.get("text"), str):
                seqs = [encode_text(model, record["text"])]
            else:
                raise ValueError(f"{where}: a JSON line needs \"messages\" (a chat) or \"text\"")
            for ids, weights in seqs:
                ex = Example(ids[:ctx + 1], weights[:ctx + 1], n)
                if len(ex.ids) >= 2 and ex.n_loss:
                    out.append(ex)
    if not out:
        raise ValueError(f"{path}: no example with a token to learn")
    return out


def split(examples: list, fraction: float, seed: int) -> tuple[list, list]:
    """(train, held-out): a shuffled `fraction` of the examples (at least one when there are two or more) held out."""
    order = np.random.default_rng([seed, 1]).permutation(len(examples))
    n_val = 0 if fraction <= 0 or len(examples) < 2 else max(1, int(round(fraction * len(examples))))
    n_val = min(n_val, len(examples) - 1)
    return [examples[i] for i in order[n_val:]], [examples[i] for i in order[:n_val]]
