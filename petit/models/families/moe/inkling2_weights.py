"""Inkling 2's weights under the released names (the family helpers: inkling2_block.py's layer and decoder): one
layer's (`read_layer`) and the whole decoder's (`build_decoder`, shared by `inkling2_text` and `inkling2_loop_text`)."""
import copy
from dataclasses import replace

from petit.models.blocks.decoder import Arch, Norm
from petit.models.families.moe.inkling_block import RelAttn, SConv, conv_taps
from petit.models.blocks.moe import Moe
from petit.models.families.moe.inkling2_block import Ink2Layer, Inkling2Decoder


M = "model.llm."


def read_layer(cfg, t, i: int, kv_row: int) -> Ink2Layer:
    """Layer i's weights under model.llm.layers.{i}. (the released names), its states in its slot's buffers."""
    D, K, E, I, eps = cfg.hidden_size, cfg.conv_kernel_size, cfg.n_routed_experts, cfg.moe_intermediate_size, \
        cfg.rms_norm_eps
    p, a = f"{M}layers.{i}.", f"{M}layers.{i}.attn."
    H, KV, hd = cfg.shape(i)
    full = cfg.layer_types[i] == "hybrid"
    rms = lambda name: Norm("rms", eps, t.vec(name + ".weight", (D,)))       # noqa: E731
    L = Ink2Layer(q=t.weight(a + "wq_du.weight", (H * hd, D)), k=t.weight(a + "wk_dv.weight", (KV * hd, D)),
                  v=t.weight(a + "wv_dv.weight", (KV * hd, D)), o=t.weight(a + "wo_ud.weight", (D, H * hd)))
    L.ink_heads, L.r = (H, KV, hd), t.weight(a + "wr_du.weight", (H * cfg.d_rel, D))
    L.sink, L.attn_gate = t.weight(a + "attn_sink_proj.weight", (H, D)), t.weight(a + "gate_attn.weight", (H * hd, D))
    extent = cfg.rel_extent if full else cfg.sliding_window_size
    L.rel = RelAttn((H, KV, hd), t.array(a + "rel_logits_proj.proj", (cfg.d_rel, extent)),
                    0 if full else cfg.sliding_window_size, hd ** -0.5, (cfg.log_scaling_n_floor or 0) if full else 0,
                    cfg.log_scaling_alpha)
    thr = cfg.qk_l2_clip_threshold
    L.q_norm = Norm("l2clip", thr, t.vec(a + "q_l2_clip.scale", (H, hd)))
    L.k_norm, L.v_norm = Norm("l2clip", thr), Norm("rms", eps)
    L.rel_clip = Norm("l2clip", cfg.rel_l2_clip_threshold, t.vec(a + "rel_l2_clip.scale", (H, cfg.d_rel)))
    for name, role, off in (("k_sconv", "k", 0), ("v_sconv", "v", (K - 1) * kv_row)):
        if full:
            static = t.array(f"{a}{name}.static_w", (K, KV * hd))
            setattr(L, role + "_dyn", t.weight(f"{a}{name}.weight_proj", (KV * K, D)))
            setattr(L, role + "_conv", SConv(static[::-1].T, False, off, (2 * K + 1) ** -0.5, KV))
        else:
            setattr(L, role + "_conv", SConv(conv_taps(t, f"{a}{name}.weight", KV * hd, K), False, off,
                                             (K + 1) ** -0.5))
    if full:
        L.in_norms = tuple(rms(f"{p}{x}_input_norm") for x in "qkv")
    else:
        L.attn_norm = rms(p + "attn_norm")
    L.mlp_norm = rms(p + "mlp_norm")
    L.attn_conv = SConv(conv_taps(t, p + "attn_sconv.weight", D, K), True, 0, (K + 1) ** -0.5)
    L.mlp_conv = SConv(conv_taps(t, p + "mlp_sconv.weight", D, K), True, (K - 1) * D, (K + 1) ** -0.5)
    if i > 0:
        L.attn_q = t.vec(f"{M}attn_res.attn_queries.{i - 1}", (3, D) if full else (D,))
    L.mlp_q = t.vec(f"{M}attn_res.mlp_queries.{i}", (D,))
    x = p + "mlp.experts."
    L.moe = Moe(t.float_weight(p + "mlp.gate.weight", (E, D)),
                [t.weight(f"{x}{e}.gate_proj.weight", (I, D)) for e in range(E)],
                [t.weight(f"{x}{e}.up_proj.weight", (I, D)) for e in range(E)],
                [t.weight(f"{x}{e}.down_proj.weight", (D, I)) for e in range(E)], cfg.num_experts_per_tok, True,
                scoring="sigmoid", sel_bias=t.vec(p + "mlp.gate.bias", (E,)), routed_scale=float(cfg.route_scale),
                norm_eps=1e-20, gate_softcap=cfg.mlp_gate_softcap, up_softcap=cfg.mlp_up_softcap)
    return L


def build_decoder(cfg, t, decoder=Inkling2Decoder, runs=None, **kw):
    """The decoder of cfg's layers, or of the layers in the order `runs` lists them ((layer, pass): a layer run again
    is a copy with routing records of its own, the weights shared)."""
    n, D, K, V = cfg.num_hidden_layers, cfg.hidden_size, cfg.conv_kernel_size, cfg.rows()
    shapes = [cfg.shape(i) for i in range(n)]
    kv_row = max(kv * hd for _, kv, hd in shapes)
    emb = t.weight(M + "embed.weight", (V, D))
    model_layers = [read_layer(cfg, t, i, kv_row) for i in range(n)]
    layers = model_layers if runs is None else [model_layers[i] if p == 0 else
                                                replace(model_layers[i], moe=copy.copy(model_layers[i].moe))
                                                for i, p in runs]
    names = {(i, attr): f"{M}layers.{i}.attn.{name}" for i in range(n) for attr, name in
             (("r", "wr_du.weight"), ("sink", "attn_sink_proj.weight"), ("attn_gate", "gate_attn.weight"))}
    names.update({(i, f"{x}_dyn"): f"{M}layers.{i}.attn.{x}_sconv.weight_proj" for i in range(n) for x in "kv"
                  if cfg.layer_types[i] == "hybrid"})
    final_q = t.vec(M + "attn_res.output_query", (D,))
    head = t.weight(M + "unembed.weight", (V, D))
    H, KVm, hdm = (max(s[j] for s in shapes) for j in range(3))
    arch = Arch(vocab_size=V, hidden_size=D, intermediate_size=cfg.moe_intermediate_size, num_attention_heads=H,
                num_key_value_heads=KVm, head_dim=hdm, context_length=cfg.max_position_embeddings,
                logit_softcap=cfg.final_logit_softcapping,
                state_shapes=((max(K - 1, 1), 2 * kv_row), (max(K - 1, 1), 2 * D)),
                **kw.pop("arch", {"state_layers": tuple(range(n, 2 * n)), "cache_slots": 2 * n}))
    dec = decoder(arch, emb, layers, Norm("rms", cfg.rms_norm_eps, t.vec(M + "norm.weight", (D,))), head, names=names,
                  embed_norm=Norm("rms", cfg.rms_norm_eps, t.vec(M + "embed_norm.weight", (D,))), cfg=cfg,
                  final_q=final_q, **kw)
    dec.model_layers = model_layers
    blocks = sum(cfg.boundary(i) for i in range(n))
    dec.extra = {"rel": H * cfg.d_rel, "sink": H, "xin": 3 * D, "nk": D, "nv": D, "dyn": KVm * K,
                 "blocks": blocks * D}
    dec.routing_reach = K - 1
    return dec
