"""DBRX (Databricks), as transformers runs it: Llama-like attention from one fused `Wqkv` ([q | k | v] rows, split
when read) clamped to +-`attn_config.clip_qkv` before the split, `attn_config.kv_n_heads` key / value heads,
rotate-half RoPE of `attn_config.rope_theta`; LayerNorms with a weight and no bias (`norm_attn_norm.norm_1` /
`norm_2`, `norm_f`); routed experts in every layer: softmax over `ffn.router.layer`'s logits, the top `moe_top_k`
divided by their p-norm (`moe_normalize_expert_weights`: 1 renormalises them to sum 1; None keeps them), each expert
a GLU of `ffn_hidden_size` whose three matrices are stacked over the experts in `ffn.experts.mlp.w1` (gate), `v1`
(up) and `w2` ([experts x ffn_hidden_size, d_model] as well: the down matrix transposed), sliced when read."""
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm
from petit.models.blocks.moe import Moe
from petit.models.blocks.rope import Rope
from petit.models.families.moe.dbrx_config import DbrxConfig

P = "transformer."


def hf_tensors(cfg: DbrxConfig, ckpt) -> dict:
    """q / k / v from each `Wqkv`, and each expert's gate / up / down from the stacked `w1` / `v1` / `w2` (w2's
    slice transposed), read once per layer and tensor."""
    D, hd, F, E = cfg.d_model, cfg.head_dim, cfg.ffn_hidden_size, cfg.num_experts
    q, kv = cfg.n_heads * hd, cfg.kv_heads * hd
    out = {}
    for i in range(cfg.n_layers):
        p = f"{P}blocks.{i}."
        w = p + "norm_attn_norm.attn.Wqkv.weight"
        if w in ckpt:
            for part, (r0, r1) in (("q_proj", (0, q)), ("k_proj", (q, q + kv)), ("v_proj", (q + kv, q + 2 * kv))):
                out[f"{p}norm_attn_norm.attn.{part}.weight"] = (
                    (r1 - r0, D), lambda w=w, r0=r0, r1=r1: ckpt.f32(w)[r0:r1], (w,))
        held = {}

        def part(name, e, transpose, held=held):
            def make():
                if name not in held:
                    held.clear()
                    held[name] = ckpt.f32(name)
                block = held[name][e * F:(e + 1) * F]
                return block.T.copy() if transpose else block
            return make

        m = p + "ffn.experts.mlp."
        for e in range(E):
            x = f"{p}ffn.experts.{e}."
            for hf, mine, shape, tr in (("w1", "gate_proj", (F, D), False), ("v1", "up_proj", (F, D), False),
                                        ("w2", "down_proj", (D, F), True)):
                if m + hf in ckpt:
                    out[f"{x}{mine}.weight"] = (shape, part(m + hf, e, tr), [m + hf])
    return out


def build(cfg: DbrxConfig, t):
    D, H, KV, hd, F, E = cfg.d_model, cfg.n_heads, cfg.kv_heads, cfg.head_dim, cfg.ffn_hidden_size, cfg.num_experts

    def ln(name):
        return Norm("layer", 1e-5, t.vec(name + ".weight", (D,)))

    emb = t.weight(P + "wte.weight", (cfg.vocab_size, D))
    rope = Rope(hd, cfg.rope_theta, None, cfg.max_seq_len, None, False)
    layers = []
    for i in range(cfg.n_layers):
        p = f"{P}blocks.{i}."
        a, x = p + "norm_attn_norm.attn.", p + "ffn.experts."
        L = Layer(q=t.weight(a + "q_proj.weight", (H * hd, D)), k=t.weight(a + "k_proj.weight", (KV * hd, D)),
                  v=t.weight(a + "v_proj.weight", (KV * hd, D)), o=t.weight(a + "out_proj.weight", (D, H * hd)),
                  rope=rope, clip=cfg.clip)
        L.moe = Moe(t.float_weight(p + "ffn.router.layer.weight", (E, D)),
                    [t.weight(f"{x}{e}.gate_proj.weight", (F, D)) for e in range(E)],
                    [t.weight(f"{x}{e}.up_proj.weight", (F, D)) for e in range(E)],
                    [t.weight(f"{x}{e}.down_proj.weight", (D, F)) for e in range(E)], cfg.top_k, cfg.renormalise)
        L.attn_norm, L.mlp_norm = ln(p + "norm_attn_norm.norm_1"), ln(p + "norm_attn_norm.norm_2")
        layers.append(L)
    head = emb if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=KV, head_dim=hd, context_length=cfg.max_seq_len)
    return Decoder(arch, emb, layers, ln(P + "norm_f"), head)


Config = DbrxConfig
