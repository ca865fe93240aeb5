"""HRM-Text (Sapient, `hrm_text`; HrmTextForCausalLM), as transformers 5.25's modeling_hrm_text.py computes a plain
causal-LM call. Two stacks of `num_layers_per_stack` pre-norm blocks (L_module, H_module; weightless RMSNorms, MHA
with RoPE rotate-half, each head's output x sigmoid(gate_proj x) before o_proj, a SwiGLU MLP), each stack ending in
a weightless RMSNorm, run in cycles over two states per token:

    z_H = embed(ids) x embedding_scale (default 1 / initializer_range);  z_L = z_L_init (a [hidden] parameter)
    H_cycles times:  L_cycles times z_L = L_stack(z_L + z_H);  then z_H = H_stack(z_H + z_L)
    logits = lm_head z_H

Every stack pass has keys and values of its own (transformers' cache slot (h (L_cycles + 1) + l) x layers + layer):
the passes are unrolled here into H_cycles x (L_cycles + 1) x num_layers_per_stack layers sharing their stack's
weights, as inkling2_loop_text unrolls its loop, each pass's first layer entered by a `Cycle` (hrm_cycle.py: the
states ride the residual stream); the last H pass's norm is the decoder's final norm.

The prefix-LM mask (`prefix_lm`: tokens with token_type_ids 1 attend both ways) is built only when a caller passes
token_type_ids; a plain call (what Petit runs: token ids) is causal in every pass, so a cached decode step is the
whole forward's last position. L_bp_cycles routes training gradients only.
"""
from dataclasses import dataclass, replace

from petit.models.blocks.common import arch, attention_weights, default_rope, embed_and_head, gated_mlp_weights
from petit.models.blocks.config import DecoderConfig, activation, check_decoder, positive_int
from petit.models.blocks.decoder import Decoder, Layer, Norm, Vec
from petit.models.families.dense.hrm_cycle import Cycle


@dataclass(kw_only=True)
class HrmTextConfig(DecoderConfig):
    vocab_size: int = 151808
    hidden_size: int = 1536
    intermediate_size: int = 4096
    num_hidden_layers: int = 16                 # transformers rewrites it to the passes' layers (num_layers_per_stack
    num_attention_heads: int = 12               # x H_cycles x (L_cycles + 1)) and keeps the stack's own below
    head_dim: int | None = 128
    max_position_embeddings: int = 2048
    rms_norm_eps: float = 1e-6
    initializer_range: float = 0.02             # read: the default embedding_scale is its inverse
    attention_bias: bool = False
    mlp_bias: bool = False
    H_cycles: int = 2
    L_cycles: int = 3
    embedding_scale: float | None = None
    prefix_lm: bool = True                      # a mask transformers builds only from a caller's token_type_ids
    num_layers_per_stack: int | None = None
    model_type: str = "hrm_text"

    _REQUIRED = ()
    _IGNORED = frozenset({"L_bp_cycles"})      # training-time gradient routing

    @classmethod
    def from_dict(cls, d: dict):
        if isinstance(d, dict) and d.get("num_key_value_heads") is not None:     # the attention has no such field
            d = {k: v for k, v in d.items() if k != "num_key_value_heads"}
            d["num_key_value_heads (HRM-Text's attention has a key / value head per query head: not read)"] = None
        return super().from_dict(d)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.pop("num_key_value_heads")
        return d

    def _validate(self):
        self.act = activation(self, "hidden_act", "hrm_text")
        if self.embedding_scale is None:
            r = self.initializer_range
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not r > 0:
                raise ValueError(f"config: initializer_range must be a positive number when embedding_scale is not "
                                 f"given (the scale is its inverse), got {r!r}")
            self.embedding_scale = 1.0 / r
        if self.num_layers_per_stack is None:           # transformers' first construction: the stack's count given
            positive_int(self, "num_hidden_layers", "H_cycles", "L_cycles")
            self.num_layers_per_stack = self.num_hidden_layers
            self.num_hidden_layers = self.num_layers_per_stack * self.H_cycles * (self.L_cycles + 1)
        check_decoder(self, ("rms_norm_eps", "rope_theta", "embedding_scale"),
                      ("tie_word_embeddings", "attention_bias", "mlp_bias", "prefix_lm"))
        positive_int(self, "H_cycles", "L_cycles", "num_layers_per_stack")
        n, per, H, L = self.num_hidden_layers, self.num_layers_per_stack, self.H_cycles, self.L_cycles
        if n < per * H * (L + 1):       # more: slots transformers allocates and no pass uses
            raise ValueError(f"config: num_hidden_layers {n} is fewer than the passes' layers, {per * H * (L + 1)} "
                             f"(num_layers_per_stack {per} x H_cycles {H} x (L_cycles {L} + 1)): transformers' cache "
                             f"has no slot for the later passes")

    def passes(self) -> list[tuple[str, str]]:
        """Each stack pass in order: (its stack "L" / "H", its entry's kind: Cycle.KINDS)."""
        out = []
        for h in range(self.H_cycles):
            out += [("L", "first" if h == 0 else "low_after_high")] + [("L", "low")] * (self.L_cycles - 1)
            out.append(("H", "high"))
        return out


