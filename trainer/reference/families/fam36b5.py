"""The fam36b group of issue 36: GPT-NeoX-Japanese, written from transformers 5.25's modeling_gpt_neox_japanese. Read
in the layout a `.petit` file stores (the per-head fused query_key_value split into q / k / v): LayerNorms with
bias, partial rotary (partial_rotary_factor, default 1), a sequential residual, a GELU MLP without biases of
hidden_size * intermediate_multiple_size, no attention biases but the last layer's `attention.dense_bias` added to
its output."""
from trainer.reference.families.common import activation, get, layer, rope
from trainer.reference.spec import LayerSpec, ModelSpec


def gpt_neox_japanese(cfg, names):
    H, P, n = cfg["num_attention_heads"], "gpt_neox_japanese.", cfg["num_hidden_layers"]
    hd, eps = cfg["hidden_size"] // H, get(cfg, "layer_norm_eps", 1e-5)
    pct = cfg.get("rotary_pct") or get(cfg, "partial_rotary_factor", 1.0)
    theta = cfg.get("rotary_emb_base") or get(cfg, "rope_theta", 10000.0)
    tied = get(cfg, "tie_word_embeddings", True)
    spec = ModelSpec("gpt_neox_japanese", H, H, hd, P + "embed_in.weight",
                     P + "embed_in.weight" if tied else "embed_out.weight",
                     layer(P + "final_layer_norm", eps, names), act=activation(cfg, "hidden_act", "gelu"))
    r = rope(cfg, int(hd * pct), theta=theta)
    for i in range(n):
        p = f"{P}layers.{i}."
        a, m = p + "attention.", p + "mlp."
        spec.layers.append(LayerSpec(
            q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "dense.weight",
            o_b=a + "dense_bias" if i == n - 1 else None,
            up=m + "dense_h_to_4h.weight", down=m + "dense_4h_to_h.weight", rope=r,
            attn_norm=layer(p + "input_layernorm", eps, names), mlp_norm=layer(p + "post_attention_layernorm", eps,
                                                                               names)))
    return spec


FAMILIES = {"gpt_neox_japanese": gpt_neox_japanese}
