"""ERNIE 4.5 VL's language model (transformers' `ernie4_5_vl_moe_text`, Ernie4_5_VLMoeTextModel): ERNIE 4.5 MoE's block
(interleaved RoPE, `use_bias` on q / k / v / o, the dense MLP and the shared experts) with modality-isolated experts.
Each `sparse` layer of `mlp_layer_types` (default: all but the first) holds text experts (`moe_intermediate_size[0]`
wide) and vision experts (`[1]`), each set with its own router and correction bias; a text token only ever reaches
the text ones (Ernie4_5_VLMoeMoeBlock runs vision_moe on the tokens moe_mm_token_type_ids marks, none without an
image): softmax over the router's logits, the top `moe_k` chosen on probability + e_score_correction_bias, their
probabilities renormalised, plus `moe_num_shared_experts` shared experts as one SwiGLU of that many times
moe_intermediate_size[0]. The routed experts have no biases.

As stored (the release's layout, which save_pretrained writes back): experts 0 .. E-1 are the text experts and E ..
2E-1 the vision ones under `mlp.experts.*`, the text router `mlp.gate.weight` [hidden, E] (transposed; the vision
one `mlp.gate.weight_1`), `mlp.moe_statics.e_score_correction_bias` [2, E] (text row first). The vision experts,
router and row are accounted for and never read.

RoPE: Ernie4_5_VLMoeTextRotaryEmbedding pre-rotates the frequencies of the height and width sections and gives each
section its position from the text, height or width axis (`mrope_section`, default [22, 22, 20]); a text-only prompt
gives every axis the same position (Ernie4_5_VLMoeTextModel.forward: one arange expanded to the three), and the
recomposition puts each frequency back in its place, so the rotation is ERNIE 4.5's plain interleaved RoPE. Only
the default RoPE type runs in transformers; another is refused by name."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, gated_mlp_weights, llama_like
from petit.models.blocks.config import DecoderConfig, aliased, check_decoder, positive_int, refuse_act
from petit.models.blocks.moe import Moe
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY

ALIASES = {"num_experts": "moe_num_experts", "num_experts_per_tok": "moe_k"}
TYPES = ("dense", "sparse")


@dataclass(kw_only=True)
class Ernie45VLMoeTextConfig(DecoderConfig):
    num_key_value_heads: int | None = 4
    max_position_embeddings: int = 131072
    rms_norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    use_bias: bool = False
    tie_word_embeddings: bool = True
    moe_intermediate_size: list | None = None       # [text, vision]; default [1536, 512]
    moe_k: int = 6
    moe_num_experts: int = 64
    moe_num_shared_experts: int = 2
    moe_norm_min: float = 1e-12
    mlp_layer_types: list | None = None             # "dense" / "sparse" per layer; default dense first, then sparse
    model_type: str = "ernie4_5_vl_moe_text"
    _IGNORED = MOE_TRAINING_ONLY
    _ROPE_SCALING_EXTRA = frozenset({"mrope_section"})

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(aliased(d, ALIASES) if isinstance(d, dict) else d)

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), cls.model_type, "silu")

    def _validate(self):
        if self.rope_scaling:
            raise ValueError(f"config: rope_parameters rope_type {self.rope_scaling.get('rope_type')!r}: ERNIE 4.5 "
                             f"VL's text model runs the default RoPE only (transformers 5.25 refuses another)")
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "use_bias"))
        if self.moe_intermediate_size is None:
            self.moe_intermediate_size = [1536, 512]
        m = self.moe_intermediate_size
        if not isinstance(m, list) or len(m) != 2 or any(isinstance(x, bool) or not isinstance(x, int) or x <= 0
                                                          for x in m):
            raise ValueError(f"config: moe_intermediate_size must be [text, vision] widths, got {m!r}")
        positive_int(self, "moe_k", "moe_num_experts")
        if self.moe_k > self.moe_num_experts:
            raise ValueError(f"config: moe_k {self.moe_k} exceeds moe_num_experts {self.moe_num_experts}")
        if self.mlp_layer_types is None:
            self.mlp_layer_types = ["dense"] + ["sparse"] * (self.num_hidden_layers - 1)
        t = self.mlp_layer_types
        if not isinstance(t, list) or len(t) != self.num_hidden_layers or any(x not in TYPES for x in t):
            raise ValueError(f"config: mlp_layer_types must give each of the {self.num_hidden_layers} layers "
                             f"'dense' or 'sparse', got {t!r}")
        self.sparse = [x == "sparse" for x in t]


def hf_tensors(cfg: Ernie45VLMoeTextConfig, ckpt) -> dict:
    """The text router as [E, hidden] and the text row of the correction bias under their stored names; the vision
    experts, router and row accounted for, never read."""
    E, D, out = cfg.moe_num_experts, cfg.hidden_size, {}
    names = set(ckpt.names())
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}.mlp."
        if not cfg.sparse[i] or p + "gate.weight" not in names:
            continue
        g, b = p + "gate.weight", p + "moe_statics.e_score_correction_bias"
        if tuple(ckpt.info(g)[1]) == (D, E):
            out[g] = ((E, D), lambda g=g: ckpt.f32(g).T, (g,))
        if b in names and len(ckpt.info(b)[1]) == 2:
            out[b] = ((1, E), lambda b=b: ckpt.f32(b)[:1], (b,))
        vision = [p + "gate.weight_1"] + [f"{p}experts.{e}.{n}_proj.weight" for e in range(E, 2 * E)
                                          for n in ("gate", "up", "down")]
        out.update({n: (ckpt.info(n)[1], _never(n), (n,)) for n in vision if n in names})
    return out


def _never(n):
    def make():
        raise AssertionError(f"{n} is a vision expert's, which text tokens never reach")
    return make


def _moe(cfg: Ernie45VLMoeTextConfig, t, p: str) -> Moe:
    D, F, E = cfg.hidden_size, cfg.moe_intermediate_size[0], cfg.moe_num_experts
    S = cfg.moe_num_shared_experts * F
    x = p + "mlp.experts."
    w = {n: [t.weight(f"{x}{e}.{n}_proj.weight", shape) for e in range(E)]
         for n, shape in (("gate", (F, D)), ("up", (F, D)), ("down", (D, F)))}
    shared = shared_b = None
    if cfg.moe_num_shared_experts:
        s = p + "mlp.shared_experts."
        shared = tuple(t.weight(f"{s}{n}_proj.weight", shape) for n, shape in
                       (("gate", (S, D)), ("up", (S, D)), ("down", (D, S))))
        if cfg.use_bias:
            shared_b = tuple(t.vec(f"{s}{n}_proj.bias", (w,)) for n, w in (("gate", S), ("up", S), ("down", D)))
    m = Moe(t.float_weight(p + "mlp.gate.weight", (E, D)), w["gate"], w["up"], w["down"], cfg.moe_k, True,
            shared=shared)
    m.shared_b = shared_b
    m.sel_bias = t.vec(p + "mlp.moe_statics.e_score_correction_bias", (1, E))
    return m


def build(cfg: Ernie45VLMoeTextConfig, t):
    rope = default_rope(cfg, interleaved=True)
    b = cfg.use_bias
    widest = max(cfg.intermediate_size, cfg.moe_intermediate_size[0] * max(cfg.moe_num_shared_experts, 1))
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=b, o_bias=b, rope_for=lambda i: rope,
                      moe_for=lambda i, p: _moe(cfg, t, p) if cfg.sparse[i] else None,
                      mlp_for=lambda i, p: gated_mlp_weights(t, p, cfg, bias=b), context_length=rope.context_length,
                      intermediate_size=widest)


Config = Ernie45VLMoeTextConfig
