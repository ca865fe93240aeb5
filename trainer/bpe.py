"""Train a byte-level BPE or a character tokenizer and return it as the dict ``petit.tokenizer`` reads.

Regular tokens are written in GPT-2's byte-to-unicode alphabet (a token string stands for a byte
sequence); special tokens are literal. The dict has exactly the keys
``type, vocab, merges, special_tokens, bos_token, eos_token, unk_token, add_bos``.

BPE ids: 0..255 are the single bytes (id = byte value), then one id per learned token in merge order,
then the special tokens. Pre-tokenization is the engine's own (:func:`petit.tokenizer.pretokenize`), so
the chunks merges are learned on are the chunks the engine encodes.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter

from petit.tokenizer import bytes_to_unicode, pretokenize

_BYTE_TO_CHAR = bytes_to_unicode()


def split_special(text: str, special_tokens) -> list[str]:
    """Split text around special-token occurrences (longest match first) and return the plain pieces.

    Example: ``split_special("a<|e|>b", ["<|e|>"]) == ["a", "b"]``.
    """
    if not special_tokens:
        return [text]
    pattern = "|".join(map(re.escape, sorted(special_tokens, key=len, reverse=True)))
    return [piece for piece in re.split(pattern, text) if piece]


def _byte_level(data: bytes) -> str:
    return "".join(_BYTE_TO_CHAR[b] for b in data)


def _check_args(text, mode, vocab_size, special_tokens, eos_token) -> list[str]:
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    if mode not in ("bpe", "char"):
        raise ValueError(f"mode must be 'bpe' or 'char', got {mode!r}")
    if vocab_size is not None and (isinstance(vocab_size, bool) or not isinstance(vocab_size, int)
                                   or vocab_size <= 0):
        raise ValueError(f"vocab_size must be a positive integer or None, got {vocab_size!r}")
    if isinstance(special_tokens, str):
        raise ValueError(f"special_tokens must be a list of strings, got the string {special_tokens!r}")
    specials = list(special_tokens or ())
    for t in specials:
        if not isinstance(t, str) or not t:
            raise ValueError(f"special tokens must be non-empty strings, got {t!r}")
    if len(set(specials)) != len(specials):
        raise ValueError(f"special_tokens has duplicates: {specials!r}")
    if eos_token is not None and eos_token not in specials:
        raise ValueError(f"eos_token {eos_token!r} must be one of the special tokens {specials!r}")
    return specials


def train_tokenizer(text: str, mode: str = "bpe", vocab_size: int | None = 512, special_tokens=(),
                    eos_token: str | None = None) -> dict:
    """Learn a tokenizer from a corpus.

    Args:
        text: The training corpus. Occurrences of the special tokens are cut out first, so they are kept
            whole and never take part in a merge.
        mode: ``"bpe"``: the 256 bytes, then merges of the most frequent adjacent pair (counted over the
            pre-tokenized chunks, weighted by chunk frequency; ties go to the pair with the smaller
            ``(left id, right id)``) until the vocab reaches ``vocab_size`` or no pair is left.
            ``"char"``: one token per distinct character of the corpus, in code-point order.
        vocab_size: Total vocab size including the special tokens. Required for ``bpe`` (must be at least
            256 + number of special tokens); for ``char`` None means no limit, otherwise a cap that raises
            if the corpus has more distinct characters.
        special_tokens: Literal special-token texts, appended after the regular tokens.
        eos_token: The end-of-sequence token (one of ``special_tokens``) or None.

    Returns:
        ``{"type", "vocab", "merges", "special_tokens", "bos_token": None, "eos_token", "unk_token": None,
        "add_bos": False}``.

    Raises:
        ValueError: On a bad mode, vocab size, special-token list or eos token, a corpus with no
            characters in ``char`` mode, or more distinct characters than ``vocab_size`` allows.
    """
    specials = _check_args(text, mode, vocab_size, special_tokens, eos_token)
    pieces = split_special(text, specials)
    if mode == "bpe":
        if vocab_size is None or vocab_size < 256 + len(specials):
            raise ValueError(f"vocab_size must be at least 256 + {len(specials)} special tokens = "
                             f"{256 + len(specials)} for a byte-level BPE, got {vocab_size!r}")
        chunks = Counter(chunk for piece in pieces for chunk in pretokenize(piece))
        vocab, merges = _learn_bpe(chunks, vocab_size - len(specials))
    else:
        chars = sorted({c for piece in pieces for c in piece})
        if not chars:
            raise ValueError("cannot build a char tokenizer: the corpus has no characters outside special tokens")
        if vocab_size is not None and len(chars) + len(specials) > vocab_size:
            raise ValueError(f"the corpus has {len(chars)} distinct characters + {len(specials)} special tokens, "
                             f"more than vocab_size={vocab_size}")
        vocab = [_byte_level(c.encode("utf-8", "surrogatepass")) for c in chars]
        merges = []
    clash = sorted(set(vocab) & set(specials))
    if clash:
        raise ValueError(f"special tokens {clash!r} collide with regular tokens of the same text")
    return {"type": mode, "vocab": vocab + specials, "merges": merges, "special_tokens": specials,
            "bos_token": None, "eos_token": eos_token, "unk_token": None, "add_bos": False}


def _pairs(word):
    return zip(word, word[1:])


def _learn_bpe(chunks: Counter, n_regular: int) -> tuple[list[str], list[list[str]]]:
    """Return (regular vocab strings, merges) learned from {chunk: count}, stopping at n_regular tokens.

    Pair counts are updated incrementally: a merge only revisits the chunks that contain its pair.
    The best pair comes from a heap of (-count, left, right) with stale entries skipped on pop.
    """
    token_str = [_BYTE_TO_CHAR[b] for b in range(256)]  # id -> byte-level string
    str_id = {s: i for i, s in enumerate(token_str)}
    words = [list(chunk.encode("utf-8", "surrogatepass")) for chunk in chunks]
    counts = list(chunks.values())
    pair_count: Counter = Counter()
    where: dict[tuple[int, int], set[int]] = {}
    for wi, word in enumerate(words):
        for pair in _pairs(word):
            pair_count[pair] += counts[wi]
            where.setdefault(pair, set()).add(wi)
    heap = [(-c, a, b) for (a, b), c in pair_count.items()]
    heapq.heapify(heap)
    merges: list[list[str]] = []
    done: set[tuple[int, int]] = set()
    while len(token_str) < n_regular and heap:
        neg, a, b = heapq.heappop(heap)
        pair = (a, b)
        if -neg != pair_count.get(pair, 0) or pair in done:
            continue  # stale heap entry, or a pair re-created after it was merged (see below)
        done.add(pair)
        merged = token_str[a] + token_str[b]
        # Two different merge paths can spell the same string ("ab"+"c", "a"+"bc"): reuse its id, as
        # Hugging Face's trainer does, so the vocab has no duplicates.
        new_id = str_id.get(merged)
        if new_id is None:
            new_id = len(token_str)
            token_str.append(merged)
            str_id[merged] = new_id
        merges.append([token_str[a], token_str[b]])
        changed = set()
        for wi in sorted(where.pop(pair, ())):
            word, c = words[wi], counts[wi]
            new = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                    new.append(new_id)
                    i += 2
                else:
                    new.append(word[i])
                    i += 1
            if len(new) == len(word):
                continue  # stale membership: the pair is no longer in this chunk
            for p in _pairs(word):
                pair_count[p] -= c
                changed.add(p)
            for p in _pairs(new):
                pair_count[p] += c
                changed.add(p)
                where.setdefault(p, set()).add(wi)
            words[wi] = new
        for p in changed:
            if p in pair_count and pair_count[p] <= 0:
                del pair_count[p]
            elif p != pair and p not in done:
                heapq.heappush(heap, (-pair_count[p], p[0], p[1]))
    return token_str, merges
