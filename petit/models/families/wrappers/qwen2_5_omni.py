"""Qwen2.5-Omni as released (`qwen2_5_omni`, Qwen2_5OmniForConditionalGeneration: Qwen2.5-Omni-3B / 7B): the thinker
(`thinker_config`, weights `thinker.*`), which writes the text reply, beside a talker and a token2wav vocoder that
turn it into speech (`talker_config`, `token2wav_config`, weights `talker.*`, `token2wav.*`). generate with
return_audio=False runs the thinker alone, so Petit runs the thinker's text model as petit/models/
qwen2_5_omni_thinker.py reads it (its vision and audio towers not run either) and says once that the speech output
is not run. A converted file is the thinker's text model, under this model_type."""
import warnings
from dataclasses import dataclass

from petit.models.families.wrappers import qwen2_5_omni_thinker

from petit.models.families.dense import qwen2
from petit.models.blocks.config import COMMON_IGNORED

SPEECH = ("talker.", "token2wav.", "code2wav.")


def thinker_config(d, model_type: str, speech=("talker_config", "token2wav_config"), own=()):
    """The thinker's config of a full Omni config.json (the speech parts reported once, the top-level keys it does
    not know reported), with the full model's model_type; `d` itself when it has no thinker_config."""
    if not isinstance(d, dict) or not isinstance(d.get("thinker_config"), dict):
        return d
    given = [k for k in speech if d.get(k)]
    if given and d.get("enable_audio_output", True):
        warnings.warn(f"config: {model_type}: the speech output ({', '.join(given)}) is not run; Petit runs the "
                      f"thinker's text model alone, so replies cannot be spoken", stacklevel=5)
    known = {"thinker_config", "enable_audio_output", *speech, *own} | COMMON_IGNORED
    unknown = sorted(k for k in d if k not in known)
    if unknown:
        warnings.warn(f"config: ignoring unknown key(s) {', '.join(unknown)}", stacklevel=5)
    return dict(d["thinker_config"], model_type=model_type)


@dataclass(kw_only=True)
class Qwen25OmniConfig(qwen2_5_omni_thinker.Qwen25OmniThinkerConfig):
    model_type: str = "qwen2_5_omni"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(thinker_config(d, cls.model_type))


def hf_tensors(cfg: Qwen25OmniConfig, ckpt, text_tensors=None) -> dict:
    return qwen2_5_omni_thinker.hf_tensors(cfg, ckpt, text_tensors, tower=qwen2_5_omni_thinker.TOWER + SPEECH)


build = qwen2.build
Config = Qwen25OmniConfig
