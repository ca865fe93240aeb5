"""The fam36l group of issue 36 (Thinking Machines' Inkling), written from transformers 5.25's modeling_inkling.py,
each family a forward of its own in float64 (ModelSpec.forward): its blocks do not fit LayerSpec (convolutions
around every projection and sublayer, a relative bias made from each query's states, no RoPE).

inkling_text: x = RMSNorm(embed[ids]); per layer h = RMSNorm(x); q = q_proj h, k = conv(k_proj h) + k_proj h, v
likewise (short causal depthwise convs, zeros before the first position); q, k RMS-normed per head; scores q.k /
head_dim + r_h . proj[:, i - j] (r = r_proj h, 0 at distances >= the bank's extent: rel_extent in the full layers,
the window in the sliding ones), x tau(i) = 1 + alpha ln(max((i + 1) / floor, 1)) in the full layers when
log_scaling_n_floor is set; softmax over the window (sliding) or every earlier position; o = o_proj; x = x + o +
conv(o); h = RMSNorm(x); m = SwiGLU x global_scale (dense) or the experts: one router over the routed and shared
experts, the top k routed of sigmoid + e_score_correction_bias, every chosen and shared expert weighed by its sigmoid
over their sum, x route_scale x the router's global_scale; x = x + m + conv(m); logits = head(RMSNorm(x)) /
logits_mup_width_multiplier.
"""
import numpy as np

from trainer.reference import ops
from trainer.reference.families.common import activation, get
from trainer.reference.spec import LayerSpec, ModelSpec, MoeSpec, NormSpec


def _sigmoid(x):
    return 0.5 + 0.5 * np.tanh(0.5 * x)


def conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x [T, C] through a causal depthwise conv with taps w [C, K] (the last the current token), plus x."""
    T, K = len(x), w.shape[1]
    padded = np.concatenate([np.zeros((K - 1, x.shape[1])), x])
    return sum(padded[k:k + T] * w[:, k] for k in range(K)) + x


def rel_attention(q, k, v, r, proj, scale: float, window: int, tau=None, sinks=None) -> np.ndarray:
    """q [T, H, hd] over k, v [T, KV, hd] with each query's relative bias r [T, H, d_rel] . proj[:, i - j] (0 at
    distances >= proj's extent), the scores times tau [T] when given, per-token sinks [T, H] joining each softmax."""
    T, H, hd = q.shape
    kv_of = np.arange(H) // (H // k.shape[1])
    s = np.einsum("thd,shd->hts", q, k[:, kv_of]) * scale
    dist = np.arange(T)[:, None] - np.arange(T)[None, :]
    bank = np.einsum("thr,re->hte", r, proj)                                      # [H, T, extent]
    ext = proj.shape[1]
    s = s + np.where(dist < ext, np.take_along_axis(bank, np.clip(dist, 0, ext - 1)[None].repeat(H, 0), 2), 0.0)
    if tau is not None:
        s = s * tau[None, :, None]
    s[:, (dist < 0) | ((dist >= window) if window else False)] = -np.inf
    m = s.max(axis=-1, keepdims=True)
    if sinks is not None:
        m = np.maximum(m, sinks.T[:, :, None])
    p = np.exp(s - m)
    total = p.sum(axis=-1, keepdims=True) + (np.exp(sinks.T[:, :, None] - m) if sinks is not None else 0.0)
    return np.einsum("hts,shd->thd", p / total, v[:, kv_of]).reshape(T, H * hd)


def log_tau(T: int, floor, alpha: float):
    if not floor:
        return None
    return 1.0 + alpha * np.log(np.maximum((np.arange(T) + 1.0) / floor, 1.0))


def inkling_experts(fwd, m, h, S: int, scale: float):
    """One sigmoid router over the routed and S shared experts; the top_k routed of sigmoid + the selection bias
    (m.sel_bias, over the routed ones), each chosen and shared expert weighed by its sigmoid over their sum x scale;
    the routing record holds both (the engine runs the shared experts as always chosen)."""
    logits = fwd.mm(h, m.router)
    E = logits.shape[1] - S
    sig = _sigmoid(logits)
    top = np.argsort(-(sig[:, :E] + fwd.w(m.sel_bias)), axis=1, kind="stable")[:, :m.top_k - S]
    chosen = np.concatenate([top, np.broadcast_to(np.arange(E, E + S), (len(h), S))], axis=1)
    fwd.routing.append(np.sort(chosen, axis=1))
    wt = np.take_along_axis(sig, chosen, axis=1)
    wt = wt / wt.sum(axis=1, keepdims=True) * scale
    out = np.zeros_like(h)
    for e, (gate, up, down) in enumerate(m.experts):
        rows, slot = np.nonzero(chosen == e)
        if rows.size:
            y = fwd.mm(ops.glu(fwd.spec.act, fwd.mm(h[rows], gate), fwd.mm(h[rows], up)), down)
            out[rows] += y * wt[rows, slot][:, None]
    return out


