"""HY-V4 VL's language model (transformers' `hy_v4_vl_text`, HYV4VLTextModel: tencent/Hy4's): HY-V4's model
(petit/models/families/mla/hy_v4.py) with three differences, read off transformers 5.25's modular file:

- its latent norms (q_a_layernorm, kv_a_layernorm) take `rms_norm_eps` (HYV4VLAttention), not HY-V4's fixed 1e-6;
- HYV4VLTextConfig's own defaults (hidden 6144, 78 layers of 64 heads, q_lora_rank 2048, 32 indexer heads, experts
  2048 wide, intermediate 18432);
- Qwen3-VL's interleaved M-RoPE over qk_rope_head_dim (`mrope_section`, three sections summing to
  qk_rope_head_dim / 2, default [12, 10, 10]). A text-only prompt gives every axis the same position
  (HYV4VLTextModel.forward: one arange expanded to the three; the wrapper leaves it to the text model without an
  image grid), and Qwen3VLTextRotaryEmbedding's recomposition overwrites the height / width frequencies with the same
  values, so the cos / sin are HY-V4's own: the sections change nothing Petit computes (kept as the field
  `mrope_section`, so a converted file says them)."""
from dataclasses import dataclass

from petit.models.families.mla import hy_v4


@dataclass(kw_only=True)
class HYV4VLTextConfig(hy_v4.HYV4Config):
    hidden_size: int = 6144
    intermediate_size: int = 18432
    moe_intermediate_size: int = 2048
    num_hidden_layers: int = 78
    num_attention_heads: int = 64
    q_lora_rank: int | None = 2048
    index_n_heads: int = 32
    mrope_section: list | None = None       # rope_parameters' (read there, kept here)
    model_type: str = "hy_v4_vl_text"

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and isinstance(d.get("rope_parameters"), dict) and \
                "mrope_section" in d["rope_parameters"]:
            rp = dict(d["rope_parameters"])
            d = dict(d, mrope_section=rp.pop("mrope_section"), rope_parameters=rp)
        return super().from_dict(d)

    def _validate(self):
        super()._validate()
        if self.latent_norm_eps not in (None, self.rms_norm_eps):
            raise ValueError(f"config: latent_norm_eps {self.latent_norm_eps!r}: HY-V4 VL's latent norms take "
                             f"rms_norm_eps ({self.rms_norm_eps!r})")
        self.latent_norm_eps = self.rms_norm_eps
        if self.mrope_section is None:
            self.mrope_section = [12, 10, 10]
        m = self.mrope_section
        if not isinstance(m, list) or len(m) != 3 or sum(m) != self.qk_rope_head_dim // 2:
            raise ValueError(f"config: mrope_section must be three sections (time, height, width) summing to "
                             f"qk_rope_head_dim / 2 ({self.qk_rope_head_dim // 2}), got {m!r}")


hf_tensors = hy_v4.hf_tensors
build = hy_v4.build
Config = HYV4VLTextConfig
