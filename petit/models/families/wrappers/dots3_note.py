"""Dots 3 Note Preview as released (`dots3_note`, dots-studio/dots3-note-prev: Dots3NoteForConditionalGeneration): a
vision tower and an audio tower beside the language model of petit/models/families/mla/dots3_note_text.py. The released
config.json keeps the language model's keys at its top level (with `vision_config` and `audio_config`), as
Dots3NoteConfig reads it; one saved by transformers 5 holds them under `text_config`. Either way the checkpoint keeps
the language model at `model.*` and its head at `lm_head.weight` (transformers renames them to
`model.language_model.*` in memory and back when saving; that spelling is read too), the towers under
`vision_encoder.` / `audio_encoder.` (or the module names). transformers' causal-LM registry maps `dots3_note` to
Dots3NoteForCausalLM, the language model alone, and so does Petit: the load says once that the towers are not run and
accounts for their tensors. A converted file is a `dots3_note` file of the language model."""
from dataclasses import dataclass

from petit.models.blocks import deepseek_common as dc
from petit.models.families.mla import dots3_note_text
from petit.models.blocks import wrapper

OWN_KEYS = ("image_token_id", "video_token_id", "audio_token_id")
TOWERS = ("vision_config", "audio_config")
TOWER = tuple(f"{p}{t}." for p in ("", "model.") for t in ("vision_encoder", "audio_encoder", "audio_adapter",
                                                          "vision_tower", "audio_tower"))


@dataclass(kw_only=True)
class Dots3NoteConfig(dots3_note_text.Dots3NoteTextConfig):
    model_type: str = "dots3_note"

    @classmethod
    def from_dict(cls, d):
        present = [k for k in TOWERS if isinstance(d, dict) and d.get(k)]
        if present and not isinstance(d.get("text_config"), dict):     # the released layout: the text keys on top
            wrapper.not_run("dots3_note", f"{' and '.join(k.split('_')[0] for k in present)} tower "
                            f"({', '.join(present)})", "images and audio", "the language model")
            d = {k: v for k, v in d.items() if k not in TOWERS + OWN_KEYS}
        return super().from_dict(wrapper.flatten(d, "dots3_note", OWN_KEYS, towers=TOWERS, tie=False,
                                                 what="images and audio"))


def hf_tensors(cfg: Dots3NoteConfig, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER, dc.hf_tensors)


build = dots3_note_text.build
Config = Dots3NoteConfig
