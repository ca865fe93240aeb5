"""The side files of a Hugging Face model folder, read into what a `.petit` file's metadata holds.

`read_folder_metadata(folder)` reads ``tokenizer_config.json``, ``special_tokens_map.json``, ``chat_template.jinja``,
``chat_template.json``, ``generation_config.json`` and ``config.json``; every one is optional. A file that is present
but unreadable (not UTF-8, not JSON, wrong shape, an impossible value) raises ValueError naming the file, and for a
JSON syntax error the line and column.

The helpers that read tokenizer_config.json (`special_token_strings`, `config_from_files`, ...) are shared with
`petit.hf.tokenizer`, so the tokenizer and the metadata resolve the special tokens the same way.
"""
import json
import math
import numbers
import os

__all__ = ["read_folder_metadata", "read_json_object", "read_text", "special_token_strings",
           "extra_special_tokens", "added_tokens_decoder", "config_from_files"]

# transformers' named special tokens (SPECIAL_TOKENS_ATTRIBUTES, without the extra-token list)
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_EXTRA_KEYS = ("additional_special_tokens", "extra_special_tokens")
_NO_LIMIT = int(1e20)        # transformers writes model_max_length = int(1e30) for "no limit"


# transformers 5 writes a float JSON cannot hold as a tagged object ({"__float__": "Infinity"}: Mamba-2's
# time_step_limit in every config.json it saves); these are the tags it writes
FLOAT_TAGS = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def float_tags(obj: dict):
    """A json `object_hook`: a `{"__float__": tag}` object of transformers 5 as its float; any other object as it
    is (an unknown tag too, so the field holding it is refused by name)."""
    if len(obj) == 1 and isinstance(obj.get("__float__"), str) and obj["__float__"] in FLOAT_TAGS:
        return FLOAT_TAGS[obj["__float__"]]
    return obj


def read_text(path) -> str | None:
    """The UTF-8 text of a file (a leading byte-order mark is dropped), or None if it does not exist."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ValueError(f"{path}: is a folder, expected a file") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not valid UTF-8 (byte offset {e.start})") from None


def read_json_object(path) -> dict | None:
    """The JSON object in a file, or None if the file does not exist.

    Raises:
        ValueError: ``<path>: invalid JSON at line L, column C: <reason>``, or the file is not UTF-8 or not an object.
    """
    text = read_text(path)
    if text is None:
        return None
    try:
        value = json.loads(text, object_hook=float_tags)
    except json.JSONDecodeError as e:
        raise ValueError(f"{os.fspath(path)}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{os.fspath(path)}: expected a JSON object, got {type(value).__name__}")
    return value


def token_text(value, where: str) -> str | None:
    """A special token as written in tokenizer_config.json: a string, an AddedToken dict ``{"content": ...}``, or
    null."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise ValueError(f"{where}: expected a token string or an object with a \"content\" string, got {value!r:.80}")


def _named_tokens(cfg: dict, where: str) -> dict:
    """The named special tokens of one config: the standard names plus any other string-valued ``*_token`` key
    (transformers v5's model-specific tokens, e.g. ``image_token``)."""
    out = {}
    for key, value in cfg.items():
        if key in SPECIAL_TOKEN_NAMES:
            text = token_text(value, f"{where}: {key}")
        elif key.endswith("_token") and (isinstance(value, str) or isinstance(value, dict)
                                         and isinstance(value.get("content"), str)):
            text = token_text(value, where)
        else:
            continue
        if text:                         # null or "" means no such token
            out[key] = text
    extra = cfg.get("extra_special_tokens")
    if isinstance(extra, dict):          # v5: {name: token} are named tokens too
        for key, value in extra.items():
            text = token_text(value, f"{where}: extra_special_tokens.{key}")
            if text:
                out.setdefault(key, text)
    return out


def special_token_strings(tokenizer_config: dict, special_tokens_map: dict | None, config_path: str = "",
                          map_path: str = "") -> dict:
    """``{name: text}`` of the named special tokens (``bos_token``, ``eos_token``, ...), as transformers resolves
    them: tokenizer_config.json's values; special_tokens_map.json fills the names it lacks, and overrides it when the
    config has no ``added_tokens_decoder`` (the legacy layout, where the map was the authority)."""
    named = _named_tokens(tokenizer_config, config_path or "tokenizer_config.json")
    mapped = _named_tokens(special_tokens_map or {}, map_path or "special_tokens_map.json")
    legacy = "added_tokens_decoder" not in tokenizer_config
    for key, text in mapped.items():
        if legacy or key not in named:
            named[key] = text
    return named


