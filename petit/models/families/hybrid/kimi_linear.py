"""Kimi Linear (Moonshot's Kimi-Linear-48B-A3B): Kimi Delta Attention (`linear_attention` layers) and DeepSeek's
latent attention without RoPE (`full_attention`), a SwiGLU MLP in the first `first_k_dense_replace` layers
(`mlp_layer_types` "dense") and DeepSeek-V3's routed experts after (sigmoid scores, a selection bias, top-k
renormalised times `routed_scaling_factor`, shared experts).
- Kimi Delta Attention is Qwen3-Next's Gated DeltaNet with the decay per key channel: per head, S[i] *= exp(-exp(A_log)
  softplus(f + dt_bias)[i]) with f = f_b(f_a x) (dt_bias per channel), then the delta rule with beta = sigmoid(b_proj
  x); q, k l2-normed (q x dk^-1/2) after a causal conv (no bias) and silu over q | k | v; the output RMS-normed per
  head (rms_norm_eps) times sigmoid(g_b(g_a x)); o_proj. Petit runs it with kernels/ssm.c version 4 and pt_mamba.kda
  (kernels/deltanet.c kda_head, plain scalar C, the recurrent form at every length). When read, the q / k / v
  projections, g_b g_a (the gate, a product of the two low-rank matrices), b_proj and f_b f_a are joined into one
  `self_attn.in_proj` (rows q | k | v | g | b | f), and q_conv1d | k_conv1d | v_conv1d into `self_attn.conv1d`.
- Latent attention: DeepSeek-V2's with q_proj (no q_lora_rank) or q_a / q_b, the rope part of each key shared and
  not rotated (no position encoding at all), scores scaled by (nope + rope)^-0.5.
- The Hub's names (transformers renames them when it loads): `block_sparse_moe.*` for the experts (Mixtral's w1 / w3 /
  w2, the router, the shared experts) and `mlp.*` for a dense layer's MLP, which transformers 5.25 writes back under
  block_sparse_moe too (both are read).
The cache holds the latent attention's latent rows and the KDA layers' conv and [dk, dv] states."""
import numpy as np

from petit.models.blocks import deepseek_common as dc
from petit.models.blocks.common import embed_and_head, norm
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.mla import Mla
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.ssm import Mamba
from petit.models.families.hybrid.kimi_linear_config import MLP, KimiLinearConfig


def _kda_dims(cfg):
    H, d = cfg.linear_num_heads, cfg.linear_head_dim
    return H, d, H * d


def hf_tensors(cfg: KimiLinearConfig, ckpt) -> dict:
    H, dn, dr, dv, r = (cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim,
                        cfg.kv_lora_rank)
    D = cfg.hidden_size
    q_in = cfg.q_lora_rank or D
    Hl, dl, w = _kda_dims(cfg)
    out = {}
    for i, kind in enumerate(cfg.layer_types):
        a = f"model.layers.{i}.self_attn."
        if kind == "linear_attention":
            if a + "q_proj.weight" not in ckpt:
                continue
            names = {n: a + n + ".weight" for n in ("q_proj", "k_proj", "v_proj", "g_a_proj", "g_b_proj", "b_proj",
                                                     "f_a_proj", "f_b_proj")}

            def joined(n=names):
                f = lambda k: ckpt.f32(n[k]).astype(np.float64)          # noqa: E731
                g = f("g_b_proj") @ f("g_a_proj")
                fg = f("f_b_proj") @ f("f_a_proj")
                return np.concatenate([f("q_proj"), f("k_proj"), f("v_proj"), g, f("b_proj"), fg]).astype(np.float32)
            out[a + "in_proj.weight"] = ((4 * w + Hl + w, D), joined, tuple(names.values()))
            convs = tuple(a + f"{n}_conv1d.weight" for n in ("q", "k", "v"))
            K = cfg.linear_conv_kernel_dim
            out[a + "conv1d.weight"] = ((3 * w, 1, K), lambda s=convs: np.concatenate([ckpt.f32(x) for x in s]), convs)
            continue
        qname = a + ("q_b_proj.weight" if cfg.q_lora_rank else "q_proj.weight")
        kva, kvb = a + "kv_a_proj_with_mqa.weight", a + "kv_b_proj.weight"
        out[a + "q_nope.weight"] = ((H * dn, q_in), lambda q=qname: ckpt.f32(q).reshape(H, dn + dr, q_in)[:, :dn]
                                    .reshape(-1, q_in), [qname])
        out[a + "q_pe.weight"] = ((H * dr, q_in), lambda q=qname: ckpt.f32(q).reshape(H, dn + dr, q_in)[:, dn:]
                                  .reshape(-1, q_in), [qname])
        out[a + "kv_c.weight"] = ((r, D), lambda k=kva: ckpt.f32(k)[:r], [kva])
        out[a + "kv_pe.weight"] = ((dr, D), lambda k=kva: ckpt.f32(k)[r:], [kva])
        for h in range(H):
            out[f"{a}k_absorb.{h}.weight"] = ((r, dn), lambda h=h, k=kvb: np.ascontiguousarray(
                ckpt.f32(k).reshape(H, dn + dv, r)[h, :dn].T), [kvb])
            out[f"{a}v_absorb.{h}.weight"] = ((dv, r), lambda h=h, k=kvb: ckpt.f32(k).reshape(H, dn + dv, r)[h, dn:],
                                              [kvb])
    return out


