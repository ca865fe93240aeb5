"""JetMoE (`jetmoe`, transformers' modeling_jetmoe): RMSNorm blocks whose attention is a mixture of attention heads
(MoA) and whose MLP is a mixture of SwiGLU experts, both routed per token by JetMoeTopKGating (the top
`num_experts_per_tok` of `num_local_experts` router logits, softmax over those), each followed by a bias.

The MoA: `kv_proj` [2 · n_kv · hd, D] gives n_kv key and n_kv value heads (hd = `kv_channels`) shared by every
attention expert; expert e has a query projection `experts.input_linear[e]` [n_kv · hd, D] and an output projection
`experts.output_linear[e]` [D, n_kv · hd]; its head h reads kv head h. Petit holds the experts' query heads as one
q of E · n_kv heads (head h · E + e is expert e's head h, so GQA with groups of E reads the right kv head) and their
output projections as one o [D, E · n_kv · hd] in the same order; between the attention and o, kernels/moa.c weighs
each token's heads by its routing (0 for the experts it did not choose), so o sums exactly the chosen experts'
outputs times their gates. That runs the attention of all E experts, E / k times the query and output work of the
routed form. The routers stay float32 (the decided MoE bound: routing is never quantized).

The MLP is GraniteMoE's layout (`mlp.input_linear` [E, 2F, D] gate rows then up rows, `mlp.output_linear`
[E, D, F]) with its output bias `mlp.bias` added once after the experts. The blocks' two RMSNorms use eps 1e-6
whatever `rms_norm_eps` says (JetMoeDecoderLayer builds them with JetMoeRMSNorm's default, in 4.57 and 5.25
alike); only the final norm reads `rms_norm_eps` (tests/fixtures/hf_moe_more/jetmoe, eps 1e-2, tells them
apart). `num_attention_heads` in config.json is
JetMoeConfig's derived n_kv · top_k (checked, not used)."""
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.common import default_rope, embed_and_head, norm
from petit.models.blocks.config import DecoderConfig, check_decoder, positive_int, refuse_act
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.moe import Moe
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY


@dataclass(kw_only=True)
class JetMoeConfig(DecoderConfig):
    vocab_size: int = 32000
    hidden_size: int = 2048
    num_hidden_layers: int = 12
    num_key_value_heads: int | None = 16
    num_attention_heads: int | None = None
    kv_channels: int = 128
    intermediate_size: int = 5632
    max_position_embeddings: int = 4096
    activation_function: str = "silu"
    num_local_experts: int = 8
    num_experts_per_tok: int = 2
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = True
    model_type: str = "jetmoe"
    _REQUIRED = ()
    _IGNORED = MOE_TRAINING_ONLY | {"aux_loss_coef", "attention_dropout", "initializer_range"}

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "activation_function", ("silu", "swish"), "jetmoe", "silu")

    def _validate(self):
        positive_int(self, "num_key_value_heads", "kv_channels", "num_local_experts", "num_experts_per_tok")
        if self.num_experts_per_tok > self.num_local_experts:
            raise ValueError(f"config: num_experts_per_tok {self.num_experts_per_tok} > num_local_experts "
                             f"{self.num_local_experts}")
        derived = self.num_key_value_heads * self.num_experts_per_tok
        if self.num_attention_heads not in (None, derived):
            raise ValueError(f"config: num_attention_heads {self.num_attention_heads} is not num_key_value_heads x "
                             f"num_experts_per_tok ({derived}), which JetMoE derives it as")
        self.num_attention_heads = derived      # the engine runs E x n_kv query heads (build), not these
        self.head_dim = self.kv_channels
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings",))


