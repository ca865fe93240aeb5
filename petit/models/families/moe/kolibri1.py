"""Kolibri 1 (Aleph Alpha): EXAONE 4's attention (RMSNorm over each head of q and k; the sliding layers use RoPE in
their `sliding_window`, the full layers no position encoding at all: NoPE) in GLM-4's block (input_layernorm before
the attention, post_self_attn_layernorm on its output, post_attention_layernorm before the MLP, post_mlp_layernorm on
its output, each post-norm before its residual add), and in every layer a mixture of SwiGLU experts with an ungated
shared expert (`shared_experts`, `shared_expert_intermediate_size` wide). The router picks the top
`num_experts_per_tok` of its float32 logits PLUS `e_score_correction_bias` and weighs each by the sigmoid of its
logit (renormalised when `norm_topk_prob`): the bias is added in logit space, not to the sigmoid as DeepSeek-V3's
is (Moe.bias_logits). The checkpoint names transformers saves (and reads back renamed) are read, or else its
module names: `moe.router.expert_bias` (mlp.gate.e_score_correction_bias), `post_attn_norm`
(post_self_attn_layernorm), `post_ffn_norm` (post_mlp_layernorm). transformers' config has no `intermediate_size`
(it is reported, not read), and its model cannot run without a `sliding_window` (it builds the sliding mask for
every model), so that is refused."""
from dataclasses import dataclass, field

from petit.models.blocks.common import default_rope, layer_types, llama_like, norm, window_of
from petit.models.blocks.config import DecoderConfig, NoDenseMlp, check_decoder, positive_int, refuse_act
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing


@dataclass(kw_only=True)
class Kolibri1Config(NoDenseMlp, DecoderConfig):
    intermediate_size: int | None = None        # not Kolibri's (no dense MLP): reported when given, never read
    vocab_size: int = 128000
    hidden_size: int = 2560
    num_hidden_layers: int = 50
    num_attention_heads: int = 48
    num_key_value_heads: int | None = 4
    head_dim: int | None = 128
    max_position_embeddings: int = 262144
    rms_norm_eps: float = 1e-6
    sliding_window: int | None = 513
    layer_types: list | None = None
    moe_intermediate_size: int = 512
    shared_expert_intermediate_size: int = 512
    num_experts_per_tok: int = 6
    num_experts: int = 384
    num_local_experts: int | None = None        # the spelling transformers 5 saves (num_experts is its alias)
    norm_topk_prob: bool = False
    model_type: str = "kolibri1"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ()
    _IGNORED = MOE_TRAINING_ONLY
    _DENSE_NAME = "Kolibri 1"

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "kolibri1", "silu")
        both = d.get("num_experts"), d.get("num_local_experts")
        if None not in both and both[0] != both[1]:
            raise ValueError(f"config: num_experts {both[0]} and num_local_experts {both[1]} differ")
        if "sliding_window" in d and d["sliding_window"] is None:
            raise ValueError("config: sliding_window null: transformers' Kolibri 1 builds a sliding mask for every "
                             "model and cannot run without one")

    def _validate(self):
        if self.num_local_experts is not None:
            self.num_experts = self.num_local_experts
        positive_int(self, "moe_intermediate_size", "shared_expert_intermediate_size")
        self.intermediate_size = self.shared_expert_intermediate_size       # the widest dense MLP (scratch)
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings",), window=True)
        check_routing(self)
        self.types()

    def types(self) -> list[str]:
        return layer_types(self, lambda i: "full_attention" if (i + 1) % 5 == 0 else "sliding_attention")


def _either(t, p: str, saved: str, module: str) -> str:
    """The tensor (or the norm, whose weight is saved.weight) under the name transformers saves, else its module's."""
    return p + (saved if t.has(p + saved) or t.has(p + saved + ".weight") else module)


def build(cfg: Kolibri1Config, t):
    types, rope, E = cfg.types(), default_rope(cfg), cfg.num_experts

    def moe(i, p):
        m = moe_weights(t, p, cfg, n_experts=E, top_k=cfg.num_experts_per_tok, inter=cfg.moe_intermediate_size,
                        norm_topk=cfg.norm_topk_prob, router="mlp.gate", experts="mlp.experts",
                        shared="mlp.shared_experts", shared_inter=cfg.shared_expert_intermediate_size)
        m.scoring, m.bias_logits = "sigmoid", True
        m.sel_bias = t.vec(_either(t, p, "moe.router.expert_bias", "mlp.gate.e_score_correction_bias"), (E,))
        return m

    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, qk_norm="head", window_for=window_of(cfg, types),
                     rope_for=lambda i: rope if types[i] == "sliding_attention" else None,
                     context_length=rope.context_length, moe_for=moe)
    for i, L in enumerate(dec.layers):
        p = f"model.layers.{i}."
        L.post_attn_norm = norm(t, _either(t, p, "post_attn_norm", "post_self_attn_layernorm"), cfg.hidden_size,
                                "rms", cfg.rms_norm_eps)
        L.post_mlp_norm = norm(t, _either(t, p, "post_ffn_norm", "post_mlp_layernorm"), cfg.hidden_size, "rms",
                               cfg.rms_norm_eps)
    return dec


Config = Kolibri1Config
