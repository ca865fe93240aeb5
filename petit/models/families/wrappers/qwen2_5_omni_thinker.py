"""Qwen2.5-Omni's thinker (`qwen2_5_omni_thinker`, Qwen2_5OmniThinkerForConditionalGeneration): a vision tower
(`visual`) and an audio tower (`audio_tower`) beside a `qwen2_5_omni_text` model, its config under `text_config`, its
weights as save_pretrained writes them (`model.*`, `visual.*`, `audio_tower.*`, `lm_head.weight`), transformers 5's
module names (`model.language_model.*`, `model.visual.*`, `model.audio_tower.*`) or the full Qwen2.5-Omni release's
(`thinker.model.*`, `thinker.lm_head.weight` ...: transformers' conversion drops the prefix). A plain wrapper: Petit
runs the text model alone and says once that the towers are not run; the head is tied by the thinker's
tie_word_embeddings alone (default false; text_config's default true is not read)."""
from dataclasses import dataclass

from petit.models.families.dense import qwen2, qwen2_5_omni_text

from petit.models.blocks import qwen_vl, wrapper

OWN_KEYS = ("audio_token_index", "image_token_index", "video_token_index", "audio_token_id", "image_token_id",
            "video_token_id", "position_id_per_seconds", "seconds_per_chunk", "audio_start_token_id",
            "audio_end_token_id", "user_token_id", "vision_start_token_id", "vision_end_token_id")
TOWERS = ("vision_config", "audio_config")
TOWER = tuple(p + t for p in ("", "model.", "thinker.", "thinker.model.") for t in ("visual.", "audio_tower."))
PREFIXES = wrapper.TEXT_PREFIXES + ("thinker.model.",)
HEADS = wrapper.HEADS + ("thinker.lm_head.weight",)


def text_config(d, model_type: str, text_type: str):
    return qwen_vl.text_config(d, model_type, text_type, own_keys=OWN_KEYS, towers=TOWERS,
                               what="images, video or audio")


@dataclass(kw_only=True)
class Qwen25OmniThinkerConfig(qwen2_5_omni_text.Qwen25OmniTextConfig):
    tie_word_embeddings: bool = False       # the thinker's (transformers ties by it)
    model_type: str = "qwen2_5_omni_thinker"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(text_config(d, cls.model_type, "qwen2_5_omni_text"))


def hf_tensors(cfg: Qwen25OmniThinkerConfig, ckpt, text_tensors=None, tower=TOWER) -> dict:
    return qwen_vl.hf_tensors(cfg, ckpt, text_tensors, tower, prefixes=PREFIXES, heads=HEADS)


build = qwen2.build
Config = Qwen25OmniThinkerConfig
