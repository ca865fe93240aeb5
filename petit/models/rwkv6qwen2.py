"""QRWKV6 (recursal/QRWKV6-*: a Qwen2 model whose attention was replaced by RWKV-6's time mixing) as llama.cpp's
rwkv6qwen2 files hold it and llama.cpp runs it (src/models/rwkv6qwen2.cpp, rwkv6-base.cpp's QRWKV path): Qwen2's
blocks, each an RMSNorm, the time mixing, its add, an RMSNorm, a SwiGLU MLP and its add; RMSNorm and an untied head
at the end. The time mixing is RWKV-6's (token shift of the normed input, its data-dependent lerps through the
token-shift LoRA, the decay LoRA) run as gated linear attention: no bonus, k x (1 - w), the gate sigmoid(W_g x_g),
no group norm, the output scaled by head_size^-1/2, keys and values of `num_key_value_heads` heads shared by the
query heads in groups (head h reads kv head h / (H / Hk)), optional r / k / v biases (Qwen2's q / k / v ones).

One C call for the time mixing (kernels/rwkv.c, Mamba version 6 with rwkv_gla and rwkv_mix_only; pt_gla the
recurrence) and the decoder's SwiGLU for the MLP. The GGUF reader (petit/loading/gguf_ggufx5.py) gives llama.cpp's
tensor names under `model.layers.N.`: this family reads no other layout (the remote-code folder's names are not
mapped: it opens as GGUF only)."""
from dataclasses import dataclass, field

import numpy as np

from petit.models.common import norm
from petit.models.config import ConfigMixin, positive_int, positive_number
from petit.models.decoder import Arch, Decoder, Layer
from petit.models.ssm import Mamba

P = "model.layers.{}."


@dataclass(kw_only=True)
class Rwkv6Qwen2Config(ConfigMixin):
    vocab_size: int = 152064
    hidden_size: int = 5120
    num_hidden_layers: int = 64
    intermediate_size: int = 27648
    head_size: int = 128
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


def time_mix(t, p: str, D: int, H: int, Hk: int, N: int, E: int, DE: int, eps: float) -> Mamba:
    kv = Hk * N
    w = [t.weight(p + f"time_mix_{n}.weight", s) for n, s in (("receptance", (D, D)), ("key", (kv, D)),
                                                              ("value", (kv, D)), ("gate", (D, D)),
                                                              ("output", (D, D)))]
    bias = {c: _vec(t, p + f"time_mix_{n}.bias") if t.has(p + f"time_mix_{n}.bias") else None
            for c, n in (("rb", "receptance"), ("kb", "key"), ("vb", "value"))}
    maa = t.array(p + "time_mix_lerp_fused.weight", t.info(p + "time_mix_lerp_fused.weight")[1]).reshape(5, D)
    r = dict(w=w, o=4, e=E, de=DE, f=0, gn_eps=0.0, scale=1.0, halve=False, mix_only=True, gla=True, kv_heads=Hk,
             maa_x=_vec(t, p + "time_mix_lerp_x.weight"), maa=np.ascontiguousarray(maa),
             maa_w1=t.array(p + "time_mix_w1.weight", (5 * E, D)), maa_w2=t.array(p + "time_mix_w2.weight", (5, D, E)),
             dec_w1=t.array(p + "time_mix_decay_w1.weight", (DE, D)),
             dec_w2=t.array(p + "time_mix_decay_w2.weight", (D, DE)), decay=_vec(t, p + "time_mix_decay.weight"),
             **bias)
    zero = np.zeros(1, np.float32)
    return Mamba(w[0], np.zeros((1, 1), np.float32), None, None, None, None, zero, zero, w[4], N, 1, 1,
                 version=6, n_heads=H, eps=eps, rwkv=r)


def qwen2_block(t, p: str, D: int, F: int, eps: float, mixer: Mamba) -> Layer:
    """Qwen2's block around an RWKV time mixing: RMSNorms before the mixer and the SwiGLU MLP."""
    return Layer(q=None, k=None, v=None, o=None, mamba=mixer, attn_norm=norm(t, p + "attn_norm", D, "rms", eps),
                 mlp_norm=norm(t, p + "ffn_norm", D, "rms", eps), gate=t.weight(p + "ffn_gate.weight", (F, D)),
                 up=t.weight(p + "ffn_up.weight", (F, D)), down=t.weight(p + "ffn_down.weight", (D, F)))


def head(t, cfg, D: int):
    embed = t.weight("model.embed_tokens.weight", (cfg.vocab_size, D))
    out = embed if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    return embed, norm(t, "model.norm", D, "rms", cfg.rms_norm_eps), out


def build(cfg: Rwkv6Qwen2Config, t) -> Decoder:
    D, N, L, F, eps = cfg.hidden_size, cfg.head_size, cfg.num_hidden_layers, cfg.intermediate_size, cfg.rms_norm_eps
    H, Hk = D // N, cfg.num_key_value_heads
    if not t.has(P.format(0) + "time_mix_receptance.weight"):
        raise ValueError("the rwkv6qwen2 family reads llama.cpp's GGUF files only (a QRWKV6 checkpoint folder's "
                         "remote-code names are not mapped): convert it with llama.cpp's convert_hf_to_gguf.py")
    embed, final, out = head(t, cfg, D)
    layers = [qwen2_block(t, P.format(i), D, F, eps,
                          time_mix(t, P.format(i), D, H, Hk, N, cfg.lora_rank_tokenshift, cfg.lora_rank_decay, eps))
              for i in range(L)]
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=H, head_dim=N, context_length=cfg.context_length, act="silu",
                state_shapes=((2, D), (H, N, N)))
    return Decoder(arch, embed, layers, final, out)


Config = Rwkv6Qwen2Config
