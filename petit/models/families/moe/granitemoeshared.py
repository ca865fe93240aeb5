"""GraniteMoeShared: GraniteMoE plus one shared MLP per layer, which every token takes unweighted, added to the
routed experts' sum before the residual multiplier. The checkpoint stores it as `shared_mlp.input_linear` [2S, D]
(gate rows, then up rows) and `shared_mlp.output_linear` [D, S]; `hf_tensors` hands out its three matrices like the
experts'. `shared_intermediate_size` 0 (transformers' default) means no shared MLP: then it is granitemoe."""
from dataclasses import dataclass

from petit.models.families.moe import granitemoe
from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.moe import moe_weights

SHARED = "shared_mlp"


@dataclass(kw_only=True)
class GraniteMoeSharedConfig(granitemoe.GraniteMoeConfig):
    shared_intermediate_size: int = 0
    model_type: str = "granitemoeshared"

    def _validate(self):
        super()._validate()
        v = self.shared_intermediate_size
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"config: shared_intermediate_size must be a non-negative integer (0: no shared MLP, as "
                             f"transformers takes it), got {v!r}")


def hf_tensors(cfg: GraniteMoeSharedConfig, ckpt) -> dict:
    """The experts' matrices as granitemoe's, and the shared MLP's gate / up rows of input_linear and its
    output_linear under the names of a gated MLP (`shared_mlp.gate_proj` ...)."""
    return granitemoe.hf_tensors(cfg, ckpt) | shared_tensors(cfg, ckpt)


def shared_tensors(cfg, ckpt) -> dict:
    """Each layer's shared MLP as a gated MLP's three matrices (`shared_mlp.gate_proj` ...): the gate and up rows
    of input_linear, and output_linear (none when shared_intermediate_size is 0)."""
    out = {}
    S, D = cfg.shared_intermediate_size, cfg.hidden_size
    for i in range(cfg.num_hidden_layers if S else 0):
        p = f"model.layers.{i}.{SHARED}."
        fused, down = p + "input_linear.weight", p + "output_linear.weight"
        out[p + "gate_proj.weight"] = ((S, D), lambda f=fused: ckpt.f32(f)[:S], [fused])
        out[p + "up_proj.weight"] = ((S, D), lambda f=fused: ckpt.f32(f)[S:], [fused])
        out[p + "down_proj.weight"] = ((D, S), lambda f=down: ckpt.f32(f), [down])
    return out


def build(cfg: GraniteMoeSharedConfig, t):
    rope = default_rope(cfg)
    M = granitemoe.MOE
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                      rope_for=lambda i: rope, context_length=rope.context_length,
                      embed_scale=cfg.embedding_multiplier, attn_scale=cfg.attention_multiplier,
                      residual_scale=cfg.residual_multiplier, logit_scale=1.0 / cfg.logits_scaling,
                      moe_for=lambda i, p: moe_weights(
                          t, p, cfg, n_experts=cfg.num_local_experts, top_k=cfg.num_experts_per_tok,
                          inter=cfg.intermediate_size, norm_topk=True, router=f"{M}.router.layer",
                          experts=f"{M}.experts", shared=SHARED if cfg.shared_intermediate_size else None,
                          shared_inter=cfg.shared_intermediate_size))


Config = GraniteMoeSharedConfig
