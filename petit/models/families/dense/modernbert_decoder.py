"""ModernBERT's decoder (`modernbert-decoder`, ModernBertDecoderForCausalLM: the Ettin decoders): ModernBERT's blocks
under a causal mask.

- The token embedding (`model.embeddings.tok_embeddings`) LayerNorm-ed (`embeddings.norm`) before the first block;
  every LayerNorm has a bias only with `norm_bias`.
- Pre-norm blocks, the first without an attention norm (transformers' nn.Identity): h += Wo·attn(attn_norm(h)),
  h += mlp(mlp_norm(h)). q / k / v / Wo of hidden_size (heads of hidden / heads, no grouping), biases with
  `attention_bias`.
- Layers alternate: `layer_types` (default every `global_attn_every_n_layers`-th full, the others sliding). A full
  layer's RoPE has base rope_theta (160000), a sliding one's its own (10000) and a window of `sliding_window`
  positions: transformers derives it as local_attention // 2 (half of ModernBERT's bidirectional window) and saves
  it, and a saved value is what it reads (its config sets the file's keys after deriving).
- GeGLU: [input; gate] = Wi·x, Wo(act(input) * gate), biases with `mlp_bias`. Wi is split when read: its first
  intermediate_size rows (`mlp.Wi.input`) are the activated half, Petit's gate; the others (`mlp.Wi.gate`) its up.
- Its own head: the final LayerNorm (`model.final_norm`), then the prediction head norm(act(dense·x + b))
  (`lm_head.dense` with `classifier_bias`, `classifier_activation`, `lm_head.norm`), then `decoder` (tied to the
  embedding by default) with its bias (`decoder_bias`)."""
from petit.models.blocks.common import window_of
from petit.models.blocks.config import ACT_NAMES
from petit.models.blocks.decoder import Arch, Decoder, HeadDense, Layer, Norm
from petit.models.blocks.rope import Rope
from petit.models.families.dense.modernbert_decoder_config import ModernBertDecoderConfig


def split_wi(cfg: ModernBertDecoderConfig, ckpt, P: str = "model.") -> dict:
    """Each Wi (and its bias) under `P` as its two halves: rows 0..F-1 the activated `input`, F..2F-1 the `gate`."""
    D, F = cfg.hidden_size, cfg.intermediate_size
    out = {}
    for i in range(cfg.num_hidden_layers):
        for kind, shape in (("weight", (F, D)), ("bias", (F,))):
            src = f"{P}layers.{i}.mlp.Wi.{kind}"
            if src in ckpt:
                for half, (a, b) in (("input", (0, F)), ("gate", (F, 2 * F))):
                    out[f"{P}layers.{i}.mlp.Wi.{half}.{kind}"] = (shape, lambda s=src, a=a, b=b: ckpt.f32(s)[a:b],
                                                                  (src,))
    return out


hf_tensors = split_wi


def layer_norm(cfg: ModernBertDecoderConfig, t, name: str) -> Norm:
    D = cfg.hidden_size
    return Norm("layer", cfg.norm_eps, t.vec(name + ".weight", (D,)),
                t.vec(name + ".bias", (D,)) if cfg.norm_bias else None)


def blocks(cfg: ModernBertDecoderConfig, t, P: str, window, bidirectional: bool = False) -> list:
    """The blocks under `P` + layers.N. (q / k / v as q_proj / k_proj / v_proj, Wi split by split_wi); window(i):
    layer i's window in Petit's terms; bidirectional: ModernBERT's encoder (issue 35)."""
    D, F, H = cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads
    types = cfg.types()
    full = Rope(D // H, cfg.rope_theta, None, cfg.max_position_embeddings)
    local = Rope(D // H, cfg.rope_local_base_freq, None, cfg.max_position_embeddings)
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"{P}layers.{i}."
        a, m = p + "attn.", p + "mlp."
        L = Layer(q=t.weight(a + "q_proj.weight", (D, D)), k=t.weight(a + "k_proj.weight", (D, D)),
                  v=t.weight(a + "v_proj.weight", (D, D)), o=t.weight(a + "Wo.weight", (D, D)),
                  gate=t.weight(m + "Wi.input.weight", (F, D)), up=t.weight(m + "Wi.gate.weight", (F, D)),
                  down=t.weight(m + "Wo.weight", (D, F)),
                  rope=local if types[i] == "sliding_attention" else full, window=window(i),
                  attn_norm=layer_norm(cfg, t, p + "attn_norm") if i else None,
                  mlp_norm=layer_norm(cfg, t, p + "mlp_norm"), bidirectional=bidirectional)
        if cfg.attention_bias:
            L.q_b, L.k_b, L.v_b, L.o_b = (t.vec(a + n + ".bias", (D,)) for n in ("q_proj", "k_proj", "v_proj", "Wo"))
        if cfg.mlp_bias:
            L.gate_b, L.up_b = t.vec(m + "Wi.input.bias", (F,)), t.vec(m + "Wi.gate.bias", (F,))
            L.down_b = t.vec(m + "Wo.bias", (D,))
        layers.append(L)
    return layers


def build(cfg: ModernBertDecoderConfig, t):
    D, F, H = cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads
    E = t.weight("model.embeddings.tok_embeddings.weight", (cfg.vocab_size, D))
    embed_norm = layer_norm(cfg, t, "model.embeddings.norm")
    layers = blocks(cfg, t, "model.", window_of(cfg, cfg.types()))
    final = layer_norm(cfg, t, "model.final_norm")
    dense = HeadDense(t.weight("lm_head.dense.weight", (D, D)),
                      t.vec("lm_head.dense.bias", (D,)) if cfg.classifier_bias else None,
                      ACT_NAMES[cfg.classifier_activation], layer_norm(cfg, t, "lm_head.norm"),
                      "lm_head.dense.weight")
    head = E if cfg.tie_word_embeddings else t.weight("decoder.weight", (cfg.vocab_size, D))
    head_b = t.vec("decoder.bias", (cfg.vocab_size,)) if cfg.decoder_bias else None
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=H, head_dim=D // H, context_length=cfg.max_position_embeddings, act=cfg.act)
    return Decoder(arch, E, layers, final, head, lm_head_b=head_b, embed_norm=embed_norm, head_dense=dense)


Config = ModernBertDecoderConfig
