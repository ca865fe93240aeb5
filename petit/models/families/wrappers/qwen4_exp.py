"""Qwen4-Exp as released (`qwen4_exp`, Qwen4ExpForConditionalGeneration): a vision tower and the text model (a
`qwen4_exp_text` config under `text_config`, its weights under `model.language_model.*`, the head `lm_head.weight`).
As for `qwen3_5_moe`, Petit runs the text model alone: the load says once that the vision tower is not run and lists
the tower's tensors among those it does not use; a converted file is the text model's, its config flat with
model_type `qwen4_exp`."""
from dataclasses import dataclass

from petit.models.families.wrappers import qwen3_5, qwen3_5_moe

from petit.models.families.hybrid import qwen4_exp_text


@dataclass(kw_only=True)
class Qwen4ExpConfig(qwen4_exp_text.Qwen4ExpTextConfig):
    model_type: str = "qwen4_exp"
    _IGNORED = qwen4_exp_text.Qwen4ExpTextConfig._IGNORED | qwen3_5.Qwen35Config._IGNORED

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(qwen3_5.text_config(d, "qwen4_exp"))


def hf_tensors(cfg: Qwen4ExpConfig, ckpt) -> dict:
    return qwen3_5_moe.hf_tensors(cfg, ckpt, text=qwen4_exp_text.hf_tensors)


build = qwen4_exp_text.build
UNREAD = qwen4_exp_text.UNREAD
Config = Qwen4ExpConfig
