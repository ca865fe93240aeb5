"""llama.cpp's MiniMax-M3 language-model files (`minimax-m3`; issue 36, the gg36t group), read as Petit's
minimax_m3_vl_text family. The converter (conversion/minimax.py MiniMaxM3Model, a MiniMaxM2Model) writes the released
checkpoint's tensors under llama.cpp's names, the (1 + w) RMSNorms as 1 + w (every `*norm.weight`: the block's,
the final one, q / k per head, the indexer's), the experts stacked, the indexer (`indexer.q_proj`, `.k_proj`,
`.q_norm`, `.k_norm`) kept F32. Its graph (src/models/minimax-m3.cpp) fixes what transformers' config leaves free:

- the first `leading_dense_block_count` layers are a dense MLP under full attention, every later one routed + shared
  experts under the sparse attention (MiniMax Sparse Attention: the indexer scores each key with one head per
  key-value group, max-pools the scores over blocks of `indexer.block_size` keys and keeps the `indexer.top_k`
  best blocks plus the `indexer.local_blocks` last ones): layer_types / mlp_layer_types follow from the count;
- the dense MLP is `feed_forward_length` wide, each expert `expert_feed_forward_length`, the shared expert that
  x `expert_shared_count`; sigmoid routing (`expert_gating_func` 2) on `exp_probs_b`, the chosen weights
  renormalised (`expert_weights_norm`) x `expert_weights_scale`; every MLP gpt-oss's clamped SwiGLU (1.702, 7);
- RoPE on halves over `rope.dimension_count` values of each head, the indexer's heads too.

llama.cpp runs the sparse attention only with flash attention on (with it off, every layer dense); its CPU flash
attention rounds to f16 inside, which puts its exact (F32 KV cache) run 2e-3 of the logit range from transformers'
on the tiny file (tests/test_gg36t5.py). Petit runs the attention in float32, as transformers."""
from petit.loading.gguf_moe import _number
from petit.loading.gguf_names import LLAMA_LAYER, GGUFArch

ARCH = "minimax-m3"
LAYER = dict(LLAMA_LAYER, ffn_gate_inp="mlp.gate", ffn_gate_shexp="mlp.shared_experts.gate_proj",
             ffn_up_shexp="mlp.shared_experts.up_proj", ffn_down_shexp="mlp.shared_experts.down_proj")
WHOLE = {"exp_probs_b.bias": "mlp.gate.e_score_correction_bias",
         **{f"indexer.{n}.weight": f"self_attn.indexer.{n}.weight" for n in ("q_proj", "k_proj", "q_norm", "k_norm")}}
EXPERTS = {"ffn_gate_exps": "mlp.experts.{}.gate_proj", "ffn_up_exps": "mlp.experts.{}.up_proj",
           "ffn_down_exps": "mlp.experts.{}.down_proj"}


def _minimax_m3(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, ARCH)

    if get("expert_gating_func") != 2:
        raise ValueError(f"metadata {key('expert_gating_func')!r} is {get('expert_gating_func')}: the "
                         f"minimax_m3_vl_text family routes on the sigmoid (2) only")
    if not meta.get(key("expert_weights_norm"), False):
        raise ValueError(f"metadata {key('expert_weights_norm')!r} is absent or false: llama.cpp then does not "
                         f"renormalise the chosen experts' weights, which the minimax_m3_vl_text family always does")
    n, dense = cfg["num_hidden_layers"], get("leading_dense_block_count", 0)
    if not 0 <= dense <= n:
        raise ValueError(f"metadata {key('leading_dense_block_count')!r} ({dense}) should be at most "
                         f"{key('block_count')!r} ({n})")
    expert_ff = get("expert_feed_forward_length")
    cfg.update(dense_intermediate_size=cfg["intermediate_size"], intermediate_size=expert_ff,
               shared_intermediate_size=expert_ff * get("expert_shared_count"),
               routed_scaling_factor=get("expert_weights_scale", 1.0, float),
               layer_types=["full_attention"] * dense + ["minimax_m3_sparse"] * (n - dense),
               mlp_layer_types=["dense"] * dense + ["sparse"] * (n - dense),
               index_n_heads=get("attention.indexer.head_count"), index_head_dim=get("attention.indexer.key_length"),
               index_topk_blocks=get("attention.indexer.top_k"), index_block_size=get("attention.indexer.block_size"),
               index_local_blocks=get("attention.indexer.local_blocks"))


GG36T5_ARCHS = {ARCH: GGUFArch("minimax_m3_vl_text", LAYER, whole_names=WHOLE, experts=EXPERTS,
                                expert_key="num_local_experts", norm_shift=1.0, extra=_minimax_m3)}
