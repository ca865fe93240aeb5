"""DeepSeek-V4 (`deepseek_v4`, DeepseekV4ForCausalLM), as transformers 5.25's modeling_deepseek_v4.py computes it
(tests/fixtures/hf5_dsv4/README.md draws it; trainer/reference/deepseek_v4_f64.py is its float64 definition):

- hyper-connections: the residual is `hc_mult` streams; before each block their RMS-normed concatenation gives the
  block's input mix, its output's weights per stream and a Sinkhorn-balanced stream mix (kernels/hc.c);
- attention: a low-rank query (RMS-normed per head), one K = V head, RoPE on the last qk_rope_head_dim values of each
  head on adjacent pairs; keys are the last `sliding_window` positions plus, in compressed layers, one pooled entry
  per closed window of m tokens (HCA: all of them; CSA: overlapping windows, the Lightning indexer's top
  `index_topk`), a sink per head; the output's rope slice rotated back at minus its position, then a grouped
  low-rank output (o_a per group of heads, o_b);
- routed experts with sqrt(softplus) scores (hash layers: experts by token id), a shared expert, SwiGLU clamped.

The step is one plan (petit/models/families/mla/deepseek_v4_plan.py, ops 34-39 of kernels/plan.c). The cache keeps, per
layer, every position's keys and the compressors' raw projections beside the entries (kernels/dsv4_plan.c), so a rewind
to any position stays exact; float32 caches only."""
from types import SimpleNamespace

import numpy as np

from petit.models.blocks.common import embed_and_head, norm
from petit.models.blocks.decoder import Arch, Layer, Norm, Vec
from petit.models.families.mla.deepseek_v4_config import CSA, SWA, DeepseekV4Config
from petit.models.families.mla.deepseek_v4_cache import cache_width
from petit.models.families.mla.deepseek_v4_plan import DeepseekV4Decoder
from petit.models.blocks.moe import Moe
from petit.models.blocks.rope import Rope


def _moe(t, p, cfg, kind) -> Moe:
    D, F, E = cfg.hidden_size, cfg.moe_intermediate_size, cfg.n_routed_experts
    ex = [[t.weight(f"{p}experts.{e}.{n}.weight", s) for e in range(E)] for n, s in
          (("w1", (F, D)), ("w3", (F, D)), ("w2", (D, F)))]
    sh = tuple(t.weight(f"{p}shared_experts.{n}.weight", s) for n, s in
               (("w1", (F, D)), ("w3", (F, D)), ("w2", (D, F))))
    m = Moe(t.float_weight(p + "gate.weight", (E, D)), *ex, cfg.num_experts_per_tok, cfg.norm_topk_prob, "silu", sh)
    m.scoring, m.routed_scale, m.swiglu_limit = cfg.scoring_func, float(cfg.routed_scaling_factor), cfg.swiglu_limit
    if t.has(p + "gate.bias"):
        m.sel_bias = t.vec(p + "gate.bias", (E,))
    if kind == "hash_moe":
        m.tid2eid = np.ascontiguousarray(t.array(p + "gate.tid2eid", (cfg.vocab_size, cfg.num_experts_per_tok)),
                                         np.int32)
        if m.tid2eid.min() < 0 or m.tid2eid.max() >= E:
            raise ValueError(f"{p}gate.tid2eid: an expert outside 0..{E - 1}")
    return m


def _compressor(t, p, cfg, m, d, overlap) -> SimpleNamespace:
    W, D = (2 if overlap else 1) * d, cfg.hidden_size
    return SimpleNamespace(m=m, d=d, overlap=overlap, wkv=t.weight(p + "wkv.weight", (W, D)),
                           wgate=t.float_weight(p + "wgate.weight", (W, D)), ape=t.vec(p + "ape", (m, W)),
                           norm=t.vec(p + "norm.weight", (d,)))


