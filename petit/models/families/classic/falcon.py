"""Falcon (TII), all three layouts transformers reads, from one fused `query_key_value` split into q, k and v when
read (a converted .petit holds `self_attention.q_proj` / `k_proj` / `v_proj`):
- the original (Falcon-7B): `multi_query`, rows [q (all heads) | k | v] of one key / value head; with `parallel_attn`
  one `input_layernorm` feeds attention and MLP side by side, else attention then `post_attention_layernorm` and
  the MLP in sequence; no multi-query: per head [q_h; k_h; v_h];
- `new_decoder_architecture` (Falcon-40B / 180B): `num_kv_heads` groups, each [its heads' q | k | v], and two norms
  `ln_attn`, `ln_mlp` (or one `input_layernorm` with `num_ln_in_parallel_attn` 1) feeding a parallel block;
- `alibi` (Falcon-RW): no RoPE; BLOOM's slopes added before the 1/sqrt(head_dim) scale, as transformers' default
  (sdpa) attention computes softmax((q.k + alibi) / sqrt(d)).
LayerNorm with bias, GELU MLP, `bias` switching every projection's biases, tied head by default."""
from petit.models.blocks.alibi import bloom_slopes
from petit.models.blocks.common import default_rope
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm, Vec
from petit.models.families.classic.falcon_config import FalconConfig

P = "transformer."


def hf_tensors(cfg: FalconConfig, ckpt) -> dict:
    import numpy as np
    out = {}
    for i in range(cfg.num_hidden_layers):
        a = f"{P}h.{i}.self_attention."
        for kind in ("weight", "bias"):
            src = a + f"query_key_value.{kind}"
            if src not in ckpt:
                continue
            for part, ranges in zip(("q_proj", "k_proj", "v_proj"), cfg.qkv_rows()):
                n = sum(b - a_ for a_, b in ranges)
                shape = (n, cfg.hidden_size) if kind == "weight" else (n,)
                out[a + f"{part}.{kind}"] = (shape, lambda s=src, r=ranges: np.concatenate(
                    [ckpt.f32(s)[a_:b] for a_, b in r]), (src,))
    return out


def build(cfg: FalconConfig, t):
    D, F, eps, H, KV, hd = (cfg.hidden_size, cfg.ffn_hidden_size, cfg.layer_norm_epsilon, cfg.num_attention_heads,
                            cfg.kv_heads, cfg.head_dim)

    def ln(name):
        return Norm("layer", eps, t.vec(name + ".weight", (D,)), t.vec(name + ".bias", (D,)))

    b = cfg.bias
    E = t.weight(P + "word_embeddings.weight", (cfg.vocab_size, D))
    rope = None if cfg.alibi else default_rope(cfg, dim=hd)
    slopes = Vec(bloom_slopes(H) * hd ** -0.5) if cfg.alibi else None
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"{P}h.{i}."
        a, m = p + "self_attention.", p + "mlp."
        L = Layer(q=t.weight(a + "q_proj.weight", (H * hd, D)), k=t.weight(a + "k_proj.weight", (KV * hd, D)),
                  v=t.weight(a + "v_proj.weight", (KV * hd, D)), o=t.weight(a + "dense.weight", (D, D)),
                  up=t.weight(m + "dense_h_to_4h.weight", (F, D)), down=t.weight(m + "dense_4h_to_h.weight", (D, F)),
                  rope=rope, alibi=slopes)
        if b:
            L.q_b, L.k_b, L.v_b = (t.vec(a + f"{n}_proj.bias", (w,)) for n, w in (("q", H * hd), ("k", KV * hd),
                                                                                   ("v", KV * hd)))
            L.o_b, L.up_b, L.down_b = (t.vec(a + "dense.bias", (D,)), t.vec(m + "dense_h_to_4h.bias", (F,)),
                                       t.vec(m + "dense_4h_to_h.bias", (D,)))
        if cfg.new_decoder_architecture and cfg.num_ln_in_parallel_attn == 2:
            # llama.cpp's falcon names ln_attn attn_norm_2 and ln_mlp its one attn_norm (input_layernorm here)
            second = p + ("ln_mlp" if t.has(p + "ln_mlp.weight") else "input_layernorm")
            L.attn_norm, L.mlp_norm = ln(p + "ln_attn"), ln(second)
        else:
            L.attn_norm = ln(p + "input_layernorm")
            if not cfg.parallel_attn:
                L.mlp_norm = ln(p + "post_attention_layernorm")
        layers.append(L)
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    ctx = rope.context_length if rope is not None else cfg.max_position_embeddings
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=KV, head_dim=hd, context_length=ctx, act=cfg.act, parallel=cfg.parallel_attn)
    return Decoder(arch, E, layers, ln(P + "ln_f"), head)


Config = FalconConfig
