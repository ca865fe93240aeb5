"""What the multimodal wrappers share (gemma3, mistral3, llama4: a vision tower beside a text model Petit runs).

A wrapper's config.json holds the text model's config under `text_config` beside the tower's (`vision_config`) and a
few keys of its own (image token ids, the projector's settings); its checkpoint holds the text model under
`model.language_model.*` (as transformers 5 writes it) or `language_model.model.*` (as the released checkpoints of
transformers 4 do), its head as `lm_head.weight` or `language_model.lm_head.weight`, and the tower's and projector's
tensors beside them. Petit runs the text model alone: `flatten` reads the config into the text family's fields
(warning once that the tower is not run), `hf_tensors` hands out the text model's tensors under the text model's own
names and accounts for the tower's tensors (the warning has named them: they are not reported again one by one). A
head the checkpoint stores is read even when the config ties it (transformers' from_pretrained unties a stored head
that differs from the embeddings, and one equal to them gives the same logits).

A converted file (`petit convert`) is a file of the text model: its config flat with the wrapper's model_type, its
tensors under the text model's names.
"""
import warnings

from petit.models.blocks.config import COMMON_IGNORED

TEXT_PREFIXES = ("language_model.model.", "model.language_model.")
HEADS = ("language_model.lm_head.weight", "lm_head.weight")


def flatten(d: dict, model_type: str, own_keys, towers=("vision_config",), tie=None, text_types=None,
            what: str = "images") -> dict:
    """The text model's config of a wrapper's config.json `d` as one flat dict with `model_type`, or `d` itself when
    it has no `text_config` (a converted file's flat config).

    own_keys: the wrapper's top-level keys that only the tower and projector read (image token ids, ...); any other
        top-level key is reported as unknown. tie: the wrapper's default of a top-level tie_word_embeddings, which
        then decides the head (transformers ties the head by the wrapper's config), or None when the text config's
        own value decides. text_types: the text_config model_types the wrapper's family runs (None: any); the flat
        dict keeps the one found as `text_model_type`.
    """
    if not isinstance(d, dict) or not isinstance(d.get("text_config"), dict):
        return d
    text = d["text_config"]
    kind = text.get("model_type")
    if text_types is not None and kind not in text_types:
        raise ValueError(f"config: {model_type}'s text_config has model_type {kind!r}; the {model_type} family runs "
                         f"a text model of {' / '.join(repr(t) for t in text_types)}")
    present = [k for k in towers if d.get(k)]
    if present:
        not_run(model_type, f"{' and '.join(k.split('_')[0] for k in present)} tower ({', '.join(present)})", what)
    known = set(own_keys) | set(towers) | {"text_config", "tie_word_embeddings"} | COMMON_IGNORED
    unknown = sorted(k for k in d if k not in known)
    if unknown:
        warnings.warn(f"config: ignoring unknown key(s) {', '.join(unknown)}", stacklevel=4)
    flat = {k: v for k, v in text.items() if k != "model_type"}
    if tie is not None:
        flat["tie_word_embeddings"] = d.get("tie_word_embeddings", tie)
    if text_types is not None:
        flat["text_model_type"] = kind
    flat["model_type"] = model_type
    return flat


def not_run(model_type: str, tower: str, what: str, text: str = "the text model (text_config)") -> None:
    """The one warning a wrapper's folder gives: its tower (described) is not run."""
    warnings.warn(f"config: {model_type}: the {tower} is not run; Petit runs {text} alone, so {what} cannot be "
                  f"given", stacklevel=5)


class TextView:
    """The checkpoint seen from the text model: `model.X` is the stored `language_model.model.X` (or
    `model.language_model.X`), `lm_head.weight` the stored head under either spelling."""

    def __init__(self, ckpt, prefix: str, heads=HEADS):
        self.ckpt, self.prefix = ckpt, prefix
        names = set(ckpt.names())
        self.head = next((h for h in heads if h in names), "lm_head.weight")

    def name(self, n: str) -> str:
        if n == "lm_head.weight":
            return self.head
        return self.prefix + n[len("model."):] if n.startswith("model.") else n

    def names(self):
        return [("model." + n[len(self.prefix):] if n.startswith(self.prefix) else
                 "lm_head.weight" if n == self.head else n) for n in self.ckpt.names()]

    def __contains__(self, n):
        return self.name(n) in self.ckpt

    def f32(self, n):
        return self.ckpt.f32(self.name(n))

    def info(self, n):
        return self.ckpt.info(self.name(n))

    def raw(self, n):
        return self.ckpt.raw(self.name(n))

    def release(self, n, *a):
        return self.ckpt.release(self.name(n), *a)


def hf_tensors(cfg, ckpt, tower_prefixes, text_tensors=None, prefixes=TEXT_PREFIXES, heads=HEADS) -> dict:
    """The text model's tensors under its own names (`text_tensors(cfg, view)`: the text family's own derived
    tensors, read through the view), and the tower's tensors accounted for (never read). A checkpoint already under
    the text model's names (a text-only or converted one, or a wrapper keeping its text model at the top: Phi-4's) is
    left to `text_tensors` alone beside its tower. prefixes / heads: where the wrapper keeps its text model and head
    (default: language_model, as save_pretrained writes most wrappers, or transformers 5's model.language_model)."""
    names = list(ckpt.names())
    out = {n: (ckpt.info(n)[1], _never(n), (n,)) for n in names if n.startswith(tuple(tower_prefixes))}
    prefix = next((p for p in prefixes if any(n.startswith(p) for n in names)), None)
    if prefix is None:
        return out | (text_tensors(cfg, ckpt) if text_tensors else {})
    view = TextView(ckpt, prefix, heads)
    for n in names:
        if n not in out and (n.startswith(prefix) or n == view.head):
            out[_text_name(view, n)] = (ckpt.info(n)[1], lambda n=n: ckpt.f32(n), (n,))
    if getattr(cfg, "tie_word_embeddings", False) and view.head in names:
        # transformers' from_pretrained ties a head the checkpoint stores only when it equals the embeddings (else it
        # warns and keeps both): the stored head gives its logits either way
        cfg.tie_word_embeddings = False
    if text_tensors:
        for name, (shape, make, sources, *rest) in text_tensors(cfg, view).items():
            out[name] = (shape, make, tuple(view.name(s) for s in sources), *rest)
    return out


def _text_name(view: TextView, n: str) -> str:
    return "lm_head.weight" if n == view.head else "model." + n[len(view.prefix):]


def _never(n):
    def make():
        raise AssertionError(f"{n} belongs to the tower, which is not run")
    return make
