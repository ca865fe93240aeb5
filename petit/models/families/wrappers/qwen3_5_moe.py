"""Qwen3.5-MoE as released (`qwen3_5_moe`, Qwen3_5MoeForConditionalGeneration): a vision tower and the text model
(a `qwen3_5_moe_text` config under `text_config`, its weights under `model.language_model.*`, the head
`lm_head.weight`). As for `qwen3_5`, Petit runs the text model alone: the load says once that the vision tower is not
run and lists the tower's tensors among those it does not use; a converted file is the text model's, its config flat
with model_type `qwen3_5_moe`."""
from dataclasses import dataclass

from petit.models.families.wrappers import qwen3_5

from petit.models.families.hybrid import qwen3_5_moe_text

P = qwen3_5.P


@dataclass(kw_only=True)
class Qwen35MoeConfig(qwen3_5_moe_text.Qwen35MoeTextConfig):
    model_type: str = "qwen3_5_moe"
    _IGNORED = qwen3_5.Qwen35Config._IGNORED

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(qwen3_5.text_config(d, "qwen3_5_moe"))


def hf_tensors(cfg: Qwen35MoeConfig, ckpt, text=qwen3_5_moe_text.hf_tensors) -> dict:
    """`text`: the text model's hf_tensors (issue 36, the q4exp group: Qwen4-Exp's)."""
    if not any(n.startswith(P) for n in ckpt.names()):
        return text(cfg, ckpt)                          # the text model's names already (a converted file)
    view = qwen3_5._Text(ckpt)
    out = {"model." + n[len(P):]: (ckpt.info(n)[1], lambda n=n: ckpt.f32(n), (n,)) for n in ckpt.names()
           if n.startswith(P)}
    for name, (shape, make, sources, *rest) in text(cfg, view).items():
        out[name] = (shape, make, tuple(view.name(s) for s in sources), *rest)
    return out


build = qwen3_5_moe_text.build
Config = Qwen35MoeConfig
