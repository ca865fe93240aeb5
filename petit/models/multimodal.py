"""Multimodal checkpoints whose language model is a text family Petit runs, declared as rows of a table
(petit/models/multimodal_rows.py) rather than one module each: LLaVA and its kin, the audio LMs, the OCR models.

Such a checkpoint is a tower (vision or audio encoder and projector, never run) beside a text model whose config is
`text_config` and whose weights sit under `model.language_model.*` (transformers 5), `language_model.model.*`
(transformers 4's save_pretrained), or the row's own spelling (Idefics' `model.text_model.*`). For a text-only
prompt the wrapper's forward is the text model's: embed the ids, run the text model, apply the head. The table says
only what differs between wrappers: the text model_type transformers builds when text_config names none, the tower's
module names, the wrapper's own config keys (read only by the tower and projector), the tower configs' names, and
where the text model sits.

Registered in MODEL_TYPES as "multimodal:<model_type>"; `family(model_type, row, MODEL_TYPES)` makes the module-like
object the loaders use (Config, hf_tensors, build). Its Config is the text family's own dataclass with the wrapper's
model_type and `text_model_type`; a converted file keeps both, its config flat.
"""
import dataclasses
import functools
import re
import types

from petit.models.blocks import wrapper


@dataclasses.dataclass(frozen=True)
class Wrap:
    cls: str                            # transformers' class of the checkpoint (its config.json's architectures)
    text: str                           # text_config's model_type when it names none (the config class's default)
    tower: tuple                        # the tower's and projector's module names (model.<name>. or <name>.)
    keys: tuple = ()                    # the wrapper's own top-level config keys (image token ids, projector ...)
    towers: tuple = ("vision_config",)  # the tower's config keys
    what: str = "images"                # what the tower would read, named in the one warning
    text_at: str = "language_model"     # the text model: model.<text_at>.* or <text_at>.model.*
    text_prefix: tuple = ()             # or where the release keeps it (tried first)
    renames: tuple = ()                 # (regex, replacement): the release's names of the text model's tensors
    #                                     (seen as model.*) to the text family's
    plain_head: bool = False            # the wrapper's logits are lm_head(h) alone: no final soft-cap, logit
    #                                     scale or logits scaling, whatever the text config says


def family(model_type: str, row: Wrap, registry) -> types.ModuleType:
    """The family object of the wrapper `model_type` (its `row` of multimodal_rows.ROWS), whose text model is a
    family of `registry` (MODEL_TYPES, handed in by it: this module imports no registry); made once."""
    if model_type not in _MADE:
        _MADE[model_type] = _family(model_type, row, functools.partial(_text_family, registry))
    return _MADE[model_type]


_MADE: dict = {}


def _family(model_type: str, row: Wrap, text_family) -> types.ModuleType:
    m = types.ModuleType(f"petit.models.multimodal.{model_type}", f"{row.cls}: a {row.text} text model")
    m.Config = type(f"{_camel(model_type)}Config", (), {"from_dict": classmethod(
        lambda cls, d: _config(model_type, row, d, text_family))})
    m.hf_tensors = lambda cfg, ckpt: _hf_tensors(row, cfg, ckpt, text_family(model_type, cfg.text_model_type))
    m.build = lambda cfg, t: text_family(model_type, cfg.text_model_type).build(cfg, t)
    m.ROW = row
    return m


def _config(model_type: str, row: Wrap, d: dict, text_family):
    if not isinstance(d, dict):
        raise ValueError("config: not a JSON object")
    text = d.get("text_config")
    if isinstance(text, dict):
        kind = text.get("model_type") or row.text
        flat = wrapper.flatten(d, model_type, row.keys, towers=row.towers, tie=True, what=row.what)
        flat["text_model_type"] = kind
    else:           # a converted file: the text model's config flat, its type kept
        flat = dict(d)
        kind = flat.setdefault("text_model_type", row.text)
    cfg = _config_class(model_type, text_family(model_type, kind).__name__, kind).from_dict(flat)
    if row.plain_head:          # read (and reported when unknown) as the text family reads them, not applied
        for name, off in (("final_logit_softcapping", None), ("logit_scale", 1.0), ("logits_scaling", 1.0)):
            if hasattr(cfg, name):
                setattr(cfg, name, off)
    return cfg


@functools.cache
def _config_class(model_type: str, module: str, kind: str):
    """The text family's Config with the wrapper's model_type and the text model's type as fields."""
    import importlib
    base = importlib.import_module(module).Config
    return dataclasses.make_dataclass(
        f"{_camel(model_type)}{base.__name__}",
        [("model_type", str, dataclasses.field(default=model_type)),
         ("text_model_type", str, dataclasses.field(default=kind))], bases=(base,), kw_only=True)


def _text_family(registry, model_type: str, kind: str):
    if kind not in registry or registry.names[kind].startswith("multimodal:") or kind == model_type:
        raise ValueError(f"config: {model_type}'s text_config has model_type {kind!r}, a text model Petit does not "
                         f"run" + ("" if kind in registry else f" (supported: {', '.join(sorted(registry))})"))
    return registry[kind]


def _hf_tensors(row: Wrap, cfg, ckpt, text) -> dict:
    tower = tuple(p for name in row.tower for p in (f"model.{name}", name))
    at = row.text_at
    own = getattr(text, "hf_tensors", None)

    def text_tensors(cfg, view):
        out = {}
        for n in view.names() if row.renames else ():
            new = functools.reduce(lambda a, r: re.sub(r[0], r[1], a), row.renames, n)
            if new != n:
                out[new] = (view.info(n)[1], lambda n=n: view.f32(n), (n,))
        return out | (own(cfg, view) if own else {})

    return wrapper.hf_tensors(cfg, ckpt, tower, text_tensors,
                              prefixes=row.text_prefix + (f"model.{at}.model.", f"model.{at}.", f"{at}.model."),
                              heads=(f"{at}.lm_head.weight", f"model.{at}.lm_head.weight", "lm_head.weight"))


def _camel(model_type: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in model_type.replace("-", "_").split("_"))
