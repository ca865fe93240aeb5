"""LFM3 (LiquidAI): LFM2's hybrid (petit/models/families/hybrid/lfm2.py) with three layer kinds (`layer_types`: "conv",
"sliding_attention", "full_attention"; by default full where i % 4 == 2, sliding where i % 4 == 0 and i > 0, conv
elsewhere), 7-tap short convs by default, norms after each sublayer too (`post_operator_norm` of the conv's or the
attention's output, `post_ffn_norm` of the MLP's, with `use_sandwich_norm`), a SwiGLU MLP of `intermediate_size`
(w1 / w3 / w2, no width adjustment), and Qwen3's attention (per-head q / k RMS norms before RoPE, `o_proj`) whose
heads are each scaled by sigmoid(gate_proj x), one gate value a head (`use_attention_gate`; the checkpoint's
`self_attn.gate_proj` [heads, hidden] is read with each row repeated head_dim times, so the attention kernels'
element-wise output gate computes it: one extra [hidden x heads x head_dim] product a token in each attention layer).

RoPE per layer type (transformers 5's nested `rope_parameters`): the sliding layers' is the default RoPE of base
`rope_local_base_freq`; the full layers' `proportional` RoPE (Gemma 4's) rotates the first partial_rotary_factor x
head_dim / 2 frequency pairs of the whole head (exponents over head_dim) and leaves the other pairs unrotated."""
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.common import embed_and_head, norm
from petit.models.blocks.config import DecoderConfig, boolean, check_decoder, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.rope import ProportionalRope, Rope
from petit.models.blocks.ssm import Mamba

KINDS = ("conv", "sliding_attention", "full_attention")


@dataclass(kw_only=True)
class Lfm3Config(DecoderConfig):
    num_key_value_heads: int | None = 4
    head_dim: int | None = 128
    max_position_embeddings: int = 128000
    norm_eps: float = 1e-5
    rope_theta: float = 1000000.0               # the full layers' (rope_parameters.full_attention)
    partial_rotary_factor: float = 0.5          # the full layers' proportional RoPE
    rope_local_base_freq: float = 10000.0       # the sliding layers' (rope_parameters.sliding_attention)
    conv_bias: bool = False
    conv_L_cache: int = 7
    layer_types: list | None = None
    sliding_window: int | None = 256
    use_sandwich_norm: bool = True
    use_attention_gate: bool = True
    attention_bias: bool = False
    tie_word_embeddings: bool = True
    model_type: str = "lfm3"
    _ROPE_LOCAL_THETA = True

    @classmethod
    def from_dict(cls, d: dict):
        """The full layers' `proportional` rope_type is this family's own RoPE (ProportionalRope): read as the
        default type with its partial_rotary_factor; any other type there is refused."""
        if isinstance(d, dict) and isinstance(d.get("rope_parameters"), dict):
            rp = dict(d["rope_parameters"])
            full = rp.get("full_attention")
            if isinstance(full, dict):
                kind = full.get("rope_type", full.get("type", "default"))
                if kind != "proportional":
                    raise ValueError(f"config: rope_parameters.full_attention rope_type {kind!r} is not supported by "
                                     f"the lfm3 family (proportional only)")
                rp["full_attention"] = dict(full, rope_type="default")
                d = dict(d, rope_parameters=rp)
        if isinstance(d, dict) and "rms_norm_eps" in d:             # transformers' attribute_map alias
            d = dict(d)
            d.setdefault("norm_eps", d.pop("rms_norm_eps"))
        return super().from_dict(d)

    def _validate(self):
        check_decoder(self, ("norm_eps", "rope_theta", "rope_local_base_freq", "partial_rotary_factor"),
                      ("tie_word_embeddings", "conv_bias", "use_sandwich_norm", "use_attention_gate",
                       "attention_bias"), window=True)
        positive_int(self, "conv_L_cache")
        positive_number(self, "partial_rotary_factor")
        boolean(self, "use_sandwich_norm")
        n = self.num_hidden_layers
        if self.layer_types is None:
            self.layer_types = ["full_attention" if i % 4 == 2 else "sliding_attention" if i % 4 == 0 and i > 0
                                else "conv" for i in range(n)]
        if not isinstance(self.layer_types, list) or len(self.layer_types) != n or \
                any(t not in KINDS for t in self.layer_types):
            raise ValueError(f"config: layer_types must list {n} values of {' / '.join(KINDS)}, got "
                             f"{self.layer_types!r}")
        if "sliding_attention" in self.layer_types and not self.sliding_window:
            raise ValueError(f"config: sliding layers need a positive sliding_window, got {self.sliding_window!r}")
        for k in ("conv_bias", "attention_bias"):
            if getattr(self, k):
                raise ValueError(f"config: {k} true is not supported by the lfm3 family (no released model has it)")
        if self.partial_rotary_factor > 1:
            raise ValueError(f"config: partial_rotary_factor {self.partial_rotary_factor!r} must be at most 1")


