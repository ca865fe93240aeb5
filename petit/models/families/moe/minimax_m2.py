"""MiniMax-M2: a Llama block with RMSNorm over the whole q and k projections (`q_norm` [heads x head_dim], `k_norm`
[kv heads x head_dim], before RoPE), partial rotate-half RoPE on the first `partial_rotary_factor` of each head (the
released config.json says `rotary_dim`, read as rotary_dim / head_dim), and routed experts in every layer, stored
under Mixtral's names (`block_sparse_moe.experts.{e}.w1 / w3 / w2`, router `block_sparse_moe.gate`): sigmoid
scores, the choice on score + `e_score_correction_bias`, the chosen scores renormalised to sum 1 (no scale, no
shared expert)."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing

MOE = "block_sparse_moe"


@dataclass(kw_only=True)
class MiniMaxM2Config(DecoderConfig):
    num_key_value_heads: int | None = 8
    head_dim: int | None = 128
    max_position_embeddings: int = 196608
    rms_norm_eps: float = 1e-6
    partial_rotary_factor: float = 1.0
    num_local_experts: int = 256
    num_experts_per_tok: int = 8
    model_type: str = "minimax_m2"
    _IGNORED = MOE_TRAINING_ONLY

    @classmethod
    def from_dict(cls, d: dict):
        if isinstance(d, dict) and d.get("rotary_dim") is not None:     # the released config.json's spelling
            d = dict(d)
            rot, hd = d.pop("rotary_dim"), d.get("head_dim", 128)
            if isinstance(rot, bool) or not isinstance(rot, int) or not isinstance(hd, int) or not 0 < rot <= hd:
                raise ValueError(f"config: rotary_dim {rot!r} must be a positive integer up to head_dim {hd!r}")
            if d.get("partial_rotary_factor") is None and not (d.get("rope_parameters") or {}).get(
                    "partial_rotary_factor"):
                d["partial_rotary_factor"] = rot / hd
        return super().from_dict(d)

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "minimax_m2", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "partial_rotary_factor"), ("tie_word_embeddings",))
        check_routing(self, "num_local_experts")
        self.rotary_dim = int(self.head_dim * self.partial_rotary_factor)
        if not 0 < self.rotary_dim <= self.head_dim or self.rotary_dim % 2:
            raise ValueError(f"config: partial_rotary_factor {self.partial_rotary_factor!r} gives {self.rotary_dim} "
                             f"rotated values of a {self.head_dim}-wide head (an even number, at least 2, is needed)")


def build(cfg: MiniMaxM2Config, t):
    rope = default_rope(cfg, dim=cfg.rotary_dim)

    def moe_for(i, p):
        m = moe_weights(t, p, cfg, n_experts=cfg.num_local_experts, top_k=cfg.num_experts_per_tok,
                        inter=cfg.intermediate_size, norm_topk=True, router=f"{MOE}.gate", experts=f"{MOE}.experts",
                        names=("w1", "w3", "w2"))
        m.scoring = "sigmoid"
        m.sel_bias = t.vec(f"{p}{MOE}.e_score_correction_bias", (cfg.num_local_experts,))
        return m

    return llama_like(t, cfg, eps=cfg.rms_norm_eps, rope_for=lambda i: rope, qk_norm="full", moe_for=moe_for,
                      context_length=rope.context_length)


Config = MiniMaxM2Config
