"""Hunyuan V1 dense (Tencent Hunyuan-0.5B ... 7B): Llama with RMSNorm over each head of q and k applied after RoPE
(`query_layernorm`, `key_layernorm`), not before as Qwen 3 does. The released configs' RoPE is `dynamic` with an
`alpha`: transformers then rotates with base = rope_theta * alpha^(d / (d - 2)) at every length up to
max_position_embeddings (the context Petit allows), which is how it is read here."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like, norm
from petit.models.blocks.config import DecoderConfig, check_decoder, positive_number, refuse_act


@dataclass(kw_only=True)
class HunYuanDenseV1Config(DecoderConfig):
    rms_norm_eps: float = 1e-5
    attention_bias: bool = False
    model_type: str = "hunyuan_v1_dense"
    _IGNORED = frozenset({"eod_token_id"})
    _ROPE_SCALING_EXTRA = frozenset({"alpha", "beta_fast", "beta_slow", "mscale", "mscale_all_dim"})

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "hunyuan_v1_dense", "silu")

    def _validate(self):
        s = self.rope_scaling
        self.alpha = None
        if isinstance(s, dict) and s.get("rope_type", s.get("type")) == "dynamic" and s.get("alpha"):
            self.alpha = s["alpha"]
            positive_number(self, "alpha")
            self.rope_scaling = None            # a fixed base (to_dict writes the config as given)
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "attention_bias"))
        if self.alpha is not None:
            self.rope_scaling = s

    def rope_base(self) -> float:
        d = self.head_dim
        return self.rope_theta * self.alpha ** (d / (d - 2)) if self.alpha else self.rope_theta


def build(cfg: HunYuanDenseV1Config, t):
    rope = default_rope(cfg, base=cfg.rope_base(), scaling=None if cfg.alpha else "config")
    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                     rope_for=lambda i: rope, context_length=rope.context_length)
    for i, L in enumerate(dec.layers):
        a = f"model.layers.{i}.self_attn."
        L.q_norm = norm(t, a + "query_layernorm", cfg.head_dim, "rms", cfg.rms_norm_eps)
        L.k_norm = norm(t, a + "key_layernorm", cfg.head_dim, "rms", cfg.rms_norm_eps)
        L.norm_after_rope = True
    return dec


Config = HunYuanDenseV1Config
