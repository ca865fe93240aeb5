"""DeepSeek Sparse Attention (DSA: DeepSeek-V3.2 `deepseek_v32`, GLM-5 `glm_moe_dsa`) as the decoder runs it: a
lightning indexer beside the latent attention (petit/models/blocks/mla.py) chooses, for each query, the `top_k` cached
positions it attends to.

The indexer of a layer: iq = wq_b(q_resid) [n_heads x dim] from the query's low-rank latent (q_a_layernorm's
output), ik = LayerNorm(wk x) [dim] (eps 1e-6, weight and bias), both rotated on their first qk_rope_head_dim values
(DeepSeek-V3.2 by halves, GLM-5 on adjacent pairs), and weights w = weights_proj(x) [n_heads] (kept float32, as
transformers keeps it). The score of position s for the query at p (s <= p) is
    I(p, s) = sum_h w_h n_heads^-1/2 relu(dim^-1/2 iq_h . ik_s),
and the query attends to every position when p < top_k, else to the top_k of largest score. ik is kept in the KV
cache: each position's row is [k_pe ; latent ; ik] (the attention reads the first rope + rank values). GLM-5's
"shared" layers run no indexer and reuse the previous full layer's choice (`source`). The scores and the attention
over the chosen positions run in C (kernels/dsa.c, ops DSA_INDEX and DSA_ATTENTION)."""
import copy
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.plan import scratch_arrays
from petit.native import Weight


@dataclass
class Dsa:
    wq_b: Weight | None                 # [n_heads * dim, q_lora_rank]; None in a shared layer
    wk: Weight | None                   # [dim, hidden]
    k_norm: object                      # LayerNorm(dim) with weight and bias
    w_proj: Weight | None               # [n_heads, hidden], float32
    n_heads: int
    dim: int
    top_k: int
    rope: object = None                 # the indexer's Rope (the layer's tables, its own pairing)
    source: "Dsa | None" = None         # a shared layer: the full layer whose choice it reuses
    _bufs: dict = field(default_factory=dict, repr=False)
    _cap: int = field(default=0, repr=False)

    @property
    def shared(self) -> bool:
        return self.source is not None

    def matrices(self) -> list:
        return [m for m in (self.wq_b, self.wk) if m is not None]

    def replace(self, new: dict) -> None:
        if self.wq_b is not None:
            self.wq_b, self.wk = new.get(id(self.wq_b), self.wq_b), new.get(id(self.wk), self.wk)

    def buffers(self, cap: int) -> dict:
        """Scratch for steps of up to `cap` tokens: {name: (array, pointer)}; a shared layer's choice is its
        source's."""
        if self.source is not None:
            return self.source.buffers(cap)
        if self._cap >= cap:
            return self._bufs
        self._bufs = scratch_arrays(cap, {"iq": self.n_heads * self.dim, "ik": self.dim, "iw": self.n_heads},
                                    {"sel": self.top_k, "n_sel": 1})
        self._cap = cap
        return self._bufs


    def last_choice(self, T: int) -> np.ndarray:
        """The positions the last step's T queries attend to, [T, top_k] int, increasing, -1 after each query's
        count (a copy)."""
        if self._cap < T or self.source is not None:
            raise ValueError(f"no choice of {T} tokens recorded")
        sel, n = self._bufs["sel"][0][:T], self._bufs["n_sel"][0][:T, 0]
        return np.where(np.arange(self.top_k) < n[:, None], sel, -1)


def indexer_rope(rope, interleaved: bool):
    """The layer's Rope with the indexer's pairing (the same tables)."""
    if rope.interleaved == interleaved:
        return rope
    r = copy.copy(rope)
    r.interleaved = interleaved
    return r


def dsa_weights(t, a: str, cfg, rope, interleaved: bool, source: "Dsa | None") -> Dsa:
    """A layer's indexer from the tensors under `a` (its self_attn. prefix), or, with `source`, a shared layer."""
    from petit.models.blocks.common import norm
    Hi, Di, D = cfg.index_n_heads, cfg.index_head_dim, cfg.hidden_size
    if source is not None:
        return Dsa(None, None, None, None, Hi, Di, cfg.index_topk, source=source)
    i = a + "indexer."
    return Dsa(wq_b=t.weight(i + "wq_b.weight", (Hi * Di, cfg.q_lora_rank)), wk=t.weight(i + "wk.weight", (Di, D)),
               k_norm=norm(t, i + "k_norm", Di, "layer", getattr(cfg, "index_norm_eps", 1e-6), bias=True),
               w_proj=t.float_weight(i + "weights_proj.weight", (Hi, D)), n_heads=Hi, dim=Di, top_k=cfg.index_topk,
               rope=indexer_rope(rope, interleaved))
