"""Hugging Face tokenizers (``tokenizer.json``, run by the `tokenizers` library) behind
`petit.tokenizer.TokenizerProtocol`, as Petit's own `petit.tokenizer.Tokenizer`, so sessions, generation and the CLI
use either kind the same way.

BOS handling. A chat session renders the conversation with the model's chat template and calls ``encode(text)``. A
template that wants a BOS writes it (``{{ bos_token }}``), so the rendered text already starts with
``<|begin_of_text|>`` / ``<s>``; transformers' ``apply_chat_template(tokenize=True)`` therefore encodes with
``add_special_tokens=False``, and so does ``encode(text)`` by default: the special-token texts in ``text`` become
their ids and nothing is added, exactly what transformers feeds the model, never a double BOS. ``add_bos=True``
prepends ``bos_token`` (for a plain completion prompt, pass ``add_bos=tok.adds_bos``: whether the model's
tokenizer adds a BOS when Hugging Face encodes plain text), ``add_bos=False`` adds nothing. `hf_encode` is Hugging
Face's own ``tokenizer.encode(text, add_special_tokens=...)``, post-processor included (BOS and/or EOS as
tokenizer.json defines them; transformers v5 also lets tokenizer.json, not tokenizer_config.json's
``add_bos_token``/``add_eos_token``, decide).
"""
import json
import os
import re
import threading

from petit.formats.metadata import added_tokens_decoder, config_from_files, read_json_object, read_text
from petit.tokenizer import Tokenizer, bytes_to_unicode, check_token_id, encode_with

__all__ = ["HFTokenizer", "HFStreamDecoder", "tokenizer_from_dict"]

_BYTE_OF_CHAR = {c: b for b, c in bytes_to_unicode().items()}
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_DICT_KEYS = ("type", "tokenizer_json", "config")
_CONFIG_KEYS = ("special_tokens", "extra_special_tokens", "added_tokens_decoder", "model_max_length")
_FLAGS = ("special", "lstrip", "rstrip", "normalized", "single_word")


def import_tokenizers():
    """The `tokenizers` package, or a ValueError saying how to install it."""
    try:
        import tokenizers
    except ImportError:
        raise ValueError("reading a Hugging Face tokenizer needs the `tokenizers` package: "
                         "pip install 'tokenizers>=0.22,<0.23'") from None
    return tokenizers


def _check_config(config, where: str) -> dict:
    if not isinstance(config, dict):
        raise ValueError(f"{where} must be an object, got {type(config).__name__}")
    unknown = sorted(set(config) - set(_CONFIG_KEYS))
    if unknown:
        raise ValueError(f"{where} has unknown keys: {', '.join(map(repr, unknown))}")
    special = config.get("special_tokens") or {}
    if not isinstance(special, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                for k, v in special.items()):
        raise ValueError(f"{where}: special_tokens must map names to token strings, got {special!r:.80}")
    extra = config.get("extra_special_tokens") or []
    if not isinstance(extra, list) or not all(isinstance(t, str) and t for t in extra):
        raise ValueError(f"{where}: extra_special_tokens must be a list of token strings, got {extra!r:.80}")
    max_length = config.get("model_max_length")
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1):
        raise ValueError(f"{where}: model_max_length must be a positive integer or null, got {max_length!r:.40}")
    return {"special_tokens": dict(special), "extra_special_tokens": list(extra),
            "added_tokens_decoder": added_tokens_decoder(config.get("added_tokens_decoder"), where),
            "model_max_length": max_length}


def _parse_error(text: str, error: Exception, where: str) -> str:
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        return f"{where}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}"
    return f"{where}: not a Hugging Face tokenizer: {error}"


def _flatten(decoder: dict) -> list:
    if decoder.get("type") == "Sequence":
        return [d for sub in decoder.get("decoders", []) for d in _flatten(sub)]
    return [decoder]


