"""GGUF files of the hybrid group of issue 30: llama.cpp's conversion of Bamba. Imported by gguf_archs, whose
config_from_gguf sends a `granitehybrid` file with a dense MLP in its first layer here.

What the file holds (llama.cpp's conversion/granite.py GraniteHybridModel, which registers BambaForCausalLM, and
src/models/granite-hybrid.cpp): Granite 4.0-H's layout with Bamba's tensors, `attention.head_count_kv` 0 for the
Mamba-2 layers, the SwiGLU MLP as `ffn_gate` / `ffn_up` / `ffn_down` (Granite 4.0-H's dense files have
`ffn_*_shexp`), `rope.scaling.finetuned` true (the converter's switch for RoPE, which it sets for Bamba), q / k
permuted for adjacent-pair RoPE, and the gated norm per group (as Bamba's own). The converter writes no rotary
fraction for Bamba (BambaConfig hard-codes 0.5 and has no `attn_rotary_emb`), so the file's `rope.dimension_count` is
the whole head and llama.cpp rotates all of it: Petit reading the file follows the file (partial_rotary_factor 1),
which is llama.cpp's model, 0.33 of the logit range away from transformers' on the fixture."""
from petit.loading.gguf_names import LLAMA_LAYER, GGUFArch
from petit.loading.gguf_ssm import G, G_WHOLE, HYBRID, MAMBA2_FIXES, _per_layer, _ssm


def is_bamba(name: str, meta: dict, tensors) -> bool:
    """A granitehybrid file written from Bamba: no experts and a dense MLP (ffn_gate) in its first layer."""
    return (name == "granitehybrid" and not meta.get("granitehybrid.expert_count")
            and "blk.0.ffn_gate.weight" in tensors)


def _bamba(meta, key, cfg, has):
    for gguf_key in ("embedding_scale", "residual_scale", "attention.scale", "logit_scale"):
        if meta.get(key(gguf_key)) not in (None, 0.0, 1.0):
            raise ValueError(f"a granitehybrid file with a dense MLP and Granite's {gguf_key} is not Bamba's; "
                             f"Petit reads such a file as Bamba only")
    n = cfg["num_hidden_layers"]
    kv = _per_layer(meta, key("attention.head_count_kv"), n)
    s = _ssm(meta, key, cfg)
    mamba = next((i for i in range(n) if not kv[i]), 0)
    attn = [i for i in range(n) if kv[i]]
    cfg.update(attn_layer_indices=attn, mamba_n_heads=s["time_step_rank"],
               mamba_n_groups=int(meta[key("ssm.group_count")]), mamba_d_state=s["state_size"],
               mamba_d_conv=s["conv_kernel"], mamba_expand=s["expand"],
               mamba_d_head=s["inner_size"] // s["time_step_rank"],
               mamba_conv_bias=has(f"blk.{mamba}.ssm_conv1d.bias"),
               partial_rotary_factor=cfg.get("partial_rotary_factor", 1.0), rope_interleaved=True,
               attention_bias=has(f"blk.{attn[0] if attn else 0}.attn_q.bias"), mlp_bias=has("blk.0.ffn_up.bias"))
    if not meta.get(key("rope.scaling.finetuned")):
        raise ValueError("a granitehybrid file with a dense MLP and no RoPE (rope.scaling.finetuned false) is not "
                         "Bamba's")


HYBRID5_ARCHS = {
    "granitehybrid/bamba": GGUFArch("bamba", {**LLAMA_LAYER, "ffn_norm": "pre_ff_layernorm",
                                              **{f"ffn_{n}": f"feed_forward.{n}_proj" for n in ("gate", "up", "down")},
                                              **G},
                                    {"token_embd": "model.embed_tokens", "output_norm": "model.final_layernorm",
                                     "output": "lm_head"},
                                    fixes=MAMBA2_FIXES, whole_names=G_WHOLE, layer_arrays=HYBRID, extra=_bamba),
}
