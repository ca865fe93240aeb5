"""Qwen3-Omni as released (`qwen3_omni_moe`, Qwen3OmniMoeForConditionalGeneration: Qwen3-Omni-30B-A3B): the thinker
(`thinker_config`, weights `thinker.*`) beside a talker and a code2wav vocoder (`talker_config`, `code2wav_config`),
read as petit/models/families/wrappers/qwen2_5_omni.py reads Qwen2.5-Omni: the thinker's `qwen3_omni_moe_text` model
runs, the speech output and the thinker's towers do not (said once each)."""
from dataclasses import dataclass

from petit.models.families.wrappers import qwen2_5_omni, qwen2_5_omni_thinker, qwen3_omni_moe_thinker

# Qwen3OmniMoeConfig's own keys: the talker's special tokens

from petit.models.families.moe import qwen3_moe, qwen3_omni_moe_text
OWN_KEYS = ("im_start_token_id", "im_end_token_id", "tts_pad_token_id", "tts_bos_token_id", "tts_eos_token_id",
            "system_token_id", "user_token_id", "assistant_token_id")


@dataclass(kw_only=True)
class Qwen3OmniMoeConfig(qwen3_omni_moe_thinker.Qwen3OmniMoeThinkerConfig):
    model_type: str = "qwen3_omni_moe"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(qwen2_5_omni.thinker_config(d, cls.model_type, ("talker_config", "code2wav_config"),
                                                             OWN_KEYS))


def hf_tensors(cfg: Qwen3OmniMoeConfig, ckpt) -> dict:
    return qwen2_5_omni_thinker.hf_tensors(cfg, ckpt, qwen3_omni_moe_text.hf_tensors,
                                           tower=qwen2_5_omni_thinker.TOWER + qwen2_5_omni.SPEECH)


build = qwen3_moe.build
Config = Qwen3OmniMoeConfig
