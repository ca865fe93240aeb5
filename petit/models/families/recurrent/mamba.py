"""Mamba (state-spaces/mamba-*-hf) and, with `inner_norm`, Falcon-Mamba: RMSNorm, then a Mamba mixer
(petit/models/blocks/ssm.py, kernels/ssm.c) added to the residual, in every layer; no attention, no MLP. A fixed-size
recurrent state replaces the KV cache: per layer the last d_conv - 1 conv inputs and the [d_inner, d_state] scan
state, so a token costs the same at position 10 and at position 10,000.

`time_step_rank` "auto" is ceil(hidden_size / 16), as transformers resolves it; `residual_in_fp32` changes nothing
here (the residual is float32 already); the time-step init keys only matter for training."""
import math
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.common import embed_and_head, norm
from petit.models.blocks.config import ConfigMixin, boolean, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.ssm import Mamba

P = "backbone.layers.{}."
TRAINING_ONLY = {"time_step_scale", "time_step_min", "time_step_max", "time_step_init_scheme", "time_step_floor",
                 "rescale_prenorm_residual", "use_mambapy", "residual_in_fp32", "initializer_range"}


@dataclass(kw_only=True)
class MambaConfig(ConfigMixin):
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    state_size: int = 16
    expand: int = 2
    conv_kernel: int = 4
    use_bias: bool = False
    use_conv_bias: bool = True
    hidden_act: str = "silu"
    time_step_rank: int | str = "auto"
    layer_norm_epsilon: float = 1e-5
    tie_word_embeddings: bool = True
    intermediate_size: int | None = None
    max_position_embeddings: int = 1 << 20      # none: a recurrent state has no length limit (a Petit key)
    model_type: str = "mamba"
    unknown_keys: list = field(default_factory=list, repr=False)
    _REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers")
    _IGNORED = TRAINING_ONLY

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "state_size", "expand", "conv_kernel",
                     "max_position_embeddings")
        positive_number(self, "layer_norm_epsilon")
        boolean(self, "use_bias", "use_conv_bias", "tie_word_embeddings")
        if self.hidden_act not in ("silu", "swish"):
            raise ValueError(f"config: hidden_act {self.hidden_act!r} is not supported by the {self.model_type} family "
                             f"(supported: silu)")
        if self.use_bias:
            raise ValueError(f"config: use_bias true is not supported by the {self.model_type} family (no released "
                             f"model has biases on in_proj / out_proj)")
        if self.time_step_rank == "auto":
            self.time_step_rank = math.ceil(self.hidden_size / 16)
        positive_int(self, "time_step_rank")
        if self.intermediate_size is None:
            self.intermediate_size = self.expand * self.hidden_size
        positive_int(self, "intermediate_size")


def mixers(cfg, t, inner_norm: bool = False, eps: float = 1e-6) -> list:
    D, di, ds, K, R = cfg.hidden_size, cfg.intermediate_size, cfg.state_size, cfg.conv_kernel, cfg.time_step_rank
    out = []
    for i in range(cfg.num_hidden_layers):
        m = P.format(i) + "mixer."
        in_proj = t.weight(m + "in_proj.weight", (2 * di, D))
        conv_w = t.array(m + "conv1d.weight", (di, 1, K)).reshape(di, K)
        conv_b = t.array(m + "conv1d.bias", (di,)) if cfg.use_conv_bias else None
        x_proj = t.weight(m + "x_proj.weight", (R + 2 * ds, di))
        dt_proj = t.float_weight(m + "dt_proj.weight", (di, R))
        dt_bias = t.array(m + "dt_proj.bias", (di,))
        A = -np.exp(t.array(m + "A_log", (di, ds)).astype(np.float32))
        Dv = t.array(m + "D", (di,))
        out_proj = t.weight(m + "out_proj.weight", (D, di))
        out.append(Mamba(in_proj, conv_w, conv_b, x_proj, dt_proj, dt_bias, A, Dv, out_proj, ds, K, R,
                         inner_norm, eps))
    return out


def build(cfg: MambaConfig, t, inner_norm: bool = False, eps: float = 1e-6) -> Decoder:
    D = cfg.hidden_size
    E, head = embed_and_head(t, cfg, embed="backbone.embeddings.weight")
    layers = []
    for i, mx in enumerate(mixers(cfg, t, inner_norm, eps)):
        L = Layer(q=None, k=None, v=None, o=None, mamba=mx)
        L.attn_norm = norm(t, P.format(i) + "norm", D, "rms", cfg.layer_norm_epsilon)
        layers.append(L)
    final = norm(t, "backbone.norm_f", D, "rms", cfg.layer_norm_epsilon)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=1, num_attention_heads=1,
                num_key_value_heads=1, head_dim=2, context_length=cfg.max_position_embeddings,
                state_shapes=layers[0].mamba.state_shapes)
    return Decoder(arch, E, layers, final, head)


Config = MambaConfig
