"""ZAYA (Zyphra's ZAYA1, `zaya`): transformers 5.25 builds it on Laguna's config and model (per-layer-type RoPE on
a partial rotary factor: rope_config.RopeByType), with three pieces of its own:

- q / k / v from compressed convolutional attention (petit/models/families/moe/cca.py's Cca); q and k then L2-normed to
  sqrt(head_dim) (RMSNorm with a negligible eps: transformers clamps the norm at float32's eps), each kv head's keys
  times its `qk_norm.temp`; RoPE by halves on each layer type's share of the head ("hybrid", "hybrid_sliding": the
  last `sliding_window` positions), o_proj;
- every layer's MLP a top-1 mixture of SwiGLU experts and a skip expert that adds nothing, routed by an MLP whose
  state goes from layer to layer (cca.py's Router);
- the residual stream: the embeddings as (e + input_hidden_states_bias) * input_hidden_states_scale, each sublayer's
  add (h + hidden_states_bias) * hidden_states_scale + (resid + residual_bias) * residual_scale, per channel (norm
  kind "affine": Layer.resid_alpha for the residual, the post norms for the sublayer).
The LM head is tied by default, with a bias with `lm_head_bias`. `cca_time0` / `cca_time1` other than 2 (every
release's) are refused, and so is num_experts_per_tok other than 1 (transformers refuses it)."""
from dataclasses import dataclass

import numpy as np

from petit.models.families.moe.cca import Cca, RouterState, zaya_moe
from petit.models.blocks.common import embed_and_head, norm
from petit.models.blocks.config import DecoderConfig, NoDenseMlp, check_decoder, positive_int, refuse_act
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm, Vec
from petit.models.blocks.moe import split_experts
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY
from petit.models.blocks.rope_config import RopeByType

TYPES = ("hybrid", "hybrid_sliding")
L2_EPS = float(np.finfo(np.float32).eps) ** 2       # over head_dim values: a norm below float32's eps, as clamped


@dataclass(kw_only=True)
class ZayaConfig(NoDenseMlp, RopeByType, DecoderConfig):
    vocab_size: int = 262272
    hidden_size: int = 2048
    intermediate_size: int | None = None        # not ZAYA's (no dense MLP): reported when given, never read
    num_hidden_layers: int = 40
    num_attention_heads: int = 8
    num_key_value_heads: int | None = 2
    head_dim: int | None = 128
    max_position_embeddings: int = 131072
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = True
    sliding_window: int | None = None
    layer_types: list | None = None
    rope_types: dict | None = None              # Petit's key: transformers 5's rope_parameters, per layer type
    attention_bias: bool = False
    num_experts: int = 16
    num_experts_per_tok: int = 1
    moe_intermediate_size: int = 2048
    router_hidden_size: int = 256
    lm_head_bias: bool = False
    cca_time0: int = 2
    cca_time1: int = 2
    model_type: str = "zaya"
    _REQUIRED = ()
    _IGNORED = MOE_TRAINING_ONLY
    _DENSE_NAME = "ZAYA"
    _ROPE_DEFAULT = {"hybrid": {"rope_type": "default", "rope_theta": 5_000_000.0, "partial_rotary_factor": 0.5},
                     "hybrid_sliding": {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.5}}

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "zaya", "silu")
        if d.get("num_experts_per_tok", 1) != 1:
            raise ValueError(f"config: num_experts_per_tok {d['num_experts_per_tok']!r}: ZAYA routes each token to "
                             f"one expert (transformers refuses any other)")
        for k in ("cca_time0", "cca_time1"):
            if d.get(k, 2) != 2:
                raise ValueError(f"config: {k} {d[k]!r} is not supported (Petit's CCA runs ZAYA's kernels of 2)")

    def _validate(self):
        positive_int(self, "moe_intermediate_size", "router_hidden_size", "num_experts")
        self.intermediate_size = self.moe_intermediate_size        # the scratch's MLP width (no dense MLP)
        check_decoder(self, ("rms_norm_eps",), ("tie_word_embeddings", "attention_bias", "lm_head_bias"),
                      window=True)
        if "hybrid_sliding" in self.types() and self.sliding_window is None:
            raise ValueError("config: layer_types has hybrid_sliding layers but sliding_window is null")
        self.ropes()

    def types(self) -> list[str]:
        given, n = self.layer_types, self.num_hidden_layers
        if given is None:
            return ["hybrid"] * n
        if not isinstance(given, list) or len(given) != n or any(t not in TYPES for t in given):
            raise ValueError(f"config: layer_types must list {n} values of {' / '.join(TYPES)}, got {given!r}")
        return given


