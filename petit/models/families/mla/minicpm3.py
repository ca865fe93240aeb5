"""MiniCPM3 (`minicpm3`, openbmb/MiniCPM3-4B; transformers 5 has it natively): DeepSeek-V2's multi-head latent
attention (the low-rank query behind `q_a_layernorm`, the compressed key / value latent in the cache, latent norms
with eps 1e-6, the softmax scale (nope + rope)^-0.5, times yarn's mscale^2 only with a yarn `mscale_all_dim`) whose
rope part turns by halves (transformers' apply_rotary_pos_emb, not DeepSeek's adjacent pairs), in a Llama block with
a dense SwiGLU MLP in every layer and MiniCPM's three scales: the embeddings times `scale_emb`, each sublayer's output
times `scale_depth / sqrt(num_hidden_layers)` before the residual add, the final hidden state divided by
`hidden_size / dim_model_base` before the tied head. `v_head_dim` null means hidden / heads, `scale_depth` null
sqrt(layers) (no scaling) and `dim_model_base` null the hidden size (none), as transformers resolves them."""
import math
from dataclasses import dataclass

from petit.models.blocks import deepseek_common as dc
from petit.models.blocks.config import positive_number
from petit.models.families.mla.deepseek_v3 import DeepseekV3Config


@dataclass(kw_only=True)
class MiniCPM3Config(DeepseekV3Config):
    max_position_embeddings: int = 32768
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = True
    kv_lora_rank: int = 256
    q_lora_rank: int | None = 768
    qk_nope_head_dim: int = 64
    qk_rope_head_dim: int = 32
    v_head_dim: int | None = None
    scale_emb: float = 12
    scale_depth: float | None = 1.4
    dim_model_base: int | None = 256
    n_group: int | None = None
    topk_group: int | None = None
    model_type: str = "minicpm3"
    _IGNORED = DeepseekV3Config._IGNORED | {"qk_head_dim"}

    def _validate(self):
        if self.v_head_dim is None:
            self.v_head_dim = self.hidden_size // self.num_attention_heads
        if self.scale_depth is None:
            self.scale_depth = math.sqrt(self.num_hidden_layers)
        if self.dim_model_base is None:
            self.dim_model_base = self.hidden_size
        positive_number(self, "scale_emb", "scale_depth", "dim_model_base")
        if self.n_routed_experts:
            raise ValueError("config: n_routed_experts is not a minicpm3 key (its every layer has a dense MLP)")
        super()._validate()


def build(cfg: MiniCPM3Config, t):
    net = dc.build(cfg, t, scoring="sigmoid", norm_topk=False, group_score="top2_sum", sel_bias=False,
                   yarn_mscale=True, n_group=0, topk_group=0, rope_interleaved=False)
    a = net.arch
    a.embed_scale = float(cfg.scale_emb)
    a.residual_scale = float(cfg.scale_depth) / math.sqrt(cfg.num_hidden_layers)
    a.logit_scale = float(cfg.dim_model_base) / cfg.hidden_size
    return net


hf_tensors = dc.hf_tensors
Config = MiniCPM3Config
