"""Jamba (AI21): Mamba-1 layers and attention layers (attention where `i % attn_layer_period == attn_layer_offset`),
each followed by an MLP, routed experts where `i % expert_layer_period == expert_layer_offset` (softmax over all
`num_experts`, the top `num_experts_per_tok`, not renormalised) and a dense SwiGLU elsewhere. The Mamba mixer is
mamba's (kernels/ssm.c) with RMS norms that carry weights on dt, B and C (`dt_layernorm`, `b_layernorm`,
`c_layernorm`); attention has no positional encoding. The cache (HybridCache) holds the attention layers' keys and
values and the Mamba layers' conv and scan states."""
import math
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.common import attention_weights, embed_and_head, gated_mlp_weights, norm
from petit.models.blocks.config import DecoderConfig, boolean, check_decoder, positive_int
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY
from petit.models.blocks.ssm import Mamba


@dataclass(kw_only=True)
class JambaConfig(DecoderConfig):
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 262144
    num_experts: int = 16
    num_experts_per_tok: int = 2
    expert_layer_period: int = 2
    expert_layer_offset: int = 1
    attn_layer_period: int = 8
    attn_layer_offset: int = 4
    mamba_d_state: int = 16
    mamba_d_conv: int = 4
    mamba_expand: int = 2
    mamba_dt_rank: int | str = "auto"
    mamba_conv_bias: bool = True
    mamba_proj_bias: bool = False
    sliding_window: int | None = None
    tie_word_embeddings: bool = False
    model_type: str = "jamba"
    _IGNORED = MOE_TRAINING_ONLY | {"use_mamba_kernels", "num_logits_to_keep"}

    def _validate(self):
        check_decoder(self, ("rms_norm_eps",), ("tie_word_embeddings", "mamba_conv_bias", "mamba_proj_bias"))
        positive_int(self, "num_experts", "num_experts_per_tok", "expert_layer_period", "attn_layer_period",
                     "mamba_d_state", "mamba_d_conv", "mamba_expand")
        boolean(self, "mamba_conv_bias")
        if self.mamba_dt_rank == "auto":
            self.mamba_dt_rank = math.ceil(self.hidden_size / 16)
        positive_int(self, "mamba_dt_rank")
        if self.mamba_proj_bias:
            raise ValueError("config: mamba_proj_bias true is not supported by the jamba family")
        if self.sliding_window is not None:
            raise ValueError(f"config: sliding_window {self.sliding_window!r} is not supported by the jamba family "
                             f"(transformers' eager attention ignores it too; only null)")
        if self.num_experts_per_tok > self.num_experts:
            raise ValueError(f"config: num_experts_per_tok ({self.num_experts_per_tok}) exceeds num_experts "
                             f"({self.num_experts})")

    def attention_at(self, i: int) -> bool:
        return i % self.attn_layer_period == self.attn_layer_offset

    def experts_at(self, i: int) -> bool:
        return self.num_experts > 1 and i % self.expert_layer_period == self.expert_layer_offset


def _mixer(cfg: JambaConfig, t, p: str) -> Mamba:
    D, ds, K, R = cfg.hidden_size, cfg.mamba_d_state, cfg.mamba_d_conv, cfg.mamba_dt_rank
    di = cfg.mamba_expand * D
    m = p + "mamba."
    return Mamba(t.weight(m + "in_proj.weight", (2 * di, D)), t.array(m + "conv1d.weight", (di, 1, K)).reshape(di, K),
                 t.array(m + "conv1d.bias", (di,)) if cfg.mamba_conv_bias else None,
                 t.weight(m + "x_proj.weight", (R + 2 * ds, di)), t.float_weight(m + "dt_proj.weight", (di, R)),
                 t.array(m + "dt_proj.bias", (di,)), -np.exp(t.array(m + "A_log", (di, ds)).astype(np.float32)),
                 t.array(m + "D", (di,)), t.weight(m + "out_proj.weight", (D, di)), ds, K, R, True, cfg.rms_norm_eps,
                 inner_w=(t.array(m + "dt_layernorm.weight", (R,)), t.array(m + "b_layernorm.weight", (ds,)),
                          t.array(m + "c_layernorm.weight", (ds,))))


def build(cfg: JambaConfig, t) -> Decoder:
    D, eps = cfg.hidden_size, cfg.rms_norm_eps
    E, head = embed_and_head(t, cfg)
    layers, state_layers = [], []
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        if cfg.attention_at(i):
            mix = attention_weights(t, p, cfg)
        else:
            mix = {"mamba": _mixer(cfg, t, p), "q": None, "k": None, "v": None, "o": None}
            state_layers.append(i)
        if cfg.experts_at(i):
            mlp = {"moe": moe_weights(t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                                      inter=cfg.intermediate_size, norm_topk=False, router="feed_forward.router",
                                      experts="feed_forward.experts")}
        else:
            mlp = gated_mlp_weights(t, p, cfg, prefix="feed_forward.")
        L = Layer(**mix, **mlp)
        L.attn_norm = norm(t, p + "input_layernorm", D, "rms", eps)
        L.mlp_norm = norm(t, p + "pre_ff_layernorm", D, "rms", eps)
        layers.append(L)
    final = norm(t, "model.final_layernorm", D, "rms", eps)
    mixer = next(L.mamba for L in layers if L.mamba is not None)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=cfg.intermediate_size,
                num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
                head_dim=cfg.head_dim, context_length=cfg.max_position_embeddings,
                state_shapes=mixer.state_shapes, state_layers=tuple(state_layers))
    return Decoder(arch, E, layers, final, head)


Config = JambaConfig
