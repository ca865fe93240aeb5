"""Phi-4-multimodal in transformers' format (`phi4_multimodal`, Phi4MultimodalForCausalLM): Phi-3's text model with an
image embedder (a SigLIP encoder and its projection) and an audio embedder (a conformer and its projections) under
`model.embed_tokens_extend.*`, configured by `vision_config` / `audio_config`; the text model's config is the file's
top level and its weights are Phi-3's own names (`model.layers.N.self_attn.qkv_proj`, `mlp.gate_up_proj`, ...). A
text-only prompt leaves the embeddings as they are (Phi4MultimodalFeatureEmbedding runs an embedder only for an
image or audio input) and runs Phi-3's blocks, so Petit runs the text model alone and says once that the embedders
are not run. The released model's vision and speech LoRA adapters are not in this checkpoint: transformers keeps
them as PEFT adapters beside it (vision-lora, speech-lora) for image or audio prompts, so a text-only prompt runs
the base weights, as here. (The original remote-code checkpoint is another model_type, `phi4mm`.)

Phi4MultimodalConfig's defaults where Phi-3's differ: 8 kv heads, 131072 positions (longrope over 4096 original
ones when the file gives the factors), vocabulary 200064."""
from dataclasses import dataclass

from petit.models.families.dense import phi3

from petit.models.blocks import wrapper

TOWER = ("model.embed_tokens_extend.",)
TOWERS = ("vision_config", "audio_config")


@dataclass(kw_only=True)
class Phi4MultimodalConfig(phi3.Phi3Config):
    num_key_value_heads: int | None = 8
    max_position_embeddings: int = 131072
    model_type: str = "phi4_multimodal"

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and any(k in d for k in TOWERS):
            wrapper.not_run("phi4_multimodal", "vision and audio tower (embed_tokens_extend: vision_config, "
                            "audio_config)", "images or audio", "the text model")
            d = {k: v for k, v in d.items() if k not in TOWERS}
        return super().from_dict(d)


def hf_tensors(cfg: Phi4MultimodalConfig, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER, text_tensors=phi3.hf_tensors, prefixes=())


build = phi3.build
Config = Phi4MultimodalConfig
