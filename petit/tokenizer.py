"""The tokenizer protocol; Petit's own byte-level BPE and character tokenizers, plus their incremental decoder.

`TokenizerProtocol` is what the engine asks of a tokenizer; `Tokenizer` (here) and `petit.hf.tokenizer.HFTokenizer`
both follow it. The byte-level BPE runs on Hugging Face `tokenizers` (a ``models.BPE`` built from our vocab and
merges, GPT-2's ``ByteLevel`` pre-tokenizer, the special tokens as added tokens); the char tokenizer is a plain
lookup. Regular tokens are strings in GPT-2's byte-to-unicode alphabet (see :func:`bytes_to_unicode`), so every
token stands for a byte sequence; special tokens (``<|im_end|>`` ...) are written literally. A tokenizer
is stored in model files as the dict returned by :meth:`Tokenizer.to_dict`; ``docs/tokenizer.md``
describes the format and the encoding rules.
"""

from __future__ import annotations

import codecs
import operator
import re
import threading
from typing import Protocol, runtime_checkable

__all__ = ["bytes_to_unicode", "TokenizerProtocol", "Tokenizer", "ByteStreamDecoder", "encode_with"]

_SPECIAL_LINE_RE = re.compile(r"<\|[^|\s]+\|>")
_SPECIAL_NAMES = frozenset({"<s>", "</s>", "<unk>", "<pad>"})
_DICT_KEYS = ("type", "vocab", "merges", "special_tokens", "bos_token", "eos_token", "unk_token", "add_bos")


def bytes_to_unicode() -> dict[int, str]:
    """Return GPT-2's byte-to-unicode table as a new dict ``{byte: one-character string}``.

    Printable bytes (``!``..``~``, ``¡``..``¬``, ``®``..``ÿ``) map to the character with the same code point;
    the other 68 bytes map, in increasing order, to U+0100, U+0101, ...
    """
    printable = {*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)}
    others = [b for b in range(256) if b not in printable]
    table = {b: chr(b) for b in printable} | {b: chr(0x100 + n) for n, b in enumerate(others)}
    return dict(sorted(table.items()))


_BYTE_TO_CHAR = [c for _, c in sorted(bytes_to_unicode().items())]
_CHAR_TO_BYTE = {c: b for b, c in enumerate(_BYTE_TO_CHAR)}


def _to_byte_level(data: bytes) -> str:
    return "".join(_BYTE_TO_CHAR[b] for b in data)


def _from_byte_level(token: str) -> bytes:
    # Characters outside the byte alphabet (only in hand-made vocabs) stand for their own UTF-8.
    return b"".join(bytes((_CHAR_TO_BYTE[c],)) if c in _CHAR_TO_BYTE else c.encode("utf-8", "surrogatepass")
                    for c in token)


def _is_str(value) -> bool:
    return isinstance(value, str)


def _describe(c: str) -> str:
    return f"{c!r} (U+{ord(c):04X})"


@runtime_checkable
class TokenizerProtocol(Protocol):
    """What the engine (sessions, generation, the server, the CLI, the trainer's checks) asks of a tokenizer.

    `Tokenizer` (our byte-level BPE and char tokenizers) and `petit.hf.tokenizer.HFTokenizer` follow it; a tokenizer
    is always used through these names, never by probing for others.
    """

    type: str                       # "bpe", "char" or "hf" (as in ``to_dict()``)
    bos_token: str | None
    bos_id: int | None
    eos_token: str | None
    eos_id: int | None
    special_tokens: list            # texts of the special tokens
    special_ids: "set[int] | frozenset[int]"

    @property
    def vocab_size(self) -> int:
        """Every id the tokenizer can produce is in ``range(vocab_size)``."""

    @property
    def adds_bos(self) -> bool:
        """Whether a plain-text prompt (a completion, not a rendered chat template) starts with ``bos_token``."""

    def encode(self, text: str, *, allow_special: bool = True, add_bos: bool | None = None) -> list[int]:
        """Token ids of ``text``; special-token texts become their ids unless ``allow_special=False``."""

    def decode(self, ids, *, skip_special: bool = False) -> str:
        """The text of ``ids`` (incomplete UTF-8 as U+FFFD)."""

    def stream_decoder(self, skip_special: bool = False):
        """A new `petit.generation.detokenize.StreamDecoder` for this tokenizer's ids."""

    def token_to_id(self, token: str) -> int | None:
        """The id of a token string, or None."""

    def to_dict(self) -> dict:
        """The JSON-serializable description a .petit file stores."""


