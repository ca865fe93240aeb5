"""Ling 3 (inclusionAI's Ling-3.0-Flash, `bailing_hybrid`): kimi_linear's model
(petit/models/families/hybrid/kimi_linear.py: Kimi Delta Attention in the `linear_attention` layers, DeepSeek's latent
attention in the `full_attention` ones, a SwiGLU MLP in the first `first_k_dense_replace` layers, DeepSeek-V3's routed
experts and shared experts after) with:

- KDA's forget and output gates full rank (`f_proj`, `g_proj`: Kimi's are low-rank products) and the forget gate
  bounded when `kda_safe_gate` (the default): per key channel exp(kda_lower_bound sigmoid(exp(A_log) (f + dt_bias))),
  else Kimi's exp(-exp(A_log) softplus(f + dt_bias)) (pt_mamba.kda_lower_bound); one conv over q | k | v;
- the latent attention's rope part rotated on adjacent pairs (`rope_theta` 6e6; yarn's mscale in the scale as
  DeepSeek-V3's), each head's output times sigmoid(g_proj x) before o_proj (Mla.gate, one a head);
- group-limited routing (`num_expert_group`, `topk_group`: the other groups' experts -inf) and Step3p7's SwiGLU clamp
  after the activation, per layer: the experts' min(silu(gate), l) clamp(up, -l, l), l from
  `expert_swiglu_limit_list`, the shared expert's from `share_expert_swiglu_limit_list` (0: none; the dense MLPs
  never);
- `layer_types` from `layer_group_size` (the last layer of each group full), the KDA sizes from `head_dim`,
  `num_attention_heads` and `short_conv_kernel_size` as transformers derives them; the multi-token-prediction layers
  (`num_nextn_predict_layers`) are not run, as transformers builds none.

The released files' names (model.word_embeddings, attention.* with attention.dense, q / k / v_conv1d, mlp.gate.
expert_bias), which transformers 5.25 renames at load and writes back at save, or the modules' are read."""
from dataclasses import dataclass

import numpy as np

from petit.models.families.hybrid import kimi_linear

from petit.models.blocks import deepseek_common as dc
from petit.models.blocks.common import Renamed, default_rope
from petit.models.families.hybrid.kimi_linear import KimiLinearConfig, _kda_dims

# the released names -> transformers' module names (its conversion mapping, which save_pretrained undoes)
SAVED = (("model.word_embeddings.", "model.embed_tokens."), (".attention.", ".self_attn."),
         (".self_attn.dense.", ".self_attn.o_proj."), (".self_attn.forget_gate.", ".self_attn."),
         ("mlp.gate.expert_bias", "mlp.gate.e_score_correction_bias"))
DERIVED = {"linear_head_dim": "head_dim", "linear_num_heads": "num_attention_heads",
           "linear_conv_kernel_dim": "short_conv_kernel_size"}


