"""MiniMax-01 (MiniMax-Text-01): lightning attention (linear attention with a fixed decay per head) in the
`linear_attention` layers and softmax attention in the others (by default the even layers), routed experts in every
layer (Mixtral's block), and DeepNorm's residuals: each layer norms the stream itself and adds a scaled sublayer to a
scaled copy, h = RMSNorm(h); h = alpha h + beta attn(h); h = RMSNorm(h); h = alpha' h + beta' moe(h).
- The stream norms: layer i's input_layernorm is the previous layer's norm of its stream after the MoE add (the
  decoder's resid_mlp_norm; the first layer's is an embedding norm), its post_attention_layernorm the norm after
  the attention add (resid_attn_norm). alpha is Layer.resid_alpha; beta is folded into o_proj / out_proj / each
  expert's w2 when read (a product by a constant).
- Lightning attention, per head h of the layer: q | k | v = silu(qkv_proj x) (per head [q_h | k_h | v_h]);
  S = exp(-s_h) S + k_h^T v_h; o = q_h S, with s_h = 2^(-8 (h + 1) / H) (1 - layer / (layers - 1 + 1e-5) + 1e-5) (the
  file's `slope_rate`, checked); o RMS-normed over all heads (eps 1e-6), times sigmoid(output_gate x); out_proj. That
  is Mamba-2's SSD recurrence with dt = 1, A = -s_h, B = k_h, C = q_h, x = v_h and D = 0, which Petit runs with
  kernels/ssm.c version 2 (kernels/ssd.c's scan, prompt chunks or token by token; transformers' block_size only
  splits the same sum): in_proj's rows are read as [output_gate | v | k | q | dt], the time step clamped to [1, 1],
  a conv of one tap, and the gated norm's mode 3 (norm, then a sigmoid gate).
The cache holds the softmax layers' keys and values and the lightning layers' [head_dim, head_dim] states."""
import numpy as np

from petit.models.blocks.common import attention_weights, default_rope, embed_and_head, norm
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.ssm import Mamba
from petit.models.families.hybrid.minimax_config import MiniMaxConfig

LIGHTNING_NORM_EPS = 1e-6          # MiniMaxLightningAttention's norm: MiniMaxRMSNorm's default eps


def slopes(cfg: MiniMaxConfig, i: int) -> np.ndarray:
    """Layer i's decay rate per head (MiniMaxLightningAttention.get_slope_rate), float32 as transformers' buffer."""
    import math
    H, n = cfg.num_attention_heads, cfg.num_hidden_layers
    base = 1 / (2 ** (8 / H))
    factor = 1 - i / (n - 1 + 1e-5) + 1e-5
    return np.array([base ** (h + 1) * factor for h in range(H)], np.float32) if math.isfinite(factor) else None


def _scaled(ckpt, src: str, k: float):
    return lambda: ckpt.f32(src) * np.float32(k)


def hf_tensors(cfg: MiniMaxConfig, ckpt) -> dict:
    """The lightning layers' in_proj (rows output_gate | v | k | q | zeros for dt, from qkv_proj's per-head [q_h | k_h |
    v_h]); o_proj / out_proj and the experts' w2 times their beta when it is not 1 (under `.scaled` names)."""
    D, H = cfg.hidden_size, cfg.num_attention_heads
    hd = cfg.head_dim
    out = {}
    for i, kind in enumerate(cfg.layer_types):
        a = f"model.layers.{i}.self_attn."
        if kind == "linear_attention" and a + "qkv_proj.weight" in ckpt:
            qkv, gate = a + "qkv_proj.weight", a + "output_gate.weight"

            def joined(qkv=qkv, gate=gate):
                w = ckpt.f32(qkv).reshape(H, 3, hd, D)
                return np.concatenate([ckpt.f32(gate), w[:, 2].reshape(-1, D), w[:, 1].reshape(-1, D),
                                       w[:, 0].reshape(-1, D), np.zeros((H, D), np.float32)])
            out[a + "in_proj.weight"] = ((4 * H * hd + H, D), joined, (qkv, gate))
        beta = cfg.linear_attn_beta_factor if kind == "linear_attention" else cfg.full_attn_beta_factor
        o = a + ("out_proj" if kind == "linear_attention" else "o_proj") + ".weight"
        if beta != 1.0 and o in ckpt:
            out[o.replace(".weight", ".scaled.weight")] = ((D, H * hd), _scaled(ckpt, o, beta), (o,))
        if cfg.mlp_beta_factor != 1.0:
            for e in range(cfg.num_local_experts):
                w2 = f"model.layers.{i}.block_sparse_moe.experts.{e}.w2.weight"
                if w2 in ckpt:
                    out[w2.replace(".weight", ".scaled.weight")] = ((D, cfg.intermediate_size),
                                                                    _scaled(ckpt, w2, cfg.mlp_beta_factor), (w2,))
    return out


