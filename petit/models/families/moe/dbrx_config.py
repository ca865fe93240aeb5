"""The config of dbrx.py's family: its fields with transformers' names and defaults, and their checks."""
from dataclasses import dataclass, field

from petit.models.blocks.config import ConfigMixin, boolean, positive_int, positive_number


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
