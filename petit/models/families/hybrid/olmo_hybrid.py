"""OLMo Hybrid (AI2's OLMo 3 hybrid): Gated DeltaNet layers (`linear_attention`) and OLMo 2's attention layers
(`full_attention`, by default every fourth), each with a SwiGLU MLP.
- Linear layers are pre-norm (input_layernorm, then post_attention_layernorm before the MLP). Their Gated DeltaNet is
  Qwen3-Next's recurrence (kernels/ssm.c version 4, kernels/deltanet.c) from separate q / k / v / g / b / a
  projections (joined when read into one `linear_attn.in_proj` of rows q | k | v | g | b | a, the order the conv and
  the kernel read), a conv without bias over q | k | v, beta = 2 sigmoid(b) with `linear_allow_neg_eigval` (the
  default; pt_mamba.beta_scale), the output RMS-normed per head with o_norm (eps 1e-5, hard-coded by transformers) and
  gated by silu(g_proj x). transformers runs as many key heads as value heads (it repeats neither), so Petit asks for
  equal counts.
- Attention layers are OLMo 2's: no pre-norm, q / k RMS-normed over the whole projection, the outputs of attention
  and of the MLP each normed (post_attention_layernorm, post_feedforward_layernorm) before the residual add. RoPE
  only when `rope_parameters` has a rope_theta: the released checkpoints write it null (no position encoding at all).
The recurrent state (conv and [dk, dv] per head) lives in a HybridCache beside the attention layers' KV rows."""
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.common import attention_weights, default_rope, gated_mlp_weights, norm
from petit.models.blocks.config import DecoderConfig, activation, boolean, check_decoder, positive_int
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.ssm import Mamba

KINDS = ("linear_attention", "full_attention")
O_NORM_EPS = 1e-5            # OlmoHybridGatedDeltaNet's o_norm: eps hard-coded


