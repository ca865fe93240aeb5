"""The moe_a group of issue 30, each written from its transformers 5.25 modeling file: qwen3_5_moe_text (Qwen3.5's
hybrid block, Gated DeltaNet and gated full attention, with experts in every layer: softmax router, top-k always
renormalised, a shared expert behind a sigmoid gate) and qwen3_5_moe (its released multimodal wrapper, as Petit
converts it: the text model's flat config and names)."""
from trainer.reference.families.hybrid import qwen3_next


def qwen3_5_moe_text(cfg, names, family="qwen3_5_moe_text"):
    # Qwen3_5MoeSparseMoeBlock: every layer routes; Qwen3_5MoeTopKRouter always renormalises the top-k weights
    fixed = {k: v for k, v in cfg.items() if k not in ("mlp_only_layers", "decoder_sparse_step", "norm_topk_prob")}
    fixed.update(decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True,
                 num_experts=cfg.get("num_experts", 256))
    return qwen3_next(fixed, names, family)


def qwen3_5_moe(cfg, names):
    return qwen3_5_moe_text(cfg, names, "qwen3_5_moe")


FAMILIES = {"qwen3_5_moe_text": qwen3_5_moe_text, "qwen3_5_moe": qwen3_5_moe}
