"""What DeepSeek-V2 and V3 share: the config fields of their latent attention and routing, the checks, the tensors
the latent attention runs on (derived from kv_b_proj and the q / kv_a projections at load), and the builder."""
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.common import default_rope, embed_and_head, gated_mlp_weights, norm
from petit.models.blocks.config import DecoderConfig, boolean, check_decoder, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.mla import Mla
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY

IGNORED = MOE_TRAINING_ONLY | {"ep_size", "pretraining_tp", "qk_head_dim", "scoring_func", "num_nextn_predict_layers"}


@dataclass(kw_only=True)
class DeepseekConfig(DecoderConfig):
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 2048
    kv_lora_rank: int = 512
    q_lora_rank: int | None = 1536
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    moe_intermediate_size: int = 1407
    n_shared_experts: int | None = None
    n_routed_experts: int | None = None
    num_experts_per_tok: int | None = None
    first_k_dense_replace: int = 0
    moe_layer_freq: int = 1
    n_group: int | None = None
    topk_group: int | None = None
    routed_scaling_factor: float = 1.0
    norm_topk_prob: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    rope_interleave: bool = True


def validate(cfg) -> None:
    check_decoder(cfg, ("rms_norm_eps", "rope_theta", "routed_scaling_factor"),
                  ("tie_word_embeddings", "norm_topk_prob", "attention_bias", "mlp_bias", "rope_interleave"))
    positive_int(cfg, "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "moe_layer_freq")
    if cfg.q_lora_rank is not None:
        positive_int(cfg, "q_lora_rank")
    if cfg.qk_rope_head_dim % 2:
        raise ValueError(f"config: qk_rope_head_dim {cfg.qk_rope_head_dim} must be even for RoPE")
    if cfg.attention_bias or cfg.mlp_bias:
        raise ValueError(f"config: attention_bias / mlp_bias are not supported by the {cfg.model_type} family (no "
                         f"released DeepSeek model has them)")
    if cfg.hidden_act not in ("silu", "swish"):
        raise ValueError(f"config: hidden_act {cfg.hidden_act!r} is not supported by the {cfg.model_type} family "
                         f"(supported: silu)")
    if cfg.n_routed_experts:
        positive_int(cfg, "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")
        if cfg.num_experts_per_tok > cfg.n_routed_experts:
            raise ValueError(f"config: num_experts_per_tok ({cfg.num_experts_per_tok}) exceeds n_routed_experts "
                             f"({cfg.n_routed_experts})")
        if cfg.n_group and cfg.n_group > 1:
            positive_int(cfg, "n_group", "topk_group")
            if cfg.n_routed_experts % cfg.n_group or cfg.topk_group > cfg.n_group:
                raise ValueError(f"config: n_routed_experts {cfg.n_routed_experts} in n_group {cfg.n_group} groups, "
                                 f"topk_group {cfg.topk_group} of them: not a valid grouping")
    positive_number(cfg, "routed_scaling_factor")
    boolean(cfg, "rope_interleave")


def sparse(cfg, i: int) -> bool:
    """Layer i routes to experts (transformers: from first_k_dense_replace on, every moe_layer_freq-th; the families
    with `mlp_layer_types`, GLM-4.7-Flash's and DeepSeek-V3.2's: where it says "sparse")."""
    types = getattr(cfg, "mlp_layer_types", None)
    if types is not None:
        return bool(cfg.n_routed_experts) and types[i] == "sparse"
    return bool(cfg.n_routed_experts) and i >= cfg.first_k_dense_replace and i % cfg.moe_layer_freq == 0


def dims(cfg, i: int) -> tuple:
    """Layer i's latent attention sizes (heads, nope, rope, v, rank, q_lora_rank): the config's, or its
    `layer_dims(i)` where a family's layers differ (Dots 3's sliding layers, issue 36 fam36k)."""
    if hasattr(cfg, "layer_dims"):
        return cfg.layer_dims(i)
    return (cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim, cfg.kv_lora_rank,
            cfg.q_lora_rank)


def hf_tensors(cfg, ckpt, attn=lambda i: f"model.layers.{i}.self_attn.") -> dict:
    """The latent attention's matrices as the kernels read them, derived from the checkpoint's:
    `q_nope` / `q_pe` ([H * nope, in] / [H * rope, in]: the rows of q_proj or q_b_proj regrouped), `kv_c` / `kv_pe`
    (the latent and the rope rows of kv_a_proj_with_mqa), and per head `k_absorb.{h}` = W_uk_h^T [rank, nope] and
    `v_absorb.{h}` = W_uv_h [v, rank] from kv_b_proj ([H * (nope + v), rank])."""
    D = cfg.hidden_size
    out = {}
    for i in range(cfg.num_hidden_layers):
        H, dn, dr, dv, r, q_rank = dims(cfg, i)
        q_in = q_rank or D
        a = attn(i)         # the latent attention's prefix (LongCat-Flash: two per layer)
        qname = a + ("q_b_proj.weight" if q_rank else "q_proj.weight")
        held = {}

        def read(name, held=held):
            if name not in held:
                held.clear()
                held[name] = ckpt.f32(name)
            return held[name]

        def q_part(lo, hi, qname=qname, read=read, H=H, dn=dn, dr=dr, q_in=q_in):
            return lambda: read(qname).reshape(H, dn + dr, q_in)[:, lo:hi].reshape(-1, q_in)

        kva, kvb = a + "kv_a_proj_with_mqa.weight", a + "kv_b_proj.weight"
        out[a + "q_nope.weight"] = ((H * dn, q_in), q_part(0, dn), [qname])
        out[a + "q_pe.weight"] = ((H * dr, q_in), q_part(dn, dn + dr), [qname])
        out[a + "kv_c.weight"] = ((r, D), lambda kva=kva, read=read, r=r: read(kva)[:r], [kva])
        out[a + "kv_pe.weight"] = ((dr, D), lambda kva=kva, read=read, r=r: read(kva)[r:], [kva])
        for h in range(H):
            def k_abs(h=h, kvb=kvb, read=read, H=H, dn=dn, dv=dv, r=r):
                return np.ascontiguousarray(read(kvb).reshape(H, dn + dv, r)[h, :dn].T)

            def v_abs(h=h, kvb=kvb, read=read, H=H, dn=dn, dv=dv, r=r):
                return read(kvb).reshape(H, dn + dv, r)[h, dn:]
            out[f"{a}k_absorb.{h}.weight"] = ((r, dn), k_abs, [kvb])
            out[f"{a}v_absorb.{h}.weight"] = ((dv, r), v_abs, [kvb])
    return out


def _mscale(factor: float, m: float) -> float:
    return 1.0 if factor <= 1 else 0.1 * m * np.log(factor) + 1.0


def attention_scale(cfg, yarn_mscale: bool) -> float:
    """(nope + rope)^-0.5, times yarn's mscale(factor, mscale_all_dim)^2 where the family applies it."""
    scale = (cfg.qk_nope_head_dim + cfg.qk_rope_head_dim) ** -0.5
    s = cfg.rope_scaling or {}
    if yarn_mscale and s.get("rope_type", s.get("type")) == "yarn" and s.get("mscale_all_dim"):
        scale *= _mscale(float(s["factor"]), float(s["mscale_all_dim"])) ** 2
    return float(scale)


def legacy_mlp_types(cfg) -> None:
    """cfg.mlp_layer_types derived, when absent, from the legacy `first_k_dense_replace` (default 1) and
    `moe_layer_freq` (default 1) as transformers' A.X-K1 / A.X-K2 configs do: sparse where i >= first_k_dense_replace
    and i % moe_layer_freq == 0; given both, they must agree. The legacy keys are read then (None / 1)."""
    k = 1 if cfg.first_k_dense_replace is None else cfg.first_k_dense_replace
    positive_int(cfg, "moe_layer_freq")
    derived = ["sparse" if i >= k and i % cfg.moe_layer_freq == 0 else "dense" for i in range(cfg.num_hidden_layers)]
    if cfg.mlp_layer_types is None:
        cfg.mlp_layer_types = derived
    elif (cfg.first_k_dense_replace is not None or cfg.moe_layer_freq != 1) and cfg.mlp_layer_types != derived:
        raise ValueError(f"config: first_k_dense_replace {k} / moe_layer_freq {cfg.moe_layer_freq} contradict "
                         f"mlp_layer_types {cfg.mlp_layer_types} (transformers runs mlp_layer_types)")
    cfg.first_k_dense_replace, cfg.moe_layer_freq = None, 1      # read: mlp_layer_types says it all


def plain_norms(t, p: str, D: int, eps: float) -> tuple:
    """A layer's (input_layernorm, post_attention_layernorm) RMSNorms under prefix p."""
    return norm(t, p + "input_layernorm", D, "rms", eps), norm(t, p + "post_attention_layernorm", D, "rms", eps)


def mla_weights(t, a: str, dims: tuple, D: int, latent_eps: float, q_cat: bool = False) -> Mla:
    """The latent attention under `a` (its self_attn. prefix) of sizes `dims` (see `dims`), from the tensors
    hf_tensors derives; latent_eps: the q_a / kv_a norms' eps; q_cat: the query's matrices read [q_a_norm(q_a x) ;
    q_a x] (A.X-K2, issue 36 fam36m)."""
    H, dn, dr, dv, r, q_rank = dims
    q_a = q_a_norm = None
    q_in = D
    if q_rank:
        q_in = q_rank * (2 if q_cat else 1)
        q_a = t.weight(a + "q_a_proj.weight", (q_rank, D))
        q_a_norm = norm(t, a + "q_a_layernorm", q_rank, "rms", latent_eps)
    return Mla(q=t.weight(a + "q_nope.weight", (H * dn, q_in)), q_pe=t.weight(a + "q_pe.weight", (H * dr, q_in)),
               c=t.weight(a + "kv_c.weight", (r, D)), k_pe=t.weight(a + "kv_pe.weight", (dr, D)),
               kv_norm=norm(t, a + "kv_a_layernorm", r, "rms", latent_eps),
               k_absorb=[t.weight(f"{a}k_absorb.{h}.weight", (r, dn)) for h in range(H)],
               v_absorb=[t.weight(f"{a}v_absorb.{h}.weight", (dv, r)) for h in range(H)],
               nope=dn, rope=dr, rank=r, v_dim=dv, q_a=q_a, q_a_norm=q_a_norm, q_cat=q_cat)


def build(cfg, t, *, scoring: str, norm_topk: bool, group_score: str, sel_bias: bool, yarn_mscale: bool,
          n_group: int, topk_group: int, dsa=None, rope_interleaved: bool = True, rope_for=None,
          shared_inter: int | None = None, layer_hook=None, q_cat: bool = False, norms=None,
          decoder=Decoder) -> Decoder:
    """dsa: DeepSeek Sparse Attention's indexer of each layer, dsa(i, self_attn prefix, rope, previous) -> a
    petit/models/blocks/dsa.py Dsa (DeepSeek-V3.2, GLM-5), or None for a layer without; its keys widen that layer's
    cache rows by index_head_dim. issue 36, fam36k (Dots 3): rope_for(i) each layer's RoPE (default: one of
    qk_rope_head_dim), shared_inter the shared experts' width (default n_shared_experts x moe_intermediate_size),
    layer_hook(i, layer, self_attn prefix) what a family adds to a layer; each layer's attention sizes are `dims`.
    issue 36, fam36m: q_cat (mla_weights'), norms(t, p, i) -> a layer's two norms when not plain_norms (A.X-K2's gated
    ones), decoder: what makes the Decoder of the pieces (HY-V4's)."""
    D, eps = cfg.hidden_size, cfg.rms_norm_eps
    if rope_for is None:
        rope = default_rope(cfg, dim=cfg.qk_rope_head_dim, interleaved=rope_interleaved)      # MiniCPM3: by halves
        rope_for = lambda i: rope                       # noqa: E731
    # the latent norms' eps: transformers fixes it at 1e-6; a GGUF file's is its rms eps (llama.cpp's deepseek2)
    latent_eps = getattr(cfg, "latent_norm_eps", None) or 1e-6
    if shared_inter is None:
        shared_inter = (cfg.n_shared_experts or 0) * cfg.moe_intermediate_size
    E, head = embed_and_head(t, cfg)
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        d = dims(cfg, i)
        mla = mla_weights(t, a, d, D, latent_eps, q_cat)
        if dsa is not None:
            mla.dsa = dsa(i, a, rope_for(i), next((L.mla.dsa for L in reversed(layers) if L.mla.dsa), None))
        o = t.weight(a + "o_proj.weight", (D, d[0] * d[3]))
        if sparse(cfg, i):
            m = moe_weights(t, p, cfg, n_experts=cfg.n_routed_experts, top_k=cfg.num_experts_per_tok,
                            inter=cfg.moe_intermediate_size, norm_topk=norm_topk, router="mlp.gate",
                            experts="mlp.experts", shared="mlp.shared_experts" if cfg.n_shared_experts else None,
                            shared_inter=shared_inter)
            m.scoring, m.group_score, m.routed_scale = scoring, group_score, float(cfg.routed_scaling_factor)
            m.n_group, m.topk_group = (n_group, topk_group) if n_group and n_group > 1 else (0, 0)
            if sel_bias:
                m.sel_bias = t.vec(p + "mlp.gate.e_score_correction_bias", (cfg.n_routed_experts,))
            mlp = {"moe": m}
        else:
            mlp = gated_mlp_weights(t, p, cfg)
        L = Layer(q=None, k=None, v=None, o=o, **mlp, rope=rope_for(i), mla=mla)
        L.attn_norm, L.mlp_norm = (norms or (lambda t, p, i: plain_norms(t, p, D, eps)))(t, p, i)
        if layer_hook is not None:
            layer_hook(i, L, a)
        layers.append(L)
    final = norm(t, "model.norm", D, "rms", eps)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=cfg.intermediate_size,
                num_attention_heads=max(L.mla.heads for L in layers), num_key_value_heads=1,
                head_dim=max(L.mla.row for L in layers), context_length=rope_for(0).context_length,
                attn_scale=attention_scale(cfg, yarn_mscale), values_are_keys=True)
    return decoder(arch, E, layers, final, head)
