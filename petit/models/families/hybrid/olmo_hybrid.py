"""OLMo Hybrid (AI2's OLMo 3 hybrid): Gated DeltaNet layers (`linear_attention`) and OLMo 2's attention layers
(`full_attention`, by default every fourth), each with a SwiGLU MLP.
- Linear layers are pre-norm (input_layernorm, then post_attention_layernorm before the MLP). Their Gated DeltaNet is
  Qwen3-Next's recurrence (kernels/ssm.c version 4, kernels/deltanet.c) from separate q / k / v / g / b / a
  projections (joined when read into one `linear_attn.in_proj` of rows q | k | v | g | b | a, the order the conv and
  the kernel read), a conv without bias over q | k | v, beta = 2 sigmoid(b) with `linear_allow_neg_eigval` (the
  default; pt_mamba.beta_scale), the output RMS-normed per head with o_norm (eps 1e-5, hard-coded by transformers) and
  gated by silu(g_proj x). transformers runs as many key heads as value heads (it repeats neither), so Petit asks for
  equal counts.
- Attention layers are OLMo 2's: no pre-norm, q / k RMS-normed over the whole projection, the outputs of attention
  and of the MLP each normed (post_attention_layernorm, post_feedforward_layernorm) before the residual add. RoPE
  only when `rope_parameters` has a rope_theta: the released checkpoints write it null (no position encoding at all).
The recurrent state (conv and [dk, dv] per head) lives in a HybridCache beside the attention layers' KV rows."""
import numpy as np

from petit.models.blocks.common import attention_weights, default_rope, gated_mlp_weights, norm
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.ssm import Mamba
from petit.models.families.hybrid.olmo_hybrid_config import OlmoHybridConfig

O_NORM_EPS = 1e-5            # OlmoHybridGatedDeltaNet's o_norm: eps hard-coded


def _dims(cfg):
    H, dk, dv = cfg.linear_num_value_heads, cfg.linear_key_head_dim, cfg.linear_value_head_dim
    return H, dk, dv, H * dk, H * dv


# the Hub's names (transformers' conversion mapping renames them when it loads): each layer's first two norms
RENAMED = {"input_layernorm": "attention_layer_norm", "post_attention_layernorm": "feedforward_layer_norm"}


def hf_tensors(cfg: OlmoHybridConfig, ckpt) -> dict:
    """Each linear layer's q / k / v / g / b / a projections joined into `linear_attn.in_proj` (rows in that order),
    its q_conv1d | k_conv1d | v_conv1d (the Hub's layout) joined into `linear_attn.conv1d`, and the norms under
    transformers' in-memory names (the Hub's attention_layer_norm, feedforward_layer_norm)."""
    H, dk, dv, kd, vd = _dims(cfg)
    out = {}
    for i, kind in enumerate(cfg.layer_types):
        p = f"model.layers.{i}."
        for name, hub in RENAMED.items():
            if p + name + ".weight" not in ckpt and p + hub + ".weight" in ckpt:
                src = p + hub + ".weight"
                out[p + name + ".weight"] = ((cfg.hidden_size,), lambda s=src: ckpt.f32(s), (src,))
        a = p + "linear_attn."
        convs = tuple(a + f"{n}_conv1d.weight" for n in ("q", "k", "v"))
        if kind == "linear_attention" and a + "conv1d.weight" not in ckpt and all(c in ckpt for c in convs):
            K = cfg.linear_conv_kernel_dim
            out[a + "conv1d.weight"] = ((2 * kd + vd, 1, K), lambda s=convs: np.concatenate([ckpt.f32(x) for x in s]),
                                        convs)
        if kind != "linear_attention" or a + "q_proj.weight" not in ckpt:
            continue
        srcs = tuple(a + f"{n}_proj.weight" for n in ("q", "k", "v", "g", "b", "a"))
        out[a + "in_proj.weight"] = ((2 * kd + 2 * vd + 2 * H, cfg.hidden_size),
                                     lambda s=srcs: np.concatenate([ckpt.f32(x) for x in s]), srcs)
    return out


def _deltanet(cfg: OlmoHybridConfig, t, a: str) -> Mamba:
    D, K = cfg.hidden_size, cfg.linear_conv_kernel_dim
    H, dk, dv, kd, vd = _dims(cfg)
    cw = 2 * kd + vd
    return Mamba(t.weight(a + "in_proj.weight", (2 * kd + 2 * vd + 2 * H, D)),
                 t.array(a + "conv1d.weight", (cw, 1, K)).reshape(cw, K), None, None, None,
                 t.array(a + "dt_bias", (H,)), -np.exp(t.array(a + "A_log", (H,)).astype(np.float32)),
                 np.zeros(H, np.float32), t.weight(a + "o_proj.weight", (D, vd)), dk, K, 1, eps=O_NORM_EPS,
                 version=4, n_heads=H, n_groups=H, norm_w=t.array(a + "o_norm.weight", (dv,)),
                 beta_scale=2.0 if cfg.linear_allow_neg_eigval else 0.0)


def build(cfg: OlmoHybridConfig, t) -> Decoder:
    D, hd, eps = cfg.hidden_size, cfg.head_dim, cfg.rms_norm_eps
    E = t.weight("model.embed_tokens.weight", (cfg.vocab_size, D))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    rope = default_rope(cfg) if cfg.use_rope else None
    layers, state_layers = [], []
    for i, kind in enumerate(cfg.layer_types):
        p = f"model.layers.{i}."
        mlp = gated_mlp_weights(t, p, cfg)
        if kind == "linear_attention":
            L = Layer(mamba=_deltanet(cfg, t, p + "linear_attn."), q=None, k=None, v=None, o=None, **mlp)
            L.attn_norm = norm(t, p + "input_layernorm", D, "rms", eps)
            L.mlp_norm = norm(t, p + "post_attention_layernorm", D, "rms", eps)
            state_layers.append(i)
        else:
            L = Layer(**attention_weights(t, p, cfg), **mlp, rope=rope)
            L.q_norm = norm(t, p + "self_attn.q_norm", cfg.num_attention_heads * hd, "rms", eps)
            L.k_norm = norm(t, p + "self_attn.k_norm", cfg.num_key_value_heads * hd, "rms", eps)
            L.post_attn_norm = norm(t, p + "post_attention_layernorm", D, "rms", eps)
            L.post_mlp_norm = norm(t, p + "post_feedforward_layernorm", D, "rms", eps)
        layers.append(L)
    final = norm(t, "model.norm", D, "rms", eps)
    mixer = next(L.mamba for L in layers if L.mamba is not None)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=cfg.intermediate_size,
                num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
                head_dim=hd, context_length=cfg.max_position_embeddings, act=cfg.act, qk_norm_per_head=False,
                state_shapes=mixer.state_shapes, state_layers=tuple(state_layers))
    return Decoder(arch, E, layers, final, head)


Config = OlmoHybridConfig
