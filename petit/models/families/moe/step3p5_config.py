"""The config of Step 3.5 / 3.7's language model (petit/models/families/moe/step3p5.py): transformers 5.25's
Step3p7TextConfig, its legacy keys read as its __post_init__ reads them."""
from dataclasses import dataclass

from petit.models.blocks.common import layer_types
from petit.models.blocks.config import DecoderConfig, check_decoder, positive_int, positive_number, refuse_act
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing
from petit.models.blocks.rope_config import RopeByType

ALIASES = {"num_local_experts": "n_routed_experts", "num_attention_groups": "num_key_value_heads",
           "moe_num_experts": "n_routed_experts", "moe_top_k": "num_experts_per_tok",
           "share_expert_dims": "share_expert_dim", "num_mtp_layers": "num_nextn_predict_layers"}


def _legacy(d: dict) -> dict:
    """transformers' Step3p7TextConfig.__post_init__ on the release's keys: the per-layer lists padded with the MTP
    layers trimmed, `moe_layers_enum` -> mlp_layer_types, `attention_other_setting` -> num_sliding_attention_heads,
    per-layer `rope_theta` / `partial_rotary_factors` (and `rope_scaling` on the full layers) -> rope_parameters."""
    d = dict(d)
    for old, new in ALIASES.items():
        if old in d:
            d.setdefault(new, d.pop(old))
    n, mtp = d.get("num_hidden_layers"), d.get("num_nextn_predict_layers") or 0
    if not isinstance(n, int):
        return d
    for k in ("layer_types", "mlp_layer_types", "swiglu_limits", "swiglu_limits_shared", "rope_theta",
              "partial_rotary_factors"):
        if mtp and isinstance(d.get(k), list) and len(d[k]) == n + mtp:
            d[k] = d[k][:n]
    enum = d.pop("moe_layers_enum", None)
    if d.get("mlp_layer_types") is None:
        items = (enum.split(",") if isinstance(enum, str) else enum) if enum is not None else None
        sparse = {int(i) for i in items if str(i).strip()} if items is not None else set(range(3, n))
        d["mlp_layer_types"] = ["sparse" if i in sparse else "dense" for i in range(n)]
    other = d.pop("attention_other_setting", None)
    if d.get("num_sliding_attention_heads") is None and other:
        d["num_sliding_attention_heads"] = other.get("num_attention_heads", d.get("num_attention_heads", 64))
    theta, prf, scaling = d.pop("rope_theta", None), d.pop("partial_rotary_factors", None), d.pop("rope_scaling", None)
    if d.get("rope_parameters") is None and (theta is not None or prf or scaling):
        types = d.get("layer_types") or ["full_attention"] * n
        theta = theta if isinstance(theta, list) else [10000.0 if theta is None else theta] * n
        rp = {}
        for kind in set(types):
            i = types.index(kind)
            rp[kind] = {"rope_type": "default", "rope_theta": theta[i], **(
                {"partial_rotary_factor": prf[i]} if prf else {})}
        if scaling and "full_attention" in rp:
            rp["full_attention"].update(scaling)
        d["rope_parameters"] = rp
    return d