@dataclass(kw_only=True)
class OlmoHybridConfig(DecoderConfig):
    vocab_size: int = 100352
    hidden_size: int = 3840
    intermediate_size: int = 11008
    num_hidden_layers: int = 32
    num_attention_heads: int = 30
    max_position_embeddings: int = 65536
    rms_norm_eps: float = 1e-6
    attention_bias: bool = False
    layer_types: list | None = None
    linear_num_key_heads: int | None = None
    linear_num_value_heads: int | None = None
    linear_key_head_dim: int | None = None
    linear_value_head_dim: int | None = None
    linear_conv_kernel_dim: int = 4
    linear_allow_neg_eigval: bool = True
    use_rope: bool = True                       # a Petit key: False when rope_parameters' rope_theta is null
    model_type: str = "olmo_hybrid"
    _REQUIRED = ()
    # initialisation ranges of A_log and dt_bias
    _IGNORED = frozenset({"linear_a_log_min", "linear_a_log_max", "linear_dt_min", "linear_dt_max",
                          "linear_dt_init_floor"})

    @classmethod
    def from_dict(cls, d: dict):
        d = dict(d)
        rp = d.get("rope_parameters")
        if isinstance(rp, dict) and "rope_theta" in rp and rp["rope_theta"] is None:
            d["use_rope"] = False                   # transformers builds no rotary embedding: NoPE everywhere
            d["rope_parameters"] = {k: v for k, v in rp.items() if k != "rope_theta"}
        return super().from_dict(d)

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "attention_bias",
                                                              "linear_allow_neg_eigval", "use_rope"))
        self.act = activation(self, "hidden_act", "olmo_hybrid")
        if self.attention_bias:
            raise ValueError("config: attention_bias true is not supported by the olmo_hybrid family (transformers' "
                             "OLMo Hybrid attention has no biases)")
        n = self.num_hidden_layers
        if self.layer_types is None:               # OlmoHybridConfig's default: every fourth layer attends
            self.layer_types = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n)]
            if "full_attention" not in self.layer_types:
                self.layer_types[-1] = "full_attention"
        if not isinstance(self.layer_types, list) or len(self.layer_types) != n \
                or any(t not in KINDS for t in self.layer_types):
            raise ValueError(f"config: layer_types must list {n} values of {' / '.join(KINDS)}, got "
                             f"{self.layer_types!r}")
        if self.linear_num_key_heads is None:
            self.linear_num_key_heads = self.num_attention_heads
        if self.linear_num_value_heads is None:
            self.linear_num_value_heads = self.num_attention_heads
        if self.linear_key_head_dim is None:
            self.linear_key_head_dim = int(0.75 * self.hidden_size / self.linear_num_key_heads)
        if self.linear_value_head_dim is None:
            self.linear_value_head_dim = 2 * self.linear_key_head_dim
        positive_int(self, "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                     "linear_value_head_dim", "linear_conv_kernel_dim")
        if self.linear_num_key_heads != self.linear_num_value_heads:
            raise ValueError(f"config: linear_num_key_heads {self.linear_num_key_heads} differs from "
                             f"linear_num_value_heads {self.linear_num_value_heads}: transformers' OLMo Hybrid repeats "
                             f"neither, so it cannot run such a checkpoint")
        boolean(self, "use_rope")


def _dims(cfg):
    H, dk, dv = cfg.linear_num_value_heads, cfg.linear_key_head_dim, cfg.linear_value_head_dim
    return H, dk, dv, H * dk, H * dv


# the Hub's names (transformers' conversion mapping renames them when it loads): each layer's first two norms
RENAMED = {"input_layernorm": "attention_layer_norm", "post_attention_layernorm": "feedforward_layer_norm"}


def hf_tensors(cfg: OlmoHybridConfig, ckpt) -> dict:
    """Each linear layer's q / k / v / g / b / a projections joined into `linear_attn.in_proj` (rows in that order),
    its q_conv1d | k_conv1d | v_conv1d (the Hub's layout) joined into `linear_attn.conv1d`, and the norms under
    transformers' in-memory names (the Hub's attention_layer_norm, feedforward_layer_norm)."""
    H, dk, dv, kd, vd = _dims(cfg)
    out = {}
    for i, kind in enumerate(cfg.layer_types):
        p = f"model.layers.{i}."
        for name, hub in RENAMED.items():
            if p + name + ".weight" not in ckpt and p + hub + ".weight" in ckpt:
                src = p + hub + ".weight"
                out[p + name + ".weight"] = ((cfg.hidden_size,), lambda s=src: ckpt.f32(s), (src,))
        a = p + "linear_attn."
        convs = tuple(a + f"{n}_conv1d.weight" for n in ("q", "k", "v"))
        if kind == "linear_attention" and a + "conv1d.weight" not in ckpt and all(c in ckpt for c in convs):
            K = cfg.linear_conv_kernel_dim
            out[a + "conv1d.weight"] = ((2 * kd + vd, 1, K), lambda s=convs: np.concatenate([ckpt.f32(x) for x in s]),
                                        convs)
        if kind != "linear_attention" or a + "q_proj.weight" not in ckpt:
            continue
        srcs = tuple(a + f"{n}_proj.weight" for n in ("q", "k", "v", "g", "b", "a"))
        out[a + "in_proj.weight"] = ((2 * kd + 2 * vd + 2 * H, cfg.hidden_size),
                                     lambda s=srcs: np.concatenate([ckpt.f32(x) for x in s]), srcs)
    return out


def _deltanet(cfg: OlmoHybridConfig, t, a: str) -> Mamba:
    D, K = cfg.hidden_size, cfg.linear_conv_kernel_dim
    H, dk, dv, kd, vd = _dims(cfg)
    cw = 2 * kd + vd
    return Mamba(t.weight(a + "in_proj.weight", (2 * kd + 2 * vd + 2 * H, D)),
                 t.array(a + "conv1d.weight", (cw, 1, K)).reshape(cw, K), None, None, None,
                 t.array(a + "dt_bias", (H,)), -np.exp(t.array(a + "A_log", (H,)).astype(np.float32)),
                 np.zeros(H, np.float32), t.weight(a + "o_proj.weight", (D, vd)), dk, K, 1, eps=O_NORM_EPS,
                 version=4, n_heads=H, n_groups=H, norm_w=t.array(a + "o_norm.weight", (dv,)),
                 beta_scale=2.0 if cfg.linear_allow_neg_eigval else 0.0)


def build(cfg: OlmoHybridConfig, t) -> Decoder:
    D, hd, eps = cfg.hidden_size, cfg.head_dim, cfg.rms_norm_eps
    E = t.weight("model.embed_tokens.weight", (cfg.vocab_size, D))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    rope = default_rope(cfg) if cfg.use_rope else None
    layers, state_layers = [], []
    for i, kind in enumerate(cfg.layer_types):
        p = f"model.layers.{i}."
        mlp = gated_mlp_weights(t, p, cfg)
        if kind == "linear_attention":
            L = Layer(mamba=_deltanet(cfg, t, p + "linear_attn."), q=None, k=None, v=None, o=None, **mlp)
            L.attn_norm = norm(t, p + "input_layernorm", D, "rms", eps)
            L.mlp_norm = norm(t, p + "post_attention_layernorm", D, "rms", eps)
            state_layers.append(i)
        else:
            L = Layer(**attention_weights(t, p, cfg), **mlp, rope=rope)
            L.q_norm = norm(t, p + "self_attn.q_norm", cfg.num_attention_heads * hd, "rms", eps)
            L.k_norm = norm(t, p + "self_attn.k_norm", cfg.num_key_value_heads * hd, "rms", eps)
            L.post_attn_norm = norm(t, p + "post_attention_layernorm", D, "rms", eps)
            L.post_mlp_norm = norm(t, p + "post_feedforward_layernorm", D, "rms", eps)
        layers.append(L)
    final = norm(t, "model.norm", D, "rms", eps)
    mixer = next(L.mamba for L in layers if L.mamba is not None)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=cfg.intermediate_size,
                num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
                head_dim=hd, context_length=cfg.max_position_embeddings, act=cfg.act, qk_norm_per_head=False,
                state_shapes=mixer.state_shapes, state_layers=tuple(state_layers))
    return Decoder(arch, E, layers, final, head)


Config = OlmoHybridConfig
