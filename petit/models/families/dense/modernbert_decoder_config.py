"""The config of modernbert_decoder.py's family: its fields with transformers' names and defaults, and their checks."""
from dataclasses import dataclass, field

from petit.models.blocks.common import layer_types
from petit.models.blocks.config import ACT_NAMES, ConfigMixin, activation, boolean, positive_int, positive_number


TRAINING_ONLY = {"initializer_cutoff_factor", "cls_token_id", "sep_token_id", "classifier_dropout", "mlp_dropout",
                 "embedding_dropout", "attention_dropout", "deterministic_flash_attn", "reference_compile",
                 "repad_logits_with_grad", "sparse_prediction", "sparse_pred_ignore_index", "classifier_pooling"}


@dataclass(kw_only=True)
class ModernBertDecoderConfig(ConfigMixin):
    vocab_size: int = 50368
    hidden_size: int = 768
    intermediate_size: int = 1152
    num_hidden_layers: int = 22
    num_attention_heads: int = 12
    hidden_activation: str = "gelu"
    max_position_embeddings: int = 8192
    norm_eps: float = 1e-5
    norm_bias: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    decoder_bias: bool = True
    classifier_bias: bool = False
    classifier_activation: str = "gelu"
    local_attention: int | None = 128
    sliding_window: int | None = None           # None: local_attention // 2
    global_attn_every_n_layers: int = 3         # transformers 4's key: the layer types when layer_types is absent
    layer_types: list | None = None
    rope_theta: float = 160000.0                # transformers 5: rope_parameters["full_attention"]["rope_theta"]
    rope_local_base_freq: float = 10000.0       # transformers 5: rope_parameters["sliding_attention"]["rope_theta"]
    rope_scaling: dict | None = None
    tie_word_embeddings: bool = True
    model_type: str = "modernbert-decoder"
    unknown_keys: list = field(default_factory=list, repr=False)

    _ROPE_LOCAL_THETA = True
    _ROPE_ALIASES = {"global_rope_theta": "rope_theta", "local_rope_theta": "rope_local_base_freq"}
    _IGNORED = frozenset(TRAINING_ONLY)

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                     "num_attention_heads", "max_position_embeddings", "global_attn_every_n_layers")
        positive_number(self, "norm_eps", "rope_theta", "rope_local_base_freq")
        boolean(self, "norm_bias", "attention_bias", "mlp_bias", "decoder_bias", "classifier_bias",
                "tie_word_embeddings")
        H = self.num_attention_heads
        if self.hidden_size % H or (self.hidden_size // H) % 2:
            raise ValueError(f"config: hidden_size {self.hidden_size} must be num_attention_heads {H} heads of an "
                             f"even size (RoPE)")
        if self.rope_scaling:
            raise ValueError(f"config: rope_scaling is not supported by the {self.model_type} family (transformers "
                             f"scales both layer types' RoPE with it; no released checkpoint has one)")
        self.act = activation(self, "hidden_activation", self.model_type)
        if self.classifier_activation not in ACT_NAMES:
            activation(self, "classifier_activation", self.model_type)
        local = self.local_attention
        if self.sliding_window is None and isinstance(local, int) and not isinstance(local, bool) and local > 1:
            self.sliding_window = local // 2
        if "sliding_attention" in self.types() and self.sliding_window is None:
            raise ValueError(f"config: sliding layers need a window: local_attention >= 2 (half of it) or "
                             f"sliding_window, got local_attention {local!r}")

    def types(self) -> list[str]:
        n = self.global_attn_every_n_layers
        return layer_types(self, lambda i: "sliding_attention" if i % n else "full_attention")
