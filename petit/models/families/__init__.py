"""The families, one folder per kind, the kind being the mix of blocks a family's `build` composes (docs/
architecture.md says which goes where). Each kind's `__init__.py` is that kind's part of the registry: its
`MODEL_TYPES` maps each model_type to its module in the folder, its `HELPERS` names the modules there that are part of
a family rather than one. Adding a family is its module in its kind's folder and one line in that kind's MODEL_TYPES.

Importing a kind imports its tables only, never its modules (petit.models.Registry imports a family when its
model_type is first looked up)."""
import importlib

KINDS = ("dense", "classic", "moe", "mla", "hybrid", "recurrent", "wrappers", "encoders")


def table(kinds=KINDS) -> dict:
    """model_type -> its module under petit.models ("families.<kind>.<module>") for the given kinds; a model_type
    declared by two kinds is an error, whichever kinds are asked for."""
    out, seen = {}, {}
    for kind in KINDS:
        for model_type, module in importlib.import_module(f"petit.models.families.{kind}").MODEL_TYPES.items():
            if model_type in seen:
                raise ValueError(f"model_type {model_type!r} is in two kinds: {seen[model_type]} and {kind}")
            seen[model_type] = kind
            if kind in kinds:
                out[model_type] = f"families.{kind}.{module}"
    return out
