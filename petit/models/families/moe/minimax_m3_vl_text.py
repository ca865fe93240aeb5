"""MiniMax-M3's language model (transformers' `minimax_m3_vl_text`, MiniMaxM3VLForCausalLM): MiniMax-M2's attention in
Mixtral's pre-norm block, with Gemma's norms and gpt-oss's clamped SwiGLU:

- every RMSNorm computes x (1 + w) (the block's two, the final one, q and k normed over each head); RoPE rotate-half on
  head_dim x `partial_rotary_factor` values (transformers 5.25 does not read `rotary_dim`: a disagreeing one is
  reported);
- `layer_types`: full attention, or `minimax_m3_sparse`: a lightning indexer chooses each query's key blocks
  (petit/models/blocks/block_sparse.py, kernels/mm3.c);
- `mlp_layer_types`: a dense MLP of `dense_intermediate_size`, or experts on sigmoid(router) +
  `e_score_correction_bias`, the chosen sigmoids renormalised x `routed_scaling_factor`, plus one unweighted shared
  expert; every MLP (clamp(up, -7, 7) + 1) g sigmoid(1.702 g), g = min(gate, 7) (other swiglu_alpha / limit refused).

transformers 5.25 saves its module names: the dense and shared MLPs' fused `gate_up_proj` ([gate; up] rows), the
experts as 3-D tensors, `self_attn.indexer.*`, split when read. The legacy `sparse_attention_config` and
`moe_layer_freq` are read as transformers reads them; `hidden_act` is not read (transformers sets it to silu)."""
from petit.models.blocks.block_sparse import BlockSparse
from petit.models.blocks.common import default_rope, llama_like, norm
from petit.models.blocks.moe import moe_weights, split_experts
from petit.models.families.moe.minimax_m3_vl_text_config import MiniMaxM3VLTextConfig


def hf_tensors(cfg: MiniMaxM3VLTextConfig, ckpt) -> dict:
    """The fused gate_up_proj of the dense and shared MLPs as gate / up, the experts one by one, where a checkpoint
    fuses them (the release's split names: petit/models/multimodal_rows.py's minimax_m3_vl row renames them)."""
    D, E, out, held = cfg.hidden_size, cfg.num_local_experts, {}, {}
    for i, kind in enumerate(cfg.mlp_layer_types):
        p = f"model.layers.{i}.mlp."
        m, F = (p, cfg.dense_intermediate_size) if kind == "dense" else (p + "shared_experts.",
                                                                         cfg.shared_intermediate_size)
        gu = m + "gate_up_proj.weight"
        if gu not in ckpt:
            continue
        for name, r0 in (("gate_proj", 0), ("up_proj", F)):
            out[m + name + ".weight"] = ((F, D), lambda g=gu, a=r0, f=F: ckpt.f32(g)[a:a + f], (gu,))
        if kind == "sparse":
            out |= split_experts(ckpt, f"model.layers.{i}.", E, cfg.intermediate_size, D, held=held)
    return out


def build(cfg: MiniMaxM3VLTextConfig, t):
    D, eps, n = cfg.hidden_size, cfg.rms_norm_eps, cfg.num_hidden_layers
    rope = default_rope(cfg, dim=cfg.rot)

    def moe_for(i, p):
        if cfg.mlp_layer_types[i] == "dense":
            return None
        S = cfg.shared_intermediate_size
        m = moe_weights(t, p, cfg, n_experts=cfg.num_local_experts, top_k=cfg.num_experts_per_tok,
                        inter=cfg.intermediate_size, norm_topk=True, router="mlp.gate", experts="mlp.experts",
                        shared="mlp.shared_experts", shared_inter=S, act="swiglu_oai")
        m.scoring, m.routed_scale = "sigmoid", float(cfg.routed_scaling_factor)
        m.sel_bias = t.vec(p + "mlp.gate.e_score_correction_bias", (cfg.num_local_experts,))
        return m

    def dense(i, p):
        F = cfg.dense_intermediate_size
        return {"gate": t.weight(p + "mlp.gate_proj.weight", (F, D)), "up": t.weight(p + "mlp.up_proj.weight", (F, D)),
                "down": t.weight(p + "mlp.down_proj.weight", (D, F))}

    sparse = [i for i, k in enumerate(cfg.layer_types) if k == "minimax_m3_sparse"]
    net = llama_like(t, cfg, eps=eps, norm_add=1.0, qk_norm="head", rope_for=lambda i: rope, moe_for=moe_for,
                     mlp_for=dense, context_length=rope.context_length, act="swiglu_oai",
                     intermediate_size=cfg.dense_intermediate_size, cache_slots=n + len(sparse) if sparse else None)
    Hi, Di = cfg.index_n_heads, cfg.index_head_dim
    for slot, i in enumerate(sparse, start=n):
        a = f"model.layers.{i}.self_attn.indexer."
        L = net.layers[i]
        L.sparse = L.pre_store = BlockSparse(
            t.weight(a + "q_proj.weight", (Hi * Di, D)), t.weight(a + "k_proj.weight", (Di, D)),
            norm(t, a + "q_norm", Di, "rms", eps, add=1.0), norm(t, a + "k_norm", Di, "rms", eps, add=1.0), Hi, Di,
            cfg.index_block_size, cfg.index_topk_blocks, cfg.index_local_blocks, slot, rope)
    return net


Config = MiniMaxM3VLTextConfig
