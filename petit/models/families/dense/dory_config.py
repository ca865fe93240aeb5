"""The config of dory.py's family: its fields with transformers' names and defaults, and their checks."""
from dataclasses import dataclass

from petit.models.blocks.common import layer_types
from petit.models.blocks.config import DecoderConfig, activation, check_decoder, positive_int


COUNTS = ("num_hidden_layers", "n_input_layers", "n_recurrent_layers", "n_output_layers")


@dataclass(kw_only=True)
class DoryConfig(DecoderConfig):
    vocab_size: int = 131072
    hidden_size: int = 2560
    intermediate_size: int = 7168
    num_hidden_layers: int = 36
    num_attention_heads: int = 16
    num_key_value_heads: int | None = 4
    head_dim: int | None = 256
    max_position_embeddings: int = 8192
    rope_theta: float = 10_000_000.0            # transformers 5: rope_parameters["full_attention"]["rope_theta"]
    rope_local_base_freq: float = 10_000.0      # and ["sliding_attention"]
    initializer_range: float = 0.0177           # the scale nGPT's parameters are stored at: read, not ignored
    attention_bias: bool = False
    mlp_bias: bool = False
    sliding_window: int | None = 1024
    layer_types: list | None = None
    ngpt_alpha_init: float = 0.05
    n_input_layers: int = 8
    n_recurrent_layers: int | None = None
    n_output_layers: int = 8
    n_recurrent_loops: int = 2
    recurrent_kv_cache_mode: str = "per_loop"
    model_type: str = "dory"

    _REQUIRED = ()
    _ROPE_LOCAL_THETA = True

    @classmethod
    def from_dict(cls, d: dict):
        if isinstance(d, dict) and "mlp" in (d.get("layer_types") or []):     # the released two-block layout
            lt = d["layer_types"]
            if lt[1::2] != ["mlp"] * (len(lt) // 2) or len(lt) % 2 or "mlp" in lt[::2]:
                raise ValueError(f"config: layer_types in the two-block layout must alternate an attention type and "
                                 f"'mlp', got {lt!r}")
            d = dict(d, layer_types=lt[::2])
            for k in COUNTS:
                v = d.get(k, getattr(cls, k))
                if v is not None:
                    d[k] = v // 2 if isinstance(v, int) and not isinstance(v, bool) else v
        return super().from_dict(d)

    def _validate(self):
        self.act = activation(self, "hidden_act", "dory")
        check_decoder(self, ("rope_theta", "rope_local_base_freq", "initializer_range", "ngpt_alpha_init"),
                      ("tie_word_embeddings", "attention_bias", "mlp_bias"), window=True)
        if self.n_recurrent_layers is None:
            self.n_recurrent_layers = self.num_hidden_layers - self.n_input_layers - self.n_output_layers
        for k in COUNTS[1:]:
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"config: {k} must be a non-negative integer, got {v!r}")
        if self.n_input_layers + self.n_recurrent_layers + self.n_output_layers != self.num_hidden_layers:
            raise ValueError("config: n_input_layers + n_recurrent_layers + n_output_layers must equal "
                             "num_hidden_layers")
        positive_int(self, "n_recurrent_loops")
        if self.recurrent_kv_cache_mode not in ("per_loop", "last_loop"):
            raise ValueError(f"config: recurrent_kv_cache_mode {self.recurrent_kv_cache_mode!r} (per_loop, "
                             f"last_loop)")
        if self.recurrent_kv_cache_mode == "last_loop" and self.n_recurrent_loops > 1 and self.n_recurrent_layers:
            raise ValueError("config: recurrent_kv_cache_mode 'last_loop' is not supported by the dory family: "
                             "passes before the last attend over the last pass's cached keys and values plus their "
                             "own, unwritten ones, which a cache each layer writes itself cannot hold (per_loop runs)")
        if not self.n_recurrent_layers and not self.n_output_layers:
            raise ValueError("config: no layer after the recurrent section (n_recurrent_layers and n_output_layers "
                             "0) is not supported by the dory family")
        self.types()

    def types(self) -> list[str]:
        return layer_types(self, lambda i: "full_attention" if (i + 1) % 4 == 0 else "sliding_attention")

    def order(self) -> list[tuple[int, tuple[bool, int]]]:
        """The unrolled layers: (layer index, its Entry's (first, loops))."""
        a, r, n = self.n_input_layers, self.n_recurrent_layers, self.num_hidden_layers
        out = [(i, (False, 0)) for i in range(a)]
        for loop in range(self.n_recurrent_loops):
            out += [(i, (loop == 0, 1) if i == a else (False, 0)) for i in range(a, a + r)]
        out += [(i, (True, self.n_recurrent_loops) if i == a + r and not r else (False, 0)) for i in range(a + r, n)]
        return out
