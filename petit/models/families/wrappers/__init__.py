"""Multimodal checkpoints whose language model is a family in another kind (a vision or audio tower beside it,
never run: blocks/wrapper.py) when the wrapper needs code of its own; the ones that need none are rows of
petit/models/multimodal_rows.py instead."""

# model_type -> its module in this folder
MODEL_TYPES = {
    "cosmos3_edge": "cosmos3_edge",
    "cosmos3_omni": "cosmos3_omni",
    "deepseek_ocr2": "deepseek_ocr2",
    "dots3_note": "dots3_note",
    "emu3": "emu3",
    "ernie4_5_vl_moe": "ernie4_5_vl_moe",
    "fuyu": "fuyu",
    "gemma3": "gemma3",
    "gemma3n": "gemma3n",
    "gemma4": "gemma4",
    "gemma4_unified": "gemma4_unified",
    "git": "git",  # GIT's text decoder (its image tower not run)
    "glm46v": "glm46v",
    "glm4v": "glm4v",
    "glm4v_moe": "glm4v_moe",
    "glm_ocr": "glm_ocr",
    "glmga": "glmga",
    "got_ocr2": "got_ocr2",
    "granite4_vision": "granite4_vision",
    "granite_docling": "granite_docling",
    "hunyuan_vl": "hunyuan_vl",
    "hy_v4_vl": "hy_v4_vl",
    "kosmos-2": "kosmos2",
    "llama4": "llama4",
    "mistral3": "mistral3",
    "mllama": "mllama",
    "molmo2": "molmo2",
    "muse_glimmer": "muse_glimmer",
    "paddleocr_vl": "paddleocr_vl",
    "phi4_multimodal": "phi4_multimodal",
    "qwen2_5_omni": "qwen2_5_omni",
    "qwen2_5_omni_thinker": "qwen2_5_omni_thinker",
    "qwen2_5_vl": "qwen2_5_vl",
    "qwen2_vl": "qwen2_vl",
    "qwen3_5": "qwen3_5",
    "qwen3_5_moe": "qwen3_5_moe",
    "qwen3_omni_moe": "qwen3_omni_moe",
    "qwen3_omni_moe_thinker": "qwen3_omni_moe_thinker",
    "qwen3_vl": "qwen3_vl",
    "qwen3_vl_moe": "qwen3_vl_moe",
    "qwen4_exp": "qwen4_exp",
    "step3p7": "step3p7",
}

# the modules here that are part of a family, not one: module -> the modules of its family that import it
HELPERS = {}
