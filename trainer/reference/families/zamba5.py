"""Issue 30, the zamba group: Zamba v1 from transformers 5.25's modeling_zamba.py, in float64. Every layer a
multi-head Mamba-1 mixer, x + mixer(RMSNorm(x + t)); in the hybrid layers t = linear_i(block([x | embeddings])) of
the one shared transformer block (stored once, under the first hybrid layer's shared_transf): RMSNorm over 2 x
hidden, attention scaled by (head_dim / 2)^-0.5 without RoPE, o_proj, RMSNorm, act(gate_proj) * up_proj, down_proj,
no adapters. The mixer's heads each take di / H channels with their own x_proj and dt_proj (the forward reads head
h's block of x_proj and dt_proj as a `.petit` file stores them: block-diagonal), so their own dt, B and C. Names are
those a `.petit` file stores (in_proj regrouped [x | z]: in_proj.xz)."""
import math

from trainer.reference.families.common import activation, get, rms
from trainer.reference.spec import LayerSpec, MambaSpec, ModelSpec, SharedSpec


def zamba(cfg, names):
    D, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV, hd = get(cfg, "num_key_value_heads", H), 2 * D // H
    eps = get(cfg, "rms_norm_eps", 1e-5)
    spec = ModelSpec("zamba", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", True) else "lm_head.weight",
                     rms("model.final_layernorm", eps), act=activation(cfg, "hidden_act", "gelu"))
    types = cfg.get("layers_block_type") or cfg.get("layer_types")
    hybrid = [i for i, t in enumerate(types) if t == "hybrid"]
    R = get(cfg, "mamba_dt_rank", "auto")
    R = math.ceil(D / 16) if R == "auto" else R
    for i in range(cfg["num_hidden_layers"]):
        p, shared = f"model.layers.{i}.", None
        if i in hybrid:
            b = f"model.layers.{hybrid[0]}.shared_transf."
            a, f = b + "self_attn.", b + "feed_forward."
            shared = SharedSpec(rms(b + "input_layernorm", eps), a + "q_proj.weight", a + "k_proj.weight",
                                a + "v_proj.weight", a + "o_proj.weight", rms(b + "pre_ff_layernorm", eps),
                                f + "gate_proj.weight", f + "up_proj.weight", f + "down_proj.weight",
                                p + "linear.weight", (hd / 2) ** -0.5)
            p += "mamba_decoder."
        m = p + "mamba."
        L = LayerSpec(q=None, k=None, v=None, o=None, shared=shared,
                      mamba=MambaSpec(m + "in_proj.xz.weight", m + "conv1d.weight",
                                      m + "conv1d.bias" if get(cfg, "mamba_conv_bias", True) else None,
                                      m + "x_proj.blocks.weight", m + "dt_proj.blocks.weight", m + "dt_proj_bias",
                                      m + "A_log", m + "D", m + "out_proj.weight", R,
                                      heads=get(cfg, "n_mamba_heads", 2)))
        L.attn_norm = rms(p + "input_layernorm", eps)
        spec.layers.append(L)
    return spec


FAMILIES = {"zamba": zamba}
