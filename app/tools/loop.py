"""The tool-use loop's bookkeeping, read from the conversation itself (no Qt): which calls of the last reply are
still unanswered, how many rounds of calls the model made since the user last spoke, and the `tool` message that
answers a call (its result, or why it did not run). Because it is all in the stored messages, a chat reopened after
a restart shows the calls and their results as they were."""
import json

from app.chat.store import Message

MAX_ROUNDS = 5                   # rounds of tool calls after one user message before the model is not asked again
REFUSED = "The user did not allow this call: the tool did not run."
ABANDONED = "The conversation went on before this call was answered: the tool did not run."


def rounds_since_user(messages: list) -> int:
    """How many replies with tool calls follow the last user message."""
    n = 0
    for m in reversed(messages):
        if m.role == "user":
            break
        n += m.role == "assistant" and bool(m.meta.get("tool_calls"))
    return n


def pending_calls(messages: list) -> list:
    """The calls of the last reply with calls that no later `tool` message answers (none when a user message or
    another reply came after it)."""
    answered = set()
    for m in reversed(messages):
        if m.role == "tool":
            answered.add(m.meta.get("tool_call_id"))
        elif m.role == "assistant" and m.meta.get("tool_calls"):
            return [c for c in m.meta["tool_calls"] if c.get("id") not in answered]
        else:
            return []
    return []


def tool_message(call: dict, text: str, error: bool = False) -> Message:
    """The `tool` message that answers `call` with `text` (a result, or why the tool did not run)."""
    fn = call.get("function") or {}
    return Message("tool", text, {"tool_call_id": call.get("id", ""), "name": fn.get("name", ""),
                                  "arguments": fn.get("arguments", "{}"), "error": error})


def call_text(call: dict) -> str:
    """'lookup(key="fruit")': a call as the conversation shows it."""
    fn = call.get("function") or {}
    try:
        args = json.loads(fn.get("arguments") or "{}")
    except ValueError:
        args = None
    if isinstance(args, dict):
        inner = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    else:
        inner = str(fn.get("arguments"))
    return f"{fn.get('name')}({inner})"
