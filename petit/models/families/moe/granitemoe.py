"""GraniteMoE: Granite's four multipliers (embedding, attention, residual, logits) with routed experts in every
layer: the top `num_experts_per_tok` of `num_local_experts` router logits, softmax over those (the same weights as
a softmax over all of them renormalised over the chosen). The checkpoint stores each layer's experts as two 3-D
tensors, `input_linear` [E, 2F, D] (gate rows, then up rows) and `output_linear` [E, D, F]; `hf_tensors` hands
them out one expert matrix at a time."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.families.dense.granite import GraniteConfig
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing

MOE = "block_sparse_moe"


@dataclass(kw_only=True)
class GraniteMoeConfig(GraniteConfig):
    num_local_experts: int = 8
    num_experts_per_tok: int = 2
    position_embedding_type: str = "rope"
    model_type: str = "granitemoe"
    _IGNORED = MOE_TRAINING_ONLY

    def _validate(self):
        super()._validate()
        check_routing(self, "num_local_experts")
        if self.position_embedding_type != "rope":
            raise ValueError(f"config: position_embedding_type {self.position_embedding_type!r} is not supported by "
                             f"the granitemoe family (only 'rope')")


def hf_tensors(cfg: GraniteMoeConfig, ckpt) -> dict:
    """Each expert's gate / up / down matrix as a tensor of its own, sliced from the layer's 3-D tensors (read once
    per layer and tensor, kept while its experts are handed out)."""
    F, D, E = cfg.intermediate_size, cfg.hidden_size, cfg.num_local_experts
    out = {}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}.{MOE}."
        held = {}

        def part(name, rows, e, held=held):
            def make():
                if name not in held:
                    held.clear()
                    held[name] = ckpt.f32(name)
                return held[name][e, rows[0]:rows[1]] if rows else held[name][e]
            return make

        for e in range(E):
            x = f"{p}experts.{e}."
            fused = p + "input_linear.weight"
            out[x + "gate_proj.weight"] = ((F, D), part(fused, (0, F), e), [fused])
            out[x + "up_proj.weight"] = ((F, D), part(fused, (F, 2 * F), e), [fused])
            out[x + "down_proj.weight"] = ((D, F), part(p + "output_linear.weight", None, e),
                                           [p + "output_linear.weight"])
    return out


def build(cfg: GraniteMoeConfig, t):
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                      rope_for=lambda i: rope, context_length=rope.context_length,
                      embed_scale=cfg.embedding_multiplier, attn_scale=cfg.attention_multiplier,
                      residual_scale=cfg.residual_multiplier, logit_scale=1.0 / cfg.logits_scaling,
                      moe_for=lambda i, p: moe_weights(
                          t, p, cfg, n_experts=cfg.num_local_experts, top_k=cfg.num_experts_per_tok,
                          inter=cfg.intermediate_size, norm_topk=True, router=f"{MOE}.router.layer",
                          experts=f"{MOE}.experts"))


Config = GraniteMoeConfig
