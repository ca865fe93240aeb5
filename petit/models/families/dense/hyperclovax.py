"""HyperCLOVA X SEED (NAVER, `naver-hyperclovax/HyperCLOVAX-SEED-Think-14B`): Granite's block and multipliers with
two differences: the logits are multiplied by `logits_scaling` (Granite divides), and with `use_post_norm` (the
default) an RMSNorm of each sublayer's output (`post_norm1` after attention, `post_norm2` after the MLP: "Peri-Layer
Normalization") before the residual multiplier and the add. `attention_multiplier` null means head_dim^-0.5."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like, norm
from petit.models.blocks.config import boolean
from petit.models.families.dense.granite import GraniteConfig


@dataclass(kw_only=True)
class HyperCLOVAXConfig(GraniteConfig):
    attention_multiplier: float | None = None
    use_post_norm: bool = True
    model_type: str = "hyperclovax"

    def _validate(self):
        derive = self.attention_multiplier is None
        if derive:
            self.attention_multiplier = 1.0         # checked below once head_dim is known
        super()._validate()
        if derive:
            self.attention_multiplier = self.head_dim ** -0.5
        boolean(self, "use_post_norm")


def build(cfg: HyperCLOVAXConfig, t):
    rope = default_rope(cfg)
    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                     mlp_bias=cfg.mlp_bias, rope_for=lambda i: rope, context_length=rope.context_length,
                     embed_scale=cfg.embedding_multiplier, attn_scale=cfg.attention_multiplier,
                     residual_scale=cfg.residual_multiplier, logit_scale=cfg.logits_scaling)
    if cfg.use_post_norm:
        for i, L in enumerate(dec.layers):
            p = f"model.layers.{i}."
            L.post_attn_norm = norm(t, p + "post_norm1", cfg.hidden_size, "rms", cfg.rms_norm_eps)
            L.post_mlp_norm = norm(t, p + "post_norm2", cfg.hidden_size, "rms", cfg.rms_norm_eps)
    return dec


Config = HyperCLOVAXConfig
