"""MiniCPM (v1 / v2, OpenBMB: `openbmb/MiniCPM-2B-sft-bf16`, MiniCPM-1B; model_type `minicpm` with its remote code,
transformers has no class): Llama's tensor names and block with three µP scales: the embeddings times `scale_emb`,
each sublayer's output times `scale_depth / sqrt(num_hidden_layers)` before the residual add, and the final hidden
state divided by `hidden_size / dim_model_base` before the LM head (tied by default). llama.cpp runs it as Granite's
graph with those three numbers, which is how Petit runs it too; its fixture's reference is llama.cpp's
(tests/fixtures/hf5_dense/README.md)."""
import math
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import positive_number
from petit.models.families.dense.llama import LlamaConfig


@dataclass(kw_only=True)
class MiniCPMConfig(LlamaConfig):
    """Defaults as in the remote `configuration_minicpm.py`."""

    tie_word_embeddings: bool = True
    scale_emb: float = 1.0
    dim_model_base: float = 1.0
    scale_depth: float = 1.0
    model_type: str = "minicpm"

    def _validate(self):
        super()._validate()
        positive_number(self, "scale_emb", "dim_model_base", "scale_depth")
        if self.attention_bias or self.mlp_bias:
            raise ValueError("config: attention_bias / mlp_bias are not supported by the minicpm family (no released "
                             "MiniCPM has them, and llama.cpp, its reference, reads none)")


def build(cfg: MiniCPMConfig, t):
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, rope_for=lambda i: rope, context_length=rope.context_length,
                      embed_scale=cfg.scale_emb, residual_scale=cfg.scale_depth / math.sqrt(cfg.num_hidden_layers),
                      logit_scale=cfg.dim_model_base / cfg.hidden_size)


Config = MiniCPMConfig
