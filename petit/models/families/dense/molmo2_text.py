"""Molmo2's language model (transformers' `molmo2_text`, Molmo2TextModel: allenai/Molmo2): Llama's block with q / k / v
biases (`attention_bias`, alias qkv_bias; o_proj never has one), an RMSNorm on q and k before RoPE, over each head
(`qk_norm_type` "qwen3", the default) or over the whole row ("olmo"), a SwiGLU MLP, and:

- `norm_after`: each sublayer's output normed before its residual add instead of its input (the same two norms);
- `rope_scaling_layers`: the layers that rotate by the scaled RoPE of rope_parameters, the others by the unscaled
  RoPE of the same theta (default: every layer scaled);
- an embedding of vocab_size + `additional_vocab_size` rows (the image tokens' after the text's), of which text reads
  the first vocab_size (the head has vocab_size rows).

Names: the release (and save_pretrained) keeps OLMo's (`model.transformer.blocks.N.att_proj` q | k | v fused,
`attn_out`, `ff_proj` up | gate, `ff_out`, `attn_norm`, `ff_norm`, `ln_f`, the embedding split as `wte.embedding` and
`wte.new_embedding`); transformers' modules are Llama's under model.language_model. Both are read."""
import re
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.common import Renamed, default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, aliased, check_decoder, refuse_act

ALIASES = {"qkv_bias": "attention_bias", "layer_norm_eps": "rms_norm_eps"}
RENAMES = ((r"^model\.language_model\.", "model."), (r"^model\.transformer\.blocks\.", "model.layers."),
           (r"^model\.transformer\.ln_f\.", "model.norm."), (r"\.self_attn\.attn_out\.", ".self_attn.o_proj."),
           (r"\.mlp\.ff_out\.", ".mlp.down_proj."), (r"\.attn_norm\.", ".input_layernorm."),
           (r"\.ff_norm\.", ".post_attention_layernorm."))
TOWER = ("model.vision_backbone.", "model.vision_tower.", "model.multi_modal_projector.")


def text_name(name: str) -> str:
    for pattern, repl in RENAMES:
        name = re.sub(pattern, repl, name)
    return name


@dataclass(kw_only=True)
class Molmo2TextConfig(DecoderConfig):
    num_key_value_heads: int | None = 8
    head_dim: int | None = 128
    additional_vocab_size: int = 128
    attention_bias: bool = False
    qk_norm_type: str = "qwen3"
    max_position_embeddings: int = 36864
    rope_scaling_layers: list | None = None
    rms_norm_eps: float = 1e-6
    norm_after: bool = False
    model_type: str = "molmo2_text"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(aliased(d, ALIASES) if isinstance(d, dict) else d)

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), cls.model_type, "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "attention_bias", "norm_after"))
        if self.qk_norm_type not in ("qwen3", "olmo"):
            raise ValueError(f"config: qk_norm_type must be 'qwen3' or 'olmo', got {self.qk_norm_type!r}")
        if isinstance(self.additional_vocab_size, bool) or not isinstance(self.additional_vocab_size, int) or \
                self.additional_vocab_size < 0:
            raise ValueError(f"config: additional_vocab_size must be >= 0, got {self.additional_vocab_size!r}")
        if self.rope_scaling_layers is None:
            self.rope_scaling_layers = list(range(self.num_hidden_layers))
        if not isinstance(self.rope_scaling_layers, list) or any(
                isinstance(i, bool) or not isinstance(i, int) for i in self.rope_scaling_layers):
            raise ValueError(f"config: rope_scaling_layers must be a list of layer indices, got "
                             f"{self.rope_scaling_layers!r}")


def hf_tensors(cfg: Molmo2TextConfig, ckpt) -> dict:
    """The embedding's first vocab_size rows (of wte.embedding + wte.new_embedding, or of embed_tokens), the fused
    att_proj split into q / k / v (weights and biases), ff_proj into up (first half) and gate; other names renamed."""
    if getattr(cfg, "tie_word_embeddings", False) and "lm_head.weight" in ckpt:
        cfg.tie_word_embeddings = False     # a stored head is read (transformers keeps one that differs: wrapper.py)
    v = Renamed(ckpt, text_name)
    D, V, F = cfg.hidden_size, cfg.vocab_size, cfg.intermediate_size
    q, kv = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    out = {}
    parts = [n for n in ("model.transformer.wte.embedding", "model.transformer.wte.new_embedding") if n in v]
    if parts:
        out["model.embed_tokens.weight"] = ((V, D), lambda: np.concatenate([v.f32(n) for n in parts])[:V], parts)
    elif "model.embed_tokens.weight" in v:
        out["model.embed_tokens.weight"] = ((V, D), lambda: v.f32("model.embed_tokens.weight")[:V],
                                            ["model.embed_tokens.weight"])
    for i in range(cfg.num_hidden_layers):
        a, m = f"model.layers.{i}.self_attn.", f"model.layers.{i}.mlp."
        for kind in ("weight", "bias"):
            fused = a + "att_proj." + kind
            if fused in v:
                for name, r0, n in (("q_proj", 0, q), ("k_proj", q, kv), ("v_proj", q + kv, kv)):
                    out[f"{a}{name}.{kind}"] = ((n, D) if kind == "weight" else (n,),
                                                lambda f=fused, r0=r0, n=n: v.f32(f)[r0:r0 + n], [fused])
        if m + "ff_proj.weight" in v:
            for name, r0 in (("up_proj", 0), ("gate_proj", F)):
                out[f"{m}{name}.weight"] = ((F, D), lambda f=m + "ff_proj.weight", r0=r0: v.f32(f)[r0:r0 + F],
                                            [m + "ff_proj.weight"])
    return v.aliases(v.entries(out))


def build(cfg: Molmo2TextConfig, t):
    scaled, unscaled = default_rope(cfg), default_rope(cfg, scaling=None)
    on = set(cfg.rope_scaling_layers)
    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias,
                     qk_norm="head" if cfg.qk_norm_type == "qwen3" else "full",
                     rope_for=lambda i: scaled if i in on else unscaled, context_length=scaled.context_length)
    if cfg.norm_after:
        for L in dec.layers:
            L.post_attn_norm, L.post_mlp_norm, L.attn_norm, L.mlp_norm = L.attn_norm, L.mlp_norm, None, None
    return dec


Config = Molmo2TextConfig
