"""Byte-level BPE and character tokenizers, plus their incremental decoder for streaming.

Regular tokens are strings in GPT-2's byte-to-unicode alphabet (see :func:`bytes_to_unicode`), so every
token stands for a byte sequence; special tokens (``<|im_end|>`` ...) are written literally. A tokenizer
is stored in model files as the dict returned by :meth:`Tokenizer.to_dict`; ``docs/tokenizer.md``
describes the format and the encoding rules.
"""

from __future__ import annotations

import codecs
import heapq
import operator
import re

__all__ = ["bytes_to_unicode", "pretokenize", "Tokenizer", "ByteStreamDecoder"]

# GPT-2's pre-tokenizer with stdlib `re`: a letter is [^\W\d_], a digit is \d, and "other" is any
# non-space character that is neither (including "_"). Every character matches some alternative,
# so the chunks always concatenate back to the text.
_PRETOKENIZE_RE = re.compile(
    r"'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"
)
_SPECIAL_LINE_RE = re.compile(r"<\|[^|\s]+\|>")
_SPECIAL_NAMES = frozenset({"<s>", "</s>", "<unk>", "<pad>"})
_CACHE_SIZE = 20_000
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


def pretokenize(text: str) -> list[str]:
    """Split text into GPT-2-style chunks; ``"".join(pretokenize(text)) == text`` always holds."""
    return _PRETOKENIZE_RE.findall(text)


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
        self._merge_table = {(self._ids[a], self._ids[b]): (rank, self._ids[a + b])
                             for rank, (a, b) in enumerate(self.merges)}
        specials = sorted(self.special_tokens, key=len, reverse=True)
        self._special_re = re.compile("|".join(map(re.escape, specials))) if specials else None
        self._cache: dict[str, tuple[int, ...]] = {}

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
            allow_special: If True, special-token texts in ``text`` become their ids (longest match first);
                if False they are encoded as plain text.
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
        pos = 0
        if allow_special and self._special_re is not None:
            for m in self._special_re.finditer(text):
                self._encode_plain(text, pos, m.start(), ids)
                ids.append(self._ids[m.group()])
                pos = m.end()
        self._encode_plain(text, pos, len(text), ids)
        return ids

    def _encode_plain(self, text: str, start: int, end: int, out: list[int]) -> None:
        if start >= end:
            return
        if self.type == "char":
            for i in range(start, end):
                out.extend(self._encode_char(text, i))
            return
        cache = self._cache
        for m in _PRETOKENIZE_RE.finditer(text, start, end):
            chunk = m.group()
            ids = cache.get(chunk)
            if ids is None:
                ids = self._encode_chunk(text, m.start(), m.end())
                if len(cache) >= _CACHE_SIZE:
                    del cache[next(iter(cache))]
                cache[chunk] = ids
            out.extend(ids)

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

    def _encode_chunk(self, text: str, start: int, end: int) -> tuple[int, ...]:
        syms = self._merge([self._byte_ids[b] for b in self._utf8(text, start, end)])
        if min(syms) >= 0:
            return tuple(syms)
        # Some byte has no token: map each such byte to unk, one unk per character.
        char_of_byte = [i for i in range(start, end) for _ in text[i].encode("utf-8")]
        out, pos, last_unk_char = [], 0, -1
        for s in syms:
            if s >= 0:
                out.append(s)
                pos += len(_from_byte_level(self.vocab[s]))
                continue
            ci = char_of_byte[pos]
            if ci != last_unk_char:
                out.extend(self._unknown(text[ci], ci))
                last_unk_char = ci
            pos += 1
        return tuple(out)

    def _merge(self, syms: list[int]) -> list[int]:
        """Apply merges minbpe-style: repeatedly merge every occurrence of the lowest-rank adjacent pair.

        Implemented with a heap over a linked list: all pairs of the current lowest rank are merged left
        to right before pairs created meanwhile are considered, which gives exactly the naive result.
        """
        table = self._merge_table
        n = len(syms)
        if n < 2 or not table:
            return syms
        heap = [(table[p][0], i) for i, p in enumerate(zip(syms, syms[1:])) if p in table]
        if not heap:
            return syms
        heapq.heapify(heap)
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        prv = list(range(-1, n - 1))
        alive = [True] * n
        while heap:
            rank, created = heap[0][0], []
            while heap and heap[0][0] == rank:
                _, i = heapq.heappop(heap)
                j = nxt[i]
                if not alive[i] or j < 0:
                    continue
                hit = table.get((syms[i], syms[j]))
                if hit is None or hit[0] != rank:
                    continue
                syms[i], alive[j] = hit[1], False
                k = nxt[i] = nxt[j]
                if k >= 0:
                    prv[k] = i
                    after = table.get((syms[i], syms[k]))
                    if after is not None:
                        created.append((after[0], i))
                p = prv[i]
                if p >= 0:
                    before = table.get((syms[p], syms[i]))
                    if before is not None:
                        created.append((before[0], p))
            for entry in created:
                heapq.heappush(heap, entry)
        return [s for s, a in zip(syms, alive) if a]

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
