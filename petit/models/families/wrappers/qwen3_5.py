"""Qwen3.5 as released (`qwen3_5`, Qwen3_5ForConditionalGeneration): a vision tower and the text model, whose config
is `text_config` (a `qwen3_5_text` config) and whose weights are named `model.language_model.*` (its head
`lm_head.weight`). Petit runs the text model alone: the load says that the vision tower is not run (a warning naming
`vision_config`) and lists its tensors among those it does not use. A converted file is a `qwen3_5` file of the text
model: its config flat, its weights named `model.*` as the text model's."""
import warnings
from dataclasses import dataclass

from petit.models.families.hybrid import qwen3_5_text, qwen3_next

P = "model.language_model."


@dataclass(kw_only=True)
class Qwen35Config(qwen3_5_text.Qwen35TextConfig):
    model_type: str = "qwen3_5"
    # the multimodal config's own keys besides text_config / vision_config (what the vision tower reads)
    _IGNORED = qwen3_5_text.Qwen35TextConfig._IGNORED | {"image_token_id", "video_token_id", "vision_start_token_id",
                                                        "vision_end_token_id", "text_config", "vision_config"}

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(text_config(d, "qwen3_5"))


def text_config(d, model_type: str):
    """A released multimodal config as its text model's, flat, with `model_type` (the load says once that the vision
    tower is not run); `d` itself when it has no text_config (a converted file's, or the text model's)."""
    if not (isinstance(d, dict) and isinstance(d.get("text_config"), dict)):
        return d
    if d.get("vision_config"):
        warnings.warn(f"config: {model_type}: the vision tower (vision_config) is not run; Petit runs the text model "
                      "(text_config) alone, so images and video cannot be given", stacklevel=4)
    flat = {k: v for k, v in d["text_config"].items() if k != "model_type"}
    if "tie_word_embeddings" in d and "tie_word_embeddings" not in flat:     # a top-level value the text model follows
        flat["tie_word_embeddings"] = d["tie_word_embeddings"]
    return dict(flat, model_type=model_type)


class _Text:
    """The checkpoint seen from the text model: `model.X` is `model.language_model.X`."""

    def __init__(self, ckpt):
        self.ckpt = ckpt

    def name(self, n: str) -> str:
        return P + n[len("model."):] if n.startswith("model.") else n

    def __contains__(self, n):
        return self.name(n) in self.ckpt

    def f32(self, n):
        return self.ckpt.f32(self.name(n))

    def info(self, n):
        return self.ckpt.info(self.name(n))

    def raw(self, n):
        return self.ckpt.raw(self.name(n))


def hf_tensors(cfg: Qwen35Config, ckpt) -> dict:
    if not any(n.startswith(P) for n in ckpt.names()):
        return qwen3_5_text.hf_tensors(cfg, ckpt)       # a text model's names already (a converted or text-only one)
    view = _Text(ckpt)
    out = {"model." + n[len(P):]: (ckpt.info(n)[1], lambda n=n: ckpt.f32(n), (n,)) for n in ckpt.names()
           if n.startswith(P)}
    for name, (shape, make, sources, *rest) in qwen3_next.hf_tensors(cfg, view, in_proj=qwen3_5_text.in_proj).items():
        out[name] = (shape, make, tuple(view.name(s) for s in sources), *rest)
    return out


build = qwen3_next.build
Config = Qwen35Config
