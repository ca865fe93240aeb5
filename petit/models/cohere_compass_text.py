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

from petit.models import cohere, cohere2
from petit.models.common import default_rope, layer_types, window_of
from petit.models.rope_config import LAYER_TYPES

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
            d = dict(d, **_per_layer_type(d))
        return super().from_dict(d)

    def _validate(self):
        if self.logit_scale is None:
            self.logit_scale = 1.0
        given = self.head_dim
        super()._validate()
        if given is not None and given != self.hidden_size // self.num_attention_heads:
            raise ValueError(f"config: head_dim {given} is not hidden_size // num_attention_heads "
                             f"({self.hidden_size // self.num_attention_heads}), which transformers uses whatever "
                             f"head_dim says")
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


def _per_layer_type(d: dict) -> dict:
    """rope_parameters as the family reads it: keyed by layer type (dangling top-level rope_theta / rope_type
    dropped, as transformers does), the M-RoPE keys taken out, and the types whose entry is not null as
    rope_layer_types."""
    rp = d["rope_parameters"]
    if not isinstance(rp, dict) or not set(rp) & set(LAYER_TYPES):
        raise ValueError(f"config: rope_parameters must be keyed by layer type (full_attention / "
                         f"sliding_attention, null for no position encoding): transformers 5.25 builds no "
                         f"cohere_compass_text model from {rp!r}")
    rp = {k: v for k, v in rp.items() if k not in ("rope_theta", "rope_type")}
    used = d.get("layer_types") or ["full_attention"] * d.get("num_hidden_layers", 0)
    missing = sorted({t for t in used if t in LAYER_TYPES} - set(rp))
    if missing:
        raise ValueError(f"config: rope_parameters has no entry for the layer type(s) {', '.join(missing)} "
                         f"(transformers 5.25 builds no model without one; null: no position encoding)")
    rp = {k: {n: x for n, x in v.items() if n not in MROPE_KEYS} if isinstance(v, dict) else v
          for k, v in rp.items()}
    return {"rope_parameters": rp, "rope_layer_types": [t for t in LAYER_TYPES if rp.get(t) is not None]}


def build(cfg: CohereCompassTextConfig, t):
    rope, types, rotates = default_rope(cfg, interleaved=False), cfg.types(), set(cfg.rope_layer_types)
    return cohere.build(cfg, t, rope_for=lambda i: rope if types[i] in rotates else None,
                        window_for=window_of(cfg, types))


Config = CohereCompassTextConfig
