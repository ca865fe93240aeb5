"""The config of minimax.py's family: its fields with transformers' names and defaults, and their checks."""
from dataclasses import dataclass

from petit.models.blocks.config import DecoderConfig, activation, check_decoder, positive_int
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing


KINDS = ("full_attention", "linear_attention")
FACTORS = ("full_attn_alpha_factor", "full_attn_beta_factor", "linear_attn_alpha_factor", "linear_attn_beta_factor",
           "mlp_alpha_factor", "mlp_beta_factor")


@dataclass(kw_only=True)
class MiniMaxConfig(DecoderConfig):
    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 14336
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = 8
    max_position_embeddings: int = 4096 * 32
    rope_theta: float = 1e6
    rms_norm_eps: float = 1e-5
    sliding_window: int | None = None
    num_local_experts: int = 8
    num_experts_per_tok: int = 2
    layer_types: list | None = None
    full_attn_alpha_factor: float = 1.0
    full_attn_beta_factor: float = 1.0
    linear_attn_alpha_factor: float = 1.0
    linear_attn_beta_factor: float = 1.0
    mlp_alpha_factor: float = 1.0
    mlp_beta_factor: float = 1.0
    block_size: int = 256                       # only splits transformers' lightning sum (and sizes its saved tables)
    model_type: str = "minimax"
    _REQUIRED = ()
    _IGNORED = MOE_TRAINING_ONLY

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings",), window=True)
        self.act = activation(self, "hidden_act", "minimax")
        check_routing(self, "num_local_experts")
        positive_int(self, "block_size")
        for k in FACTORS:
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"config: {k} must be a number, got {v!r}")
        n = self.num_hidden_layers
        if self.layer_types is None:               # MiniMaxConfig's default: full attention in the even layers
            self.layer_types = ["full_attention" if (i + 1) % 2 else "linear_attention" for i in range(n)]
        if not isinstance(self.layer_types, list) or len(self.layer_types) != n \
                or any(t not in KINDS for t in self.layer_types):
            raise ValueError(f"config: layer_types must list {n} values of {' / '.join(KINDS)}, got "
                             f"{self.layer_types!r}")
