"""Cohere Compass's language model (transformers' `cohere_compass_text`, CohereCompassForCausalLM: North-Micro-Vision's
decoder): Cohere 2's parallel block (one LayerNorm without bias feeding attention and MLP, x + attn + mlp), sliding
windows in the sliding layers, tied head, logits x `logit_scale` (default none: 1), inside Qwen3-VL's text model,
whose RoPE is rotate-half (not Cohere's interleaved pairs) and per layer type: `rope_parameters` is keyed by layer
type, a null entry leaving that type without position encoding (the release: RoPE theta 5e4 in the sliding layers,
NoPE full layers). `layer_types` defaults to every layer full (not Cohere 2's every fourth).

The RoPE is Qwen3-VL's multimodal M-RoPE: each frequency takes its position from the text, height or width axis
(`mrope_section`). A text-only prompt gives every axis the same position (transformers: one arange expanded to the
three), so the rotation is the plain RoPE of that position, and `mrope_section` / `mrope_interleaved` change nothing
Petit computes; they are read and left. What runs in Petit is the text model: an image's positions (and DeepStack's
visual residuals) are the tower's, which is not run.

A converted file keeps the layer types that rotate as Petit's own key `rope_layer_types`."""
from dataclasses import dataclass

from petit.models.families.dense import cohere, cohere2
from petit.models.blocks.common import default_rope, layer_types, window_of
from petit.models.blocks.config import derived_head_dim
from petit.models.blocks.rope_config import LAYER_TYPES, per_layer_type

MROPE_KEYS = ("mrope_section", "mrope_interleaved")    # Qwen3-VL's axes: no effect on text positions


@dataclass(kw_only=True)
class CohereCompassTextConfig(cohere2.Cohere2Config):
    logit_scale: float | None = None
    rope_layer_types: list | None = None          # Petit's key: the layer types that rotate (from rope_parameters)
    model_type: str = "cohere_compass_text"
    _IGNORED = cohere2.Cohere2Config._IGNORED | {"pooling"}    # the sequence classifier's pooling
    _ROPE_LAYER_TYPES = LAYER_TYPES

    @classmethod
    def from_dict(cls, d: dict):
        if isinstance(d, dict) and "rope_parameters" in d:
            used = d.get("layer_types") or ["full_attention"] * d.get("num_hidden_layers", 0)
            d = dict(d, **per_layer_type(d["rope_parameters"], used, "cohere_compass_text", drop=MROPE_KEYS))
        return super().from_dict(d)

    def _validate(self):
        if self.logit_scale is None:
            self.logit_scale = 1.0
        given = self.head_dim
        super()._validate()
        derived_head_dim(self, given, "transformers")
        rot = self.rope_layer_types
        if rot is None:
            raise ValueError("config: rope_parameters (keyed by layer type) is missing: transformers 5.25 builds no "
                             "cohere_compass_text model without it")
        if not isinstance(rot, list) or any(t not in LAYER_TYPES for t in rot):
            raise ValueError(f"config: rope_layer_types must list layer types of {' / '.join(LAYER_TYPES)}, got "
                             f"{rot!r}")
        window_of(self, self.types())

    def types(self):
        """Each layer's kind: `layer_types`, by default every layer full (sliding_window_pattern is not read)."""
        return layer_types(self, lambda i: "full_attention")


def build(cfg: CohereCompassTextConfig, t):
    rope, types, rotates = default_rope(cfg, interleaved=False), cfg.types(), set(cfg.rope_layer_types)
    return cohere.build(cfg, t, rope_for=lambda i: rope if types[i] in rotates else None,
                        window_for=window_of(cfg, types))


Config = CohereCompassTextConfig
