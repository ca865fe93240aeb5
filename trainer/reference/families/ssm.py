"""The state-space families, transformers' semantics (its slow, pure-torch path), in float64: mamba, falcon_mamba
(weightless RMS norms of dt, B and C in each mixer) and mamba2 (the SSD recurrence per head). A layer is x +
mixer(RMSNorm(x)); the mixer's recurrence runs token by token over the whole sequence from a zero state
(trainer/reference/forward.py)."""
import math

from trainer.reference.families.common import get, rms
from trainer.reference.spec import LayerSpec, Mamba2Spec, MambaSpec, ModelSpec


def _mamba(cfg, names, family: str, inner_norm: bool) -> ModelSpec:
    D = cfg["hidden_size"]
    eps = get(cfg, "layer_norm_epsilon", 1e-5)
    rank = cfg.get("time_step_rank", "auto")
    rank = math.ceil(D / 16) if rank == "auto" else int(rank)
    spec = ModelSpec(family, 1, 1, 1, "backbone.embeddings.weight",
                     "backbone.embeddings.weight" if get(cfg, "tie_word_embeddings", True) else "lm_head.weight",
                     rms("backbone.norm_f", eps))
    for i in range(cfg["num_hidden_layers"]):
        p = f"backbone.layers.{i}."
        m = p + "mixer."
        L = LayerSpec(q=None, k=None, v=None, o=None,
                      mamba=MambaSpec(m + "in_proj.weight", m + "conv1d.weight",
                                      m + "conv1d.bias" if get(cfg, "use_conv_bias", True) else None,
                                      m + "x_proj.weight", m + "dt_proj.weight", m + "dt_proj.bias", m + "A_log",
                                      m + "D", m + "out_proj.weight", rank,
                                      get(cfg, "mixer_rms_eps", 1e-6) if inner_norm else None))
        L.attn_norm = rms(p + "norm", eps)
        spec.layers.append(L)
    return spec


def mamba(cfg, names):
    return _mamba(cfg, names, "mamba", False)


def falcon_mamba(cfg, names):
    return _mamba(cfg, names, "falcon_mamba", True)


def mamba2(cfg, names):
    eps = get(cfg, "layer_norm_epsilon", 1e-5)
    spec = ModelSpec("mamba2", 1, 1, 1, "backbone.embeddings.weight",
                     "backbone.embeddings.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight",
                     rms("backbone.norm_f", eps))
    lim = tuple(float("inf") if v is None else float(v) for v in (cfg.get("time_step_limit") or (0.0, None)))
    for i in range(cfg["num_hidden_layers"]):
        p = f"backbone.layers.{i}."
        m = p + "mixer."
        L = LayerSpec(q=None, k=None, v=None, o=None,
                      mamba2=Mamba2Spec(m + "in_proj.weight", m + "conv1d.weight",
                                        m + "conv1d.bias" if get(cfg, "use_conv_bias", True) else None,
                                        m + "dt_bias", m + "A_log", m + "D", m + "norm.weight", m + "out_proj.weight",
                                        get(cfg, "num_heads", 128), get(cfg, "n_groups", 8),
                                        get(cfg, "state_size", 128), eps, lim))
        L.attn_norm = rms(p + "norm", eps)
        spec.layers.append(L)

    return spec


FAMILIES = {"mamba": mamba, "falcon_mamba": falcon_mamba, "mamba2": mamba2}
