"""Bamba (IBM's Bamba-9B): Mamba-2 mixers in most layers and Llama's attention in the layers `attn_layer_indices`
names, each layer followed by a SwiGLU `feed_forward` after `pre_ff_layernorm`; the final norm is
`model.final_layernorm`. The Mamba-2 mixer is granitemoehybrid's (kernels/ssm.c version 2) with its gated RMSNorm
per group of `mamba_expand x hidden_size / mamba_n_groups` channels (BambaRMSNormGated), and its time step clamped
to `time_step_limit` (transformers' default (0, inf) clamps nothing; transformers clamps a finite limit over a prompt
but not in its one-token decode step, so a checkpoint with one is ambiguous: Petit clamps in both). The attention
rotates the first half of each head (BambaConfig hard-codes `partial_rotary_factor` 0.5, rotate-half pairs). The
cache holds the attention layers' keys and values and the Mamba layers' conv and scan states."""
import math
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.common import attention_weights, default_rope, embed_and_head, gated_mlp_weights, norm
from petit.models.blocks.config import DecoderConfig, activation, boolean, check_decoder, positive_int
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.ssm import Mamba


@dataclass(kw_only=True)
class BambaConfig(DecoderConfig):
    num_key_value_heads: int | None = 8
    max_position_embeddings: int = 262144
    rms_norm_eps: float = 1e-5
    attn_layer_indices: list | None = None
    mamba_n_heads: int = 128
    mamba_d_head: int | str = "auto"
    mamba_n_groups: int = 1
    mamba_d_state: int = 256
    mamba_d_conv: int = 4
    mamba_expand: int = 2
    mamba_conv_bias: bool = True
    mamba_proj_bias: bool = False
    time_step_limit: list = field(default_factory=lambda: [0.0, math.inf])
    partial_rotary_factor: float = 0.5          # hard-coded by BambaConfig (written into rope_parameters)
    rope_interleaved: bool = False              # a Petit key (a GGUF file's): q / k permuted for adjacent pairs
    attention_bias: bool = False
    mlp_bias: bool = False
    model_type: str = "bamba"
    # chunk_size only splits the scan; num_logits_to_keep and z_loss_coefficient are generation / training settings
    _IGNORED = frozenset({"mamba_chunk_size", "num_logits_to_keep", "z_loss_coefficient"})

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "mamba_conv_bias",
                                                              "attention_bias", "mlp_bias"))
        self.act = activation(self, "hidden_act", "bamba")
        f = self.partial_rotary_factor          # 0.5 in a folder; a GGUF file's is its rope.dimension_count's
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1 \
                or int(self.head_dim * f) % 2:
            raise ValueError(f"config: partial_rotary_factor must be in (0, 1] and rotate an even number of each "
                             f"head's {self.head_dim} values, got {f!r}")
        self.rotary_dim = int(self.head_dim * f)
        boolean(self, "rope_interleaved")
        n = self.num_hidden_layers
        idx = self.attn_layer_indices or []
        if not isinstance(idx, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n
                                            for i in idx):
            raise ValueError(f"config: attn_layer_indices must list layer indices below {n}, got {idx!r}")
        self.layer_types = ["attention" if i in idx else "mamba" for i in range(n)]
        if self.mamba_d_head == "auto":
            self.mamba_d_head = self.mamba_expand * self.hidden_size // self.mamba_n_heads
        positive_int(self, "mamba_n_heads", "mamba_n_groups", "mamba_d_state", "mamba_d_head", "mamba_d_conv",
                     "mamba_expand")
        if self.mamba_n_heads * self.mamba_d_head != self.mamba_expand * self.hidden_size:
            raise ValueError(f"config: mamba_n_heads x mamba_d_head ({self.mamba_n_heads * self.mamba_d_head}) must "
                             f"equal mamba_expand x hidden_size ({self.mamba_expand * self.hidden_size})")
        if self.mamba_n_heads % self.mamba_n_groups:
            raise ValueError(f"config: mamba_n_heads {self.mamba_n_heads} is not a multiple of mamba_n_groups "
                             f"{self.mamba_n_groups}")
        boolean(self, "mamba_proj_bias")
        if self.mamba_proj_bias:
            raise ValueError("config: mamba_proj_bias true is not supported by the bamba family (no released model "
                             "has biases on in_proj / out_proj)")
        lim = self.time_step_limit
        if lim is None:
            lim = self.time_step_limit = [0.0, math.inf]
        if isinstance(lim, (list, tuple)) and len(lim) == 2 and lim[1] is None:     # a .petit file's: no bound
            lim = self.time_step_limit = [lim[0], math.inf]
        if not (isinstance(lim, (list, tuple)) and len(lim) == 2 and all(isinstance(v, (int, float)) for v in lim)
                and 0 <= lim[0] <= lim[1]):
            raise ValueError(f"config: time_step_limit must be [low, high] with 0 <= low <= high, got {lim!r}")
        self.time_step_limit = [float(lim[0]), float(lim[1])]

    def to_dict(self) -> dict:
        d = super().to_dict()
        if math.isinf(d["time_step_limit"][1]):       # strict JSON (a .petit file's) has no Infinity: null
            d["time_step_limit"] = [d["time_step_limit"][0], None]
        return d


