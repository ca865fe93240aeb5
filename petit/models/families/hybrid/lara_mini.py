"""Lara 4 Mini (`lara_mini`, translated/Lara-4-Mini-Base): Qwen3.5's Gated DeltaNet in the `linear_attention`
layers (petit/models/families/hybrid/qwen3_next.py's block) beside Qwen3's attention, Flint's experts in every layer,
plain norms.

What differs from Qwen3-Next:
- Norms are plain RMSNorms x * w (the gated one too), not zero-centred.
- Attention layers are Qwen3's (q / k RMSNorm per head, q / k / v / o biases with `attention_bias`, no output gate):
  `sliding_attention` layers rotate whole heads (RoPE) within `sliding_window`, `full_attention` ones have no
  position encoding (NoPE). Default `layer_types`: the released period linear, sliding, linear, full, sliding.
- Every layer routes: the top `num_experts_per_tok` of the softmax of the float32 router logits (renormalised with
  `norm_topk_prob`), SwiGLU experts of `moe_intermediate_size`, plus an ungated shared expert.
- The released checkpoints fuse the linear attention's projections into one `linear_attn.in_proj` (rows q | k | v |
  z | b | a, as the engine reads them) and name its gated norm `linear_attn.out_norm`; transformers' module names
  (`in_proj_qkv` / `_z` / `_b` / `_a`, `norm`) are read too. The experts are transformers 5's 3-D tensors."""
from dataclasses import dataclass

from petit.models.families.hybrid import qwen3_5_moe_text, qwen3_5_text, qwen3_next
from petit.models.blocks.common import attention_weights
from petit.models.blocks.config import positive_int
from petit.models.blocks.moe_config import check_routing

KINDS = ("linear_attention", "sliding_attention", "full_attention")
PERIOD = ("linear_attention", "sliding_attention", "linear_attention", "full_attention", "sliding_attention")


@dataclass(kw_only=True)
class LaraMiniConfig(qwen3_next.Qwen3NextConfig):
    vocab_size: int = 151936
    hidden_size: int = 1024
    intermediate_size: int = 0                  # unused: every layer routes (set to moe_intermediate_size)
    num_hidden_layers: int = 34
    num_attention_heads: int = 16
    num_key_value_heads: int | None = 4
    head_dim: int | None = 128
    linear_num_key_heads: int = 8
    linear_num_value_heads: int = 16
    num_experts: int = 128
    num_experts_per_tok: int = 4
    max_position_embeddings: int = 131072
    sliding_window: int = 512
    partial_rotary_factor: float = 1.0
    tie_word_embeddings: bool = True
    model_type: str = "lara_mini"
    _REQUIRED = ()
    _KINDS = KINDS

    _NOT_READ = ("intermediate_size", "mlp_only_layers", "decoder_sparse_step", "full_attention_interval")
    _NOT_READ_WHY = "Lara 4 Mini's class does not read them: every layer routes, layer_types places the attention"

    @classmethod
    def _refuse(cls, d):
        super()._refuse({k: v for k, v in d.items() if k != "attention_bias"})      # Qwen3's attention has biases

    def _validate(self):
        if self.partial_rotary_factor != 1:
            raise ValueError(f"config: partial_rotary_factor {self.partial_rotary_factor!r} is not supported by the "
                             f"lara_mini family: its attention rotates whole heads")
        self.intermediate_size = self.moe_intermediate_size
        super()._validate()
        if "sliding_attention" in self.types:
            positive_int(self, "sliding_window")

    def _default_type(self, i: int) -> str:
        return PERIOD[i % len(PERIOD)]

    def _sparse(self) -> list:
        check_routing(self)
        return [True] * self.num_hidden_layers


def attention(cfg, t, p: str, kind: str, rope) -> dict:
    """Qwen3's attention: RoPE and the window in the sliding layers, neither in the full ones."""
    sliding = kind == "sliding_attention"
    return dict(attention_weights(t, p, cfg, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias),
                rope=rope if sliding else None, window=cfg.sliding_window if sliding else 0)


def hf_tensors(cfg: LaraMiniConfig, ckpt) -> dict:
    out = qwen3_next.hf_tensors(cfg, ckpt, in_proj=qwen3_5_text.in_proj)
    for i, kind in enumerate(cfg.types):
        p = f"model.layers.{i}."
        saved = p + "linear_attn.out_norm.weight"
        if kind == "linear_attention" and saved in ckpt:
            out[p + "linear_attn.norm.weight"] = ((cfg.linear_value_head_dim,), lambda s=saved: ckpt.f32(s), (saved,))
        out.update(qwen3_5_moe_text.expert_tensors(cfg, ckpt, p + "mlp.", cfg.num_experts, cfg.moe_intermediate_size,
                                                   cfg.hidden_size))
    return out


def build(cfg: LaraMiniConfig, t):
    return qwen3_next.build(cfg, t, add=0.0, attention=attention, shared_gate=None)


Config = LaraMiniConfig
