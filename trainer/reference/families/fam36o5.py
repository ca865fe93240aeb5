"""The fam36o group of issue 36, written from transformers 5.25's modeling_hrm_text.py.

HRM-Text (HrmTextForCausalLM), its plain causal-LM call (no token_type_ids: no prefix-LM block): two stacks
(L_module, H_module) of num_layers_per_stack pre-norm blocks, every RMSNorm without weight: x = rms(h); the heads'
attention (q, k, v of num_attention_heads x head_dim, RoPE rotate-half, biases with attention_bias) times
sigmoid(gate_proj x), o_proj, added; a SwiGLU MLP of rms(h), added; each stack ends in rms. z_H = embeddings x
embedding_scale (default 1 / initializer_range), z_L = z_L_init; H_cycles times: L_cycles times z_L = L(z_L + z_H),
then z_H = H(z_H + z_L); logits = lm_head z_H. Names are the modules' (a `.petit` file stores the released fused
attn.gqkv_proj / mlp.gate_up_proj split, attn.o_proj as self_attn.o_proj)."""
import numpy as np

from trainer.reference import ops
from trainer.reference.families.common import activation, get, rope
from trainer.reference.spec import LayerSpec, ModelSpec

FAMILIES = {}


def hrm_text(cfg, names):
    H, hd = cfg["num_attention_heads"], get(cfg, "head_dim", 128)
    eps, Hc, Lc = get(cfg, "rms_norm_eps", 1e-6), get(cfg, "H_cycles", 2), get(cfg, "L_cycles", 3)
    per = get(cfg, "num_layers_per_stack", cfg["num_hidden_layers"])
    scale = get(cfg, "embedding_scale", 1.0 / get(cfg, "initializer_range", 0.02))
    bias, mlp_bias, act = get(cfg, "attention_bias", False), get(cfg, "mlp_bias", False), \
        activation(cfg, "hidden_act", "silu")
    r = rope(cfg, hd)
    head = "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight"
    spec = ModelSpec("hrm_text", H, H, hd, "model.embed_tokens.weight", head, None, act=act,
                     extra_names=("model.z_L_init",))
    unit = lambda x: ops.norm(x, "rms", eps, None, None)       # noqa: E731

    def block(f, h, p):
        T, a, m = h.shape[0], p + "self_attn.", p + "mlp."
        b = lambda n, on: a + n + "_proj.bias" if on else None      # noqa: E731
        x = unit(h)
        q, k, v = (f.mm(x, a + f"{c}_proj.weight", b(c, bias)).reshape(T, H, hd) for c in "qkv")
        inv, factor = r.freqs(T)
        q, k = (ops.rotate(z, hd, inv, factor, False) for z in (q, k))
        out = ops.attention(q, k, v, hd ** -0.5, 0.0, 0)
        out = out / (1.0 + np.exp(-f.mm(x, a + "gate_proj.weight", b("gate", bias))))
        h = h + f.mm(out, a + "o_proj.weight", b("o", bias))
        y = unit(h)
        g, u = (f.mm(y, m + f"{c}_proj.weight", m + f"{c}_proj.bias" if mlp_bias else None) for c in ("gate", "up"))
        return h + f.mm(ops.glu(act, g, u), m + "down_proj.weight", m + "down_proj.bias" if mlp_bias else None)

    def stack(f, h, s):
        for j in range(per):
            h = block(f, h, f"model.{s}_module.layers.{j}.")
        return unit(h)

    def forward(f, ids):
        z_h = f.w("model.embed_tokens.weight")[ids] * scale
        z_l = np.broadcast_to(f.w("model.z_L_init"), z_h.shape)
        for _ in range(Hc):
            for _ in range(Lc):
                z_l = stack(f, z_l + z_h, "L")
            z_h = stack(f, z_h + z_l, "H")
        return f.mm(z_h, head)

    spec.forward = forward
    # the unrolled passes' matrices by role (verify's depth and its matrix check); the forward above computes
    for s in (["L"] * Lc + ["H"]) * Hc:
        for j in range(per):
            p = f"model.{s}_module.layers.{j}."
            spec.layers.append(LayerSpec(**{c: p + f"self_attn.{c}_proj.weight" for c in "qkvo"},
                                         attn_gate=p + "self_attn.gate_proj.weight",
                                         **{c: p + f"mlp.{c}_proj.weight" for c in ("gate", "up", "down")}))
    return spec


FAMILIES["hrm_text"] = hrm_text
