"""SmolLM3: Llama where some layers use no position encoding at all (`no_rope_layers[i] == 0`, by default every
`no_rope_layer_interval`-th layer), with optional sliding windows."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, layer_types, llama_like, window_of
from petit.models.blocks.config import boolean
from petit.models.families.dense.llama import LlamaConfig


@dataclass(kw_only=True)
class SmolLM3Config(LlamaConfig):
    no_rope_layers: list | None = None
    no_rope_layer_interval: int = 4
    use_sliding_window: bool = False
    sliding_window: int | None = None
    max_window_layers: int | None = None
    layer_types: list | None = None
    tie_word_embeddings: bool = True            # transformers' default here (omitted from config.json when true)
    model_type: str = "smollm3"

    def _validate(self):
        super()._validate()
        boolean(self, "use_sliding_window")
        n = self.num_hidden_layers
        if self.no_rope_layers is None:
            self.no_rope_layers = [int((i + 1) % self.no_rope_layer_interval != 0) for i in range(n)]
        if not isinstance(self.no_rope_layers, list) or len(self.no_rope_layers) != n or \
                any(v not in (0, 1) for v in self.no_rope_layers):
            raise ValueError(f"config: no_rope_layers must list {n} values of 0 / 1, got {self.no_rope_layers!r}")


def build(cfg: SmolLM3Config, t):
    rope = default_rope(cfg)
    sliding = cfg.use_sliding_window and cfg.sliding_window
    first = cfg.max_window_layers or 0
    types = layer_types(cfg, lambda i: "sliding_attention" if sliding and i >= first else "full_attention")
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                      mlp_bias=cfg.mlp_bias, rope_for=lambda i: rope if cfg.no_rope_layers[i] else None,
                      window_for=window_of(cfg, types), context_length=rope.context_length)


Config = SmolLM3Config
