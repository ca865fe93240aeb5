"""The tokenizer a GGUF file describes (``tokenizer.ggml.*`` metadata), rebuilt as a Hugging Face `tokenizers`
tokenizer that gives llama.cpp's token ids (`tokenizer_from_gguf`).

Two kinds of vocabulary, as llama.cpp's ``src/llama-vocab.cpp`` reads them:

- ``tokenizer.ggml.model`` "gpt2": byte-level BPE. The text is split by the regular expressions llama.cpp picks by
  the ``tokenizer.ggml.pre`` name (`PRE_TOKENIZERS`; each one splits every piece the previous ones left, keeping
  both the matches and the text between them, which is `tokenizers`' ``Split(..., "isolated")``), the pieces are
  byte-encoded as GPT-2 does and merged by ``tokenizer.ggml.merges`` (lowest rank first, leftmost first). Some
  names make a whole piece that is a token that token (``ignore_merges``).
- "llama": SentencePiece-style BPE. Spaces become ``▁`` (a ``▁`` is prepended to each stretch of text between
  special tokens, the first included, unless ``tokenizer.ggml.add_space_prefix`` is false), merges ranked by
  ``tokenizer.ggml.scores`` exactly as transformers' LlamaTokenizerFast conversion ranks them, and characters
  without a token fall back to their ``<0xNN>`` byte tokens.
- "bert": WordPiece (llama.cpp's WPM: BERT-like embedding models). llama.cpp's converter rewrites the vocabulary
  with a "phantom space": every token but the control ones is stored as ``▁`` + the token when it starts a word, and
  a ``##`` continuation without its ``##``; `wordpiece_vocab` undoes it. The text is normalized and split as
  BertNormalizer / BertPreTokenizer do (``tokenizer.ggml.normalizer.lowercase``, true by default, and
  ``...strip_accents``, by default as lowercase), each word taken by longest match first and a word that does not
  fall into tokens is the unknown token (no length limit: llama.cpp has none); the text is framed by the BOS
  ([CLS]) and the separator ([SEP]) whatever add_bos says.

Control, unknown and user-defined tokens (``tokenizer.ggml.token_type`` 3, 2, 4) are added tokens, found in the
text before anything else; control and unknown ones are special. Like llama.cpp, tokens with the texts llama.cpp
recognizes as end-of-generation or fill-in-the-middle markers become control tokens, gpt-oss's ``<|channel|>``,
``<|message|>``, ``<|start|>``, ``<|constrain|>`` become user-defined, a Phi-3's special tokens swallow the white
space after them, and ``<mask>`` / ``[MASK]`` of Jina v2 / ModernBERT the white space before them. The tokenizer
adds BOS / EOS (``hf_encode`` with ``add_special_tokens``) as llama.cpp's ``add_special`` does.
"""
import json

import numpy as np

from petit.hf.tokenizer import HFTokenizer, import_tokenizers

__all__ = ["tokenizer_from_gguf", "PRE_TOKENIZERS", "MODELS"]

MODELS = ("gpt2", "llama", "bert")
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

