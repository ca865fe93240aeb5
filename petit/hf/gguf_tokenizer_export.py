"""A tokenizer as GGUF ``tokenizer.ggml.*`` metadata (`petit convert -o X.gguf`), the inverse of gguf_tokenizer.py:
byte-level BPE ("gpt2": tokens, token types, merges, the pre-tokenizer's llama.cpp name, BOS / EOS / padding ids,
add_bos), for Petit's own tokenizer and for a Hugging Face tokenizer.json whose pre-tokenizer llama.cpp names.

The result is held to the tokenizer it came from: it is read back as gguf_tokenizer.py (and llama.cpp) read it, and
a probe text with every token's text must encode to the same ids; a tokenizer it cannot express exactly (a
SentencePiece vocabulary, a pre-tokenizer llama.cpp does not name, normalizers) is refused, naming what.
"""
import json
import unicodedata

import numpy as np

from petit.hf.gguf_tokenizer import CONTROL, NORMAL, PRE_TOKENIZERS, UNUSED, USER_DEFINED, tokenizer_from_gguf

_PROBE = ("Hello world! It's 2026-12-01, 12345 apples, don't stop.\n\n  Tabs\tand  spaces  \r\n"
          "Ünïcödé: 日本語, emoji 🙂, ёж.  <|im_start|>user\nhi<|im_end|>\n")


# the contractions as Hugging Face's files spell them, and as gguf_tokenizer.py does (the same matches)
_CONTRACTIONS = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)", "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])")


def _pre_name(pre: dict | None, where: str, ignore_merges: bool = False) -> str:
    """llama.cpp's name for a byte-level pre-tokenizer (a tokenizer.json "pre_tokenizer")."""
    if pre is not None and pre.get("type") == "ByteLevel" and pre.get("use_regex", True):
        return "gpt-2"
    if pre is not None and pre.get("type") == "Sequence":
        steps = pre.get("pretokenizers") or []
        splits, last = steps[:-1], steps[-1] if steps else {}
        if last.get("type") == "ByteLevel" and not last.get("use_regex", True) and all(
                s.get("type") == "Split" and s.get("behavior") == "Isolated" and not s.get("invert")
                and "Regex" in s.get("pattern", {}) for s in splits):
            regexes = [s["pattern"]["Regex"].replace(*_CONTRACTIONS) for s in splits]
            names = [n for n, spec in PRE_TOKENIZERS.items() if list(spec["regexes"]) == regexes]
            names.sort(key=lambda n: PRE_TOKENIZERS[n]["ignore_merges"] != ignore_merges)
            if names:
                return names[0]
    raise ValueError(f"{where}: its pre-tokenizer ({json.dumps(pre)[:120]}) is not one llama.cpp names, so a GGUF "
                     f"file cannot hold it; convert to .petit instead")


def _from_json(doc: dict, config: dict, where: str) -> tuple[list, list, list, dict, str]:
    model = doc.get("model") or {}
    # NFC (Qwen's) is dropped as llama.cpp's own converter drops it: llama.cpp does not normalize, so only text
    # that is not in NFC could split differently
    norm = doc.get("normalizer")
    norm = None if norm is not None and norm.get("type") == "NFC" else norm
    if model.get("type") != "BPE" or model.get("byte_fallback") or norm:
        raise ValueError(f"{where}: only byte-level BPE tokenizers can be written to GGUF (this one is "
                         f"{model.get('type')}{' with byte fallback' if model.get('byte_fallback') else ''}"
                         f"{' with a ' + str(norm.get('type')) + ' normalizer' if norm else ''})")
    pre = _pre_name(doc.get("pre_tokenizer"), where, bool(model.get("ignore_merges")))
    vocab = dict(model.get("vocab") or {})
    kinds = {}
    for t in doc.get("added_tokens") or []:
        vocab[t["content"]] = t["id"]
        kinds[t["id"]] = CONTROL if t.get("special") else USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    return _ordered(vocab, where), merges, kinds, config.get("special_tokens") or {}, pre


