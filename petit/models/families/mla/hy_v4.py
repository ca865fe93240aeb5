"""HY-V4 (Tencent's Hy4, `hy_v4`): GLM-5's model (petit/models/families/mla/glm_moe_dsa.py: DeepSeek's latent attention
with DeepSeek Sparse Attention, "shared" layers reusing the last full indexer's choice by `indexer_types`;
GLM-4.7-Flash's sigmoid + e_score_correction_bias routing, renormalised x `routed_scaling_factor`, shared experts; dense
layers by `mlp_layer_types`) inside DeepSeek-V4-style hyper-connections, with:

- the residual as `hc_mult` streams: before each block m = fn . X / rms(X) gives pre = sigmoid(m[:n] s0 + b) + eps
  and post = hc_magnitude sigmoid(m[n:] s1 + b) + eps; the block (its RMSNorm first) reads sum_j pre_j X_j and the
  streams become X + post y, no Sinkhorn stream mix (HC_PRE mode 2, kernels/hc.c); the hyper head collapses them
  before the final norm (petit/models/blocks/hy_v4_plan.py);
- an attention-sink logit a head in the sparse attention's softmax (pt_dsa_attention's sinks), and the heads' values
  times sigmoid(gate_proj x) before o_proj (Mla.gate from x, one a value);
- the indexer's key norm with `rms_norm_eps` and its RoPE on the LAST qk_rope_head_dim values of each head (adjacent
  pairs): its wq_b / wk rows and k_norm are permuted per head when read so that those values come first (dot
  products do not change), where the kernels rotate;
- the routed experts' SwiGLU clamp before the activation (gate <= `swiglu_limit`, up within it: GLM-5-Next's), the
  shared expert unclamped.

The released names (hc_pre.hc_*, learnable_sink_param, linear_gate; transformers 5.25 renames them at load and writes
them back at save, linear_gate also over the MLPs' gate_proj) or the modules' are read; the experts 3-D. The MTP layers
are not run (transformers builds none)."""
import re
from dataclasses import dataclass

import numpy as np

from petit.models.blocks import deepseek_common as dc
from petit.models.blocks.common import Renamed
from petit.models.blocks.config import positive_int, positive_number
from petit.models.families.mla.deepseek_v32 import DeepseekV32Config, build as build_v32
from petit.models.families.mla.deepseek_v4 import hc_weights
from petit.models.blocks.hy_v4_plan import HyV4Decoder
from petit.models.blocks.moe import split_experts

# transformers 5.25's conversion mapping for hy_v4, in its order: the released names -> the modules'
RENAMES = ((r"\.hc_pre\.hc_", ".hc_"), (r"\.learnable_sink_param", ".sinks"), (r"\.linear_gate", ".gate_proj"),
           (r"\.hc_attn_layer\.hc_(fn|base|scale)", r".attn_hc.\1"),
           (r"\.hc_mlp_layer\.hc_(fn|base|scale)", r".ffn_hc.\1"), (r"\.hc_head_(fn|base|scale)", r".hc_\1"))


def module_name(name: str) -> str:
    for pattern, repl in RENAMES:
        name = re.sub(pattern, repl, name)
    return name