# ---------------------------------------------------------------------------------------------- pre-tokenizers
# the split regexes of each pre-tokenizer type, as the models define them and llama-vocab.cpp names them
_C = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_WS = r"\s*[\r\n]+|\s+(?!\S)|\s+"
_LLAMA3 = _C + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _WS
_QWEN2 = _C + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _WS
_PUNCT = r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+"""
_CJK = r"[一-龥぀-ゟ゠-ヿ]+"
_CJK_HANGUL = r"[一-龥ࠀ-一가-퟿]+"
_CASED = (r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+%s|"
          r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*%s|")
_UNICASE = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+%s?|"
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*%s?|") % (_C, _C)
_BLOOM = r" ?[^(\s|.,!?…。，、।۔،)]+"
_DEEPSEEK_LETTERS = (      # escaped: a few of these letters have canonical equivalents an editor may substitute
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-"
    "\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-"
    "\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf"
    "\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-"
    "\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc"
    "\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115"
    "\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e"
    "\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-"
    "\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a"
    "\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-"
    "\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+")
_REGEXES = {
    "default": (r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"),
    "llama3": (_LLAMA3,),
    "jais2": (_C + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
              + "|".join(rf"\s{{{n}}}(?!\S)" for n in (512, 256, 128, 64, 32, 16, 8, 4)) + r"|\s{1,2}(?!\S)|\s{1}",),
    "deepseek-llm": (r"[\r\n]", _DEEPSEEK_LETTERS, r"\s?[!-/:-~！-／：-～‘-‟　-。]+", r"\s+$", _CJK_HANGUL,
                     r"\p{N}+"),
    "deepseek-v3": (r"\p{N}{1,3}", _CJK, _PUNCT + r"[\r\n]*|" + _WS),
    "spark2_5": (r"\p{N}{1,3}", _CJK, _PUNCT + r"|[\r\n]|\s+(?!\S)|\s+", r"\p{N}"),
    "youtu": (r"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|" + _CJK,
              _UNICASE + r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|" + _WS),
    "deepseek-coder": (r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _CJK_HANGUL, r"\p{N}"),
    "falcon": (r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, r"[0-9][0-9][0-9]"),
    "starcoder": (r"\p{N}", _GPT2),
    "gpt2": (_GPT2,),
    "qwen2": (_QWEN2,),
    "qwen35": (_C + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|" + _WS,),
    "bloom": (_BLOOM,),
    "viking": (_BLOOM, r"\p{N}"),
    "tekken": (_CASED % ("", "") + r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|" + _WS,),
    "chameleon": (r"<sentinel:[0-9]+>", r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", r"([\t\n]|    |  )", r"\p{N}",
                  r"[\p{P}!-/:-@\[-`{-~]", _GPT2),
    "gpt-4o": (_CASED % (_C + "?", _C + "?") + r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|" + _WS,),
    "granite-embed-multi-97m": ((_CASED % (_C + "?", _C + "?")).replace(r"[\p{L}]", r"[\p{L}\p{M}]")
                                + r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|" + _WS,),
    "tiny_aya": (r"\d{1,3}(?=(?:\d{3})*\b)", _UNICASE + r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|" + _WS),
    "bailingmoe": (r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
                   r"[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",),
    "seed-coder": (_C + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|" + _WS,),
    "ufakzeka": (r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _WS,),
    "laguna": (r"[^\n]+|[\n]+", _QWEN2),
    "exaone-moe": (_C + r"|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|"
                   r"\s*[\r\n]|\s+(?!\S)|\s+",),
    "minicpm5": (r"\p{N}{1,3}", _C + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _WS),
}
_REGEXES["chatglm4"] = _REGEXES["dbrx"] = _REGEXES["llama3"]
# flags: m = ignore_merges (a piece that is a token is that token), b = adds a BOS by default, n = no default BOS
_NAMES = {
    "default": "default", "llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano": "llama3 mb",
    "jais-2": "jais2", "dbrx smaug-bpe": "dbrx", "deepseek-llm": "deepseek-llm", "deepseek-coder": "deepseek-coder",
    "deepseek-v3 hunyuan-dense joyai-llm hy_v4": "deepseek-v3", "spark2_5": "spark2_5", "youtu": "youtu m",
    "falcon": "falcon", "starcoder refact command-r smollm codeshell exaone minerva-7b mellum2": "starcoder",
    "gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert jina-v1-en jina-v2-code "
    "roberta-bpe exaone4 mpt olmo jais trillion granite-docling": "gpt2",
    "qwen2 deepseek-r1-qwen kormo f2llmv2 megrez stablelm2 hunyuan solar-open": "qwen2", "qwen35": "qwen35",
    "poro-chat bloom gpt3-finnish": "bloom", "chatglm-bpe": "chatglm4 n", "glm4 glm5": "chatglm4 nm",
    "viking": "viking", "tekken": "tekken mb", "chameleon": "chameleon b",
    "gpt-4o llama4 kanana2 talkie minimax-m2": "gpt-4o", "granite-embed-multi-97m": "granite-embed-multi-97m m",
    "tiny_aya cohere2moe": "tiny_aya", "bailingmoe bailingmoe2 llada-moe": "bailingmoe", "seed-coder": "seed-coder",
    "ufakzeka": "ufakzeka", "grok-2": "qwen2", "laguna": "laguna", "exaone-moe": "exaone-moe", "minicpm5": "minicpm5 m",
}


def _table() -> dict:
    table = {}
    for names, spec in _NAMES.items():
        kind, _, flags = spec.partition(" ")
        for name in names.split():
            table[name] = {"regexes": _REGEXES[kind], "ignore_merges": "m" in flags, "add_bos": "b" in flags,
                           "no_bos": "n" in flags}
    return table


PRE_TOKENIZERS = _table()
# llama.cpp's own code (no regex) or no byte-level encoding: not expressible here
_CUSTOM = ("afmoe", "gemma4", "granite-embed-multi-311m", "kimi-k2", "sarvam-moe", "superbpe", "whitespace")

# ---------------------------------------------------------------------------------------------- special tokens
_ID_KEYS = ("bos", "eos", "eot", "eom", "unknown", "padding", "seperator", "fim_pre", "fim_suf", "fim_mid", "fim_pad",
            "fim_rep", "fim_sep")
_DEPRECATED_FIM = {"prefix": "fim_pre", "suffix": "fim_suf", "middle": "fim_mid"}
# texts llama.cpp makes control tokens when the id is not given ...
_LOOKS_SPECIAL = {
    "eot": ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
            "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"),
    "eom": ("<|eom_id|>",),
    "fim_pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
                "<|code_prefix|>", "<|prefix|>"),
    "fim_suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
                "<|code_suffix|>", "<|suffix|>"),
    "fim_mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
                "<|code_middle|>", "<|middle|>"),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}
# ... and always (its end-of-generation texts)
_EOG = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
        "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
        "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[")
_GPT_OSS = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")


def _fail(where: str, msg: str) -> ValueError:
    return ValueError(f"{where}: {msg}")


def _strings(metadata: dict, key: str, where: str) -> list:
    value = metadata.get(key)
    if not isinstance(value, list) or not set(map(type, value)) <= {str}:
        found = "it is missing" if value is None else f"got {type(value).__name__}"
        raise _fail(where, f"{key} must be an array of strings ({found})")
    return value


def _numbers(metadata: dict, key: str, n: int, where: str, kind: str):
    value = metadata.get(key)
    if value is None:
        return None
    if not isinstance(value, np.ndarray) or value.ndim != 1 or value.dtype.kind not in kind:
        raise _fail(where, f"{key} must be an array of numbers, got {type(value).__name__}"
                           f"{'' if not isinstance(value, np.ndarray) else ' of ' + str(value.dtype)}")
    if len(value) < n:
        raise _fail(where, f"{key} has {len(value)} entries for the {n} tokens of tokenizer.ggml.tokens")
    return value[:n]


def _flag(metadata: dict, key: str, default: bool, where: str) -> bool:
    value = metadata.get(key, default)
    if not isinstance(value, (bool, np.bool_)):
        raise _fail(where, f"{key} must be a bool, got {value!r:.40}")
    return bool(value)


def _special_ids(metadata: dict, defaults: dict, n: int) -> dict:
    """llama.cpp's special token ids: the model type's defaults (dropped if out of range), replaced by the metadata's
    ids that are in range."""
    ids = {}
    for name in _ID_KEYS:
        i = defaults.get(name)
        ids[name] = i if i is not None and i < n else None
        keys = [f"tokenizer.ggml.{name}_token_id"] + [f"tokenizer.ggml.{k}_token_id" for k, v in
                                                      _DEPRECATED_FIM.items() if v == name]
        for key in keys:
            v = metadata.get(key)
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 <= v < n:
                ids[name] = int(v)
    return ids


def _fix_types(index: dict, types: list, ids: dict) -> None:
    """llama.cpp's overrides of token types by token text (in place); fills in the eot / eom / fim ids it detects
    (the first text of its list the vocabulary has: llama.cpp takes any)."""
    for name, texts in _LOOKS_SPECIAL.items():
        if ids[name] is None:
            found = next((index[t] for t in texts if t in index), None)
            if found is not None:
                ids[name], types[found] = found, CONTROL
    for t in _EOG:
        if t in index:
            types[index[t]] = CONTROL
    for t in _GPT_OSS:
        if t in index:
            types[index[t]] = USER_DEFINED
    if "<|end|>" in index and any(pair <= index.keys() for pair in ({"<|return|>", "<|call|>"},
                                                                    {"<|calls|>", "<|flush|>"})):
        types[index["<|end|>"]] = USER_DEFINED


def _added_tokens(metadata: dict, tokens: list, types: list) -> list:
    name = str(metadata.get("general.name", "")).lower()
    arch, pre = str(metadata.get("general.architecture", "")), str(metadata.get("tokenizer.ggml.pre", ""))
    phi3 = "phi-3" in name or "phi3" in name
    lstrip = set()
    jina = any(s in pre for s in ("jina-v2-de", "jina-v2-es", "jina-v2-code"))
    if jina or arch in ("nomic-bert-moe", "jina-bert-v3"):
        lstrip.add("<mask>")
    elif "modern-bert" in name:
        lstrip.add("[MASK]")
    added = []
    marked = np.flatnonzero(np.isin(np.asarray(types), (CONTROL, USER_DEFINED, UNKNOWN)))   # a few among 150,000
    for i in marked.tolist():
        text = tokens[i]
        rstrip = phi3 and text not in ("<unk>", "<s>", "<|endoftext|>")
        added.append({"id": i, "content": text, "single_word": False, "lstrip": text in lstrip,
                      "rstrip": rstrip, "normalized": False, "special": types[i] != USER_DEFINED})
    return added


def _bpe_merges(metadata: dict, where: str) -> list:
    """tokenizer.ggml.merges as (left, right) pairs: split at the first space after the first character."""
    merges = _strings(metadata, "tokenizer.ggml.merges", where)
    pairs = [m.partition(" ")[::2] for m in merges]      # right for every merge but one whose left token is " "
    for i, (m, (a, b)) in enumerate(zip(merges, pairs)):
        if not a or len(a) + 1 + len(b) != len(m):       # starts with a space, or has none
            k = m.find(" ", 1)
            if k < 0:
                raise _fail(where, f"tokenizer.ggml.merges[{i}] {m!r:.60} is not two tokens separated by a space")
            pairs[i] = (m[:k], m[k + 1:])
    return pairs


def _made(merges: list, vocab: dict) -> list:
    """The merges whose two tokens and their join are all in the vocabulary: llama.cpp's merge could not make a
    token from the others either (Hugging Face's BPE refuses them)."""
    return [(a, b) for a, b in merges if a in vocab and b in vocab and a + b in vocab]


def _spm_merges(tokens: list, scores, vocab: dict) -> list:
    """transformers' SentencePieceExtractor: every split of every token into two tokens, the splits of a token by
    the ids of their halves, all of them by (score, length of the left half, of the right half), highest first."""
    merges = []
    for piece, score in zip(tokens, scores):
        local = [(piece[:k], piece[k:]) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges.extend((score, len(a), len(b), a, b) for a, b in local)
    merges.sort(key=lambda m: m[:3], reverse=True)      # stable: equal keys keep the order above
    return [(a, b) for _, _, _, a, b in merges]


def _post_processor(bos, eos, tokens: list) -> dict:
    ends = {"head": [] if bos is None else [bos], "tail": [] if eos is None else [eos]}
    special = lambda i, type_id: {"SpecialToken": {"id": tokens[i], "type_id": type_id}}
    seq = lambda name, type_id: {"Sequence": {"id": name, "type_id": type_id}}
    single = [special(i, 0) for i in ends["head"]] + [seq("A", 0)] + [special(i, 0) for i in ends["tail"]]
    pair = single + [special(i, 1) for i in ends["head"]] + [seq("B", 1)] + [special(i, 1) for i in ends["tail"]]
    used = {tokens[i]: {"id": tokens[i], "ids": [i], "tokens": [tokens[i]]} for i in ends["head"] + ends["tail"]}
    return {"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": used}


def _pre_tokenizer(metadata: dict, where: str) -> dict:
    pre = metadata.get("tokenizer.ggml.pre")
    pre = "default" if pre is None or pre == "" else pre
    if pre not in PRE_TOKENIZERS:
        why = ("needs llama.cpp's own code, which Hugging Face tokenizers cannot express" if pre in _CUSTOM
               else "is not a pre-tokenizer llama.cpp knows")
        raise _fail(where, f"tokenizer.ggml.pre {pre!r:.60} {why} (supported: {', '.join(sorted(PRE_TOKENIZERS))})")
    return PRE_TOKENIZERS[pre]


def tokenizer_from_gguf(metadata: dict, where: str) -> HFTokenizer:
    """The `HFTokenizer` whose ids are llama.cpp's for a GGUF file's ``tokenizer.ggml.*`` metadata.

    ``encode(text)`` is llama.cpp's ``tokenize(text, add_special=false, parse_special=true)``; ``hf_encode(text)``
    adds the BOS / EOS as llama.cpp's ``add_special=true`` does (``adds_bos``: whether it adds a BOS).

    Args:
        metadata: `petit.formats.gguf.GGUFFile.metadata`.
        where: the file's name, for error messages.

    Raises:
        ValueError: (starting with ``where``) an unsupported ``tokenizer.ggml.model`` or ``tokenizer.ggml.pre``, a
            missing or malformed array, arrays shorter than the vocabulary, duplicate tokens, or a BOS / EOS to add
            that the vocabulary lacks.
    """
    model = metadata.get("tokenizer.ggml.model")
    if model not in MODELS:
        raise _fail(where, f"tokenizer.ggml.model {model!r:.60} is not supported (supported: "
                           f"{', '.join(map(repr, MODELS))})")
    texts = _strings(metadata, "tokenizer.ggml.tokens", where)
    n = len(texts)
    if n == 0:
        raise _fail(where, "tokenizer.ggml.tokens is empty")
    scores = _numbers(metadata, "tokenizer.ggml.scores", n, where, "fiu")
    kinds = _numbers(metadata, "tokenizer.ggml.token_type", n, where, "iu")
    types = [NORMAL] * n if kinds is None else kinds.astype(np.int64).tolist()
    if model == "bert":
        texts = wordpiece_vocab(texts, types)
    tokens = [t or f"[EMPTY_{i}]" for i, t in enumerate(texts)]
    vocab = {t: i for i, t in enumerate(tokens)}
    if len(vocab) != n:
        dup = next(t for i, t in enumerate(tokens) if vocab[t] != i)
        raise _fail(where, f"tokenizer.ggml.tokens has the token {dup!r:.40} twice (ids {tokens.index(dup)} and "
                           f"{vocab[dup]})")

    if model == "gpt2":
        pre = _pre_tokenizer(metadata, where)
        defaults, add_bos = {"bos": None if pre["no_bos"] else 11, "eos": 11}, pre["add_bos"]
    elif model == "bert":         # llama.cpp's defaults: bert-base-uncased's ids
        defaults, add_bos = {"bos": 101, "unknown": 100, "seperator": 102, "padding": 0}, True
    else:
        defaults, add_bos = {"bos": 1, "eos": 2, "unknown": 0}, True
    ids = _special_ids(metadata, defaults, n)
    _fix_types(vocab, types, ids)
    if model == "bert":           # llama.cpp frames every text so, whatever add_bos / add_eos say
        for name, what in (("bos", "BOS ([CLS])"), ("seperator", "separator ([SEP])"), ("unknown", "unknown")):
            if ids[name] is None:
                raise _fail(where, f"the WordPiece vocabulary has no {what} token")
        head, tail = ids["bos"], ids["seperator"]
    else:
        add_bos = _flag(metadata, "tokenizer.ggml.add_bos_token", add_bos, where)
        add_eos = _flag(metadata, "tokenizer.ggml.add_eos_token", False, where)
        for name, wanted in (("bos", add_bos), ("eos", add_eos)):
            if wanted and ids[name] is None:
                raise _fail(where, f"tokenizer.ggml.add_{name}_token is true but the vocabulary has no "
                                   f"{name.upper()} token")
        head, tail = ids["bos"] if add_bos else None, ids["eos"] if add_eos else None

    if model == "bert":
        return _wordpiece(metadata, where, tokens, vocab, types, ids, head, tail)
    if model == "gpt2":
        split = [{"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False}
                 for r in pre["regexes"]]
        byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
        parts = {"normalizer": None, "pre_tokenizer": {"type": "Sequence", "pretokenizers": split + [byte_level]},
                 "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                             "use_regex": False}}
        bpe = {"merges": _bpe_merges(metadata, where), "unk_token": None, "fuse_unk": False,
               "byte_fallback": False, "ignore_merges": pre["ignore_merges"]}
    else:
        prefix = _flag(metadata, "tokenizer.ggml.add_space_prefix", True, where)
        replace = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
        unscape = {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}
        decoders = [unscape, {"type": "ByteFallback"}, {"type": "Fuse"}]
        parts = {"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"}] * prefix
                                + [replace]},
                 "pre_tokenizer": None,
                 "decoder": {"type": "Sequence", "decoders": decoders + [{"type": "Strip", "content": " ", "start": 1,
                                                                          "stop": 0}] * prefix}}
        unk = ids["unknown"]
        bpe = {"merges": _spm_merges(tokens, [0.0] * n if scores is None else scores.tolist(), vocab),
               "unk_token": None if unk is None else tokens[unk], "fuse_unk": True, "byte_fallback": True,
               "ignore_merges": False}
    added = _added_tokens(metadata, tokens, types)
    # The vocabulary and merges go to tokenizers' BPE directly: through JSON (as tokenizer.json holds them) they
    # cost 1 s more for a 150,000-token vocabulary (issue 31). The JSON describes the rest, with a model holding
    # only the added tokens, so that they get their ids.
    merges = bpe.pop("merges")
    flags = {"dropout": None, "continuing_subword_prefix": None, "end_of_word_suffix": None, **bpe}
    known = {t["content"]: t["id"] for t in added}
    if bpe["unk_token"] is not None:
        known[bpe["unk_token"]] = vocab[bpe["unk_token"]]
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, **parts,
           "post_processor": _post_processor(head, tail, tokens),
           "model": {"type": "BPE", **flags, "vocab": known, "merges": []}}
    tokenizers = import_tokenizers()
    given = {k: v for k, v in flags.items() if v is not None}      # the constructor's None is its default, not null
    try:
        bpe_model = tokenizers.models.BPE(vocab=vocab, merges=merges, **given)
    except Exception:       # a merge of tokens the vocabulary lacks (the library raises plain Exception)
        bpe_model = tokenizers.models.BPE(vocab=vocab, merges=_made(merges, vocab), **given)

    return HFTokenizer(json.dumps(doc, ensure_ascii=False), _config(tokens, ids, added), source=where,
                       config_source=where, model=bpe_model)


