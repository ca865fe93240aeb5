"""Falcon-H1 (TII): in every layer, attention and a Mamba-2 mixer side by side on the same normed input, both added
to the residual (h + mamba(a) + attn(a)), then a SwiGLU MLP. The mixer is Mamba-2's SSD (kernels/ssm.c, version 2)
with its gated RMSNorm taken per group of `mamba_d_ssm / mamba_n_groups` channels (FalconH1RMSNormGated), gate
first or, with `mamba_norm_before_gate`, after the norm, and no norm at all without `mamba_rms_norm`. Every layer
keeps both a KV cache and a recurrent state: the cache has a slot per layer for each (HybridCache, slots n..2n-1
the states).

Falcon-H1's µP multipliers are folded into the weights when read, the same products with fewer ops:
`ssm_multipliers` [z, x, B, C, dt] scale in_proj's output rows by section and `ssm_in_multiplier` its input,
`ssm_out_multiplier` out_proj, `attention_in_multiplier` q / k / v, `key_multiplier` k, `attention_out_multiplier`
o_proj, `mlp_multipliers` [gate, down] gate_proj and down_proj; they are stored so (`....mup.weight`) in a
converted .petit, whose config keeps the values. `embedding_multiplier` and `lm_head_multiplier` scale the
embeddings and the logits."""
import numpy as np

from petit.models.blocks.common import default_rope, norm
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.ssm import Mamba
from petit.models.families.hybrid.falcon_h1_config import FalconH1Config

MUP = ".mup.weight"       # the name of a weight with its multipliers folded in


def _sections(cfg: FalconH1Config) -> list:
    """in_proj's output rows by section: z, x, B, C, dt."""
    di, GN = cfg.d_ssm, cfg.mamba_n_groups * cfg.mamba_d_state
    return [di, di, GN, GN, cfg.mamba_n_heads]


def hf_tensors(cfg: FalconH1Config, ckpt) -> dict:
    """The weights with the µP multipliers folded in, under `<name>.mup.weight`."""
    mup = np.concatenate([np.full(n, m, np.float32) for n, m in zip(_sections(cfg), cfg.ssm_multipliers)])
    a_in = cfg.attention_in_multiplier
    scale = {"mamba.in_proj": lambda w: w * mup[:, None] * np.float32(cfg.ssm_in_multiplier),
             "mamba.out_proj": lambda w: w * np.float32(cfg.ssm_out_multiplier),
             "self_attn.q_proj": lambda w: w * np.float32(a_in),
             "self_attn.k_proj": lambda w: w * np.float32(a_in * cfg.key_multiplier),
             "self_attn.v_proj": lambda w: w * np.float32(a_in),
             "self_attn.o_proj": lambda w: w * np.float32(cfg.attention_out_multiplier),
             "feed_forward.gate_proj": lambda w: w * np.float32(cfg.mlp_multipliers[0]),
             "feed_forward.up_proj": lambda w: w,
             "feed_forward.down_proj": lambda w: w * np.float32(cfg.mlp_multipliers[1])}
    out = {}
    for i in range(cfg.num_hidden_layers):
        for part, f in scale.items():
            src = f"model.layers.{i}.{part}.weight"
            if src in ckpt:
                out[f"model.layers.{i}.{part}{MUP}"] = (ckpt.info(src)[1], lambda s=src, f=f: f(ckpt.f32(s)), (src,))
    return out


def build(cfg: FalconH1Config, t):
    D, F, hd, eps = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim, cfg.rms_norm_eps
    di, N, G, H, K = cfg.d_ssm, cfg.mamba_d_state, cfg.mamba_n_groups, cfg.mamba_n_heads, cfg.mamba_d_conv
    q, kv, n = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd, cfg.num_hidden_layers
    conv = di + 2 * G * N
    E = t.weight("model.embed_tokens.weight", (cfg.vocab_size, D))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    rope = default_rope(cfg)
    mode = (1 if cfg.mamba_norm_before_gate else 0) if cfg.mamba_rms_norm else 2
    layers = []
    for i in range(n):
        p = f"model.layers.{i}."
        m, a, f = p + "mamba.", p + "self_attn.", p + "feed_forward."
        mixer = Mamba(t.weight(m + "in_proj" + MUP, (di + conv + H, D)),
                      t.array(m + "conv1d.weight", (conv, 1, K)).reshape(conv, K),
                      t.array(m + "conv1d.bias", (conv,)) if cfg.mamba_conv_bias else None, None, None,
                      t.array(m + "dt_bias", (H,)), -np.exp(t.array(m + "A_log", (H,)).astype(np.float32)),
                      t.array(m + "D", (H,)), t.weight(m + "out_proj" + MUP, (D, di)), N, K, 1, eps=eps, version=2,
                      n_heads=H, n_groups=G, norm_w=t.array(m + "norm.weight", (di,)) if cfg.mamba_rms_norm else None,
                      norm_groups=G, norm_mode=mode)
        layers.append(Layer(q=t.weight(a + "q_proj" + MUP, (q, D)), k=t.weight(a + "k_proj" + MUP, (kv, D)),
                            v=t.weight(a + "v_proj" + MUP, (kv, D)), o=t.weight(a + "o_proj" + MUP, (D, q)),
                            gate=t.weight(f + "gate_proj" + MUP, (F, D)), up=t.weight(f + "up_proj" + MUP, (F, D)),
                            down=t.weight(f + "down_proj" + MUP, (D, F)), mamba=mixer, state_slot=n + i, rope=rope,
                            attn_norm=norm(t, p + "input_layernorm", D, "rms", eps),
                            mlp_norm=norm(t, p + "pre_ff_layernorm", D, "rms", eps)))
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F,
                num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
                head_dim=hd, context_length=rope.context_length, embed_scale=cfg.embedding_multiplier,
                logit_scale=cfg.lm_head_multiplier, state_shapes=layers[0].mamba.state_shapes,
                state_layers=tuple(range(n, 2 * n)), cache_slots=2 * n)
    return Decoder(arch, E, layers, norm(t, "model.final_layernorm", D, "rms", eps), head)


Config = FalconH1Config
