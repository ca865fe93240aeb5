"""DBRX (Databricks), as transformers runs it: Llama-like attention from one fused `Wqkv` ([q | k | v] rows, split
when read) clamped to +-`attn_config.clip_qkv` before the split, `attn_config.kv_n_heads` key / value heads,
rotate-half RoPE of `attn_config.rope_theta`; LayerNorms with a weight and no bias (`norm_attn_norm.norm_1` /
`norm_2`, `norm_f`); routed experts in every layer: softmax over `ffn.router.layer`'s logits, the top `moe_top_k`
divided by their p-norm (`moe_normalize_expert_weights`: 1 renormalises them to sum 1; None keeps them), each expert
a GLU of `ffn_hidden_size` whose three matrices are stacked over the experts in `ffn.experts.mlp.w1` (gate), `v1`
(up) and `w2` ([experts x ffn_hidden_size, d_model] as well: the down matrix transposed), sliced when read."""
from dataclasses import dataclass, field

from petit.models.blocks.config import ConfigMixin, boolean, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm
from petit.models.blocks.moe import Moe
from petit.models.blocks.rope import Rope

P = "transformer."
ATTN_KEYS = {"attn_pdrop", "clip_qkv", "kv_n_heads", "rope_theta", "model_type"}
FFN_KEYS = {"ffn_act_fn", "ffn_hidden_size", "moe_num_experts", "moe_top_k", "moe_jitter_eps", "moe_loss_weight",
            "moe_normalize_expert_weights", "model_type", "uniform_expert_assignment"}
ACTS = ("silu", "swish")


