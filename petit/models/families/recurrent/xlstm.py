"""xLSTM (transformers' xLSTMForCausalLM, model_type `xlstm`, NX-AI/xLSTM-7b): pre-norm blocks of an mLSTM layer and
a SwiGLU feed-forward, each on an RMSNorm of the stream, then `out_norm` and a soft-capped head.

The mLSTM layer (kernels/mlstm.c, Mamba version 9): q, k [H][dk], v and the output gate o [H][dv] projections, one
input and one forget gate a head (with biases), both soft-capped at `gate_soft_cap`; a matrix memory C [dk][dv], a
normalizer n [dk] and a stabilizer m a head, with the exponential input gate:
m' = max(logsigmoid(f) + m, i), C = exp(logsigmoid(f) + m - m') C + exp(i - m') k v^T (n alike with k),
h = q C / (max(|q . n|, exp(-m')) + eps) with q / sqrt(dk); then a LayerNorm per head (weight, no bias), times
sigmoid(o), and out_proj. transformers runs a prompt chunkwise (whole `chunk_size` chunks, the rest a token at a
time): the same function as this recurrence up to rounding, so chunk_size, mode and the kernel names are not read.
Layer dims are int(hidden_size x qk_dim_factor) and int(hidden_size x v_dim_factor) as transformers' layer takes them.
transformers 5.25 applies `out_norm` whatever `add_out_norm` says, and never ties the head (xLSTMForCausalLM declares
no tied weights: lm_head.weight is saved and read whatever `tie_word_embeddings` says); both read, not acted on.
`weight_mode` "fused" is refused: transformers 5.25 cannot build such a model (no reference to check against)."""
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.common import norm
from petit.models.blocks.config import ConfigMixin, boolean, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.ssm import Mamba

P = "backbone.blocks.{}."