@dataclass(kw_only=True)
class HYV4Config(DeepseekV32Config):
    vocab_size: int = 120832
    hidden_size: int = 2816
    intermediate_size: int = 6912
    moe_intermediate_size: int = 768
    num_hidden_layers: int = 34
    num_attention_heads: int = 32
    max_position_embeddings: int = 262144
    rms_norm_eps: float = 1e-5
    n_routed_experts: int | None = 256
    routed_scaling_factor: float = 2.827
    n_group: int | None = 1
    topk_group: int | None = 1
    kv_lora_rank: int = 512
    qk_nope_head_dim: int = 192
    v_head_dim: int = 256
    first_k_dense_replace: int = 1          # mlp_layer_types' default: the first layer dense
    index_n_heads: int = 16
    indexer_types: list | None = None
    hc_mult: int = 4
    hc_magnitude: float = 2.0
    hc_eps: float = 1e-6
    swiglu_limit: float = 10.0
    model_type: str = "hy_v4"
    _REQUIRED = ()
    _IGNORED = DeepseekV32Config._IGNORED | {"learnable_sink_init"}
    _INDEXER_INTERLEAVED = True             # on adjacent pairs (of the values put first when read)

    @property
    def index_norm_eps(self) -> float:
        return self.rms_norm_eps

    def _validate(self):
        self.num_key_value_heads = self.num_attention_heads     # as transformers' __post_init__
        n = self.num_hidden_layers
        if self.indexer_types is None:
            self.indexer_types = ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(n)]
        types = self.indexer_types
        if not isinstance(types, list) or len(types) != n or any(t not in ("full", "shared") for t in types) or \
                types[0] != "full":
            raise ValueError(f"config: indexer_types must list {n} values, each 'full' or 'shared', the first full, "
                             f"got {types!r}")
        positive_int(self, "hc_mult")
        if self.hc_mult > 16:
            raise ValueError(f"config: hc_mult {self.hc_mult} is above the 16 streams Petit's kernels hold")
        positive_number(self, "hc_magnitude", "swiglu_limit")   # transformers clamps whatever the limit's sign
        if isinstance(self.hc_eps, bool) or not isinstance(self.hc_eps, (int, float)) or self.hc_eps < 0:
            raise ValueError(f"config: hc_eps must be a number >= 0, got {self.hc_eps!r}")
        super()._validate()

    def shared_index(self, i: int) -> bool:
        return self.indexer_types[i] == "shared"


def rope_first(head: int, rope: int) -> np.ndarray:
    """The order of an indexer head's values with its rotated last `rope` ones first (as Petit's indexer reads them)."""
    return np.r_[head - rope:head, 0:head - rope]


def hf_tensors(cfg: HYV4Config, ckpt) -> dict:
    """The latent attention's derived matrices, the 3-D experts split, the indexer's rows permuted per head (the
    rotated last qk_rope_head_dim values first); every other renamed tensor under its module name."""
    v = Renamed(ckpt, module_name)
    out = v.entries(dc.hf_tensors(cfg, v))
    Hi, Di, D = cfg.index_n_heads, cfg.index_head_dim, cfg.hidden_size
    perm = rope_first(Di, cfg.qk_rope_head_dim)
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        if p + "mlp.experts.gate_up_proj" in v:
            out.update(v.entries(split_experts(v, p, cfg.n_routed_experts, cfg.moe_intermediate_size, D)))
        x = p + "self_attn.indexer."
        for name, shape, rows in (("wq_b.weight", (Hi * Di, cfg.q_lora_rank), Hi), ("wk.weight", (Di, D), 1),
                                  ("k_norm.weight", (Di,), 1), ("k_norm.bias", (Di,), 1)):
            if x + name in v:
                out[x + name] = (shape, lambda n=x + name, h=rows, s=shape: v.f32(n).reshape(h, Di, -1)[:, perm]
                                 .reshape(s), [v.stored[x + name]])
    return v.aliases(out)


def build(cfg: HYV4Config, t):
    n, D, H = cfg.hc_mult, cfg.hidden_size, cfg.num_attention_heads

    def decoder(arch, E, layers, final, head):
        hc = [tuple(hc_weights(t, f"model.layers.{i}.{w}_hc.", 2 * n, n * D, 2) for w in ("attn", "ffn"))
              for i in range(len(layers))]
        return HyV4Decoder(arch, E, layers, final, head, n=n, hc=hc, hc_head=hc_weights(t, "model.hc_head.hc_", n,
                                                                                         n * D, 1),
                           eps=cfg.hc_eps, norm_eps=cfg.rms_norm_eps, magnitude=cfg.hc_magnitude)
    dec = build_v32(cfg, t, decoder=decoder)
    for i, L in enumerate(dec.layers):
        a = f"model.layers.{i}.self_attn."
        L.sinks = t.vec(a + "sinks", (H,))
        L.mla.gate, L.mla.gate_width = t.weight(a + "gate_proj.weight", (H * cfg.v_head_dim, D)), 1
        if L.moe is not None:
            L.moe.swiglu_limit, L.moe.sh_swiglu_limit = float(cfg.swiglu_limit), 0.0
    return dec


Config = HYV4Config
