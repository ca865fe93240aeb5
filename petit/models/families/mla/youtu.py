"""Youtu-LLM (Tencent, `tencent/Youtu-LLM-2B`): DeepSeek-V3's multi-head latent attention (low-rank query, the
compressed key / value latent in the cache, interleaved RoPE on the rope part, the softmax scale times yarn's
mscale(factor, mscale_all_dim)^2) in a Llama block with a dense SwiGLU MLP in every layer; no experts (transformers'
config has none of DeepSeek's routing keys); tied embeddings by default."""
from dataclasses import dataclass

from petit.models.blocks import deepseek_common as dc
from petit.models.families.mla.deepseek_v3 import DeepseekV3Config


@dataclass(kw_only=True)
class YoutuConfig(DeepseekV3Config):
    num_key_value_heads: int | None = 16
    max_position_embeddings: int = 131072
    tie_word_embeddings: bool = True
    model_type: str = "youtu"
    _IGNORED = DeepseekV3Config._IGNORED | {"embedding_initializer_range"}

    def _validate(self):
        super()._validate()
        if self.n_routed_experts:
            raise ValueError("config: n_routed_experts is not a youtu key (its every layer has a dense MLP); a "
                             "DeepSeek checkpoint with experts is model_type deepseek_v3")


def build(cfg: YoutuConfig, t):
    return dc.build(cfg, t, scoring="sigmoid", norm_topk=False, group_score="top2_sum", sel_bias=True,
                    yarn_mscale=True, n_group=0, topk_group=0)


hf_tensors = dc.hf_tensors
Config = YoutuConfig
