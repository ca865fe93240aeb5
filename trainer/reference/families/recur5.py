"""The recur group of issue 30, written from transformers 5.25's modeling file: recurrent_gemma (Griffin): layers
cycling block_types (recurrent: linear_x / linear_y, a causal conv and the RG-LRU, RglruSpec; attention: local
windowed GQA with partial RoPE and an o_proj bias), each followed by a gelu_tanh-gated MLP with biases; Gemma's
(1 + w) RMS norms, the embedding times sqrt(hidden_size) rounded to bfloat16, soft-capped logits."""
import math

from trainer.reference.families.common import activation, get, heads, rms, rope
from trainer.reference.spec import LayerSpec, ModelSpec, NormSpec, RglruSpec, Rwkv4Spec, Rwkv6Spec, Rwkv7Spec


def _bf16(v: float) -> float:
    """v to 8 significant bits, to nearest with ties to even (torch's float -> bfloat16)."""
    m, e = math.frexp(v)
    return round(m * 256) / 256 * 2.0 ** e


def recurrent_gemma(cfg, names):
    D = cfg["hidden_size"]
    H, KV, hd = heads(cfg)
    hd = D // H                                   # transformers derives it, whatever head_dim says
    eps = get(cfg, "rms_norm_eps", 1e-6)
    n = cfg["num_hidden_layers"]
    types = list(get(cfg, "block_types", ["recurrent", "recurrent", "attention"]))
    r = rope(cfg, int(hd * get(cfg, "partial_rotary_factor", 0.5)))
    spec = ModelSpec("recurrent_gemma", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", True) else "lm_head.weight",
                     rms("model.final_norm", eps, 1.0), act=activation(cfg, "hidden_activation", "gelu_pytorch_tanh"),
                     embed_scale=_bf16(math.sqrt(D)), logit_softcap=get(cfg, "logits_soft_cap", 30.0))
    for i in range(n):
        p = f"model.layers.{i}."
        b, m = p + "temporal_block.", p + "mlp_block."
        mlp = {k: f"{m}{k}_proj.weight" for k in ("gate", "up", "down")}
        mlp.update({k + "_b": f"{m}{k}_proj.bias" for k in ("gate", "up", "down")})
        if types[i % len(types)] == "recurrent":
            g = b + "rg_lru."
            L = LayerSpec(q=None, k=None, v=None, o=None, **mlp,
                          rglru=RglruSpec(b + "in_proj.weight", b + "linear_x.bias", b + "linear_y.bias",
                                          b + "conv_1d.weight", b + "conv_1d.bias", g + "input_gate_weight",
                                          g + "input_gate_bias", g + "recurrent_gate_weight",
                                          g + "recurrent_gate_bias", g + "recurrent_param", b + "linear_out.weight",
                                          b + "linear_out.bias", H))
        else:
            qkv_b = get(cfg, "attention_bias", False)
            L = LayerSpec(q=b + "q_proj.weight", k=b + "k_proj.weight", v=b + "v_proj.weight", o=b + "o_proj.weight",
                          q_b=b + "q_proj.bias" if qkv_b else None, k_b=b + "k_proj.bias" if qkv_b else None,
                          v_b=b + "v_proj.bias" if qkv_b else None, o_b=b + "o_proj.bias", rope=r,
                          window=get(cfg, "attention_window_size", 2048), **mlp)
        L.attn_norm, L.mlp_norm = rms(p + "temporal_pre_norm", eps, 1.0), rms(p + "channel_pre_norm", eps, 1.0)
        spec.layers.append(L)
    return spec


