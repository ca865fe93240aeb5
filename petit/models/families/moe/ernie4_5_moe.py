"""ERNIE 4.5 MoE (Baidu ERNIE-4.5-21B-A3B, -300B-A47B): ERNIE 4.5's block (interleaved RoPE, `use_bias` on q/k/v/o and
on every MLP matrix, the LM head's bias) with routed experts in the layers `moe_layer_start_index` ..
`moe_layer_end_index` every `moe_layer_interval` (a dense SwiGLU in the others): softmax over the router's logits,
the top `moe_k` chosen on probability + `moe_statics.e_score_correction_bias`, their probabilities renormalised,
plus `moe_num_shared_experts` shared experts as one SwiGLU of that many times `moe_intermediate_size`, with biases,
unweighted."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, gated_mlp_weights, llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, positive_int, refuse_act
from petit.models.blocks.moe import Moe
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY


@dataclass(kw_only=True)
class Ernie45MoeConfig(DecoderConfig):
    max_position_embeddings: int = 131072
    rms_norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    use_bias: bool = False
    tie_word_embeddings: bool = True
    moe_intermediate_size: int = 1536
    moe_k: int = 6
    moe_num_experts: int = 64
    moe_num_shared_experts: int = 2
    moe_layer_start_index: int = 1
    moe_layer_end_index: int = -1
    moe_layer_interval: int = 1
    moe_norm_min: float = 1e-12
    model_type: str = "ernie4_5_moe"
    _IGNORED = MOE_TRAINING_ONLY

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "ernie4_5_moe", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "use_bias"))
        positive_int(self, "moe_intermediate_size", "moe_k", "moe_num_experts", "moe_layer_interval")
        if self.moe_k > self.moe_num_experts:
            raise ValueError(f"config: moe_k {self.moe_k} exceeds moe_num_experts {self.moe_num_experts}")
        end = self.moe_layer_end_index if self.moe_layer_end_index >= 0 else self.num_hidden_layers - 1
        self.sparse = [(i + 1) % self.moe_layer_interval == 0 and self.moe_layer_start_index <= i <= end
                       for i in range(self.num_hidden_layers)]


def _moe(cfg: Ernie45MoeConfig, t, p: str) -> Moe:
    D, F, E, b = cfg.hidden_size, cfg.moe_intermediate_size, cfg.moe_num_experts, cfg.use_bias
    S = cfg.moe_num_shared_experts * F
    x = p + "mlp.experts."
    w = {n: [t.weight(f"{x}{e}.{n}_proj.weight", shape) for e in range(E)]
         for n, shape in (("gate", (F, D)), ("up", (F, D)), ("down", (D, F)))}
    biases = {f"{n}_b": [t.vec(f"{x}{e}.{n}_proj.bias", (F if n != "down" else D,)) for e in range(E)]
              for n in ("gate", "up", "down")} if b else {}
    shared = shared_b = None
    if cfg.moe_num_shared_experts:
        s = p + "mlp.shared_experts."
        shared = tuple(t.weight(f"{s}{n}_proj.weight", shape) for n, shape in
                       (("gate", (S, D)), ("up", (S, D)), ("down", (D, S))))
        if b:
            shared_b = tuple(t.vec(f"{s}{n}_proj.bias", (w,)) for n, w in (("gate", S), ("up", S), ("down", D)))
    m = Moe(t.float_weight(p + "mlp.gate.weight", (E, D)), w["gate"], w["up"], w["down"], cfg.moe_k, True,
            shared=shared, **biases)
    m.shared_b = shared_b
    m.sel_bias = t.vec(p + "mlp.moe_statics.e_score_correction_bias", (1, E))
    return m


def build(cfg: Ernie45MoeConfig, t):
    rope = default_rope(cfg, interleaved=True)
    b = cfg.use_bias
    widest = max(cfg.intermediate_size, cfg.moe_intermediate_size * max(cfg.moe_num_shared_experts, 1))
    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=b, o_bias=b, rope_for=lambda i: rope,
                     moe_for=lambda i, p: _moe(cfg, t, p) if cfg.sparse[i] else None,
                     mlp_for=lambda i, p: gated_mlp_weights(t, p, cfg, bias=b), context_length=rope.context_length,
                     intermediate_size=widest)
    if b:
        dec.lm_head_b = t.vec("lm_head.bias", (cfg.vocab_size,))
    return dec


Config = Ernie45MoeConfig
