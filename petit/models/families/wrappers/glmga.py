"""GLM-GA (`glmga`): transformers 5.25 registers it as GLM-4.6V's class (Glm46VForConditionalGeneration) under a
config of its own with the same keys and defaults (GlmgaConfig), so it is read as
petit/models/families/wrappers/glm46v.py reads a glm46v folder: a glm4v_text (default) or glm4v_moe_text text model, the
vision tower not run."""
from dataclasses import dataclass

from petit.models.families.wrappers import glm46v


@dataclass(kw_only=True)
class GlmgaConfig(glm46v.Glm46VConfig):
    model_type: str = "glmga"


hf_tensors = glm46v.hf_tensors
build = glm46v.build
Config = GlmgaConfig