def inkling_text(cfg, names):
    n, eps = cfg["num_hidden_layers"], get(cfg, "rms_norm_eps", 1e-6)
    types = cfg["layer_types"]
    mlp_types = cfg.get("mlp_layer_types") or ["sparse"] * n
    E, S, k = get(cfg, "n_routed_experts", 256), get(cfg, "n_shared_experts", 2), get(cfg, "num_experts_per_tok", 6)
    d_rel, floor, alpha = get(cfg, "d_rel", 16), cfg.get("log_scaling_n_floor"), get(cfg, "log_scaling_alpha", 0.1)
    window = get(cfg, "sliding_window_size", 512)

    def shape(i):
        if types[i] == "hybrid_sliding":
            return cfg["swa_num_attention_heads"], cfg["swa_num_key_value_heads"], cfg["swa_head_dim"]
        return cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]

    rms = lambda name: NormSpec("rms", eps, name + ".weight")        # noqa: E731
    spec = ModelSpec("inkling_text", *shape(0), "model.embed_tokens.weight", "lm_head.weight", rms("model.norm"),
                     act=activation(cfg, "hidden_act", "silu"), embed_norm=rms("model.embed_tokens.embed_norm"),
                     logit_scale=1.0 / get(cfg, "logits_mup_width_multiplier", 24.0))
    extra = []
    for i in range(n):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
        L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "o_proj.weight",
                      attn_norm=rms(p + "input_layernorm"), mlp_norm=rms(p + "post_attention_layernorm"),
                      q_norm=rms(a + "q_norm"), k_norm=rms(a + "k_norm"))
        if mlp_types[i] == "sparse":
            x = [f"{p}mlp.experts.{e}." for e in range(E)] + [f"{p}mlp.shared_experts.{e}." for e in range(S)]
            L.moe = MoeSpec(p + "mlp.gate.weight", [tuple(g + t + ".weight" for t in ("gate_proj", "up_proj",
                                                                                     "down_proj")) for g in x],
                            k + S, True, scoring="sigmoid", sel_bias=p + "mlp.gate.e_score_correction_bias")
            extra.append(p + "mlp.gate.global_scale")
        else:
            L.gate, L.up, L.down = (p + f"mlp.{t}.weight" for t in ("gate_proj", "up_proj", "down_proj"))
            extra.append(p + "mlp.global_scale")
        extra += [a + "r_proj.weight", a + "rel_logits_proj.proj", a + "k_sconv.conv1d.weight",
                  a + "v_sconv.conv1d.weight", p + "attn_sconv.conv1d.weight", p + "mlp_sconv.conv1d.weight"]
        spec.layers.append(L)
    spec.extra_names = tuple(extra)

    def forward(fwd, ids):
        T = len(ids)
        x = fwd.norm(fwd.w(spec.embed)[ids], spec.embed_norm)
        taps = lambda name: fwd.w(name).reshape(fwd.w(name).shape[0], -1)        # noqa: E731  [C, K]
        for i, L in enumerate(spec.layers):
            p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
            H, KV, hd = shape(i)
            sliding = types[i] == "hybrid_sliding"
            h = fwd.norm(x, L.attn_norm)
            q = fwd.norm(fwd.mm(h, L.q).reshape(T, H, hd), L.q_norm)
            k = fwd.norm(conv(fwd.mm(h, L.k), taps(a + "k_sconv.conv1d.weight")).reshape(T, KV, hd), L.k_norm)
            v = conv(fwd.mm(h, L.v), taps(a + "v_sconv.conv1d.weight")).reshape(T, KV, hd)
            r = fwd.mm(h, a + "r_proj.weight").reshape(T, H, d_rel)
            att = rel_attention(q, k, v, r, fwd.w(a + "rel_logits_proj.proj"), 1.0 / hd, window if sliding else 0,
                                None if sliding else log_tau(T, floor, alpha))
            x = x + conv(fwd.mm(att, L.o), taps(p + "attn_sconv.conv1d.weight"))
            h = fwd.norm(x, L.mlp_norm)
            if L.moe is not None:
                scale = get(cfg, "route_scale", 8.0) * float(fwd.w(p + "mlp.gate.global_scale").reshape(-1)[0])
                m = inkling_experts(fwd, L.moe, h, S, scale)
            else:
                m = fwd.mm(ops.glu(spec.act, fwd.mm(h, L.gate), fwd.mm(h, L.up)), L.down)
                m = m * float(fwd.w(p + "mlp.global_scale").reshape(-1)[0])
            x = x + conv(m, taps(p + "mlp_sconv.conv1d.weight"))
        return fwd.mm(fwd.norm(x, spec.final_norm), spec.head) * spec.logit_scale

    spec.forward = forward
    return spec


