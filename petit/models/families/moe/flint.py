"""Flint (RecursiveSI): Qwen3-MoE's pre-norm block and attention (RMSNorm over each head of q and k, biases with
`attention_bias`) with a learned sink logit per head in every softmax (gpt-oss's; saved as
`self_attn.softmax_offset`, `self_attn.sinks` in transformers' module), RoPE only on the sliding layers (the full
ones have no position encoding: NoPE), and by default full attention on the first two layers, every fourth and the
last. Layers in `mlp_only_layers` (default the first two) or off `decoder_sparse_step` keep a dense SwiGLU MLP of
`intermediate_size`; the others route to SwiGLU experts on the sigmoids of the float32 router logits (the top
`num_experts_per_tok`, renormalised with `norm_topk_prob`) and add an ungated shared expert (`shared_expert`,
`shared_expert_intermediate_size` wide). transformers' model cannot run without a `sliding_window` (it builds the
sliding mask for every model), so that is refused."""
from dataclasses import dataclass, field

from petit.models.blocks.common import default_rope, layer_types, llama_like, window_of
from petit.models.blocks.config import DecoderConfig, boolean, check_decoder, positive_int, refuse_act
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing, sparse_layers

SINKS = ("self_attn.softmax_offset", "self_attn.sinks")        # transformers' saved name, its module's


@dataclass(kw_only=True)
class FlintConfig(DecoderConfig):
    vocab_size: int = 150144
    hidden_size: int = 2048
    intermediate_size: int = 6144
    num_hidden_layers: int = 49
    num_attention_heads: int = 32
    num_key_value_heads: int | None = 4
    head_dim: int | None = 128
    max_position_embeddings: int = 262144
    rms_norm_eps: float = 1e-6
    sliding_window: int = 513
    layer_types: list | None = None
    attention_bias: bool = False
    decoder_sparse_step: int = 1
    mlp_only_layers: list | None = None
    moe_intermediate_size: int = 512
    shared_expert_intermediate_size: int = 1024
    num_experts_per_tok: int = 6
    num_experts: int = 256
    norm_topk_prob: bool = True
    model_type: str = "flint"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ()
    _IGNORED = MOE_TRAINING_ONLY

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "flint", "silu")
        if "sliding_window" in d and d["sliding_window"] is None:
            raise ValueError("config: sliding_window null: transformers' Flint builds a sliding mask for every model "
                             "and cannot run without one")

    def _validate(self):
        if self.mlp_only_layers is None:
            self.mlp_only_layers = [0, 1]
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings",), window=True)
        boolean(self, "attention_bias")
        positive_int(self, "moe_intermediate_size", "shared_expert_intermediate_size")
        check_routing(self)
        sparse_layers(self)
        self.types()

    def types(self) -> list[str]:
        n = self.num_hidden_layers
        return layer_types(self, lambda i: "full_attention" if i < 2 or i % 4 == 1 or i == n - 1
                           else "sliding_attention")


def build(cfg: FlintConfig, t):
    types, rope, sparse = cfg.types(), default_rope(cfg), sparse_layers(cfg)

    def moe(i, p):
        if not sparse[i]:
            return None
        m = moe_weights(t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                        inter=cfg.moe_intermediate_size, norm_topk=cfg.norm_topk_prob, router="mlp.gate",
                        experts="mlp.experts", shared="mlp.shared_expert",
                        shared_inter=cfg.shared_expert_intermediate_size)
        m.scoring = "sigmoid"
        return m

    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                     qk_norm="head", window_for=window_of(cfg, types), context_length=rope.context_length,
                     rope_for=lambda i: rope if types[i] == "sliding_attention" else None, moe_for=moe)
    for i, L in enumerate(dec.layers):
        p = f"model.layers.{i}."
        name = next((p + s for s in SINKS if t.has(p + s)), p + SINKS[0])
        L.sinks = t.vec(name, (cfg.num_attention_heads,))
    return dec


Config = FlintConfig
