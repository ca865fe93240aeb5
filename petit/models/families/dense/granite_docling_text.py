"""Granite Docling's language model (transformers' `granite_docling_text`, GraniteDoclingTextModel): Granite's block
under a config class of its own defaults (granite-docling's: 4 kv heads, RMSNorm eps 1e-5, tied head, embedding x 12,
attention scale 1/64, residual branches x 0.263, logits / 4). Its forward adds DeepStack features to the image
tokens' hidden states after the first layers; a text-only prompt has no image token and no features, so it is
Granite's forward."""
from dataclasses import dataclass

from petit.models.families.dense import granite


@dataclass(kw_only=True)
class GraniteDoclingTextConfig(granite.GraniteConfig):
    num_key_value_heads: int | None = 4
    max_position_embeddings: int = 32768
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = True
    embedding_multiplier: float = 12.0
    logits_scaling: float = 4.0
    residual_multiplier: float = 0.263
    attention_multiplier: float = 0.015625
    model_type: str = "granite_docling_text"


build = granite.build
Config = GraniteDoclingTextConfig
