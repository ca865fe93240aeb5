"""GraniteMoeSWA: GraniteMoeShared's experts (and optional shared MLP) under GraniteSWA's attention (per-layer sliding
windows, attention sinks, per-layer RoPE bases: petit/models/families/dense/granite_swa.py). transformers 5 saves the
experts as it holds them, with no renaming back to GraniteMoE's names: `block_sparse_moe.experts.gate_up_proj` [E, 2F,
D] (each expert's gate rows, then its up rows), `experts.down_proj` [E, D, F] and `router.weight` [E, D]; a folder in
GraniteMoE's spelling (`input_linear`, `output_linear`, `router.layer`) is read too. `hf_tensors` hands the experts out
one matrix at a time."""
from dataclasses import dataclass

from petit.models.families.moe import granitemoe, granitemoeshared

from petit.models.families.dense import granite_swa
from petit.models.blocks.common import llama_like
from petit.models.blocks.moe import moe_weights

MOE = granitemoe.MOE


@dataclass(kw_only=True)
class GraniteMoeSWAConfig(granitemoeshared.GraniteMoeSharedConfig):
    sliding_window: int | None = 128
    layer_types: list | None = None
    layer_rope_theta: list | None = None
    model_type: str = "granitemoe_swa"

    def _validate(self):
        super()._validate()
        granite_swa.check_swa(self)


def hf_tensors(cfg: GraniteMoeSWAConfig, ckpt) -> dict:
    """Each expert's gate / up / down matrix, and the router as `router.layer`, from transformers 5's 3-D tensors;
    the shared MLP as granitemoeshared's. A checkpoint in GraniteMoE's own spelling goes through granitemoe's."""
    shared = granitemoeshared.shared_tensors(cfg, ckpt)
    if f"model.layers.0.{MOE}.input_linear.weight" in ckpt:
        return granitemoe.hf_tensors(cfg, ckpt) | shared
    F, D, E = cfg.intermediate_size, cfg.hidden_size, cfg.num_local_experts
    out = {}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}.{MOE}."
        fused, down, router = p + "experts.gate_up_proj", p + "experts.down_proj", p + "router.weight"
        held = {}

        def part(name, e, rows=None, held=held):
            def make():
                if name not in held:
                    held.clear()
                    held[name] = ckpt.f32(name)
                return held[name][e, rows[0]:rows[1]] if rows else held[name][e]
            return make

        for e in range(E):
            x = f"{p}experts.{e}."
            out[x + "gate_proj.weight"] = ((F, D), part(fused, e, (0, F)), [fused])
            out[x + "up_proj.weight"] = ((F, D), part(fused, e, (F, 2 * F)), [fused])
            out[x + "down_proj.weight"] = ((D, F), part(down, e), [down])
        out[p + "router.layer.weight"] = ((E, D), lambda r=router: ckpt.f32(r), [router])
    return out | shared


def build(cfg: GraniteMoeSWAConfig, t):
    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                     embed_scale=cfg.embedding_multiplier, attn_scale=cfg.attention_multiplier,
                     residual_scale=cfg.residual_multiplier, logit_scale=1.0 / cfg.logits_scaling,
                     moe_for=lambda i, p: moe_weights(
                         t, p, cfg, n_experts=cfg.num_local_experts, top_k=cfg.num_experts_per_tok,
                         inter=cfg.intermediate_size, norm_topk=True, router=f"{MOE}.router.layer",
                         experts=f"{MOE}.experts", shared=granitemoeshared.SHARED if cfg.shared_intermediate_size
                         else None, shared_inter=cfg.shared_intermediate_size),
                     **granite_swa.swa_attention(cfg))
    return granite_swa.add_sinks(dec, t, cfg)


Config = GraniteMoeSWAConfig
