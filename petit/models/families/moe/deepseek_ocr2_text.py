"""DeepSeek-OCR-2's language model (transformers' `deepseek_ocr2_text`, DeepseekOcr2TextModel): DeepSeek-V2's MoE
decoder without its latent attention: Llama's attention (q / k / v / o, `attention_bias` on all four, RoPE on halves
of head_dim = hidden / heads: DeepseekOcr2TextConfig overrides any head_dim it is given), and in the `sparse` layers
of `mlp_layer_types` (required: the config class builds no layer without it) DeepSeek-V2's experts: softmax over the
router's logits, the top `num_experts_per_tok` (greedy, or group_limited_greedy: within the `topk_group` groups whose
best expert scores highest), their probabilities times `routed_scaling_factor` (not renormalised), plus
`n_shared_experts` shared experts as one SwiGLU (`mlp_bias` on it and on the dense MLPs; the routed experts have no
biases). The experts are read per expert or from transformers 5's 3-D gate_up_proj / down_proj."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, gated_mlp_weights, llama_like
from petit.models.blocks.config import DecoderConfig, aliased, check_decoder, positive_int, positive_number, refuse_act
from petit.models.blocks.moe import moe_weights, split_experts
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY

ALIASES = {"num_experts": "n_routed_experts"}
HEAD_DIM = "head_dim (deepseek_ocr2_text's heads are hidden_size / num_attention_heads: not read)"


@dataclass(kw_only=True)
class DeepseekOcr2TextConfig(DecoderConfig):
    rms_norm_eps: float = 1e-6
    attention_bias: bool = False
    mlp_bias: bool = False
    moe_intermediate_size: int = 1407
    n_routed_experts: int = 64
    num_experts_per_tok: int | None = None
    n_shared_experts: int = 2
    routed_scaling_factor: float = 1.0
    n_group: int | None = None
    topk_group: int | None = None
    topk_method: str = "greedy"
    mlp_layer_types: list | None = None
    model_type: str = "deepseek_ocr2_text"
    _IGNORED = MOE_TRAINING_ONLY | {"pretraining_tp"}

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict):
            d = aliased(d, ALIASES)
            hd = d.get("head_dim")
            if hd is not None and isinstance(d.get("hidden_size"), int) and isinstance(d.get("num_attention_heads"),
                                                                                        int):
                d = {k: v for k, v in d.items() if k != "head_dim"}
                if hd != d["hidden_size"] // d["num_attention_heads"]:
                    d[HEAD_DIM] = hd                # reported as unknown: transformers overrides it
        return super().from_dict(d)

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), cls.model_type, "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "attention_bias", "mlp_bias"))
        positive_int(self, "moe_intermediate_size", "n_routed_experts", "num_experts_per_tok", "n_shared_experts")
        positive_number(self, "routed_scaling_factor")
        if self.num_experts_per_tok > self.n_routed_experts:
            raise ValueError(f"config: num_experts_per_tok {self.num_experts_per_tok} exceeds n_routed_experts "
                             f"{self.n_routed_experts}")
        if self.topk_method not in ("greedy", "group_limited_greedy"):
            raise ValueError(f"config: topk_method {self.topk_method!r} is not one of greedy, group_limited_greedy")
        if self.topk_method == "group_limited_greedy":
            positive_int(self, "n_group", "topk_group")
            if self.n_routed_experts % self.n_group or self.topk_group > self.n_group:
                raise ValueError(f"config: n_routed_experts {self.n_routed_experts} in n_group {self.n_group} "
                                 f"groups, topk_group {self.topk_group} of them: not a valid grouping")
        t = self.mlp_layer_types
        if not isinstance(t, list) or len(t) != self.num_hidden_layers or any(x not in ("dense", "sparse") for x in t):
            raise ValueError(f"config: mlp_layer_types must give each of the {self.num_hidden_layers} layers 'dense' "
                             f"or 'sparse' (DeepseekOcr2TextConfig has no default), got {t!r}")


def hf_tensors(cfg: DeepseekOcr2TextConfig, ckpt) -> dict:
    out = {}
    for i, kind in enumerate(cfg.mlp_layer_types):
        p = f"model.layers.{i}."
        if kind == "sparse" and p + "mlp.experts.gate_up_proj" in ckpt:
            out.update(split_experts(ckpt, p, cfg.n_routed_experts, cfg.moe_intermediate_size, cfg.hidden_size))
    return out


def _moe(cfg: DeepseekOcr2TextConfig, t, p: str):
    S, D = cfg.n_shared_experts * cfg.moe_intermediate_size, cfg.hidden_size
    m = moe_weights(t, p, cfg, n_experts=cfg.n_routed_experts, top_k=cfg.num_experts_per_tok,
                    inter=cfg.moe_intermediate_size, norm_topk=False, router="mlp.gate", experts="mlp.experts",
                    shared="mlp.shared_experts", shared_inter=S)
    m.scoring, m.group_score, m.routed_scale = "softmax", "max", float(cfg.routed_scaling_factor)
    group = cfg.topk_method == "group_limited_greedy" and cfg.n_group > 1
    m.n_group, m.topk_group = (cfg.n_group, cfg.topk_group) if group else (0, 0)
    if cfg.mlp_bias:
        s = p + "mlp.shared_experts."
        m.shared_b = tuple(t.vec(f"{s}{n}_proj.bias", (w,)) for n, w in (("gate", S), ("up", S), ("down", D)))
    return m


def build(cfg: DeepseekOcr2TextConfig, t):
    rope = default_rope(cfg)
    sparse = [x == "sparse" for x in cfg.mlp_layer_types]
    widest = max(cfg.intermediate_size, cfg.n_shared_experts * cfg.moe_intermediate_size)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                      rope_for=lambda i: rope, moe_for=lambda i, p: _moe(cfg, t, p) if sparse[i] else None,
                      mlp_for=lambda i, p: gated_mlp_weights(t, p, cfg, bias=cfg.mlp_bias),
                      context_length=rope.context_length, intermediate_size=widest)


Config = DeepseekOcr2TextConfig