def extra_special_tokens(tokenizer_config: dict, special_tokens_map: dict | None, config_path: str = "",
                         map_path: str = "") -> list:
    """The texts of ``additional_special_tokens`` / ``extra_special_tokens`` (a list, or in transformers v5 also a
    ``{name: token}`` dict) of both files, in order, without repeats."""
    out = []
    for cfg, where in ((tokenizer_config, config_path or "tokenizer_config.json"),
                       (special_tokens_map or {}, map_path or "special_tokens_map.json")):
        for key in _EXTRA_KEYS:
            value = cfg.get(key)
            if value is None:
                continue
            if isinstance(value, dict):
                value = list(value.values())
            if not isinstance(value, list):
                raise ValueError(f"{where}: {key} must be a list of tokens, got {value!r:.80}")
            for n, item in enumerate(value):
                text = token_text(item, f"{where}: {key}[{n}]")
                if text and text not in out:
                    out.append(text)
    return out


def added_tokens_decoder(value, where: str) -> dict:
    """tokenizer_config.json's ``added_tokens_decoder`` as ``{str(id): {"content": str, flag: bool ...}}`` with every
    flag explicit (AddedToken's defaults: ``normalized`` is ``not special``, the others false)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{where}: added_tokens_decoder must be an object {{id: token}}, got {type(value).__name__}")
    out = {}
    for key, token in value.items():
        try:
            token_id = int(key)
        except ValueError:
            token_id = -1
        if token_id < 0 or str(token_id) != str(key).strip():
            raise ValueError(f"{where}: added_tokens_decoder key {key!r} is not a token id")
        if not (isinstance(token, dict) and isinstance(token.get("content"), str) and token["content"]):
            raise ValueError(f"{where}: added_tokens_decoder[{key!r}] must be an object with a non-empty \"content\" "
                             f"string, got {token!r:.80}")
        special = token.get("special", False)
        flags = {"special": special, "lstrip": token.get("lstrip", False), "rstrip": token.get("rstrip", False),
                 "normalized": token.get("normalized", not special), "single_word": token.get("single_word", False)}
        bad = [name for name, v in flags.items() if not isinstance(v, bool)]
        if bad:
            raise ValueError(f"{where}: added_tokens_decoder[{key!r}].{bad[0]} must be true or false, "
                             f"got {flags[bad[0]]!r:.40}")
        out[str(token_id)] = {"content": token["content"], **flags}
    return out


def config_from_files(tokenizer_config: dict, special_tokens_map: dict | None, config_path: str = "",
                      map_path: str = "") -> dict:
    """The parts of tokenizer_config.json (+ special_tokens_map.json) a `petit.hf.tokenizer.HFTokenizer` uses, in the
    form `HFTokenizer.to_dict` stores under ``"config"``."""
    config_path = config_path or "tokenizer_config.json"
    max_length = tokenizer_config.get("model_max_length")
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, (int, float))
                                   or max_length < 1):
        raise ValueError(f"{config_path}: model_max_length must be a positive integer, got {max_length!r:.40}")
    return {
        "special_tokens": special_token_strings(tokenizer_config, special_tokens_map, config_path, map_path),
        "extra_special_tokens": extra_special_tokens(tokenizer_config, special_tokens_map, config_path, map_path),
        "added_tokens_decoder": added_tokens_decoder(tokenizer_config.get("added_tokens_decoder"), config_path),
        "model_max_length": None if max_length is None or max_length >= _NO_LIMIT else int(max_length),
    }


def _pick_template(value, where: str) -> str | None:
    """A chat_template value: a string, or a list of ``{"name", "template"}`` of which "default" is used."""
    if value is None or isinstance(value, str):
        return value or None
    if isinstance(value, list):
        named = {}
        for n, item in enumerate(value):
            if not (isinstance(item, dict) and isinstance(item.get("name"), str)
                    and isinstance(item.get("template"), str)):
                raise ValueError(f"{where}: chat_template[{n}] must be an object with \"name\" and \"template\" "
                                 f"strings, got {item!r:.80}")
            named[item["name"]] = item["template"]
        if "default" not in named:
            raise ValueError(f"{where}: chat_template lists the templates {', '.join(map(repr, named))} but none is "
                             f"named 'default'")
        return named["default"] or None
    raise ValueError(f"{where}: chat_template must be a string or a list of named templates, got "
                     f"{type(value).__name__}")


def chat_template(folder, tokenizer_config: dict | None = None) -> str | None:
    """The folder's chat template: chat_template.jinja (which transformers prefers), else tokenizer_config.json's
    ``chat_template``, else chat_template.json's (the processor file of multimodal models); None if there is none."""
    folder = os.fspath(folder)
    text = read_text(os.path.join(folder, "chat_template.jinja"))
    if text:
        return text
    config_path = os.path.join(folder, "tokenizer_config.json")
    if tokenizer_config is None:
        tokenizer_config = read_json_object(config_path) or {}
    template = _pick_template(tokenizer_config.get("chat_template"), config_path)
    if template:
        return template
    json_path = os.path.join(folder, "chat_template.json")
    obj = read_json_object(json_path)
    return _pick_template(obj.get("chat_template"), json_path) if obj is not None else None


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


