"""IQuest-Coder (`IQuestLab/IQuest-Coder-V1-40B-Instruct`): transformers runs it as its own Llama
(LlamaForCausalLM); the model type has only its own config defaults (head_dim 128, 8 key-value heads, eps 1e-5,
131072 positions). `clip_qkv` and `use_sliding_window`, which the original code has but no released checkpoint
enables, are refused as transformers refuses them."""
from dataclasses import dataclass

from petit.models.families.dense import llama
from petit.models.families.dense.llama import LlamaConfig


@dataclass(kw_only=True)
class IQuestCoderConfig(LlamaConfig):
    num_key_value_heads: int | None = 8
    head_dim: int | None = 128
    max_position_embeddings: int = 131072
    rms_norm_eps: float = 1e-5
    model_type: str = "iquestcoder"

    @classmethod
    def _refuse(cls, d):
        super()._refuse(d)
        for key in ("clip_qkv", "use_sliding_window"):
            if d.get(key):
                raise ValueError(f"config: {key} {d[key]!r} is not supported by the iquestcoder family (transformers "
                                 f"refuses it too: no released checkpoint enables it)")

    _IGNORED = frozenset({"clip_qkv", "use_sliding_window"})      # read above: null / false change nothing


build = llama.build
Config = IQuestCoderConfig
