"""The fam36k group of issue 36, written from transformers 5.25's modeling code.

Lara 4 Mini (modeling_lara_mini): Qwen3.5's Gated DeltaNet in the linear_attention layers (hybrid.qwen3_next's, its
gated norm plain), Qwen3's attention elsewhere (q / k RMSNorm per head, q / k / v / o biases with attention_bias, no
output gate; RoPE and the window in the sliding layers, neither in the full ones), plain RMSNorms x * w, and in every
layer experts on the softmax of the router logits (renormalised with norm_topk_prob) plus an ungated shared expert.
Default layer_types: the released period linear, sliding, linear, full, sliding.

Dots 3 Note Preview's language model (modeling_dots3_note, Dots3NoteTextModel): DeepSeek-V3.2's latent attention and
routing (mla5.glm_moe_dsa's indexer, on adjacent pairs) in the "indexed_attention" layers, the latent attention alone
in the "full_attention" and "sliding_attention" ones (the latter within sliding_window), each layer of its type's
sizes (per_layer_config) and RoPE theta (swa_rope_theta in the sliding ones); the normed latents times
sqrt(hidden / q_lora_rank) and sqrt(hidden / kv_lora_rank) (the indexer reads the scaled query latent), the latent
norms with rms_norm_eps, k_pe RMS-normed before RoPE, each head's output times sigmoid(g_proj x), softmax scale
(nope + rope)^-0.5 per layer, the shared experts as the file holds them. `dots3_note` (the released class) is its
language model, as a converted file holds it.
"""
from trainer.reference.families.common import get, heads, rms, rope
from trainer.reference.families.deepseek import _deepseek
from trainer.reference.families.hybrid import qwen3_next
from trainer.reference.families.mla5 import _dsa

LARA_PERIOD = ("linear_attention", "sliding_attention", "linear_attention", "full_attention", "sliding_attention")


def lara_mini(cfg, names):
    n, hd = cfg["num_hidden_layers"], heads(cfg)[2]
    types = cfg.get("layer_types") or [LARA_PERIOD[i % len(LARA_PERIOD)] for i in range(n)]
    r, w, bias = rope(cfg, hd), get(cfg, "sliding_window", 512), get(cfg, "attention_bias", False)

    def attention(kind, a):
        sliding = kind == "sliding_attention"
        out = {x: f"{a}{x}_proj.weight" for x in "qkvo"}
        if bias:
            out.update({f"{x}_b": f"{a}{x}_proj.bias" for x in "qkvo"})
        return dict(out, rope=r if sliding else None, window=w if sliding else 0)
    fixed = dict(cfg, layer_types=types, num_experts=get(cfg, "num_experts", 128), decoder_sparse_step=1,
                 mlp_only_layers=[])
    return qwen3_next(fixed, names, "lara_mini", add=0.0, attention=attention, shared_gate=False)


FAMILIES = {"lara_mini": lara_mini}

DOTS3_DIMS = ("num_attention_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
              "v_head_dim")


def dots3_note_text(cfg, names, family="dots3_note_text"):
    eps, D = get(cfg, "rms_norm_eps", 1e-5), cfg["hidden_size"]
    types = cfg["layer_types"]
    c = dict(cfg, n_group=get(cfg, "n_group", 1), topk_group=get(cfg, "topk_group", 1),
             routed_scaling_factor=get(cfg, "routed_scaling_factor", 1.0), rope_scaling=None)
    spec = _deepseek(c, names, family, v3=True, dsa=_dsa(c, interleaved=True))
    for i, L in enumerate(spec.layers):
        kind, a, m = types[i], f"model.layers.{i}.self_attn.", L.mla
        H, qr, r, dn, dr, dv = (dict((cfg.get("per_layer_config") or {}).get(str(i), {})).get(k, cfg[k])
                                for k in DOTS3_DIMS)
        m.k_absorb, m.v_absorb = ([f"{a}{x}_absorb.{h}.weight" for h in range(H)] for x in "kv")
        m.q_a_norm, m.kv_norm = rms(a + "q_a_layernorm", eps), rms(a + "kv_a_layernorm", eps)
        m.q_scale, m.kv_scale, m.scale = (D / qr) ** 0.5, (D / r) ** 0.5, (dn + dr) ** -0.5
        m.k_pe_norm, m.gate = rms(a + "k_rope_only_layernorm", eps), a + "g_proj.weight"
        if kind != "indexed_attention":
            m.dsa = None
        theta = cfg["swa_rope_theta"] if kind == "sliding_attention" else cfg["rope_theta"]
        L.rope = rope(c, dr, theta=theta, interleaved=True)
        L.window = cfg["sliding_window"] if kind == "sliding_attention" else 0
    return spec


def dots3_note(cfg, names):
    return dots3_note_text(cfg, names, "dots3_note")


FAMILIES.update({"dots3_note_text": dots3_note_text, "dots3_note": dots3_note})
