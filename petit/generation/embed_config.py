"""What turns a model's hidden states into a text's embedding, read from the sentence-transformers files of its
folder as sentence-transformers applies them (issue 35):

    modules.json                      the pipeline: Transformer -> Pooling [-> Normalize]
    1_Pooling/config.json             pooling_mode ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean",
                                      "lasttoken", or a list of them, concatenated), or the older pooling_mode_*
                                      booleans; include_prompt
    config_sentence_transformers.json prompts ({"query": "query: ", ...}) and default_prompt_name
    sentence_bert_config.json         max_seq_length, do_lower_case

A folder without modules.json: an encoder gets sentence-transformers' default (mean pooling, no normalization);
a decoder is a language model, not an embedding model, and is refused. Modules Petit does not run yet (Dense,
LayerNorm, a Router ...) are refused by name.

A GGUF file (llama.cpp's converter of such a folder) keeps only the pooling, as `<arch>.pooling_type` (`gguf_settings`):
mean, CLS or last token; no prompts, no Normalize module: its vectors are normalized (Euclidean), as llama.cpp's
llama-embedding and server do by default."""
import json
import numbers
import os
import warnings
from dataclasses import dataclass, field

from petit.loading.gguf_gemb35 import GGUF_OTHER, GGUF_POOLING

MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
_LEGACY = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max", "pooling_mode_mean_tokens": "mean",
           "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
           "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}
_POOLING_KEYS = {"embedding_dimension", "word_embedding_dimension", "pooling_mode", "include_prompt", *_LEGACY}
_ST_KEYS = {"__version__", "prompts", "default_prompt_name", "similarity_fn_name", "model_type"}
_BERT_KEYS = {"max_seq_length", "do_lower_case", "transformer_task", "modality_config", "module_output_name"}
_MODULES = ("Transformer", "Pooling", "Normalize")


@dataclass
class EmbedSettings:
    pooling: tuple = ("mean",)
    include_prompt: bool = True
    normalize: bool = False
    prompts: dict = field(default_factory=dict)
    default_prompt_name: str | None = None
    max_length: int | None = None        # None: the model's context
    lower_case: bool = False
    similarity: str = "cosine"




def gguf_settings(metadata: dict, where: str) -> EmbedSettings:
    """The embedding settings of a GGUF file's model (`metadata`: petit.Model.metadata, whose `pooling_type` is the
    file's `<arch>.pooling_type`).

    Raises:
        ValueError: no pooling key (a language model, or an encoder converted without its sentence-transformers
            files), or a pooling that makes no text vector (none, rank) or is unknown.
    """
    pooling = metadata.get("pooling_type")
    if pooling is None:
        raise ValueError(f"{where}: not an embedding model: the file has no pooling_type key (llama.cpp's converter "
                         f"writes it from a sentence-transformers folder's Pooling module)")
    number = isinstance(pooling, numbers.Integral) and not isinstance(pooling, bool)
    if not number or int(pooling) not in GGUF_POOLING:
        what = GGUF_OTHER.get(int(pooling), "unknown") if number else "unknown"
        shown = int(pooling) if number else repr(pooling)
        raise ValueError(f"{where}: pooling_type {shown} ({what}) is not supported: Petit embeds with mean (1), "
                         f"CLS (2) or last-token (3) pooling")
    return EmbedSettings(pooling=(GGUF_POOLING[int(pooling)],), normalize=True)


def _json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: cannot read: {e}") from None
    return d


def _object(path: str) -> dict:
    d = _json(path)
    if not isinstance(d, dict):
        raise ValueError(f"{path}: not a JSON object")
    return d


def _unknown(path: str, d: dict, known) -> None:
    extra = sorted(set(d) - set(known))
    if extra:
        warnings.warn(f"{path}: ignoring unknown key(s) {', '.join(extra)}", stacklevel=4)


