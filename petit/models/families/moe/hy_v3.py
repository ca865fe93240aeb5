"""Hy3 (`hy_v3`, Tencent HunYuan 3): Apertus' attention (RMSNorm over each head of q and k before rotate-half RoPE,
biases on q / k / v / o with `attention_bias`) in Llama's pre-norm block, the MLP of each layer its
`mlp_layer_types` kind (transformers' default: the first layer dense, the others sparse). A dense layer is a SwiGLU
MLP of `intermediate_size`; a sparse one routes each token to `num_experts_per_tok` of `num_experts` SwiGLU experts
of `moe_intermediate_size`:

    scores = sigmoid(router x)                          float32 logits (`mlp.router.gate`, saved so; `mlp.gate`)
    choice: the top k of scores + e_score_correction_bias   (saved `mlp.expert_bias`; `mlp.e_score_correction_bias`)
    weights = the chosen scores / (their sum + 1e-20) x router_scaling_factor

plus an ungated shared expert every token takes (saved `mlp.shared_mlp`; `mlp.shared_experts`), a SwiGLU of
moe_intermediate_size x num_shared_experts, or of intermediate_size when that product is 0 (transformers builds it
so); the dense MLPs and the shared expert carry biases with `mlp_bias`. The names transformers saves and those of
its modules are both read. enable_moe_fp32_combine changes nothing in float32; the multi-token-prediction layer
of the released checkpoint (`model.layers.80`) is not run, as transformers does not build it."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, aliased, check_decoder, positive_int, positive_number, refuse_act
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing, mlp_kinds

ALIASES = {"num_local_experts": "num_experts"}          # transformers' attribute_map


@dataclass(kw_only=True)
class HyV3Config(DecoderConfig):
    vocab_size: int = 120832
    hidden_size: int = 4096
    intermediate_size: int = 13312
    num_hidden_layers: int = 80
    num_attention_heads: int = 64
    num_key_value_heads: int | None = 8
    head_dim: int | None = 128
    max_position_embeddings: int = 131072
    rms_norm_eps: float = 1e-5
    rope_theta: float = 11158840.0
    attention_bias: bool = False
    mlp_bias: bool = False
    num_experts: int = 192
    num_experts_per_tok: int = 8
    num_shared_experts: int = 1
    moe_intermediate_size: int = 1536
    router_scaling_factor: float = 2.826
    mlp_layer_types: list | None = None
    model_type: str = "hy_v3"

    _REQUIRED = ()
    _IGNORED = MOE_TRAINING_ONLY | {"enable_moe_fp32_combine"}     # a cast, nothing in float32

    @classmethod
    def from_dict(cls, d: dict):
        return super().from_dict(aliased(d, ALIASES) if isinstance(d, dict) else d)

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "hy_v3", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "router_scaling_factor"),
                      ("tie_word_embeddings", "attention_bias", "mlp_bias"))
        check_routing(self)
        positive_int(self, "moe_intermediate_size")
        positive_number(self, "router_scaling_factor")
        n = self.num_shared_experts
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"config: num_shared_experts must be a non-negative integer, got {n!r}")
        self.sparse()

    def sparse(self) -> list[bool]:
        return mlp_kinds(self, lambda i: i == 0)

    def shared_width(self) -> int:
        return self.moe_intermediate_size * self.num_shared_experts or self.intermediate_size


def _either(t, p: str, saved: str, module: str, probe: str = ".weight") -> str:
    """Under layer prefix p, the name transformers saves (its conversion mapping's source) when the file has
    p + saved + probe, else its module's."""
    return saved if t.has(p + saved + probe) else module


def build(cfg: HyV3Config, t):
    rope, sparse, F = default_rope(cfg), cfg.sparse(), cfg.shared_width()

    def moe_for(i, p):
        if not sparse[i]:
            return None
        shared = _either(t, p, "mlp.shared_mlp", "mlp.shared_experts", ".up_proj.weight")
        m = moe_weights(t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                        inter=cfg.moe_intermediate_size, norm_topk=True,
                        router=_either(t, p, "mlp.router.gate", "mlp.gate"), experts="mlp.experts", shared=shared,
                        shared_inter=F)
        m.scoring, m.norm_eps, m.routed_scale = "sigmoid", 1e-20, float(cfg.router_scaling_factor)
        m.sel_bias = t.vec(p + _either(t, p, "mlp.expert_bias", "mlp.e_score_correction_bias", ""), (cfg.num_experts,))
        if cfg.mlp_bias:
            m.shared_b = tuple(t.vec(f"{p}{shared}.{n}.bias", (w,)) for n, w in (("gate_proj", F), ("up_proj", F),
                                                                              ("down_proj", cfg.hidden_size)))
        return m

    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                      mlp_bias=cfg.mlp_bias, qk_norm="head", rope_for=lambda i: rope, moe_for=moe_for,
                      context_length=rope.context_length)


Config = HyV3Config
