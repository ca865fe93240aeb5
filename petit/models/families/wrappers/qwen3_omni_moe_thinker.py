"""Qwen3-Omni's thinker (`qwen3_omni_moe_thinker`, Qwen3OmniMoeThinkerForConditionalGeneration): Qwen2.5-Omni's
thinker (petit/models/families/wrappers/qwen2_5_omni_thinker.py: vision and audio towers not run, its names with or
without the full release's `thinker.` prefix, the head tied by the thinker's key alone) around a `qwen3_omni_moe_text`
model, whose experts are stored one tensor each (transformers' conversion splits them at save); DeepStack adds the
vision tower's features to image positions only."""
from dataclasses import dataclass

from petit.models.families.wrappers import qwen2_5_omni_thinker

from petit.models.families.moe import qwen3_moe, qwen3_omni_moe_text


@dataclass(kw_only=True)
class Qwen3OmniMoeThinkerConfig(qwen3_omni_moe_text.Qwen3OmniMoeTextConfig):
    model_type: str = "qwen3_omni_moe_thinker"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(qwen2_5_omni_thinker.text_config(d, cls.model_type, "qwen3_omni_moe_text"))


def hf_tensors(cfg: Qwen3OmniMoeThinkerConfig, ckpt) -> dict:
    return qwen2_5_omni_thinker.hf_tensors(cfg, ckpt, qwen3_omni_moe_text.hf_tensors)


build = qwen3_moe.build
Config = Qwen3OmniMoeThinkerConfig
