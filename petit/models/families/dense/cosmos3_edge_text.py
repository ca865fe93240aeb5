"""Cosmos3 Edge's language model (transformers' `cosmos3_edge_text`, Cosmos3EdgeTextModel: the dense reasoner of
nvidia/Cosmos3-Edge): Llama's attention and norms with a plain MLP, fc2(relu2(fc1 x)) (CLIP's, without biases by
default): Arcee's block. Defaults: head_dim 128, 8 kv heads, RoPE base 1e8, RMSNorm eps 1e-5.

Its RoPE is Qwen3-VL's interleaved M-RoPE (`mrope_section`, default [24, 20, 20], summing to head_dim / 2): a
text-only prompt gives every axis the same position (Cosmos3EdgeTextModel.forward: one arange expanded to the
three), and Qwen3VLTextRotaryEmbedding then overwrites the height / width frequencies with the same values, so the
rotation is the plain RoPE of that position on halves. Only the default RoPE type runs in transformers.

Names: the release (and save_pretrained) keeps the text model at the top (`embed_tokens`, `layers.N.self_attn.to_q /
to_k / to_v / to_out`, `mlp.up_proj / down_proj`, `norm`); transformers' modules are `model.language_model.*` with
`q_proj ... o_proj`, `mlp.fc1 / fc2`. Both are read. The image / action generator's tensors a release may hold
(time_embedder, *_moe_gen, add_q_proj ...: transformers drops them) are accounted for and not read."""
import re
from dataclasses import dataclass

from petit.models.families.dense import arcee
from petit.models.blocks.common import Renamed

RENAMES = ((r"^model\.language_model\.", "model."), (r"^(embed_tokens|norm|layers)\.", r"model.\1."),
           (r"\.self_attn\.to_q\.", ".self_attn.q_proj."), (r"\.self_attn\.to_k\.", ".self_attn.k_proj."),
           (r"\.self_attn\.to_v\.", ".self_attn.v_proj."), (r"\.self_attn\.to_out\.", ".self_attn.o_proj."),
           (r"\.mlp\.fc1\.", ".mlp.up_proj."), (r"\.mlp\.fc2\.", ".mlp.down_proj."))
# transformers' _COSMOS3_EDGE_DROPPED_GENERATOR_KEYS, on the stored names
DROPPED = re.compile(r"^(?:model\.language_model\.)?(action_modality_embed$|action_proj_(in|out)\.(bias|fc)\.weight$|"
                     r"time_embedder\.|proj_(in|out)\.|norm_moe_gen\.|layers\.\d+\.(input_layernorm_moe_gen|"
                     r"post_attention_layernorm_moe_gen|mlp_moe_gen)\.|layers\.\d+\.self_attn\.(add_[qkv]_proj|"
                     r"to_add_out|norm_added_[qk]|k_norm_und_for_gen)\.)")


def text_name(name: str) -> str:
    if name.startswith(("model.visual.", "model.projector.")):
        return name
    for pattern, repl in RENAMES:
        name = re.sub(pattern, repl, name)
    return name


@dataclass(kw_only=True)
class Cosmos3EdgeTextConfig(arcee.ArceeConfig):
    num_key_value_heads: int | None = 8
    head_dim: int | None = 128
    max_position_embeddings: int = 131072
    rope_theta: float = 1e8
    mrope_section: list | None = None       # rope_parameters' (read there, kept here): no effect on text positions
    model_type: str = "cosmos3_edge_text"
    _ROPE_SCALING_EXTRA = frozenset({"mrope_section"})

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and isinstance(d.get("rope_parameters"), dict):
            rp = dict(d["rope_parameters"])
            if "mrope_section" in rp:
                d = dict(d, mrope_section=rp.pop("mrope_section"), rope_parameters=rp)
        return super().from_dict(d)

    def _validate(self):
        if self.rope_scaling:
            raise ValueError(f"config: rope_parameters rope_type {self.rope_scaling.get('rope_type')!r}: Cosmos3 Edge "
                             f"runs the default RoPE only (transformers 5.25 refuses another)")
        super()._validate()
        if self.mrope_section is None:
            self.mrope_section = [24, 20, 20]
        m = self.mrope_section
        if not isinstance(m, list) or len(m) != 3 or sum(m) != self.head_dim // 2:
            raise ValueError(f"config: mrope_section must be three sections summing to head_dim / 2 "
                             f"({self.head_dim // 2}), got {m!r}")


def hf_tensors(cfg, ckpt) -> dict:
    if getattr(cfg, "tie_word_embeddings", False) and "lm_head.weight" in ckpt:
        cfg.tie_word_embeddings = False     # a stored head is read (transformers keeps one that differs: wrapper.py)
    v = Renamed(ckpt, text_name)
    out = {s: (tuple(ckpt.info(s)[1]), _never(s), [s]) for s in ckpt.names() if DROPPED.match(s)}
    return v.aliases(out)


def _never(n):
    def make():
        raise AssertionError(f"{n} belongs to Cosmos3 Edge's generator, which transformers drops")
    return make


build = arcee.build
Config = Cosmos3EdgeTextConfig
