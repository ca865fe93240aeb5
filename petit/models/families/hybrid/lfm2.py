"""LFM2 (LiquidAI): a hybrid of short gated convolutions and attention (`layer_types`: "conv" or "full_attention"),
each layer followed by a SwiGLU MLP. A conv layer: B, C, x = in_proj(norm(h)); v = B x; a causal depthwise conv of
v over the last `conv_L_cache` values (no bias, no activation: kernels/ssm.c's short conv); out_proj(C conv). An
attention layer: grouped-query attention with per-head RMS norms of q and k (`q_layernorm`, `k_layernorm`) before
half-split RoPE. The cache (petit/cache.py HybridCache) holds the attention layers' keys and values and the conv
layers' last values; the chat session snapshots the conv states as for Mamba.

The MLP's width is not `intermediate_size` when `block_auto_adjust_ff_dim`: int(2 x intermediate / 3), times
`block_ffn_dim_multiplier` when set, rounded up to a multiple of `block_multiple_of`, as transformers computes it."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, embed_and_head, norm
from petit.models.blocks.config import DecoderConfig, check_decoder, positive_int
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.ssm import Mamba

KINDS = ("conv", "full_attention")


@dataclass(kw_only=True)
class Lfm2Config(DecoderConfig):
    max_position_embeddings: int = 128000
    rope_theta: float = 1000000.0
    norm_eps: float = 1e-5
    conv_bias: bool = False
    conv_L_cache: int = 3
    block_multiple_of: int = 256
    block_ffn_dim_multiplier: float | None = 1.0
    block_auto_adjust_ff_dim: bool = True
    layer_types: list | None = None
    full_attn_idxs: list | None = None
    tie_word_embeddings: bool = True
    model_type: str = "lfm2"

    def _validate(self):
        check_decoder(self, ("norm_eps", "rope_theta"),
                      ("tie_word_embeddings", "conv_bias", "block_auto_adjust_ff_dim"))
        positive_int(self, "conv_L_cache", "block_multiple_of")
        n = self.num_hidden_layers
        if self.layer_types is None:
            full = set(self.full_attn_idxs if self.full_attn_idxs is not None else range(n))
            self.layer_types = ["full_attention" if i in full else "conv" for i in range(n)]
        if not isinstance(self.layer_types, list) or len(self.layer_types) != n or \
                any(t not in KINDS for t in self.layer_types):
            raise ValueError(f"config: layer_types must list {n} values of {' / '.join(KINDS)}, got "
                             f"{self.layer_types!r}")
        if self.conv_bias:
            raise ValueError("config: conv_bias true is not supported by the lfm2 family (no released model has it)")

    @property
    def ff_width(self) -> int:
        F = self.intermediate_size
        if self.block_auto_adjust_ff_dim:
            F = int(2 * F / 3)
            if self.block_ffn_dim_multiplier is not None:
                F = int(self.block_ffn_dim_multiplier * F)
                m = self.block_multiple_of
                F = m * ((F + m - 1) // m)
        return F


def swiglu(t, p: str, F: int, D: int) -> dict:
    """The Layer fields of LFM2's SwiGLU feed-forward of width F under the layer prefix p (w1, w3, w2)."""
    return {n: t.weight(f"{p}feed_forward.{w}.weight", shape)
            for n, w, shape in (("gate", "w1", (F, D)), ("up", "w3", (F, D)), ("down", "w2", (D, F)))}


def build(cfg: Lfm2Config, t, ffn=None) -> Decoder:
    """`ffn(i, prefix) -> dict` the Layer fields of layer i's feed-forward (LFM2-MoE's experts); by default the
    SwiGLU MLP of `ff_width`."""
    D, H, KV, hd, eps = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.norm_eps
    K = cfg.conv_L_cache
    rope = default_rope(cfg)
    E, head = embed_and_head(t, cfg)
    layers, conv_layers = [], []
    for i, kind in enumerate(cfg.layer_types):
        p = f"model.layers.{i}."
        mlp = ffn(i, p) if ffn is not None else swiglu(t, p, cfg.ff_width, D)
        if kind == "conv":
            c = p + "conv."
            mixer = Mamba(t.weight(c + "in_proj.weight", (3 * D, D)),
                          t.array(c + "conv.weight", (D, 1, K)).reshape(D, K), None, None, None, None, None, None,
                          t.weight(c + "out_proj.weight", (D, D)), 1, K, 1, version=3)
            L = Layer(q=None, k=None, v=None, o=None, mamba=mixer, **mlp)
            conv_layers.append(i)
        else:
            a = p + "self_attn."
            L = Layer(q=t.weight(a + "q_proj.weight", (H * hd, D)), k=t.weight(a + "k_proj.weight", (KV * hd, D)),
                      v=t.weight(a + "v_proj.weight", (KV * hd, D)), o=t.weight(a + "out_proj.weight", (D, H * hd)),
                      rope=rope, **mlp)
            L.q_norm = norm(t, a + "q_layernorm", hd, "rms", eps)
            L.k_norm = norm(t, a + "k_layernorm", hd, "rms", eps)
        L.attn_norm = norm(t, p + "operator_norm", D, "rms", eps)
        L.mlp_norm = norm(t, p + "ffn_norm", D, "rms", eps)
        layers.append(L)
    final = norm(t, "model.embedding_norm", D, "rms", eps)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=cfg.ff_width, num_attention_heads=H,
                num_key_value_heads=KV, head_dim=hd, context_length=rope.context_length,
                state_shapes=((D, K - 1), (1,)), state_layers=tuple(conv_layers))
    return Decoder(arch, E, layers, final, head)


Config = Lfm2Config