def _round_up(x: float, m: int) -> int:
    return int(((x + m - 1) // m) * m)


@dataclass(kw_only=True)
class XlstmConfig(ConfigMixin):
    vocab_size: int = 50304
    hidden_size: int = 4096
    embedding_dim: int | None = None
    num_hidden_layers: int = 32
    num_blocks: int | None = None
    num_heads: int = 8
    use_bias: bool = False
    add_out_norm: bool = True
    norm_eps: float = 1e-6
    qk_dim_factor: float = 0.5
    v_dim_factor: float = 1.0
    eps: float = 1e-6
    ffn_proj_factor: float = 2.667
    ffn_round_up_to_multiple_of: int = 64
    gate_soft_cap: float = 15.0
    output_logit_soft_cap: float = 30.0
    weight_mode: str = "single"
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 1 << 20      # a recurrent state has no length limit (a Petit key)
    model_type: str = "xlstm"
    unknown_keys: list = field(default_factory=list, repr=False)
    # kernel choices, dtypes and chunking: the same function up to rounding (float32 here); norm_reduction_force_
    # float32 reduces in float32, as Petit always does
    _IGNORED = frozenset({"chunkwise_kernel", "sequence_kernel", "step_kernel", "mode", "chunk_size",
                          "return_last_states", "autocast_kernel_dtype", "inference_state_dtype",
                          "max_inference_chunksize", "norm_reduction_force_float32"})

    def _validate(self):
        if self.embedding_dim is not None and self.embedding_dim != self.hidden_size:
            raise ValueError(f"config: embedding_dim {self.embedding_dim} != hidden_size {self.hidden_size}")
        self.num_blocks = self.num_blocks if self.num_blocks is not None else self.num_hidden_layers
        if self.num_blocks != self.num_hidden_layers:
            raise ValueError(f"config: num_blocks {self.num_blocks} != num_hidden_layers {self.num_hidden_layers}")
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "num_heads",
                     "ffn_round_up_to_multiple_of", "max_position_embeddings")
        positive_number(self, "norm_eps", "eps", "qk_dim_factor", "v_dim_factor", "ffn_proj_factor")
        boolean(self, "use_bias", "add_out_norm", "tie_word_embeddings")
        for key in ("gate_soft_cap", "output_logit_soft_cap"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0):
                raise ValueError(f"config: {key} must be a positive number or null, got {v!r}")
        if self.use_bias:
            raise ValueError("config: use_bias true is not supported by the xlstm family (biases on the projections "
                             "and norms; the released xLSTM-7b has none)")
        if self.weight_mode != "single":
            raise ValueError(f"config: weight_mode {self.weight_mode!r} is not supported by the xlstm family (only "
                             f"single: transformers 5.25 cannot build a fused model, its _init_weights fails on "
                             f"ifgate_preact's bias, so there is no reference to check a fused reading against)")
        H = self.num_heads
        if self.qk_dim % H or self.v_dim % H or not self.qk_dim or not self.v_dim:
            raise ValueError(f"config: the q/k width {self.qk_dim} and the value width {self.v_dim} must be positive "
                             f"multiples of num_heads {H}")

    @property
    def qk_dim(self) -> int:
        return int(self.hidden_size * self.qk_dim_factor)

    @property
    def v_dim(self) -> int:
        return int(self.hidden_size * self.v_dim_factor)

    @property
    def intermediate_size(self) -> int:
        return _round_up(self.hidden_size * self.ffn_proj_factor, self.ffn_round_up_to_multiple_of)


def hf_tensors(cfg: XlstmConfig, ckpt) -> dict:
    """Each layer's mixer input rows q | k | v | o | i | f as one in_proj, and in_proj.bias: zeros, then the gates'."""
    D, Dk, Dv, H = cfg.hidden_size, cfg.qk_dim, cfg.v_dim, cfg.num_heads
    out = {}
    for i in range(cfg.num_hidden_layers):
        m = P.format(i) + "mlstm_layer."
        names = tuple(m + n + ".weight" for n in ("q", "k", "v", "ogate_preact", "igate_preact", "fgate_preact"))
        gates = (m + "igate_preact.bias", m + "fgate_preact.bias")
        if names[0] not in ckpt:
            continue
        out[m + "in_proj.weight"] = ((2 * Dk + 2 * Dv + 2 * H, D),
                                     lambda s=names: np.concatenate([ckpt.f32(x) for x in s]), names)
        out[m + "in_proj.bias"] = ((2 * Dk + 2 * Dv + 2 * H,), lambda s=gates: np.concatenate(
            [np.zeros(2 * Dk + 2 * Dv, np.float32)] + [ckpt.f32(x).reshape(-1) for x in s]), gates)
    return out


def build(cfg: XlstmConfig, t) -> Decoder:
    D, Dk, Dv, H, F, eps = (cfg.hidden_size, cfg.qk_dim, cfg.v_dim, cfg.num_heads, cfg.intermediate_size,
                            cfg.norm_eps)
    E = t.weight("backbone.embeddings.weight", (cfg.vocab_size, D))
    head = t.weight("lm_head.weight", (cfg.vocab_size, D))     # never tied: see the module's note
    row, zero = 2 * Dk + 2 * Dv + 2 * H, np.zeros(1, np.float32)
    layers = []
    for i in range(cfg.num_hidden_layers):
        p, m = P.format(i), P.format(i) + "mlstm_layer."
        mixer = Mamba(t.weight(m + "in_proj.weight", (row, D)), np.zeros((1, 1), np.float32), None, None, None,
                      None, zero, zero, t.weight(m + "out_proj.weight", (D, Dv)), Dk // H, 1, 1, eps=eps, version=9,
                      n_heads=H, norm_w=t.array(m + "multihead_norm.weight", (Dv,)),
                      in_b=t.array(m + "in_proj.bias", (row,)), dt_max=float(cfg.gate_soft_cap or 0.0),
                      mlstm_eps=cfg.eps)
        f = p + "ffn."
        L = Layer(q=None, k=None, v=None, o=None, mamba=mixer, gate=t.weight(f + "proj_up_gate.weight", (F, D)),
                  up=t.weight(f + "proj_up.weight", (F, D)), down=t.weight(f + "proj_down.weight", (D, F)))
        L.attn_norm = norm(t, p + "norm_mlstm", D, "rms", eps)
        L.mlp_norm = norm(t, p + "norm_ffn", D, "rms", eps)
        layers.append(L)
    final = norm(t, "backbone.out_norm", D, "rms", eps)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=1,
                num_key_value_heads=1, head_dim=2, context_length=cfg.max_position_embeddings,
                logit_softcap=float(cfg.output_logit_soft_cap or 0.0), state_shapes=layers[0].mamba.state_shapes)
    return Decoder(arch, E, layers, final, head)


Config = XlstmConfig
