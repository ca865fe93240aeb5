"""AFMoE (Arcee's Trinity): a Llama block with four norms (input_layernorm before attention, post_attention_layernorm
of its output, pre_mlp_layernorm before the MLP, post_mlp_layernorm of its output), per-head q / k RMS norms, the
attention output times sigmoid(gate_proj x) before o_proj, and local / global layers: the sliding layers
(`layer_types`, by default all but every `global_attn_every_n_layers`-th) use RoPE in their `sliding_window`, the
full ones no position encoding at all. With `mup_enabled` the embeddings are multiplied by sqrt(hidden_size). The
first `num_dense_layers` layers keep a SwiGLU MLP of `intermediate_size`; the others route each token to
`num_experts_per_tok` of `num_experts` SwiGLU experts of `moe_intermediate_size`: sigmoid scores (`mlp.router.gate`,
kept in float), the choice on score + `mlp.expert_bias`, the chosen scores renormalised, times `route_scale`; plus a
shared expert of `moe_intermediate_size x num_shared_experts`, unweighted."""
import math
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, layer_types, llama_like, norm, window_of
from petit.models.blocks.config import DecoderConfig, boolean, check_decoder, positive_int, positive_number, refuse_act
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing


@dataclass(kw_only=True)
class AfmoeConfig(DecoderConfig):
    head_dim: int | None = 128
    max_position_embeddings: int = 16384
    rms_norm_eps: float = 1e-5
    moe_intermediate_size: int = 1408
    num_dense_layers: int = 1
    num_experts: int = 64
    num_experts_per_tok: int = 6
    num_shared_experts: int = 2
    route_scale: float = 1.0
    global_attn_every_n_layers: int = 4
    sliding_window: int | None = 1024
    layer_types: list | None = None
    mup_enabled: bool = False
    attention_bias: bool = False
    model_type: str = "afmoe"
    _IGNORED = MOE_TRAINING_ONLY

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "afmoe", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "route_scale"),
                      ("tie_word_embeddings", "mup_enabled", "attention_bias"), window=True)
        check_routing(self)
        positive_int(self, "moe_intermediate_size", "global_attn_every_n_layers")
        positive_number(self, "route_scale")
        boolean(self, "mup_enabled")
        for k in ("num_dense_layers", "num_shared_experts"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"config: {k} must be a non-negative integer, got {v!r}")
        if self.attention_bias:
            raise ValueError("config: attention_bias true is not supported by the afmoe family (AFMoE's attention "
                             "has no biases whatever the key says)")
        n = self.global_attn_every_n_layers
        self.types = layer_types(self, lambda i: "sliding_attention" if (i + 1) % n else "full_attention")


def build(cfg: AfmoeConfig, t):
    D, hd = cfg.hidden_size, cfg.head_dim
    rope = default_rope(cfg)

    def moe_for(i, p):
        if i < cfg.num_dense_layers:
            return None
        S = cfg.moe_intermediate_size * cfg.num_shared_experts
        m = moe_weights(t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                        inter=cfg.moe_intermediate_size, norm_topk=True, router="mlp.router.gate",
                        experts="mlp.experts", shared="mlp.shared_experts" if S else None, shared_inter=S)
        m.scoring, m.routed_scale = "sigmoid", float(cfg.route_scale)
        m.sel_bias = t.vec(p + "mlp.expert_bias", (cfg.num_experts,))
        return m

    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, qk_norm="head", moe_for=moe_for,
                     rope_for=lambda i: rope if cfg.types[i] == "sliding_attention" else None,
                     window_for=window_of(cfg, cfg.types), context_length=rope.context_length,
                     attn_norm_name="input_layernorm", mlp_norm_name="pre_mlp_layernorm",
                     embed_scale=math.sqrt(D) if cfg.mup_enabled else 1.0)
    for i, L in enumerate(dec.layers):
        p = f"model.layers.{i}."
        L.post_attn_norm = norm(t, p + "post_attention_layernorm", D, "rms", cfg.rms_norm_eps)
        L.post_mlp_norm = norm(t, p + "post_mlp_layernorm", D, "rms", cfg.rms_norm_eps)
        L.attn_gate = t.weight(p + "self_attn.gate_proj.weight", (cfg.num_attention_heads * hd, D))
    return dec


Config = AfmoeConfig
