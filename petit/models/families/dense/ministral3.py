"""Ministral 3 (`ministral3`, the text model of Ministral-3-3B / 8B / 14B and of the `mistral3` wrapper that releases
them): Mistral's block (one sliding window for every layer when `sliding_window` is set, none by default) with
yarn RoPE by default and, after RoPE, every query scaled by 1 + beta ln(1 + floor(p / n)) at position p, where beta
is rope_parameters' `llama_4_scaling_beta` and n its `original_max_position_embeddings`. That is Llama 4's
temperature tuning of its NoPE queries with p where Llama 4 has p + 1 (the attention kernel's `temp_at_p`), applied
here in every layer. transformers reads both values from rope_parameters whatever its rope_type (a default RoPE
too), and cannot run a config without them; Petit keeps them as `llama_4_scaling` [beta, n] (what a converted file
writes)."""
from dataclasses import dataclass, field

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act

OWN_ROPE_KEYS = frozenset({"llama_4_scaling_beta", "max_position_embeddings"})


def _default_rope() -> dict:
    """transformers' Ministral3Config default (when config.json has no rope_parameters), without the keys the RoPE
    does not read (the query scaling's, kept as llama_4_scaling)."""
    return {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 16384, "beta_fast": 32.0,
            "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0}


def with_llama_4_scaling(d):
    """`d` with `llama_4_scaling` [beta, n] read from its rope_parameters (or rope_scaling) when they give beta or
    the file has no llama_4_scaling of its own (Mistral 4's too)."""
    if isinstance(d, dict):
        rp = d.get("rope_parameters") if d.get("rope_parameters") is not None else d.get("rope_scaling")
        if isinstance(rp, dict) and not any(k in rp for k in ("full_attention", "sliding_attention")) and (
                "llama_4_scaling_beta" in rp or d.get("llama_4_scaling") is None):
            d = dict(d, llama_4_scaling=[rp.get("llama_4_scaling_beta"), rp.get("original_max_position_embeddings")])
    return d


def check_llama_4_scaling(cfg) -> None:
    s = cfg.llama_4_scaling
    if not (isinstance(s, list) and len(s) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                        for v in s) and s[1] > 0):
        raise ValueError(f"config: {cfg.model_type} scales its queries by rope_parameters' llama_4_scaling_beta and "
                         f"original_max_position_embeddings (> 0); this config gives {s!r} (transformers cannot "
                         f"run it either)")


@dataclass(kw_only=True)
class Ministral3Config(DecoderConfig):
    head_dim: int | None = 128
    max_position_embeddings: int = 262144
    rms_norm_eps: float = 1e-5
    sliding_window: int | None = None
    rope_theta: float = 1_000_000.0
    rope_scaling: dict | None = field(default_factory=_default_rope)
    llama_4_scaling: list | None = field(default_factory=lambda: [0.1, 16384])    # [beta, n]: Petit's key
    rope_interleaved: bool = False      # a Petit key, not transformers': True rotates pairs (a GGUF file's q / k rows)
    model_type: str = "ministral3"
    _ROPE_SCALING_EXTRA = OWN_ROPE_KEYS | {"original_max_position_embeddings"}     # read beside a default RoPE too

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(with_llama_4_scaling(d))

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "ministral3", "silu")

    def _validate(self):
        if isinstance(self.rope_scaling, dict):
            self.rope_scaling = {k: v for k, v in self.rope_scaling.items() if k not in OWN_ROPE_KEYS}
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "rope_interleaved"), window=True)
        check_llama_4_scaling(self)


def build(cfg: Ministral3Config, t):
    rope = default_rope(cfg)
    w = cfg.sliding_window or 0
    net = llama_like(t, cfg, eps=cfg.rms_norm_eps, rope_for=lambda i: rope, window_for=lambda i: w,
                     context_length=rope.context_length)
    beta, n = cfg.llama_4_scaling
    if beta:
        for L in net.layers:
            L.temperature = (float(n), float(beta), 1)
    return net


Config = Ministral3Config
