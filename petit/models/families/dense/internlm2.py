"""InternLM2 / InternLM2.5 (Shanghai AI Lab, `internlm/internlm2-chat-7b`; model_type `internlm2` with its remote
code, transformers has no class): a Llama block under its own tensor names, `tok_embeddings`, `attention.wqkv`,
`attention.wo`, `feed_forward.w1 / w3 / w2` (gate / up / down), `attention_norm`, `ffn_norm`, `output`. wqkv is
fused in a grouped layout: for each key-value head, its query heads, then its key, then its value (head_dim rows
each); `hf_tensors` splits it into q / k / v and hands every tensor out under Llama's name. `bias` (wqkv and wo
biases) is refused: no released InternLM2 has them and llama.cpp, the fixture's reference, reads none."""
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act

NAMES = {"attention.wo": "self_attn.o_proj", "feed_forward.w1": "mlp.gate_proj", "feed_forward.w3": "mlp.up_proj",
         "feed_forward.w2": "mlp.down_proj", "attention_norm": "input_layernorm",
         "ffn_norm": "post_attention_layernorm"}


@dataclass(kw_only=True)
class InternLM2Config(DecoderConfig):
    """Defaults as in the remote `configuration_internlm2.py`."""

    rms_norm_eps: float = 1e-6
    bias: bool = True
    rope_interleaved: bool = False      # a Petit key, as Llama's: True rotates pairs (2i, 2i+1) (a GGUF file's q / k)
    model_type: str = "internlm2"
    _IGNORED = frozenset({"attn_implementation"})      # the attention implementation does not change the result

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "internlm2", "silu")
        if d.get("bias", True):
            raise ValueError("config: bias true (biases on wqkv and wo) is not supported by the internlm2 family: no "
                             "released InternLM2 has them (their config.json says bias false)")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "bias", "rope_interleaved"))
        if self.head_dim * self.num_attention_heads != self.hidden_size:
            raise ValueError(f"config: head_dim {self.head_dim} x {self.num_attention_heads} heads must be "
                             f"hidden_size {self.hidden_size} in the internlm2 family")


def split_wqkv(w: np.ndarray, H: int, KV: int, hd: int) -> tuple:
    """(q, k, v) rows of InternLM2's grouped wqkv [(H + 2 KV) hd, D]: per key-value head, H / KV query heads, its
    key, its value."""
    g = H // KV
    r = w.reshape(KV, g + 2, hd, w.shape[-1])
    return r[:, :g].reshape(H * hd, -1), r[:, g].reshape(KV * hd, -1), r[:, g + 1].reshape(KV * hd, -1)


def hf_tensors(cfg: InternLM2Config, ckpt) -> dict:
    H, KV, hd, D, F = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.hidden_size, \
        cfg.intermediate_size
    shapes = {"attention.wo": (D, H * hd), "feed_forward.w1": (F, D), "feed_forward.w3": (F, D),
              "feed_forward.w2": (D, F), "attention_norm": (D,), "ffn_norm": (D,)}
    emb, head = "model.tok_embeddings.weight", "output.weight"
    out = {"model.embed_tokens.weight": ((cfg.vocab_size, D), lambda: ckpt.f32(emb), [emb])}
    if not cfg.tie_word_embeddings:
        out["lm_head.weight"] = ((cfg.vocab_size, D), lambda: ckpt.f32(head), [head])
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        fused = p + "attention.wqkv.weight"
        for j, (n, rows) in enumerate((("q", H), ("k", KV), ("v", KV))):
            out[f"{p}self_attn.{n}_proj.weight"] = ((rows * hd, D), lambda f=fused, j=j: split_wqkv(
                ckpt.f32(f), H, KV, hd)[j], [fused])
        for src, dst in NAMES.items():
            out[p + dst + ".weight"] = (shapes[src], lambda s=p + src + ".weight": ckpt.f32(s), [p + src + ".weight"])
    return out


def build(cfg: InternLM2Config, t):
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, rope_for=lambda i: rope, context_length=rope.context_length)


Config = InternLM2Config