def encode_with(tk, lock: threading.Lock, text: str, *, allow_special: bool, add_special_tokens: bool = False) -> list:
    """``tk.encode(text).ids`` of a Hugging Face `tokenizers.Tokenizer`; with ``allow_special=False`` its added tokens'
    texts are plain text (the flag is set under ``lock``). A lone surrogate raises a ValueError naming it."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    with lock:
        if not allow_special:
            tk.encode_special_tokens = True
        try:
            return tk.encode(text, add_special_tokens=add_special_tokens).ids
        except Exception as e:      # the library raises plain Exception
            error = e
        finally:
            if not allow_special:
                tk.encode_special_tokens = False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"cannot encode character {_describe(text[e.start])} at index {e.start}: a lone surrogate "
                         f"has no UTF-8 form") from None
    raise ValueError(f"cannot encode the text: {error}")


def _byte_level_bpe(ids: dict, merges: list, special_tokens: list):
    """The Hugging Face tokenizer that encodes with our byte-level BPE: GPT-2's pre-tokenizer regex, then the merges
    (the lowest-ranked adjacent pair, the leftmost first, one at a time: for merges in learned order, as every trained
    merges list is, that is GPT-2's rule); the special tokens are added tokens (found first, leftmost-longest)
    keeping their vocab ids. Decoding stays ours (`Tokenizer.token_bytes`), so
    `ByteStreamDecoder` and `decode` agree by construction."""
    from tokenizers import AddedToken, models, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizerCore
    tk = HFTokenizerCore(models.BPE(dict(ids), merges, ignore_merges=False))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special_tokens])
    return tk


class Tokenizer:
    """A byte-level BPE (``type="bpe"``) or character (``type="char"``) tokenizer.

    Args:
        vocab: Token strings; the index of a token is its id.
        merges: BPE merges ``(left, right)`` in rank order (first = applied first).
        special_tokens: Literal texts of special tokens; each must be in ``vocab``.
        bos_token: Beginning-of-sequence token text, or None.
        eos_token: End-of-sequence token text, or None.
        unk_token: Token used for characters the vocab cannot represent, or None (then they raise).
        add_bos: Whether :meth:`encode` prepends ``bos_token`` by default.
        type: ``"bpe"`` or ``"char"``; inferred as ``"bpe"`` if ``merges`` is non-empty else ``"char"``.

    Raises:
        ValueError: If the vocab is empty or has empty/duplicate tokens, a merge part or result is missing
            from the vocab, a special/bos/eos/unk token is not in the vocab, or ``type`` is invalid.
    """

    def __init__(self, vocab, merges=None, special_tokens=(), bos_token=None, eos_token=None,
                 unk_token=None, add_bos=False, type=None):
        self.vocab = list(vocab)
        if not self.vocab:
            raise ValueError("vocab must contain at least one token, got an empty vocab")
        self._ids: dict[str, int] = {}
        duplicates = []
        for i, token in enumerate(self.vocab):
            if not isinstance(token, str) or not token:
                raise ValueError(f"vocab[{i}] must be a non-empty string, got {token!r}")
            if token in self._ids:
                duplicates.append(f"{token!r} (ids {self._ids[token]} and {i})")
            self._ids.setdefault(token, i)
        if duplicates:
            raise ValueError(f"vocab has duplicate tokens: {', '.join(duplicates[:10])}")

        self.merges = self._check_merges(merges)
        type = ("bpe" if self.merges else "char") if type is None else type
        if type not in ("bpe", "char"):
            raise ValueError(f"type must be 'bpe' or 'char', got {type!r}")
        if type == "char" and self.merges:
            raise ValueError(f"type='char' takes no merges, got {len(self.merges)} merges")
        self.type = type

        if isinstance(special_tokens, str):
            raise ValueError(f"special_tokens must be a list of strings, got the string {special_tokens!r}")
        self.special_tokens = list(special_tokens or ())
        missing = [t for t in self.special_tokens if t not in self._ids]
        if missing:
            raise ValueError(f"special tokens not in the vocab: {', '.join(map(repr, missing))}")
        if len(set(self.special_tokens)) != len(self.special_tokens):
            raise ValueError(f"special_tokens has duplicates: {self.special_tokens!r}")
        self.special_ids = {self._ids[t] for t in self.special_tokens}

        self.bos_token, self.bos_id = self._named_token("bos_token", bos_token)
        self.eos_token, self.eos_id = self._named_token("eos_token", eos_token)
        self.unk_token, self.unk_id = self._named_token("unk_token", unk_token)
        if not isinstance(add_bos, bool):
            raise ValueError(f"add_bos must be a bool, got {add_bos!r}")
        if add_bos and self.bos_id is None:
            raise ValueError("add_bos=True needs a bos_token, got bos_token=None")
        self.add_bos = add_bos

        self._bytes = [t.encode("utf-8") if i in self.special_ids else _from_byte_level(t)
                       for i, t in enumerate(self.vocab)]
        # Byte -> token id, or the negative sentinel -1 - byte when the byte has no token.
        self._byte_ids = [self._ids.get(_BYTE_TO_CHAR[b], -1 - b) for b in range(256)]
        specials = sorted(self.special_tokens, key=len, reverse=True)
        self._special_re = re.compile("|".join(map(re.escape, specials))) if specials else None
        self._hf, self._lock = None, threading.Lock()      # the BPE's Hugging Face tokenizer, made on first use
        # Bytes without a token (only in hand-made vocabs): a character needing one becomes unk_token.
        self._missing = frozenset(b for b in range(256) if self._byte_ids[b] < 0)

    def _check_merges(self, merges) -> list[tuple[str, str]]:
        result, problems, seen = [], [], set()
        for rank, merge in enumerate(merges or ()):
            if not isinstance(merge, (list, tuple)) or len(merge) != 2 or not all(map(_is_str, merge)):
                raise ValueError(f"merges[{rank}] must be a pair of strings, got {merge!r}")
            pair = (merge[0], merge[1])
            if pair in seen:
                raise ValueError(f"merges[{rank}] {pair!r} is a duplicate")
            seen.add(pair)
            absent = [p for p in dict.fromkeys((*pair, pair[0] + pair[1])) if p not in self._ids]
            if absent:
                problems.append(f"merges[{rank}] {pair!r} needs {', '.join(map(repr, absent))}")
            result.append(pair)
        if problems:
            raise ValueError(f"merges use tokens missing from the vocab: {'; '.join(problems[:10])}")
        return result

    def _named_token(self, name: str, token) -> tuple[str | None, int | None]:
        if token is None:
            return None, None
        if token not in self._ids:
            raise ValueError(f"{name} {token!r} is not in the vocab")
        return token, self._ids[token]

    @classmethod
    def from_dict(cls, d: dict) -> "Tokenizer":
        """Build a tokenizer from the JSON dict stored in model files (see :meth:`to_dict`).

        Raises:
            ValueError: If ``d`` is not a dict, lacks ``vocab``, has unknown keys or invalid values.
        """
        if not isinstance(d, dict):
            raise ValueError(f"tokenizer description must be a dict, got {type(d).__name__}")
        unknown = sorted(set(d) - set(_DICT_KEYS))
        if unknown:
            raise ValueError(f"tokenizer dict has unknown keys: {', '.join(map(repr, unknown))}")
        if not isinstance(d.get("vocab"), list):
            raise ValueError(f"tokenizer dict needs 'vocab' as a list of strings, got {d.get('vocab')!r:.80}")
        for key in ("merges", "special_tokens"):
            if not isinstance(d.get(key) or [], list):
                raise ValueError(f"tokenizer dict '{key}' must be a list, got {d[key]!r:.80}")
        return cls(d["vocab"], merges=d.get("merges") or None, special_tokens=d.get("special_tokens") or (),
                   bos_token=d.get("bos_token"), eos_token=d.get("eos_token"), unk_token=d.get("unk_token"),
                   add_bos=False if d.get("add_bos") is None else d["add_bos"], type=d.get("type"))

    def to_dict(self) -> dict:
        """Return the JSON-serializable description (``merges`` is ``[]`` for a char tokenizer)."""
        return {"type": self.type, "vocab": list(self.vocab), "merges": [[a, b] for a, b in self.merges],
                "special_tokens": list(self.special_tokens), "bos_token": self.bos_token,
                "eos_token": self.eos_token, "unk_token": self.unk_token, "add_bos": self.add_bos}

    @classmethod
    def from_files(cls, vocab_path, merges_path=None, special_tokens=None, *, bos_token=None,
                   eos_token=None, unk_token=None, add_bos=False) -> "Tokenizer":
        """Load a vocab file (one token per line) and, for BPE, a merges file (one ``left right`` per line).

        Args:
            vocab_path: UTF-8 file; line ``n`` (1-based) is token id ``n - 1``; only the ``\\n`` is removed.
            merges_path: Merges file, or None for a char tokenizer. Empty lines and lines starting with
                ``#version`` are ignored.
            special_tokens: Special token texts; if None, vocab lines like ``<|name|>`` and ``<s>``, ``</s>``,
                ``<unk>``, ``<pad>`` are special.
            bos_token, eos_token, unk_token, add_bos: As for :class:`Tokenizer`.

        Raises:
            ValueError: If a file is missing or unreadable, or a line is invalid (naming file and line).
        """
        vocab, line_of = [], {}
        for n, token in enumerate(_read_lines(vocab_path, "vocab"), start=1):
            if not token:
                raise ValueError(f"vocab file {vocab_path} line {n}: empty token")
            if token in line_of:
                raise ValueError(f"vocab file {vocab_path} line {n}: token {token!r} repeats line "
                                 f"{line_of[token]}")
            line_of[token] = n
            vocab.append(token)
        if not vocab:
            raise ValueError(f"vocab file {vocab_path} has no tokens")
        merges = []
        if merges_path is not None:
            for n, line in enumerate(_read_lines(merges_path, "merges"), start=1):
                line = line[:-1] if line.endswith("\r") else line
                if not line or line.startswith("#version"):
                    continue
                parts = line.split(" ")
                if len(parts) != 2 or not all(parts):
                    raise ValueError(f"merges file {merges_path} line {n}: expected 'left right' "
                                     f"(two tokens separated by one space), got {line!r}")
                absent = [p for p in (parts[0], parts[1], parts[0] + parts[1]) if p not in line_of]
                if absent:
                    raise ValueError(f"merges file {merges_path} line {n}: {', '.join(map(repr, absent))} "
                                     f"not in the vocab")
                merges.append((parts[0], parts[1]))
        if special_tokens is None:
            special_tokens = [t for t in vocab if t in _SPECIAL_NAMES or _SPECIAL_LINE_RE.fullmatch(t)]
        return cls(vocab, merges, special_tokens, bos_token=bos_token, eos_token=eos_token,
                   unk_token=unk_token, add_bos=add_bos, type="bpe" if merges_path is not None else "char")

    @property
    def vocab_size(self) -> int:
        """Number of tokens."""
        return len(self.vocab)

    def token_to_id(self, token: str) -> int | None:
        """Return the id of a vocab string, or None if it is not in the vocab."""
        return self._ids.get(token)

    def id_to_token(self, token_id) -> str:
        """Return the vocab string of an id (raises ValueError if out of range)."""
        return self.vocab[self._check_id(token_id)]

    def token_bytes(self, token_id) -> bytes:
        """Return the bytes a token stands for (a special token's literal text as UTF-8)."""
        return self._bytes[self._check_id(token_id)]

    def _check_id(self, token_id) -> int:
        return check_token_id(token_id, len(self.vocab))

    def encode(self, text: str, *, allow_special: bool = True, add_bos: bool | None = None) -> list[int]:
        """Encode text to token ids.

        Args:
            text: The text.
            allow_special: If True, special-token texts in ``text`` become their ids (leftmost, longest match
                first); if False they are encoded as plain text.
            add_bos: Prepend ``bos_token``; None means the tokenizer's ``add_bos``.

        Returns:
            The token ids.

        Raises:
            ValueError: If a character cannot be represented and there is no ``unk_token`` (naming the
                character and its index), or ``add_bos`` is requested without a ``bos_token``.
        """
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}")
        ids: list[int] = []
        if self.add_bos if add_bos is None else add_bos:
            if self.bos_id is None:
                raise ValueError("add_bos=True but this tokenizer has no bos_token")
            ids.append(self.bos_id)
        if self.type == "bpe" and not self._missing:
            ids += encode_with(self._bpe(), self._lock, text, allow_special=allow_special)
            return ids
        pos = 0
        if allow_special and self._special_re is not None:
            for m in self._special_re.finditer(text):
                self._encode_plain(text, pos, m.start(), ids)
                ids.append(self._ids[m.group()])
                pos = m.end()
        self._encode_plain(text, pos, len(text), ids)
        return ids

    def _bpe(self):
        # Made on first use: loading a model (and importing the `tokenizers` extension) stays cheap until text is
        # encoded.
        if self._hf is None:
            with self._lock:
                if self._hf is None:
                    self._hf = _byte_level_bpe(self._ids, self.merges, self.special_tokens)
        return self._hf

    def _encode_plain(self, text: str, start: int, end: int, out: list[int]) -> None:
        if self.type == "char":
            for i in range(start, end):
                out.extend(self._encode_char(text, i))
            return
        # A BPE vocab without some byte tokens: a character needing one becomes unk_token, the runs between go
        # through the BPE (the text is split at those characters).
        run = start
        for i in range(start, end):
            if not self._missing.isdisjoint(self._utf8(text, i, i + 1)):
                out.extend(encode_with(self._bpe(), self._lock, text[run:i], allow_special=False))
                out.extend(self._unknown(text[i], i))
                run = i + 1
        out.extend(encode_with(self._bpe(), self._lock, text[run:end], allow_special=False))

    def _utf8(self, text: str, start: int, end: int) -> bytes:
        try:
            return text[start:end].encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"cannot encode character {_describe(text[start + e.start])} at index "
                             f"{start + e.start}: a lone surrogate has no UTF-8 form") from None

    def _unknown(self, c: str, index: int) -> list[int]:
        if self.unk_id is None:
            raise ValueError(f"cannot encode character {_describe(c)} at index {index}: the vocab has no "
                             f"token for it and unk_token is not set")
        return [self.unk_id]

    def _encode_char(self, text: str, i: int) -> list[int]:
        data = self._utf8(text, i, i + 1)
        tid = self._ids.get(_to_byte_level(data))
        if tid is not None:
            return [tid]
        byte_ids = [self._byte_ids[b] for b in data]
        if min(byte_ids) >= 0:
            return byte_ids
        return self._unknown(text[i], i)

    def decode_bytes(self, ids, *, skip_special: bool = False) -> bytes:
        """Concatenate the bytes of the tokens (special tokens as their literal UTF-8, unless skipped)."""
        parts = []
        for t in ids:
            i = self._check_id(t)
            if not (skip_special and i in self.special_ids):
                parts.append(self._bytes[i])
        return b"".join(parts)

    def decode(self, ids, *, skip_special: bool = False) -> str:
        """Decode ids to text; invalid UTF-8 becomes U+FFFD. Out-of-range ids raise ValueError."""
        return self.decode_bytes(ids, skip_special=skip_special).decode("utf-8", errors="replace")

    @property
    def adds_bos(self) -> bool:
        """Whether a plain-text prompt (a completion, not a rendered chat template) starts with ``bos_token``: the one
        answer every caller uses (`HFTokenizer.adds_bos` is Hugging Face's own rule)."""
        return self.add_bos

    def stream_decoder(self, skip_special: bool = False) -> "ByteStreamDecoder":
        """A new incremental decoder (see `petit.generation.detokenize.StreamDecoder`)."""
        return ByteStreamDecoder(self, skip_special)

    def __repr__(self) -> str:
        return (f"Tokenizer(type={self.type!r}, vocab_size={self.vocab_size}, merges={len(self.merges)}, "
                f"special_tokens={len(self.special_tokens)})")