def stack_layer(t, cfg, p: str, rope, norm: Norm) -> Layer:
    """One block of a stack under prefix `p` (model.{L,H}_module.layers.{j}.)."""
    width = cfg.num_attention_heads * cfg.head_dim
    attn = attention_weights(t, p, cfg, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias)
    attn["attn_gate"] = t.weight(p + "self_attn.gate_proj.weight", (width, cfg.hidden_size))
    if cfg.attention_bias:
        attn["attn_gate_b"] = t.vec(p + "self_attn.gate_proj.bias", (width,))
    return Layer(**attn, **gated_mlp_weights(t, p, cfg, bias=cfg.mlp_bias), rope=rope, attn_norm=norm, mlp_norm=norm)


def build(cfg: HrmTextConfig, t):
    D = cfg.hidden_size
    rope, norm = default_rope(cfg), Norm("rms", cfg.rms_norm_eps)
    E, head = embed_and_head(t, cfg)
    stacks = {s: [stack_layer(t, cfg, f"model.{s}_module.layers.{j}.", rope, norm)
                  for j in range(cfg.num_layers_per_stack)] for s in ("H", "L")}       # the file's order
    z0 = Vec(t.array("model.z_L_init", (D,)))
    layers = []
    for stack, kind in cfg.passes():
        layers += [replace(L, pre_block=Cycle(kind, norm, D, z0) if j == 0 else None)
                   for j, L in enumerate(stacks[stack])]
    a = arch(cfg, act=cfg.act, embed_scale=cfg.embedding_scale, context_length=rope.context_length)
    dec = Decoder(a, E, layers, norm, head)
    dec.extra = {"z_h": D, "z_l": D}            # the two states (Cycle)
    return dec


def hf_tensors(cfg: HrmTextConfig, ckpt) -> dict:
    """The released layout (what transformers' conversion mapping reads and save_pretrained writes): each attention's
    gate | q | k | v as row quarters of `attn.gqkv_proj`, o_proj under `attn.`, the MLP's gate | up as halves of
    `mlp.gate_up_proj`; read by transformers' module names."""
    D, F, W = cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads * cfg.head_dim
    out = {}
    for s in ("H", "L"):
        for j in range(cfg.num_layers_per_stack):
            p = f"model.{s}_module.layers.{j}."
            gqkv, gu = p + "attn.gqkv_proj.weight", p + "mlp.gate_up_proj.weight"
            parts = [(gqkv, f"self_attn.{n}_proj.weight", k * W, W, D) for k, n in enumerate(("gate", "q", "k", "v"))]
            parts += [(gu, f"mlp.{n}_proj.weight", k * F, F, D) for k, n in enumerate(("gate", "up"))]
            for src, name, r0, rows, cols in parts:
                if src in ckpt:
                    out[p + name] = ((rows, cols), lambda s=src, a=r0, b=r0 + rows: ckpt.f32(s)[a:b], (src,))
            for part, shape in (("weight", (D, W)), ("bias", (D,))):
                src = p + "attn.o_proj." + part
                if src in ckpt:
                    out[p + "self_attn.o_proj." + part] = (shape, lambda s=src: ckpt.f32(s), (src,))
    return out


Config = HrmTextConfig
