"""Zamba2's config (`zamba2`; the family: zamba2.py): the Mamba 2 mixers', the shared blocks' and their adapters'
fields, the layer kinds, and their checks."""
import math
from dataclasses import dataclass

from petit.models.blocks.config import DecoderConfig, activation, boolean, check_decoder, positive_int, positive_number


KINDS = {"mamba": "linear_attention", "linear_attention": "linear_attention", "hybrid": "hybrid"}


@dataclass(kw_only=True)
class Zamba2Config(DecoderConfig):
    vocab_size: int = 32000
    hidden_size: int = 2560
    num_hidden_layers: int = 54
    num_attention_heads: int = 32
    intermediate_size: int | None = None        # None: 4 x hidden_size
    max_position_embeddings: int = 4096
    hidden_act: str = "gelu"
    tie_word_embeddings: bool = True
    rms_norm_eps: float = 1e-5
    layers_block_type: list | None = None
    mamba_d_state: int = 64
    mamba_d_conv: int = 4
    mamba_expand: int = 2
    mamba_ngroups: int = 1
    n_mamba_heads: int = 8
    time_step_min: float = 0.001
    use_conv_bias: bool = True
    add_bias_linear: bool = False
    num_mem_blocks: int = 1
    use_shared_attention_adapter: bool = False
    adapter_rank: int = 128
    use_mem_rope: bool = False
    use_long_context: bool = False
    model_type: str = "zamba2"
    _REQUIRED = ()
    # derived by Zamba2Config from the fields above (checked below when present), initialisation and kernel
    # switches, generation settings
    _IGNORED = frozenset({"attention_hidden_size", "attention_head_dim", "mamba_headdim", "kv_channels",
                          "num_query_groups", "hybrid_layer_ids", "time_step_max", "time_step_floor",
                          "use_mamba_kernels", "use_mem_eff_path", "chunk_size", "num_logits_to_keep"})

    @classmethod
    def from_dict(cls, d: dict):
        d = dict(d)
        derived = {k: d.get(k) for k in ("attention_hidden_size", "attention_head_dim", "mamba_headdim",
                                         "hybrid_layer_ids")}
        cfg = super().from_dict(d)
        want = {"attention_hidden_size": 2 * cfg.hidden_size, "attention_head_dim": cfg.head_dim,
                "mamba_headdim": cfg.mamba_expand * cfg.hidden_size // cfg.n_mamba_heads,
                "hybrid_layer_ids": cfg.hybrid_layers}
        for k, v in derived.items():
            if v is not None and v != want[k]:
                raise ValueError(f"config: {k} {v!r} is not what Zamba2 derives from the other keys ({want[k]!r})")
        return cfg

    def _validate(self):
        if self.intermediate_size is None:
            self.intermediate_size = 4 * self.hidden_size
        if self.use_long_context:                  # as Zamba2Config does
            self.max_position_embeddings = 16384
        positive_int(self, "hidden_size", "num_attention_heads")
        if (2 * self.hidden_size) % self.num_attention_heads:
            raise ValueError(f"config: 2 x hidden_size ({2 * self.hidden_size}) is not divisible by "
                             f"num_attention_heads {self.num_attention_heads}")
        self.head_dim = 2 * self.hidden_size // self.num_attention_heads     # attention_head_dim
        check_decoder(self, ("rms_norm_eps", "rope_theta"),
                      ("tie_word_embeddings", "use_conv_bias", "add_bias_linear", "use_shared_attention_adapter",
                       "use_mem_rope", "use_long_context"))
        self.act = activation(self, "hidden_act", "zamba2")
        n = self.num_hidden_layers
        types = self.layers_block_type
        if types is None:                          # Zamba2Config's default (54 layers)
            types = (["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"] + ["mamba"] * 3
                     + ["hybrid"] + ["mamba"] * 2)
        if not isinstance(types, list) or len(types) != n or any(t not in KINDS for t in types):
            raise ValueError(f"config: layers_block_type must list {n} values of linear_attention (or mamba) / "
                             f"hybrid, got {types!r}")
        self.layers_block_type = [KINDS[t] for t in types]
        self.hybrid_layers = [i for i, t in enumerate(self.layers_block_type) if t == "hybrid"]
        positive_int(self, "mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_ngroups", "n_mamba_heads",
                     "num_mem_blocks", "adapter_rank")
        di = self.mamba_expand * self.hidden_size
        if di % self.n_mamba_heads or self.n_mamba_heads % self.mamba_ngroups:
            raise ValueError(f"config: n_mamba_heads {self.n_mamba_heads} must divide mamba_expand x hidden_size "
                             f"({di}) and be a multiple of mamba_ngroups {self.mamba_ngroups}")
        if not isinstance(self.time_step_min, (int, float)) or isinstance(self.time_step_min, bool) \
                or not 0 <= self.time_step_min < math.inf:
            raise ValueError(f"config: time_step_min must be a non-negative number, got {self.time_step_min!r}")
        positive_number(self, "rms_norm_eps")
        boolean(self, "add_bias_linear")
        if self.add_bias_linear:
            raise ValueError("config: add_bias_linear true is not supported by the zamba2 family (no released model "
                             "has the biases on in_proj, out_proj and the shared MLP)")
        if self.use_shared_attention_adapter and self.num_key_value_heads != self.num_attention_heads:
            raise ValueError("config: use_shared_attention_adapter needs num_key_value_heads equal to "
                             "num_attention_heads (the k and v adapters are attention_hidden_size wide)")
