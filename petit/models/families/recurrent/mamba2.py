"""Mamba-2 (state-spaces/mamba2-*, Mamba-Codestral): the SSD recurrence (kernels/ssm.c, version 2): per head a
scalar decay exp(dt A), B and C shared by the heads of each of `n_groups` groups, a causal conv over x, B and C
together, the time step clamped to `time_step_limit`, and the output gated by silu(z) then RMS-normed with a weight
over all `intermediate_size` channels, as transformers' MambaRMSNormGated computes it (mamba_ssm and llama.cpp norm
each group of intermediate_size / n_groups channels instead, as Petit does with `norm_per_group`, a GGUF file's: the
same when n_groups is 1). The recurrence runs token
by token in C over a prompt (transformers' chunk_size only changes float rounding: it is not part of the model)."""
import math
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.common import embed_and_head, norm
from petit.models.blocks.config import ConfigMixin, boolean, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.families.recurrent.mamba import P, TRAINING_ONLY
from petit.models.blocks.ssm import Mamba


@dataclass(kw_only=True)
class Mamba2Config(ConfigMixin):
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_heads: int = 128
    head_dim: int = 64
    state_size: int = 128
    n_groups: int = 8
    expand: int = 2
    conv_kernel: int = 4
    use_bias: bool = False
    use_conv_bias: bool = True
    hidden_act: str = "silu"
    layer_norm_epsilon: float = 1e-5
    time_step_limit: list = field(default_factory=lambda: [0.0, math.inf])
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 1 << 20      # a recurrent state has no length limit (a Petit key)
    # the gated norm per group of intermediate_size / n_groups channels, as mamba_ssm and llama.cpp compute it (a
    # Petit key: a GGUF file's; transformers norms over all of them)
    norm_per_group: bool = False
    model_type: str = "mamba2"
    unknown_keys: list = field(default_factory=list, repr=False)
    _REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers")
    # rms_norm is read and never used by transformers (the gated norm always runs), chunk_size only splits the scan
    _IGNORED = TRAINING_ONLY | {"rms_norm", "chunk_size", "time_step_rank"}

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "num_heads", "head_dim", "state_size",
                     "n_groups", "expand", "conv_kernel", "max_position_embeddings")
        positive_number(self, "layer_norm_epsilon")
        boolean(self, "use_bias", "use_conv_bias", "tie_word_embeddings", "norm_per_group")
        if self.hidden_act not in ("silu", "swish"):
            raise ValueError(f"config: hidden_act {self.hidden_act!r} is not supported by the mamba2 family "
                             f"(supported: silu)")
        if self.use_bias:
            raise ValueError("config: use_bias true is not supported by the mamba2 family (no released model has "
                             "biases on in_proj / out_proj)")
        if self.num_heads * self.head_dim != self.expand * self.hidden_size:
            raise ValueError(f"config: num_heads x head_dim ({self.num_heads * self.head_dim}) must equal expand x "
                             f"hidden_size ({self.expand * self.hidden_size}): Petit does not run Mamba-2's extra MLP "
                             f"channels")
        if self.num_heads % self.n_groups:
            raise ValueError(f"config: num_heads {self.num_heads} is not a multiple of n_groups {self.n_groups}")
        lim = self.time_step_limit
        if isinstance(lim, (list, tuple)) and len(lim) == 2 and lim[1] is None:     # written so by to_dict: no bound
            lim = self.time_step_limit = [lim[0], math.inf]
        if not (isinstance(lim, (list, tuple)) and len(lim) == 2 and all(isinstance(v, (int, float)) for v in lim)
                and 0 <= lim[0] <= lim[1]):
            raise ValueError(f"config: time_step_limit must be [low, high] with 0 <= low <= high, got {lim!r}")

    def to_dict(self) -> dict:
        d = super().to_dict()
        if math.isinf(d["time_step_limit"][1]):       # strict JSON (a .petit file's) has no Infinity: null
            d["time_step_limit"] = [d["time_step_limit"][0], None]
        return d

    @property
    def intermediate_size(self) -> int:
        return self.num_heads * self.head_dim


def build(cfg: Mamba2Config, t) -> Decoder:
    D, di, N, G, H, K = (cfg.hidden_size, cfg.intermediate_size, cfg.state_size, cfg.n_groups, cfg.num_heads,
                         cfg.conv_kernel)
    conv = di + 2 * G * N
    E, head = embed_and_head(t, cfg, embed="backbone.embeddings.weight")
    layers = []
    for i in range(cfg.num_hidden_layers):
        m = P.format(i) + "mixer."
        in_proj = t.weight(m + "in_proj.weight", (di + conv + H, D))
        conv_w = t.array(m + "conv1d.weight", (conv, 1, K)).reshape(conv, K)
        conv_b = t.array(m + "conv1d.bias", (conv,)) if cfg.use_conv_bias else None

        A = -np.exp(t.array(m + "A_log", (H,)).astype(np.float32))
        mixer = Mamba(in_proj, conv_w, conv_b, None, None, t.array(m + "dt_bias", (H,)), A, t.array(m + "D", (H,)),
                      t.weight(m + "out_proj.weight", (D, di)), N, K, 1, eps=cfg.layer_norm_epsilon, version=2,
                      n_heads=H, n_groups=G, norm_w=t.array(m + "norm.weight", (di,)),
                      dt_min=float(cfg.time_step_limit[0]), dt_max=float(cfg.time_step_limit[1]),
                      norm_groups=G if cfg.norm_per_group else 1)
        L = Layer(q=None, k=None, v=None, o=None, mamba=mixer)
        L.attn_norm = norm(t, P.format(i) + "norm", D, "rms", cfg.layer_norm_epsilon)
        layers.append(L)
    final = norm(t, "backbone.norm_f", D, "rms", cfg.layer_norm_epsilon)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=1, num_attention_heads=1,
                num_key_value_heads=1, head_dim=2, context_length=cfg.max_position_embeddings,
                state_shapes=layers[0].mamba.state_shapes)
    return Decoder(arch, E, layers, final, head)


Config = Mamba2Config
