"""The jetmoe group of issue 30: JetMoE, written from transformers 5.25's modeling_jetmoe. Its mixture of attention
heads is read in the layout Petit stores (petit/models/families/moe/jetmoe.py): q holds every attention expert's query
heads (head h * E + e: expert e's head h, reading kv head h), o every expert's output columns in that order, and the
attention router `self_attention.experts.router.layer` weighs each token's heads: the softmax of its top k logits
for the chosen experts, 0 for the others (forward.py, LayerSpec.moa_router). The MLP: routed SwiGLU experts (top k
logits, softmax over those, which equals a softmax over all renormalised over the chosen), then `mlp.bias`. The
blocks' norms use eps 1e-6, only the final one rms_norm_eps (as transformers builds them)."""
from trainer.reference.families.common import get, rms, rope
from trainer.reference.families.moe import _experts
from trainer.reference.spec import LayerSpec, ModelSpec, MoeSpec


def jetmoe(cfg, names):
    KV, hd = int(get(cfg, "num_key_value_heads", 16)), int(get(cfg, "kv_channels", 128))
    E, k = int(get(cfg, "num_local_experts", 8)), int(get(cfg, "num_experts_per_tok", 2))
    if get(cfg, "activation_function", "silu") not in ("silu", "swish"):
        raise ValueError(f"the reference does not model activation_function={cfg['activation_function']!r}")
    eps = get(cfg, "rms_norm_eps", 1e-6)
    spec = ModelSpec("jetmoe", KV * E, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", True) else "lm_head.weight",
                     rms("model.norm", eps))
    eps = 1e-6                      # the blocks' norms: JetMoeRMSNorm's default, not rms_norm_eps
    r = rope(cfg, hd)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        spec.layers.append(LayerSpec(
            q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "o_proj.weight",
            o_b=p + "self_attention.experts.bias", moa_router=p + "self_attention.experts.router.layer.weight",
            moa_top_k=k, moe=MoeSpec(p + "mlp.router.layer.weight", _experts(p, "mlp", E), k, True),
            down_b=p + "mlp.bias", rope=r, attn_norm=rms(p + "input_layernorm", eps),
            mlp_norm=rms(p + "post_attention_layernorm", eps)))
    return spec


FAMILIES = {"jetmoe": jetmoe}
