"""Sarvam-30B (`sarvam_moe`): transformers 5.25 runs it as Glm4MoeForCausalLM (petit/models/families/moe/glm4_moe.py)
under a config of its own. What differs from GLM-4.5 is the spelling and the defaults, which this family reads:

- transformers' defaults for Sarvam (whole-head RoPE: partial_rotary_factor 1; theta 8e6; q / k norms on; 64-wide
  heads, 4 kv heads; 128 experts of 1024, top 6, one shared; routed_scaling_factor 2.5; eps 1e-6);
- the remote-code config's names, transformers' aliases of its own (`num_experts`, `num_local_experts`,
  `num_shared_experts`, `use_qkv_bias`, `num_mtp_layers`; given twice they must agree), the shared experts' width
  `moe_shared_expert_intermediate_size` (checked: n_shared_experts x moe_intermediate_size), and the remote keys
  transformers reads no further, each refused away from the value every release has (`REMOTE`);
- the checkpoints' tensor names (the remote code's, and what save_pretrained of transformers 5.25 writes back):
  `model.word_embeddings`, `attention.query_key_value` (q, k, v rows one after the other), `attention.dense`,
  `attention.query_layernorm` / `key_layernorm`, `mlp.gate.expert_bias`; `hf_tensors` hands them out under GLM's
  names (a checkpoint already under those is read as it is).
The multi-token-prediction layers (num_nextn_predict_layers) are not run: transformers builds none."""
import re
from dataclasses import dataclass

from petit.models.families.moe import glm4_moe
from petit.models.blocks.config import aliased
from petit.models.blocks.moe_config import shared_width

ALIASES = {"num_experts": "n_routed_experts", "num_local_experts": "n_routed_experts",
           "num_shared_experts": "n_shared_experts", "use_qkv_bias": "attention_bias",
           "num_mtp_layers": "num_nextn_predict_layers"}
# remote-code keys transformers 5.25 keeps but never reads: the value every released config has, else refused
REMOTE = {"use_bias": False, "use_rmsnorm": True, "moe_router_enable_expert_bias": True, "score_function": "sigmoid"}
# the remote code's names -> GLM's, in order (transformers' conversion_mapping for sarvam_moe, applied to stored names)
RENAMES = [(r"^model\.word_embeddings\.", "model.embed_tokens."), (r"\.attention\.", ".self_attn."),
           (r"\.self_attn\.dense\.", ".self_attn.o_proj."), (r"\.self_attn\.query_layernorm\.", ".self_attn.q_norm."),
           (r"\.self_attn\.key_layernorm\.", ".self_attn.k_norm."),
           (r"\.mlp\.gate\.expert_bias$", ".mlp.gate.e_score_correction_bias")]


@dataclass(kw_only=True)
class SarvamMoeConfig(glm4_moe.Glm4MoeConfig):
    num_key_value_heads: int | None = 4
    head_dim: int | None = 64
    max_position_embeddings: int = 131072
    rope_theta: float = 8000000.0
    rms_norm_eps: float = 1e-6
    partial_rotary_factor: float = 1.0
    use_qk_norm: bool = True
    moe_intermediate_size: int = 1024
    n_routed_experts: int = 128
    num_experts_per_tok: int = 6
    n_shared_experts: int = 1
    routed_scaling_factor: float = 2.5
    model_type: str = "sarvam_moe"
    # the remote code's: dropouts, the attention implementation, a Qwen2 leftover without a sliding window, the MTP
    # loss, the router's dtype (Petit routes in float32, as transformers does)
    _IGNORED = glm4_moe.Glm4MoeConfig._IGNORED | {"output_dropout", "attn_implementation", "max_window_layers",
                                                  "mtp_loss_scaling_factor", "router_dtype"}

    @classmethod
    def from_dict(cls, d):
        """Either spelling of each aliased key (both given must agree), the remote keys checked and dropped."""
        if isinstance(d, dict):
            d = aliased(d, ALIASES)
            for key, want in REMOTE.items():
                if (v := d.pop(key, want)) != want:
                    raise ValueError(f"config: {key} {v!r} is not supported by the {cls.model_type} family "
                                     f"(transformers ignores the key; every released checkpoint has {want!r})")
            shared_width(cls, d)
        return super().from_dict(d)


def glm_name(n: str) -> str:
    for pattern, repl in RENAMES:
        n = re.sub(pattern, repl, n)
    return n


def hf_tensors(cfg: SarvamMoeConfig, ckpt) -> dict:
    """The stored names under GLM's; the fused query_key_value's rows (and bias) split into q, k and v."""
    q, kv = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    spans = {"q_proj": (0, q), "k_proj": (q, q + kv), "v_proj": (q + kv, q + 2 * kv)}
    out = {}
    for n in ckpt.names():
        m = re.match(r"(.*)\.attention\.query_key_value\.(weight|bias)$", n)
        if m:
            shape = ckpt.info(n)[1]
            if shape[0] != q + 2 * kv:
                raise ValueError(f"tensor {n!r} has {shape[0]} rows, expected q {q} + k {kv} + v {kv}")
            for proj, (a, b) in spans.items():
                out[f"{m[1]}.self_attn.{proj}.{m[2]}"] = ((b - a, *shape[1:]), lambda n=n, a=a, b=b: ckpt.f32(n)[a:b],
                                                          (n,))
        elif (new := glm_name(n)) != n:
            out[new] = (ckpt.info(n)[1], lambda n=n: ckpt.f32(n), (n,))
    return out


build = glm4_moe.build
Config = SarvamMoeConfig
