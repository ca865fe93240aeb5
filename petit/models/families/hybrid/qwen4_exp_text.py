"""Qwen4-Exp's text model (`qwen4_exp_text`, transformers 5.25's Qwen4ExpForCausalLM; the released `qwen4_exp` folders
hold it as `text_config`): Qwen3.5-MoE's blocks (Gated DeltaNet and gated attention, MoE with a shared expert in
every layer: petit/models/families/hybrid/qwen3_5_moe_text.py, here with `norm_topk_prob` read) inside
hyper-connections, and no input / post-attention / final norms:

- the residual is `hc_count` streams of hidden_size values (the embedding repeated). Before each block (the attention
  or DeltaNet, then the MoE) a gated residual: the streams RMS-normed one by one, x (1 + w) with a weight per stream
  (hn); gates g = up silu(down hn / n) (rank `hc_lowrank`), one per stream and value; the block's input the mean over
  the streams of sigmoid(g) hn; its output y added to stream j times 2 sigmoid(inject hn / n)_j. The model's output
  is that mix once more (`hyper_connection_mixer`, no injection), then the LM head. The plan (Qwen4ExpDecoder) runs
  them as a per-stream NORM, MATMULs, SCALE_COLS (the 1 / n), BIAS_ACT (silu), Q4X_MIX (kernels/hc.c: the gated
  mean and 2 sigmoid) and HC_POST with an identity stream mix.
- every attention layer is `indexed_attention`: its QSA indexer (`indexer_*`) picks, per query, the best
  `indexer_budget / indexer_compress_ratio` complete blocks of `indexer_compress_ratio` visible positions (scored
  by sum over its heads of relu(q_h . k_b) / sqrt(dim), k_b the block's mean raw key RMS-normed and rotated at the
  block's first position), plus the incomplete last block; the layer attends over those positions only (every one
  while a query sees fewer than budget + ratio). blocks/qsa.py: kernels/qsa.c's QSA_INDEX, then kernels/mm3.c's
  MM3_ATTENTION over the chosen blocks; the raw keys live in a cache slot of their own after the layers'.

- the PLE layers (`ple_layer_ids`): hashed n-gram embeddings gating each stream, through a dilated causal conv, added
  before the layer's first gated residual (petit/models/families/hybrid/qwen4_exp_ple.py).

Refused: `output_gate_type` sigmoid (the DeltaNet's gated norm is silu here), hc_count outside 2..16, attention
layers without the indexer's fields."""
import numpy as np

from petit.models.blocks.common import default_rope, embed_and_head, norm
from petit.models.blocks.decoder import Arch, Layer, Vec
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.qsa import Qsa
from petit.models.families.hybrid import qwen3_5_moe_text, qwen3_next
from petit.models.families.hybrid import qwen4_exp_ple as ple
from petit.models.families.hybrid.qwen4_exp_config import Qwen4ExpTextConfig
from petit.models.families.hybrid.qwen4_exp_decoder import GatedResidual, Qwen4ExpDecoder


def _qsa(cfg, t, p: str, slot: int, rope) -> Qsa:
    n, d, D, eps = cfg.indexer_n_heads, cfg.indexer_head_dim, cfg.hidden_size, cfg.rms_norm_eps
    return Qsa(t.weight(p + "index_q.weight", (n * d, D)), t.weight(p + "index_k.weight", (d, D)),
               norm(t, p + "q_layernorm", d, "rms", eps, add=1.0), Vec(t.array(p + "k_layernorm.weight", (d,))), n,
               d, cfg.indexer_compress_ratio, cfg.indexer_budget // cfg.indexer_compress_ratio, 0, slot, rope, eps)


def hf_tensors(cfg: Qwen4ExpTextConfig, ckpt) -> dict:
    """Qwen3.5-MoE's, and each indexer's index_qk_proj [(n_idx + 1) dim, hidden] as its query rows (`index_q`) and
    key rows (`index_k`)."""
    ple.check_buffers(cfg, ckpt)
    out = qwen3_5_moe_text.hf_tensors(cfg, ckpt)
    nd, d, D = (cfg.indexer_n_heads or 0) * (cfg.indexer_head_dim or 0), cfg.indexer_head_dim, cfg.hidden_size
    for i in range(cfg.num_hidden_layers):
        src = f"model.layers.{i}.self_attn.indexer.index_qk_proj.weight"
        if src in ckpt:
            for name, rows in (("index_q", (0, nd)), ("index_k", (nd, nd + d))):
                make = lambda s=src, r=rows: np.ascontiguousarray(ckpt.f32(s)[r[0]:r[1]])    # noqa: E731
                out[src.replace("index_qk_proj", name)] = ((rows[1] - rows[0], D), make, (src,))
    return out


def build(cfg: Qwen4ExpTextConfig, t) -> Qwen4ExpDecoder:
    D, hd, eps = cfg.hidden_size, cfg.head_dim, cfg.rms_norm_eps
    E, head = embed_and_head(t, cfg)
    rope = default_rope(cfg, dim=cfg.rotary_dim)
    layers, state_layers, hc, slots, n_layers = [], [], [], [], cfg.num_hidden_layers
    for i, kind in enumerate(cfg.types):
        p = f"model.layers.{i}."
        if kind == "linear_attention":
            mix = {"mamba": qwen3_next._deltanet(cfg, t, p + "linear_attn."), "q": None, "k": None, "v": None,
                   "o": None}
            state_layers.append(i)
        else:
            mix = qwen3_next.gated_attention(cfg, t, p, kind, rope)
        L = Layer(**mix, moe=moe_weights(t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                                         inter=cfg.moe_intermediate_size, norm_topk=cfg.norm_topk_prob,
                                         router="mlp.gate", experts="mlp.experts", shared="mlp.shared_expert",
                                         shared_inter=cfg.shared_expert_intermediate_size,
                                         shared_gate="mlp.shared_expert_gate"))
        if kind != "linear_attention":
            L.q_norm, L.k_norm = (norm(t, p + f"self_attn.{x}_norm", hd, "rms", eps, add=1.0) for x in "qk")
            L.pre_store = L.sparse = _qsa(cfg, t, p + "self_attn.indexer.", n_layers + len(slots), rope)
            slots.append(i)
        layers.append(L)
        hc.append([GatedResidual(t, p + f"{w}_hyper_connection.", cfg, True) for w in ("attn", "mlp")])
    for j, i in enumerate(cfg.ple_layer_ids):   # PLE's state slots after the indexers'
        hc[i - 1][0].ple = ple.Ple(cfg, t, f"model.layers.{i - 1}.", j, n_layers + len(slots) + j)
        state_layers.append(n_layers + len(slots) + j)
    mamba = next((L.mamba for L in layers if L.mamba is not None), None)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D,
                intermediate_size=max(cfg.moe_intermediate_size, cfg.shared_expert_intermediate_size),
                num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
                head_dim=hd, context_length=rope.context_length,
                state_shapes=mamba.state_shapes if mamba else None, state_layers=tuple(state_layers),
                cache_slots=n_layers + len(slots) + len(cfg.ple_layer_ids) if slots or cfg.ple_layer_ids else None)
    return Qwen4ExpDecoder(arch, E, layers, head, n=cfg.hc_count, hc=hc,
                           mixer=GatedResidual(t, "model.hyper_connection_mixer.", cfg, False))


Config = Qwen4ExpTextConfig
UNREAD = ple.UNREAD
