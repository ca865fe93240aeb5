"""QRWKV6 (recursal/QRWKV6-*: a Qwen2 model whose attention was replaced by RWKV-6's time mixing) as llama.cpp's
rwkv6qwen2 files hold it and llama.cpp runs it (src/models/rwkv6qwen2.cpp, rwkv6-base.cpp's QRWKV path): Qwen2's
blocks, each an RMSNorm, the time mixing, its add, an RMSNorm, a SwiGLU MLP and its add; RMSNorm and an untied head
at the end. The time mixing is RWKV-6's (token shift of the normed input, its data-dependent lerps through the
token-shift LoRA, the decay LoRA) run as gated linear attention: no bonus, k x (1 - w), the gate sigmoid(W_g x_g),
no group norm, the output scaled by head_size^-1/2, keys and values of `num_key_value_heads` heads shared by the
query heads in groups (head h reads kv head h / (H / Hk)), optional r / k / v biases (Qwen2's q / k / v ones).

One C call for the time mixing (kernels/rwkv.c, Mamba version 6 with rwkv_gla and rwkv_mix_only; pt_gla the
recurrence) and the decoder's SwiGLU for the MLP. Read from llama.cpp's files (petit/loading/gguf_ggufx5.py: its
tensor names under `model.layers.N.`) and from a checkpoint folder in the names llama.cpp's converter reads (Qwen2's,
plus self_attn.time_maa_* / time_decay*, the token-shift LoRA's blocks in r, k, v, w, g order); no transformers class:
llama.cpp's logits are the reference."""
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.common import norm
from petit.models.blocks.config import ConfigMixin, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.ssm import Mamba

P = "model.layers.{}."


@dataclass(kw_only=True)
class Rwkv6Qwen2Config(ConfigMixin):
    vocab_size: int = 152064
    hidden_size: int = 5120
    num_hidden_layers: int = 64
    intermediate_size: int = 27648
    head_size: int | None = None          # the GGUF file's wkv.head_size; a folder: hidden_size / num_attention_heads
    num_attention_heads: int | None = 40
    num_key_value_heads: int | None = None
    rms_norm_eps: float = 1e-6
    lora_rank_tokenshift: int = 64
    lora_rank_decay: int = 128
    tie_word_embeddings: bool = False
    context_length: int = 1048576
    model_type: str = "rwkv6qwen2"
    unknown_keys: list = field(default_factory=list, repr=False)

    def _validate(self):
        D = self.hidden_size
        if self.head_size is None:
            positive_int(self, "num_attention_heads")
            self.head_size = D // self.num_attention_heads
        self.num_attention_heads = None
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size", "head_size",
                     "lora_rank_tokenshift", "lora_rank_decay", "context_length")
        positive_number(self, "rms_norm_eps")
        if D % self.head_size:
            raise ValueError(f"config: hidden_size {D} is not divisible by head_size {self.head_size}")
        H = D // self.head_size
        if self.num_key_value_heads in (None, 0):
            self.num_key_value_heads = H
        positive_int(self, "num_key_value_heads")
        if H % self.num_key_value_heads:
            raise ValueError(f"config: {H} heads are not a multiple of num_key_value_heads "
                             f"{self.num_key_value_heads}")
        if self.tie_word_embeddings is not False and self.tie_word_embeddings is not True:
            raise ValueError(f"config: tie_word_embeddings must be true or false, got {self.tie_word_embeddings!r}")


def _vec(t, name):
    return t.array(name, t.info(name)[1]).reshape(-1)


