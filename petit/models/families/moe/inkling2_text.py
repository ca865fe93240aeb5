"""Inkling 2 (Thinking Machines, `inkling2_text`; Inkling2ForCausalLM), as transformers 5.25's modeling_inkling2.py
computes it, read in the released checkpoints' layout (model.llm.*: what save_pretrained writes too, transformers'
conversion mapping reversed). Inkling's attention (petit/models/families/moe/inkling_text.py: no RoPE, short
convolutions of k and v and of each sublayer's output, a relative bias from each query's states) with:

- L2 clips: q = clip(q_proj x * q_l2_clip.scale) and k = clip(k) at qk_l2_clip_threshold per head, the relative
  states clip(wr x * rel_l2_clip.scale) at rel_l2_clip_threshold; v RMS-normed per head without weight; scores
  q.k / sqrt(head_dim) plus the bias, a sink logit per head and token (attn_sink_proj x), the output times
  sigmoid(gate_attn x); each convolution's sum (x + conv x) / sqrt(kernel + 1);
- the full layers: q, k, v from inputs of their own (q_ / k_ / v_input_norm), k and v through dynamic convolutions
  (each token's taps static_w plus weight_proj of its input, a set per kv head; / sqrt(2 kernel + 1)), queries and
  relative states x 1 + alpha ln(max((p + 1) / log_scaling_n_floor, 1));
- attention residuals over depth (kernels/fam36l.c's pt_block_res): each layer's attention input (after layer 0; a
  full layer's three), its MLP input and the final norm's input are a learned query's softmax over the block states
  (the embeddings, then each block's sum; n_layers_per_attn_res_block layers a block) and the current partial sum,
  all RMS-normed without weight; a block's first layer keeps its input as a block state and restarts the sum at its
  attention output;
- every MLP routed: the top num_experts_per_tok of sigmoid + e_score_correction_bias (mlp.gate.bias), renormalised
  (+ 1e-20) x route_scale, each expert mlp_gate_softcap tanh(g / c) sigmoid(g) x mlp_up_softcap tanh(u / c);
- the logits soft-capped (final_logit_softcapping), the head's and embedding's rows cut to unpadded_vocab_size.
"""
from petit.models.families.moe.inkling2_weights import M, build_decoder
from petit.models.families.moe.inkling_block import expert_parts
from petit.models.families.moe.inkling2_config import Inkling2TextConfig


def hf_tensors(cfg: Inkling2TextConfig, ckpt) -> dict:
    """Each expert's gate / up (w13's interleaved rows) and down (w2); the embedding and head cut to the logits'
    rows."""
    out, D, I, V = {}, cfg.hidden_size, cfg.moe_intermediate_size, cfg.rows()
    for i in range(cfg.num_hidden_layers):
        x = f"{M}layers.{i}.mlp.experts."
        out |= expert_parts(ckpt, cfg.n_routed_experts, {
            x + "{e}.gate_proj.weight": ((I, D), x + "w13_weight", slice(0, 2 * I, 2)),
            x + "{e}.up_proj.weight": ((I, D), x + "w13_weight", slice(1, 2 * I, 2)),
            x + "{e}.down_proj.weight": ((D, I), x + "w2_weight", None)})
    if V < cfg.vocab_size:
        for name in (M + "embed.weight", M + "unembed.weight"):
            out[name] = ((V, D), lambda name=name: ckpt.f32(name)[:V], [name])
    return out


def build(cfg: Inkling2TextConfig, t):
    return build_decoder(cfg, t)


Config = Inkling2TextConfig
