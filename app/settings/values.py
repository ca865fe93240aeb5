"""A model's settings: what the user chose (overrides; a missing key = the model's default), the values they
resolve to, and the options the generation worker and the server panel receive.

Sampling settings resolve as the engine's CLI does (petit.generation.sample.resolve): the user's value > the model's
generation defaults > petit's fallback. The rest default to: 256 tokens per reply, no system prompt, the model's
own chat template, the model's context up to CONTEXT_CAP tokens, the engine's KV type, the weights as stored, the CPU
alone (`device`: app.models.devices) and no speculative decoding ("lookup": prompt lookup; "model": the draft model
file `draft_model`).
"""
from petit.chat.formats import FORMATS, get_format
from petit.generation.sample import FALLBACK, resolve

SAMPLING_KEYS = tuple(FALLBACK)            # temperature, top_k, top_p, min_p, and the three penalties
OTHER_DEFAULTS = {"seed": None, "max_tokens": 256, "system": "", "format": None, "n_ctx": None, "kv_type": None,
                  "weights": None, "drop_old_turns": True, "n_keep": 0, "speculation": "off",
                  "draft_model": None, "device": None}
RELOADS = ("weights", "device")            # the settings a model is loaded again for
ALL_KEYS = SAMPLING_KEYS + tuple(OTHER_DEFAULTS)
FORMAT_NAMES = tuple(FORMATS)              # "raw" (the completion notebook) is not a chat format
KV_TYPES = ("int8", "f32")
SPECULATION = (("off", "off"), ("lookup", "prompt lookup"), ("model", "draft model"))   # (value, shown as)
WEIGHT_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0")
FALLBACK_FORMAT = "chatml"                 # for a model that ships no template (shown as a warning)
CONTEXT_CAP = 4096                         # the default context of a long-context model (its KV cache stays small)


def resolve_settings(overrides: dict, info) -> dict:
    """Every setting's value for a model: `overrides` first, then the model's defaults.

    Args:
        overrides: the user's choices (keys of ALL_KEYS; None or missing = the default).
        info: the model's ModelInfo (None before any model is loaded).
    """
    generation = info.generation if info is not None else {}
    out = resolve({k: overrides.get(k) for k in SAMPLING_KEYS}, generation)
    for key, default in OTHER_DEFAULTS.items():
        value = overrides.get(key)
        out[key] = default if value is None else value
    if info is not None:
        out["n_ctx"] = min(out["n_ctx"] or CONTEXT_CAP, info.max_context)
        if out["format"] is None and not info.has_template:
            out["format"] = FALLBACK_FORMAT
    return out


def model_defaults(info) -> dict:
    return resolve_settings({}, info)


def session_options(values: dict) -> dict:
    """What the generation worker needs to build its Session and the Params of a request from resolved values."""
    return {"sampler": {k: values[k] for k in SAMPLING_KEYS + ("seed",)},
            "max_tokens": int(values["max_tokens"]),
            "system": values["system"] or None,
            "template": get_format(values["format"]) if values["format"] else None,
            "n_ctx": values["n_ctx"],
            "kv_type": values["kv_type"],
            "drop_old_turns": bool(values["drop_old_turns"]),
            "ctx_shift": bool(values["drop_old_turns"]),     # forgetting turns shifts the cache where exact
            "n_keep": int(values["n_keep"] or 0),
            "speculation": values["speculation"] if values["speculation"] in ("lookup", "model") else None,
            "draft_model": values["draft_model"] or None}


def clean(overrides: dict) -> dict:
    """Keep the known keys with a value (None means "the model's default")."""
    return {k: v for k, v in overrides.items() if k in ALL_KEYS and v is not None}
