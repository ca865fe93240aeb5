"""The config of dots3_note_text.py's family: its fields with transformers' names and defaults, and their checks."""
from dataclasses import dataclass

from petit.models.families.mla import deepseek_v32
from petit.models.blocks.config import positive_int, positive_number


SWA = dict(num_attention_heads=64, num_key_value_heads=64, q_lora_rank=1024, kv_lora_rank=1024, head_dim=256,
           qk_nope_head_dim=192, v_head_dim=128)


KINDS = ("indexed_attention", "sliding_attention", "full_attention")
DIMS = ("num_attention_heads", "num_key_value_heads", "q_lora_rank", "kv_lora_rank", "head_dim", "qk_nope_head_dim",
        "qk_rope_head_dim", "v_head_dim")


def _normalize(d: dict) -> dict:
    """transformers' Dots3NoteTextConfig.__post_init__ / convert_rope_params_to_dict on a config dict."""
    d, n = dict(d), d.get("num_hidden_layers", 46)
    first, freq = d.pop("first_k_dense_replace", 1), d.pop("moe_layer_freq", 1)
    if d.get("mlp_layer_types") is None:
        d["mlp_layer_types"] = ["sparse" if i >= first and (bool(freq[i]) if isinstance(freq, list) else
                                                            i % freq == 0) else "dense" for i in range(n)]
    if "moe_shared_expert_intermediate_size" in d:
        d["shared_experts_intermediate_size"] = d.pop("moe_shared_expert_intermediate_size")
    use_dsa, sliding = d.pop("use_dsa", None if "per_layer_config" in d else True), d.pop("use_sliding_window", True)
    window = d.pop("sliding_window_size", 512)
    d["sliding_window"] = window if d.get("sliding_window") is None else d["sliding_window"]
    if d.get("layer_types") is None:
        full = "full_attention" if use_dsa is False else "indexed_attention"
        d["layer_types"] = [full if not sliding or i < 2 or i % 4 == 1 else "sliding_attention" for i in range(n)]
    if use_dsa is not None:
        old, new = ("full_attention", "indexed_attention") if use_dsa else ("indexed_attention", "full_attention")
        d["layer_types"] = [new if k == old else k for k in d["layer_types"]]
    swa = {k: d.pop("swa_" + k, v) for k, v in SWA.items()}
    swa["qk_rope_head_dim"] = d.pop("swa_qk_rope_head_dim", swa["head_dim"] - swa["qk_nope_head_dim"])
    if "per_layer_config" not in d:
        d["per_layer_config"] = {str(i): swa for i, k in enumerate(d["layer_types"]) if k == "sliding_attention"}
    rp, rs = d.pop("rope_parameters", None), d.pop("rope_scaling", None)
    thetas, got = {"rope_theta": d.get("rope_theta", 8e7), "swa_rope_theta": d.pop("swa_rope_theta", 5e4)}, {}
    rp = rp or rs or {}
    for kind, entry in (rp.items() if all(isinstance(v, dict) for v in rp.values()) else
                        [(k, rp) for k in set(d["layer_types"])]):
        if entry.get("rope_type", "default") != "default":
            raise ValueError(f"config: rope_parameters[{kind!r}] rope_type {entry['rope_type']!r}: the "
                             f"dots3_note_text family runs the default RoPE only")
        key = "swa_rope_theta" if kind == "sliding_attention" else "rope_theta"
        if got.setdefault(key, entry.get("rope_theta")) != entry.get("rope_theta"):
            raise ValueError("config: rope_parameters give the indexed and the full layers other thetas; Petit "
                             "keeps one for both (rope_theta)")
    return dict(d, **{**thetas, **got})


@dataclass(kw_only=True)
class Dots3NoteTextConfig(deepseek_v32.DeepseekV32Config):
    vocab_size: int = 152064
    hidden_size: int = 5120
    intermediate_size: int = 13824
    num_hidden_layers: int = 46
    num_attention_heads: int = 128
    num_key_value_heads: int | None = 128
    head_dim: int | None = 256
    max_position_embeddings: int = 524288
    rms_norm_eps: float = 1e-5
    q_lora_rank: int | None = 1024
    per_layer_config: dict | None = None
    sliding_window: int | None = 512
    rope_theta: float = 8e7
    swa_rope_theta: float = 5e4
    moe_intermediate_size: int = 1536
    shared_experts_intermediate_size: int = 1536
    n_group: int | None = 1
    topk_group: int | None = 1
    routed_scaling_factor: float = 1.0
    model_type: str = "dots3_note_text"
    _REQUIRED = ()
    _LAYER_TYPES = KINDS
    _INDEXER_INTERLEAVED = True             # GLM-5's indexer (GlmMoeDsaIndexer): adjacent pairs

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(_normalize(d) if isinstance(d, dict) else d)

    def _validate(self):
        if self.latent_norm_eps not in (None, self.rms_norm_eps):
            raise ValueError(f"config: latent_norm_eps {self.latent_norm_eps!r}: Dots 3's latent norms take "
                             f"rms_norm_eps ({self.rms_norm_eps!r})")
        self.latent_norm_eps = self.rms_norm_eps
        super()._validate()
        positive_int(self, "shared_experts_intermediate_size")
        positive_number(self, "swa_rope_theta")
        if "sliding_attention" in self.layer_types:
            positive_int(self, "sliding_window")
        self.kinds = {}
        for i, kind in enumerate(self.layer_types):
            own = (self.per_layer_config or {}).get(str(i), {})
            odd = sorted(set(own) - set(DIMS))
            if odd:
                raise ValueError(f"config: per_layer_config of layer {i} sets {', '.join(odd)}: Petit reads a layer's "
                                 f"attention sizes there ({', '.join(DIMS)})")
            sizes = {k: own.get(k, getattr(self, k)) for k in DIMS}
            if self.kinds.setdefault(kind, sizes) != sizes:
                raise ValueError(f"config: per_layer_config gives {kind} layers different sizes (transformers takes "
                                 f"one RoPE per layer type)")
        for kind, s in self.kinds.items():
            if s["num_key_value_heads"] != s["num_attention_heads"] or not s["q_lora_rank"]:
                raise ValueError(f"config: {kind} layers: num_key_value_heads must equal num_attention_heads and "
                                 f"q_lora_rank be set (transformers' Dots 3 requires both)")
            dr = s["qk_rope_head_dim"]
            if int(s["head_dim"] * (dr / s["head_dim"])) != dr or dr % 2:
                raise ValueError(f"config: {kind} layers rotate int(head_dim x qk_rope_head_dim / head_dim) = "
                                 f"{int(s['head_dim'] * (dr / s['head_dim']))} values, not qk_rope_head_dim {dr}")

    def layer_dims(self, i: int) -> tuple:
        s = self.kinds[self.layer_types[i]]
        return (s["num_attention_heads"], s["qk_nope_head_dim"], s["qk_rope_head_dim"], s["v_head_dim"],
                s["kv_lora_rank"], s["q_lora_rank"])