def _attention(t, p, cfg, kind, ropes) -> SimpleNamespace:
    H, hd, D, r, G = cfg.num_attention_heads, cfg.head_dim, cfg.hidden_size, cfg.o_lora_rank, cfg.o_groups
    eps, K = cfg.rms_norm_eps, cfg.num_attention_heads * cfg.head_dim // cfg.o_groups
    a = SimpleNamespace(kind=kind, rope=ropes[kind == SWA], m=0, comp=None, index=None,
                        wq_a=t.weight(p + "wq_a.weight", (cfg.q_lora_rank, D)),
                        q_norm=norm(t, p + "q_norm", cfg.q_lora_rank, "rms", eps),
                        wq_b=t.weight(p + "wq_b.weight", (H * hd, cfg.q_lora_rank)),
                        wkv=t.weight(p + "wkv.weight", (hd, D)), kv_norm=norm(t, p + "norm", hd, "rms", eps),
                        sinks=t.vec(p + "attn_sink", (H,)), wo_b=t.weight(p + "wo_b.weight", (D, G * r)),
                        wo_a=[t.weight(p + f"wo_a.{g}.weight", (r, K)) for g in range(G)])
    if kind != SWA:
        a.m = cfg.compress_rates[kind]
        a.comp = _compressor(t, p + "compressor.", cfg, a.m, hd, kind == CSA)
    if kind == CSA:
        i, nh, di = p + "indexer.", cfg.index_n_heads, cfg.index_head_dim
        a.index = SimpleNamespace(comp=_compressor(t, i + "compressor.", cfg, a.m, di, True), n_heads=nh, dim=di,
                                  wq_b=t.weight(i + "wq_b.weight", (nh * di, cfg.q_lora_rank)),
                                  w_proj=t.float_weight(i + "weights_proj.weight", (nh, D)), top_k=cfg.index_topk)
    return a


def hc_weights(t, p, rows: int, width: int, scales: int) -> SimpleNamespace:
    """A hyper-connection's fn [rows, width], base [rows] and scale [scales] under the prefix p (issue 36, fam36m:
    HY-V4's too)."""
    return SimpleNamespace(fn=Vec(t.array(p + "fn", (rows, width))), base=Vec(t.array(p + "base", (rows,))),
                           scale=Vec(t.array(p + "scale", (scales,))))


def build(cfg: DeepseekV4Config, t) -> DeepseekV4Decoder:
    D, n, eps, rd = cfg.hidden_size, cfg.hc_mult, cfg.rms_norm_eps, cfg.qk_rope_head_dim
    ctx = cfg.max_position_embeddings
    ropes = {True: Rope(rd, cfg.rope_theta, None, ctx, None, True),
             False: Rope(rd, cfg.compress_rope_theta, cfg.compress_rope_scaling, ctx,
                         (cfg.compress_rope_scaling or {}).get("original_max_position_embeddings"), True)}
    E, head = embed_and_head(t, cfg, head="head.weight")
    layers = []
    for i, kind in enumerate(cfg.layer_types):
        p = f"model.layers.{i}."
        L = Layer(q=None, k=None, v=None, o=None, moe=_moe(t, p + "ffn.", cfg, cfg.mlp_layer_types[i]),
                  attn_norm=norm(t, p + "attn_norm", D, "rms", eps), mlp_norm=norm(t, p + "ffn_norm", D, "rms", eps))
        L.v4 = _attention(t, p + "attn.", cfg, kind, ropes)
        L.rope, L.q_norm, L.k_norm = L.v4.rope, L.v4.q_norm, L.v4.kv_norm      # what the step reads: the plan
        L.hc_attn, L.hc_ffn = (hc_weights(t, p + f"hc_{w}_", (2 + n) * n, n * D, 3) for w in ("attn", "ffn"))
        layers.append(L)
    hc_head = hc_weights(t, "model.hc_head.hc_", n, n * D, 1)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=cfg.moe_intermediate_size,
                num_attention_heads=cfg.num_attention_heads, num_key_value_heads=1,
                head_dim=cache_width(cfg), context_length=ropes[False].context_length, values_are_keys=True)
    return DeepseekV4Decoder(arch, E, layers, Norm("rms", eps, t.vec("model.norm.weight", (D,))), head, cfg=cfg,
                             hc_head=hc_head)


def hf_tensors(cfg, ckpt) -> dict:
    """The grouped output's o_a as one matrix per group (`wo_a.{g}`, [o_lora_rank, heads x head_dim / o_groups]):
    the rows of the checkpoint's wo_a [o_groups x o_lora_rank, ...] that group's product reads."""
    r, G = cfg.o_lora_rank, cfg.o_groups
    K = cfg.num_attention_heads * cfg.head_dim // G
    out = {}
    for i in range(cfg.num_hidden_layers):
        name = f"model.layers.{i}.attn.wo_a.weight"
        for g in range(G):
            out[f"model.layers.{i}.attn.wo_a.{g}.weight"] = ((r, K), lambda n=name, g=g: ckpt.f32(n).reshape(
                G * r, K)[g * r:(g + 1) * r], [name])
    return out


Config = DeepseekV4Config