@dataclass
class DbrxConfig(ConfigMixin):
    vocab_size: int = 32000
    d_model: int = 2048
    n_heads: int = 16
    n_layers: int = 24
    max_seq_len: int = 2048
    attn_config: dict | None = None
    ffn_config: dict | None = None
    tie_word_embeddings: bool = False
    model_type: str = "dbrx"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ()
    # num_key_value_heads: transformers writes attn_config.kv_n_heads under that name too
    _IGNORED = frozenset({"resid_pdrop", "emb_pdrop", "output_router_logits", "router_aux_loss_coef",
                          "num_key_value_heads"})

    @classmethod
    def _refuse(cls, d):
        for key, allowed in (("attn_config", ATTN_KEYS), ("ffn_config", FFN_KEYS)):
            sub = d.get(key) or {}
            if not isinstance(sub, dict):
                raise ValueError(f"config: {key} must be an object, got {sub!r}")
            unknown = sorted(set(sub) - allowed)
            if unknown:
                raise ValueError(f"config: {key}: unsupported key(s) {', '.join(unknown)}")
        f = d.get("ffn_config") or {}
        act = (f.get("ffn_act_fn") or {}).get("name", "silu") if isinstance(f.get("ffn_act_fn") or {}, dict) else None
        if act not in ACTS:
            raise ValueError(f"config: ffn_config.ffn_act_fn {f.get('ffn_act_fn')!r} is not supported by the dbrx "
                             f"family (it runs silu)")
        if f.get("uniform_expert_assignment"):
            raise ValueError("config: ffn_config.uniform_expert_assignment (a training-time routing) is not supported")
        p = f.get("moe_normalize_expert_weights", 1.0)
        if p not in (None, 1, 1.0):
            raise ValueError(f"config: ffn_config.moe_normalize_expert_weights {p!r} is not supported (1: the "
                             f"chosen weights renormalised to sum 1, or null: kept as they are)")

    def _validate(self):
        positive_int(self, "vocab_size", "d_model", "n_heads", "n_layers", "max_seq_len")
        boolean(self, "tie_word_embeddings")
        a, f = self.attn_config or {}, self.ffn_config or {}
        if self.d_model % self.n_heads:
            raise ValueError(f"config: d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        self.head_dim = self.d_model // self.n_heads
        self.kv_heads = a.get("kv_n_heads", 1)
        self.clip = float(a.get("clip_qkv") or 0.0)
        self.rope_theta = float(a.get("rope_theta", 10000.0))
        self.ffn_hidden_size = f.get("ffn_hidden_size", 3584)
        self.num_experts = f.get("moe_num_experts", 4)
        self.top_k = f.get("moe_top_k", 1)
        self.renormalise = f.get("moe_normalize_expert_weights", 1.0) is not None
        positive_int(self, "kv_heads", "ffn_hidden_size", "num_experts", "top_k")
        positive_number(self, "rope_theta")
        if self.n_heads % self.kv_heads:
            raise ValueError(f"config: n_heads {self.n_heads} is not a multiple of attn_config.kv_n_heads "
                             f"{self.kv_heads}")
        if self.top_k > self.num_experts:
            raise ValueError(f"config: ffn_config.moe_top_k {self.top_k} exceeds moe_num_experts "
                             f"{self.num_experts}")
        if self.clip < 0:
            raise ValueError(f"config: attn_config.clip_qkv must be positive, got {self.clip!r}")

    @property
    def num_hidden_layers(self):
        return self.n_layers

    @property
    def hidden_size(self):
        return self.d_model


def hf_tensors(cfg: DbrxConfig, ckpt) -> dict:
    """q / k / v from each `Wqkv`, and each expert's gate / up / down from the stacked `w1` / `v1` / `w2` (w2's
    slice transposed), read once per layer and tensor."""
    D, hd, F, E = cfg.d_model, cfg.head_dim, cfg.ffn_hidden_size, cfg.num_experts
    q, kv = cfg.n_heads * hd, cfg.kv_heads * hd
    out = {}
    for i in range(cfg.n_layers):
        p = f"{P}blocks.{i}."
        w = p + "norm_attn_norm.attn.Wqkv.weight"
        if w in ckpt:
            for part, (r0, r1) in (("q_proj", (0, q)), ("k_proj", (q, q + kv)), ("v_proj", (q + kv, q + 2 * kv))):
                out[f"{p}norm_attn_norm.attn.{part}.weight"] = (
                    (r1 - r0, D), lambda w=w, r0=r0, r1=r1: ckpt.f32(w)[r0:r1], (w,))
        held = {}

        def part(name, e, transpose, held=held):
            def make():
                if name not in held:
                    held.clear()
                    held[name] = ckpt.f32(name)
                block = held[name][e * F:(e + 1) * F]
                return block.T.copy() if transpose else block
            return make

        m = p + "ffn.experts.mlp."
        for e in range(E):
            x = f"{p}ffn.experts.{e}."
            for hf, mine, shape, tr in (("w1", "gate_proj", (F, D), False), ("v1", "up_proj", (F, D), False),
                                        ("w2", "down_proj", (D, F), True)):
                if m + hf in ckpt:
                    out[f"{x}{mine}.weight"] = (shape, part(m + hf, e, tr), [m + hf])
    return out


def build(cfg: DbrxConfig, t):
    D, H, KV, hd, F, E = cfg.d_model, cfg.n_heads, cfg.kv_heads, cfg.head_dim, cfg.ffn_hidden_size, cfg.num_experts

    def ln(name):
        return Norm("layer", 1e-5, t.vec(name + ".weight", (D,)))

    emb = t.weight(P + "wte.weight", (cfg.vocab_size, D))
    rope = Rope(hd, cfg.rope_theta, None, cfg.max_seq_len, None, False)
    layers = []
    for i in range(cfg.n_layers):
        p = f"{P}blocks.{i}."
        a, x = p + "norm_attn_norm.attn.", p + "ffn.experts."
        L = Layer(q=t.weight(a + "q_proj.weight", (H * hd, D)), k=t.weight(a + "k_proj.weight", (KV * hd, D)),
                  v=t.weight(a + "v_proj.weight", (KV * hd, D)), o=t.weight(a + "out_proj.weight", (D, H * hd)),
                  rope=rope, clip=cfg.clip)
        L.moe = Moe(t.float_weight(p + "ffn.router.layer.weight", (E, D)),
                    [t.weight(f"{x}{e}.gate_proj.weight", (F, D)) for e in range(E)],
                    [t.weight(f"{x}{e}.up_proj.weight", (F, D)) for e in range(E)],
                    [t.weight(f"{x}{e}.down_proj.weight", (D, F)) for e in range(E)], cfg.top_k, cfg.renormalise)
        L.attn_norm, L.mlp_norm = ln(p + "norm_attn_norm.norm_1"), ln(p + "norm_attn_norm.norm_2")
        layers.append(L)
    head = emb if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=KV, head_dim=hd, context_length=cfg.max_seq_len)
    return Decoder(arch, emb, layers, ln(P + "norm_f"), head)


Config = DbrxConfig