def _lightning(cfg: MiniMaxConfig, t, a: str, i: int, beta: float) -> Mamba:
    D, H, hd = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim
    di = H * hd
    conv = 3 * di
    want = slopes(cfg, i)
    name, bs = a + "slope_rate", cfg.block_size
    if t.has(name):                                  # transformers saves its buffers: the rates, and tables of them
        got = t.array(name, (H, 1, 1)).reshape(H)
        if not np.allclose(got, want, rtol=1e-6, atol=0):
            raise ValueError(f"{name} is not MiniMax's decay rates for layer {i} ({got.tolist()} != {want.tolist()})")
        for extra, shape in (("query_decay", (H, bs, 1)), ("key_decay", (H, bs, 1)),
                             ("diagonal_decay", (1, H, bs, bs))):
            if t.has(a + extra):                     # derived from the rates and block_size: read, not used
                t.array(a + extra, shape)
    conv_w = np.zeros((conv, 2), np.float32)
    conv_w[:, 1] = 1.0                               # one tap: the current token
    out = a + ("out_proj.scaled.weight" if beta != 1.0 else "out_proj.weight")
    return Mamba(t.weight(a + "in_proj.weight", (di + conv + H, D)), conv_w, None, None, None,
                 np.zeros(H, np.float32), -want, np.zeros(H, np.float32), t.weight(out, (D, di)), hd, 2, 1,
                 eps=LIGHTNING_NORM_EPS, version=2, n_heads=H, n_groups=H,
                 norm_w=t.array(a + "norm.weight", (di,)), dt_min=1.0, dt_max=1.0, norm_mode=3)


def build(cfg: MiniMaxConfig, t) -> Decoder:
    D, eps, n = cfg.hidden_size, cfg.rms_norm_eps, cfg.num_hidden_layers
    rope = default_rope(cfg)
    E, head = embed_and_head(t, cfg)
    w2 = "w2.scaled" if cfg.mlp_beta_factor != 1.0 else "w2"
    layers, state_layers = [], []
    for i, kind in enumerate(cfg.layer_types):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        moe = moe_weights(t, p, cfg, n_experts=cfg.num_local_experts, top_k=cfg.num_experts_per_tok,
                          inter=cfg.intermediate_size, norm_topk=True, router="block_sparse_moe.gate",
                          experts="block_sparse_moe.experts", names=("w1", "w3", w2), act=cfg.act)
        if kind == "linear_attention":
            L = Layer(mamba=_lightning(cfg, t, a, i, cfg.linear_attn_beta_factor), q=None, k=None, v=None, o=None,
                      moe=moe)
            alpha = cfg.linear_attn_alpha_factor
            state_layers.append(i)
        else:
            attn = attention_weights(t, p, cfg)
            if cfg.full_attn_beta_factor != 1.0:
                attn["o"] = t.weight(a + "o_proj.scaled.weight", (D, cfg.num_attention_heads * cfg.head_dim))
            L = Layer(**attn, moe=moe, rope=rope, window=cfg.sliding_window or 0)
            alpha = cfg.full_attn_alpha_factor
        L.resid_alpha = (float(alpha), float(cfg.mlp_alpha_factor))
        L.resid_attn_norm = norm(t, p + "post_attention_layernorm", D, "rms", eps)
        if i + 1 < n:                                # the next layer's input_layernorm, on the stream itself
            L.resid_mlp_norm = norm(t, f"model.layers.{i + 1}.input_layernorm", D, "rms", eps)
        layers.append(L)
    final = norm(t, "model.norm", D, "rms", eps)
    mixer = next((L.mamba for L in layers if L.mamba is not None), None)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=cfg.intermediate_size,
                num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
                head_dim=cfg.head_dim, context_length=rope.context_length, act=cfg.act,
                state_shapes=mixer.state_shapes if mixer else None,
                state_layers=tuple(state_layers) if mixer else None)
    return Decoder(arch, E, layers, final, head,
                   embed_norm=norm(t, "model.layers.0.input_layernorm", D, "rms", eps))


Config = MiniMaxConfig
