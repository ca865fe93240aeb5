"""GIT (`git`, GitForCausalLM: microsoft/git-base / -large and their COCO, TextCaps, TextVQA, VATEX fine-tunes): a
CLIP image encoder (`git.image_encoder`) whose projected patches (`git.visual_projection`) are put before the text,
and a BERT-style decoder over both. A text-only prompt runs the decoder alone (GitModel.forward without
pixel_values): the word embeddings plus learned positions counted from 0 (no image prefix), LayerNorm-ed, then BERT's
post-LN blocks (petit/models/families/encoders/bert.py) under a causal mask, no final norm, and the head `output` with
its bias (tied to the word embeddings only with tie_word_embeddings, false by default). Petit runs that and says once
that the image encoder is not run: an image (or video) prompt needs its patches in front of the text, attending to each
other bidirectionally, which Petit does not compute."""
from dataclasses import dataclass, field

from petit.models.families.encoders import bert

from petit.models.blocks import wrapper
from petit.models.blocks.config import ConfigMixin, activation, boolean, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder

P = "git."
TOWER = (P + "image_encoder.", P + "visual_projection.", P + "img_temporal_embedding.")


@dataclass(kw_only=True)
class GitConfig(ConfigMixin):
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 6
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    max_position_embeddings: int = 1024
    layer_norm_eps: float = 1e-12
    tie_word_embeddings: bool = False
    model_type: str = "git"
    unknown_keys: list = field(default_factory=list, repr=False)

    # the image encoder's config, and the temporal embeddings of its video frames (the tower's: not run)
    _IGNORED = frozenset({"vision_config", "num_image_with_embedding"})

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and (d.get("vision_config") or d.get("num_image_with_embedding")):
            wrapper.not_run("git", "image tower (vision_config: CLIP's vision model and its visual_projection)",
                            "images", text="the text decoder")
        return super().from_dict(d)

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings")
        positive_number(self, "layer_norm_eps")
        boolean(self, "tie_word_embeddings")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"config: hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                             f"{self.num_attention_heads}")
        self.act = activation(self, "hidden_act", "git")


def hf_tensors(cfg: GitConfig, ckpt) -> dict:
    """The image encoder's tensors accounted for, never read."""
    return wrapper.hf_tensors(cfg, ckpt, TOWER, prefixes=())


def build(cfg: GitConfig, t):
    D, H, V = cfg.hidden_size, cfg.num_attention_heads, cfg.vocab_size
    E = t.weight(P + "embeddings.word_embeddings.weight", (V, D))
    pos = t.array(P + "embeddings.position_embeddings.weight", (cfg.max_position_embeddings, D))
    layers = bert.blocks(t, P, cfg, bidirectional=False)
    head = E if cfg.tie_word_embeddings else t.weight("output.weight", (V, D))
    arch = Arch(vocab_size=V, hidden_size=D, intermediate_size=cfg.intermediate_size, num_attention_heads=H,
                num_key_value_heads=H, head_dim=D // H, context_length=cfg.max_position_embeddings, act=cfg.act)
    return Decoder(arch, E, layers, None, head, lm_head_b=t.vec("output.bias", (V,)), pos_embed=pos,
                   embed_norm=bert.layer_norm(t, P + "embeddings.LayerNorm", D, cfg.layer_norm_eps))


Config = GitConfig
