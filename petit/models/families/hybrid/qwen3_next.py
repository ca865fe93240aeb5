"""Qwen3-Next: Gated DeltaNet linear attention (kernels/ssm.c version 4) in the `linear_attention` layers, gated full
attention in the others (`layer_types`, by default every `full_attention_interval`-th), and routed experts with a
shared expert behind a sigmoid gate (Qwen2-MoE's block; a SwiGLU MLP in `mlp_only_layers`).

- Norms: zero-centred RMSNorms ((1 + w)) everywhere but the linear attention's gated norm (plain w, per value head,
  before the silu(z) gate).
- Linear attention: `in_proj_qkvz` and `in_proj_ba` are laid out per key-head group ([q | k | v (r heads) | z (r
  heads)] and [b (r) | a (r)] for each of the key heads, r = value heads / key heads); they are regrouped when read into
  one `linear_attn.in_proj` of rows q | k | v | z | b | a, the order the conv and the kernel read. Value head h uses
  key head h // r.
- Full attention: `q_proj` gives per head [q_h | gate_h]; the gates are split off when read (`self_attn.q_gate`,
  the queries stay `self_attn.q_proj`), and the heads' outputs are multiplied by sigmoid(gate) before o_proj; q / k
  norms per head before a partial rotary (`partial_rotary_factor` of head_dim, rotate-half).
The recurrent state (conv and [dk, dv] per value head) lives in a HybridCache beside the attention layers' KV rows."""
import numpy as np

from petit.models.blocks.common import attention_weights, default_rope, gated_mlp_weights, norm
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.ssm import Mamba
from petit.models.families.hybrid.qwen3_next_config import Qwen3NextConfig


def _regroup(cfg, qkvz: np.ndarray, ba: np.ndarray) -> np.ndarray:
    """in_proj_qkvz [Hk (2 dk + 2 r dv), D] and in_proj_ba [Hk 2 r, D] (per key-head group) as rows q | k | v | z | b |
    a."""
    Hk, dk, dv = cfg.linear_num_key_heads, cfg.linear_key_head_dim, cfg.linear_value_head_dim
    r = cfg.linear_num_value_heads // Hk
    g = qkvz.reshape(Hk, 2 * dk + 2 * r * dv, -1)
    q, k = g[:, :dk], g[:, dk:2 * dk]
    v, z = g[:, 2 * dk:2 * dk + r * dv], g[:, 2 * dk + r * dv:]
    gba = ba.reshape(Hk, 2 * r, -1)
    D = qkvz.shape[1]
    return np.concatenate([x.reshape(-1, D) for x in (q, k, v, z, gba[:, :r], gba[:, r:])])


def linear_in_proj(cfg, ckpt, a: str):
    """The regrouped in_proj of the linear-attention layer under `a` (Qwen3-Next: two fused matrices)."""
    qkvz, ba = a + "in_proj_qkvz.weight", a + "in_proj_ba.weight"
    if qkvz not in ckpt:
        return None
    return lambda: _regroup(cfg, ckpt.f32(qkvz), ckpt.f32(ba)), (qkvz, ba)


def hf_tensors(cfg: Qwen3NextConfig, ckpt, in_proj=linear_in_proj) -> dict:
    D, H, hd = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim
    kd = cfg.linear_num_key_heads * cfg.linear_key_head_dim
    vd = cfg.linear_num_value_heads * cfg.linear_value_head_dim
    rows = 2 * kd + 2 * vd + 2 * cfg.linear_num_value_heads
    out = {}
    for i, kind in enumerate(cfg.types):
        p = f"model.layers.{i}."
        if kind == "linear_attention":
            made = in_proj(cfg, ckpt, p + "linear_attn.")
            if made is not None:
                out[p + "linear_attn.in_proj.weight"] = ((rows, D), made[0], made[1])
        else:
            src = p + "self_attn.q_proj.weight"
            if src in ckpt and tuple(ckpt.info(src)[1]) == (2 * H * hd, D):
                for name, j in (("q_proj", 0), ("q_gate", 1)):
                    out[p + f"self_attn.{name}.weight"] = ((H * hd, D), lambda s=src, j=j: ckpt.f32(s).reshape(
                        H, 2, hd, D)[:, j].reshape(H * hd, D), (src,))
    return out


