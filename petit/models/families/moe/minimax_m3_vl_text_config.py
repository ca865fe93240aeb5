"""The config of minimax_m3_vl_text.py's family: its fields with transformers' names and defaults, and their checks."""
import warnings
from dataclasses import dataclass

from petit.models.blocks.block_sparse import check_indexer
from petit.models.blocks.config import DecoderConfig, aliased, check_decoder, positive_int
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing


ATTN, MLP = ("full_attention", "minimax_m3_sparse"), ("dense", "sparse")


LEGACY = {"sparse_num_index_heads": "index_n_heads", "sparse_index_dim": "index_head_dim",
          "sparse_block_size": "index_block_size", "sparse_topk_blocks": "index_topk_blocks",
          "sparse_local_block": "index_local_blocks"}


@dataclass(kw_only=True)
class MiniMaxM3VLTextConfig(DecoderConfig):
    num_key_value_heads: int | None = 4
    head_dim: int | None = 128
    max_position_embeddings: int = 524288
    rms_norm_eps: float = 1e-6
    rope_theta: float = 5000000.0
    partial_rotary_factor: float = 1.0
    rotary_dim: int | None = None              # transformers 5.25 does not read it
    num_local_experts: int = 128
    num_experts_per_tok: int = 4
    dense_intermediate_size: int = 12288
    shared_intermediate_size: int = 3072
    routed_scaling_factor: float = 2.0
    swiglu_alpha: float = 1.702
    swiglu_limit: float = 7.0
    layer_types: list | None = None
    mlp_layer_types: list | None = None
    index_n_heads: int = 4
    index_head_dim: int = 128
    index_block_size: int = 128
    index_topk_blocks: int = 16
    index_local_blocks: int = 1
    model_type: str = "minimax_m3_vl_text"
    _IGNORED = MOE_TRAINING_ONLY

    @classmethod
    def from_dict(cls, d: dict):
        if isinstance(d, dict):
            d = aliased(d, {"num_experts": "num_local_experts"})
            sparse = d.pop("sparse_attention_config", None) or {}
            for legacy, flat in LEGACY.items():         # transformers: the legacy value wins
                if legacy in sparse:
                    d[flat] = sparse[legacy]
            if d.get("layer_types") is None and "sparse_attention_freq" in sparse:
                d["layer_types"] = [ATTN[bool(f)] for f in sparse["sparse_attention_freq"]]
            d.update({f"sparse_attention_config.{k}": v for k, v in sparse.items()
                      if k not in LEGACY and k != "sparse_attention_freq"})      # reported as unknown
            freq = d.pop("moe_layer_freq", None)
            if d.get("mlp_layer_types") is None and freq is not None:
                d["mlp_layer_types"] = [MLP[bool(f)] for f in freq]
        return super().from_dict(d)

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "partial_rotary_factor", "routed_scaling_factor"),
                      ("tie_word_embeddings",))
        check_routing(self, "num_local_experts")
        positive_int(self, "dense_intermediate_size", "shared_intermediate_size", "index_n_heads", "index_head_dim",
                     "index_block_size", "index_topk_blocks")
        n, hd = self.num_hidden_layers, self.head_dim
        for key, kinds in (("layer_types", ATTN), ("mlp_layer_types", MLP)):
            got = getattr(self, key) or [kinds[key == "mlp_layer_types"]] * n
            if not isinstance(got, list) or len(got) != n or any(k not in kinds for k in got):
                raise ValueError(f"config: {key} must list {n} values of {' / '.join(kinds)}, got {got!r}")
            setattr(self, key, got)
        self.rot = int(hd * self.partial_rotary_factor)
        if not 0 < self.rot <= hd or self.rot % 2:
            raise ValueError(f"config: partial_rotary_factor {self.partial_rotary_factor!r} gives {self.rot} rotated "
                             f"values of a {hd}-wide head (an even number, at least 2, is needed)")
        if self.rotary_dim is not None and self.rotary_dim != self.rot:
            warnings.warn(f"config: rotary_dim {self.rotary_dim} is not read: transformers 5.25 rotates head_dim x "
                          f"partial_rotary_factor = {self.rot} values of each head, and so does Petit", stacklevel=4)
        if (self.swiglu_alpha, self.swiglu_limit) != (1.702, 7.0):
            raise ValueError(f"config: swiglu_alpha {self.swiglu_alpha!r} / swiglu_limit {self.swiglu_limit!r}: the "
                             f"clamped SwiGLU runs with 1.702 / 7.0 only (gpt-oss's and MiniMax-M3's)")
        if "minimax_m3_sparse" in self.layer_types:
            check_indexer(self)
