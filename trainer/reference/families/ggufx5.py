"""Issue 30, the ggufx group: rwkv6qwen2 (QRWKV6, llama.cpp's rwkv6qwen2; no transformers class) in the checkpoint
layout llama.cpp's converter reads: Qwen2's blocks (RMSNorms, SwiGLU MLP) around RWKV-6's time mixing as gated
linear attention (trainer/reference/spec.py GlaSpec)."""
from trainer.reference.spec import GlaSpec, LayerSpec, ModelSpec, NormSpec


def rwkv6qwen2(cfg, names):
    D, L, H = cfg["hidden_size"], cfg["num_hidden_layers"], cfg.get("num_attention_heads")
    N = cfg.get("head_size") or D // H
    H, Hk = D // N, cfg.get("num_key_value_heads") or D // N
    eps = cfg.get("rms_norm_eps", 1e-6)
    rms = lambda n: NormSpec("rms", eps, n + ".weight")      # noqa: E731
    spec = ModelSpec("rwkv6qwen2", H, H, N, "model.embed_tokens.weight", "lm_head.weight", rms("model.norm"))
    for i in range(L):
        p = f"model.layers.{i}."
        a = p + "self_attn."

        def bias(n):
            return a + n + ".bias" if a + n + ".bias" in names else None
        spec.layers.append(LayerSpec(
            q=None, k=None, v=None, o=None, attn_norm=rms(p + "input_layernorm"),
            mlp_norm=rms(p + "post_attention_layernorm"), gate=p + "mlp.gate_proj.weight",
            up=p + "mlp.up_proj.weight", down=p + "mlp.down_proj.weight",
            gla=GlaSpec(a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight", a + "gate.weight",
                        a + "o_proj.weight", bias("q_proj"), bias("k_proj"), bias("v_proj"),
                        tuple(a + f"time_maa_{c}" for c in "xwkvrg"), a + "time_maa_w1", a + "time_maa_w2",
                        a + "time_decay_w1", a + "time_decay_w2", a + "time_decay", H, Hk)))
    return spec


FAMILIES = {"rwkv6qwen2": rwkv6qwen2}
