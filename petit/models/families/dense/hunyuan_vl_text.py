"""HunyuanOCR's language model (transformers' `hunyuan_vl_text`, HunYuanVLTextModel): Hunyuan V1 dense's block (RMSNorm
over each head of q and k after RoPE, the released NTK-alpha RoPE) with a tied head by default and transformers'
aliases (attention_head_dim, org_vocab_size, pad_id).

Its RoPE is XD-RoPE (`mrope_section`, the release's `xdrope_section` and rope_type `xdrope`, read as transformers
does: mrope_section and `dynamic`): HunYuanVLRotaryEmbedding gives each of the sections (3 or 4: position, width,
height, image index) its own position row, and HunYuanVLTextModel.forward expands one arange to every row when no
positions are given (the wrapper's compute_3d_position_ids gives none without an image grid), so a text-only prompt
is rotated by the plain RoPE of its position on halves: the sections change nothing Petit computes (kept as the field
`mrope_section`, so a converted file says them too). transformers
cannot run the text model without `mrope_section` (its rotary expands positions to len(mrope_section) rows), and its
rotary drops the dynamic update, so `dynamic` without `alpha` and `longrope` (whose factors depend on the length)
are refused by name."""
from dataclasses import dataclass

from petit.models.families.dense import hunyuan_v1_dense
from petit.models.blocks.config import aliased

ALIASES = {"attention_head_dim": "head_dim", "org_vocab_size": "vocab_size", "pad_id": "pad_token_id"}


def _rope(d: dict) -> dict:
    """d with rope_parameters / rope_scaling as transformers reads them (xdrope_section -> mrope_section, rope_type
    xdrope -> dynamic), checked."""
    key = "rope_parameters" if d.get("rope_parameters") is not None else "rope_scaling"
    rp = dict(d.get(key) or {})
    legacy = rp.pop("xdrope_section", None)
    if legacy is not None:
        if rp.get("mrope_section") is not None and [float(x) for x in rp["mrope_section"]] != \
                [float(x) for x in legacy]:
            raise ValueError(f"config: {key} has mrope_section {rp['mrope_section']} and xdrope_section {legacy}, "
                             f"which differ")
        rp.setdefault("mrope_section", legacy)
    for k in ("rope_type", "type"):
        if rp.get(k) == "xdrope":
            rp[k] = "dynamic"
    sections = rp.pop("mrope_section", None) or d.get("mrope_section")     # a converted file's: a field
    if not isinstance(sections, list) or len(sections) < 1:
        raise ValueError(f"config: hunyuan_vl_text needs {key}.mrope_section (its XD-RoPE sections): transformers "
                         f"5.25's HunYuanVLRotaryEmbedding cannot run without it")
    kind = rp.get("rope_type", rp.get("type", "default"))
    if (kind == "dynamic" and not rp.get("alpha")) or kind == "longrope":
        raise ValueError(f"config: {key} rope_type {kind!r}{' without alpha' if kind == 'dynamic' else ''}: "
                         f"HunYuanVLRotaryEmbedding computes its frequencies once (no update with the length), "
                         f"which Petit's {kind} RoPE does not model")
    hd = d.get("head_dim") or d["hidden_size"] // d["num_attention_heads"]
    if any(float(s) != int(s) for s in sections) or sum(int(s) for s in sections) != hd // 2:
        raise ValueError(f"config: mrope_section {sections} must be whole numbers summing to head_dim / 2 ({hd // 2})")
    return dict(d, **{key: rp or None}, mrope_section=[int(s) for s in sections])


@dataclass(kw_only=True)
class HunYuanVLTextConfig(hunyuan_v1_dense.HunYuanDenseV1Config):
    tie_word_embeddings: bool = True
    mrope_section: list | None = None       # rope_parameters' (read there, kept here): no effect on text positions
    model_type: str = "hunyuan_vl_text"
    _IGNORED = hunyuan_v1_dense.HunYuanDenseV1Config._IGNORED | {"sep_token_id"}

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict):
            d = aliased(d, ALIASES)
            if all(isinstance(d.get(k), int) for k in ("hidden_size", "num_attention_heads")):
                d = _rope(d)
        return super().from_dict(d)


build = hunyuan_v1_dense.build
Config = HunYuanVLTextConfig