def hf_tensors(cfg: Lfm3Config, ckpt) -> dict:
    """Each attention layer's per-head gate [heads, hidden] as an element-wise one [heads x head_dim, hidden]."""
    H, hd, D = cfg.num_attention_heads, cfg.head_dim, cfg.hidden_size
    out = {}
    if not cfg.use_attention_gate:
        return out
    for i, kind in enumerate(cfg.layer_types):
        src = f"model.layers.{i}.self_attn.gate_proj.weight"
        if kind != "conv" and src in ckpt and tuple(ckpt.info(src)[1]) == (H, D):
            out[f"model.layers.{i}.self_attn.out_gate.weight"] = (
                (H * hd, D), lambda s=src: np.repeat(ckpt.f32(s).reshape(H, D), hd, axis=0), (src,))
    return out


def build(cfg: Lfm3Config, t) -> Decoder:
    D, H, KV, hd, eps = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.norm_eps
    F, K = cfg.intermediate_size, cfg.conv_L_cache
    full = ProportionalRope(hd, cfg.rope_theta, int(cfg.partial_rotary_factor * hd // 2),
                            cfg.max_position_embeddings)
    local = Rope(hd, cfg.rope_local_base_freq, None, cfg.max_position_embeddings)
    E, head = embed_and_head(t, cfg)
    layers, conv_layers = [], []
    for i, kind in enumerate(cfg.layer_types):
        p = f"model.layers.{i}."
        mlp = {n: t.weight(f"{p}feed_forward.{w}.weight", shape)
               for n, w, shape in (("gate", "w1", (F, D)), ("up", "w3", (F, D)), ("down", "w2", (D, F)))}
        post = norm(t, p + "post_operator_norm", D, "rms", eps) if cfg.use_sandwich_norm else None
        if kind == "conv":
            c = p + "conv."
            mixer = Mamba(t.weight(c + "in_proj.weight", (3 * D, D)),
                          t.array(c + "conv.weight", (D, 1, K)).reshape(D, K), None, None, None, None, None, None,
                          t.weight(c + "out_proj.weight", (D, D)), 1, K, 1, version=3)
            L = Layer(q=None, k=None, v=None, o=None, mamba=mixer, **mlp)
            L.mixer_norm = post
            conv_layers.append(i)
        else:
            a = p + "self_attn."
            L = Layer(q=t.weight(a + "q_proj.weight", (H * hd, D)), k=t.weight(a + "k_proj.weight", (KV * hd, D)),
                      v=t.weight(a + "v_proj.weight", (KV * hd, D)), o=t.weight(a + "o_proj.weight", (D, H * hd)),
                      rope=full if kind == "full_attention" else local,
                      window=cfg.sliding_window if kind == "sliding_attention" else 0, **mlp)
            L.q_norm = norm(t, a + "q_norm", hd, "rms", eps)
            L.k_norm = norm(t, a + "k_norm", hd, "rms", eps)
            L.post_attn_norm = post
            if cfg.use_attention_gate:
                L.attn_gate = t.weight(a + "out_gate.weight", (H * hd, D))
        L.attn_norm = norm(t, p + "operator_norm", D, "rms", eps)
        L.mlp_norm = norm(t, p + "ffn_norm", D, "rms", eps)
        if cfg.use_sandwich_norm:
            L.post_mlp_norm = norm(t, p + "post_ffn_norm", D, "rms", eps)
        layers.append(L)
    final = norm(t, "model.embedding_norm", D, "rms", eps)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=KV, head_dim=hd, context_length=cfg.max_position_embeddings,
                state_shapes=((D, K - 1), (1,)), state_layers=tuple(conv_layers))
    return Decoder(arch, E, layers, final, head)


Config = Lfm3Config
