"""RecurrentGemma (Griffin): residual blocks whose temporal mixer is either Griffin's recurrent block or local
sliding-window attention (`block_types` cycled over the layers, by default recurrent, recurrent, attention), each
followed by a gelu_tanh-gated MLP with biases of width intermediate_size / 2.

- Recurrent block (kernels/rglru.c, Mamba version 5): x = linear_x(h), y = gelu_tanh(linear_y(h)) (both with biases);
  x through a causal depthwise conv (conv1d_width taps, a bias, no activation), then the RG-LRU over lru_width
  channels in num_attention_heads blocks: input and recurrence gates i, r = sigmoid of block-diagonal products (the
  [H, bw, bw] tensors, in x out) plus biases; a = exp(-8 r softplus(recurrent_param)); h_t = a h_{t-1} +
  sqrt(1 - a^2) (i x), the sqrt dropped at position 0 (transformers' reset, which the state's flag carries); then
  linear_out(h y) with a bias.
- Attention block: grouped-query attention over a window of attention_window_size positions, RoPE on the first
  partial_rotary_factor of each head (rotate-half), q / k / v biases when attention_bias, o_proj always with a bias.
- Gemma's (1 + w) RMS norms (temporal_pre_norm, channel_pre_norm, final_norm); the embedding times sqrt(hidden_size)
  rounded to bfloat16 (transformers' `normalizer` buffer); logits soft-capped with logits_soft_cap.

The cache (petit/cache.py HybridCache) holds the attention layers' keys and values and each recurrent layer's conv
inputs and RG-LRU state; the chat session snapshots them as for Mamba."""
import math

import numpy as np

from petit.models.blocks.common import attention_weights, default_rope, embed_and_head, norm
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.ssm import Mamba
from petit.models.families.hybrid.recurrent_gemma_config import RecurrentGemmaConfig


def bf16(v: float) -> float:
    """v rounded to bfloat16 (to nearest, ties to even) through float32, as torch.tensor(v, dtype=bfloat16)."""
    b = int(np.array(v, np.float32).view(np.uint32))
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return float(np.array(b, np.uint32).view(np.float32))


def hf_tensors(cfg: RecurrentGemmaConfig, ckpt) -> dict:
    """Each recurrent block's linear_x and linear_y stacked into one in_proj [2 W, D] (one product in the mixer)."""
    out = {}
    for i, kind in enumerate(cfg.layer_kinds()):
        r = f"model.layers.{i}.temporal_block."
        x, y = r + "linear_x.weight", r + "linear_y.weight"
        if kind == "recurrent" and x in ckpt and y in ckpt:
            out[r + "in_proj.weight"] = ((2 * cfg.lru_width, cfg.hidden_size),
                                         lambda x=x, y=y: np.concatenate([ckpt.f32(x), ckpt.f32(y)]), (x, y))
    return out


def build(cfg: RecurrentGemmaConfig, t) -> Decoder:
    D, H, KV, hd, eps = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, \
        cfg.rms_norm_eps
    W, K, F = cfg.lru_width, cfg.conv1d_width, cfg.intermediate_size // 2
    bw = W // H
    rope = default_rope(cfg, dim=cfg.rotary_dim)
    E, head = embed_and_head(t, cfg)
    layers, recurrent = [], []
    for i, kind in enumerate(cfg.layer_kinds()):
        p = f"model.layers.{i}."
        m = p + "mlp_block."
        mlp = {"gate": t.weight(m + "gate_proj.weight", (F, D)), "up": t.weight(m + "up_proj.weight", (F, D)),
               "down": t.weight(m + "down_proj.weight", (D, F)), "gate_b": t.vec(m + "gate_proj.bias", (F,)),
               "up_b": t.vec(m + "up_proj.bias", (F,)), "down_b": t.vec(m + "down_proj.bias", (D,))}
        if kind == "recurrent":
            r = p + "temporal_block."
            g = r + "rg_lru."
            in_proj = t.weight(r + "in_proj.weight", (2 * W, D))          # linear_x over linear_y (hf_tensors)
            in_b = np.concatenate([t.array(r + "linear_x.bias", (W,)), t.array(r + "linear_y.bias", (W,))])
            mixer = Mamba(in_proj, t.array(r + "conv_1d.weight", (W, 1, K)).reshape(W, K),
                          t.array(r + "conv_1d.bias", (W,)), None, None, None, np.zeros(1, np.float32),
                          np.zeros(1, np.float32), t.weight(r + "linear_out.weight", (D, W)), 1, K, 1, version=5,
                          n_heads=H, in_b=in_b, out_b=t.array(r + "linear_out.bias", (D,)),
                          rglru=(t.array(g + "input_gate_weight", (H, bw, bw)),
                                 t.array(g + "input_gate_bias", (H, bw)).reshape(W),
                                 t.array(g + "recurrent_gate_weight", (H, bw, bw)),
                                 t.array(g + "recurrent_gate_bias", (H, bw)).reshape(W),
                                 t.array(g + "recurrent_param", (W,))))
            L = Layer(q=None, k=None, v=None, o=None, mamba=mixer, **mlp)
            recurrent.append(i)
        else:
            attn = attention_weights(t, p, cfg, qkv_bias=cfg.attention_bias, o_bias=True, prefix="temporal_block.")
            L = Layer(**attn, **mlp, rope=rope, window=cfg.attention_window_size)
        L.attn_norm = norm(t, p + "temporal_pre_norm", D, "rms", eps, add=1.0)
        L.mlp_norm = norm(t, p + "channel_pre_norm", D, "rms", eps, add=1.0)
        layers.append(L)
    final = norm(t, "model.final_norm", D, "rms", eps, add=1.0)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=KV, head_dim=hd, context_length=rope.context_length, act=cfg.act,
                embed_scale=bf16(math.sqrt(D)), logit_softcap=cfg.logits_soft_cap or 0.0,
                state_shapes=((W, K - 1), (W + 1,)), state_layers=tuple(recurrent))
    return Decoder(arch, E, layers, final, head)


Config = RecurrentGemmaConfig
