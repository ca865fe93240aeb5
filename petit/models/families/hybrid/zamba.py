"""Zamba v1 (Zyphra's Zamba-7B-v1): a multi-head Mamba-1 mixer in every layer, h + mamba(RMSNorm(h + t)), where in
the layers `layers_block_type` marks "hybrid" t = linear_i(block(h ‖ embeddings)) of the one shared transformer block
(tied: the checkpoint stores it once, under the first hybrid layer's `shared_transf`). The block is Zamba2's without
adapters (petit/models/blocks/shared_block.py): RMSNorm over 2 x hidden, attention (head_dim = 2 hidden / heads, scores
scaled by (head_dim / 2)^-0.5, no RoPE), o_proj, RMSNorm, gelu(gate_proj) * up_proj, down_proj. The mixer splits its
d_inner = expand x hidden channels into n_mamba_heads heads, each with its own x_proj and dt_proj (so its own dt, B
and C): kernels/ssm.c's Mamba-1 path with n_heads > 1 (x_proj and dt_proj loaded block-diagonal, one block a head:
zeros outside, exact at every weight type). in_proj interleaves x and the gate z row by row (x at even rows); the
rows are regrouped at load into [x | z]. The cache holds each hybrid layer's keys and values and every layer's conv
and scan states (slots n + i)."""
import numpy as np

from petit.models.blocks.common import embed_and_head, norm
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.shared_block import SharedBlock, SharedUse
from petit.models.blocks.ssm import Mamba
from petit.models.families.hybrid.zamba_config import ZambaConfig


def _mixer_prefix(cfg: ZambaConfig, i: int) -> str:
    return f"model.layers.{i}." + ("mamba_decoder." if i in cfg.hybrid_layers else "")


def hf_tensors(cfg: ZambaConfig, ckpt) -> dict:
    """in_proj's rows regrouped [x | z]; x_proj and dt_proj made block-diagonal, one block a head."""
    D, H, N, R = cfg.hidden_size, cfg.n_mamba_heads, cfg.mamba_d_state, cfg.mamba_dt_rank
    di = cfg.mamba_expand * D
    hd, nb = di // H, R + 2 * N
    out = {}

    def blocks(src, rows, cols, shape):
        def make():
            w, m = ckpt.f32(src).reshape(H, rows, cols), np.zeros(shape, np.float32)
            for h in range(H):
                m[h * rows:(h + 1) * rows, h * cols:(h + 1) * cols] = w[h]
            return m
        return make

    for i in range(cfg.num_hidden_layers):
        m = _mixer_prefix(cfg, i) + "mamba."
        src = m + "in_proj.weight"
        out[m + "in_proj.xz.weight"] = ((2 * di, D), lambda s=src: np.concatenate([ckpt.f32(s)[0::2],
                                                                                   ckpt.f32(s)[1::2]]), [src])
        out[m + "x_proj.blocks.weight"] = ((H * nb, di), blocks(m + "x_proj_weight", nb, hd, (H * nb, di)),
                                           [m + "x_proj_weight"])
        out[m + "dt_proj.blocks.weight"] = ((di, H * R), blocks(m + "dt_proj_weight", hd, R, (di, H * R)),
                                            [m + "dt_proj_weight"])
    return out


def _mixer(cfg: ZambaConfig, t, m: str) -> Mamba:
    D, H, N, R, K = cfg.hidden_size, cfg.n_mamba_heads, cfg.mamba_d_state, cfg.mamba_dt_rank, cfg.mamba_d_conv
    di = cfg.mamba_expand * D
    hd = di // H
    return Mamba(t.weight(m + "in_proj.xz.weight", (2 * di, D)),
                 t.array(m + "conv1d.weight", (di, 1, K)).reshape(di, K),
                 t.array(m + "conv1d.bias", (di,)) if cfg.mamba_conv_bias else None,
                 t.weight(m + "x_proj.blocks.weight", (H * (R + 2 * N), di)),
                 t.float_weight(m + "dt_proj.blocks.weight", (di, H * R)),
                 t.array(m + "dt_proj_bias", (H, hd)).reshape(di),
                 -np.exp(t.array(m + "A_log", (H, hd, N)).astype(np.float32)).reshape(di, N),
                 t.array(m + "D", (H, hd)).reshape(di), t.weight(m + "out_proj.weight", (D, di)), N, K, R,
                 n_heads=H)


def _block(cfg: ZambaConfig, t, first: int) -> SharedBlock:
    D, F, eps = cfg.hidden_size, cfg.intermediate_size, cfg.rms_norm_eps
    H, KV, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    p = f"model.layers.{first}.shared_transf."
    a, f = p + "self_attn.", p + "feed_forward."
    L = Layer(q=t.weight(a + "q_proj.weight", (H * hd, 2 * D)), k=t.weight(a + "k_proj.weight", (KV * hd, 2 * D)),
              v=t.weight(a + "v_proj.weight", (KV * hd, 2 * D)), o=t.weight(a + "o_proj.weight", (D, H * hd)),
              gate=t.weight(f + "gate_proj.weight", (F, D)), up=t.weight(f + "up_proj.weight", (F, D)),
              down=t.weight(f + "down_proj.weight", (D, F)), rope=None)
    L.attn_norm = norm(t, p + "input_layernorm", 2 * D, "rms", eps)
    L.mlp_norm = norm(t, p + "pre_ff_layernorm", D, "rms", eps)
    return SharedBlock(L)


def build(cfg: ZambaConfig, t) -> Decoder:
    D, eps, n = cfg.hidden_size, cfg.rms_norm_eps, cfg.num_hidden_layers
    E, head = embed_and_head(t, cfg)
    block = _block(cfg, t, cfg.hybrid_layers[0]) if cfg.hybrid_layers else None
    layers = []
    for i in range(n):
        p = _mixer_prefix(cfg, i)
        shared = SharedUse(block, t.weight(f"model.layers.{i}.linear.weight", (D, D))) \
            if i in cfg.hybrid_layers else None
        L = Layer(q=None, k=None, v=None, o=None, mamba=_mixer(cfg, t, p + "mamba."), state_slot=n + i,
                  shared=shared)
        L.attn_norm = norm(t, p + "input_layernorm", D, "rms", eps)
        layers.append(L)
    final = norm(t, "model.final_layernorm", D, "rms", eps)
    hybrid = set(cfg.hybrid_layers)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=cfg.intermediate_size,
                num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
                head_dim=cfg.head_dim, context_length=cfg.max_position_embeddings, act=cfg.act,
                attn_scale=(cfg.head_dim / 2) ** -0.5, state_shapes=layers[0].mamba.state_shapes,
                state_layers=tuple(range(n, 2 * n)), cache_slots=2 * n,
                empty_layers=tuple(i for i in range(n) if i not in hybrid), shared_rank=0)
    return Decoder(arch, E, layers, final, head)


Config = ZambaConfig
