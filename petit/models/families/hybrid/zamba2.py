"""Zamba2 (Zyphra's Zamba2-1.2B / 2.7B / 7B): a Mamba-2 mixer in every layer, h + mamba(RMSNorm(h + t)), where in
the layers `layers_block_type` marks "hybrid" t is a shared transformer block's output mapped by the layer's own
`linear` (elsewhere t = 0). `num_mem_blocks` blocks are shared in turn by the hybrid layers (hybrid layer j uses block
j % num_mem_blocks); the checkpoint stores each block once, under the first layer that uses it. A block reads the
hidden state concatenated with the original embeddings (2 x hidden): RMSNorm, attention (head_dim = 2 hidden /
heads, scores scaled by (head_dim / 2)^-0.5, RoPE when `use_mem_rope`), o_proj, RMSNorm, a gated MLP (gate_up_proj
fused, hidden_act), down_proj; no residual inside the block. With `use_shared_attention_adapter` each use adds its
own rank-`adapter_rank` adapters B A x to q, k and v; the MLP's adapter on gate_up is always there. The weights of a
block are held once (petit/models/blocks/shared_block.py) and the plan points every use at them. The Mamba-2 mixer is
granitemoehybrid's (kernels/ssm.c version 2), its gated norm per group of channels (eps 1e-5, hard-coded by
transformers), its time step floored at `time_step_min` (transformers floors a prompt's time steps but not its
one-token decode step's; Petit floors both). The cache holds each hybrid layer's keys and values and every layer's
conv and scan states (slots n + i)."""
import numpy as np

from petit.models.blocks.common import default_rope, embed_and_head, norm
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.shared_block import SharedBlock, SharedUse
from petit.models.blocks.ssm import Mamba
from petit.models.families.hybrid.zamba2_config import Zamba2Config

MAMBA_NORM_EPS = 1e-5        # Zamba2MambaMixer's gated norm: eps hard-coded


def _mixer(cfg: Zamba2Config, t, m: str) -> Mamba:
    D, di, N, G, H, K = (cfg.hidden_size, cfg.mamba_expand * cfg.hidden_size, cfg.mamba_d_state,
                         cfg.mamba_ngroups, cfg.n_mamba_heads, cfg.mamba_d_conv)
    conv = di + 2 * G * N
    return Mamba(t.weight(m + "in_proj.weight", (di + conv + H, D)),
                 t.array(m + "conv1d.weight", (conv, 1, K)).reshape(conv, K),
                 t.array(m + "conv1d.bias", (conv,)) if cfg.use_conv_bias else None, None, None,
                 t.array(m + "dt_bias", (H,)), -np.exp(t.array(m + "A_log", (H,)).astype(np.float32)),
                 t.array(m + "D", (H,)), t.weight(m + "out_proj.weight", (D, di)), N, K, 1, eps=MAMBA_NORM_EPS,
                 version=2, n_heads=H, n_groups=G, norm_w=t.array(m + "norm.weight", (di,)),
                 dt_min=float(cfg.time_step_min), norm_groups=G)


def hf_tensors(cfg: Zamba2Config, ckpt) -> dict:
    """Each shared block's gate_up_proj and each use's gate_up adapter B split into their gate rows and up rows."""
    out, F = {}, cfg.intermediate_size
    for j, i in enumerate(cfg.hybrid_layers):
        first = cfg.hybrid_layers[j % cfg.num_mem_blocks]
        f = f"model.layers.{first}.shared_transformer.feed_forward."
        names = [(f + "gate_up_proj.weight", (2 * F, cfg.hidden_size), f + "gate_up_proj")]
        names.append((f"{f}gate_up_proj_adapter_list.{j}.1.weight", (2 * F, cfg.adapter_rank),
                      f"{f}gate_up_proj_adapter_list.{j}.1"))
        for src, (rows, cols), base in names:
            out[base + ".gate.weight"] = ((F, cols), lambda s=src: ckpt.f32(s)[:F], [src])
            out[base + ".up.weight"] = ((F, cols), lambda s=src: ckpt.f32(s)[F:], [src])
    return out


def _block(cfg: Zamba2Config, t, first: int, rope) -> SharedBlock:
    D, F, eps = cfg.hidden_size, cfg.intermediate_size, cfg.rms_norm_eps
    H, KV, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    p = f"model.layers.{first}.shared_transformer."
    a, f = p + "self_attn.", p + "feed_forward."
    L = Layer(q=t.weight(a + "q_proj.weight", (H * hd, 2 * D)), k=t.weight(a + "k_proj.weight", (KV * hd, 2 * D)),
              v=t.weight(a + "v_proj.weight", (KV * hd, 2 * D)), o=t.weight(a + "o_proj.weight", (D, H * hd)),
              gate=t.weight(f + "gate_up_proj.gate.weight", (F, D)), up=t.weight(f + "gate_up_proj.up.weight", (F, D)),
              down=t.weight(f + "down_proj.weight", (D, F)), rope=rope)
    L.attn_norm = norm(t, p + "input_layernorm", 2 * D, "rms", eps)
    L.mlp_norm = norm(t, p + "pre_ff_layernorm", D, "rms", eps)
    return SharedBlock(L)


def _use(cfg: Zamba2Config, t, block: SharedBlock, first: int, j: int, i: int) -> SharedUse:
    D, F, r = cfg.hidden_size, cfg.intermediate_size, cfg.adapter_rank
    p = f"model.layers.{first}.shared_transformer."
    u = SharedUse(block, t.weight(f"model.layers.{i}.linear.weight", (D, D)))
    if cfg.use_shared_attention_adapter:
        width = cfg.num_attention_heads * cfg.head_dim
        for n in ("q", "k", "v"):
            ad = f"{p}self_attn.linear_{n}_adapter_list.{j}."
            setattr(u, n + "_a", t.weight(ad + "0.weight", (r, 2 * D)))
            setattr(u, n + "_b", t.weight(ad + "1.weight", (width, r)))
    ad = f"{p}feed_forward.gate_up_proj_adapter_list.{j}."
    u.mlp_a = t.weight(ad + "0.weight", (r, D))
    u.gate_b = t.weight(ad + "1.gate.weight", (F, r))
    u.up_b = t.weight(ad + "1.up.weight", (F, r))
    return u


def build(cfg: Zamba2Config, t) -> Decoder:
    D, eps, n = cfg.hidden_size, cfg.rms_norm_eps, cfg.num_hidden_layers
    rope = default_rope(cfg) if cfg.use_mem_rope else None
    E, head = embed_and_head(t, cfg)
    blocks = {}
    layers = []
    for i, kind in enumerate(cfg.layers_block_type):
        p = f"model.layers.{i}."
        shared = None
        if kind == "hybrid":
            j = cfg.hybrid_layers.index(i)
            first = cfg.hybrid_layers[j % cfg.num_mem_blocks]
            if first not in blocks:                     # each block read once, whatever the number of its uses
                blocks[first] = _block(cfg, t, first, rope)
            shared = _use(cfg, t, blocks[first], first, j, i)
            p += "mamba_decoder."
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
                empty_layers=tuple(i for i in range(n) if i not in hybrid),
                shared_rank=cfg.adapter_rank)
    return Decoder(arch, E, layers, final, head)


Config = Zamba2Config
