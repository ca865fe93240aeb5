"""Gemma 4's text config (`gemma4_text`; the family: gemma4_text.py): Gemma's fields with its per-layer attention
shapes, KV sharing, per-layer inputs and routed experts, and their checks."""
from dataclasses import dataclass

from petit.models.blocks.common import LAYER_TYPES
from petit.models.blocks.gemma3n_decoder import shared_kv_sources
from petit.models.blocks.config import activation, check_decoder, positive_int, positive_number
from petit.models.families.dense.gemma import GemmaConfig
from petit.models.families.dense.gemma4_rope import read_rope_parameters


_PER_LAYER_KEYS = ("head_dim", "num_key_value_heads")


@dataclass(kw_only=True)
class Gemma4TextConfig(GemmaConfig):
    hidden_activation: str = "gelu_pytorch_tanh"
    head_dim: int | None = 256
    max_position_embeddings: int = 131_072
    rope_theta: float = 1_000_000.0             # the full layers' (rope_parameters["full_attention"])
    full_rope_type: str = "proportional"        # "proportional" or "default"
    partial_rotary_factor: float = 0.25         # the full layers' proportional share
    rope_local_base_freq: float = 10000.0       # the sliding layers' (rope_parameters["sliding_attention"])
    sliding_window: int = 512
    layer_types: list | None = None
    final_logit_softcapping: float | None = None
    use_bidirectional_attention: str | None = None
    vocab_size_per_layer_input: int = 262_144
    hidden_size_per_layer_input: int = 256
    attention_k_eq_v: bool = False
    num_kv_shared_layers: int = 0
    enable_moe_block: bool = False
    use_double_wide_mlp: bool = False
    num_experts: int | None = None
    top_k_experts: int | None = None
    moe_intermediate_size: int | None = None
    per_layer_config: dict | None = None
    global_head_dim: int = 512
    num_global_key_value_heads: int | None = None
    model_type: str = "gemma4_text"

    _ACT_KEY = "hidden_activation"

    @classmethod
    def from_dict(cls, d):
        """rope_parameters read by gemma4_rope.py (per layer type, the full layers' proportional kind)."""
        return super().from_dict(read_rope_parameters(d))

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "rope_local_base_freq"),
                      ("tie_word_embeddings", "attention_bias", "attention_k_eq_v", "enable_moe_block",
                       "use_double_wide_mlp"))
        self.act = activation(self, self._ACT_KEY, self.model_type)
        if self.use_bidirectional_attention not in (None, "vision"):
            raise ValueError(f"config: use_bidirectional_attention={self.use_bidirectional_attention!r} is not "
                             f"supported (Petit runs causal decoders; 'vision' only changes image tokens' mask)")
        if self.attention_bias:
            raise ValueError("config: attention_bias=true is not supported by gemma4 (its attention has no biases "
                             "in transformers' checkpoints)")
        if self.enable_moe_block:
            positive_int(self, "num_experts", "top_k_experts", "moe_intermediate_size")
            if self.top_k_experts > self.num_experts:
                raise ValueError(f"config: top_k_experts {self.top_k_experts} is above num_experts "
                                 f"{self.num_experts}")
        if self.rope_scaling is not None and (self.rope_scaling.get("rope_type") != "longrope" or
                                              self.rope_scaling.get("long_factor") !=
                                              self.rope_scaling.get("short_factor")):
            raise ValueError(f"config: rope_scaling {self.rope_scaling!r} is not supported by gemma4 (only a GGUF "
                             f"file's rope_freqs table of the full layers, as one long-rope factor list)")
        if self.full_rope_type not in ("default", "proportional"):
            raise ValueError(f"config: full_rope_type must be default or proportional, got {self.full_rope_type!r}")
        if isinstance(self.partial_rotary_factor, bool) or not isinstance(self.partial_rotary_factor, (int, float)) \
                or not 0.0 < self.partial_rotary_factor <= 1.0:
            raise ValueError(f"config: partial_rotary_factor must be in (0, 1], got {self.partial_rotary_factor!r}")
        positive_int(self, "sliding_window", "global_head_dim")
        if self.hidden_size_per_layer_input:
            positive_int(self, "hidden_size_per_layer_input", "vocab_size_per_layer_input")
            if self.vocab_size_per_layer_input < self.vocab_size:
                raise ValueError(f"config: vocab_size_per_layer_input {self.vocab_size_per_layer_input} is below "
                                 f"vocab_size {self.vocab_size}: transformers reads embed_tokens_per_layer at every "
                                 f"input id")
        if self.final_logit_softcapping is not None:
            positive_number(self, "final_logit_softcapping")
        n, k = self.num_hidden_layers, self.num_kv_shared_layers
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n:
            raise ValueError(f"config: num_kv_shared_layers must be in 0..{n}, got {k!r}")
        if k == n:
            raise ValueError("config: every layer shares another model's keys and values (num_kv_shared_layers = "
                             "num_hidden_layers): a draft model (Gemma 4's assistant) that reads its target model's "
                             "KV cache, which Petit does not hand between models")
        self.shapes = self._shapes()
        src = self.kv_sources()
        for i, j in enumerate(src):
            if self.shapes[i] != self.shapes[j]:
                raise ValueError(f"config: layer {i} shares layer {j}'s keys and values but its heads differ "
                                 f"({self.shapes[i]} vs {self.shapes[j]} (head_dim, key-value heads))")

    def types(self) -> list[str]:
        n = self.num_hidden_layers
        given = self.layer_types
        if given is None:                   # transformers' default: 5 sliding to 1 full, the last layer full
            given = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
            given[-1] = "full_attention"
        if not isinstance(given, list) or len(given) != n or any(t not in LAYER_TYPES for t in given):
            raise ValueError(f"config: layer_types must list {n} values of {' / '.join(LAYER_TYPES)}, got {given!r}")
        if given[-1] != "full_attention":
            raise ValueError("config: the last layer must be full_attention (transformers forces it)")
        return given

    def _shapes(self) -> list[tuple[int, int]]:
        """(head_dim, key-value heads) of each layer."""
        types, n = self.types(), self.num_hidden_layers
        plc = self.per_layer_config
        if plc is None:                     # transformers' derivation when the config does not spell it out
            over = {"head_dim": self.global_head_dim}
            if self.attention_k_eq_v and self.num_global_key_value_heads is not None:
                over["num_key_value_heads"] = self.num_global_key_value_heads
            plc = {str(i): over for i, t in enumerate(types) if t == "full_attention"}
        if not isinstance(plc, dict):
            raise ValueError(f"config: per_layer_config must be an object, got {plc!r}")
        out = [(self.head_dim, self.num_key_value_heads)] * n
        for key, entry in plc.items():
            if not str(key).isdigit() or not 0 <= int(key) < n or not isinstance(entry, dict) or \
                    set(entry) - set(_PER_LAYER_KEYS):
                raise ValueError(f"config: per_layer_config[{key!r}] must give a layer in 0..{n - 1} "
                                 f"{' / '.join(_PER_LAYER_KEYS)}, got {entry!r}")
            hd, kv = entry.get("head_dim", self.head_dim), entry.get("num_key_value_heads", self.num_key_value_heads)
            for name, v in (("head_dim", hd), ("num_key_value_heads", kv)):
                if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                    raise ValueError(f"config: per_layer_config[{key!r}].{name} must be a positive integer, got {v!r}")
            if hd % 2 or self.num_attention_heads % kv:
                raise ValueError(f"config: per_layer_config[{key!r}]: head_dim {hd} must be even and "
                                 f"num_attention_heads {self.num_attention_heads} divisible by {kv} key-value heads")
            out[int(key)] = (hd, kv)
        return out

    def kv_sources(self) -> list[int]:
        return shared_kv_sources(self.types(), self.num_kv_shared_layers)
