"""Emu3 as released (`emu3`, Emu3ForConditionalGeneration: Emu3-Chat, Emu3-Gen): a VQ-VAE image tokenizer (`vqmodel`,
configured by `vq_config`) beside an Emu3TextModel, which is Llama's block, whose config is `text_config` and whose
weights are `text_model.model.*` and `text_model.lm_head.weight` (as save_pretrained writes them) or
`model.text_model.*` and `lm_head.weight` (transformers 5's modules). A text-only prompt runs the text model and the
head, nothing else (Emu3Model.forward); images are ordinary token ids of the vocabulary, which the VQ-VAE makes from
pixels and turns back into pixels, so Petit runs the text model alone and says once that the VQ-VAE is not run
(petit/models/blocks/wrapper.py). The head is tied by the wrapper's own `tie_word_embeddings` (Emu3Config's default
false).

transformers' registry maps `emu3` to Emu3ForCausalLM, a class of the text model alone: from such a folder it loads
none of the text model's weights (its names are `model.*`), so the checkpoint's own class is the reference.
Emu3TextConfig's defaults where Llama's differ: 8 kv heads, 9216 positions, RMSNorm eps 1e-5, RoPE base 1e6; its
attention_dropout (0.1 by default) is dropout, not run in inference."""
from dataclasses import dataclass

from petit.models.families.dense import llama

from petit.models.blocks import wrapper

TOWER = ("vqmodel.", "model.vqmodel.")
PREFIXES = ("text_model.model.", "model.text_model.")
HEADS = ("text_model.lm_head.weight", "lm_head.weight")
OWN_KEYS = ("vocabulary_map", "image_token_id")


@dataclass(kw_only=True)
class Emu3Config(llama.LlamaConfig):
    num_key_value_heads: int | None = 8
    max_position_embeddings: int = 9216
    rms_norm_eps: float = 1e-5
    rope_theta: float = 1000000.0
    model_type: str = "emu3"

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and isinstance(d.get("text_config"), dict) and d.get("vq_config"):
            wrapper.not_run("emu3", "image tower (vqmodel: the VQ-VAE of vq_config)", "images")
        return super().from_dict(wrapper.flatten(d, "emu3", OWN_KEYS + ("vq_config",), towers=(), tie=False))


def hf_tensors(cfg: Emu3Config, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER, prefixes=PREFIXES, heads=HEADS)


build = llama.build
Config = Emu3Config
