"""Solar Open (`solar_open`, Upstage's Solar-Open-100B): transformers 5 writes it as GLM-4.5's model (glm4_moe) with
Llama's attention, a thin variant Petit runs with glm4_moe's block. What differs from glm4_moe:

- every layer routes to experts: SolarOpenConfig has no `first_k_dense_replace`, no dense MLP and no
  `intermediate_size`, no `use_qk_norm` and no MTP layers (transformers makes each of them an AttributeError, so a
  config.json that sets one is not read by it: reported as unknown here, unless it says what Solar Open does);
- RoPE over whole heads (Llama's apply_rotary_pos_emb with rope_parameters' `partial_rotary_factor`, default 1; a
  smaller factor cannot run in transformers: refused), RoPE base 1e6 by default;
- `num_local_experts` is an alias of `n_routed_experts`.
The router (sigmoid scores, `e_score_correction_bias`, top-2-sum groups, renormalised, x `routed_scaling_factor`) and
the shared experts are GLM-4.5's, under the same tensor names."""
import warnings
from dataclasses import dataclass

from petit.models.families.moe import glm4_moe
from petit.models.blocks.config import DECODER_REQUIRED

# keys SolarOpenConfig does not have (transformers: AttributeError), with the value Solar Open computes with
FIXED = {"first_k_dense_replace": 0, "use_qk_norm": False, "num_mtp_layers": 0}


@dataclass(kw_only=True)
class SolarOpenConfig(glm4_moe.Glm4MoeConfig):
    intermediate_size: int | None = None        # no dense MLP: the experts' widest MLP, for the scratch sizes
    vocab_size: int = 196608
    num_attention_heads: int = 64
    rope_theta: float = 1_000_000.0
    partial_rotary_factor: float = 1.0
    moe_intermediate_size: int = 1280
    first_k_dense_replace: int = 0
    num_mtp_layers: int = 0
    model_type: str = "solar_open"
    _REQUIRED = tuple(n for n in DECODER_REQUIRED if n not in ("intermediate_size", "vocab_size",
                                                                "num_attention_heads"))

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict):
            d = dict(d)
            if "num_local_experts" in d:
                v = d.pop("num_local_experts")
                if d.get("n_routed_experts", v) != v:
                    raise ValueError(f"config: num_local_experts {v!r} and n_routed_experts "
                                     f"{d['n_routed_experts']!r} disagree")
                d["n_routed_experts"] = v
            odd = sorted(k for k, v in FIXED.items() if k in d and d[k] != v)
            if odd:
                warnings.warn(f"config: ignoring unknown key(s) {', '.join(odd)} (solar_open has none: every layer "
                              f"routes to experts, without q / k norms or MTP layers)", stacklevel=3)
                for k in odd:
                    d.pop(k)
        return super().from_dict(d)

    def _validate(self):
        if self.intermediate_size is None:
            self.intermediate_size = self.moe_intermediate_size * max(self.n_shared_experts, 1)
        if self.partial_rotary_factor != 1.0:
            raise ValueError(f"config: partial_rotary_factor {self.partial_rotary_factor!r} is not supported by the "
                             f"solar_open family: its attention (Llama's) rotates whole heads, and transformers "
                             f"cannot run a smaller factor either")
        super()._validate()


build = glm4_moe.build
Config = SolarOpenConfig