class HFTokenizer:
    """A Hugging Face tokenizer following `petit.tokenizer.TokenizerProtocol` (see the module docstring for BOS).

    Args:
        tokenizer_json: the text of a tokenizer.json.
        config: what tokenizer_config.json adds (`config_from_files`): ``special_tokens`` ``{name: text}``,
            ``extra_special_tokens``, ``added_tokens_decoder``, ``model_max_length``. As transformers does, tokens of
            ``added_tokens_decoder`` are added with their flags (and must get the id the config gives them), and
            named or extra special tokens missing from the tokenizer are added as special tokens.
        source, config_source: names for the two in error messages.
        model: a built `tokenizers.models` model replacing the JSON's, whose vocabulary then needs to hold only the
            added tokens (to give them their ids): a GGUF's vocabulary is handed over directly, not as JSON.

    Attributes:
        bos_token, eos_token, unk_token, pad_token (text or None) and bos_id, eos_id, unk_id, pad_id.
        type: "hf" (as in `to_dict`).
        add_bos: False: ``encode``'s default adds nothing (the rendered chat template carries the BOS).
        add_bos_token, add_eos_token: whether Hugging Face's ``encode(text)`` (add_special_tokens=True) adds them.
        special_ids, special_tokens: the added tokens marked special (``decode(skip_special=True)`` drops them).
        model_max_length: tokenizer_config.json's, or None.

    Raises:
        ValueError: an invalid tokenizer.json (naming the JSON line) or config, or an added token whose id differs
            from the config's.
    """

    type = "hf"
    add_bos = False

    def __init__(self, tokenizer_json: str, config: dict | None = None, *, source: str = "tokenizer_json",
                 config_source: str = "config", model=None):
        tokenizers = import_tokenizers()
        if not isinstance(tokenizer_json, str):
            raise ValueError(f"{source} must be the text of a tokenizer.json, got {type(tokenizer_json).__name__}")
        self.config = _check_config({} if config is None else config, config_source)
        try:
            tk = tokenizers.Tokenizer.from_str(tokenizer_json)
        except Exception as e:      # the library raises plain Exception
            raise ValueError(_parse_error(tokenizer_json, e, source)) from None
        tk.no_truncation(), tk.no_padding()          # never cut or pad a prompt silently
        if model is not None:
            tk.model = model
        self._tk, self._lock = tk, threading.Lock()
        self._add_config_tokens(tokenizers.AddedToken, config_source)

        named = self.config["special_tokens"]
        for name in ("bos", "eos", "unk", "pad"):
            text = named.get(f"{name}_token")
            setattr(self, f"{name}_token", text)
            setattr(self, f"{name}_id", tk.token_to_id(text) if text is not None else None)
        added = tk.get_added_tokens_decoder()
        self._added = {i: t.content for i, t in added.items()}
        self.special_ids = frozenset(i for i, t in added.items() if t.special)
        self.special_tokens = [added[i].content for i in sorted(self.special_ids)]
        # the model's n tokens are ids 0..n-1 (as transformers' len(tokenizer) assumes); with_added_tokens=True
        # would give the same count but builds the whole vocab dict (0.2 s for Qwen)
        self._size = max(tk.get_vocab_size(with_added_tokens=False), max(added, default=-1) + 1)
        self.model_max_length = self.config["model_max_length"]
        self.add_bos_token, self.add_eos_token = self._probe_added()
        try:
            self._decoder_steps = _flatten(json.loads(tk.decoder.__getstate__())) if tk.decoder is not None else []
        except Exception:           # an unreadable decoder description: token_bytes falls back to decode()
            self._decoder_steps = [{"type": None}]
        self._bytes: dict[int, bytes] = {}
        fallback = any(d.get("type") == "ByteFallback" for d in self._decoder_steps)
        pieces = (tk.token_to_id(f"<0x{b:02X}>") for b in range(256)) if fallback else ()
        self._fallback_ids = frozenset(i for i in pieces if i is not None and i not in self._added)

    def _add_config_tokens(self, AddedToken, where: str) -> None:
        tk, declared = self._tk, self.config["added_tokens_decoder"]
        if declared:
            order = sorted(declared, key=int)
            tk.add_tokens([AddedToken(declared[k]["content"], **{f: declared[k][f] for f in _FLAGS}) for k in order])
            for key in order:
                got = tk.token_to_id(declared[key]["content"])
                if got != int(key):
                    raise ValueError(f"{where}: added_tokens_decoder gives {declared[key]['content']!r} the id {key} "
                                     f"but the tokenizer has it as {got}")
        present = {t.content for t in tk.get_added_tokens_decoder().values()}
        wanted = [*self.config["special_tokens"].values(), *self.config["extra_special_tokens"]]
        missing = [t for t in dict.fromkeys(wanted) if t not in present]
        if missing:
            tk.add_tokens([AddedToken(t, special=True, normalized=False) for t in missing])

    def _probe_added(self) -> tuple[bool, bool]:
        plain = self._tk.encode("a", add_special_tokens=False).ids
        full = self._tk.encode("a", add_special_tokens=True).ids
        start = next((k for k in range(len(full) - len(plain) + 1) if full[k:k + len(plain)] == plain), 0)
        head, tail = full[:start], full[start + len(plain):]
        return (self.bos_id is not None and self.bos_id in head, self.eos_id is not None and self.eos_id in tail)

    # ------------------------------------------------------------------ construction and storage

    @classmethod
    def from_folder(cls, folder) -> "HFTokenizer":
        """Load tokenizer.json, tokenizer_config.json and special_tokens_map.json (the last two optional) of a
        Hugging Face model folder.

        Raises:
            ValueError: the folder or its tokenizer.json is missing, or a file is corrupt (naming the file and, for a
                JSON syntax error, the line and column).
        """
        folder = os.fspath(folder)
        if not os.path.isdir(folder):
            raise ValueError(f"{folder}: not a folder")
        path = os.path.join(folder, "tokenizer.json")
        text = read_text(path)
        if text is None:
            raise ValueError(f"{folder}: no tokenizer.json (Petit reads a Hugging Face tokenizer from its "
                             f"tokenizer.json)")
        config_path = os.path.join(folder, "tokenizer_config.json")
        map_path = os.path.join(folder, "special_tokens_map.json")
        config = config_from_files(read_json_object(config_path) or {}, read_json_object(map_path),
                                   config_path, map_path)
        return cls(text, config, source=path, config_source=config_path)

    def to_dict(self) -> dict:
        """``{"type": "hf", "tokenizer_json": <compact tokenizer.json text>, "config": {...}}``, JSON-serializable,
        for a .petit file's metadata; `from_dict` rebuilds the same tokenizer."""
        with self._lock:
            text = self._tk.to_str()
        return {"type": "hf", "tokenizer_json": text, "config": json.loads(json.dumps(self.config))}

    @classmethod
    def from_dict(cls, d: dict) -> "HFTokenizer":
        """Rebuild a tokenizer from `to_dict`'s dict.

        Raises:
            ValueError: not a dict, unknown keys, a type other than "hf", or an invalid tokenizer_json or config.
        """
        if not isinstance(d, dict):
            raise ValueError(f"tokenizer description must be a dict, got {type(d).__name__}")
        unknown = sorted(set(d) - set(_DICT_KEYS))
        if unknown:
            raise ValueError(f"tokenizer dict has unknown keys: {', '.join(map(repr, unknown))}")
        if d.get("type") != "hf":
            raise ValueError(f"tokenizer dict type must be 'hf', got {d.get('type')!r}")
        return cls(d.get("tokenizer_json"), d.get("config"))

    # ------------------------------------------------------------------ vocabulary

    @property
    def vocab_size(self) -> int:
        """Every id the tokenizer can produce: the model's vocabulary plus the added tokens."""
        return self._size

    def token_to_id(self, token: str) -> int | None:
        """The id of a token string (a vocab entry like ``"Ġthe"`` or an added token's text), or None."""
        return self._tk.token_to_id(token) if isinstance(token, str) else None

    def id_to_token(self, token_id) -> str:
        """The token string of an id (raises ValueError if out of range or unused)."""
        token = self._tk.id_to_token(self._check_id(token_id))
        if token is None:
            raise ValueError(f"token id {token_id} has no token in this tokenizer")
        return token

    def _check_id(self, token_id) -> int:
        return check_token_id(token_id, self._size)

    def token_bytes(self, token_id) -> bytes:
        """The bytes a token stands for: an added token's text as UTF-8; a byte-level token's bytes; a SentencePiece
        piece with ``▁`` as a space, ``<0xE4>`` as that byte. Whole-text steps of the decoder (SentencePiece's strip of
        the first leading space) are left to `decode`."""
        i = self._check_id(token_id)
        data = self._bytes.get(i)
        if data is None:
            data = self._bytes[i] = self._compute_bytes(i)
        return data

    def _compute_bytes(self, i: int) -> bytes:
        if i in self._added:
            return self._added[i].encode("utf-8")
        token = self._tk.id_to_token(i)
        if token is None:
            return b""
        steps = self._decoder_steps
        kinds = {d.get("type") for d in steps}
        if "ByteLevel" in kinds:
            return b"".join(bytes((_BYTE_OF_CHAR[c],)) if c in _BYTE_OF_CHAR else c.encode("utf-8") for c in token)
        if "ByteFallback" in kinds and _BYTE_TOKEN.fullmatch(token):
            return bytes((int(token[3:5], 16),))
        if kinds <= {"Replace", "Metaspace", "ByteFallback", "Fuse", "Strip"}:
            for d in steps:
                if d.get("type") == "Replace" and "String" in (d.get("pattern") or {}):
                    token = token.replace(d["pattern"]["String"], d.get("content", ""))
                elif d.get("type") == "Metaspace":
                    token = token.replace(d.get("replacement", "\u2581"), " ")
            return token.encode("utf-8")
        return self.decode([i]).encode("utf-8")

    # ------------------------------------------------------------------ encoding and decoding

    def encode(self, text: str, *, allow_special: bool = True, add_bos: bool | None = None) -> list[int]:
        """Encode text as a chat session needs it: nothing is added unless asked (see the module docstring).

        Args:
            text: the text, e.g. a rendered chat template.
            allow_special: special-token texts in ``text`` become their ids; False encodes them as plain text (user
                input cannot inject a control token).
            add_bos: True prepends ``bos_token``; None means ``add_bos`` (False).

        Raises:
            ValueError: ``text`` is not a str or holds a lone surrogate, or ``add_bos`` without a ``bos_token``.
        """
        ids = self._encode(text, False, allow_special)
        if self.add_bos if add_bos is None else add_bos:
            if self.bos_id is None:
                raise ValueError("add_bos=True but this tokenizer has no bos_token")
            ids.insert(0, self.bos_id)
        return ids

    def hf_encode(self, text: str, *, add_special_tokens: bool = True, allow_special: bool = True) -> list[int]:
        """Exactly Hugging Face's ``tokenizer.encode(text, add_special_tokens=...)``: with add_special_tokens the
        post-processor adds what the model's tokenizer adds (``add_bos_token`` / ``add_eos_token``)."""
        return self._encode(text, add_special_tokens, allow_special)

    def _encode(self, text: str, add_special_tokens: bool, allow_special: bool) -> list[int]:
        return list(encode_with(self._tk, self._lock, text, allow_special=allow_special,
                                add_special_tokens=add_special_tokens))

    def decode(self, ids, *, skip_special: bool = False) -> str:
        """Hugging Face's decode (``skip_special_tokens=skip_special``; no clean-up of tokenization spaces).
        Out-of-range ids raise ValueError; incomplete UTF-8 becomes U+FFFD."""
        ids = [self._check_id(t) for t in ids]
        with self._lock:
            return self._tk.decode(ids, skip_special_tokens=skip_special)

    def decode_bytes(self, ids, *, skip_special: bool = False) -> bytes:
        """The concatenated `token_bytes` (special tokens as their text, unless skipped)."""
        return b"".join(self.token_bytes(t) for t in ids
                        if not (skip_special and self._check_id(t) in self.special_ids))

    @property
    def adds_bos(self) -> bool:
        """Whether a plain-text prompt starts with ``bos_token``: whether Hugging Face's ``encode(text)`` adds one
        (``add_bos_token``); `encode`'s own default adds nothing, as a rendered chat template carries its BOS."""
        return self.add_bos_token

    def stream_decoder(self, skip_special: bool = False) -> "HFStreamDecoder":
        """A new incremental decoder (see `petit.generation.detokenize.StreamDecoder`)."""
        return HFStreamDecoder(self, skip_special)

    def __repr__(self) -> str:
        return (f"HFTokenizer(vocab_size={self.vocab_size}, special_tokens={len(self.special_tokens)}, "
                f"bos_token={self.bos_token!r}, eos_token={self.eos_token!r})")


