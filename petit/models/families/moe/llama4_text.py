"""Llama 4's text model (`llama4_text`; Llama-4-Scout / Maverick's language part): interleaved RoPE in the RoPE
layers, with an RMS norm without weight over each head of q and k (`use_qk_norm`; transformers applies it after the
rotation, which leaves a head's RMS unchanged, so Petit applies it before, as its other q / k norms) and attention in
chunks (`attention_chunk_size`: a query sees the keys of its own chunk); the NoPE layers (`no_rope_layers[i] == 0`)
attend to everything before them, with the temperature-tuned queries of `attn_temperature_tuning` (q x (1 + attn_scale
ln(1 + floor((p + 1) / floor_scale))) at position p). Every `interleave_moe_layer_step`-th layer (`moe_layers`) routes
to one of `num_local_experts` experts: the top logit, its sigmoid scaling the expert's input (not its output), plus a
shared expert on the unscaled input; the other layers are dense MLPs of `intermediate_size_mlp`.

The checkpoint stores each MoE layer's experts as 3-D [E, in, out] tensors: `gate_up_proj` [E, D, 2F] (gate columns,
then up columns) and `down_proj` [E, F, D]; `hf_tensors` hands out each expert's matrices as [out, in]."""
from dataclasses import dataclass, field

from petit.models.blocks.common import default_rope, gated_mlp_weights, llama_like
from petit.models.blocks.config import DecoderConfig, boolean, check_decoder, positive_int, positive_number
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing

FF = "feed_forward"
LAYER_TYPES = ("chunked_attention", "full_attention")


@dataclass(kw_only=True)
class Llama4TextConfig(DecoderConfig):
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 4096 * 32
    rope_theta: float = 500000.0
    intermediate_size_mlp: int = 16384
    num_local_experts: int = 16
    num_experts_per_tok: int = 1
    interleave_moe_layer_step: int = 1
    moe_layers: list | None = None
    no_rope_layers: list | None = None
    no_rope_layer_interval: int = 4
    attention_chunk_size: int | None = 8192
    layer_types: list | None = None
    use_qk_norm: bool = True
    attn_temperature_tuning: bool = True
    floor_scale: float = 8192
    attn_scale: float = 0.1
    attention_bias: bool = False
    rope_interleaved: bool = True        # Llama 4 rotates adjacent pairs (its complex-number RoPE)
    model_type: str = "llama4_text"
    _IGNORED = MOE_TRAINING_ONLY | {"for_llm_compressor", "cache_implementation", "attn_implementation"}
    _ROPE_LAYER_TYPES = LAYER_TYPES

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"),
                      ("tie_word_embeddings", "use_qk_norm", "attn_temperature_tuning", "attention_bias",
                       "rope_interleaved"))
        check_routing(self, "num_local_experts")
        positive_int(self, "intermediate_size_mlp", "interleave_moe_layer_step", "no_rope_layer_interval")
        positive_number(self, "floor_scale")
        n = self.num_hidden_layers
        if self.moe_layers is None:
            step = self.interleave_moe_layer_step
            self.moe_layers = list(range(step - 1, n, step))
        if not isinstance(self.moe_layers, list) or any(isinstance(i, bool) or not isinstance(i, int) or
                                                         not 0 <= i < n for i in self.moe_layers):
            raise ValueError(f"config: moe_layers must list layer indices below {n}, got {self.moe_layers!r}")
        if self.no_rope_layers is None:
            self.no_rope_layers = [int((i + 1) % self.no_rope_layer_interval != 0) for i in range(n)]
        if not isinstance(self.no_rope_layers, list) or len(self.no_rope_layers) != n or \
                any(v not in (0, 1) for v in self.no_rope_layers):
            raise ValueError(f"config: no_rope_layers must list {n} values of 0 / 1, got {self.no_rope_layers!r}")
        if self.layer_types is None:
            chunked = self.attention_chunk_size is not None
            self.layer_types = ["chunked_attention" if chunked and r else "full_attention" for r in self.no_rope_layers]
        if not isinstance(self.layer_types, list) or len(self.layer_types) != n or \
                any(t not in LAYER_TYPES for t in self.layer_types):
            raise ValueError(f"config: layer_types must list {n} values of {' / '.join(LAYER_TYPES)}, got "
                             f"{self.layer_types!r}")
        if "chunked_attention" in self.layer_types:
            positive_int(self, "attention_chunk_size")
        positive_number(self, "attn_scale") if self.attn_scale else None
        boolean(self, "use_qk_norm")


def hf_tensors(cfg: Llama4TextConfig, ckpt) -> dict:
    """Each expert's gate / up / down matrix [out, in] from the layer's [E, in, out] tensors (read once per layer
    and tensor, kept while its experts are handed out)."""
    F, D, E = cfg.intermediate_size, cfg.hidden_size, cfg.num_local_experts
    out = {}
    for i in cfg.moe_layers:
        p = f"model.layers.{i}.{FF}.experts."
        held = {}

        def part(name, cols, e, held=held):
            def make():
                if name not in held:
                    held.clear()
                    held[name] = ckpt.f32(name)
                return held[name][e][:, cols[0]:cols[1]].T if cols else held[name][e].T
            return make

        for e in range(E):
            fused, down = p + "gate_up_proj", p + "down_proj"
            out[f"{p}{e}.gate_proj.weight"] = ((F, D), part(fused, (0, F), e), [fused])
            out[f"{p}{e}.up_proj.weight"] = ((F, D), part(fused, (F, 2 * F), e), [fused])
            out[f"{p}{e}.down_proj.weight"] = ((D, F), part(down, None, e), [down])
    return out


def build(cfg: Llama4TextConfig, t):
    rope = default_rope(cfg)
    moe_layers = set(cfg.moe_layers)

    def moe_for(i, p):
        if i not in moe_layers:
            return None
        m = moe_weights(t, p, cfg, n_experts=cfg.num_local_experts, top_k=cfg.num_experts_per_tok,
                        inter=cfg.intermediate_size, norm_topk=False, router=f"{FF}.router", experts=f"{FF}.experts",
                        shared=f"{FF}.shared_expert", shared_inter=cfg.intermediate_size)
        m.scoring, m.scale_input = "sigmoid", True
        return m

    net = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                     rope_for=lambda i: rope if cfg.no_rope_layers[i] else None, context_length=rope.context_length,
                     moe_for=moe_for, mlp_for=lambda i, p: gated_mlp_weights(t, p, _Dense(cfg), prefix=f"{FF}."),
                     intermediate_size=cfg.intermediate_size_mlp)
    for i, L in enumerate(net.layers):
        if cfg.layer_types[i] == "chunked_attention":
            L.chunk = cfg.attention_chunk_size
        if cfg.use_qk_norm and L.rope is not None:
            L.q_norm = L.k_norm = _weightless(cfg)
        if cfg.attn_temperature_tuning and L.rope is None:
            L.temperature = (float(cfg.floor_scale), float(cfg.attn_scale))
    return net


@dataclass
class _Dense:
    """The dense layers' MLP shape (intermediate_size_mlp) for gated_mlp_weights."""
    cfg: Llama4TextConfig
    hidden_size: int = field(init=False)
    intermediate_size: int = field(init=False)

    def __post_init__(self):
        self.hidden_size, self.intermediate_size = self.cfg.hidden_size, self.cfg.intermediate_size_mlp


def _weightless(cfg):
    from petit.models.blocks.decoder import Norm
    return Norm("rms", cfg.rms_norm_eps, None)


Config = Llama4TextConfig
