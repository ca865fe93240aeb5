"""Aria's language model (transformers' `aria_text`, AriaTextForCausalLM): Llama's attention and pre-norm block with a
mixture of experts in every layer: the top `moe_topk` of `moe_num_experts` SiLU-gated experts on the router's logits,
weighed by the softmax of the chosen logits (a softmax over every expert, renormalised), plus
`moe_num_shared_experts` shared experts as one gated MLP of that many times `intermediate_size` (its activation
`hidden_act`, its biases `mlp_bias`), unweighted.

The checkpoint keeps each layer's experts as two 3-D tensors laid out [E, in, out] (Aria's grouped GEMM):
`mlp.experts.fc1.weight` [E, D, 2F] (gate columns, then up) and `fc2.weight` [E, F, D], which transformers 5.25
holds as `experts.gate_up_proj` / `experts.down_proj` (its conversion renames them at load, and back at save);
either spelling is read, one expert's matrix at a time."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import positive_int, refuse_act
from petit.models.families.dense.llama import LlamaConfig
from petit.models.blocks.moe import moe_weights, split_experts
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY


@dataclass(kw_only=True)
class AriaTextConfig(LlamaConfig):
    moe_num_experts: int = 8
    moe_topk: int = 2
    moe_num_shared_experts: int = 2
    model_type: str = "aria_text"
    _IGNORED = MOE_TRAINING_ONLY

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "aria_text", "silu")    # the routed experts' is always silu

    def _validate(self):
        super()._validate()
        positive_int(self, "moe_num_experts", "moe_topk", "moe_num_shared_experts")
        if self.moe_topk > self.moe_num_experts:
            raise ValueError(f"config: moe_topk ({self.moe_topk}) exceeds moe_num_experts ({self.moe_num_experts})")


def hf_tensors(cfg: AriaTextConfig, ckpt) -> dict:
    """Each expert's gate / up / down matrix [out, in], from whichever spelling of the 3-D tensors the file has."""
    out, held = {}, {}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        fc1 = p + "mlp.experts.fc1.weight"
        names = {"fused": fc1, "down": p + "mlp.experts.fc2.weight"} if fc1 in ckpt else {}
        out |= split_experts(ckpt, p, cfg.moe_num_experts, cfg.intermediate_size, cfg.hidden_size, transposed=True,
                             held=held, **names)
    return out


def build(cfg: AriaTextConfig, t):
    rope = default_rope(cfg)
    F, D = cfg.intermediate_size, cfg.hidden_size
    S = F * cfg.moe_num_shared_experts

    def moe_for(i, p):
        m = moe_weights(t, p, cfg, n_experts=cfg.moe_num_experts, top_k=cfg.moe_topk, inter=F, norm_topk=True,
                        router="mlp.router", experts="mlp.experts", shared="mlp.shared_experts", shared_inter=S)
        if cfg.mlp_bias:
            m.shared_b = tuple(t.vec(f"{p}mlp.shared_experts.{n}_proj.bias", (w,))
                               for n, w in (("gate", S), ("up", S), ("down", D)))
        return m

    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                      rope_for=lambda i: rope, context_length=rope.context_length, moe_for=moe_for)


Config = AriaTextConfig
