"""The fam36j group of issue 36, written from transformers 5.25's modeling code.

ModernBERT's decoder (modeling_modernbert_decoder): the embedding LayerNorm-ed, pre-LN blocks (layer 0 without an
attention norm) of q / k / v / Wo over heads of hidden / heads, RoPE of base rope_theta on the full layers and
rope_local_base_freq on the sliding ones (which see the last sliding_window positions), GeGLU act(input) * gate of
Wi's two halves (the engine's reader stores them as mlp.Wi.input / mlp.Wi.gate), then the final LayerNorm, the
prediction head LayerNorm(act(dense x + b)) and the decoder (tied to the embedding by default) with its bias. Every
LayerNorm has a bias only with norm_bias.

GIT (modeling_git), its text decoder as a text-only prompt runs it: word embeddings plus learned positions from 0,
LayerNorm-ed, BERT's post-LN blocks x = LN(x + dense attn(x) + b), x = LN(x + dense act(dense x + b) + b) (q / k / v
biases) under a causal mask, no final norm, the head `output` with its bias (the word embeddings when tied)."""
from trainer.reference.families.common import ACTS, activation, get, layer, layer_types, refuse, rope
from trainer.reference.spec import LayerSpec, ModelSpec


def modernbert_decoder(cfg, names):
    refuse(cfg, rope_scaling=None)
    D, H = get(cfg, "hidden_size", 768), get(cfg, "num_attention_heads", 12)
    hd, eps = D // H, get(cfg, "norm_eps", 1e-5)
    bias = {k: get(cfg, k, d) for k, d in (("norm_bias", False), ("attention_bias", False), ("mlp_bias", False),
                                           ("decoder_bias", True), ("classifier_bias", False))}
    n_global = get(cfg, "global_attn_every_n_layers", 3)
    types = layer_types(cfg, lambda i: "sliding_attention" if i % n_global else "full_attention")
    window = get(cfg, "sliding_window", get(cfg, "local_attention", 128) // 2)
    full = rope(cfg, hd, theta=get(cfg, "rope_theta", 160000.0), scaling=None)
    local = rope(cfg, hd, theta=get(cfg, "rope_local_base_freq", 10000.0), scaling=None)

    def ln(name):
        return layer(name, eps, names, bias=bias["norm_bias"])

    E = "model.embeddings.tok_embeddings.weight"
    tied = get(cfg, "tie_word_embeddings", True)
    dense, dense_b = "lm_head.dense.weight", "lm_head.dense.bias" if bias["classifier_bias"] else None
    head_norm = ln("lm_head.norm")
    spec = ModelSpec("modernbert-decoder", H, H, hd, E, E if tied else "decoder.weight", ln("model.final_norm"),
                     act=ACTS[get(cfg, "hidden_activation", "gelu")], embed_norm=ln("model.embeddings.norm"),
                     head_b="decoder.bias" if bias["decoder_bias"] else None,
                     head_dense=(dense, dense_b, ACTS[get(cfg, "classifier_activation", "gelu")], head_norm),
                     extra_names=(dense, dense_b, head_norm.weight, head_norm.bias))
    for i in range(get(cfg, "num_hidden_layers", 22)):
        p = f"model.layers.{i}."
        a, m = p + "attn.", p + "mlp."
        sliding = types[i] == "sliding_attention"
        L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "Wo.weight",
                      gate=m + "Wi.input.weight", up=m + "Wi.gate.weight", down=m + "Wo.weight",
                      attn_norm=ln(p + "attn_norm") if i else None, mlp_norm=ln(p + "mlp_norm"),
                      rope=local if sliding else full, window=window if sliding else 0)
        if bias["attention_bias"]:
            L.q_b, L.k_b, L.v_b, L.o_b = (a + n + ".bias" for n in ("q_proj", "k_proj", "v_proj", "Wo"))
        if bias["mlp_bias"]:
            L.gate_b, L.up_b, L.down_b = m + "Wi.input.bias", m + "Wi.gate.bias", m + "Wo.bias"
        spec.layers.append(L)
    return spec


def git(cfg, names):
    D, H = get(cfg, "hidden_size", 768), get(cfg, "num_attention_heads", 12)
    eps, P = get(cfg, "layer_norm_eps", 1e-12), "git."
    E = P + "embeddings.word_embeddings.weight"
    spec = ModelSpec("git", H, H, D // H, E, E if get(cfg, "tie_word_embeddings", False) else "output.weight", None,
                     act=activation(cfg, "hidden_act", "gelu"), pos_embed=P + "embeddings.position_embeddings.weight",
                     embed_norm=layer(P + "embeddings.LayerNorm", eps, names), head_b="output.bias")
    for i in range(get(cfg, "num_hidden_layers", 6)):
        p = f"{P}encoder.layer.{i}."
        a = p + "attention.self."
        spec.layers.append(LayerSpec(
            q=a + "query.weight", k=a + "key.weight", v=a + "value.weight", o=p + "attention.output.dense.weight",
            q_b=a + "query.bias", k_b=a + "key.bias", v_b=a + "value.bias", o_b=p + "attention.output.dense.bias",
            up=p + "intermediate.dense.weight", up_b=p + "intermediate.dense.bias", down=p + "output.dense.weight",
            down_b=p + "output.dense.bias", resid_attn_norm=layer(p + "attention.output.LayerNorm", eps, names),
            resid_mlp_norm=layer(p + "output.LayerNorm", eps, names)))
    return spec


FAMILIES = {"modernbert-decoder": modernbert_decoder, "git": git}