class HFStreamDecoder:
    """Incremental detokenizer for an `HFTokenizer`, by decoding windows of ids with Hugging Face's own decoder.

    The window ``ids[prefix:]`` starts with tokens already shown (``ids[prefix:read]``), so whole-text decoder steps
    (SentencePiece drops the first leading space) affect both the window and its shown part alike; the text after
    the shown part is emitted up to its last complete character (a trailing U+FFFD is an incomplete UTF-8 sequence
    of byte-level BPE and waits for the next token). Byte-fallback pieces (``<0xE4>``) are decoded a whole run at a
    time (one invalid byte turns the run's every byte into U+FFFD), so the text of a trailing run waits until a
    regular token (or `flush`) ends the run. The window moves on once its text is complete. For any ids,
    ``"".join(push(t) for t in ids) + flush() == tokenizer.decode(ids, skip_special=...)``.
    """

    def __init__(self, tokenizer: HFTokenizer, skip_special: bool = False):
        self.tokenizer, self.skip_special = tokenizer, skip_special
        self._reset()

    def _reset(self) -> None:
        self._ids: list[int] = []
        self._read = 0            # ids[:read] is the shown context of the window (the window starts at 0)
        self._context_len = 0     # len(decode(ids[:read]))
        self._sent = 0            # characters of decode(ids) already accounted for (shown)

    def _decode(self, ids) -> str:
        return self.tokenizer.decode(ids, skip_special=self.skip_special)

    def push(self, token_id) -> str:
        """Add one token; return the newly completed text ("" while a character is incomplete)."""
        ids = self._ids
        ids.append(self.tokenizer._check_id(token_id))
        text = self._decode(ids)
        stable = len(text.rstrip("\ufffd"))
        run = len(ids)
        while run > self._read and ids[run - 1] in self.tokenizer._fallback_ids:
            run -= 1
        if run < len(ids):          # a trailing run of byte-fallback pieces: final only once it ends
            stable = min(stable, len(self._decode(ids[:run])))
        out = ""
        if stable > self._sent:
            out, self._sent = text[self._sent:stable], stable
        if stable == len(text) and len(text) > self._context_len:
            # complete: the tokens since the last move become the context of the next window
            del ids[:self._read]
            self._read = len(ids)
            self._context_len = self._sent = len(self._decode(ids))
        return out

    def flush(self) -> str:
        """Return the text not yet shown (a dangling partial character as U+FFFD) and start afresh."""
        text = self._decode(self._ids)[self._sent:] if len(self._ids) > self._read else ""
        self._reset()
        return text


def tokenizer_from_dict(d):
    """The tokenizer a .petit file's ``"tokenizer"`` metadata describes: an `HFTokenizer` for ``type`` "hf", else a
    `petit.tokenizer.Tokenizer` (`Tokenizer.from_dict`)."""
    if isinstance(d, dict) and d.get("type") == "hf":
        return HFTokenizer.from_dict(d)
    return Tokenizer.from_dict(d)
