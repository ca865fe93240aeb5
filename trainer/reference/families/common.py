"""Config reading shared by the family modules: transformers' defaults for the head counts and head size, the
activation names, a family that is another's model under a config class of its own (`under`), and a refusal for
switches the reference does not model."""
from trainer.reference.rope import rope_freqs
from trainer.reference.spec import NormSpec, RopeSpec

ACTS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh",
        "gelu_fast": "gelu_tanh", "relu": "relu", "relu2": "relu2"}


def get(cfg: dict, key: str, default):
    """cfg[key], or the default when the key is absent or null (as transformers' config classes do)."""
    v = cfg.get(key)
    return default if v is None else v


def activation(cfg: dict, key: str, default: str) -> str:
    name = get(cfg, key, default)
    if name not in ACTS:
        raise ValueError(f"the reference does not model the activation {key}={name!r} of {cfg.get('model_type')}")
    return ACTS[name]


def filled(cfg: dict, defaults: dict) -> dict:
    """cfg with `defaults` for the keys it leaves out or sets to null (a config class's own defaults)."""
    return {**defaults, **{k: v for k, v in cfg.items() if v is not None or k not in defaults}}


def under(family: str, parent, defaults: dict):
    """The spec function of a family that is `parent`'s model under a config class of its own: parent's spec with
    that class's `defaults` filled in, named `family`."""
    def spec(cfg, names):
        s = parent(filled(cfg, defaults), names)
        s.family = family
        return s
    return spec


def refuse(cfg: dict, **unsupported) -> None:
    """Raise for a switch set to a value the reference does not model (key=value that is the only one modelled)."""
    for key, modelled in unsupported.items():
        if cfg.get(key) not in (None, modelled):
            raise ValueError(f"the reference does not model {key}={cfg[key]!r} of {cfg.get('model_type')}")


def heads(cfg: dict, h_key="num_attention_heads", d_key="hidden_size"):
    """(heads, kv heads, head_dim) with transformers' defaults."""
    H = cfg[h_key]
    KV = get(cfg, "num_key_value_heads", H)
    hd = get(cfg, "head_dim", cfg[d_key] // H)
    return H, KV, hd


def rope(cfg: dict, dim: int, theta=None, scaling="config", interleaved=False) -> RopeSpec:
    theta = get(cfg, "rope_theta", 10000.0) if theta is None else theta
    scaling = cfg.get("rope_scaling") if scaling == "config" else scaling
    return RopeSpec(dim, rope_freqs(dim, float(theta), scaling, cfg.get("max_position_embeddings") or 2048,
                                    cfg.get("original_max_position_embeddings")), interleaved)


def rms(name, eps, add=0.0) -> NormSpec:
    return NormSpec("rms", eps, name + ".weight", None, add)


def layer(name, eps, names, bias=True) -> NormSpec:
    return NormSpec("layer", eps, name + ".weight", name + ".bias" if bias and name + ".bias" in names else None)


def optional(name: str, names) -> str | None:
    return name if name in names else None


def layer_types(cfg: dict, derive) -> list:
    n = cfg["num_hidden_layers"]
    given = cfg.get("layer_types")
    return list(given) if given else [derive(i) for i in range(n)]
