"""Gemma 4 Unified (text, `gemma4_unified_text`; Gemma4UnifiedForCausalLM): gemma4_text's block (per-layer heads,
keys as values on full layers, proportional RoPE, KV sharing with double-wide MLPs, layer_scalar) without per-layer
inputs or routed experts (its config has no such keys). use_bidirectional_attention defaults to "vision": only image
tokens attend both ways, text is causal."""
from dataclasses import dataclass

from petit.models.families.dense import gemma4_text


@dataclass(kw_only=True)
class Gemma4UnifiedTextConfig(gemma4_text.Gemma4TextConfig):
    max_position_embeddings: int = 262_144
    sliding_window: int = 1024
    use_bidirectional_attention: str | None = "vision"
    hidden_size_per_layer_input: int = 0            # none: transformers removes the key from this config
    model_type: str = "gemma4_unified_text"


build = gemma4_text.build
Config = Gemma4UnifiedTextConfig
