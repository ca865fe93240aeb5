"""The config of falcon_h1.py's family: its fields with transformers' names and defaults, and their checks."""
from dataclasses import dataclass, field

from petit.models.blocks.config import DecoderConfig, check_decoder, positive_int, positive_number, refuse_act


def _ones2():
    return [1.0, 1.0]


def _ones5():
    return [1.0] * 5


@dataclass(kw_only=True)
class FalconH1Config(DecoderConfig):
    num_key_value_heads: int | None = 8
    max_position_embeddings: int = 8192
    rms_norm_eps: float = 1e-5
    rope_theta: float = 100000.0
    mamba_d_ssm: int | None = 1024
    mamba_n_heads: int = 128
    mamba_d_head: int | str = "auto"
    mamba_n_groups: int = 1
    mamba_d_state: int = 256
    mamba_d_conv: int = 4
    mamba_expand: int = 2
    mamba_conv_bias: bool = True
    mamba_proj_bias: bool = False
    mamba_norm_before_gate: bool = True
    mamba_rms_norm: bool = False
    projectors_bias: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    lm_head_multiplier: float = 1.0
    embedding_multiplier: float = 1.0
    mlp_multipliers: list | None = field(default_factory=_ones2)
    key_multiplier: float | None = 1.0
    attention_out_multiplier: float | None = 1.0
    attention_in_multiplier: float | None = 1.0
    ssm_multipliers: list | None = field(default_factory=_ones5)
    ssm_in_multiplier: float | None = 1.0
    ssm_out_multiplier: float | None = 1.0
    model_type: str = "falcon_h1"
    # the scan's chunk only splits the prefill (the same sums); the rest: training and generation settings
    _IGNORED = frozenset({"mamba_chunk_size", "num_logits_to_keep"})

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "falcon_h1", "silu")
        for key in ("mamba_proj_bias", "projectors_bias", "attention_bias", "mlp_bias"):
            if d.get(key):
                raise ValueError(f"config: {key}=true is not supported by the falcon_h1 family")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "lm_head_multiplier", "embedding_multiplier"),
                      ("tie_word_embeddings", "mamba_conv_bias", "mamba_norm_before_gate", "mamba_rms_norm"))
        # transformers' defaults for the multipliers left null
        for name, one in (("key_multiplier", 1.0), ("attention_out_multiplier", 1.0),
                          ("attention_in_multiplier", 1.0), ("ssm_in_multiplier", 1.0), ("ssm_out_multiplier", 1.0),
                          ("mlp_multipliers", [1.0, 1.0]), ("ssm_multipliers", [1.0] * 5)):
            if getattr(self, name) is None:
                setattr(self, name, one)
        if len(self.mlp_multipliers) != 2 or len(self.ssm_multipliers) != 5:
            raise ValueError(f"config: mlp_multipliers needs 2 values and ssm_multipliers 5, got "
                             f"{self.mlp_multipliers!r} / {self.ssm_multipliers!r}")
        self.d_ssm = self.mamba_d_ssm if self.mamba_d_ssm is not None else self.mamba_expand * self.hidden_size
        positive_int(self, "d_ssm", "mamba_n_heads", "mamba_n_groups", "mamba_d_state", "mamba_d_conv")
        if self.d_ssm % self.mamba_n_heads or self.mamba_n_heads % self.mamba_n_groups:
            raise ValueError(f"config: mamba width {self.d_ssm} must divide into mamba_n_heads {self.mamba_n_heads}, "
                             f"and those into mamba_n_groups {self.mamba_n_groups}")
        d_head = self.d_ssm // self.mamba_n_heads
        if self.mamba_d_head not in ("auto", d_head):
            raise ValueError(f"config: mamba_d_head {self.mamba_d_head!r} disagrees with mamba width / heads "
                             f"({d_head})")
        positive_number(self, "key_multiplier", "attention_in_multiplier", "attention_out_multiplier",
                        "ssm_in_multiplier", "ssm_out_multiplier")
