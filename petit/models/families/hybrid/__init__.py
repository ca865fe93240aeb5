"""Hybrids: attention layers beside a recurrent or linear-attention mixer (blocks/ssm.py's Mamba, gated
DeltaNet, short convolutions, lightning attention, Griffin's RG-LRU), in a per-layer pattern or shared blocks."""

# model_type -> its module in this folder
MODEL_TYPES = {
    "bailing_hybrid": "bailing_hybrid",
    "bamba": "bamba",
    "falcon_h1": "falcon_h1",
    "granitemoehybrid": "granitemoehybrid",
    "jamba": "jamba",
    "kimi_linear": "kimi_linear",
    "lara_mini": "lara_mini",
    "lfm2": "lfm2",
    "lfm2_moe": "lfm2_moe",
    "lfm3": "lfm3",
    "minimax": "minimax",
    "nemotron_h": "nemotron_h",
    "olmo_hybrid": "olmo_hybrid",
    "qwen3_5_moe_text": "qwen3_5_moe_text",
    "qwen3_5_text": "qwen3_5_text",
    "qwen3_next": "qwen3_next",
    "qwen4_exp_text": "qwen4_exp_text",
    "recurrent_gemma": "recurrent_gemma",
    "zamba": "zamba",
    "zamba2": "zamba2",
}

# the modules here that are part of a family, not one: module -> the modules of its family that import it
HELPERS = {
    "falcon_h1_config": ("falcon_h1",),
    "minimax_config": ("minimax",),
    "nemotron_h_config": ("nemotron_h",),
    "olmo_hybrid_config": ("olmo_hybrid",),
    "qwen3_next_config": ("qwen3_next",),
    "recurrent_gemma_config": ("recurrent_gemma",),
    "zamba_config": ("zamba",),
    "zamba2_config": ("zamba2",),
    "kimi_linear_config": ("kimi_linear",),
    "qwen4_exp_config": ("qwen4_exp_text",),
    "qwen4_exp_decoder": ("qwen4_exp_text",),
    "qwen4_exp_ngram": ("qwen4_exp_ple",),
    "qwen4_exp_ple": ("qwen4_exp_config", "qwen4_exp_decoder", "qwen4_exp_text"),
}
