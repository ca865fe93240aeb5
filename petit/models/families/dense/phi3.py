"""Phi-3: Llama with fused projections in the checkpoint (`qkv_proj` = [q; k; v] rows, `gate_up_proj` =
[gate; up] rows), optional partial rotary, longrope scaling (short / long factors picked by the sequence length
against original_max_position_embeddings) and an optional sliding window. The fused matrices are split into row
ranges when read, so a converted .petit holds q/k/v and gate/up separately."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act


@dataclass(kw_only=True)
class Phi3Config(DecoderConfig):
    max_position_embeddings: int = 4096
    original_max_position_embeddings: int | None = 4096
    rms_norm_eps: float = 1e-5
    partial_rotary_factor: float = 1.0
    sliding_window: int | None = None
    model_type: str = "phi3"
    _IGNORED = frozenset({"resid_pdrop", "embd_pdrop", "attention_bias"})      # attention_bias: false, checked

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "phi3", "silu")
        if d.get("attention_bias"):
            raise ValueError("config: attention_bias=true is not supported by the phi3 family")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "partial_rotary_factor"),
                      ("tie_word_embeddings",), window=True)
        self.rotary_dim = int(self.head_dim * self.partial_rotary_factor)


def hf_tensors(cfg: Phi3Config, ckpt) -> dict:
    """q/k/v and gate/up as row ranges of the fused checkpoint matrices."""
    D, F, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    out = {}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        qkv, gu = p + "self_attn.qkv_proj.weight", p + "mlp.gate_up_proj.weight"
        for name, src, r0, r1 in (("self_attn.q_proj", qkv, 0, q), ("self_attn.k_proj", qkv, q, q + kv),
                                  ("self_attn.v_proj", qkv, q + kv, q + 2 * kv), ("mlp.gate_proj", gu, 0, F),
                                  ("mlp.up_proj", gu, F, 2 * F)):
            if src in ckpt:
                out[p + name + ".weight"] = ((r1 - r0, D), lambda s=src, a=r0, b=r1: ckpt.f32(s)[a:b], (src,))
    return out


def build(cfg: Phi3Config, t):
    rope = default_rope(cfg, dim=cfg.rotary_dim)
    w = cfg.sliding_window or 0
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, rope_for=lambda i: rope, window_for=lambda i: w,
                      context_length=rope.context_length)


Config = Phi3Config
