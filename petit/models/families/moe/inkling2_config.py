"""Inkling 2's configs (issue 36, fam36l: `inkling2_text`, `inkling2_loop_text`) on what the Inkling families share
(inkling_config.py's InklingShared): their own fields, defaults and rules."""
from dataclasses import dataclass

from petit.models.blocks.config import positive_int, positive_number
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY
from petit.models.families.moe.inkling_config import ALIASES, InklingShared


@dataclass(kw_only=True)
class Inkling2TextConfig(InklingShared):
    """Inkling 2 (modeling_inkling2.py): every MLP routed (no shared experts), the L2 clips, the attention residuals
    over blocks of n_layers_per_attn_res_block layers, soft caps on the experts' activation and on the logits."""
    unpadded_vocab_size: int | None = 200058
    hidden_size: int = 4608
    num_hidden_layers: int = 48
    num_attention_heads: int = 48
    swa_num_attention_heads: int = 48
    swa_num_key_value_heads: int = 8
    sliding_window_size: int = 1024
    log_scaling_n_floor: int | None = 128000
    max_position_embeddings: int = 1048576
    moe_intermediate_size: int = 2304
    n_routed_experts: int = 384
    num_experts_per_tok: int = 8
    qk_l2_clip_threshold: float = 22.627416997969522
    rel_l2_clip_threshold: float = 8.0
    n_layers_per_attn_res_block: int = 6
    mlp_gate_softcap: float = 4.0
    mlp_up_softcap: float = 25.0
    final_logit_softcapping: float = 30.0
    scoring_func: str = "sigmoid"
    model_type: str = "inkling2_text"
    _IGNORED = MOE_TRAINING_ONLY | {"number_of_conv_states"}
    _ALIASES = dict(ALIASES, intermediate_size="moe_intermediate_size", routed_scaling_factor="route_scale")

    @classmethod
    def _refuse(cls, d):
        super()._refuse(d)
        if d.get("scoring_func", "sigmoid") != "sigmoid":
            raise ValueError(f"config: scoring_func {d['scoring_func']!r} is not supported (Petit runs Inkling 2's "
                             f"sigmoid router)")

    def _validate(self):
        super()._validate()
        positive_number(self, "qk_l2_clip_threshold", "rel_l2_clip_threshold", "mlp_gate_softcap", "mlp_up_softcap",
                        "final_logit_softcapping")
        positive_int(self, "n_layers_per_attn_res_block")

    def boundary(self, i: int) -> bool:
        """Whether layer i starts a block of the attention residuals."""
        return i % self.n_layers_per_attn_res_block == 0

    def blocks_before(self, i: int) -> int:
        """The block states layer i's inputs read (each block's input, from layer 0's: the embeddings)."""
        return sum(self.boundary(j) for j in range(i))


@dataclass(kw_only=True)
class Inkling2LoopTextConfig(Inkling2TextConfig):
    """Inkling 2 with looped layers (modeling_inkling2_loop.py): layers loop_layer_index_start ..
    loop_layer_index_end - 1 run loop_num_passes times, the passes after the first mixing messages from the one
    before into their inputs (gates of rank loop_gate_rank); transformers' `loop_config` (core_start, core_end,
    num_passes, gate_rank) is read too."""
    hidden_size: int = 2304
    num_hidden_layers: int = 24
    num_attention_heads: int = 24
    swa_num_attention_heads: int = 24
    log_scaling_n_floor: int | None = 8192
    moe_intermediate_size: int = 1152
    n_routed_experts: int = 128
    loop_layer_index_start: int = 6
    loop_layer_index_end: int = 18
    loop_num_passes: int = 3
    loop_gate_rank: int = 64
    model_type: str = "inkling2_loop_text"
    _LOOP = {"core_start": "loop_layer_index_start", "core_end": "loop_layer_index_end",
             "num_passes": "loop_num_passes", "gate_rank": "loop_gate_rank"}

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and isinstance(d.get("loop_config"), dict):
            d = dict(d, **{cls._LOOP[k]: v for k, v in d["loop_config"].items() if k in cls._LOOP})
            d.pop("loop_config")
        return super().from_dict(d)

    def _validate(self):
        super()._validate()
        positive_int(self, "loop_layer_index_start", "loop_layer_index_end", "loop_num_passes", "loop_gate_rank")
        s, e, b = self.loop_layer_index_start, self.loop_layer_index_end, self.n_layers_per_attn_res_block
        if s % b or e % b:
            raise ValueError(f"config: loop_layer_index_start {s} and loop_layer_index_end {e} must be multiples of "
                             f"n_layers_per_attn_res_block {b} (transformers refuses them too)")
        if not s < e <= self.num_hidden_layers:
            raise ValueError(f"config: the looped layers {s}..{e - 1} must be a run of the {self.num_hidden_layers} "
                             f"layers")

    def runs(self) -> list:
        """The layers in the order they run: (layer, pass), the looped ones once a pass."""
        s, e = self.loop_layer_index_start, self.loop_layer_index_end
        return [(i, 0) for i in range(s)] + [(i, p) for p in range(self.loop_num_passes) for i in range(s, e)] + \
            [(i, 0) for i in range(e, self.num_hidden_layers)]