def rwkv6(cfg, names):
    """RWKV-6 in the Hub checkpoints' layout (model_type rwkv6), as llama.cpp runs it."""
    D, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    N = get(cfg, "head_size", 64)
    eps, R = get(cfg, "layer_norm_epsilon", 1e-5), get(cfg, "rescale_every", 6)
    ln = lambda n: NormSpec("layer", eps, n + ".weight", n + ".bias")      # noqa: E731
    spec = ModelSpec("rwkv6", D // N, D // N, N, "rwkv.embeddings.weight", "head.weight", ln("rwkv.ln_out"),
                     embed_norm=ln("rwkv.blocks.0.pre_ln"))
    for i in range(L):
        p = f"rwkv.blocks.{i}."
        a, c = p + "attention.", p + "feed_forward."
        spec.layers.append(LayerSpec(q=None, k=None, v=None, o=None, rwkv6=Rwkv6Spec(
            a + "receptance.weight", a + "key.weight", a + "value.weight", a + "gate.weight", a + "output.weight",
            c + "key.weight", c + "value.weight", c + "receptance.weight", ln(p + "ln1"), ln(p + "ln2"),
            a + "ln_x.weight", a + "ln_x.bias", tuple(a + f"time_maa_{k}" for k in "xwkvrg"), a + "time_maa_w1",
            a + "time_maa_w2", a + "time_decay_w1", a + "time_decay_w2", a + "time_decay", a + "time_faaaa",
            c + "time_maa_k", c + "time_maa_r", D // N, 1e-5 * get(cfg, "head_size_divisor", 8) ** 2,
            2.0 ** -(i // R) if R else 1.0, bool(R) and (i + 1) % R == 0)))
    return spec


def rwkv7(cfg, names):
    """RWKV-7 in fla-hub's layout (model_type rwkv7), as llama.cpp runs it."""
    D, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    N, eps = get(cfg, "head_dim", 64), get(cfg, "norm_eps", 1e-5)
    ln = lambda n: NormSpec("layer", eps, n + ".weight", n + ".bias")      # noqa: E731
    head = "model.embeddings.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight"
    spec = ModelSpec("rwkv7", D // N, D // N, N, "model.embeddings.weight", head, ln("model.norm"),
                     embed_norm=ln("model.layers.0.pre_norm"))
    gn_eps = get(cfg, "group_norm_eps", N * eps)
    for i in range(L):
        p = f"model.layers.{i}."
        a = p + "attn."
        lora = {c: (a + f"{c}_lora.lora.0.weight", a + f"{c}_lora.lora.2.weight",
                    None if c == "g" else a + f"{c}_lora.lora.2.bias") for c in "wavg" if not (c == "v" and i == 0)}
        spec.layers.append(LayerSpec(q=None, k=None, v=None, o=None, rwkv7=Rwkv7Spec(
            a + "r_proj.weight", a + "k_proj.weight", a + "v_proj.weight", a + "o_proj.weight", p + "ffn.key.weight",
            p + "ffn.value.weight", ln(p + "attn_norm"), ln(p + "ffn_norm"), a + "g_norm.weight", a + "g_norm.bias",
            tuple(a + f"x_{c}" for c in "rwkvag"), p + "ffn.x_k", a + "k_k", a + "k_a", a + "r_k", lora, D // N,
            gn_eps, i == 0)))
    return spec


def rwkv(cfg, names):
    """RWKV-4 (transformers' rwkv), with its inference rescaling."""
    D, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    eps, R = get(cfg, "layer_norm_epsilon", 1e-5), get(cfg, "rescale_every", 6)
    ln = lambda n: NormSpec("layer", eps, n + ".weight", n + ".bias")      # noqa: E731
    head = "rwkv.embeddings.weight" if get(cfg, "tie_word_embeddings", False) else "head.weight"
    spec = ModelSpec("rwkv", 1, 1, D, "rwkv.embeddings.weight", head, ln("rwkv.ln_out"),
                     embed_norm=ln("rwkv.blocks.0.pre_ln"))
    for i in range(L):
        p = f"rwkv.blocks.{i}."
        a, c = p + "attention.", p + "feed_forward."
        spec.layers.append(LayerSpec(q=None, k=None, v=None, o=None, rwkv4=Rwkv4Spec(
            a + "key.weight", a + "value.weight", a + "receptance.weight", a + "output.weight", c + "key.weight",
            c + "value.weight", c + "receptance.weight", ln(p + "ln1"), ln(p + "ln2"),
            tuple(a + f"time_mix_{n}" for n in ("key", "value", "receptance")),
            (c + "time_mix_key", c + "time_mix_receptance"), a + "time_decay", a + "time_first",
            2.0 ** -(i // R) if R else 1.0, bool(R) and (i + 1) % R == 0)))
    return spec


FAMILIES = {"recurrent_gemma": recurrent_gemma, "rwkv6": rwkv6, "rwkv7": rwkv7, "rwkv": rwkv}
