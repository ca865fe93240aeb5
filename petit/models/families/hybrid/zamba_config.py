"""Zamba's config (`zamba`; the family: zamba.py): the Mamba mixers' and the shared block's fields, the layer kinds,
and their checks."""
from dataclasses import dataclass

from petit.models.blocks.config import DecoderConfig, activation, check_decoder, positive_int, positive_number


KINDS = {"mamba": "linear_attention", "linear_attention": "linear_attention", "hybrid": "hybrid"}


@dataclass(kw_only=True)
class ZambaConfig(DecoderConfig):
    vocab_size: int = 32000
    hidden_size: int = 3712
    num_hidden_layers: int = 76
    num_attention_heads: int = 16
    num_key_value_heads: int = 16
    intermediate_size: int = 14848
    max_position_embeddings: int = 4096
    hidden_act: str = "gelu"
    hidden_mamba_act: str = "silu"
    tie_word_embeddings: bool = True
    rms_norm_eps: float = 1e-5
    layers_block_type: list | None = None
    layer_types: list | None = None              # transformers 5's other spelling of layers_block_type
    attn_layer_period: int = 6
    attn_layer_offset: int = 4
    n_mamba_heads: int = 2
    mamba_d_state: int = 16
    mamba_d_conv: int = 4
    mamba_expand: int = 2
    mamba_dt_rank: int | str = "auto"
    mamba_conv_bias: bool = True
    mamba_proj_bias: bool = False
    model_type: str = "zamba"
    _REQUIRED = ()
    # derived by ZambaConfig from the fields above (checked below when present), initialisation and kernel switches,
    # generation settings
    _IGNORED = frozenset({"attention_hidden_size", "attention_head_dim", "time_step_min", "time_step_max",
                          "time_step_floor", "use_mamba_kernels", "use_associative_scan", "num_logits_to_keep"})

    @classmethod
    def from_dict(cls, d: dict):
        d = dict(d)
        derived = {k: d.get(k) for k in ("attention_hidden_size", "attention_head_dim")}
        cfg = super().from_dict(d)
        want = {"attention_hidden_size": 2 * cfg.hidden_size, "attention_head_dim": cfg.head_dim}
        for k, v in derived.items():
            if v is not None and v != want[k]:
                raise ValueError(f"config: {k} {v!r} is not what Zamba derives from the other keys ({want[k]!r})")
        return cfg

    def _validate(self):
        positive_int(self, "hidden_size", "num_attention_heads", "num_hidden_layers")
        if (2 * self.hidden_size) % self.num_attention_heads:
            raise ValueError(f"config: 2 x hidden_size ({2 * self.hidden_size}) is not divisible by "
                             f"num_attention_heads {self.num_attention_heads}")
        self.head_dim = 2 * self.hidden_size // self.num_attention_heads     # attention_head_dim
        check_decoder(self, ("rms_norm_eps",), ("tie_word_embeddings", "mamba_conv_bias", "mamba_proj_bias"))
        self.act = activation(self, "hidden_act", "zamba")
        if self.hidden_mamba_act not in ("silu", "swish"):
            raise ValueError(f"config: hidden_mamba_act {self.hidden_mamba_act!r} is not supported by the zamba "
                             f"family (supported: silu)")
        if self.mamba_proj_bias:
            raise ValueError("config: mamba_proj_bias true is not supported by the zamba family (no released model "
                             "has biases on in_proj / out_proj)")
        n = self.num_hidden_layers
        if self.layers_block_type is not None and self.layer_types is not None \
                and self.layers_block_type != self.layer_types:
            raise ValueError("config: layers_block_type and layer_types disagree")
        types = self.layers_block_type if self.layers_block_type is not None else self.layer_types
        if types is None:                          # ZambaConfig's default
            types = ["mamba", "mamba", "hybrid"] + ["hybrid" if i % self.attn_layer_period == self.attn_layer_offset
                                                    else "mamba" for i in range(n - 3)]
        if not isinstance(types, list) or len(types) != n or any(t not in KINDS for t in types):
            raise ValueError(f"config: layers_block_type must list {n} values of linear_attention (or mamba) / "
                             f"hybrid, got {types!r}")
        self.layers_block_type = self.layer_types = [KINDS[t] for t in types]
        self.hybrid_layers = [i for i, t in enumerate(self.layers_block_type) if t == "hybrid"]
        if self.mamba_dt_rank == "auto":
            self.mamba_dt_rank = -(-self.hidden_size // 16)
        positive_int(self, "mamba_d_state", "mamba_d_conv", "mamba_expand", "n_mamba_heads", "mamba_dt_rank")
        if (self.mamba_expand * self.hidden_size) % self.n_mamba_heads:
            raise ValueError(f"config: n_mamba_heads {self.n_mamba_heads} must divide mamba_expand x hidden_size "
                             f"({self.mamba_expand * self.hidden_size})")
        positive_number(self, "rms_norm_eps")
