"""The passages found for a question, as the chat keeps them (a message's meta "sources": [{"n", "path", "name",
"location", "text"}], so they survive a restart even when the files change) and as the model reads them: numbered,
before the question, with the instruction to cite them as [1], [2]."""
import os

INSTRUCTION = "Cite the sources you use as [1], [2]."     # short: a small model's context is small


def sources_of(hits, budget: int | None = None) -> list[dict]:
    """The meta entries of retrieve.search's hits, numbered from 1; with `budget`, their texts come to at most that
    many characters (the best passage cut to it if it alone is longer, the others left out when they do not fit)."""
    out, left = [], budget
    for h in hits:
        text = h.text
        if left is not None:
            if out and len(text) > left:
                continue
            if len(text) > left:
                text = text[:max(left - 1, 0)].rstrip() + "…"
            left -= len(text)
        out.append({"n": len(out) + 1, "path": h.path, "name": os.path.basename(h.path), "location": h.location,
                    "text": text})
    return out


def with_sources(text: str, sources: list | None) -> str:
    """The user's message as the model reads it: the instruction and the numbered sources, then the question."""
    if not sources:
        return text
    blocks = [f"[{s['n']}] {s['name']}, {s['location']}:\n{s['text']}" for s in sources]
    return "Sources:\n" + "\n\n".join(blocks) + f"\n\n{INSTRUCTION}\nQuestion: {text}"