def _kda(cfg: KimiLinearConfig, t, a: str) -> Mamba:
    D, K = cfg.hidden_size, cfg.linear_conv_kernel_dim
    H, d, w = _kda_dims(cfg)
    A = -np.exp(t.array(a + "A_log", (1, 1, H, 1)).reshape(H).astype(np.float32))
    return Mamba(t.weight(a + "in_proj.weight", (4 * w + H + w, D)),
                 t.array(a + "conv1d.weight", (3 * w, 1, K)).reshape(3 * w, K), None, None, None,
                 t.array(a + "dt_bias", (w,)), A, np.zeros(H, np.float32), t.weight(a + "o_proj.weight", (D, w)),
                 d, K, 1, eps=cfg.rms_norm_eps, version=4, n_heads=H, n_groups=H,
                 norm_w=t.array(a + "o_norm.weight", (d,)), scan="recurrent", kda=1)


def _mla(cfg: KimiLinearConfig, t, a: str) -> Mla:
    latent_eps = cfg.latent_norm_eps or 1e-6        # KimiRMSNorm's default; llama.cpp's files: the file's RMS eps
    return dc.mla_weights(t, a, dc.dims(cfg, 0), cfg.hidden_size, latent_eps)


def build(cfg: KimiLinearConfig, t) -> Decoder:
    D, eps, H = cfg.hidden_size, cfg.rms_norm_eps, cfg.num_attention_heads
    E, head = embed_and_head(t, cfg)
    layers, state_layers = [], []
    moe, names = cfg._MOE
    rope = cfg._mla_rope()
    for i, kind in enumerate(cfg.layer_types):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        if cfg.mlp_layer_types[i] == "sparse":
            m = moe_weights(t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_token,
                            inter=cfg.moe_intermediate_size, norm_topk=cfg.moe_renormalize, router=moe + ".gate",
                            experts=moe + ".experts", names=names,
                            shared=moe + ".shared_experts" if cfg.num_shared_experts else None,
                            shared_inter=cfg.num_shared_experts * cfg.moe_intermediate_size)
            m.scoring, m.group_score, m.routed_scale = "sigmoid", "top2_sum", float(cfg.routed_scaling_factor)
            m.sel_bias = t.vec(p + moe + ".gate.e_score_correction_bias", (cfg.num_experts,))
            mlp = {"moe": m}
        else:                # the Hub's dense MLP is `mlp`; transformers 5.25 writes it back under block_sparse_moe
            pre = "mlp" if t.has(p + "mlp.gate_proj.weight") else MLP
            mlp = {n: t.weight(f"{p}{pre}.{n}_proj.weight", shape) for n, shape in
                   (("gate", (cfg.intermediate_size, D)), ("up", (cfg.intermediate_size, D)),
                    ("down", (D, cfg.intermediate_size)))}
        if kind == "linear_attention":
            L = Layer(mamba=_kda(cfg, t, a), q=None, k=None, v=None, o=None, **mlp)
            state_layers.append(i)
        else:
            L = Layer(q=None, k=None, v=None, o=t.weight(a + "o_proj.weight", (D, H * cfg.v_head_dim)), **mlp,
                      rope=rope, mla=_mla(cfg, t, a))
        L.attn_norm = norm(t, p + "input_layernorm", D, "rms", eps)
        L.mlp_norm = norm(t, p + "post_attention_layernorm", D, "rms", eps)
        layers.append(L)
    final = norm(t, "model.norm", D, "rms", eps)
    mixer = next(L.mamba for L in layers if L.mamba is not None)
    widest = max(cfg.intermediate_size, cfg.moe_intermediate_size * max(cfg.num_shared_experts, 1))
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=widest, num_attention_heads=H,
                num_key_value_heads=1, head_dim=cfg.qk_rope_head_dim + cfg.kv_lora_rank,
                context_length=cfg.max_position_embeddings,
                attn_scale=(cfg.qk_nope_head_dim + cfg.qk_rope_head_dim) ** -0.5, values_are_keys=True,
                state_shapes=mixer.state_shapes, state_layers=tuple(state_layers))
    return Decoder(arch, E, layers, final, head)


Config = KimiLinearConfig
