"""Gemma 4 Unified as released (`gemma4_unified`, Gemma4UnifiedForConditionalGeneration): its `text_config` (a
`gemma4_unified_text` config) run on `model.language_model.*`; the vision and audio towers are not run (said once,
as for `gemma4`)."""
from dataclasses import dataclass

from petit.models.families.wrappers import gemma4

from petit.models.families.dense import gemma4_unified_text
from petit.models.families.wrappers.gemma3n import hf_tensors  # noqa: F401  (the same model.language_model. names)


@dataclass(kw_only=True)
class Gemma4UnifiedConfig(gemma4_unified_text.Gemma4UnifiedTextConfig):
    model_type: str = "gemma4_unified"
    _IGNORED = gemma4.Gemma4Config._IGNORED | {"eoa_token_index"}

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(gemma4.flatten(cls.model_type, d))


build = gemma4_unified_text.build
Config = Gemma4UnifiedConfig
