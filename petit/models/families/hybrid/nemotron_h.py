"""Nemotron-H (NVIDIA Nemotron-H, Nemotron Nano 2): one mixer per block, h = h + mixer(RMSNorm(h)), the blocks named
by `hybrid_override_pattern` (M Mamba-2, * attention, - MLP; transformers 5 writes the same as `layers_block_type`):
Mamba-2's mixer with its gated norm per group of channels (gate first), attention with no position encoding at all,
and a plain MLP down(relu²(up x)). Routed-expert blocks (E, Nemotron 3 Nano; issue 30's moe_b group): DeepSeek-V3's
router (sigmoid scores, the choice on them + `e_score_correction_bias` within the `topk_group` best of `n_group`
groups, renormalised with `norm_topk_prob`, times `routed_scaling_factor`) over `n_routed_experts` plain experts
down(relu²(up x)) of `moe_intermediate_size`, plus a shared plain MLP of `moe_shared_expert_intermediate_size`
(`mixer.experts.{e}.up_proj / down_proj`, `mixer.shared_experts.*`, kernels/moe.c's plain experts); the latent
projections (`moe_latent_size`) are refused, and the multi-token-prediction layers are not run. The time step is bounded
by `time_step_limit` as mamba_ssm does (transformers 5 clamps it at time_step_min in a prefill and not in a decode
step; the released values give the same logits either way only where the bound does not act)."""
import numpy as np

from petit.models.blocks.common import norm
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.moe import Moe
from petit.models.blocks.ssm import Mamba
from petit.models.families.hybrid.nemotron_h_config import NemotronHConfig


def _prefix(t) -> str:
    """The Hub's checkpoints say backbone.*, transformers 5 writes model.*."""
    return "backbone." if t.has("backbone.embeddings.weight") else "model."


def _moe(cfg: NemotronHConfig, t, m: str) -> Moe:
    D, E, F, S = cfg.hidden_size, cfg.n_routed_experts, cfg.moe_intermediate_size, \
        cfg.moe_shared_expert_intermediate_size
    x = m + "experts."
    moe = Moe(t.float_weight(m + "gate.weight", (E, D)), None,
              [t.weight(f"{x}{e}.up_proj.weight", (F, D)) for e in range(E)],
              [t.weight(f"{x}{e}.down_proj.weight", (D, F)) for e in range(E)], cfg.num_experts_per_tok,
              cfg.norm_topk_prob, "relu2",
              (None, t.weight(m + "shared_experts.up_proj.weight", (S, D)),
               t.weight(m + "shared_experts.down_proj.weight", (D, S))), plain=True)
    moe.scoring, moe.group_score, moe.routed_scale = "sigmoid", "top2_sum", float(cfg.routed_scaling_factor)
    moe.n_group, moe.topk_group = (cfg.n_group, cfg.topk_group) if cfg.n_group > 1 else (0, 0)
    moe.sel_bias = t.vec(m + "gate.e_score_correction_bias", (E,))
    return moe


def build(cfg: NemotronHConfig, t) -> Decoder:
    D, F, eps, hd = cfg.hidden_size, cfg.intermediate_size, cfg.layer_norm_epsilon, cfg.head_dim
    H, P, N, G, K = cfg.mamba_num_heads, cfg.mamba_head_dim, cfg.ssm_state_size, cfg.n_groups, cfg.conv_kernel
    di, q, kv = H * P, cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    conv = di + 2 * G * N
    B = _prefix(t)
    E = t.weight(B + "embeddings.weight", (cfg.vocab_size, D))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    layers, state, empty = [], [], []
    for i, kind in enumerate(cfg.kinds):
        p = f"{B}layers.{i}."
        m = p + "mixer."
        block_norm = norm(t, p + "norm", D, "rms", eps)
        if kind == "mamba":
            mixer = Mamba(t.weight(m + "in_proj.weight", (di + conv + H, D)),
                          t.array(m + "conv1d.weight", (conv, 1, K)).reshape(conv, K),
                          t.array(m + "conv1d.bias", (conv,)) if cfg.use_conv_bias else None, None, None,
                          t.array(m + "dt_bias", (H,)), -np.exp(t.array(m + "A_log", (H,)).astype(np.float32)),
                          t.array(m + "D", (H,)), t.weight(m + "out_proj.weight", (D, di)), N, K, 1, eps=eps,
                          version=2, n_heads=H, n_groups=G, norm_w=t.array(m + "norm.weight", (di,)), norm_groups=G,
                          dt_min=float(cfg.time_step_limit[0]), dt_max=float(cfg.time_step_limit[1]))
            L = Layer(q=None, k=None, v=None, o=None, mamba=mixer, attn_norm=block_norm)
            state.append(i)
        elif kind == "attention":
            L = Layer(q=t.weight(m + "q_proj.weight", (q, D)), k=t.weight(m + "k_proj.weight", (kv, D)),
                      v=t.weight(m + "v_proj.weight", (kv, D)), o=t.weight(m + "o_proj.weight", (D, q)), rope=None,
                      attn_norm=block_norm)
        elif kind == "moe":                 # routed experts: the MLP slot, as an MLP block's
            L = Layer(q=None, k=None, v=None, o=None, moe=_moe(cfg, t, m), mlp_norm=block_norm)
            empty.append(i)
        else:                               # an MLP block: its norm is the MLP's (there is no attention)
            L = Layer(q=None, k=None, v=None, o=None, up=t.weight(m + "up_proj.weight", (F, D)),
                      down=t.weight(m + "down_proj.weight", (D, F)), mlp_norm=block_norm)
            empty.append(i)
        layers.append(L)
    mixer = next(L.mamba for L in layers if L.mamba is not None)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F,
                num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
                head_dim=hd, context_length=cfg.max_position_embeddings, act="relu2",
                state_shapes=mixer.state_shapes, state_layers=tuple(state), empty_layers=tuple(empty))
    return Decoder(arch, E, layers, norm(t, B + "norm_f", D, "rms", eps), head)


Config = NemotronHConfig