# the remote code's names (as llama.cpp's converter reads them) -> the GGUF file's, under model.layers.N.
HF_NAMES = {"self_attn.q_proj": "time_mix_receptance", "self_attn.k_proj": "time_mix_key",
            "self_attn.v_proj": "time_mix_value", "self_attn.gate": "time_mix_gate",
            "self_attn.o_proj": "time_mix_output",
            "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
            "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
HF_ORDER = (3, 1, 2, 0, 4)     # the checkpoint's token-shift LoRA blocks r, k, v, w, g, taken in rwkv6's w, k, v, r, g


def time_mix(t, p: str, D: int, H: int, Hk: int, N: int, E: int, DE: int, eps: float, hf: bool) -> Mamba:
    kv = Hk * N
    name = {g: p + h for h, g in HF_NAMES.items()} if hf else {}

    def n(g):
        return name.get(g, p + g)
    w = [t.weight(n(g) + ".weight", s) for g, s in (("time_mix_receptance", (D, D)), ("time_mix_key", (kv, D)),
                                                    ("time_mix_value", (kv, D)), ("time_mix_gate", (D, D)),
                                                    ("time_mix_output", (D, D)))]
    bias = {c: _vec(t, n(g) + ".bias") if t.has(n(g) + ".bias") else None
            for c, g in (("rb", "time_mix_receptance"), ("kb", "time_mix_key"), ("vb", "time_mix_value"))}
    if hf:
        a = p + "self_attn."
        maa = np.stack([_vec(t, a + f"time_maa_{c}") for c in "wkvrg"])
        w1 = t.array(a + "time_maa_w1", (D, 5 * E)).T.reshape(5, E, D)[list(HF_ORDER)].reshape(5 * E, D)
        w2 = t.array(a + "time_maa_w2", (5, E, D))[list(HF_ORDER)].transpose(0, 2, 1)
        d1, d2 = t.array(a + "time_decay_w1", (D, DE)).T, t.array(a + "time_decay_w2", (DE, D)).T
        mx, decay = _vec(t, a + "time_maa_x"), _vec(t, a + "time_decay")
    else:
        maa = t.array(p + "time_mix_lerp_fused.weight", t.info(p + "time_mix_lerp_fused.weight")[1]).reshape(5, D)
        w1, w2 = t.array(p + "time_mix_w1.weight", (5 * E, D)), t.array(p + "time_mix_w2.weight", (5, D, E))
        d1, d2 = t.array(p + "time_mix_decay_w1.weight", (DE, D)), t.array(p + "time_mix_decay_w2.weight", (D, DE))
        mx, decay = _vec(t, p + "time_mix_lerp_x.weight"), _vec(t, p + "time_mix_decay.weight")
    r = dict(w=w, o=4, e=E, de=DE, f=0, gn_eps=0.0, scale=1.0, halve=False, mix_only=True, gla=True, kv_heads=Hk,
             maa_x=mx, maa=np.ascontiguousarray(maa), maa_w1=np.ascontiguousarray(w1),
             maa_w2=np.ascontiguousarray(w2), dec_w1=np.ascontiguousarray(d1), dec_w2=np.ascontiguousarray(d2),
             decay=decay, **bias)
    zero = np.zeros(1, np.float32)
    return Mamba(w[0], np.zeros((1, 1), np.float32), None, None, None, None, zero, zero, w[4], N, 1, 1,
                 version=6, n_heads=H, eps=eps, rwkv=r)


def qwen2_block(t, p: str, D: int, F: int, eps: float, mixer: Mamba, hf: bool = False) -> Layer:
    """Qwen2's block around an RWKV time mixing: RMSNorms before the mixer and the SwiGLU MLP."""
    n = {g: p + (h if hf else g) for h, g in HF_NAMES.items()}
    return Layer(q=None, k=None, v=None, o=None, mamba=mixer, attn_norm=norm(t, n["attn_norm"], D, "rms", eps),
                 mlp_norm=norm(t, n["ffn_norm"], D, "rms", eps), gate=t.weight(n["ffn_gate"] + ".weight", (F, D)),
                 up=t.weight(n["ffn_up"] + ".weight", (F, D)), down=t.weight(n["ffn_down"] + ".weight", (D, F)))


def head(t, cfg, D: int):
    embed = t.weight("model.embed_tokens.weight", (cfg.vocab_size, D))
    out = embed if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    return embed, norm(t, "model.norm", D, "rms", cfg.rms_norm_eps), out


def build(cfg: Rwkv6Qwen2Config, t) -> Decoder:
    D, N, L, F, eps = cfg.hidden_size, cfg.head_size, cfg.num_hidden_layers, cfg.intermediate_size, cfg.rms_norm_eps
    H, Hk = D // N, cfg.num_key_value_heads
    hf = not t.has(P.format(0) + "time_mix_receptance.weight")    # the remote code's names, or the GGUF reader's
    embed, final, out = head(t, cfg, D)
    layers = [qwen2_block(t, P.format(i), D, F, eps, time_mix(t, P.format(i), D, H, Hk, N, cfg.lora_rank_tokenshift,
                                                              cfg.lora_rank_decay, eps, hf), hf)
              for i in range(L)]
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=H, head_dim=N, context_length=cfg.context_length, act="silu",
                state_shapes=((2, D), (H, N, N)))
    return Decoder(arch, embed, layers, final, out)


Config = Rwkv6Qwen2Config
