"""Qwen4-Exp's text config (`qwen4_exp_text`; the family: qwen4_exp_text.py): Qwen3.5-MoE's fields with the
hyper-connections' streams, the PLE layers' n-gram embeddings and the attention layers' QSA indexer, and their
checks."""
from dataclasses import dataclass, field

from petit.models.blocks.config import positive_int
from petit.models.families.hybrid import qwen3_5_moe_text
from petit.models.families.hybrid import qwen4_exp_ple as ple


QSA = ("indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget", "indexer_compress_ratio")
HC_MAX = 16                     # kernels/hc.c's largest stream count


@dataclass(kw_only=True)
class Qwen4ExpTextConfig(qwen3_5_moe_text.Qwen35MoeTextConfig):
    num_experts: int = 512
    num_experts_per_tok: int = 10
    norm_topk_prob: bool = True
    hc_count: int = 4
    hc_lowrank: int = 320
    ple_layer_ids: list = field(default_factory=list)
    ple_embed_dim: int | None = None
    ple_conv_kernel_size: int = 4
    ngram_size: int = 3
    heads_per_ngram: int = 8
    ngram_vocab_size_base: int = 20_000_000
    make_ngram_vocab_size_divisible_by: int = 128
    seed: int = 1234
    split_ngram_parts: int = 512
    indexer_n_heads: int | None = None
    indexer_kv_heads: int | None = None
    indexer_head_dim: int | None = None
    indexer_budget: int | None = None
    indexer_compress_ratio: int | None = None
    output_gate_type: str | None = None
    eos_token_id: int | list | None = None          # PLE: the token an n-gram does not reach past
    model_type: str = "qwen4_exp_text"
    # transformers' derived count of conv states a layer's cache keeps (3 with PLE): nothing to read
    _IGNORED = qwen3_5_moe_text.Qwen35MoeTextConfig._IGNORED | {"number_of_conv_states"}
    _KINDS = ("linear_attention", "indexed_attention", "full_attention")
    _NOT_READ = ("intermediate_size", "mlp_only_layers", "decoder_sparse_step")

    def _validate(self):
        topk = self.norm_topk_prob
        super()._validate()
        self.norm_topk_prob = bool(topk)            # read here (Qwen3.5-MoE's class always renormalises)
        self.types = ["indexed_attention" if k == "full_attention" else k for k in self.types]
        if not isinstance(self.hc_count, int) or not 2 <= self.hc_count <= HC_MAX:
            raise ValueError(f"config: hc_count must be an integer in 2..{HC_MAX}, got {self.hc_count!r}")
        positive_int(self, "hc_lowrank")
        self.ple_layer_ids = sorted(set(self.ple_layer_ids or []))
        self.ple_embed_dim = self.ple_embed_dim or self.hidden_size
        eos = self.eos_token_id
        self.ple_eos = eos[0] if isinstance(eos, list) and eos else None if isinstance(eos, list) else eos
        if self.ple_layer_ids:
            ple.check(self)
        if (self.output_gate_type or self.hidden_act) != "silu":
            raise ValueError(f"config: qwen4_exp_text: output_gate_type {self.output_gate_type!r} is not supported "
                             "(the linear attention's gated norm is silu here)")
        if "indexed_attention" in self.types:
            missing = [k for k in QSA if getattr(self, k) is None]
            if missing:
                raise ValueError(f"config: qwen4_exp_text: attention layers need the QSA indexer's "
                                 f"{', '.join(missing)}")
            positive_int(self, *QSA)
            if self.indexer_budget % self.indexer_compress_ratio:
                raise ValueError("config: indexer_budget must be a multiple of indexer_compress_ratio")
            if self.indexer_kv_heads != 1:
                raise ValueError(f"config: qwen4_exp_text: indexer_kv_heads must be 1 (QSA's one key head), got "
                                 f"{self.indexer_kv_heads}")
            if not self.rotary_dim <= self.indexer_head_dim <= self.num_key_value_heads * self.head_dim:
                raise ValueError(f"config: indexer_head_dim {self.indexer_head_dim} must be at least the "
                                 f"{self.rotary_dim} rotated values (the indexer rotates as the heads do) and at most "
                                 f"num_key_value_heads x head_dim {self.num_key_value_heads * self.head_dim} "
                                 "(its keys' cache rows)")
