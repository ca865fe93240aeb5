"""Gemma 3n as released (`gemma3n`, Gemma3nForConditionalGeneration): a vision tower (MobileNetV5), an audio tower
(a Conformer) and the language model, whose config is `text_config` (a `gemma3n_text` config) and whose weights are
named `model.language_model.*` (the head tied to its embeddings). Petit runs the language model alone on text: the
load says once that the towers are not run (a warning naming vision_config / audio_config) and lists their tensors
among those it does not use. On text ids below vocab_size the wrapper computes exactly its language model
(transformers' Gemma3nModel: embed_tokens, get_per_layer_inputs, the layers)."""
import warnings
from dataclasses import dataclass

from petit.models.families.dense import gemma3n_text

P = "model.language_model."


@dataclass(kw_only=True)
class Gemma3nConfig(gemma3n_text.Gemma3nTextConfig):
    model_type: str = "gemma3n"
    # the multimodal config's own keys besides text_config (what the towers and the processor read)
    _IGNORED = gemma3n_text.Gemma3nTextConfig._IGNORED | {
        "text_config", "vision_config", "audio_config", "audio_soft_tokens_per_image", "vision_soft_tokens_per_image",
        "boi_token_id", "eoi_token_id", "image_token_id", "boa_token_id", "eoa_token_id", "audio_token_id"}

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and isinstance(d.get("text_config"), dict):
            towers = [k for k in ("vision_config", "audio_config") if d.get(k)]
            if towers:
                warnings.warn(f"config: gemma3n: the vision and audio towers ({' / '.join(towers)}) are not run; "
                              f"Petit runs the language model (text_config) alone, so images and audio cannot be "
                              f"given", stacklevel=3)
            flat = {k: v for k, v in d["text_config"].items() if k != "model_type"}
            for k in ("tie_word_embeddings",):          # a top-level value the text model follows
                if k in d and k not in flat:
                    flat[k] = d[k]
            d = dict(flat, model_type="gemma3n")
        return super().from_dict(d)


def hf_tensors(cfg: Gemma3nConfig, ckpt) -> dict:
    """The language model's tensors under the text model's names (`model.X` for `model.language_model.X`)."""
    if not any(n.startswith(P) for n in ckpt.names()):
        return {}                                       # a text model's names already (a converted file)
    return {"model." + n[len(P):]: (ckpt.info(n)[1], lambda n=n: ckpt.f32(n), (n,)) for n in ckpt.names()
            if n.startswith(P)}


build = gemma3n_text.build
Config = Gemma3nConfig
