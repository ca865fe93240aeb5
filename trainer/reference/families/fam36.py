"""The families of issue 36's fam36a group: openai-gpt (GPT-1: learned positions, post-LN blocks x = ln_1(x +
attn(x)), x = ln_2(x + mlp(x)), no final norm, tied head; its afn "gelu" is the tanh approximation) and xglm
(embeddings times sqrt(d_model), fairseq's sinusoidal positions, stored by the engine's checkpoint reader under
model.embed_positions.weight, pre-LN blocks with biases, a final LayerNorm) and biogpt (xglm's block over learned
positions at position + 2, every LayerNorm at eps 1e-5, the head `output_projection`). The tensor
names are those of the engine's checkpoint reader (c_attn split into q / k / v, Conv1D weights transposed)."""
from trainer.reference.families.common import activation, get, layer, refuse
from trainer.reference.spec import LayerSpec, ModelSpec

OPENAI_GPT_ACTS = {"gelu": "gelu_tanh", "relu": "relu", "silu": "silu", "swish": "silu"}


def openai_gpt(cfg, names):
    D, H, P = cfg["n_embd"], cfg["n_head"], "transformer."
    eps = get(cfg, "layer_norm_epsilon", 1e-5)
    afn = get(cfg, "afn", "gelu")
    if afn not in OPENAI_GPT_ACTS:
        raise ValueError(f"the reference does not model afn={afn!r} of openai-gpt")
    tied = get(cfg, "tie_word_embeddings", True)
    spec = ModelSpec("openai-gpt", H, H, D // H, P + "tokens_embed.weight",
                     P + "tokens_embed.weight" if tied else "lm_head.weight", None, act=OPENAI_GPT_ACTS[afn],
                     pos_embed=P + "positions_embed.weight")
    for i in range(cfg["n_layer"]):
        a, m = f"{P}h.{i}.attn.", f"{P}h.{i}.mlp."
        spec.layers.append(LayerSpec(
            q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "c_proj.weight",
            q_b=a + "q_proj.bias", k_b=a + "k_proj.bias", v_b=a + "v_proj.bias", o_b=a + "c_proj.bias",
            up=m + "c_fc.weight", up_b=m + "c_fc.bias", down=m + "c_proj.weight", down_b=m + "c_proj.bias",
            resid_attn_norm=layer(f"{P}h.{i}.ln_1", eps, names), resid_mlp_norm=layer(f"{P}h.{i}.ln_2", eps, names)))
    return spec


def xglm(cfg, names):
    refuse(cfg, add_cross_attention=False)
    D, H, P, eps = cfg["d_model"], cfg["attention_heads"], "model.", 1e-5
    tied = get(cfg, "tie_word_embeddings", True)
    spec = ModelSpec("xglm", H, H, D // H, P + "embed_tokens.weight",
                     P + "embed_tokens.weight" if tied else "lm_head.weight", layer(P + "layer_norm", eps, names),
                     act=activation(cfg, "activation_function", "gelu"), pos_embed=P + "embed_positions.weight",
                     embed_scale=D ** 0.5 if get(cfg, "scale_embedding", True) else 1.0)
    for i in range(cfg["num_layers"]):
        p = f"{P}layers.{i}."
        a = p + "self_attn."
        spec.layers.append(LayerSpec(
            q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "out_proj.weight",
            q_b=a + "q_proj.bias", k_b=a + "k_proj.bias", v_b=a + "v_proj.bias", o_b=a + "out_proj.bias",
            up=p + "fc1.weight", up_b=p + "fc1.bias", down=p + "fc2.weight", down_b=p + "fc2.bias",
            attn_norm=layer(p + "self_attn_layer_norm", eps, names),
            mlp_norm=layer(p + "final_layer_norm", eps, names)))
    return spec


def biogpt(cfg, names):
    D, H, P, eps = cfg["hidden_size"], cfg["num_attention_heads"], "biogpt.", 1e-5
    tied = get(cfg, "tie_word_embeddings", True)
    spec = ModelSpec("biogpt", H, H, D // H, P + "embed_tokens.weight",
                     P + "embed_tokens.weight" if tied else "output_projection.weight",
                     layer(P + "layer_norm", eps, names), act=activation(cfg, "hidden_act", "gelu"),
                     pos_embed=P + "embed_positions.weight", pos_offset=2,
                     embed_scale=D ** 0.5 if get(cfg, "scale_embedding", True) else 1.0)
    for i in range(cfg["num_hidden_layers"]):
        p = f"{P}layers.{i}."
        a = p + "self_attn."
        spec.layers.append(LayerSpec(
            q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "out_proj.weight",
            q_b=a + "q_proj.bias", k_b=a + "k_proj.bias", v_b=a + "v_proj.bias", o_b=a + "out_proj.bias",
            up=p + "fc1.weight", up_b=p + "fc1.bias", down=p + "fc2.weight", down_b=p + "fc2.bias",
            attn_norm=layer(p + "self_attn_layer_norm", eps, names),
            mlp_norm=layer(p + "final_layer_norm", eps, names)))
    return spec


FAMILIES = {"openai-gpt": openai_gpt, "xglm": xglm, "biogpt": biogpt}