@dataclass(kw_only=True)
class Step3p5Config(RopeByType, DecoderConfig):
    vocab_size: int = 128815
    hidden_size: int = 4096
    intermediate_size: int = 11264
    num_hidden_layers: int = 45
    num_attention_heads: int = 64
    num_key_value_heads: int | None = 8
    head_dim: int | None = 128
    max_position_embeddings: int = 128000
    rms_norm_eps: float = 1e-5
    sliding_window: int | None = None
    layer_types: list | None = None
    rope_types: dict | None = None          # Petit's key: transformers 5's rope_parameters, per layer type
    num_sliding_attention_heads: int | None = None
    per_layer_config: dict | None = None
    query_pre_attn_scalar: float | None = None
    attention_bias: bool = False            # true refused (_refuse)
    mlp_layer_types: list | None = None
    n_routed_experts: int = 288
    num_experts_per_tok: int = 8
    moe_intermediate_size: int = 1280
    share_expert_dim: int = 1280
    moe_router_scaling_factor: float = 1.0
    swiglu_limits: list | None = None
    swiglu_limits_shared: list | None = None
    model_type: str = "step3p5"
    _REQUIRED = ()
    # transformers reads neither bias of the MLPs (mlp_bias) nor runs the MTP layers
    _IGNORED = MOE_TRAINING_ONLY | {"mlp_bias", "num_nextn_predict_layers", "mtp_layer_types", "mtp_mlp_layer_types"}
    _ROPE_DEFAULT = {k: {"rope_type": "default", "rope_theta": 10000.0} for k in ("full_attention",
                                                                                 "sliding_attention")}

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(_legacy(d) if isinstance(d, dict) else d)

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), cls.model_type, "silu")
        if d.get("attention_bias"):
            raise ValueError(f"config: attention_bias true is not supported by the {cls.model_type} family "
                             f"(transformers' Step3p7Attention builds q / k / v / o biases no checkpoint has)")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "moe_router_scaling_factor"), ("tie_word_embeddings",), window=True)
        check_routing(self, "n_routed_experts")
        positive_int(self, "moe_intermediate_size", "share_expert_dim")
        n = self.num_hidden_layers
        if self.query_pre_attn_scalar is None:
            self.query_pre_attn_scalar = self.head_dim
        positive_number(self, "query_pre_attn_scalar")
        if not isinstance(self.mlp_layer_types, list) or len(self.mlp_layer_types) != n or \
                any(t not in ("dense", "sparse") for t in self.mlp_layer_types):
            raise ValueError(f"config: mlp_layer_types must list {n} values of dense / sparse, got "
                             f"{self.mlp_layer_types!r}")
        for name in ("swiglu_limits", "swiglu_limits_shared"):
            v = getattr(self, name)
            if v is None:
                setattr(self, name, [0.0] * n)
            elif not isinstance(v, list) or len(v) != n or any(
                    x is not None and (isinstance(x, bool) or not isinstance(x, (int, float)) or x < 0) for x in v):
                raise ValueError(f"config: {name} must list {n} limits >= 0 (0 / null: none), got {v!r}")
        for i, kind in enumerate(self.mlp_layer_types):
            if kind == "dense" and self.swiglu_limits_shared[i]:
                raise ValueError(f"config: swiglu_limits_shared[{i}] {self.swiglu_limits_shared[i]!r} clamps the "
                                 f"dense layer {i}'s SwiGLU (transformers' Step3p7MLP reads it there), which the "
                                 f"{self.model_type} family does not run: no dense MLP of Petit clamps after its "
                                 f"activation")
        if self.num_sliding_attention_heads is None:
            self.num_sliding_attention_heads = self.num_attention_heads
        heads = self.heads()
        if any(isinstance(h, bool) or not isinstance(h, int) or h < 1 or h % self.num_key_value_heads for h in heads):
            raise ValueError(f"config: the layers' query heads {heads} must be positive multiples of "
                             f"num_key_value_heads {self.num_key_value_heads}")
        self.ropes()

    def types(self) -> list[str]:
        return layer_types(self, lambda i: "full_attention")

    def heads(self) -> list[int]:
        """Each layer's query heads: a saved per_layer_config's (transformers reads it on reload), else the sliding
        layers' num_sliding_attention_heads and the full layers' num_attention_heads."""
        types, plc = self.types(), self.per_layer_config
        if plc is None:
            return [self.num_sliding_attention_heads if t == "sliding_attention" else self.num_attention_heads
                    for t in types]
        if not isinstance(plc, dict) or any(not isinstance(v, dict) or set(v) - {"num_attention_heads"}
                                            for v in plc.values()):
            raise ValueError(f"config: per_layer_config may give each layer its num_attention_heads only, got {plc!r}")
        return [plc.get(str(i), plc.get(i, {})).get("num_attention_heads", self.num_attention_heads)
                for i in range(self.num_hidden_layers)]
