"""Qwen2-VL as released (`qwen2_vl`, Qwen2VLForConditionalGeneration): a vision tower (`visual`) beside a
`qwen2_vl_text` model. Its config is the text model's under `text_config` (transformers 5) or flat with vision_config
beside it (the released files of transformers 4: the text model's keys, FLAT_KEYS, at the top level); its weights
`model.language_model.*` and `lm_head.weight` (transformers 5) or `model.*`, `visual.*` and `lm_head.weight` (the
releases). Petit runs the text model alone and says once that the vision tower is not run; the head is tied when the
wrapper's tie_word_embeddings or text_config's is true (Qwen2VLConfig.__post_init__ forwards a true one)."""
from dataclasses import dataclass

from petit.models.families.dense import qwen2, qwen2_vl_text

# Qwen2VLTextConfig's keys: what transformers 5.25 takes from a flat file into text_config

from petit.models.blocks import qwen_vl
FLAT_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
             "num_key_value_heads", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps",
             "use_cache", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types",
             "attention_dropout", "rope_parameters", "rope_scaling", "rope_theta", "bos_token_id", "eos_token_id",
             "pad_token_id")


@dataclass(kw_only=True)
class Qwen2VLConfig(qwen2_vl_text.Qwen2VLTextConfig):
    model_type: str = "qwen2_vl"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(qwen_vl.text_config(d, cls.model_type, cls.model_type + "_text", FLAT_KEYS,
                                                     either_tie=True))


hf_tensors = qwen_vl.hf_tensors
build = qwen2.build
Config = Qwen2VLConfig