def hf_tensors(cfg: JetMoeConfig, ckpt) -> dict:
    """The MoA's q / k / v / o in the engine's layout and each MLP expert's gate / up / down, built from the
    checkpoint's fused tensors (each read once per layer and name, kept while its parts are handed out)."""
    D, F, E = cfg.hidden_size, cfg.intermediate_size, cfg.num_local_experts
    KV, hd = cfg.num_key_value_heads, cfg.kv_channels
    out = {}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        held = {}

        def get(name, held=held):
            if name not in held:
                held.clear()
                held[name] = ckpt.f32(name)
            return held[name]

        a = p + "self_attention."
        kv, qin, qout = a + "kv_proj.weight", a + "experts.input_linear.weight", a + "experts.output_linear.weight"
        out[p + "self_attn.k_proj.weight"] = ((KV * hd, D), lambda kv=kv: get(kv)[:KV * hd], [kv])
        out[p + "self_attn.v_proj.weight"] = ((KV * hd, D), lambda kv=kv: get(kv)[KV * hd:], [kv])
        # q row block (h, e) = expert e's head h; o column block (h, e) = expert e's output columns of head h
        out[p + "self_attn.q_proj.weight"] = (
            (KV * E * hd, D), lambda n=qin: np.ascontiguousarray(
                get(n).reshape(E, KV, hd, D).transpose(1, 0, 2, 3).reshape(KV * E * hd, D)), [qin])
        out[p + "self_attn.o_proj.weight"] = (
            (D, KV * E * hd), lambda n=qout: np.ascontiguousarray(
                get(n).reshape(E, D, KV, hd).transpose(1, 2, 0, 3).reshape(D, KV * E * hd)), [qout])
        m = p + "mlp."
        fused, down = m + "input_linear.weight", m + "output_linear.weight"
        for e in range(E):
            x = f"{m}experts.{e}."
            out[x + "gate_proj.weight"] = ((F, D), lambda e=e, n=fused: get(n)[e, :F], [fused])
            out[x + "up_proj.weight"] = ((F, D), lambda e=e, n=fused: get(n)[e, F:], [fused])
            out[x + "down_proj.weight"] = ((D, F), lambda e=e, n=down: get(n)[e], [down])
    return out


def build(cfg: JetMoeConfig, t):
    D, F, E, k = cfg.hidden_size, cfg.intermediate_size, cfg.num_local_experts, cfg.num_experts_per_tok
    KV, hd = cfg.num_key_value_heads, cfg.kv_channels
    q = KV * E * hd
    emb, head = embed_and_head(t, cfg)
    rope = default_rope(cfg)
    eps = 1e-6                  # JetMoeDecoderLayer's two norms: JetMoeRMSNorm's default, not rms_norm_eps
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        L = Layer(q=t.weight(a + "q_proj.weight", (q, D)), k=t.weight(a + "k_proj.weight", (KV * hd, D)),
                  v=t.weight(a + "v_proj.weight", (KV * hd, D)), o=t.weight(a + "o_proj.weight", (D, q)),
                  o_b=t.vec(p + "self_attention.experts.bias", (D,)),
                  moa_router=t.float_weight(p + "self_attention.experts.router.layer.weight", (E, D)), moa_top_k=k,
                  rope=rope)
        x = p + "mlp.experts."
        L.moe = Moe(t.float_weight(p + "mlp.router.layer.weight", (E, D)),
                    [t.weight(f"{x}{e}.gate_proj.weight", (F, D)) for e in range(E)],
                    [t.weight(f"{x}{e}.up_proj.weight", (F, D)) for e in range(E)],
                    [t.weight(f"{x}{e}.down_proj.weight", (D, F)) for e in range(E)], k, True)
        L.down_b = t.vec(p + "mlp.bias", (D,))          # after the experts, once (the decoder's moe path adds it)
        L.attn_norm = norm(t, p + "input_layernorm", D, "rms", eps)
        L.mlp_norm = norm(t, p + "post_attention_layernorm", D, "rms", eps)
        layers.append(L)
    a = Arch(vocab_size=cfg.vocab_size, hidden_size=D, num_attention_heads=KV * E, num_key_value_heads=KV,
             head_dim=hd, context_length=rope.context_length, intermediate_size=F)
    return Decoder(a, emb, layers,
                   norm(t, "model.norm", D, "rms", cfg.rms_norm_eps), head)


Config = JetMoeConfig
