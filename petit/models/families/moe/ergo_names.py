"""Ergo's checkpoint names (petit/models/families/moe/ergo.py): transformers reads the released layout (its training
framework's export for serving, which its save_pretrained also writes back) by its conversion mapping, renaming each
tensor to its module's name and transposing the router and the shared expert (stored [in, out]). `hf_tensors` does the
same, so the family reads its modules' names whichever layout a checkpoint has, and splits what the kernels read apart:
q / k / v from the fused qkv_proj's rows, each expert's up / down from the 3-D [E, hidden, inter] / [E, inter, hidden]
tensors."""
import re

import numpy as np

# transformers' conversion mapping for Ergo: the released (and saved) name -> its module's
RENAMES = [(r"^tok_embeddings\.", "model.embed_tokens."), (r"^norm\.", "model.norm."), (r"^output\.", "lm_head."),
           (r"^layers\.", "model.layers."), (r"\.attention_norm\.", ".input_layernorm."),
           (r"\.post_attention_norm\.", ".post_attention_layernorm."), (r"\.ffn_norm\.", ".pre_feedforward_layernorm."),
           (r"\.post_ffn_norm\.", ".post_feedforward_layernorm."),
           (r"\.post_attention_residual\.scale", ".attention_residual_gate.weight"),
           (r"\.post_ffn_residual\.scale", ".feedforward_residual_gate.weight"),
           (r"\.attention\.wqkv\.", ".self_attn.qkv_proj."), (r"\.attention\.wo\.", ".self_attn.o_proj."),
           (r"\.attention\.q_norm\.", ".self_attn.q_norm."), (r"\.attention\.k_norm\.", ".self_attn.k_norm."),
           (r"\.feed_forward\.up\.", ".mlp.up_proj."), (r"\.feed_forward\.down\.", ".mlp.down_proj."),
           (r"\.feed_forward\.gate_kernel$", ".mlp.gate.linear.weight"),        # stored [hidden, experts]
           (r"\.feed_forward\.router_bias$", ".mlp.gate.e_score_correction_bias"),
           (r"\.feed_forward\.up_proj$", ".mlp.experts.up_proj"),
           (r"\.feed_forward\.down_proj$", ".mlp.experts.down_proj"),
           (r"\.feed_forward\.expert_output_norm\.scale$", ".mlp.experts.post_expert_norm.weight"),
           (r"\.feed_forward\.shared_up_proj$", ".mlp.shared_experts.up_proj.weight"),         # stored [in, out]
           (r"\.feed_forward\.shared_down_proj$", ".mlp.shared_experts.down_proj.weight"),
           (r"\.feed_forward\.shared_expert_output_norm\.scale$", ".mlp.shared_experts.norm.weight")]
TRANSPOSED = ("feed_forward.gate_kernel", "feed_forward.shared_up_proj", "feed_forward.shared_down_proj")


def hf_tensors(cfg, ckpt) -> dict:
    """The released names under the modules' (transposed where stored [in, out]); q / k / v as row ranges of
    qkv_proj; each expert's up [inter, hidden] and down [hidden, inter] from the 3-D [E, hidden, inter] /
    [E, inter, hidden] (the last one read kept for the next expert)."""
    out, held = {}, {}

    def read(src, e=None, t=False, rows=None):
        def make():
            if src not in held:
                held.clear()
                held[src] = ckpt.f32(src)
            a = held[src] if e is None else held[src][e]
            a = a.T if t else a
            return np.ascontiguousarray(a[rows[0]:rows[1]] if rows else a)
        return make

    module = {}
    for name in ckpt.names():
        new = name
        for pat, rep in RENAMES:
            new = re.sub(pat, rep, new)
        module[new] = name
        if new != name:
            shape = tuple(ckpt.info(name)[1])
            t = name.endswith(TRANSPOSED)
            out[new] = (shape[::-1] if t else shape, read(name, t=t), (name,))
    H, KV, hd, D = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.hidden_size
    E, F = cfg.num_experts, cfg.moe_intermediate_size
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        src = module.get(p + "self_attn.qkv_proj.weight")
        for n, r0, r1 in (("q", 0, H * hd), ("k", H * hd, (H + KV) * hd), ("v", (H + KV) * hd, (H + 2 * KV) * hd)):
            if src is not None:
                out[f"{p}self_attn.{n}_proj.weight"] = ((r1 - r0, D), read(src, rows=(r0, r1)), (src,))
        for n, shape in (("up_proj", (F, D)), ("down_proj", (D, F))):
            src = module.get(f"{p}mlp.experts.{n}")
            for e in range(E if src is not None else 0):
                out[f"{p}mlp.experts.{e}.{n}.weight"] = (shape, read(src, e, t=True), (src,))
    return out
