"""The model families Petit can run, one module per Hugging Face `model_type`.

The registry is an explicit dict, not an import built from a config string: it is the allowlist of what a model
file may ask for, and a frozen app (PyInstaller) can see every module.
"""
from petit.models import llama

MODEL_TYPES = {
    "llama": llama,
}


def get_family(model_type):
    """The module implementing `model_type`.

    Raises:
        ValueError: for an unknown model_type, listing the supported ones.
    """
    if model_type not in MODEL_TYPES:
        raise ValueError(f"unsupported model_type {model_type!r}: supported model types are "
                         f"{', '.join(sorted(MODEL_TYPES))}")
    return MODEL_TYPES[model_type]
