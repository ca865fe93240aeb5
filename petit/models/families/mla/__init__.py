"""DeepSeek's attention lineage: multi-head latent attention (blocks/mla.py, blocks/deepseek_common.py; the
compressed latent in the KV cache), with DeepSeek Sparse Attention (blocks/dsa.py) where the family has it, and
DeepSeek-V4's compressed attention (its own plan, deepseek_v4_plan.py); nearly all of them with routed experts."""

# model_type -> its module in this folder
MODEL_TYPES = {
    "axk1": "axk1",
    "axk2": "axk2",
    "deepseek_v2": "deepseek_v2",
    "deepseek_v3": "deepseek_v3",
    "deepseek_v32": "deepseek_v32",
    "deepseek_v4": "deepseek_v4",  # issue 30, the dsv4 group
    "dots3_note_text": "dots3_note_text",
    "glm4_moe_lite": "glm4_moe_lite",
    "glm_moe_dsa": "glm_moe_dsa",
    "hy_v4": "hy_v4",
    "hy_v4_vl_text": "hy_v4_vl_text",
    "longcat_flash": "longcat_flash",
    "minicpm3": "minicpm3",
    "mistral4": "mistral4",
    "sarvam_mla": "sarvam_mla",
    "youtu": "youtu",
}

# the modules here that are part of a family, not one: module -> the modules of its family that import it
HELPERS = {
    "dots3_note_text_config": ("dots3_note_text",),
    "longcat_flash_config": ("longcat_flash",),
    "deepseek_v4_cache": ("deepseek_v4", "deepseek_v4_plan"),
    "deepseek_v4_config": ("deepseek_v4", "deepseek_v4_cache"),
    "deepseek_v4_plan": ("deepseek_v4",),
    "deepseek_v4_rope": ("deepseek_v4_config",),
}