def _deltanet(cfg, t, a: str) -> Mamba:
    D, K = cfg.hidden_size, cfg.linear_conv_kernel_dim
    Hk, Hv, dk, dv = (cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_key_head_dim,
                      cfg.linear_value_head_dim)
    kd, vd = Hk * dk, Hv * dv
    cw = 2 * kd + vd
    return Mamba(t.weight(a + "in_proj.weight", (2 * kd + 2 * vd + 2 * Hv, D)),
                 t.array(a + "conv1d.weight", (cw, 1, K)).reshape(cw, K), None, None, None,
                 t.array(a + "dt_bias", (Hv,)), -np.exp(t.array(a + "A_log", (Hv,)).astype(np.float32)),
                 np.zeros(Hv, np.float32), t.weight(a + "out_proj.weight", (D, vd)), dk, K, 1, eps=cfg.rms_norm_eps,
                 version=4, n_heads=Hv, n_groups=Hk, norm_w=t.array(a + "norm.weight", (dv,)))


def gated_attention(cfg, t, p: str, kind: str, rope) -> dict:
    """A full-attention layer's Layer fields: q / k / v / o, the output gates (`self_attn.q_gate`) and the RoPE."""
    return dict(attention_weights(t, p, cfg), rope=rope, attn_gate=t.weight(
        p + "self_attn.q_gate.weight", (cfg.num_attention_heads * cfg.head_dim, cfg.hidden_size)))


def build(cfg: Qwen3NextConfig, t, *, add: float = 1.0, attention=gated_attention,
          shared_gate: str | None = "mlp.shared_expert_gate") -> Decoder:
    """The decoder; `add` 1.0 for the zero-centred norms (0.0: plain x * w), `attention(cfg, t, p, kind, rope)` an
    attention layer's Layer fields, `shared_gate` the shared expert's sigmoid gate (None: ungated)."""
    D, hd, eps = cfg.hidden_size, cfg.head_dim, cfg.rms_norm_eps
    E = t.weight("model.embed_tokens.weight", (cfg.vocab_size, D))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    rope = default_rope(cfg, dim=cfg.rotary_dim)
    n1 = lambda name, width: norm(t, name, width, "rms", eps, add=add)      # noqa: E731
    layers, state_layers = [], []
    for i, kind in enumerate(cfg.types):
        p = f"model.layers.{i}."
        if kind == "linear_attention":
            mix = {"mamba": _deltanet(cfg, t, p + "linear_attn."), "q": None, "k": None, "v": None, "o": None}
            state_layers.append(i)
        else:
            mix = attention(cfg, t, p, kind, rope)
        if cfg.sparse[i]:
            mlp = {"moe": moe_weights(t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                                      inter=cfg.moe_intermediate_size, norm_topk=cfg.norm_topk_prob, router="mlp.gate",
                                      experts="mlp.experts", shared="mlp.shared_expert",
                                      shared_inter=cfg.shared_expert_intermediate_size, shared_gate=shared_gate)}
        else:
            mlp = gated_mlp_weights(t, p, cfg)
        L = Layer(**mix, **mlp)
        L.attn_norm, L.mlp_norm = n1(p + "input_layernorm", D), n1(p + "post_attention_layernorm", D)
        if kind != "linear_attention":
            L.q_norm, L.k_norm = n1(p + "self_attn.q_norm", hd), n1(p + "self_attn.k_norm", hd)
        layers.append(L)
    widest = max([cfg.intermediate_size if not s else cfg.moe_intermediate_size for s in cfg.sparse]
                 + [cfg.shared_expert_intermediate_size])
    mixer = next(L.mamba for L in layers if L.mamba is not None)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=widest,
                num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
                head_dim=hd, context_length=rope.context_length, state_shapes=mixer.state_shapes,
                state_layers=tuple(state_layers))
    return Decoder(arch, E, layers, n1("model.norm", D), head)


Config = Qwen3NextConfig
