"""Gemma 4 as released (`gemma4`, Gemma4ForConditionalGeneration): vision and audio towers beside the language model,
whose config is `text_config` (a `gemma4_text` config) and whose weights are named `model.language_model.*` (the head
tied to its embeddings). Petit runs the language model alone on text: the load says once that the towers are not run
(a warning naming vision_config / audio_config) and lists their tensors among those it does not use."""
import warnings
from dataclasses import dataclass

from petit.models.families.wrappers import gemma3n

from petit.models.families.dense import gemma4_text


@dataclass(kw_only=True)
class Gemma4Config(gemma4_text.Gemma4TextConfig):
    model_type: str = "gemma4"
    # the multimodal config's own keys besides text_config (what the towers and the processor read)
    _IGNORED = gemma4_text.Gemma4TextConfig._IGNORED | {
        "text_config", "vision_config", "audio_config", "audio_soft_tokens_per_image", "vision_soft_tokens_per_image",
        "boi_token_id", "eoi_token_id", "image_token_id", "boa_token_id", "eoa_token_id", "audio_token_id",
        "video_token_id", "boi_token_index", "eoi_token_index", "image_token_index", "mm_tokens_per_image",
        "audio_token_index", "boa_token_index", "eoa_token_index", "video_token_index"}

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(flatten(cls.model_type, d))


def flatten(model_type: str, d):
    """A ForConditionalGeneration config as its language model's: text_config's keys (and tie_word_embeddings), said
    once that the towers are not run."""
    if isinstance(d, dict) and isinstance(d.get("text_config"), dict):
        towers = [k for k in ("vision_config", "audio_config") if d.get(k)]
        if towers:
            warnings.warn(f"config: {model_type}: the {' and '.join(t.split('_')[0] for t in towers)} tower(s) "
                          f"({' / '.join(towers)}) are not run; Petit runs the language model (text_config) alone, "
                          f"so images and audio cannot be given", stacklevel=4)
        flat = {k: v for k, v in d["text_config"].items() if k != "model_type"}
        for k in ("tie_word_embeddings",):          # a top-level value the text model follows
            if k in d and k not in flat:
                flat[k] = d[k]
        d = dict(flat, model_type=model_type)
    return d


def hf_tensors(cfg, ckpt) -> dict:
    """The language model's tensors under the text model's names (gemma3n's renaming), and its experts as
    gemma4_text reads them."""
    renamed = gemma3n.hf_tensors(cfg, ckpt)
    if not renamed:                                     # a text model's names already
        return gemma4_text.hf_tensors(cfg, ckpt)
    return renamed | gemma4_text.hf_tensors(cfg, ckpt, lambda n: gemma3n.P + n[len("model."):])


build = gemma4_text.build
Config = Gemma4Config