def hf_tensors(cfg: ZayaConfig, ckpt) -> dict:
    """Each expert's matrices from the 3-D experts; v (and its bias) as [v_proj_current ; v_proj_delayed]."""
    out, D, Vh = {}, cfg.hidden_size, cfg.num_key_value_heads * cfg.head_dim // 2
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        out |= split_experts(ckpt, p, cfg.num_experts, cfg.moe_intermediate_size, D)
        c = p + "self_attn.qkv_proj."
        for part, shape in (("weight", (2 * Vh, D)), ("bias", (2 * Vh,))):
            src = [f"{c}v_proj_current.{part}", f"{c}v_proj_delayed.{part}"]
            if part == "weight" or cfg.attention_bias:
                out[f"{c}v_proj.{part}"] = (shape, lambda s=src: np.concatenate([ckpt.f32(n) for n in s]), src)
    return out


def _affine(t, p: str, what: str, D: int) -> Norm:
    return Norm("affine", 0.0, t.vec(f"{p}{what}_scale", (D,)), t.vec(f"{p}{what}_bias", (D,)))


def build(cfg: ZayaConfig, t):
    n, H, KV, hd, D, E, R = (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
                             cfg.hidden_size, cfg.num_experts, cfg.router_hidden_size)
    C, Vh, eps, types, ropes = (H + KV) * hd, KV * hd // 2, cfg.rms_norm_eps, cfg.types(), cfg.ropes()
    emb, head = embed_and_head(t, cfg)
    state, layers, bias = RouterState(), [], cfg.attention_bias
    for i in range(n):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
        c = a + "qkv_proj."
        L = Layer(q=t.weight(c + "q_proj.weight", (H * hd, D)), k=t.weight(c + "k_proj.weight", (KV * hd, D)),
                  v=t.weight(c + "v_proj.weight", (KV * hd, D)), o=t.weight(a + "o_proj.weight", (D, H * hd)),
                  rope=ropes[types[i]], window=cfg.sliding_window if types[i] == "hybrid_sliding" else 0)
        if bias:
            L.q_b, L.k_b = t.vec(c + "q_proj.bias", (H * hd,)), t.vec(c + "k_proj.bias", (KV * hd,))
            L.v_b, L.o_b = t.vec(c + "v_proj.bias", (KV * hd,)), t.vec(a + "o_proj.bias", (D,))
        L.mix_qkv = Cca.read(t, c, H, KV, hd, L.v_b.a[Vh:] if bias else None, slot=n + i)
        temp = t.array(a + "qk_norm.temp", (KV,))
        L.q_norm = Norm("rms", L2_EPS / hd)
        L.k_norm = Norm("rms", L2_EPS / hd, Vec(np.repeat(temp[:, None], hd, axis=1)))
        L.moe, L.pre_moe = zaya_moe(t, p, i, E, cfg.moe_intermediate_size, D, R, eps, state)
        L.attn_norm, L.mlp_norm = norm(t, p + "input_layernorm", D, "rms", eps), \
            norm(t, p + "post_attention_layernorm", D, "rms", eps)
        ra, rm = p + "post_attention_residual_scale.", p + "post_mlp_residual_scale."
        L.resid_alpha = (_affine(t, ra, "residual", D), _affine(t, rm, "residual", D))
        L.post_attn_norm, L.post_mlp_norm = _affine(t, ra, "hidden_states", D), _affine(t, rm, "hidden_states", D)
        layers.append(L)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=cfg.moe_intermediate_size,
                num_attention_heads=H, num_key_value_heads=KV, head_dim=hd,
                context_length=min(r.context_length for r in ropes.values()), state_shapes=((2, C), (Vh,)),
                state_layers=tuple(range(n, 2 * n)), cache_slots=2 * n)
    return Decoder(arch, emb, layers, norm(t, "model.norm", D, "rms", eps), head,
                   lm_head_b=t.vec("lm_head.bias", (cfg.vocab_size,)) if cfg.lm_head_bias else None,
                   embed_norm=_affine(t, "model.input_", "hidden_states", D))


Config = ZayaConfig
