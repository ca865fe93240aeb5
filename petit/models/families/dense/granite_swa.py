"""GraniteSWA (IBM's "granite-swash"): Granite's four multipliers with three attention changes, per layer:
- a sliding / full choice (`layer_types`; by default layer i is full when i % 4 == 0, the others slide over
  `sliding_window` positions);
- a learned sink logit per head (`self_attn.sinks`): transformers scales each head's output by
  sigmoid(logsumexp(scores) - sink), which is exactly a softmax with one more term exp(sink) whose share is dropped,
  the attention sinks of gpt-oss;
- a RoPE base of its own (`layer_rope_theta`; 0 means no position encoding in that layer, NoPE); by default every
  layer has the config's rope_theta. Any rope scaling of rope_parameters applies to each base."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, layer_types, llama_like, window_of
from petit.models.families.dense.granite import GraniteConfig

SINKS = "self_attn.sinks"


@dataclass(kw_only=True)
class GraniteSWAConfig(GraniteConfig):
    num_key_value_heads: int | None = 4
    max_position_embeddings: int = 8192
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = True
    sliding_window: int | None = 128
    layer_types: list | None = None
    layer_rope_theta: list | None = None
    model_type: str = "granite_swa"

    def _validate(self):
        super()._validate()
        check_swa(self)


def check_swa(cfg) -> None:
    """Derive `cfg.types` (each layer's attention kind) and check `layer_rope_theta`, as transformers reads them."""
    cfg.types = layer_types(cfg, lambda i: "full_attention" if i % 4 == 0 else "sliding_attention")
    window_of(cfg, cfg.types)           # a sliding layer needs a positive window
    n, thetas = cfg.num_hidden_layers, cfg.layer_rope_theta
    if thetas is None:
        cfg.layer_rope_theta = [cfg.rope_theta] * n
    elif not isinstance(thetas, list) or len(thetas) != n or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 for v in thetas):
        raise ValueError(f"config: layer_rope_theta must list {n} non-negative RoPE bases (0: no position encoding "
                         f"in that layer), got {thetas!r}")


def swa_attention(cfg) -> dict:
    """llama_like's keyword arguments for the per-layer RoPE (one Rope per distinct base) and windows."""
    ropes = {th: default_rope(cfg, base=th) for th in set(cfg.layer_rope_theta) if th}
    lengths = [r.context_length for r in ropes.values()]
    return dict(rope_for=lambda i: ropes.get(cfg.layer_rope_theta[i]), window_for=window_of(cfg, cfg.types),
                context_length=max(lengths) if lengths else cfg.max_position_embeddings)


def add_sinks(dec, t, cfg):
    for i, L in enumerate(dec.layers):
        L.sinks = t.vec(f"model.layers.{i}.{SINKS}", (cfg.num_attention_heads,))
    return dec


def build(cfg: GraniteSWAConfig, t):
    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                     mlp_bias=cfg.mlp_bias, embed_scale=cfg.embedding_multiplier, attn_scale=cfg.attention_multiplier,
                     residual_scale=cfg.residual_multiplier, logit_scale=1.0 / cfg.logits_scaling,
                     **swa_attention(cfg))
    return add_sinks(dec, t, cfg)


Config = GraniteSWAConfig