FAMILIES = {"inkling_text": inkling_text}


def _l2clip(x, thr: float, scale=None):
    """x (times scale) scaled down to an L2 norm of at most thr over its last axis (Inkling 2's clips)."""
    x = x * scale if scale is not None else x
    return x * np.minimum(thr / (np.sqrt((x * x).sum(-1, keepdims=True)) + 1e-6), 1.0)


def depth_attention(sources: list, queries: np.ndarray) -> list:
    """Inkling 2's attention residuals: each query's softmax over the unweighted-RMS-normed sources [T, D] of
    q . normed / sqrt(D), and its weighted sum of them; one [T, D] output a query."""
    x = np.stack(sources)                                                           # [n, T, D]
    x = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    s = np.einsum("qd,ntd->tqn", np.atleast_2d(queries), x) / np.sqrt(x.shape[-1])
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return list(np.einsum("tqn,ntd->qtd", w, x))


def dyn_conv(x, static, taps, heads: int) -> np.ndarray:
    """Inkling 2's dynamic convolution: x [T, C], each token's taps (lag order) static [K, C] plus taps [T, heads, K]
    per head; (x + the convolution) / sqrt(2 K + 1)."""
    T, C = x.shape
    K = static.shape[0]
    pad = np.concatenate([np.zeros((K - 1, C)), x])
    w = static.T[None] + np.repeat(taps, C // heads, axis=1)                       # [T, C, K] in lag order
    y = sum(pad[K - 1 - lag:K - 1 - lag + T] * w[:, :, lag] for lag in range(K))
    return (y + x) / np.sqrt(2 * K + 1)


def inkling2_text(cfg, names):
    """Inkling 2 in the released layout (model.llm.*): see petit/models/families/moe/inkling2_text.py's docstring,
    written again from modeling_inkling2.py."""
    n, eps, K = cfg["num_hidden_layers"], get(cfg, "rms_norm_eps", 1e-6), get(cfg, "conv_kernel_size", 4)
    types, block = cfg["layer_types"], get(cfg, "n_layers_per_attn_res_block", 6)
    E, k, d_rel = get(cfg, "n_routed_experts", 384), get(cfg, "num_experts_per_tok", 8), get(cfg, "d_rel", 16)
    floor, alpha = cfg.get("log_scaling_n_floor"), get(cfg, "log_scaling_alpha", 0.1)
    window, thr, rthr = get(cfg, "sliding_window_size", 1024), cfg["qk_l2_clip_threshold"], cfg["rel_l2_clip_threshold"]
    cg, cu = cfg["mlp_gate_softcap"], cfg["mlp_up_softcap"]
    M = "model.llm."

    def shape(i):
        if types[i] == "hybrid_sliding":
            return cfg["swa_num_attention_heads"], cfg["swa_num_key_value_heads"], cfg["swa_head_dim"]
        return cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]

    rms = lambda name: NormSpec("rms", eps, name + ".weight")        # noqa: E731
    spec = ModelSpec("inkling2_text", *shape(0), M + "embed.weight", M + "unembed.weight", rms(M + "norm"),
                     embed_norm=rms(M + "embed_norm"), logit_softcap=cfg["final_logit_softcapping"])
    extra = [M + "attn_res.output_query"]
    for i in range(n):
        p, a = f"{M}layers.{i}.", f"{M}layers.{i}.attn."
        full = types[i] == "hybrid"
        x = [f"{p}mlp.experts.{e}." for e in range(E)]
        L = LayerSpec(q=a + "wq_du.weight", k=a + "wk_dv.weight", v=a + "wv_dv.weight", o=a + "wo_ud.weight",
                      attn_gate=a + "gate_attn.weight", mlp_norm=rms(p + "mlp_norm"),
                      attn_norm=None if full else rms(p + "attn_norm"),
                      moe=MoeSpec(p + "mlp.gate.weight", [tuple(g + t + ".weight" for t in ("gate_proj", "up_proj",
                                                                                          "down_proj")) for g in x],
                                  k, True, scoring="sigmoid", sel_bias=p + "mlp.gate.bias"))
        extra += [a + n_ for n_ in ("wr_du.weight", "attn_sink_proj.weight", "q_l2_clip.scale", "rel_l2_clip.scale",
                                    "rel_logits_proj.proj")]
        extra += [p + "attn_sconv.weight", p + "mlp_sconv.weight", f"{M}attn_res.mlp_queries.{i}"]
        extra += [f"{M}attn_res.attn_queries.{i - 1}"] if i else []
        extra += [f"{a}{c}_sconv.{w}" for c in "kv" for w in (("static_w", "weight_proj") if full else ("weight",))]
        extra += [f"{p}{c}_input_norm.weight" for c in "qkv"] if full else []
        spec.layers.append(L)
    spec.extra_names = tuple(extra)

    def experts(fwd, m, h):
        logits = fwd.mm(h, m.router)
        sig = _sigmoid(logits)
        top = np.argsort(-(sig + fwd.w(m.sel_bias)), axis=1, kind="stable")[:, :k]
        fwd.routing.append(np.sort(top, axis=1))
        wt = np.take_along_axis(sig, top, axis=1)
        wt = wt / (wt.sum(axis=1, keepdims=True) + 1e-20) * get(cfg, "route_scale", 8.0)
        out = np.zeros_like(h)
        for e, (gate, up, down) in enumerate(m.experts):
            rows, slot = np.nonzero(top == e)
            if rows.size:
                g, u = fwd.mm(h[rows], gate), fwd.mm(h[rows], up)
                y = fwd.mm(cg * np.tanh(g / cg) * _sigmoid(g) * cu * np.tanh(u / cu), down)
                out[rows] += y * wt[rows, slot][:, None]
        return out

    def layer(fwd, i, L, x, blocks, gate=None):
        """Layer i on the residual x and the block states: (x, blocks) after it; gate(fwd, role, x): the loop's
        message gates (q, k, v, mlp), or None."""
        T = len(x)
        taps = lambda name: fwd.w(name).reshape(fwd.w(name).shape[0], -1)        # noqa: E731  [C, K]
        p, a = f"{M}layers.{i}.", f"{M}layers.{i}.attn."
        H, KV, hd = shape(i)
        full = types[i] == "hybrid"
        ins = depth_attention(blocks + [x], fwd.w(f"{M}attn_res.attn_queries.{i - 1}")) if i else [x] * 3
        ins = [gate(fwd, role, z) for role, z in zip("qkv", ins * (3 // len(ins)))] if gate else ins
        if full:
            hq, hk, hv = (fwd.norm(z, rms(f"{p}{c}_input_norm")) for z, c in zip(ins, "qkv"))
        else:
            hq, hk, hv = (fwd.norm(z, L.attn_norm) for z in (ins if gate else ins[:1] * 3))
        q = _l2clip(fwd.mm(hq, L.q).reshape(T, H, hd), thr, fwd.w(a + "q_l2_clip.scale"))
        kv = []
        for W, c, hx in ((L.k, "k", hk), (L.v, "v", hv)):
            z = fwd.mm(hx, W)
            if full:
                z = dyn_conv(z, fwd.w(f"{a}{c}_sconv.static_w"),
                             fwd.mm(hx, f"{a}{c}_sconv.weight_proj").reshape(T, KV, K), KV)
            else:
                z = conv(z, taps(f"{a}{c}_sconv.weight")) / np.sqrt(K + 1)
            kv.append(z.reshape(T, KV, hd))
        k_, v = _l2clip(kv[0], thr), kv[1] / np.sqrt((kv[1] ** 2).mean(-1, keepdims=True) + eps)
        r = _l2clip(fwd.mm(hq, a + "wr_du.weight").reshape(T, H, d_rel), rthr, fwd.w(a + "rel_l2_clip.scale"))
        att = rel_attention(q, k_, v, r, fwd.w(a + "rel_logits_proj.proj"), hd ** -0.5, 0 if full else window,
                            log_tau(T, floor, alpha) if full else None, fwd.mm(hq, a + "attn_sink_proj.weight"))
        o = fwd.mm(att * _sigmoid(fwd.mm(hq, L.attn_gate)), L.o)
        o = conv(o, taps(p + "attn_sconv.weight")) / np.sqrt(K + 1)
        if i % block == 0:                      # a block's first layer: its input kept, the sum restarted
            blocks, x = blocks + [x], o
        else:
            x = x + o
        h = depth_attention(blocks + [x], fwd.w(f"{M}attn_res.mlp_queries.{i}"))[0]
        h = fwd.norm(gate(fwd, "mlp", h) if gate else h, L.mlp_norm)
        return x + conv(experts(fwd, L.moe, h), taps(p + "mlp_sconv.weight")) / np.sqrt(K + 1), blocks

    def head(fwd, x, blocks):
        x = depth_attention(blocks + [x], fwd.w(M + "attn_res.output_query"))[0]
        y = fwd.mm(fwd.norm(x, spec.final_norm), spec.head)
        return spec.logit_softcap * np.tanh(y / spec.logit_softcap)

    def forward(fwd, ids):
        x, blocks = fwd.norm(fwd.w(spec.embed)[ids], spec.embed_norm), []
        for i, L in enumerate(spec.layers):
            x, blocks = layer(fwd, i, L, x, blocks)
        return head(fwd, x, blocks)

    spec.forward, spec.layer, spec.finish = forward, layer, head
    return spec


FAMILIES["inkling2_text"] = inkling2_text


def inkling2_loop_text(cfg, names):
    """Inkling 2 with looped layers (modeling_inkling2_loop.py): the layers loop_layer_index_start .. _end - 1 run
    loop_num_passes times, each pass from the loop's input (the residual and the block states before it); in the
    passes after the first, loop layer j's attention inputs (q, k, v) and MLP input are gated with messages: its four
    queries' (the checkpoint's middle_cycle_cross_pass_queries: q, mlp; _kv_queries: k, v) depth attention over the
    previous pass's block states after its first and its output, each mixed as (1 - tanh(forget g)) x + tanh(gain g)
    m, g = down [RMS(x), RMS(m)]. The spec's layers are the runs in order (a looped layer once a pass)."""
    s0, e0, P = cfg["loop_layer_index_start"], cfg["loop_layer_index_end"], cfg["loop_num_passes"]
    n, M, eps, block = cfg["num_hidden_layers"], "model.llm.", get(cfg, "rms_norm_eps", 1e-6), \
        get(cfg, "n_layers_per_attn_res_block", 6)
    spec = inkling2_text(cfg, names)
    spec.family = "inkling2_loop_text"
    runs = [(i, 0) for i in range(s0)] + [(i, p) for p in range(P) for i in range(s0, e0)] + \
        [(i, 0) for i in range(e0, n)]
    model_layers = spec.layers
    spec.layers = [model_layers[i] for i, _ in runs]
    c = {"q": "attn", "k": "k", "v": "v", "mlp": "mlp"}
    spec.extra_names += tuple(f"{M}layers.{i}.controllers.{c[r]}.{w}_weight" for i in range(s0, e0) for r in c
                              for w in ("down", "forget", "gain"))
    spec.extra_names += (M + "middle_cycle_cross_pass_queries", M + "middle_cycle_cross_pass_kv_queries")
    layer, head = spec.layer, spec.finish

    def unweighted(x):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)

    def forward(fwd, ids):
        x, blocks = fwd.norm(fwd.w(spec.embed)[ids], spec.embed_norm), []
        qm, kvq = fwd.w(M + "middle_cycle_cross_pass_queries"), fwd.w(M + "middle_cycle_cross_pass_kv_queries")
        first = sum(1 for j in range(s0) if j % block == 0)
        for i, p in runs:
            if (i, p) == (s0, 0):
                start = (x, blocks)
            elif i == s0:                           # the previous pass's states; the loop's input again
                prev, (x, blocks) = (blocks[first + 1:], x), start
            gate = None
            if p > 0:
                j = i - s0
                msg = depth_attention(prev[0] + [prev[1]], np.stack([qm[2 * j], kvq[2 * j], kvq[2 * j + 1],
                                                                      qm[2 * j + 1]]))
                msgs = dict(zip(("q", "k", "v", "mlp"), msg))

                def gate(fwd, role, h, i=i, msgs=msgs):
                    g = f"{M}layers.{i}.controllers.{c[role]}."
                    m = msgs[role]
                    z = fwd.mm(np.concatenate([unweighted(h), unweighted(m)], axis=1), g + "down_weight")
                    return (1 - np.tanh(fwd.mm(z, g + "forget_weight"))) * h + np.tanh(fwd.mm(z, g + "gain_weight")) * m
            x, blocks = layer(fwd, i, model_layers[i], x, blocks, gate)
        return head(fwd, x, blocks)

    spec.forward = forward
    return spec


FAMILIES["inkling2_loop_text"] = inkling2_loop_text