def _pooling(path: str, hidden: int) -> tuple[tuple, bool]:
    d = _object(path)
    _unknown(path, d, _POOLING_KEYS)
    dim = d.get("embedding_dimension", d.get("word_embedding_dimension", hidden))
    if dim != hidden:
        raise ValueError(f"{path}: embedding_dimension {dim!r} is not the model's hidden_size {hidden}")
    mode = d.get("pooling_mode")
    if mode is None:
        mode = [m for k, m in _LEGACY.items() if d.get(k)] or ["mean"]
    modes = (mode,) if isinstance(mode, str) else tuple(mode) if isinstance(mode, list) else None
    if not modes or any(m not in MODES for m in modes):
        raise ValueError(f"{path}: pooling_mode {mode!r} is not one of {', '.join(MODES)} (or a list of them)")
    include = d.get("include_prompt", True)
    if not isinstance(include, bool):
        raise ValueError(f"{path}: include_prompt must be true or false, got {include!r}")
    return modes, include


def read_settings(folder: str, hidden: int, kind: str) -> EmbedSettings:
    """The embedding settings of a model folder (see the module docstring).

    Raises:
        ValueError: not an embedding model (a decoder without modules.json), a module Petit does not run, a
            malformed file; each naming the file.
    """
    s = EmbedSettings()
    modules_path = os.path.join(folder, "modules.json")
    if not os.path.isfile(modules_path):
        if kind != "encoder":
            raise ValueError(f"{folder}: not an embedding model (no sentence-transformers modules.json; a language "
                             f"model embeds nothing meaningful by itself)")
        warnings.warn(f"{folder}: no modules.json: mean pooling, no normalization (sentence-transformers' default)",
                      stacklevel=3)
    else:
        modules = _json(modules_path)
        if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
            raise ValueError(f"{modules_path}: not a list of modules")
        names = []
        for m in sorted(modules, key=lambda m: m.get("idx", 0)):
            name = str(m.get("type", "")).rsplit(".", 1)[-1]
            if name not in _MODULES:
                raise ValueError(f"{modules_path}: module {m.get('type')!r} is not supported yet (Petit runs "
                                 f"{' -> '.join(_MODULES)})")
            names.append(name)
            if name == "Pooling":
                s.pooling, s.include_prompt = _pooling(os.path.join(folder, m.get("path", ""), "config.json"),
                                                       hidden)
            elif name == "Transformer" and m.get("path", ""):
                raise ValueError(f"{modules_path}: a Transformer module in a subfolder ({m['path']!r}) is not "
                                 f"supported yet")
        if names[:1] != ["Transformer"] or names.count("Transformer") != 1 or names.count("Normalize") > 1 or \
                ("Normalize" in names and names[-1] != "Normalize"):
            raise ValueError(f"{modules_path}: the pipeline {' -> '.join(names)} is not supported yet (Petit runs "
                             f"Transformer -> [Pooling] -> [Normalize])")
        s.normalize = "Normalize" in names
    st_path = os.path.join(folder, "config_sentence_transformers.json")
    if os.path.isfile(st_path):
        d = _object(st_path)
        _unknown(st_path, d, _ST_KEYS)
        prompts = d.get("prompts") or {}
        if not isinstance(prompts, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in prompts.items()):
            raise ValueError(f"{st_path}: prompts must map names to strings")
        s.prompts = dict(prompts)
        s.default_prompt_name = d.get("default_prompt_name")
        if s.default_prompt_name is not None and s.default_prompt_name not in s.prompts:
            raise ValueError(f"{st_path}: default_prompt_name {s.default_prompt_name!r} is not one of the prompts")
        s.similarity = d.get("similarity_fn_name") or "cosine"
    bert_path = os.path.join(folder, "sentence_bert_config.json")
    if os.path.isfile(bert_path):
        d = _object(bert_path)
        _unknown(bert_path, d, _BERT_KEYS)
        s.max_length = d.get("max_seq_length")
        s.lower_case = bool(d.get("do_lower_case", False))
    if s.max_length is None:
        tc_path = os.path.join(folder, "tokenizer_config.json")
        n = _object(tc_path).get("model_max_length") if os.path.isfile(tc_path) else None
        s.max_length = n if isinstance(n, int) and 0 < n < 1 << 30 else None
    if s.max_length is not None and (isinstance(s.max_length, bool) or not isinstance(s.max_length, int) or
                                     s.max_length < 1):
        raise ValueError(f"{folder}: max_seq_length must be a positive integer, got {s.max_length!r}")
    return s
