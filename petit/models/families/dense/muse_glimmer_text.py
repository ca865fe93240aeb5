"""Muse Glimmer's language model (`muse_glimmer_text`, MuseGlimmerTextModel: the text model of Meta's
Muse-Glimmer-30B, the `muse_glimmer` wrapper): Gemma 2's block (petit/models/families/dense/gemma2.py: four norms x (1 +
w), `hidden_activation` MLP, sliding / full `layer_types`) with AfMoE's gated attention
(petit/models/families/moe/afmoe.py). What differs from Gemma 2:

- the embeddings RMS-normed without a weight (eps `rms_norm_eps`), not scaled by sqrt(hidden_size);
- q and k RMS-normed per head without a weight, q times `qk_scale_factor`, the scale head_dim^-0.5 (no
  query_pre_attn_scalar, no attention soft-capping); the heads' output x sigmoid(gate_proj x), one gate a value;
- the post-attention and post-feedforward norms' eps `post_norm_eps`; the final norm x w (not 1 + w);
- RoPE in the layers whose `layer_rope_theta` is not 0, none in the others (default: every 4th layer counted from
  the last, which is also the full-attention one by default); transformers reads only which entries are 0, every
  RoPE layer rotating with rope_parameters' theta, and so does Petit;
- the logits x `output_multiplier`, then `final_logit_softcapping` tanh (l / cap).
A GGUF file (petit/loading/gguf_newdec5.py) holds the q / k norms as weights and rotates adjacent pairs
(`rope_interleaved`, Petit's key)."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, layer_types, llama_like, norm, window_of
from petit.models.blocks.config import DecoderConfig, activation, check_decoder, positive_number
from petit.models.blocks.decoder import Norm


@dataclass(kw_only=True)
class MuseGlimmerTextConfig(DecoderConfig):
    vocab_size: int = 202048
    hidden_size: int = 6656
    intermediate_size: int = 19968
    num_hidden_layers: int = 52
    num_attention_heads: int = 32
    num_key_value_heads: int | None = 2
    head_dim: int | None = 128
    hidden_activation: str = "silu"
    max_position_embeddings: int = 131072
    rms_norm_eps: float = 1e-5
    attention_bias: bool = False
    sliding_window: int | None = 2048
    final_logit_softcapping: float = 20.0
    layer_types: list | None = None
    qk_scale_factor: float = 3.87
    output_multiplier: float = 0.19611613513818404
    post_norm_eps: float = 1e-8
    layer_rope_theta: list | None = None
    rope_interleaved: bool = False      # a Petit key, not transformers': True rotates pairs (a GGUF file's q / k rows)
    model_type: str = "muse_glimmer_text"
    _REQUIRED = ()

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "post_norm_eps", "output_multiplier"),
                      ("tie_word_embeddings", "attention_bias", "rope_interleaved"), window=True)
        positive_number(self, "qk_scale_factor")
        if self.final_logit_softcapping is not None:        # None: no soft-cap (a GGUF file without the key)
            positive_number(self, "final_logit_softcapping")
        self.act = activation(self, "hidden_activation", self.model_type)
        n = self.num_hidden_layers
        self.types = layer_types(self, lambda i: "full_attention" if (n - 1 - i) % 4 == 0 else "sliding_attention")
        if self.layer_rope_theta is None:
            self.layer_rope_theta = [0 if (n - 1 - i) % 4 == 0 else self.rope_theta for i in range(n)]
        r = self.layer_rope_theta
        if not isinstance(r, list) or len(r) != n or any(isinstance(x, bool) or not isinstance(x, (int, float))
                                                         or x < 0 for x in r):
            raise ValueError(f"config: layer_rope_theta must list {n} thetas >= 0 (0: no RoPE), got {r!r}")


def build(cfg: MuseGlimmerTextConfig, t):
    rope, D, eps = default_rope(cfg), cfg.hidden_size, cfg.rms_norm_eps
    dec = llama_like(t, cfg, eps=eps, norm_add=1.0, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                     rope_for=lambda i: rope if cfg.layer_rope_theta[i] else None,
                     window_for=window_of(cfg, cfg.types), sandwich=True, act=cfg.act,
                     context_length=rope.context_length, attn_scale=cfg.qk_scale_factor * cfg.head_dim ** -0.5,
                     logit_scale=float(cfg.output_multiplier),
                     logit_softcap=float(cfg.final_logit_softcapping or 0.0))
    hd = cfg.head_dim
    for i, L in enumerate(dec.layers):
        p = f"model.layers.{i}."
        # transformers' q / k norms have no weight; llama.cpp's files store them as weights (q's holding
        # qk_scale_factor, read then with qk_scale_factor 1)
        L.q_norm, L.k_norm = (norm(t, f"{p}self_attn.{x}_norm", hd, "rms", eps)
                              if t.has(f"{p}self_attn.{x}_norm.weight") else Norm("rms", eps) for x in "qk")
        L.post_attn_norm = norm(t, p + "post_attention_layernorm", D, "rms", cfg.post_norm_eps, add=1.0)
        L.post_mlp_norm = norm(t, p + "post_feedforward_layernorm", D, "rms", cfg.post_norm_eps, add=1.0)
        L.attn_gate = t.weight(p + "self_attn.gate_proj.weight", (cfg.num_attention_heads * cfg.head_dim, D))
    dec.final_norm = norm(t, "model.norm", D, "rms", eps)
    dec.embed_norm = Norm("rms", eps)
    return dec


Config = MuseGlimmerTextConfig
