"""gpt-oss: attention with biases and a learned sink logit per head (`self_attn.sinks`, a softmax term whose share
is dropped), sliding (`sliding_window`) and full layers alternating (`layer_types`), half-split RoPE with yarn
(`truncate` false in the releases), and routed experts in every layer: router logits with a bias, the top
`num_experts_per_tok` of them, softmax over those (the same weights as a softmax over all renormalised), each expert
a clamped SwiGLU with biases: gate = min(gate, 7), up = clamp(up, -7, 7), (up + 1) * gate * sigmoid(1.702 gate).

The checkpoint stores each layer's experts as 3-D tensors [E, in, out]: `gate_up_proj` [E, D, 2F] with gate and up
interleaved along the last axis (gate = [..., 0::2], up = [..., 1::2]) and `down_proj` [E, F, D], each with a bias;
the released checkpoints store them in MXFP4 instead (`*_blocks` [E, out, in / 32, 16]: two FP4 e2m1 codes a byte,
low nibble first; `*_scales` [E, out, in / 32]: E8M0 exponents, scale 2^(s - 127)). `hf_tensors` hands out each
expert's matrices as [out, in]. MXFP4 blocks become q8_0 blocks exactly (2 x an FP4 value is an integer of at most
12, the scale 2^(s - 128) an f16), so a q8_0 load runs the released weights unchanged, at 34 bytes a block of 32 where
MXFP4 has 17 (the q8_0 kernels are Petit's fastest; no MXFP4 kernel yet); other weight types quantize the exact
decoded values."""
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.common import default_rope, layer_types, llama_like, window_of
from petit.models.blocks.config import DecoderConfig, check_decoder
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing

FP4 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)
EXPERTS = "mlp.experts"


@dataclass(kw_only=True)
class GptOssConfig(DecoderConfig):
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 131072
    rope_theta: float = 150000.0
    sliding_window: int | None = 128
    layer_types: list | None = None
    attention_bias: bool = True
    num_local_experts: int = 128
    num_experts_per_tok: int = 4
    swiglu_limit: float = 7.0
    quantization_config: dict | None = field(default=None)
    model_type: str = "gpt_oss"
    _IGNORED = MOE_TRAINING_ONLY
    _QUANT_METHODS = ("mxfp4",)

    @classmethod
    def _refuse(cls, d):
        q = d.get("quantization_config")
        if q and set(q.get("modules_to_not_convert") or []) - {"model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                "model.embed_tokens", "lm_head"}:
            raise ValueError(f"config: quantization_config modules_to_not_convert {q['modules_to_not_convert']!r}: "
                             f"Petit reads gpt-oss's MXFP4 experts, with everything else in float")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "attention_bias"))
        check_routing(self, "num_local_experts")
        if self.swiglu_limit != 7.0:
            raise ValueError(f"config: swiglu_limit {self.swiglu_limit!r} is not supported by the gpt_oss family "
                             f"(only 7.0, which transformers' CPU path applies whatever the config says)")
        self.types()

    def types(self) -> list[str]:
        return layer_types(self, lambda i: "sliding_attention" if i % 2 == 0 else "full_attention")


def mxfp4_f32(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """[rows, nb, 16] codes and [rows, nb] exponents -> float32 [rows, nb * 32] (exactly the stored values)."""
    v = np.empty(blocks.shape[:-1] + (32,), np.float32)
    v[..., 0::2], v[..., 1::2] = FP4[blocks & 15], FP4[blocks >> 4]
    v *= np.ldexp(np.float32(1), scales.astype(np.int32) - 127)[..., None]
    return v.reshape(blocks.shape[0], -1)


def mxfp4_q8_0(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray | None:
    """The same values as q8_0 blocks (an f16 scale 2^(s - 128), int8 codes 2 x FP4), or None when a scale is out of
    f16's range."""
    e = scales.astype(np.int32) - 128
    if e.min() < -24 or e.max() > 15:
        return None
    rows, nb = scales.shape
    out = np.empty((rows, nb, 34), np.uint8)
    out[..., :2] = np.ldexp(np.float32(1), e).astype(np.float16)[..., None].view(np.uint8)
    q = np.empty((rows, nb, 32), np.int8)
    twice = (2 * FP4).astype(np.int8)
    q[..., 0::2], q[..., 1::2] = twice[blocks & 15], twice[blocks >> 4]
    out[..., 2:] = q.view(np.uint8)
    return out.reshape(rows, -1)


def hf_tensors(cfg: GptOssConfig, ckpt) -> dict:
    """Each expert's gate / up / down matrix [out, in] and bias, from the float [E, in, out] tensors or the MXFP4
    blocks (read once per layer and tensor, kept while its experts are handed out)."""
    F, D, E = cfg.intermediate_size, cfg.hidden_size, cfg.num_local_experts
    out = {}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}.{EXPERTS}."
        held = {}

        def read(name, held=held):
            if name not in held:
                held.clear()
                held[name] = ckpt.raw(name) if name.endswith(("_blocks", "_scales")) else ckpt.f32(name)
            return held[name]

        def lazy(stem, e, rows, exact, p=p, read=read):
            """Expert e's [out, in] matrix (its `rows` of out: gate 0::2, up 1::2 of gate_up), float32 or (exact)
            q8_0 from MXFP4 blocks."""
            def make():
                if p + stem + "_blocks" in ckpt:
                    b = np.asarray(read(p + stem + "_blocks")[e])[rows]
                    s = np.asarray(read(p + stem + "_scales")[e])[rows]
                    return (mxfp4_q8_0 if exact else mxfp4_f32)(b, s)
                return np.ascontiguousarray(read(p + stem)[e].T[rows])
            return make

        def sources(stem, p=p):
            return [p + stem + "_blocks", p + stem + "_scales"] if p + stem + "_blocks" in ckpt else [p + stem]

        for e in range(E):
            x = f"{p}{e}."
            for name, stem, rows, shape in (("gate_proj", "gate_up_proj", slice(0, None, 2), (F, D)),
                                            ("up_proj", "gate_up_proj", slice(1, None, 2), (F, D)),
                                            ("down_proj", "down_proj", slice(None), (D, F))):
                exact = lazy(stem, e, rows, True) if p + stem + "_blocks" in ckpt else None
                out[x + name + ".weight"] = (shape, lazy(stem, e, rows, False), sources(stem), exact)
                bias = p + stem + "_bias"
                out[x + name + ".bias"] = ((shape[0],), lambda b=bias, e=e, r=rows, read=read: read(b)[e][r], [bias])
    return out


def build(cfg: GptOssConfig, t):
    rope = default_rope(cfg)
    types = cfg.types()
    net = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                     rope_for=lambda i: rope, window_for=window_of(cfg, types), context_length=rope.context_length,
                     moe_for=lambda i, p: moe_weights(
                         t, p, cfg, n_experts=cfg.num_local_experts, top_k=cfg.num_experts_per_tok,
                         inter=cfg.intermediate_size, norm_topk=True, router="mlp.router", experts=EXPERTS,
                         act="swiglu_oai", bias=True))
    for i, L in enumerate(net.layers):
        L.sinks = t.vec(f"model.layers.{i}.self_attn.sinks", (cfg.num_attention_heads,))
    return net


Config = GptOssConfig
