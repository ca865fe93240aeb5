"""Cosmos 3 Omni's Reasoner (`cosmos3_omni`, Cosmos3OmniForConditionalGeneration): Qwen3-VL's vision tower beside the
text model transformers builds with AutoModel from `text_config`, by default (and as released) `qwen3_vl_text`, run
as that family (another model_type is refused by name); the head tied by the wrapper's tie_word_embeddings alone
(default false). Petit runs the text model alone and says once that the vision tower is not run.

Its checkpoints keep the text model at the top (`layers.*`, `embed_tokens.*`, `norm.*`, beside `lm_head.weight`) and
the tower's parts flat (`blocks.*`, `merger.*`, `patch_embed.*`, `pos_embed.*`, `deepstack_merger_list.*`), newer ones
with Diffusers' attention names (`to_q`, `to_k`, `to_v`, `to_out`, `norm_q`, `norm_k`); transformers 5.25's
conversion mapping renames them to Qwen3-VL's at load and back at save, and so does Petit (RENAMES). transformers 5's
module names (`model.language_model.*`, `model.visual.*`) are read too."""
import re
from dataclasses import dataclass

from petit.models.families.dense import qwen3, qwen3_vl_text

from petit.models.blocks import qwen_vl
from petit.models.blocks.common import Renamed

# the released parts, also as the loader's view of a checkpoint with embed_tokens at the top shows them (model.*)
TOWER = qwen_vl.TOWER + tuple(m + p for m in ("", "model.") for p in ("blocks.", "merger.", "patch_embed.",
                                                                      "pos_embed.", "deepstack_merger_list."))
ATTENTION = {"to_q": "q_proj", "to_k": "k_proj", "to_v": "v_proj", "to_out": "o_proj", "norm_q": "q_norm",
             "norm_k": "k_norm"}


def module_name(n: str) -> str:
    """A stored name as the text model's module names it (tower names as they are)."""
    if n == "model.lm_head.weight":             # the loader's view of a checkpoint with embed_tokens at the top
        return "lm_head.weight"
    if n.startswith(("layers.", "embed_tokens.", "norm.")):
        n = "model." + n
    elif n.startswith("model.language_model."):
        n = "model." + n[len("model.language_model."):]
    return re.sub(r"\.self_attn\.(to_q|to_k|to_v|to_out|norm_q|norm_k)\.",
                  lambda m: f".self_attn.{ATTENTION[m[1]]}.", n) if n.startswith("model.layers.") else n


@dataclass(kw_only=True)
class Cosmos3OmniConfig(qwen3_vl_text.Qwen3VLTextConfig):
    model_type: str = "cosmos3_omni"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(qwen_vl.text_config(d, cls.model_type, "qwen3_vl_text"))


def hf_tensors(cfg: Cosmos3OmniConfig, ckpt) -> dict:
    out = {n: (ckpt.info(n)[1], _never(n), (n,)) for n in ckpt.names() if n.startswith(TOWER)}
    return Renamed(ckpt, module_name).aliases(out)


def _never(n):
    def make():
        raise AssertionError(f"{n} belongs to the vision tower, which is not run")
    return make


build = qwen3.build
Config = Cosmos3OmniConfig
