"""The vlnew group of issue 36: the language models of multimodal checkpoints (their towers not run), as Petit
converts them (the text model alone: a flat config with the wrapper's or the text type's model_type, the text model's
tensor names; petit/models/wrapper.py). A text-only prompt gives every M-RoPE section the same position, so each
rotation is the plain RoPE the text model's own layout computes: paddleocr_vl_text (ERNIE 4.5's dense block rotating
halves, head_dim 128 by default)."""
from trainer.reference.families.common import get, heads, rope
from trainer.reference.families.llama import llama_like


def paddleocr_vl_text(cfg, names, family="paddleocr_vl_text"):
    bias = get(cfg, "use_bias", False)
    cfg = dict(cfg, head_dim=get(cfg, "head_dim", 128), rope_theta=get(cfg, "rope_theta", 5e5))
    r = rope(cfg, heads(cfg)[2])
    return llama_like(cfg, names, family, eps=get(cfg, "rms_norm_eps", 1e-5), qkv_bias=bias, o_bias=bias,
                      mlp_bias=bias, rope_of=lambda i: r, tied=True)


FAMILIES = {"paddleocr_vl_text": paddleocr_vl_text,
            "paddleocr_vl": lambda cfg, names: paddleocr_vl_text(cfg, names, "paddleocr_vl")}
