"""Qwen4-Exp as released (`qwen4_exp`, Qwen4ExpForConditionalGeneration): a vision tower and the text model (a
`qwen4_exp_text` config under `text_config`, its weights under `model.language_model.*`, the head `lm_head.weight`).
As for `qwen3_5_moe`, Petit runs the text model alone: the load says once that the vision tower is not run and lists
the tower's tensors among those it does not use; a converted file is the text model's, its config flat with
model_type `qwen4_exp`."""
import warnings
from dataclasses import dataclass

from petit.models import qwen3_5, qwen3_5_moe, qwen4_exp_text


@dataclass(kw_only=True)
class Qwen4ExpConfig(qwen4_exp_text.Qwen4ExpTextConfig):
    model_type: str = "qwen4_exp"
    _IGNORED = qwen4_exp_text.Qwen4ExpTextConfig._IGNORED | qwen3_5.Qwen35Config._IGNORED

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and isinstance(d.get("text_config"), dict):
            if d.get("vision_config"):
                warnings.warn("config: qwen4_exp: the vision tower (vision_config) is not run; Petit runs the text "
                              "model (text_config) alone, so images and video cannot be given", stacklevel=3)
            flat = {k: v for k, v in d["text_config"].items() if k != "model_type"}
            if "tie_word_embeddings" in d and "tie_word_embeddings" not in flat:
                flat["tie_word_embeddings"] = d["tie_word_embeddings"]
            d = dict(flat, model_type="qwen4_exp")
        return super().from_dict(d)


def hf_tensors(cfg: Qwen4ExpConfig, ckpt) -> dict:
    return qwen3_5_moe.hf_tensors(cfg, ckpt, text=qwen4_exp_text.hf_tensors)


build = qwen4_exp_text.build
Config = Qwen4ExpConfig
