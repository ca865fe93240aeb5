"""The model families Petit can run, one module per Hugging Face `model_type`.

The registry is an explicit dict, not an import built from a config string: it is the allowlist of what a model
file may ask for, and a frozen app (PyInstaller) can see every module.

A family module has `Config` (a dataclass with Hugging Face's field names and `from_dict` / `to_dict`), `build(cfg,
tensors) -> Decoder` (asking a TensorSource for each tensor by name and shape), and, when its checkpoints store
tensors in another layout than the kernels read, `hf_tensors(cfg, checkpoint)`.
"""
from petit.models import (cohere, cohere2, deepseek_v2, deepseek_v3, falcon_mamba, gemma, gemma2, gemma3_text, gpt2,
                          gpt_neox, gpt_oss, granite, granitemoe, granitemoehybrid, granitemoeshared, jamba, lfm2,
                          llama, llama4_text, mamba, mamba2, mistral, mixtral, olmo2, olmoe, phi, phi3, qwen2,
                          qwen2_moe, qwen3, qwen3_moe, smollm3, stablelm, starcoder2)

MODEL_TYPES = {
    "llama": llama,
    "mistral": mistral,
    "qwen2": qwen2,
    "qwen3": qwen3,
    "phi3": phi3,
    "gemma": gemma,
    "gemma2": gemma2,
    "gemma3_text": gemma3_text,
    "gpt2": gpt2,
    "gpt_neox": gpt_neox,
    "phi": phi,
    "starcoder2": starcoder2,
    "stablelm": stablelm,
    "olmo2": olmo2,
    "granite": granite,
    "smollm3": smollm3,
    "cohere": cohere,
    "cohere2": cohere2,
    "qwen3_moe": qwen3_moe,
    "qwen2_moe": qwen2_moe,
    "olmoe": olmoe,
    "mixtral": mixtral,
    "granitemoe": granitemoe,
    "granitemoeshared": granitemoeshared,
    "gpt_oss": gpt_oss,
    "llama4_text": llama4_text,
    "deepseek_v2": deepseek_v2,
    "deepseek_v3": deepseek_v3,
    "mamba": mamba,
    "falcon_mamba": falcon_mamba,
    "mamba2": mamba2,
    "lfm2": lfm2,
    "granitemoehybrid": granitemoehybrid,
    "jamba": jamba,
}


def get_family(model_type):
    """The module implementing `model_type`.

    Raises:
        ValueError: for an unknown model_type, listing the supported ones.
    """
    if model_type not in MODEL_TYPES:
        raise ValueError(f"unsupported model_type {model_type!r}: supported model types are "
                         f"{', '.join(sorted(MODEL_TYPES))}")
    return MODEL_TYPES[model_type]
