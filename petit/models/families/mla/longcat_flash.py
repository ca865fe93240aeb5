"""LongCat-Flash (`longcat_flash`, transformers' modeling_longcat_flash): each of its `num_layers` layers is two
sublayer pairs (RMSNorm, DeepSeek-V3's latent attention; RMSNorm, a dense SwiGLU MLP), plus a shortcut MoE that
reads the first pair's MLP input and whose output is added after the second pair's MLP.

Petit runs layer i as its layers 2i and 2i + 1 (so transformers' `num_hidden_layers`, 2 * num_layers, is Petit's
layer count and KV cache slots), each the latent attention of petit/models/blocks/mla.py (`self_attn.{0,1}`) and a dense
MLP (`mlps.{0,1}`). Layer 2i also runs the MoE on its MLP input into a held buffer (Layer.moe_shortcut) and layer
2i + 1 adds it after its MLP (Layer.add_shortcut), both in the one-call plan.

The attention differs from DeepSeek-V3's by two constant factors: the query (nope and rope parts) times
sqrt(hidden_size / q_lora_rank) after q_b_proj, the normed kv latent times sqrt(hidden_size / kv_lora_rank); both are
folded into the weights of q_a_layernorm and kv_a_layernorm (linear after them). The two latent norms use eps 1e-6
(LongcatFlashRMSNorm's default, as DeepSeek's), the others `rms_norm_eps`.

The MoE (kernels/moe.c): router `mlp.router.classifier` [n_routed_experts + zero_expert_num, D] (float32), softmax
over all of them, the top `moe_topk` of softmax + `e_score_correction_bias` chosen, weights the softmax (not
renormalised) times `routed_scaling_factor`; the last `zero_expert_num` are zero-computation experts: a token that
chose one adds its input times that weight (pt_moe.n_zero, exact: no matrix)."""
from petit.models.blocks import deepseek_common as dc
from petit.models.blocks.common import default_rope, embed_and_head, norm
from petit.models.blocks.decoder import Arch, Decoder, Layer, Vec
from petit.models.blocks.mla import Mla
from petit.models.blocks.moe import Moe
from petit.models.families.mla.longcat_flash_config import LongcatFlashConfig

# transformers' attribute_map: the other spelling of each key -> the one Petit keeps


def _attn(i: int) -> str:
    return f"model.layers.{i // 2}.self_attn.{i % 2}."


def hf_tensors(cfg: LongcatFlashConfig, ckpt) -> dict:
    """The latent attention's matrices of every sublayer as DeepSeek's (deepseek_common.hf_tensors)."""
    return dc.hf_tensors(cfg, ckpt, _attn)


def _scaled(n, s: float):
    n.w = Vec(n.w.a * s)        # a constant factor after a norm, folded into its weight
    return n


def build(cfg: LongcatFlashConfig, t):
    H, dn, dr, dv, r = (cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim,
                        cfg.kv_lora_rank)
    D, F, eps, qr = cfg.hidden_size, cfg.intermediate_size, cfg.rms_norm_eps, cfg.q_lora_rank
    E, Z, Fe = cfg.n_routed_experts, cfg.zero_expert_num or 0, cfg.expert_ffn_hidden_size
    rope = default_rope(cfg, dim=dr, interleaved=True)
    emb, head = embed_and_head(t, cfg)
    layers = []
    for i in range(cfg.num_hidden_layers):
        p, s, a = f"model.layers.{i // 2}.", i % 2, _attn(i)
        mla = Mla(q=t.weight(a + "q_nope.weight", (H * dn, qr)), q_pe=t.weight(a + "q_pe.weight", (H * dr, qr)),
                  c=t.weight(a + "kv_c.weight", (r, D)), k_pe=t.weight(a + "kv_pe.weight", (dr, D)),
                  kv_norm=_scaled(norm(t, a + "kv_a_layernorm", r, "rms", 1e-6), (D / r) ** 0.5),
                  k_absorb=[t.weight(f"{a}k_absorb.{h}.weight", (r, dn)) for h in range(H)],
                  v_absorb=[t.weight(f"{a}v_absorb.{h}.weight", (dv, r)) for h in range(H)],
                  nope=dn, rope=dr, rank=r, v_dim=dv, q_a=t.weight(a + "q_a_proj.weight", (qr, D)),
                  q_a_norm=_scaled(norm(t, a + "q_a_layernorm", qr, "rms", 1e-6), (D / qr) ** 0.5))
        m = f"{p}mlps.{s}."
        L = Layer(q=None, k=None, v=None, o=t.weight(a + "o_proj.weight", (D, H * dv)), mla=mla, rope=rope,
                  gate=t.weight(m + "gate_proj.weight", (F, D)), up=t.weight(m + "up_proj.weight", (F, D)),
                  down=t.weight(m + "down_proj.weight", (D, F)),
                  attn_norm=norm(t, f"{p}input_layernorm.{s}", D, "rms", eps),
                  mlp_norm=norm(t, f"{p}post_attention_layernorm.{s}", D, "rms", eps), add_shortcut=s == 1)
        if s == 0:
            x = p + "mlp.experts."
            L.moe = Moe(t.float_weight(p + "mlp.router.classifier.weight", (E + Z, D)),
                        [t.weight(f"{x}{e}.gate_proj.weight", (Fe, D)) for e in range(E)],
                        [t.weight(f"{x}{e}.up_proj.weight", (Fe, D)) for e in range(E)],
                        [t.weight(f"{x}{e}.down_proj.weight", (D, Fe)) for e in range(E)], cfg.moe_topk, False,
                        sel_bias=t.vec(p + "mlp.router.e_score_correction_bias", (E + Z,)),
                        routed_scale=float(cfg.routed_scaling_factor), n_zero=Z)
            L.moe_shortcut = True
        layers.append(L)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=1, head_dim=dr + r, context_length=rope.context_length,
                attn_scale=dc.attention_scale(cfg, True), values_are_keys=True, shortcut=True)
    return Decoder(arch, emb, layers, norm(t, "model.norm", D, "rms", eps), head)


Config = LongcatFlashConfig
