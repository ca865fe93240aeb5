"""Gemma 2: Gemma with norms around both sublayers (input / post_attention, pre_feedforward / post_feedforward),
attention scale query_pre_attn_scalar^-1/2, tanh soft-capping of attention scores and final logits, and sliding
windows on alternate layers (`layer_types`; by default the even layers)."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, layer_types, llama_like, window_of
from petit.models.blocks.config import positive_number
from petit.models.families.dense.gemma import GemmaConfig


@dataclass(kw_only=True)
class Gemma2Config(GemmaConfig):
    hidden_activation: str = "gelu_pytorch_tanh"
    query_pre_attn_scalar: float = 256
    sliding_window: int | None = 4096
    layer_types: list | None = None
    final_logit_softcapping: float | None = 30.0
    attn_logit_softcapping: float | None = 50.0
    model_type: str = "gemma2"

    _ACT_KEY = "hidden_activation"

    def _validate(self):
        super()._validate()
        positive_number(self, "query_pre_attn_scalar")
        for name in ("final_logit_softcapping", "attn_logit_softcapping"):
            if getattr(self, name) is not None:
                positive_number(self, name)

    def types(self):
        return layer_types(self, lambda i: "sliding_attention" if (i + 1) % 2 else "full_attention")


def build(cfg: Gemma2Config, t, **kw):
    if "rope_for" not in kw:
        rope = default_rope(cfg)
        kw.update(rope_for=lambda i: rope, context_length=rope.context_length)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, norm_add=1.0, qkv_bias=cfg.attention_bias,
                      o_bias=cfg.attention_bias, window_for=window_of(cfg, cfg.types()), sandwich=True,
                      act=cfg.act, embed_scale=cfg.hidden_size ** 0.5, attn_scale=cfg.query_pre_attn_scalar ** -0.5,
                      attn_softcap=cfg.attn_logit_softcapping or 0.0,
                      logit_softcap=cfg.final_logit_softcapping or 0.0, **kw)


Config = Gemma2Config
