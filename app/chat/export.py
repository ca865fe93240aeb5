"""Export a chat as Markdown (for reading) or JSON (for tools: every message with its stats)."""
import json
import time

from app.chat.store import ChatInfo, Message

ROLE_TITLES = {"user": "You", "assistant": "Assistant", "system": "System"}


def to_markdown(chat: ChatInfo, messages: list[Message]) -> str:
    lines = [f"# {chat.title}", ""]
    for m in messages:
        who = ROLE_TITLES.get(m.role, m.role)
        if m.role == "assistant" and m.meta.get("model"):
            who += f" ({m.meta['model']})"
        lines += [f"## {who}", "", m.content.rstrip(), ""]
    return "\n".join(lines)


def to_json(chat: ChatInfo, messages: list[Message]) -> str:
    doc = {"title": chat.title,
           "created": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(chat.created)),
           "messages": [m.to_dict() for m in messages]}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def export_chat(path: str, chat: ChatInfo, messages: list[Message]) -> None:
    """Write the chat to `path`: JSON when it ends in .json, else Markdown."""
    text = to_json(chat, messages) if path.lower().endswith(".json") else to_markdown(chat, messages)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
