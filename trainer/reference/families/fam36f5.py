"""The fam36f group of issue 36: multimodal checkpoints whose language model is a family the reference models, as
Petit converts them (the text model alone: a flat config with the wrapper's model_type, the text model's tensor
names; petit/models/blocks/wrapper.py). Each is its text family's reference with the wrapper's text-config defaults
filled in for keys a file leaves out: emu3 (Llama's block under Emu3TextConfig's defaults), got_ocr2 (qwen2), fuyu
(persimmon under transformers 5.25's PersimmonConfig, RoPE base 10000), mllama (Llama's self-attention layers alone: a
text-only prompt skips the cross-attention layers, and the file holds the others as model.layers.0 ... K-1, with
head_dim hidden / heads), phi4_multimodal (Phi-3's, the image and audio embedders not in the file)."""
from trainer.reference.families.common import under
from trainer.reference.families.llama import llama, phi3, qwen2
from trainer.reference.families.llama_variants import persimmon

EMU3 = dict(num_key_value_heads=8, max_position_embeddings=9216, rms_norm_eps=1e-5, rope_theta=1e6)
FUYU = dict(rope_theta=10000.0)
MLLAMA = dict(num_key_value_heads=8, max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
              cross_attention_layers=[3, 8, 13, 18, 23, 28, 33, 38])
PHI4 = dict(num_key_value_heads=8, max_position_embeddings=131072)


def _mllama_text(cfg, names):
    cross = set(cfg["cross_attention_layers"])
    n = sum(i not in cross for i in range(cfg["num_hidden_layers"]))
    return llama(dict(cfg, num_hidden_layers=n, head_dim=cfg["hidden_size"] // cfg["num_attention_heads"]), names)


FAMILIES = {"emu3": under("emu3", llama, EMU3), "got_ocr2": under("got_ocr2", qwen2, {}),
            "fuyu": under("fuyu", persimmon, FUYU), "mllama": under("mllama", _mllama_text, MLLAMA),
            "phi4_multimodal": under("phi4_multimodal", phi3, PHI4)}
