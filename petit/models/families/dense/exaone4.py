"""EXAONE 4.0 (LG AI Research): OLMo 2's block (no pre-norms; RMSNorm of the attention's and of the MLP's output
before each residual add), RMSNorm over each head of q and k before RoPE, and local / global layers: with a
`sliding_window`, the sliding layers (`layer_types`, by default three of every `sliding_window_pattern` = 4) use RoPE
in their window and the full layers use no position encoding at all (NoPE); without one, every layer is full with
RoPE."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, layer_types, llama_like, window_of
from petit.models.blocks.config import DecoderConfig, check_decoder, positive_int, refuse_act


@dataclass(kw_only=True)
class Exaone4Config(DecoderConfig):
    rms_norm_eps: float = 1e-5
    sliding_window: int | None = 4096
    sliding_window_pattern: int = 4
    layer_types: list | None = None
    model_type: str = "exaone4"

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "exaone4", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings",), window=True)
        if self.sliding_window is not None:
            positive_int(self, "sliding_window_pattern")
        n = self.sliding_window_pattern
        self.types = layer_types(self, lambda i: "sliding_attention" if self.sliding_window and (i + 1) % n
                                 else "full_attention")


def build(cfg: Exaone4Config, t):
    rope = default_rope(cfg)
    nope = cfg.sliding_window is not None       # the full layers of a local / global model have no RoPE
    rope_for = lambda i: None if nope and cfg.types[i] == "full_attention" else rope     # noqa: E731
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, rope_for=rope_for, window_for=window_of(cfg, cfg.types),
                      context_length=rope.context_length, qk_norm="head", post_only=True)


Config = Exaone4Config