def mixer(cfg: BambaConfig, t, m: str, norm_groups: int) -> Mamba:
    """The Mamba-2 mixer under the prefix `m` (…mamba.)."""
    D, di, N, G, H, K = (cfg.hidden_size, cfg.mamba_expand * cfg.hidden_size, cfg.mamba_d_state,
                         cfg.mamba_n_groups, cfg.mamba_n_heads, cfg.mamba_d_conv)
    conv = di + 2 * G * N
    return Mamba(t.weight(m + "in_proj.weight", (di + conv + H, D)),
                 t.array(m + "conv1d.weight", (conv, 1, K)).reshape(conv, K),
                 t.array(m + "conv1d.bias", (conv,)) if cfg.mamba_conv_bias else None, None, None,
                 t.array(m + "dt_bias", (H,)), -np.exp(t.array(m + "A_log", (H,)).astype(np.float32)),
                 t.array(m + "D", (H,)), t.weight(m + "out_proj.weight", (D, di)), N, K, 1, eps=cfg.rms_norm_eps,
                 version=2, n_heads=H, n_groups=G, norm_w=t.array(m + "norm.weight", (di,)),
                 dt_min=cfg.time_step_limit[0], dt_max=cfg.time_step_limit[1], norm_groups=norm_groups)


def build(cfg: BambaConfig, t) -> Decoder:
    D, eps = cfg.hidden_size, cfg.rms_norm_eps
    rope = default_rope(cfg, dim=cfg.rotary_dim)
    E, head = embed_and_head(t, cfg)
    layers, state_layers = [], []
    for i, kind in enumerate(cfg.layer_types):
        p = f"model.layers.{i}."
        if kind == "mamba":
            mix, attn = {"mamba": mixer(cfg, t, p + "mamba.", cfg.mamba_n_groups),
                         "q": None, "k": None, "v": None, "o": None}, {}
            state_layers.append(i)
        else:
            mix, attn = {}, attention_weights(t, p, cfg, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias)
        mlp = gated_mlp_weights(t, p, cfg, bias=cfg.mlp_bias, prefix="feed_forward.")
        L = Layer(**mix, **attn, **mlp, rope=rope if kind == "attention" else None)
        L.attn_norm = norm(t, p + "input_layernorm", D, "rms", eps)
        L.mlp_norm = norm(t, p + "pre_ff_layernorm", D, "rms", eps)
        layers.append(L)
    final = norm(t, "model.final_layernorm", D, "rms", eps)
    mamba = next((L.mamba for L in layers if L.mamba is not None), None)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=cfg.intermediate_size,
                num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
                head_dim=cfg.head_dim, context_length=cfg.max_position_embeddings, act=cfg.act,
                state_shapes=mamba.state_shapes if mamba is not None else None, state_layers=tuple(state_layers))
    return Decoder(arch, E, layers, final, head)


Config = BambaConfig
