"""Dense decoders with a layer layout of their own from before Llama's: GPT-2, GPT-J / GPT-NeoX, BLOOM, MPT,
OPT, Falcon, fairseq's (XGLM, BioGPT), Phi-1/2, StableLM, StarCoder 2...: LayerNorm (often with biases), fused or
biased projections, a plain MLP, learned, ALiBi or partly rotary positions; each builds its layers from the decoder
directly rather than from blocks/common.py's Llama builder."""

# model_type -> its module in this folder
MODEL_TYPES = {
    "biogpt": "biogpt",
    "bloom": "bloom",
    "codegen": "codegen",
    "ctrl": "ctrl",
    "falcon": "falcon",
    "gpt2": "gpt2",
    "gpt_bigcode": "gpt_bigcode",
    "gpt_neo": "gpt_neo",
    "gpt_neox": "gpt_neox",
    "gpt_neox_japanese": "gpt_neox_japanese",
    "gptj": "gptj",
    "kosmos_2_text_model": "kosmos_2_text_model",
    "mpt": "mpt",
    "openai-gpt": "openai_gpt",
    "opt": "opt",
    "persimmon": "persimmon",
    "phi": "phi",
    "stablelm": "stablelm",
    "starcoder2": "starcoder2",
    "xglm": "xglm",
}

# the modules here that are part of a family, not one: module -> the modules of its family that import it
HELPERS = {
    "falcon_config": ("falcon",),
}
