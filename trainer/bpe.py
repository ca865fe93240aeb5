"""Train a byte-level BPE or a character tokenizer and return it as the dict ``petit.tokenizer`` reads.

Regular tokens are written in GPT-2's byte-to-unicode alphabet (a token string stands for a byte
sequence); special tokens are literal. The dict has exactly the keys
``type, vocab, merges, special_tokens, bos_token, eos_token, unk_token, add_bos``.

BPE ids: 0..255 are the single bytes (id = byte value), then one id per learned token in merge order,
then the special tokens. The merges are learned by Hugging Face `tokenizers` (``trainers.BpeTrainer`` over GPT-2's
``ByteLevel`` pre-tokenizer), the pre-tokenizer `petit.tokenizer.Tokenizer` encodes with, so the chunks merges are
learned on are the chunks the engine encodes.
"""

from __future__ import annotations

import json
import re

from petit.tokenizer import bytes_to_unicode

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
            pre-tokenized chunks, weighted by chunk frequency; ties as Hugging Face's trainer breaks them, see
            `_learn_bpe`) until the vocab reaches ``vocab_size`` or no pair is left.
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
        vocab, merges = _learn_bpe(pieces, vocab_size - len(specials))
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


def _learn_bpe(pieces: list[str], n_regular: int) -> tuple[list[str], list[list[str]]]:
    """Return (regular vocab strings, merges) learned from the text pieces, stopping at n_regular tokens.

    Hugging Face's trainer merges the most frequent pair (counted over the pre-tokenized chunks); a tie goes to the
    pair with the smaller ids in its own numbering (the 256 byte symbols in code-point order of their characters,
    then the learned tokens in order). A merged string met again reuses its token.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    for piece in pieces:
        try:
            piece.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"the corpus holds a lone surrogate {piece[e.start]!r} (U+{ord(piece[e.start]):04X}), "
                             f"which has no UTF-8 form") from None
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=n_regular, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(pieces, trainer)
    merges = [[a, b] for a, b in json.loads(tk.to_str())["model"]["merges"]]
    tokens = [_BYTE_TO_CHAR[b] for b in range(256)]
    tokens += dict.fromkeys(a + b for a, b in merges)
    return tokens, merges