@dataclass(kw_only=True)
class BailingHybridConfig(KimiLinearConfig):
    vocab_size: int = 157184
    hidden_size: int = 2560
    intermediate_size: int = 6144
    num_hidden_layers: int = 42
    model_max_length: int = 262144
    rms_norm_eps: float = 1e-6
    rope_theta: float = 6_000_000.0
    head_dim: int | None = 128
    kda_safe_gate: bool = True
    kda_lower_bound: float = -5.0
    short_conv_kernel_size: int = 4
    layer_group_size: int = 6
    moe_intermediate_size: int = 768
    num_experts: int = 512
    routed_scaling_factor: float = 2.5
    num_expert_group: int = 8
    topk_group: int | None = 4
    first_k_dense_replace: int = 2
    expert_swiglu_limit_list: list | None = None
    share_expert_swiglu_limit_list: list | None = None
    linear_head_dim: int | None = None              # derived (transformers overwrites a saved one)
    linear_num_heads: int | None = None
    linear_conv_kernel_dim: int | None = None
    model_type: str = "bailing_hybrid"
    _IGNORED = (KimiLinearConfig._IGNORED - {"head_dim"}) | {"num_nextn_predict_layers", "mtp_loss_scaling_factor"}
    _GROUPED = True
    _MOE = ("mlp", ("gate_proj", "up_proj", "down_proj"))
    ALIASES = dict(KimiLinearConfig.ALIASES, num_mtp_layers="num_nextn_predict_layers",
                   swiglu_limits="expert_swiglu_limit_list", swiglu_limits_shared="share_expert_swiglu_limit_list")

    def _validate(self):
        for name, source in DERIVED.items():       # BailingHybridConfig.__post_init__ sets them from these
            given, v = getattr(self, name), getattr(self, source)
            if given is not None and given != v:
                raise ValueError(f"config: {name} {given} but {source} {v}: transformers 5.25 takes {name} from "
                                 f"{source} (a config it saved from a model whose head_dim is not qk_rope_head_dim "
                                 f"holds qk_rope_head_dim there, and transformers cannot load it either)")
            setattr(self, name, v)
        n = self.num_hidden_layers
        for name in ("expert_swiglu_limit_list", "share_expert_swiglu_limit_list"):
            v = getattr(self, name)
            if v is None:
                setattr(self, name, [0.0] * n)
            elif not isinstance(v, list) or len(v) != n or any(isinstance(x, bool) or not isinstance(x, (int, float))
                                                               or x < 0 for x in v):
                raise ValueError(f"config: {name} must list {n} limits >= 0 (0: none), got {v!r}")
        if not isinstance(self.kda_lower_bound, (int, float)) or self.kda_lower_bound >= 0:
            raise ValueError(f"config: kda_lower_bound must be a negative number, got {self.kda_lower_bound!r}")
        super()._validate()
        if self.num_expert_group and self.num_expert_group > 1 and (
                self.num_experts % self.num_expert_group or not 1 <= (self.topk_group or 0) <= self.num_expert_group):
            raise ValueError(f"config: num_experts {self.num_experts} in num_expert_group {self.num_expert_group} "
                             f"groups, topk_group {self.topk_group} of them: not a valid grouping")

    def _mla_rope(self):
        return default_rope(self, dim=self.qk_rope_head_dim, interleaved=True)

    def _default_layer_types(self) -> list:
        g = self.layer_group_size
        return ["full_attention" if (i + 1) % g == 0 else "linear_attention" for i in range(self.num_hidden_layers)]


def module_name(name: str) -> str:
    for saved, module in SAVED:
        name = name.replace(saved, module)
    return name


def hf_tensors(cfg: BailingHybridConfig, ckpt) -> dict:
    """kimi_linear's derived tensors (the latent attention's, KDA's joined conv) over the module names; KDA's in_proj
    joined from the full-rank q | k | v | g | b | f rows, A_log as kimi_linear reads it; every other tensor under its
    module name."""
    v = Renamed(ckpt, module_name)
    out = v.entries(kimi_linear.hf_tensors(cfg, v))
    H, _, w = _kda_dims(cfg)
    for i, kind in enumerate(cfg.layer_types):
        a = f"model.layers.{i}.self_attn."
        if kind != "linear_attention" or a + "q_proj.weight" not in v:
            continue
        if a + "conv1d.weight" in v:               # the modules' one conv, not kimi_linear's three
            out.pop(a + "conv1d.weight")
        parts = [a + n + ".weight" for n in ("q_proj", "k_proj", "v_proj", "g_proj", "b_proj", "f_proj")]
        out[a + "in_proj.weight"] = ((4 * w + H + w, cfg.hidden_size), lambda ps=parts: np.concatenate(
            [v.f32(x) for x in ps]), [v.stored[x] for x in parts])
        out[a + "A_log"] = ((1, 1, H, 1), lambda n=a + "A_log": v.f32(n).reshape(1, 1, H, 1), [v.stored[a + "A_log"]])
    return v.aliases(out)


def build(cfg: BailingHybridConfig, t):
    dec = kimi_linear.build(cfg, t)
    H, D = cfg.num_attention_heads, cfg.hidden_size
    for i, L in enumerate(dec.layers):
        if L.mamba is not None:
            L.mamba.kda_lower_bound = float(cfg.kda_lower_bound) if cfg.kda_safe_gate else 0.0
        else:
            L.mla.gate = t.weight(f"model.layers.{i}.self_attn.g_proj.weight", (H, D))     # one a head
        if L.moe is not None:
            m = L.moe
            if (cfg.num_expert_group or 1) > 1:
                m.n_group, m.topk_group = cfg.num_expert_group, cfg.topk_group
            m.swiglu_limit, m.limit_after_act = float(cfg.expert_swiglu_limit_list[i]), True
            m.sh_swiglu_limit = float(cfg.share_expert_swiglu_limit_list[i])
    dec.arch.attn_scale = dc.attention_scale(cfg, yarn_mscale=True)
    dec.arch.context_length = cfg._mla_rope().context_length
    return dec


Config = BailingHybridConfig
