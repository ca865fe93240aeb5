"""What the vlnew group's wrappers (issue 36) add to petit/models/blocks/wrapper.py: a released config.json that is flat
(the text model's keys at the top beside the tower's config, as PaddleOCR-VL's and HunyuanOCR's are; their config
classes take them as text_config), and the head's tie as each wrapper's config class decides it: by its own
`tie_word_embeddings` (a default of its own), or also by text_config's when its own is false (the transformers 5
classes that forward a pre-v5 text_config's tie to the top)."""
from petit.models.blocks import wrapper

META = ("model_type", "architectures", "transformers_version")


def nested(d, own_keys, towers=("vision_config",)):
    """A flat wrapper config (no text_config, a tower's config given) as its config class reads it: every key that is
    not the wrapper's own under `text_config`; any other dict as it is."""
    if not isinstance(d, dict) or "text_config" in d or not any(d.get(k) for k in towers):
        return d
    keep = set(own_keys) | set(towers) | set(META)
    text = {k: v for k, v in d.items() if k not in keep}
    return {**{k: v for k, v in d.items() if k in keep or k == "tie_word_embeddings"}, "text_config": text}


def flatten(d, model_type: str, own_keys, *, top: bool, text: bool | None, text_types=None, towers=("vision_config",),
            what: str = "images"):
    """wrapper.flatten of a nested or flat wrapper config, the head tied by the wrapper's `tie_word_embeddings`
    (default `top`) or, when `text` is not None, also by text_config's (default `text`)."""
    d = nested(d, own_keys, towers)
    sub = d.get("text_config") if isinstance(d, dict) else None
    kind = sub.get("model_type") if isinstance(sub, dict) else None
    if isinstance(sub, dict) and text_types and kind is not None and kind not in text_types:
        raise ValueError(f"config: {model_type}'s text_config has model_type {kind!r}; the {model_type} family runs "
                         f"a {' / '.join(text_types)} model")
    flat = wrapper.flatten(d, model_type, own_keys, towers=towers, tie=top, what=what)
    if isinstance(sub, dict) and text is not None:
        flat["tie_word_embeddings"] = bool(flat["tie_word_embeddings"] or sub.get("tie_word_embeddings", text))
    return flat
