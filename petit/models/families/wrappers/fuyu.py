"""Fuyu as released (`fuyu`, FuyuForCausalLM: fuyu-8b): a linear patch embedding (`vision_embed_tokens`: each image
patch's pixels projected into the embedding space, in place of the image tokens) beside a `persimmon` text model
(its config `text_config`, its weights `language_model.model.*` and `language_model.lm_head.weight` as save_pretrained
writes them, or `model.language_model.*` and `lm_head.weight`). A text-only prompt runs the text model and the head
alone (FuyuModel.forward), so Petit runs those and says once that the patch embedding is not run. The head is tied
by the wrapper's own `tie_word_embeddings` (FuyuConfig's default false).

transformers 4 wrote FuyuConfig flat (the text model's keys at the top level, beside image_size / patch_size /
num_channels); transformers 5.25 still reads such a file as FuyuConfig.__post_init__ does: only its text keys
(TEXT_KEYS) go to the text model, whose partial_rotary_factor is then 0.5 whatever the file says. The text model's
defaults are PersimmonConfig's in transformers 5.25, whose RoPE base is 10000 (the persimmon family keeps
transformers 4's 25000; the released files state 25000)."""
from dataclasses import dataclass

from petit.models.families.classic import persimmon

from petit.models.blocks import wrapper

TOWER = ("vision_embed_tokens.", "model.vision_embed_tokens.")
OWN_KEYS = ("image_size", "patch_size", "num_channels", "image_token_id", "partial_rotary_factor")
TEXT_KEYS = ("vocab_size", "max_position_embeddings", "hidden_size", "intermediate_size", "num_hidden_layers",
             "num_attention_heads", "hidden_act", "initializer_range", "layer_norm_eps", "use_cache", "qk_layernorm",
             "hidden_dropout", "attention_dropout", "eos_token_id", "rope_scaling", "rope_theta")


def _flat(d):
    """The text model's config of a fuyu config.json, with text_config or flat (transformers 4's); a converted file's
    (no image keys) as it is."""
    if not isinstance(d, dict) or not (isinstance(d.get("text_config"), dict) or set(d) & set(OWN_KEYS[:4])):
        return d
    if not isinstance(d.get("text_config"), dict):
        text = {k: d[k] for k in TEXT_KEYS if k in d}
        d = {k: v for k, v in d.items() if k not in TEXT_KEYS} | {"text_config": dict(text, partial_rotary_factor=0.5)}
    wrapper.not_run("fuyu", "vision tower (vision_embed_tokens, the image patches' linear embedding)", "images")
    return wrapper.flatten(d, "fuyu", OWN_KEYS, towers=(), tie=False)


@dataclass(kw_only=True)
class FuyuConfig(persimmon.PersimmonConfig):
    rope_theta: float = 10000.0
    model_type: str = "fuyu"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(_flat(d))


def hf_tensors(cfg: FuyuConfig, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER, text_tensors=persimmon.hf_tensors)


build = persimmon.build
Config = FuyuConfig
