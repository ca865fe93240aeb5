"""GLM-4.6V as released (`glm46v`, Glm46VForConditionalGeneration: GLM-4.6V, GLM-4.6V-Flash): GLM-4.1V's vision tower
(`visual`, not run) beside a text model transformers builds with AutoModel from `text_config`: `glm4v_text` (its
default: GLM-4.6V-Flash) or `glm4v_moe_text` (GLM-4.6V), run as those families; another model_type is refused. The
head is tied by the wrapper's tie_word_embeddings alone (Glm46VConfig's, default false). A converted file keeps the
text model's type as `text_model_type`."""
from dataclasses import dataclass

from petit.models.families.wrappers import glm4v

from petit.models.families.moe import glm4_moe, glm4v_moe_text

from petit.models.families.dense import glm4, glm4v_text

from petit.models.blocks import qwen_vl, wrapper

TEXT_TYPES = ("glm4v_text", "glm4v_moe_text")


def flat(d, model_type: str):
    """The text model's config, flat, with `text_model_type` (text_config's model_type, by default glm4v_text)."""
    if isinstance(d, dict) and isinstance(d.get("text_config"), dict):
        d = dict(d, text_config=dict({"model_type": TEXT_TYPES[0]}, **d["text_config"]))
    d = wrapper.flatten(d, model_type, glm4v.OWN_KEYS, tie=False, text_types=TEXT_TYPES)
    if isinstance(d, dict) and d.get("text_model_type", TEXT_TYPES[0]) not in TEXT_TYPES:
        raise ValueError(f"config: text_model_type must be one of {', '.join(TEXT_TYPES)}, got "
                         f"{d['text_model_type']!r}")
    return d


@dataclass(kw_only=True)
class Glm46VConfig(glm4v_text.Glm4vTextConfig):
    """A glm46v folder whose text model is GLM-4.1V's (`text_model_type` glm4v_moe_text builds Glm46VMoeConfig)."""
    model_type: str = "glm46v"
    text_model_type: str = "glm4v_text"

    @classmethod
    def from_dict(cls, d):
        d = flat(d, cls.model_type)
        if isinstance(d, dict) and d.get("text_model_type") == "glm4v_moe_text":
            return Glm46VMoeConfig.from_dict(d)
        return super().from_dict(d)


@dataclass(kw_only=True)
class Glm46VMoeConfig(glm4v_moe_text.Glm4vMoeTextConfig):
    """A glm46v folder whose text model is GLM-4.5V's."""
    model_type: str = "glm46v"
    text_model_type: str = "glm4v_moe_text"


def hf_tensors(cfg, ckpt) -> dict:
    return qwen_vl.hf_tensors(cfg, ckpt, text_tensors=(glm4v_moe_text if isinstance(cfg, Glm46VMoeConfig)
                                                          else glm4).hf_tensors)


def build(cfg, t):
    return (glm4_moe if isinstance(cfg, Glm46VMoeConfig) else glm4).build(cfg, t)


Config = Glm46VConfig
