"""RWKV-6 (Finch) as its Hub checkpoints store it (RWKV/v6-Finch-*-HF: model_type `rwkv6`, remote code; transformers
has no class for it), run as llama.cpp runs it (src/models/rwkv6.cpp): a LayerNorm of the embeddings (blocks.0's
pre_ln), then blocks of time mixing and channel mixing, each on a LayerNorm of the stream, with token shift (the
previous token's normed input) mixed in through data-dependent lerps; the WKV recurrence per head with a bonus for
the current token; a per-head group norm; LayerNorm ln_out and an untied head. The whole block is one C call
(kernels/rwkv.c, Mamba version 6); its state is the two token shifts [2, D] and a [N, N] matrix a head.

`rescale_every` R: the remote code (and llama.cpp's converter) divides each layer's attention.output and
feed_forward.value by 2^(layer // R) and halves the stream after every R layers (so that float16 does not
overflow); Petit scales those two outputs instead of the weights (the same up to rounding). The group norm's eps is
1e-5 x head_size_divisor^2, as the remote code's ln_x has it."""
import numpy as np

from petit.models.blocks.common import norm
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.ssm import Mamba
from petit.models.families.recurrent.rwkv6_config import Rwkv6Config


def block(t, p: str, D: int, H: int, N: int, F: int, E: int, DE: int, eps: float, gn_eps: float, scale: float,
          halve: bool, names: dict) -> Mamba:
    """One RWKV-6 block; `names` maps Petit's roles to the file's tensor names (with `p` formatted in) and says how
    the LoRAs are stored ("hf": the remote code's [D, 5E] / [5, E, D] / [D, DE] / [DE, D]; "gguf": the converter's
    transposes)."""
    n = {k: v.format(p=p) for k, v in names.items() if isinstance(v, str)}
    w = [t.weight(n[k], shape) for k, shape in (("r", (D, D)), ("k", (D, D)), ("v", (D, D)), ("g", (D, D)),
                                                  ("o", (D, D)), ("ck", (F, D)), ("cv", (D, F)), ("cr", (D, D)))]
    lerps = {k: t.array(n["maa_" + k], t.info(n["maa_" + k])[1]).reshape(-1) for k in "xwkvrg"
             if "maa_" + k in n}
    if names["layout"] == "hf":
        w1 = t.array(n["maa_w1"], (D, 5 * E)).T
        w2 = t.array(n["maa_w2"], (5, E, D)).transpose(0, 2, 1)
        d1 = t.array(n["dec_w1"], (D, DE)).T
        d2 = t.array(n["dec_w2"], (DE, D)).T
        maa = np.stack([lerps[k] for k in "wkvrg"])
    else:
        w1 = t.array(n["maa_w1"], (5 * E, D))
        w2 = t.array(n["maa_w2"], (5, D, E))
        d1 = t.array(n["dec_w1"], (DE, D))
        d2 = t.array(n["dec_w2"], (D, DE))
        maa = t.array(n["maa_fused"], t.info(n["maa_fused"])[1]).reshape(5, D)
    r = dict(w=w, e=E, de=DE, f=F, gn_eps=gn_eps, scale=scale, halve=halve,
             ln1_w=t.array(n["ln1_w"], (D,)), ln1_b=t.array(n["ln1_b"], (D,)), ln2_w=t.array(n["ln2_w"], (D,)),
             ln2_b=t.array(n["ln2_b"], (D,)), lnx_w=t.array(n["lnx_w"], (D,)), lnx_b=t.array(n["lnx_b"], (D,)),
             maa_x=lerps["x"], maa=np.ascontiguousarray(maa), maa_w1=np.ascontiguousarray(w1),
             maa_w2=np.ascontiguousarray(w2), dec_w1=np.ascontiguousarray(d1), dec_w2=np.ascontiguousarray(d2),
             cm_k=t.array(n["cm_k"], t.info(n["cm_k"])[1]).reshape(-1),
             cm_r=t.array(n["cm_r"], t.info(n["cm_r"])[1]).reshape(-1),
             decay=t.array(n["decay"], t.info(n["decay"])[1]).reshape(-1),
             bonus=t.array(n["bonus"], (H, N)).reshape(-1))
    zero = np.zeros(1, np.float32)
    return Mamba(w[0], np.zeros((1, 1), np.float32), None, None, None, None, zero, zero, w[4], N, 1, 1,
                 version=6, n_heads=H, eps=eps, rwkv=r)