# generation_config.json key -> (check, requirement): the sampling settings petit.generation.sample.resolve reads
_GENERATION = {
    "temperature": (lambda v: _is_real(v) and v >= 0, "a finite number >= 0"),
    "top_k": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0"),
    "top_p": (lambda v: _is_real(v) and 0 < v <= 1, "a number in (0, 1]"),
    "min_p": (lambda v: _is_real(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "repetition_penalty": (lambda v: _is_real(v) and v > 0, "a finite number > 0"),
}


def generation_defaults(generation_config: dict, where: str = "generation_config.json") -> dict:
    """The sampling defaults of generation_config.json under the keys of a .petit file's "generation" (the keys
    `petit.generation.sample.resolve` reads): ``do_sample`` (false = greedy), ``temperature``, ``top_k``, ``top_p``,
    ``min_p``, ``repetition_penalty``. Only the keys the file sets (not null) are returned; the others are not sampling
    settings (``max_new_tokens``, token ids, ...) or have no Petit counterpart, and are ignored."""
    out = {}
    do_sample = generation_config.get("do_sample")
    if do_sample is not None:
        if not isinstance(do_sample, bool):
            raise ValueError(f"{where}: do_sample must be true or false, got {do_sample!r:.80}")
        out["do_sample"] = do_sample
    for key, (check, requirement) in _GENERATION.items():
        value = generation_config.get(key)
        if value is None:
            continue
        if not check(value):
            raise ValueError(f"{where}: {key} must be {requirement}, got {value!r:.80}")
        out[key] = float(value) if key != "top_k" else int(value)
    return out


def token_ids(value, where: str) -> list:
    """An ``eos_token_id``-style value (null, an id, or a list of ids) as a list of ints."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    for item in items:
        if not isinstance(item, int) or isinstance(item, bool) or item < 0:
            raise ValueError(f"{where} must be a token id or a list of token ids (integers >= 0), got {value!r:.80}")
    return list(items)


def read_folder_metadata(folder) -> dict:
    """What a `.petit` file's metadata holds for the model in a Hugging Face folder, from its side files.

    Returns:
        A dict with
        - ``"chat_template"`` (only if the folder has one): see `chat_template`;
        - ``"special_tokens"``: ``{name: text}`` of the named special tokens (``bos_token``, ``eos_token``, ...), the
          variables a chat template reads besides the messages;
        - ``"generation"`` (when generation_config.json exists; do_sample false when it does not say): see
          `generation_defaults`;
        - ``"eos_token_ids"``: every end-of-sequence id, generation_config.json's ``eos_token_id`` (an id or a list)
          first, then config.json's (also inside its ``text_config``), without repeats.

    Raises:
        ValueError: the folder does not exist, or a present file is corrupt (naming the file, and the line of a
            JSON syntax error).
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise ValueError(f"{folder}: not a folder")
    config_path = os.path.join(folder, "tokenizer_config.json")
    map_path = os.path.join(folder, "special_tokens_map.json")
    generation_path = os.path.join(folder, "generation_config.json")
    model_config_path = os.path.join(folder, "config.json")
    tokenizer_config = read_json_object(config_path) or {}
    special_map = read_json_object(map_path)
    generation_config = read_json_object(generation_path) or {}
    model_config = read_json_object(model_config_path) or {}

    meta = {}
    template = chat_template(folder, tokenizer_config)
    if template:
        meta["chat_template"] = template
    meta["special_tokens"] = special_token_strings(tokenizer_config, special_map, config_path, map_path)
    generation = generation_defaults(generation_config, generation_path)
    if os.path.isfile(generation_path):
        generation.setdefault("do_sample", False)    # transformers' default: greedy unless the file says do_sample
    if generation:
        meta["generation"] = generation
    eos = token_ids(generation_config.get("eos_token_id"), f"{generation_path}: eos_token_id")
    eos += token_ids(model_config.get("eos_token_id"), f"{model_config_path}: eos_token_id")
    text_config = model_config.get("text_config")
    if isinstance(text_config, dict):
        eos += token_ids(text_config.get("eos_token_id"), f"{model_config_path}: text_config.eos_token_id")
    meta["eos_token_ids"] = list(dict.fromkeys(eos))
    return meta
