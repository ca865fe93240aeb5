"""The model families Petit can run, one module per Hugging Face `model_type`, grouped by kind under
petit/models/families/ (docs/architecture.md), built from petit/models/blocks/.

The registry is an explicit table (each kind's MODEL_TYPES, merged here), not an import built from a config string: it
is the allowlist of what a model file may ask for (packaging/hooks/hook-petit.py hands every module to a frozen app). A
family's module is imported when its model_type is first looked up, so opening a file imports its own family, not all
160 (0.5-1 s of the open time of a 7B GGUF, issue 31).

A family module has `Config` (a dataclass with Hugging Face's field names and `from_dict` / `to_dict`), `build(cfg,
tensors) -> Decoder` (asking a TensorSource for each tensor by name and shape), and, when its checkpoints store
tensors in another layout than the kernels read, `hf_tensors(cfg, checkpoint)`.
"""
import importlib
from collections.abc import Mapping

from petit.models.families import KINDS, table
from petit.models.multimodal_rows import ROWS as MULTIMODAL_ROWS
from petit.models.nearest import CLOSEST
from petit.models.refusals import MULTIMODAL_NOT_TEXT, NOT_DECODERS


class Registry(Mapping):
    """model_type -> its family module (petit.models.families.<kind>.<name>), imported on first look-up."""

    def __init__(self, names: dict):
        self.names = names

    def __getitem__(self, model_type):
        name = self.names[model_type]
        if name.startswith("multimodal:"):      # a row of the multimodal table (petit/models/multimodal_rows.py)
            return importlib.import_module("petit.models.multimodal").family(model_type, MULTIMODAL_ROWS[model_type],
                                                                             self)
        return importlib.import_module(f"petit.models.{name}")

    def __iter__(self):
        return iter(self.names)

    def __len__(self):
        return len(self.names)

    def __contains__(self, model_type):
        return model_type in self.names


# the language models: model_type -> module, from each kind's table (petit/models/families/<kind>/__init__.py, the one
# place a family is added), then the multimodal checkpoints whose language model is one of them, one row each in the
# table (issue 36)
MODEL_TYPES = Registry(table(tuple(k for k in KINDS if k != "encoders")))
MODEL_TYPES.names |= {t: f"multimodal:{t}" for t in MULTIMODAL_ROWS}

# issue 35: the encoders of embedding models (family KIND "encoder": hidden states for petit.embed, no logits), kept
# apart from the language models above, whose tests (logit parity, petit verify) do not apply to them
ENCODERS = Registry(table(("encoders",)))


def closest(model_type) -> str | None:
    """The supported family nearest an unknown model_type, with what differs, or None."""
    import difflib
    if model_type in CLOSEST and CLOSEST[model_type][0] in MODEL_TYPES:
        family, what = CLOSEST[model_type]
        return f"{family} ({model_type} differs: {what})"
    near = difflib.get_close_matches(str(model_type), list(MODEL_TYPES), n=1, cutoff=0.75)
    return near[0] if near else None


def get_family(model_type):
    """The module implementing `model_type`.

    Raises:
        ValueError: for a model_type that is not a decoder-only language model, saying what it is; for an unknown
            model_type, naming the closest supported family when there is one and listing the
            supported ones.
    """
    if model_type in ENCODERS:
        return ENCODERS[model_type]
    if model_type in NOT_DECODERS or model_type in MULTIMODAL_NOT_TEXT:
        what = NOT_DECODERS.get(model_type) or MULTIMODAL_NOT_TEXT[model_type]
        raise ValueError(f"unsupported model_type {model_type!r}: {what}; Petit runs decoder-only language models")
    if model_type not in MODEL_TYPES:
        near = closest(model_type)
        hint = f"; the closest family Petit runs is {near}" if near else ""
        raise ValueError(f"unsupported model_type {model_type!r}{hint}: supported model types are "
                         f"{', '.join(sorted(MODEL_TYPES))}")
    return MODEL_TYPES[model_type]
