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
from dataclasses import dataclass

from petit.models.blocks import deepseek_common as dc
from petit.models.blocks.common import default_rope, embed_and_head, norm
from petit.models.blocks.config import DecoderConfig, check_decoder, positive_int, positive_number, refuse_act
from petit.models.blocks.decoder import Arch, Decoder, Layer, Vec
from petit.models.blocks.mla import Mla
from petit.models.blocks.moe import Moe
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY

# transformers' attribute_map: the other spelling of each key -> the one Petit keeps
ALIASES = {"ffn_hidden_size": "intermediate_size", "num_local_experts": "n_routed_experts",
           "num_experts_per_tok": "moe_topk", "moe_intermediate_size": "expert_ffn_hidden_size"}


@dataclass(kw_only=True)
class LongcatFlashConfig(DecoderConfig):
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000000.0          # LongcatFlashConfig.default_theta
    max_position_embeddings: int = 131072
    q_lora_rank: int = 1536
    kv_lora_rank: int = 512
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    qk_head_dim: int | None = None
    moe_topk: int = 12
    n_routed_experts: int = 512
    zero_expert_num: int | None = 256
    expert_ffn_hidden_size: int = 2048
    routed_scaling_factor: float = 6.0
    attention_bias: bool = False
    router_bias: bool = False
    model_type: str = "longcat_flash"
    _REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
    _IGNORED = MOE_TRAINING_ONLY | {"output_router_logits", "mla_scale_q_lora", "mla_scale_kv_lora"}

    @classmethod
    def from_dict(cls, d):
        """Either spelling of each aliased key (both given must agree); `num_layers` (LongCat's) counts layers of
        two sublayer pairs, `num_hidden_layers` (transformers' derived key) the pairs: twice as many."""
        if isinstance(d, dict):
            d = dict(d)
            for alias, name in ALIASES.items():
                if alias in d:
                    v = d.pop(alias)
                    if name in d and d[name] != v:
                        raise ValueError(f"config: {alias} {v!r} and {name} {d[name]!r} disagree (the same setting)")
                    d[name] = v
            if "num_layers" in d:
                n = d.pop("num_layers")
                if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                    raise ValueError(f"config: num_layers must be a positive integer, got {n!r}")
                if d.get("num_hidden_layers") not in (None, 2 * n):
                    raise ValueError(f"config: num_hidden_layers {d['num_hidden_layers']!r} is not 2 x num_layers "
                                     f"({2 * n})")
                d["num_hidden_layers"] = 2 * n
        return super().from_dict(d)

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "longcat_flash", "silu")
        for key in ("attention_bias", "router_bias"):
            if d.get(key):
                raise ValueError(f"config: {key} true is not supported by the longcat_flash family (no released "
                                 f"LongCat-Flash checkpoint has it)")

    def _validate(self):
        if self.head_dim not in (None, self.qk_rope_head_dim):     # the rotary table's width in transformers
            raise ValueError(f"config: head_dim {self.head_dim} differs from qk_rope_head_dim "
                             f"{self.qk_rope_head_dim}; transformers' RoPE then fails on the rope part")
        self.head_dim = self.qk_rope_head_dim
        check_decoder(self, ("rms_norm_eps", "rope_theta", "routed_scaling_factor"), ("tie_word_embeddings",))
        positive_int(self, "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                     "moe_topk", "n_routed_experts", "expert_ffn_hidden_size")
        positive_number(self, "routed_scaling_factor")
        if self.num_hidden_layers % 2:
            raise ValueError(f"config: num_hidden_layers {self.num_hidden_layers} must be even (2 x num_layers)")
        if self.qk_rope_head_dim % 2:
            raise ValueError(f"config: qk_rope_head_dim {self.qk_rope_head_dim} must be even for RoPE")
        if self.qk_head_dim not in (None, self.qk_nope_head_dim + self.qk_rope_head_dim):
            raise ValueError(f"config: qk_head_dim {self.qk_head_dim} is not qk_nope_head_dim + qk_rope_head_dim")
        z = self.zero_expert_num or 0
        if isinstance(z, bool) or not isinstance(z, int) or z < 0:
            raise ValueError(f"config: zero_expert_num must be a non-negative integer, got {z!r}")
        if self.moe_topk > self.n_routed_experts + z:
            raise ValueError(f"config: moe_topk {self.moe_topk} exceeds n_routed_experts + zero_expert_num "
                             f"({self.n_routed_experts + z})")
        self.qk_head_dim = self.qk_nope_head_dim + self.qk_rope_head_dim


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
