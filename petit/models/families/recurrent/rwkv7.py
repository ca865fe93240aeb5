"""RWKV-7 (Goose) as fla-hub's checkpoints store it (fla-hub/rwkv7-*: model_type `rwkv7`, flash-linear-attention's
code; transformers has no class for it), run as llama.cpp runs it (src/models/rwkv7.cpp): a LayerNorm of the
embeddings (layers.0's pre_norm), then blocks of time mixing and channel mixing, each on a LayerNorm of the stream:

- time mixing: token-shift lerps x_r, x_w, x_k, x_v, x_a, x_g; the decay w = exp(-e^-1/2 sigmoid(w LoRA, tanh));
  the in-context learning rate a = sigmoid(a LoRA); the gate g = g2 sigmoid(g1 x); from layer 1 on, the value
  mixed with layer 0's (v_first) through sigmoid(v LoRA); the generalised delta rule per head
  S = S diag(w) - S kk (kk a)^T + v k^T with kk = l2norm(k k_k), k = k (1 + (a - 1) k_a); y = S r, a per-head group
  norm (eps head_dim x norm_eps, llama.cpp's 64e-5 at head_dim 64), plus v (r k r_k summed per head), times g, o_proj;
- channel mixing: a token-shift lerp x_k, value(relu(key)^2).

The whole block is one C call (kernels/rwkv.c, Mamba version 7); its state is the two token shifts [2, D] and a
[N, N] matrix a head. fla's `attn` (attention layers in a hybrid) and `norm_first` false are refused."""
import numpy as np

from petit.models.blocks.common import norm
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.ssm import Mamba
from petit.models.families.recurrent.rwkv7_config import Rwkv7Config


HF_NAMES = {
    "r": "{a}r_proj.weight", "k": "{a}k_proj.weight", "v": "{a}v_proj.weight", "o": "{a}o_proj.weight",
    "ck": "{p}ffn.key.weight", "cv": "{p}ffn.value.weight", "ln1": "{p}attn_norm", "ln2": "{p}ffn_norm",
    "lnx": "{a}g_norm", "maa": "{a}x_{n}", "cm_k": "{p}ffn.x_k", "kk": "{a}k_k", "ka": "{a}k_a", "rk": "{a}r_k",
    "lora1": "{a}{n}_lora.lora.0.weight", "lora2": "{a}{n}_lora.lora.2.weight", "lora0": "{a}{n}_lora.lora.2.bias",
}


GGUF_NAMES = {
    "r": "{p}time_mix_receptance.weight", "k": "{p}time_mix_key.weight", "v": "{p}time_mix_value.weight",
    "o": "{p}time_mix_output.weight", "ck": "{p}channel_mix_key.weight", "cv": "{p}channel_mix_value.weight",
    "ln1": "{p}attn_norm", "ln2": "{p}attn_norm_2", "lnx": "{p}time_mix_ln", "maa": "{p}time_mix_lerp_fused.weight",
    "cm_k": "{p}channel_mix_lerp_k.weight", "kk": "{p}time_mix_k_k.weight", "ka": "{p}time_mix_k_a.weight",
    "rk": "{p}time_mix_r_k.weight", "lora1": "{p}time_mix_{n}1.weight", "lora2": "{p}time_mix_{n}2.weight",
    "lora0": "{p}time_mix_{n}0.weight",
}


def _fused(t, n):
    """llama.cpp's six lerps in one tensor [6, 1, 1, D] (r, w, k, v, a, g)."""
    name = n["maa"]
    return t.array(name, t.info(name)[1]).reshape(6, -1)


def block(t, i: int, D: int, H: int, N: int, F: int, eps: float, gn_eps: float, names: dict, prefix: str,
          lerps=None) -> Mamba:
    p = prefix.format(i)
    a = p + "attn."
    n = {k: v.format(p=p, a=a, n="{n}") for k, v in names.items()}
    w = [t.weight(n[k], shape) for k, shape in (("r", (D, D)), ("k", (D, D)), ("v", (D, D)), ("o", (D, D)),
                                                  ("ck", (F, D)), ("cv", (D, F)))]

    def vec(name):
        return t.array(name, t.info(name)[1]).reshape(-1)

    r = dict(w=w, o=3, f=F, gn_eps=gn_eps, first=i == 0,
             ln1_w=vec(n["ln1"] + ".weight"), ln1_b=vec(n["ln1"] + ".bias"), ln2_w=vec(n["ln2"] + ".weight"),
             ln2_b=vec(n["ln2"] + ".bias"), lnx_w=vec(n["lnx"] + ".weight"), lnx_b=vec(n["lnx"] + ".bias"),
             maa=lerps(t, n) if lerps else np.stack([vec(n["maa"].format(n=c)) for c in "rwkvag"]),
             cm_k=vec(n["cm_k"]), kk=vec(n["kk"]), ka=vec(n["ka"]), rk=vec(n["rk"]))
    ranks = []
    for c in "wavg":
        if c == "v" and i == 0:          # layer 0 keeps v_first: a v LoRA there (fla-hub's dummy, or llama.cpp's copy
            ranks.append(0)              # of the a LoRA) is not used; read so that it is not reported as unknown
            for name in (n["lora1"], n["lora2"], n["lora0"]):
                if t.has(name.format(n=c)):
                    t.array(name.format(n=c), t.info(name.format(n=c))[1])
            continue
        one, two = n["lora1"].format(n=c), n["lora2"].format(n=c)
        R = t.info(one)[1][0]
        r[c + "1"] = t.array(one, (R, D))
        r[c + "2"] = t.array(two, (D, R))
        if c != "g":
            r[c + "0"] = vec(n["lora0"].format(n=c))
        ranks.append(R)
    r["ranks"] = tuple(ranks)
    zero = np.zeros(1, np.float32)
    return Mamba(w[0], np.zeros((1, 1), np.float32), None, None, None, None, zero, zero, w[3], N, 1, 1,
                 version=7, n_heads=H, eps=eps, rwkv=r)


def build(cfg: Rwkv7Config, t) -> Decoder:
    D, N, L, F, eps = cfg.hidden_size, cfg.head_dim, cfg.num_hidden_layers, cfg.intermediate_size, cfg.norm_eps
    H = D // N
    gn_eps = cfg.group_norm_eps if cfg.group_norm_eps is not None else N * eps
    embed = t.weight("model.embeddings.weight", (cfg.vocab_size, D))
    ln0 = norm(t, "model.layers.0.pre_norm", D, "layer", eps, bias=True)
    gguf = t.has("model.layers.0.time_mix_receptance.weight")     # the GGUF reader's names (llama.cpp's layout)
    layers = [Layer(q=None, k=None, v=None, o=None,
                    mamba=block(t, i, D, H, N, F, eps, gn_eps, GGUF_NAMES if gguf else HF_NAMES, "model.layers.{}.",
                                _fused if gguf else None))
              for i in range(L)]
    final = norm(t, "model.norm", D, "layer", eps, bias=True)
    head = embed if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=H, head_dim=N, context_length=cfg.context_length,
                state_shapes=((2, D), (H, N, N)))
    return Decoder(arch, embed, layers, final, head, embed_norm=ln0)


Config = Rwkv7Config