HF_NAMES = {
    "layout": "hf", "r": "{p}attention.receptance.weight", "k": "{p}attention.key.weight",
    "v": "{p}attention.value.weight", "g": "{p}attention.gate.weight", "o": "{p}attention.output.weight",
    "ck": "{p}feed_forward.key.weight", "cv": "{p}feed_forward.value.weight",
    "cr": "{p}feed_forward.receptance.weight", "ln1_w": "{p}ln1.weight", "ln1_b": "{p}ln1.bias",
    "ln2_w": "{p}ln2.weight", "ln2_b": "{p}ln2.bias", "lnx_w": "{p}attention.ln_x.weight",
    "lnx_b": "{p}attention.ln_x.bias", **{f"maa_{k}": f"{{p}}attention.time_maa_{k}" for k in "xwkvrg"},
    "maa_w1": "{p}attention.time_maa_w1", "maa_w2": "{p}attention.time_maa_w2",
    "dec_w1": "{p}attention.time_decay_w1", "dec_w2": "{p}attention.time_decay_w2", "decay": "{p}attention.time_decay",
    "bonus": "{p}attention.time_faaaa", "cm_k": "{p}feed_forward.time_maa_k", "cm_r": "{p}feed_forward.time_maa_r",
}


GGUF_NAMES = {
    "layout": "gguf", "r": "{p}time_mix_receptance.weight", "k": "{p}time_mix_key.weight",
    "v": "{p}time_mix_value.weight", "g": "{p}time_mix_gate.weight", "o": "{p}time_mix_output.weight",
    "ck": "{p}channel_mix_key.weight", "cv": "{p}channel_mix_value.weight",
    "cr": "{p}channel_mix_receptance.weight", "ln1_w": "{p}attn_norm.weight", "ln1_b": "{p}attn_norm.bias",
    "ln2_w": "{p}attn_norm_2.weight", "ln2_b": "{p}attn_norm_2.bias", "lnx_w": "{p}time_mix_ln.weight",
    "lnx_b": "{p}time_mix_ln.bias", "maa_x": "{p}time_mix_lerp_x.weight", "maa_fused": "{p}time_mix_lerp_fused.weight",
    "maa_w1": "{p}time_mix_w1.weight", "maa_w2": "{p}time_mix_w2.weight", "dec_w1": "{p}time_mix_decay_w1.weight",
    "dec_w2": "{p}time_mix_decay_w2.weight", "decay": "{p}time_mix_decay.weight", "bonus": "{p}time_mix_first.weight",
    "cm_k": "{p}channel_mix_lerp_k.weight", "cm_r": "{p}channel_mix_lerp_r.weight",
}


def build(cfg: Rwkv6Config, t) -> Decoder:
    D, N, L = cfg.hidden_size, cfg.head_size, cfg.num_hidden_layers
    H, F, R, eps = D // N, cfg.intermediate_size, cfg.rescale_every, cfg.layer_norm_epsilon
    gguf = t.has("rwkv.blocks.0.time_mix_w1.weight")          # the GGUF reader's names (llama.cpp's layout)
    names = GGUF_NAMES if gguf else HF_NAMES
    w1 = names["maa_w1"].format(p="rwkv.blocks.0.")
    E = t.info(w1)[1][0 if gguf else 1] // 5 if t.has(w1) else cfg.time_mix_extra_dim
    d1 = names["dec_w1"].format(p="rwkv.blocks.0.")
    DE = t.info(d1)[1][0 if gguf else 1] if t.has(d1) else cfg.time_decay_extra_dim
    embed = t.weight("rwkv.embeddings.weight", (cfg.vocab_size, D))
    ln0 = norm(t, "rwkv.blocks.0.pre_ln", D, "layer", eps, bias=True)
    layers = []
    for i in range(L):
        mixer = block(t, f"rwkv.blocks.{i}.", D, H, N, F, E, DE, eps, 1e-5 * cfg.head_size_divisor ** 2,
                      2.0 ** -(i // R) if R and not cfg.rescaled_weights else 1.0, bool(R) and (i + 1) % R == 0,
                      names)
        layers.append(Layer(q=None, k=None, v=None, o=None, mamba=mixer))
    final = norm(t, "rwkv.ln_out", D, "layer", eps, bias=True)
    head = t.weight("head.weight", (cfg.vocab_size, D))
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=H, head_dim=N, context_length=cfg.max_position_embeddings,
                state_shapes=((2, D), (H, N, N)))
    return Decoder(arch, embed, layers, final, head, embed_norm=ln0)


Config = Rwkv6Config