def _ordered(vocab: dict, where: str) -> list:
    n = max(vocab.values()) + 1
    tokens = [None] * n
    for t, i in vocab.items():
        tokens[i] = t
    holes = [i for i, t in enumerate(tokens) if t is None]
    if holes:
        raise ValueError(f"{where}: the vocabulary has no token with id {holes[0]} (GGUF lists every id)")
    return tokens


def tokenizer_metadata(tok, where: str, vocab_size: int) -> dict:
    """The ``tokenizer.ggml.*`` keys for `tok` (a petit Tokenizer or HFTokenizer), padded with unused tokens to the
    model's `vocab_size` rows.

    Raises:
        ValueError: a tokenizer GGUF cannot hold exactly (naming why), checked by encoding a probe text.
    """
    d = tok.to_dict()
    if d.get("type") == "bpe":
        tokens, merges = list(d["vocab"]), [m if isinstance(m, str) else " ".join(m) for m in d["merges"]]
        index = {t: i for i, t in enumerate(tokens)}
        kinds = {index[t]: CONTROL for t in d.get("special_tokens") or []}
        named = {"bos_token": d.get("bos_token"), "eos_token": d.get("eos_token"), "unk_token": d.get("unk_token")}
        pre = "gpt-2"
    elif d.get("type") == "hf":
        tokens, merges, kinds, named, pre = _from_json(json.loads(d["tokenizer_json"]), d.get("config") or {}, where)
    else:
        raise ValueError(f"{where}: a {d.get('type')!r} tokenizer cannot be written to GGUF")
    if len(tokens) > vocab_size:
        raise ValueError(f"{where}: the tokenizer has {len(tokens)} tokens, more than the model's {vocab_size}")
    real = len(tokens)            # the embedding's rows past the vocabulary: unused, as llama.cpp's converter pads
    tokens += [f"[PAD{i}]" for i in range(real, vocab_size)]
    types = [kinds.get(i, NORMAL) if i < real else UNUSED for i in range(len(tokens))]
    meta = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": np.array(types, np.int32), "tokenizer.ggml.merges": merges}
    index = {t: i for i, t in enumerate(tokens)}
    for key, name in (("bos_token", "bos"), ("eos_token", "eos"), ("unk_token", "unknown"), ("pad_token", "padding")):
        text = named.get(key)
        if isinstance(text, dict):
            text = text.get("content")
        if text is not None and text in index:
            meta[f"tokenizer.ggml.{name}_token_id"] = np.uint32(index[text])
    meta["tokenizer.ggml.add_bos_token"] = bool(tok.adds_bos)
    meta["tokenizer.ggml.add_eos_token"] = bool(getattr(tok, "add_eos_token", False))
    _check(tok, meta, where)
    return meta


def _check(tok, meta: dict, where: str) -> None:
    back = tokenizer_from_gguf(dict(meta), where)
    n = min(len(meta["tokenizer.ggml.tokens"]), tok.vocab_size)
    # tokens llama.cpp makes control tokens by their text (a plain "</s>" in Qwen's vocabulary): it does so for its
    # own converter's files too, so their texts are not probed
    control = set(np.flatnonzero(meta["tokenizer.ggml.token_type"] == CONTROL).tolist())
    skip = set(back.special_ids) - control
    texts = [_PROBE] + ["".join(tok.decode([i]) for i in range(a, min(a + 64, n)) if i not in skip)
                        for a in range(0, n, 64)]
    for text in texts:
        text = unicodedata.normalize("NFC", text)      # what an NFC normalizer (dropped, as llama.cpp drops it) sees
        want, got = tok.encode(text), back.encode(text)
        if want != got:
            at = next((k for k, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
            raise ValueError(f"{where}: the tokenizer cannot be written to GGUF exactly: read back as llama.cpp reads "
                             f"it, {text[:40]!r}... encodes differently from token {at} on ({want[at:at + 4]} "
                             f"against {got[at:at + 4]})")
