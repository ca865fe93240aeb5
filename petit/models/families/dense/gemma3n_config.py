"""Gemma 3n's text config (`gemma3n_text`; the family: gemma3n_text.py): Gemma's fields with its own widths per
layer, AltUp's streams, the per-layer inputs, LAuReL, KV sharing and the activation sparsity, and their checks."""
from dataclasses import dataclass

from petit.models.blocks.common import LAYER_TYPES
from petit.models.blocks.gemma3n_decoder import shared_kv_sources
from petit.models.blocks.config import activation, check_decoder, positive_int, positive_number
from petit.models.families.dense.gemma import GemmaConfig


@dataclass(kw_only=True)
class Gemma3nTextConfig(GemmaConfig):
    intermediate_size: int | list
    hidden_activation: str = "gelu_pytorch_tanh"
    head_dim: int | None = 256
    max_position_embeddings: int = 32768
    rope_theta: float = 1_000_000.0             # the full layers' (rope_parameters["full_attention"])
    rope_local_base_freq: float = 10000.0       # the sliding layers' (rope_parameters["sliding_attention"])
    sliding_window: int = 512
    layer_types: list | None = None
    final_logit_softcapping: float | None = 30.0
    vocab_size_per_layer_input: int = 262_144
    hidden_size_per_layer_input: int = 256
    altup_active_idx: int = 0
    altup_coef_clip: float | None = 120.0       # training only: transformers clamps the coefficients when training
    altup_correct_scale: bool = True
    altup_num_inputs: int = 4
    num_kv_shared_layers: int = 15
    laurel_rank: int = 64
    activation_sparsity_pattern: list | None = None
    model_type: str = "gemma3n_text"

    _ACT_KEY = "hidden_activation"
    _ROPE_LOCAL_THETA = True

    def _validate(self):
        n = self.num_hidden_layers
        positive_int(self, "num_hidden_layers")
        sizes = self.intermediate_size
        if isinstance(sizes, list):
            if len(sizes) != n or any(isinstance(s, bool) or not isinstance(s, int) or s <= 0 for s in sizes):
                raise ValueError(f"config: intermediate_size must be a positive integer or a list of {n} of them, "
                                 f"got {sizes!r}")
        else:
            positive_int(self, "intermediate_size")
            sizes = [sizes] * n
        self.sizes = list(sizes)
        given = self.intermediate_size
        self.intermediate_size = max(sizes)          # check_decoder's checks, on the widest MLP
        try:
            check_decoder(self, ("rms_norm_eps", "rope_theta", "rope_local_base_freq"),
                          ("tie_word_embeddings", "attention_bias", "altup_correct_scale"))
        finally:
            self.intermediate_size = given
        self.act = activation(self, self._ACT_KEY, self.model_type)
        if self.use_bidirectional_attention:
            raise ValueError("config: use_bidirectional_attention=true is not supported (Petit runs causal decoders)")
        if self.attention_bias:
            raise ValueError("config: attention_bias=true is not supported by gemma3n (its attention has no biases "
                             "in transformers' checkpoints)")
        positive_int(self, "vocab_size_per_layer_input", "hidden_size_per_layer_input", "altup_num_inputs",
                     "laurel_rank", "sliding_window")
        if self.altup_num_inputs > 16:
            raise ValueError(f"config: altup_num_inputs {self.altup_num_inputs} is above the 16 streams Petit's "
                             f"AltUp kernels hold")
        if isinstance(self.altup_active_idx, bool) or not isinstance(self.altup_active_idx, int) or \
                not 0 <= self.altup_active_idx < self.altup_num_inputs:
            raise ValueError(f"config: altup_active_idx must be in 0..{self.altup_num_inputs - 1}, got "
                             f"{self.altup_active_idx!r}")
        if self.final_logit_softcapping is not None:
            positive_number(self, "final_logit_softcapping")
        k = self.num_kv_shared_layers
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < n:
            raise ValueError(f"config: num_kv_shared_layers must be in 0..{n - 1}, got {k!r}")
        p = self.activation_sparsity_pattern
        if p is None:
            p = [0.95] * 10 + [0.0] * (n - 10) if n > 10 else [0.0] * n
        if not isinstance(p, list) or len(p) != n or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                                         or not 0.0 <= v < 1.0 for v in p):
            raise ValueError(f"config: activation_sparsity_pattern must list {n} values in [0, 1), got {p!r}")
        self.sparsity = [float(v) for v in p]
        self.types()
        self.kv_sources()

    def types(self) -> list[str]:
        n = self.num_hidden_layers
        given = self.layer_types
        if given is None:                       # transformers' default: every fifth layer full
            return ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(n)]
        if not isinstance(given, list) or len(given) != n or any(t not in LAYER_TYPES for t in given):
            raise ValueError(f"config: layer_types must list {n} values of {' / '.join(LAYER_TYPES)}, got {given!r}")
        return given

    def kv_sources(self) -> list[int]:
        """Each layer's KV cache slot: its own, or for the last num_kv_shared_layers the last earlier layer of its
        type (transformers' kv_sharing_modes)."""
        return shared_kv_sources(self.types(), self.num_kv_shared_layers)

