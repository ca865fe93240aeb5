"""Qwen3-VL-MoE's language model (`qwen3_vl_moe_text`; a `qwen3_vl_moe` config holds it as `text_config`): Qwen3-MoE's
block (softmax router, top num_experts_per_tok, dense MLPs in mlp_only_layers or off decoder_sparse_step) with
interleaved M-RoPE as qwen3_vl_text's (plain RoPE for text). What differs from qwen3_moe is transformers'
Qwen3VLMoeTextConfig: its defaults (RoPE base 5e5, 128000 positions, 60 experts of 1408, top 4, tied head),
num_experts saved as `num_local_experts` (its attribute_map), the chosen experts' weights always renormalised (its
router has no norm_topk_prob: the key is reported and not read), no sliding windows, and the experts stored 3-D:
`mlp.experts.gate_up_proj` and `down_proj` as transformers 5 holds them ([E, 2 x moe_intermediate_size, hidden],
[E, hidden, moe_intermediate_size]) or transposed as the releases store them (transformers' conversion transposes a
tensor whose shape is not its own, and so does Petit)."""
from dataclasses import dataclass

from petit.models.families.moe import qwen3_moe

from petit.models.families.dense import qwen3_vl_text

from petit.models.blocks import qwen_vl
from petit.models.blocks.config import aliased
from petit.models.blocks.moe_config import sparse_layers

NOT_READ = qwen3_vl_text.NO_WINDOW | {"norm_topk_prob": True}


@dataclass(kw_only=True)
class Qwen3VLMoeTextConfig(qwen3_moe.Qwen3MoeConfig):
    intermediate_size: int = 5632
    num_hidden_layers: int = 24
    num_attention_heads: int = 16
    num_key_value_heads: int | None = 16
    max_position_embeddings: int = 128000
    rope_theta: float = 5e5
    num_experts: int = 60
    num_experts_per_tok: int = 4
    moe_intermediate_size: int = 1408
    norm_topk_prob: bool = True
    tie_word_embeddings: bool = True
    mrope_section: list | None = None       # no effect on text positions; kept for a converted file
    model_type: str = "qwen3_vl_moe_text"

    @classmethod
    def from_dict(cls, d):
        d = qwen_vl.not_read(d, NOT_READ, f"{cls.model_type} has no sliding window and always renormalises")
        if isinstance(d, dict):                 # transformers 5 saves num_experts as num_local_experts (attribute_map)
            d = aliased(d, {"num_local_experts": "num_experts"})
        return super().from_dict(qwen_vl.read_mrope(d, interleaved=True))

    def _validate(self):
        super()._validate()
        qwen_vl.check_mrope(self, qwen3_vl_text.MROPE_DEFAULT, split=False)

    def to_dict(self) -> dict:
        return {k: v for k, v in super().to_dict().items() if k not in NOT_READ}


def hf_tensors(cfg: Qwen3VLMoeTextConfig, ckpt) -> dict:
    layers = [i for i, sparse in enumerate(sparse_layers(cfg)) if sparse]
    return qwen_vl.fused_experts(ckpt, layers, cfg.num_experts, cfg.moe_intermediate_size, cfg.hidden_size,
                                 transposable=True)


build = qwen3_moe.build
Config = Qwen3VLMoeTextConfig