def _config(tokens: list, ids: dict, added: list) -> dict:
    """The names transformers knows, for the ids that are added tokens (a plain token stays plain text)."""
    is_added = {t["id"] for t in added}
    named = {f"{key}_token": tokens[ids[name]] for key, name in (("bos", "bos"), ("eos", "eos"), ("unk", "unknown"),
                                                                 ("pad", "padding"), ("sep", "seperator"))
             if ids[name] in is_added}
    extra = [tokens[ids[k]] for k in ("eot", "eom") if ids[k] in is_added and tokens[ids[k]] not in named.values()]
    return {"special_tokens": named, "extra_special_tokens": list(dict.fromkeys(extra))}


def wordpiece_vocab(texts: list, types: list) -> list:
    """The WordPiece vocabulary llama.cpp's converter rewrote (convert_hf_to_gguf's BertModel.set_vocab): a token
    that is not a control token was stored as "▁" + token when it starts a word, and a "##" continuation without
    its "##" (so "##" itself as ""); control tokens ([CLS], [SEP] ...) as they are."""
    return [t if kind == CONTROL else t[1:] if t.startswith("\u2581") else "##" + t for t, kind in zip(texts, types)]


def _wordpiece(metadata: dict, where: str, tokens: list, vocab: dict, types: list, ids: dict, head: int,
               tail: int) -> HFTokenizer:
    """llama.cpp's WPM tokenizer (src/llama-vocab.cpp llm_tokenizer_wpm_session) as Hugging Face's BERT pipeline:
    its normalization and split (white space, punctuation, ASCII symbols and CJK characters one a word; control
    characters dropped; accents stripped after NFD when asked) are BertNormalizer's and BertPreTokenizer's, its
    longest-match-first pieces WordPiece's ("##" continuations). Where they part, Petit keeps the model's tokenizer:
    llama.cpp's NFD keeps one code point a character (a Hangul syllable loses its vowel and final jamo when accents
    are stripped)."""
    lower = _flag(metadata, "tokenizer.ggml.normalizer.lowercase", True, where)
    strip = _flag(metadata, "tokenizer.ggml.normalizer.strip_accents", lower, where)
    added = _added_tokens(metadata, tokens, types)
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           # llama.cpp splits words at \v, \f and U+0085 (white space), which BertNormalizer drops (control)
           "normalizer": {"type": "Sequence", "normalizers": [
               {"type": "Replace", "pattern": {"Regex": "[\u000b\u000c\u0085]"}, "content": " "},
               {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": strip,
                "lowercase": lower}]},
           "pre_tokenizer": {"type": "BertPreTokenizer"},
           "post_processor": _post_processor(head, tail, tokens),
           "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
           "model": {"type": "WordPiece", "unk_token": tokens[ids["unknown"]], "continuing_subword_prefix": "##",
                     "max_input_chars_per_word": 1 << 30, "vocab": vocab}}
    return HFTokenizer(json.dumps(doc, ensure_ascii=False), _config(tokens, ids, added), source=where,
                       config_source=where)
