"""Qwen3.5-MoE's text model (`qwen3_5_moe_text`; the released `qwen3_5_moe` folders hold it as `text_config`):
Qwen3.5's hybrid block (Gated DeltaNet and gated full attention, zero-centred norms, the linear attention's
projections stored apart: petit/models/families/hybrid/qwen3_5_text.py) with Qwen3-Next's mixture of experts in EVERY
layer: a softmax router over `num_experts`, the top `num_experts_per_tok` renormalised to sum 1 (always: the class has
no `norm_topk_prob`), SwiGLU experts of `moe_intermediate_size`, plus a shared SwiGLU expert of
`shared_expert_intermediate_size` times sigmoid(shared_expert_gate(x)).

transformers 5 saves the experts as it holds them: `mlp.experts.gate_up_proj` [E, 2F, D] (each expert's gate rows,
then its up rows) and `mlp.experts.down_proj` [E, D, F]; `hf_tensors` hands them out one expert matrix at a time under
Qwen2-MoE's names (`mlp.experts.{e}.gate_proj.weight`, ...), which a folder in that older spelling holds already.
The router (`mlp.gate.weight`) and the shared-expert gate stay float at every weight type.

The class reads no `intermediate_size`, `mlp_only_layers`, `decoder_sparse_step` or `norm_topk_prob` (Qwen3-Next's
keys): such a key in config.json changes nothing in transformers, so Petit reports it as unknown and ignores it."""
from dataclasses import dataclass

import numpy as np

from petit.models.families.hybrid import qwen3_5_text, qwen3_next
from petit.models.blocks.moe_config import check_routing

# Qwen3-Next's fields that Qwen3.5-MoE's class does not read
NOT_READ = ("intermediate_size", "mlp_only_layers", "decoder_sparse_step", "norm_topk_prob")


@dataclass(kw_only=True)
class Qwen35MoeTextConfig(qwen3_5_text.Qwen35TextConfig):
    intermediate_size: int = 0                      # unused: every layer routes (set to moe_intermediate_size)
    num_key_value_heads: int | None = 2
    num_experts: int = 256
    num_experts_per_tok: int = 8
    moe_intermediate_size: int = 512
    shared_expert_intermediate_size: int = 512
    model_type: str = "qwen3_5_moe_text"
    _REQUIRED = tuple(n for n in qwen3_5_text.Qwen35TextConfig._REQUIRED if n != "intermediate_size")
    _NOT_READ = NOT_READ
    _NOT_READ_WHY = "Qwen3.5-MoE's class does not read them: every layer routes, the top-k weights always renormalised"

    def _validate(self):
        self.intermediate_size = self.moe_intermediate_size
        self.norm_topk_prob, self.mlp_only_layers, self.decoder_sparse_step = True, [], 1
        super()._validate()

    def _sparse(self) -> list:
        check_routing(self)
        return [True] * self.num_hidden_layers


def expert_tensors(cfg, ckpt, p: str, E: int, F: int, D: int) -> dict:
    """Each expert's gate / up / down matrix under `p` + "experts.{e}." from transformers 5's 3-D `p` +
    "experts.gate_up_proj" [E, 2F, D] (gate rows then up rows) and "experts.down_proj" [E, D, F]; {} when the
    checkpoint stores them one by one already."""
    fused, down = p + "experts.gate_up_proj", p + "experts.down_proj"
    if fused not in ckpt:
        return {}
    held = {}

    def part(name, e, rows=None):
        def make():
            if name not in held:
                held.clear()
                held[name] = ckpt.f32(name)
            return np.ascontiguousarray(held[name][e, rows[0]:rows[1]] if rows else held[name][e])
        return make

    out = {}
    for e in range(E):
        x = f"{p}experts.{e}."
        out[x + "gate_proj.weight"] = ((F, D), part(fused, e, (0, F)), (fused,))
        out[x + "up_proj.weight"] = ((F, D), part(fused, e, (F, 2 * F)), (fused,))
        out[x + "down_proj.weight"] = ((D, F), part(down, e), (down,))
    return out


def hf_tensors(cfg: Qwen35MoeTextConfig, ckpt) -> dict:
    out = qwen3_next.hf_tensors(cfg, ckpt, in_proj=qwen3_5_text.in_proj)
    for i in range(cfg.num_hidden_layers):
        out.update(expert_tensors(cfg, ckpt, f"model.layers.{i}.mlp.", cfg.num_experts, cfg.moe_intermediate_size,
                                  cfg.hidden_size))
    return out


build = qwen3_next.build
Config = Qwen35MoeTextConfig