def _read_lines(path, what: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except FileNotFoundError:
        raise ValueError(f"{what} file {path} does not exist") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{what} file {path} is not valid UTF-8 (byte offset {e.start})") from None
    except OSError as e:
        raise ValueError(f"cannot read {what} file {path}: {e.strerror or e}") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


class ByteStreamDecoder:
    """The byte-level `petit.generation.detokenize.StreamDecoder`: turns a stream of token ids into text without
    splitting characters (the tokens' bytes go through an incremental UTF-8 decoder; an incomplete tail is held back).
    Made by `Tokenizer.stream_decoder`.

    ``"".join(d.push(t) for t in ids) + d.flush() == tokenizer.decode(ids, skip_special=...)``.

    Args:
        tokenizer: The tokenizer whose ids are pushed.
        skip_special: Drop special tokens instead of emitting their literal text.
    """

    def __init__(self, tokenizer: Tokenizer, skip_special: bool = False):
        self.tokenizer = tokenizer
        self.skip_special = skip_special
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id) -> str:
        """Add one token and return the text it completes (an incomplete UTF-8 tail is held back)."""
        data = self.tokenizer.token_bytes(token_id)
        if self.skip_special and operator.index(token_id) in self.tokenizer.special_ids:
            return ""
        return self._decoder.decode(data)

    def flush(self) -> str:
        """Return any held-back bytes (a dangling partial character becomes U+FFFD) and reset."""
        text = self._decoder.decode(b"", final=True)
        self._decoder.reset()
        return text


def check_token_id(token_id, vocab_size: int) -> int:
    """`token_id` as an int in 0..vocab_size-1, else a ValueError saying which of the two it is not."""
    try:
        if isinstance(token_id, bool):
            raise TypeError
        i = operator.index(token_id)
    except TypeError:
        raise ValueError(f"token id must be an int, got {token_id!r}") from None
    if not 0 <= i < vocab_size:
        raise ValueError(f"token id {i} is out of range for a vocab of {vocab_size} tokens")
    return i
