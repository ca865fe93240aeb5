"""A.X-K2 (SK Telecom, `axk2`): DeepSeek-V3.2's model (petit/models/families/mla/deepseek_v32.py: latent attention with
DeepSeek Sparse Attention's indexer in every layer, sigmoid + e_score_correction_bias routing, shared experts, the
routed layers listed by `mlp_layer_types`) with three changes of its own:

- the query: q_a = q_a_proj x, then one fused q_gate_proj over [RMSNorm(q_a) ; q_a] (2 x q_lora_rank wide: the
  checkpoint's q_b_proj) gives each head's nope, rope and v_head_dim gate rows; the indexer still reads RMSNorm(q_a);
  the heads' outputs are times sigmoid(gate), one a value, before o_proj (Mla.q_cat, Mla.gate);
- gated RMSNorms (Megatron's GatedNormWrapper): input_layernorm in every layer and post_attention_layernorm in the
  routed ones are y = RMSNorm(x), y * sigmoid(fc2 silu(fc1 y)) with fc1 [gated_norm_rank, hidden] and fc2 [hidden,
  gated_norm_rank] (the checkpoint's W_down / W_up; petit/models/blocks/norm_gate.py); a dense layer's post-attention
  norm is plain;
- the routing: A.X-K2-Light routes without groups (n_group / topk_group null, the default); with them, the experts
  outside the topk_group best groups score 0 for the choice, not -inf as in DeepSeek-V3 (AXK2TopkRouter's own
  fill, Moe.group_fill_zero).

The config's defaults (A.X-K2-Light's: 128 experts, top 8 x 2.5, 32 heads, q_lora_rank 384, 16 indexer heads) and
`mlp_layer_types` from the legacy `first_k_dense_replace` (default 1) / `moe_layer_freq` as A.X-K1 (transformers
saves neither). The released files store the gate MLPs as W_down / W_up and the fused query as q_b_proj, which
transformers 5.25 renames at load and writes back at save; the module names (mlp.fc1 / fc2, q_gate_proj) are read
too."""
from dataclasses import dataclass

from petit.models.blocks import deepseek_common as dc
from petit.models.blocks.common import norm
from petit.models.blocks.config import positive_int
from petit.models.families.mla.deepseek_v32 import DeepseekV32Config, build as build_v32
from petit.models.blocks.norm_gate import norm_gate


@dataclass(kw_only=True)
class AXK2Config(DeepseekV32Config):
    vocab_size: int = 163840
    hidden_size: int = 2048
    intermediate_size: int = 5120
    moe_intermediate_size: int = 512
    num_hidden_layers: int = 48
    num_attention_heads: int = 32
    num_key_value_heads: int | None = 32
    n_routed_experts: int | None = 128
    kv_lora_rank: int = 128
    q_lora_rank: int | None = 384
    qk_rope_head_dim: int = 32
    v_head_dim: int = 64
    qk_nope_head_dim: int = 64
    max_position_embeddings: int = 131072
    index_n_heads: int = 16
    gated_norm_rank: int = 16
    n_group: int | None = None
    topk_group: int | None = None
    first_k_dense_replace: int | None = None        # legacy: mlp_layer_types' default (1 when both are absent)
    model_type: str = "axk2"
    _REQUIRED = ()

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and "num_local_experts" in d:     # transformers' attribute_map
            d = {("n_routed_experts" if k == "num_local_experts" else k): v for k, v in d.items()}
        return super().from_dict(d)

    def _validate(self):
        if (self.n_group is None) != (self.topk_group is None):
            raise ValueError(f"config: n_group {self.n_group} and topk_group {self.topk_group} must be set together "
                             f"(both null: routing without groups), as transformers' AXK2Config checks")
        positive_int(self, "gated_norm_rank")
        dc.legacy_mlp_types(self)
        super()._validate()


def hf_tensors(cfg: AXK2Config, ckpt) -> dict:
    """DeepSeek's derived matrices, the query's from the fused q_gate_proj (saved q_b_proj): each head's rows nope |
    rope | gate, every row 2 x q_lora_rank wide."""
    out = dc.hf_tensors(cfg, ckpt)
    H, dn, dr, dv, rq = (cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim,
                         cfg.q_lora_rank)
    for i in range(cfg.num_hidden_layers):
        a = f"model.layers.{i}.self_attn."
        q = a + ("q_gate_proj.weight" if a + "q_gate_proj.weight" in ckpt else "q_b_proj.weight")
        for name, lo, hi in (("q_nope", 0, dn), ("q_pe", dn, dn + dr), ("q_gate", dn + dr, dn + dr + dv)):
            out[a + name + ".weight"] = ((H * (hi - lo), 2 * rq), lambda q=q, lo=lo, hi=hi: ckpt.f32(q).reshape(
                H, dn + dr + dv, 2 * rq)[:, lo:hi].reshape(-1, 2 * rq), [q])
    return out


def _norms(cfg: AXK2Config):
    D, eps, r = cfg.hidden_size, cfg.rms_norm_eps, cfg.gated_norm_rank

    def gated(t, name):
        n = norm(t, name + ".norm", D, "rms", eps)
        n.gate = norm_gate(t, name, D, r)
        return n

    def norms(t, p, i):
        post = p + "post_attention_layernorm"
        return gated(t, p + "input_layernorm"), (gated(t, post) if cfg.mlp_layer_types[i] == "sparse" else
                                                 norm(t, post, D, "rms", eps))
    return norms


def build(cfg: AXK2Config, t):
    dec = build_v32(cfg, t, q_cat=True, norms=_norms(cfg))
    H, dv = cfg.num_attention_heads, cfg.v_head_dim
    for i, L in enumerate(dec.layers):
        L.mla.gate, L.mla.gate_x, L.mla.gate_width = t.weight(f"model.layers.{i}.self_attn.q_gate.weight",
                                                              (H * dv, 2 * cfg.q_lora_rank)), False, 1
        if L.moe is not None and cfg.n_group:
            L.moe.group_fill_zero = True
    return dec


Config = AXK2Config
